"""acceptance: gates against the brief, bisect planning, and the report writer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl as acc
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_debug as nd
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_tests as nt
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import report as rep

FIXTURES = Path(__file__).parent / "fixtures" / "nccl"


def run_of(name: str, index: int = 0) -> dict:
    runs, _ = nt.parse((FIXTURES / name).read_text(), name)
    return runs[index]


def debug_of(name: str) -> dict:
    return nd.parse_debug((FIXTURES / name).read_text(), name)


def codes(violations):
    return sorted((v["code"], v["severity"]) for v in violations)


# --- evaluate_run ------------------------------------------------------------------

RUN_CASES = [
    # fixture, floor, kwargs, expected (code, severity) list
    ("allreduce_2node_h100_ib_healthy_mpi_warnings.txt", 360, {}, []),
    ("allreduce_2node_h100_ib_lowbw.txt", 360, {}, [("NCCL_BUSBW_BELOW_FLOOR", "error")]),
    ("allreduce_2node_h200_roce_single_size_v2.17.txt", 400, {"min_size": "8G"}, []),
    ("allreduce_2node_gh200_srun_label_container.txt", 150, {"min_size": "8G"}, [("NCCL_SIZE_TOO_SMALL", "warning")]),
    ("allreduce_1node_a100_no_validation.txt", 200, {"field": acc.FIELD_SINGLE}, [("NCCL_NOT_VALIDATED", "warning")]),
    ("allreduce_1node_h100_wrong_values.txt", 440, {"field": acc.FIELD_SINGLE}, [("NCCL_WRONG_RESULTS", "error")]),
    ("allreduce_2node_h100_ib.json", 360, {"expected_ranks": 16, "expected_hosts": ["gpu-d101", "gpu-d102"]}, []),
    (
        "allreduce_2node_h100_ib.json",
        360,
        {"expected_ranks": 24, "expected_hosts": ["gpu-d101", "gpu-d103"]},
        [("NCCL_HOSTS_MISMATCH", "error"), ("NCCL_RANKS_MISMATCH", "error")],
    ),
    ("allreduce_2node_h100_ib_lowbw.txt", None, {}, []),  # no floor given: no busbw gate
]


@pytest.mark.parametrize("name,floor,kwargs,expected", RUN_CASES)
def test_evaluate_run(name, floor, kwargs, expected):
    assert codes(acc.evaluate_run(run_of(name), floor, 0, **kwargs)) == sorted(expected)


def test_below_floor_message_says_expected_found_and_what_to_do():
    (v,) = acc.evaluate_run(run_of("allreduce_2node_h100_ib_lowbw.txt"), 360, host=None, label="all nodes")
    assert v["field"] == acc.FIELD_MULTI and v["host"] is None
    assert "expected >= 360 GB/s" in v["message"] and "found 46.29 GB/s" in v["message"]
    assert "8 GiB" in v["message"] and "bisect" in v["message"]


def test_single_node_violation_names_host_and_field():
    run = run_of("allreduce_multi_runs_single_node.txt", 2)
    (v,) = acc.evaluate_run(run, 440, host="gpu03", field=acc.FIELD_SINGLE)
    assert v["host"] == "gpu03" and v["field"] == acc.FIELD_SINGLE and "fabric manager" in v["message"]


def test_gate_uses_out_of_place_at_largest_size_not_peak():
    run = {
        "rows": [
            {
                "size": 1 << 30,
                "type": "float",
                "oop_busbw": 400.0,
                "ip_busbw": 401.0,
                "oop_wrong": 0,
                "ip_wrong": 0,
                "oop_time_us": 1.0,
                "ip_time_us": 1.0,
            },
            {
                "size": 2 << 30,
                "type": "float",
                "oop_busbw": 350.0,
                "ip_busbw": 420.0,
                "oop_wrong": 0,
                "ip_wrong": 0,
                "oop_time_us": 2.0,
                "ip_time_us": 2.0,
            },
        ],
        "peak_busbw": 420.0,
        "avg_busbw": 390.0,
        "out_of_bounds": 0,
        "ranks": 16,
        "hosts": ["a", "b"],
    }
    assert codes(acc.evaluate_run(run, 360)) == [("NCCL_BUSBW_BELOW_FLOOR", "error")]
    s = acc.summarize_run(run)
    assert s["busbw_largest"] == 350.0 and s["busbw_largest_ip"] == 420.0 and s["latency_us"] == 1.0


@pytest.mark.parametrize("runs", [[], [None], [{"rows": []}]])
def test_no_run(runs):
    out = acc.evaluate_runs(runs, 360) if runs else acc.evaluate_runs([], 360)
    assert codes(out) == [("NCCL_NO_RUN", "error")]


def test_out_of_bounds_alone_fails():
    run = run_of("allreduce_2node_h100_ib_healthy_mpi_warnings.txt")
    run = dict(run, out_of_bounds=1)
    assert codes(acc.evaluate_run(run, 360)) == [("NCCL_WRONG_RESULTS", "error")]


def test_max_wrong_tolerance():
    run = run_of("allreduce_1node_h100_wrong_values.txt")
    run = dict(run, out_of_bounds=0)
    assert acc.evaluate_run(run, 440, max_wrong=12) == []


@pytest.mark.parametrize(
    "value,expected",
    [
        ("8G", 8 << 30),
        ("128M", 128 << 20),
        ("1K", 1024),
        (4096, 4096),
        ("8GB", 8 << 30),
        ("1.5K", 1536),
        ("x", None),
        (None, None),
        (True, None),
    ],
)
def test_parse_size(value, expected):
    assert acc.parse_size(value) == expected


@pytest.mark.parametrize("n,text", [(8, "8 B"), (1024, "1 KiB"), (1536, "1.5 KiB"), (8 << 30, "8 GiB"), (None, "-")])
def test_human_size(n, text):
    assert acc.human_size(n) == text


def test_physical_limits():
    assert acc.physical_limit_multi_node(8, 400) == 400.0
    assert acc.physical_limit_multi_node(2, 200) == 50.0
    assert acc.physical_limit_multi_node(0, 400) is None
    assert acc.physical_limit_single_node(450) == 450.0
    assert acc.physical_limit_single_node(None) is None


# --- evaluate_transport --------------------------------------------------------------

TRANSPORT_CASES = [
    ("debug_2node_h100_ib_gdrdma.txt", "infiniband", True, []),
    ("debug_2node_socket_fallback.txt", "infiniband", True, [("NCCL_SOCKET_FALLBACK", "error")]),
    ("debug_2node_socket_fallback.txt", "roce", False, [("NCCL_SOCKET_FALLBACK", "error")]),
    ("debug_2node_socket_fallback.txt", "ethernet", False, []),
    ("debug_2node_plugin_ofi.txt", "infiniband", True, [("NCCL_WRONG_NETWORK", "error")]),
    ("debug_2node_roce_no_gdr.txt", "roce", True, [("NCCL_NO_GDR", "error")]),
    ("debug_2node_roce_no_gdr.txt", "roce", False, []),
    ("debug_2node_roce_no_gdr.txt", "infiniband", False, [("NCCL_WRONG_NETWORK", "error")]),
    ("debug_2node_h100_ib_gdrdma.txt", "roce", True, [("NCCL_WRONG_NETWORK", "error")]),
    ("debug_2node_h100_ib_gdrdma.txt", "none", True, []),
]


@pytest.mark.parametrize("name,fabric,gdr,expected", TRANSPORT_CASES)
def test_evaluate_transport(name, fabric, gdr, expected):
    assert codes(acc.evaluate_transport(debug_of(name), fabric, gdr, host="gpu01")) == sorted(expected)


def test_transport_without_evidence():
    assert codes(acc.evaluate_transport(None, "infiniband", True)) == [("NCCL_NO_DEBUG_EVIDENCE", "error")]
    assert codes(acc.evaluate_transport(None, "ethernet", False)) == [("NCCL_NO_DEBUG_EVIDENCE", "warning")]
    assert acc.evaluate_transport(None, "infiniband", True, multi_node=False) == []
    version_only = nd.parse_debug("h:1:1 [0] NCCL INFO NCCL version 2.26.2+cuda12.8\n")
    assert codes(acc.evaluate_transport(version_only, "infiniband", True)) == [
        ("NCCL_NO_DEBUG_EVIDENCE", "warning"),
        ("NCCL_NO_GDR", "warning"),
    ]


def test_socket_fallback_message():
    (v,) = acc.evaluate_transport(debug_of("debug_2node_socket_fallback.txt"), "infiniband", True, host="node-b03")
    assert v["host"] == "node-b03" and "eno1" in v["message"] and "ibstat" in v["message"]


# --- bisect ------------------------------------------------------------------------

NODES = [f"gpu{i:02d}" for i in range(1, 9)]


def fabric(slow=(), links=()):
    """A fake cluster: a group is slow when it holds a slow node or both ends of a slow link."""
    calls = []

    def run_group(group):
        calls.append(list(group))
        if any(n in slow for n in group):
            return 40.0
        if any(set(link) <= set(group) for link in links):
            return 55.0
        return 95.0

    run_group.calls = calls
    return run_group


BISECT_CASES = [
    # nodes, slow, links, strategy, slow_nodes, slow_links, inconclusive
    (NODES, {"gpu03"}, (), "pairs", ["gpu03"], [], False),
    (NODES, {"gpu03"}, (), "halves", ["gpu03"], [], False),
    (NODES, {"gpu03", "gpu06"}, (), "pairs", ["gpu03", "gpu06"], [], False),
    (NODES, {"gpu03", "gpu06"}, (), "halves", ["gpu03", "gpu06"], [], False),
    (NODES, {"gpu01", "gpu02"}, (), "pairs", ["gpu01", "gpu02"], [], False),  # both ends of a screening pair
    (NODES, (), [("gpu03", "gpu04")], "pairs", [], [["gpu03", "gpu04"]], False),
    (NODES, (), [("gpu03", "gpu04")], "halves", [], [["gpu03", "gpu04"]], False),
    (NODES[:7], {"gpu07"}, (), "pairs", ["gpu07"], [], False),  # the odd one out
    (NODES[:3], {"gpu01"}, (), "pairs", ["gpu01"], [], False),
    (NODES[:3], {"gpu02"}, (), "pairs", ["gpu02"], [], False),
    (NODES[:5], {"gpu05"}, (), "halves", ["gpu05"], [], False),
    (NODES, (), (), "pairs", [], [], True),  # every pair fine: slow only at scale
]


@pytest.mark.parametrize("nodes,slow,links,strategy,slow_nodes,slow_links,inconclusive", BISECT_CASES)
def test_bisect_names_the_culprit(nodes, slow, links, strategy, slow_nodes, slow_links, inconclusive):
    run_group = fabric(slow, links)
    plan = acc.bisect(nodes, run_group, 90, strategy=strategy)
    assert plan["done"]
    assert sorted(plan["slow_nodes"]) == slow_nodes
    assert plan["slow_links"] == slow_links
    assert plan["inconclusive"] is inconclusive
    for group in run_group.calls:
        assert len(group) >= 2 and len(set(group)) == len(group)
    # Groups proposed in one round never share a node: they may run at once.
    rounds = {}
    for t in plan["tests"]:
        rounds.setdefault(t["round"], []).extend(t["nodes"])
    assert all(len(ns) == len(set(ns)) for ns in rounds.values())
    assert len(plan["tests"]) <= 2 * len(nodes)


def test_bisect_every_node_slow_is_systemic():
    plan = acc.bisect(NODES, fabric(set(NODES)), 90)
    assert plan["slow_nodes"] == [] and plan["slow_groups"] and "not one node" in plan["reason"]


def test_bisect_two_nodes_cannot_tell_node_from_link():
    plan = acc.bisect(NODES[:2], fabric({"gpu02"}), 90)
    assert plan["slow_links"] == [["gpu01", "gpu02"]] and "cannot be told apart" in plan["reason"]
    plan = acc.bisect(NODES[:2], fabric({"gpu02"}), 90, known_good=["gpu09"])
    assert plan["slow_nodes"] == ["gpu02"]


def test_plan_bisect_is_stateless_and_stepwise():
    plan = acc.plan_bisect(NODES[:4], 90)
    assert plan == {**plan, "done": False, "next": [["gpu01", "gpu02"], ["gpu03", "gpu04"]]}
    results = [{"nodes": ["gpu01", "gpu02"], "busbw": 95.0}, {"nodes": ["gpu03", "gpu04"], "busbw": None}]
    plan = acc.plan_bisect(NODES[:4], 90, results)
    assert not plan["done"] and plan["next"] == [["gpu03", "gpu01"], ["gpu04", "gpu02"]]
    results += [{"nodes": ["gpu03", "gpu01"], "busbw": 30.0}, {"nodes": ["gpu04", "gpu02"], "busbw": 96.0}]
    plan = acc.plan_bisect(NODES[:4], 90, results)
    assert plan["done"] and plan["slow_nodes"] == ["gpu03"] and plan["good_nodes"] == ["gpu01", "gpu02", "gpu04"]


def test_plan_bisect_rejects_unknown_strategy():
    with pytest.raises(ValueError):
        acc.plan_bisect(NODES, 90, strategy="random")


def test_plan_bisect_single_node():
    assert acc.plan_bisect(["gpu01"], 90)["done"] is True


def test_bisect_violations():
    plan = acc.bisect(NODES, fabric({"gpu05"}, [("gpu01", "gpu02")]), 90)
    out = acc.bisect_violations(plan, 90)
    assert codes(out) == [("NCCL_SLOW_LINK", "error"), ("NCCL_SLOW_NODE", "error")]
    node = next(v for v in out if v["code"] == "NCCL_SLOW_NODE")
    assert node["host"] == "gpu05" and "40.00 GB/s" in node["message"] and "drained" in node["message"]
    inconclusive = acc.bisect_violations(acc.bisect(NODES, fabric(), 90), 90)
    assert codes(inconclusive) == [("NCCL_BISECT_INCONCLUSIVE", "warning")]


def test_verdict():
    assert acc.verdict([]) == "pass"
    assert acc.verdict(acc.evaluate_run(run_of("allreduce_1node_a100_no_validation.txt"), 100)) == "pass"
    assert acc.verdict(acc.evaluate_run(run_of("allreduce_2node_h100_ib_lowbw.txt"), 360)) == "fail"


# --- report ------------------------------------------------------------------------


def sample_report(**overrides):
    single = run_of("allreduce_multi_runs_single_node.txt", 0)
    multi = run_of("allreduce_2node_h100_ib_lowbw.txt")
    debug = debug_of("debug_2node_h100_ib_gdrdma.txt")
    plan = acc.bisect(["gpu01", "gpu02", "gpu03"], fabric({"gpu03"}), 90)
    violations = acc.evaluate_run(multi, 90, label="all nodes") + acc.bisect_violations(plan, 90)
    kwargs = {
        "runs": [
            {
                "label": "single-node gpu01",
                "scope": "single-node",
                "host": "gpu01",
                "run": single,
                "floor_gbps": 440,
                "limit_gbps": 450,
            },
            {"label": "all nodes", "scope": "multi-node", "run": multi, "floor_gbps": 90, "limit_gbps": 100},
            {"label": "pair gpu02+gpu03", "scope": "bisect", "run": None, "floor_gbps": 90},
        ],
        "debug": [debug],
        "nodes": [
            {"host": "gpu01", "versions": {"driver": "570.133.20", "nccl": "2.26.2"}},
            {"host": "gpu03", "versions": {"driver": "570.133.20", "nccl": "2.26.2"}},
        ],
        "violations": violations,
        "bisect": plan,
        "drained": ["gpu03"],
        "floors": {"single_node_busbw_gbps": 440, "multi_node_busbw_gbps": 90, "max_bytes": "8G", "max_wrong": 0},
        "limits": {"single_node_gbps": 450, "multi_node_gbps": 100},
        "versions": {"driver": "570.133.20", "nccl": "2.26.2"},
        "timestamp": "20260302T101500Z",
    }
    kwargs.update(overrides)
    return rep.build_report("lab", **kwargs)


def test_build_report_verdict_and_figures():
    report = sample_report()
    assert report["verdict"] == "fail" and report["schema"] == rep.SCHEMA
    by_label = {e["label"]: e for e in report["runs"]}
    assert by_label["single-node gpu01"]["result"] == "pass"
    assert by_label["all nodes"]["result"] == "fail"
    assert by_label["all nodes"]["busbw_largest"] == pytest.approx(46.29)
    assert by_label["all nodes"]["latency_us"] > 0 and by_label["all nodes"]["smallest_size"] == 8
    assert {n["host"]: n["status"] for n in report["nodes"]} == {"gpu01": "ok", "gpu03": "drained"}
    json.dumps(report)


def test_passing_report():
    single = run_of("allreduce_multi_runs_single_node.txt", 0)
    report = rep.build_report(
        "lab", runs=[{"label": "s", "scope": "single-node", "run": single, "floor_gbps": 440}], timestamp="t"
    )
    assert report["verdict"] == "pass"
    # bisect runs never decide the verdict; no runs at all is a failure
    report = rep.build_report(
        "lab",
        runs=[
            {"label": "s", "scope": "single-node", "run": single, "floor_gbps": 440},
            {"label": "b", "scope": "bisect", "run": None},
        ],
        timestamp="t",
    )
    assert report["verdict"] == "pass"
    assert rep.build_report("lab", runs=[], timestamp="t")["verdict"] == "fail"


def test_markdown_verdict_first_and_tables():
    md = rep.render_markdown(sample_report())
    lines = md.splitlines()
    assert lines[0] == "# NCCL acceptance: lab"
    assert lines[2].startswith("**Verdict: FAIL**")
    for heading in ("## Runs", "## Nodes", "## Transport evidence", "## Bisect", "## Drained nodes", "## Violations"):
        assert heading in md
    assert "| all nodes | multi-node | h100-r2n07, h100-r2n08 | 16 | 8 GiB | 46.29 | 90 | 100 |" in md
    assert "Slow node(s): gpu03" in md
    assert "(brief pins)" in md


def test_write_report_files(tmp_path):
    paths = rep.write_report(str(tmp_path / "reports"), sample_report())
    base = tmp_path / "reports" / "lab" / "20260302T101500Z"
    assert paths["dir"] == str(base)
    assert (base / "acceptance.json").is_file() and (base / "acceptance.md").is_file()
    assert sorted(Path(p).name for p in paths["plots"]) == ["busbw-all-nodes.png", "busbw-single-node-gpu01.png"]
    for p in paths["plots"]:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((base / "acceptance.json").read_text())
    assert data["verdict"] == "fail" and data["runs"][1]["plot"] == "busbw-all-nodes.png"
    assert "![busbw vs message size, all nodes](busbw-all-nodes.png)" in (base / "acceptance.md").read_text()


def test_write_report_single_size_plot(tmp_path):
    run = run_of("allreduce_2node_h200_roce_single_size_v2.17.txt")
    report = rep.build_report(
        "roce",
        runs=[{"label": "all nodes", "scope": "multi-node", "run": run, "floor_gbps": 400, "limit_gbps": 400}],
        timestamp="t",
    )
    paths = rep.write_report(str(tmp_path), report)
    assert len(paths["plots"]) == 1


def test_write_report_plots_a_run_with_rows_of_size_0(tmp_path):
    # all_gather / alltoall over 16 ranks from -b 8: the smallest sizes round down to 0 bytes a rank.
    run = run_of("allreduce_2node_h200_roce_single_size_v2.17.txt")
    row = dict(run["rows"][0])
    run = dict(run, rows=[dict(row, size=0), dict(row, size=8), row])
    report = rep.build_report(
        "lab",
        runs=[{"label": "all-nodes alltoall lab", "scope": "multi-node", "collective": "alltoall", "run": run}],
        timestamp="t",
    )
    paths = rep.write_report(str(tmp_path), report)
    assert len(paths["plots"]) == 1 and Path(paths["plots"][0]).read_bytes()[:4] == b"\x89PNG"


def test_write_report_without_matplotlib(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    paths = rep.write_report(str(tmp_path), sample_report())
    assert paths["plots"] == []
    assert "Plots skipped" in Path(paths["markdown"]).read_text()
