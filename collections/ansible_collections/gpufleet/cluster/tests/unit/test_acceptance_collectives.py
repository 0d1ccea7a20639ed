"""Collectives beyond all_reduce (all_gather, alltoall): their floors in the brief, preflight against the
physical limits, the parser on their output, their judging and failure rules, the report and the drain,
and the nccl-tests double playing all_gather_perf / alltoall_perf (acceptance/collectives.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_collectives import (
    nccl_collective_records,
    nccl_collective_specs,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import collectives as coll
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_tests
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import (
    build_report,
    junit_cases,
    render_markdown,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import (
    acceptance_spec,
    drain_list,
    evaluate_log,
    parse_log,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import check
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import set_path, site
from hw_helpers import DOUBLES_BIN, PROFILES

HERE = os.path.dirname(__file__)
REPO = os.path.abspath(os.path.join(HERE, *[".."] * 6))
CORPUS = os.path.join(REPO, "tests", "fixtures", "nccl_corpus")


def brief(collectives=None, pool_collectives=None) -> dict:
    """The preflight fixture's Slurm site: 8x H100 SXM, 8 NDR400 NICs per node."""
    b, _groups, _hostvars = site("slurm")
    if collectives is not None:
        set_path(b, "acceptance.collectives", collectives)
    if pool_collectives is not None:
        set_path(b, "pools.0.acceptance.collectives", pool_collectives)
    return b


def spec_of(b: dict) -> dict:
    return acceptance_spec(b, b["pools"][0]["name"], max_bytes="8G")


def double(program: str, profile: dict, tmp_path, *args: str, peers: dict | None = None) -> subprocess.CompletedProcess:
    """The all_reduce_perf double run under another program name, as the nodes' links are."""
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    (tmp_path / "peers").mkdir(exist_ok=True)
    for host, other in (peers or {}).items():
        (tmp_path / "peers" / f"{host}.json").write_text(json.dumps(other))
    env = dict(os.environ, GPUFLEET_HW_PROFILE=str(path))
    env.pop("NCCL_DEBUG", None)
    return subprocess.run(
        [sys.executable, os.path.join(DOUBLES_BIN, program), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def table(stdout: str) -> list[list[str]]:
    """The result rows as nccl-tests prints them: size count type redop root, then time algbw busbw #wrong
    out-of-place and in-place."""
    return [line.split() for line in stdout.splitlines() if line.strip() and not line.startswith("#")]


def load_profile(name: str, host: str) -> dict:
    with open(os.path.join(PROFILES, f"{name}.json"), encoding="utf-8") as fh:
        return dict(json.load(fh), hostname=host)


# --- the brief ------------------------------------------------------------------------------------


def test_no_floor_no_collective_the_gate_is_off_by_default():
    b = brief()
    assert coll.collective_specs(b, spec_of(b)) == []
    _errors, clean = schema.validate(b)
    assert clean["acceptance"]["collectives"] == {}


def test_floors_from_the_brief_and_the_pools_override_floor_by_floor():
    b = brief(
        {
            "alltoall": {"single_node_busbw_gbps": 300, "multi_node_busbw_gbps": 40},
            "all_gather": {"single_node_busbw_gbps": 350},
        },
        {"alltoall": {"multi_node_busbw_gbps": 60}},
    )
    specs = {s["collective"]: s for s in coll.collective_specs(b, spec_of(b), {"alltoall": "/x/alltoall_perf"})}
    a2a, ag = specs["alltoall"], specs["all_gather"]
    assert (a2a["single_node_busbw_gbps"], a2a["multi_node_busbw_gbps"]) == (300, 60)
    assert a2a["single_node_busbw_gbps_field"] == "acceptance.collectives.alltoall.single_node_busbw_gbps"
    assert a2a["multi_node_busbw_gbps_field"] == "pools[0].acceptance.collectives.alltoall.multi_node_busbw_gbps"
    assert a2a["binary"] == "/x/alltoall_perf" and ag["binary"] == "all_gather_perf"
    assert (ag["run_single"], ag["run_multi"]) == (True, False)
    # The rest of the pool's spec (sizes, fabric, GPUs per node, limits) is all_reduce's.
    assert a2a["gpus_per_node"] == 8 and a2a["multi_node_limit_gbps"] == 400.0 and a2a["fabric"] == "infiniband"


def test_the_schema_rejects_a_collective_it_does_not_know_and_a_negative_floor():
    b = brief({"reduce_scatter": {"single_node_busbw_gbps": 300}, "alltoall": {"multi_node_busbw_gbps": -1}})
    errors, _clean = schema.validate(b)
    fields = {v["field"] for v in errors}
    assert any("acceptance.collectives.reduce_scatter" in f for f in fields), errors
    assert "acceptance.collectives.alltoall.multi_node_busbw_gbps" in fields, errors


def test_busbw_factors_are_nccl_tests_own():
    assert coll.busbw_factor("all_reduce", 16) == pytest.approx(2 * 15 / 16)
    assert coll.busbw_factor("all_gather", 16) == pytest.approx(15 / 16)
    assert coll.busbw_factor("alltoall", 8) == pytest.approx(7 / 8)
    assert coll.busbw_factor("alltoall", 1) == 0
    with pytest.raises(ValueError, match="unknown collective"):
        coll.busbw_factor("broadcast", 8)


# --- preflight --------------------------------------------------------------------------------------


def _preflight(collectives=None, pool_collectives=None):
    b, groups, hostvars = site("slurm")
    if collectives is not None:
        set_path(b, "acceptance.collectives", collectives)
    if pool_collectives is not None:
        set_path(b, "pools.0.acceptance.collectives", pool_collectives)
    return check(b, groups, hostvars)


def test_preflight_passes_floors_within_the_physical_limits():
    out = _preflight({"alltoall": {"single_node_busbw_gbps": 300, "multi_node_busbw_gbps": 40}})
    assert not [v for v in out if v["code"].startswith("ACCEPT_") and v["severity"] == "error"], out


def test_preflight_names_each_collective_floor_above_its_limit_at_once():
    out = _preflight(
        {"all_gather": {"single_node_busbw_gbps": 500}},  # H100 SXM NVLink: 450 GB/s per GPU
        {"alltoall": {"multi_node_busbw_gbps": 401}},  # 8 x 400 Gb/s / 8 = 400 GB/s
    )
    hits = {(v["code"], v["field"]) for v in out if v["code"].endswith("_ABOVE_LIMIT")}
    assert hits == {
        ("ACCEPT_SINGLE_NODE_ABOVE_LIMIT", "acceptance.collectives.all_gather.single_node_busbw_gbps"),
        ("ACCEPT_MULTI_NODE_ABOVE_LIMIT", "pools[0].acceptance.collectives.alltoall.multi_node_busbw_gbps"),
    }
    for v in out:
        if v["code"].endswith("_ABOVE_LIMIT"):
            assert "expected a floor <=" in v["message"] and "found" in v["message"]


# --- the parser on their output -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "collective", "rows", "busbw"),
    [
        ("03-rtx5090-alltoall-1gpu-na-wrong.txt", "alltoall", 1, 0.0),
        ("06-gke-h200-2node-allgather-kubectl-exec.txt", None, 22, 350.58),
    ],
)
def test_the_parser_reads_published_shapes_of_their_tables(name, collective, rows, busbw):
    with open(os.path.join(CORPUS, name), encoding="utf-8") as fh:
        runs, _warnings = nccl_tests.parse(fh.read(), name)
    (run,) = runs
    assert len(run["rows"]) == rows
    assert nccl_tests.busbw_at_largest(run) == pytest.approx(busbw)
    if collective:
        assert run["collective"] == collective


def test_the_double_prints_all_gather_as_nccl_tests_does(tmp_path):
    profile = dict(load_profile("h100-hgx-healthy", "n1"))
    proc = double("all_gather_perf", profile, tmp_path, "-b", "1G", "-e", "8G", "-f", "2", "-g", "8")
    assert proc.returncode == 0, proc.stderr
    assert "# Collective test starting: all_gather_perf" in proc.stdout
    assert "# Collective test concluded: all_gather_perf" in proc.stdout
    runs, _w = nccl_tests.parse(proc.stdout, "ag")
    (run,) = runs
    assert run["collective"] == "all_gather" and run["ranks"] == 8
    rows = table(proc.stdout)
    assert len(rows) == len(run["rows"]) == 4
    for size, count, dtype, redop, root, _t, algbw, busbw, *_rest in rows:
        # count is the elements per rank, size the whole gathered buffer; no reduction, no root;
        # busbw = algbw x (n-1)/n, n = 8 ranks.
        assert int(size) == int(count) * 4 * 8 and (dtype, redop, root) == ("float", "none", "-1")
        assert float(busbw) == pytest.approx(float(algbw) * 7 / 8, rel=0.01)
    # The healthy profile's all_gather: 0.95 of its all_reduce peak (446).
    assert 400 < nccl_tests.busbw_at_largest(run) < 430


def test_the_double_plays_a_slow_alltoall_fabric_that_all_reduce_does_not_see(tmp_path):
    slow = load_profile("h100-slow-alltoall", "n1")
    peers = {"n2": load_profile("h100-hgx-healthy", "n2")}
    args = ("-b", "1G", "-e", "8G", "-f", "2", "-g", "8", "--hosts", "n1,n2")
    a2a = double("alltoall_perf", slow, tmp_path, *args, peers=peers)
    ar = double("all_reduce_perf", slow, tmp_path, *args, peers=peers)
    (a2a_run,), _ = nccl_tests.parse(a2a.stdout, "a2a")
    (ar_run,), _ = nccl_tests.parse(ar.stdout, "ar")
    assert a2a_run["collective"] == "alltoall" and a2a_run["ranks"] == 16
    assert all(float(r[7]) == pytest.approx(float(r[6]) * 15 / 16, rel=0.01) for r in table(a2a.stdout))
    assert nccl_tests.busbw_at_largest(a2a_run) < 21
    assert nccl_tests.busbw_at_largest(ar_run) > 360


# --- judging ------------------------------------------------------------------------------------------


def _spec(kind: str, floor: float) -> dict:
    key = "single_node_busbw_gbps" if kind == "single" else "multi_node_busbw_gbps"
    b = brief({"alltoall": {key: floor}})
    (spec,) = coll.collective_specs(b, spec_of(b))
    return dict(spec, fabric="none")  # the doubles' runs here print no NCCL_DEBUG lines


def test_a_slow_alltoall_across_nodes_fails_naming_the_collective_and_the_nodes(tmp_path):
    slow = load_profile("h100-slow-alltoall", "n1")
    peers = {"n2": load_profile("h100-hgx-healthy", "n2")}
    proc = double(
        "alltoall_perf", slow, tmp_path, "-b", "1G", "-e", "8G", "-f", "2", "-g", "8", "--hosts", "n1,n2", peers=peers
    )
    spec = _spec("multi", 40)
    result = {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
    (record,) = coll.records([result], [spec], "multi-node", nodes=["n1", "n2"], pool="h100-train")
    assert record["collective"] == "alltoall" and record["label"] == "all-nodes alltoall h100-train"
    assert record["scope"] == "multi-node" and record["nodes"] == ["n1", "n2"] and record["floor_gbps"] == 40
    errors = [v for v in record["violations"] if v["severity"] == "error"]
    assert [v["code"] for v in errors] == ["NCCL_BUSBW_BELOW_FLOOR"]
    (v,) = errors
    assert v["collective"] == "alltoall"
    assert v["field"] == "acceptance.collectives.alltoall.multi_node_busbw_gbps"
    assert v["message"].startswith("all-nodes alltoall h100-train: busbw at 8 GiB")
    assert "expected >= 40 GB/s" in v["message"] and "n1, n2" in v["message"]


def test_a_healthy_alltoall_passes_its_own_floor(tmp_path):
    profile = load_profile("h100-hgx-healthy", "n1")
    proc = double("alltoall_perf", profile, tmp_path, "-b", "1G", "-e", "8G", "-f", "2", "-g", "8")
    result = {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
    (record,) = coll.records([result], [_spec("single", 300)], "single-node", host="n1")
    assert record["host"] == "n1" and record["label"] == "single-node alltoall n1"
    assert [v for v in record["violations"] if v["severity"] == "error"] == []
    assert record["busbw"] > 300


def test_the_floor_judged_is_the_collectives_own_not_all_reduces(tmp_path):
    # all_reduce's single-node floor of the site (catalogue-derived, ~ 400) would fail this run;
    # the alltoall floor of 300 passes it, a floor of 390 does not.
    profile = dict(load_profile("h100-hgx-healthy", "n1"), collectives={"alltoall": {"busbw_gbps": 350}})
    proc = double("alltoall_perf", profile, tmp_path, "-b", "1G", "-e", "8G", "-f", "2", "-g", "8")
    result = {"rc": 0, "stdout": proc.stdout, "stderr": ""}
    (ok,) = coll.records([result], [_spec("single", 300)], "single-node", host="n1")
    (bad,) = coll.records([result], [_spec("single", 390)], "single-node", host="n1")
    assert [v["code"] for v in ok["violations"] if v["severity"] == "error"] == []
    assert [(v["code"], v["host"]) for v in bad["violations"] if v["severity"] == "error"] == [
        ("NCCL_BUSBW_BELOW_FLOOR", "n1")
    ]
    assert bad["violations"][0]["field"] == "acceptance.collectives.alltoall.single_node_busbw_gbps"


@pytest.mark.parametrize(
    ("cut", "rc", "code"),
    [
        ("table", 0, "NCCL_RUN_INCOMPLETE"),  # killed mid-table: the rows printed are above the floor
        (None, 1, "NCCL_RUN_FAILED"),  # a whole table above the floor, and the launcher failed
        (None, 124, "NCCL_RUN_FAILED"),  # timed out
    ],
)
def test_a_run_that_did_not_end_cleanly_never_passes_whatever_its_busbw(tmp_path, cut, rc, code):
    profile = load_profile("h100-hgx-healthy", "n1")
    out = double("all_gather_perf", profile, tmp_path, "-b", "1G", "-e", "8G", "-f", "2", "-g", "8").stdout
    if cut == "table":
        out = out[: out.index("  4294967296")]
    b = brief({"all_gather": {"single_node_busbw_gbps": 100}})
    (spec,) = coll.collective_specs(b, spec_of(b))
    (record,) = coll.records([{"rc": rc, "stdout": out, "stderr": ""}], [spec], "single-node", host="n1")
    assert record["busbw"] > 100 and record["failed"]
    codes = [v["code"] for v in record["violations"] if v["severity"] == "error"]
    assert code in codes and all(v["collective"] == "all_gather" for v in record["violations"])


def test_no_table_is_no_pass(tmp_path):
    b = brief({"alltoall": {"single_node_busbw_gbps": 100}})
    (spec,) = coll.collective_specs(b, spec_of(b))
    result = {"rc": 127, "stdout": "", "stderr": "timeout: failed to run command '/opt/nccl-tests/bin/alltoall_perf'"}
    (record,) = coll.records([result], [spec], "single-node", host="n1")
    (v,) = [v for v in record["violations"] if v["severity"] == "error"]
    assert v["code"] == "NCCL_NO_RUN" and "alltoall_perf" in v["message"]
    assert v["field"] == "acceptance.collectives.alltoall.single_node_busbw_gbps"


def test_a_run_of_another_collective_is_no_pass(tmp_path):
    # acceptance_alltoall_perf pointing at all_reduce_perf: its busbw is not alltoall's.
    profile = load_profile("h100-hgx-healthy", "n1")
    proc = double("all_reduce_perf", profile, tmp_path, "-b", "1G", "-e", "8G", "-f", "2", "-g", "8")
    (record,) = coll.records([{"rc": 0, "stdout": proc.stdout}], [_spec("single", 100)], "single-node", host="n1")
    (v,) = [v for v in record["violations"] if v["severity"] == "error"]
    assert v["code"] == "NCCL_RUN_FAILED" and "found one of all_reduce_perf" in v["message"]


def test_skipped_loop_items_are_left_out_and_misuse_is_an_error():
    b = brief({"alltoall": {"single_node_busbw_gbps": 100}})
    specs = nccl_collective_specs(b, spec_of(b))
    assert nccl_collective_records([{"skipped": True}], specs, "single-node", host="n1") == []
    with pytest.raises(AnsibleFilterError, match="scope"):
        nccl_collective_records([{}], specs, "bisect")
    with pytest.raises(AnsibleFilterError, match="as many results"):
        nccl_collective_records([], specs, "single-node")
    with pytest.raises(AnsibleFilterError, match="brief"):
        nccl_collective_specs("brief.yml", spec_of(b))


def test_all_reduce_judging_is_unchanged_by_a_collective_spec(tmp_path):
    # The same evaluate_log judges both; all_reduce's own record keeps all_reduce's fields.
    profile = load_profile("h100-hgx-healthy", "n1")
    out = double("all_reduce_perf", profile, tmp_path, "-b", "1G", "-e", "8G", "-f", "2", "-g", "8").stdout
    b = brief({"alltoall": {"single_node_busbw_gbps": 100}})
    spec = dict(spec_of(b), single_node_busbw_gbps=460)
    (v,) = [v for v in evaluate_log(parse_log(out, "ar"), spec, "single-node", host="n1") if v["severity"] == "error"]
    assert v["field"] == "acceptance.single_node_busbw_gbps" and "collective" not in v


# --- report and drain ---------------------------------------------------------------------------------


def _records(tmp_path):
    healthy = load_profile("h100-hgx-healthy", "n1")
    args = ("-b", "1G", "-e", "8G", "-f", "2", "-g", "8")
    ar = double("all_reduce_perf", healthy, tmp_path, *args).stdout
    a2a = double("alltoall_perf", healthy, tmp_path, *args).stdout
    b = brief({"alltoall": {"single_node_busbw_gbps": 390}})
    spec = spec_of(b)
    single = {
        "label": "single-node n1",
        "scope": "single-node",
        "host": "n1",
        "floor_gbps": 400,
        "run": parse_log(ar, "n1")["runs"][0],
        "rc": 0,
        "violations": [],
    }
    colls = coll.records([{"rc": 0, "stdout": a2a}], coll.collective_specs(b, spec), "single-node", host="n1")
    return single, colls


def test_the_report_has_a_section_per_collective_and_its_failure_fails_the_verdict(tmp_path):
    single, colls = _records(tmp_path)
    nodes = [{"host": "n1", "pool": "h100-train", "versions": {}}]
    violations = [v for r in colls for v in r["violations"]]
    report = build_report("lab", runs=[single, *colls], nodes=nodes, violations=violations, brief=brief())
    assert report["verdict"] == "fail"
    entry = next(e for e in report["runs"] if e["collective"] == "alltoall")
    assert entry["result"] == "fail" and entry["scope"] == "single-node" and entry["floor_gbps"] == 390
    assert next(e for e in report["runs"] if e["collective"] == "all_reduce")["result"] == "pass"
    md = render_markdown(report)
    section = md.split("## Collectives beyond all_reduce")[1].split("\n## ")[0]
    assert "### alltoall" in section and "| single-node alltoall n1 |" in section and "FAIL" in section
    names = {c["name"] for c in junit_cases(report)}
    assert {"single-node all_reduce", "single-node alltoall"} <= names
    # The pool's outlier rule and the quote compare all_reduce figures only: alltoall's lower busbw
    # on the same node is no outlier of all_reduce.
    assert not [v for v in report["violations"] if v["code"] == "NCCL_OUTLIER"]


def test_the_report_module_keeps_which_collective_each_run_is(tmp_path):
    # The module hands build_report the runs as plan_logs leaves them (output moved to a log file):
    # an alltoall run must stay alltoall there, or the report files it under all_reduce.
    from ansible_collections.gpufleet.cluster.plugins.modules.acceptance_report import plan_logs

    single, colls = _records(tmp_path)
    runs, logs = plan_logs([{**single, "output": "all_reduce_perf output"}, *colls])
    assert [r.get("collective") for r in runs] == [None, "alltoall"] and len(logs) == 2
    report = build_report("lab", runs=runs, nodes=[{"host": "n1", "versions": {}}], brief=brief())
    assert [e["collective"] for e in report["runs"]] == ["all_reduce", "alltoall"]
    assert "### alltoall" in render_markdown(report)


def test_without_collective_floors_the_report_has_no_such_section(tmp_path):
    single, _colls = _records(tmp_path)
    report = build_report("lab", runs=[single], nodes=[{"host": "n1", "versions": {}}])
    assert "Collectives beyond all_reduce" not in render_markdown(report)


def test_a_node_failing_its_single_node_alltoall_is_drained_with_the_collective_named(tmp_path):
    _single, colls = _records(tmp_path)
    (drain,) = drain_list([], colls, stamp="20260101T000000Z")
    assert drain["host"] == "n1" and "single-node alltoall" in drain["reason"] and "< 390 GB/s floor" in drain["reason"]


def test_a_largest_size_short_by_the_per_rank_alignment_only_is_the_briefs_size(tmp_path):
    # 3 nodes x 8 GPUs: all_gather -e 8G prints 8589934464 (4 elements per rank of 24); real nccl-tests too.
    profiles = {h: load_profile("h100-hgx-healthy", h) for h in ("n1", "n2", "n3")}
    args = ("-b", "1G", "-e", "8G", "-f", "2", "-g", "8", "--hosts", "n1,n2,n3")
    proc = double("all_gather_perf", profiles["n1"], tmp_path, *args, peers=profiles)
    assert table(proc.stdout)[-1][0] == "8589934464"
    b = brief({"all_gather": {"multi_node_busbw_gbps": 100}})
    (spec,) = coll.collective_specs(b, spec_of(b))
    spec = dict(spec, fabric="none")
    (record,) = coll.records([{"rc": 0, "stdout": proc.stdout}], [spec], "multi-node", nodes=["n1", "n2", "n3"])
    assert record["violations"] == []
    # A run asked for less stays short of the brief's size: warned as for all_reduce.
    proc = double("all_gather_perf", profiles["n1"], tmp_path, "-b", "1G", "-e", "4G", "-f", "2", "-g", "8")
    (record,) = coll.records([{"rc": 0, "stdout": proc.stdout}], [spec], "single-node", host="n1")
    assert [v["code"] for v in record["violations"]] == ["NCCL_SIZE_TOO_SMALL"]
