"""The acceptance role's plugins: the nccl_* filters, the acceptance_report module, the double's NIC loopback."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from unittest.mock import patch

import pytest
from ansible.errors import AnsibleFilterError
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_acceptance_spec import nccl_acceptance_spec
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_bisect_plan import nccl_bisect_plan
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_bisect_violations import nccl_bisect_violations
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_drain_list import nccl_drain_list
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_evaluate import nccl_evaluate
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_launch_argv import nccl_launch_argv
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_node_record import nccl_node_record
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_parse import nccl_parse
from ansible_collections.gpufleet.cluster.plugins.modules import acceptance_report
from hw_helpers import healthy_facts
from module_helpers import FailJson, run_main
from module_helpers import exit_json as _exit_json
from module_helpers import fail_json as _fail_json

HERE = os.path.dirname(os.path.abspath(__file__))
NCCL_FIXTURES = os.path.join(HERE, "fixtures", "nccl")
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", "..", "..", ".."))
DOUBLE = os.path.join(REPO, "molecule", "resources", "doubles", "bin", "all_reduce_perf")
PROFILES = os.path.join(REPO, "molecule", "resources", "profiles")

# The lab's brief (inventories/lab/brief.yml), as the role gets it.
BRIEF = {
    "cluster": {"name": "lab", "control_plane": "slurm", "os": "debian-12"},
    "software": {"driver": "570.133.20", "cuda": "12.8", "nccl": "2.26.2", "container_toolkit": "1.17.5"},
    "networks": {
        "management": {"cidr": "10.250.10.0/24"},
        "bmc": {"cidr": "10.250.11.0/24"},
        "fabric": {
            "type": "infiniband",
            "link_speed_gbps": 400,
            "rails": [{"cidr": f"10.250.{20 + i}.0/24"} for i in range(8)],
        },
    },
    "controllers": {"group": "slurm_controllers"},
    "pools": [
        {
            "name": "h100-lab",
            "group": "gpu_lab",
            "accelerator": "h100-sxm-80gb",
            "gpus_per_node": 8,
            "topology": "8gpu-sxm-nvlink",
            "nics_per_node": 8,
            "gpudirect_rdma": True,
        }
    ],
    "acceptance": {"single_node_busbw_gbps": 440, "multi_node_busbw_gbps": 360, "max_bytes": "8G", "max_wrong": 0},
}


def brief(**acceptance) -> dict:
    b = copy.deepcopy(BRIEF)
    b["acceptance"].update(acceptance)
    return b


def fixture(name: str) -> str:
    with open(os.path.join(NCCL_FIXTURES, name), encoding="utf-8") as fh:
        return fh.read()


def codes(violations, severity="error") -> set[str]:
    return {v["code"] for v in violations if severity is None or v["severity"] == severity}


# --- the double, which the lab runs ----------------------------------------------------


def profile(name: str, host: str) -> dict:
    with open(os.path.join(PROFILES, f"{name}.json"), encoding="utf-8") as fh:
        data = json.load(fh)
    data["hostname"] = host
    return data


@pytest.fixture
def lab(tmp_path):
    """gpu01 healthy, gpu02 the planted slow node (h100-slow-net), profiles and peers as the lab has them."""
    peers = tmp_path / "peers"
    peers.mkdir()
    profiles = {"gpu01": profile("h100-hgx-healthy", "gpu01"), "gpu02": profile("h100-slow-net", "gpu02")}
    for host, data in profiles.items():
        (peers / f"{host}.json").write_text(json.dumps(data))
        (tmp_path / f"{host}.json").write_text(json.dumps(data))
    return tmp_path


def run_double(lab, host: str, args: list[str], **env: str) -> str:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMIX_", "NCCL_"))}
    full.update(GPUFLEET_HW_PROFILE=str(lab / f"{host}.json"), GPUFLEET_DOUBLE_PEERS_DIR=str(lab / "peers"))
    full.update(NCCL_DEBUG="INFO", **env)
    out = subprocess.run([sys.executable, DOUBLE, *args], capture_output=True, text=True, env=full, timeout=60)
    return out.stdout + out.stderr


ARGS = ["-b", "8", "-e", "8G", "-f", "2"]


def test_double_healthy_pair_meets_the_lab_floor(lab):
    """The healthy profile's net_busbw_gbps (370) gives a 2-node all_reduce above the lab's 360 floor."""
    (lab / "peers" / "gpu02.json").write_text(json.dumps(profile("h100-hgx-healthy", "gpu02")))
    out = run_double(lab, "gpu01", [*ARGS, "-g", "1"], SLURM_JOB_NODELIST="gpu[01-02]", SLURM_NTASKS_PER_NODE="8")
    parsed = nccl_parse(out, "all-nodes")
    spec = nccl_acceptance_spec(brief(), "h100-lab")
    assert 360 <= parsed["busbw"] <= 380
    assert nccl_evaluate(parsed, spec, "multi-node", label="all-nodes", nodes=["gpu01", "gpu02"]) == []


def test_double_planted_slow_node_fails_the_pair(lab):
    out = run_double(lab, "gpu01", [*ARGS, "-g", "1"], SLURM_JOB_NODELIST="gpu01,gpu02", SLURM_NTASKS_PER_NODE="8")
    parsed = nccl_parse(out, "all-nodes")
    assert parsed["busbw"] < 95
    spec = nccl_acceptance_spec(brief(), "h100-lab")
    assert codes(nccl_evaluate(parsed, spec, "multi-node", nodes=["gpu01", "gpu02"])) == {"NCCL_BUSBW_BELOW_FLOOR"}


@pytest.mark.parametrize(("host", "passes"), [("gpu01", True), ("gpu02", False)])
def test_double_nic_loopback_gives_the_node_network_figure(lab, host, passes):
    """One node with P2P and SHM off: the network path between its own GPUs, channels via NET/IB/GDRDMA."""
    out = run_double(lab, host, [*ARGS, "-g", "8"], NCCL_P2P_DISABLE="1", NCCL_SHM_DISABLE="1")
    parsed = nccl_parse(out, f"loopback {host}")
    assert parsed["debug"]["transports"] == {"NET/IB/GDRDMA": 2} and parsed["debug"]["gdr"] is True
    spec = nccl_acceptance_spec(brief(), "h100-lab")
    found = nccl_evaluate(parsed, spec, "loopback", host=host, label=f"loopback {host}")
    assert (codes(found) == set()) is passes
    assert all("through this node's own NICs" in v["message"] for v in found if v["code"] == "NCCL_BUSBW_BELOW_FLOOR")
    # Without the switches the same node is a single-node run over NVLink, above the single-node floor.
    single = nccl_parse(run_double(lab, host, [*ARGS, "-g", "8"]), f"single-node {host}")
    assert single["busbw"] > 440 and nccl_evaluate(single, spec, "single-node", host=host) == []


# --- nccl_parse ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "network"),
    [
        ("allreduce_2node_h100_ib_lowbw.txt", None),
        ("debug_2node_h100_ib_gdrdma.txt", "IB"),
        ("debug_2node_socket_fallback.txt", "Socket"),
        ("allreduce_1node_h100_wrong_values.txt", None),
    ],
)
def test_parse_real_logs(name, network):
    parsed = nccl_parse(fixture(name), name)
    assert set(parsed) == {"runs", "no_table", "debug", "warnings", "busbw", "failures", "ended"}
    # Without an exit status, a run with a table completed unless it printed a failure line:
    # here only nccl-tests' own "Out of bounds values : N FAILED" of the run with wrong values.
    oob = any(r["out_of_bounds"] for r in parsed["runs"])
    assert [f["text"].split(":")[0].strip() for f in parsed["failures"]] == (["# Out of bounds values"] if oob else [])
    assert parsed["ended"]["status"] == ("failed" if oob else "completed" if parsed["runs"] else "no table")
    if parsed["runs"]:
        assert parsed["busbw"] == min(
            min(r["oop_busbw"] for r in run["rows"] if r["size"] == max(x["size"] for x in run["rows"]))
            for run in parsed["runs"]
        )
    if network:
        assert parsed["debug"]["network"] == network and parsed["debug"]["file"] == name


def test_parse_garbage_and_misuse():
    empty = nccl_parse("", "x")
    assert (empty["runs"], empty["debug"], empty["busbw"]) == ([], None, None) and empty["warnings"]
    assert nccl_parse(None)["runs"] == []
    assert nccl_parse("srun: error: Unable to allocate resources: Invalid partition name specified")["busbw"] is None
    with pytest.raises(AnsibleFilterError, match="must be the launcher's output"):
        nccl_parse(["not", "text"])


# --- nccl_acceptance_spec -------------------------------------------------------------


def test_spec_of_the_lab_pool():
    spec = nccl_acceptance_spec(brief(), "h100-lab")
    assert spec["single_node_busbw_gbps"] == 440 and spec["multi_node_busbw_gbps"] == 360
    assert spec["single_node_limit_gbps"] == 450.0 and spec["multi_node_limit_gbps"] == 400.0
    assert (spec["min_bytes"], spec["max_bytes"], spec["required_max_bytes"]) == ("8", "8G", "8G")
    assert spec["fabric"] == "infiniband" and spec["gpudirect_rdma"] is True and spec["gpus_per_node"] == 8
    assert spec["management_cidr"] == "10.250.10.0/24" and spec["group"] == "gpu_lab"
    assert nccl_acceptance_spec(brief(), BRIEF["pools"][0]) == spec


def test_spec_pool_override_catalogue_default_and_run_sizes():
    b = brief()
    b["pools"][0]["acceptance"] = {"multi_node_busbw_gbps": 300}
    del b["acceptance"]["single_node_busbw_gbps"]
    spec = nccl_acceptance_spec(b, "h100-lab", max_bytes="1G", min_bytes="1M")
    assert spec["multi_node_busbw_gbps"] == 300  # the pool's own floor wins
    assert spec["single_node_busbw_gbps"] == 440  # the catalogue's H100 SXM figure
    assert (spec["min_bytes"], spec["max_bytes"], spec["required_max_bytes"]) == ("1M", "1G", "8G")


def test_spec_misuse():
    with pytest.raises(AnsibleFilterError, match=r"no pool named 'nope'.*h100-lab"):
        nccl_acceptance_spec(brief(), "nope")
    with pytest.raises(AnsibleFilterError, match="brief must be a dict"):
        nccl_acceptance_spec("brief.yml", "h100-lab")
    with pytest.raises(AnsibleFilterError, match="pool must be"):
        nccl_acceptance_spec(brief(), 3)


# --- nccl_evaluate -------------------------------------------------------------------


def spec() -> dict:
    return nccl_acceptance_spec(brief(), "h100-lab")


@pytest.mark.parametrize(
    ("name", "scope", "expected"),
    [
        ("allreduce_2node_h100_ib_lowbw.txt", "multi-node", {"NCCL_BUSBW_BELOW_FLOOR", "NCCL_NO_DEBUG_EVIDENCE"}),
        ("allreduce_1node_h100_wrong_values.txt", "single-node", {"NCCL_WRONG_RESULTS"}),
        ("allreduce_failure_fabric_manager.txt", "single-node", {"NCCL_NO_RUN"}),
        ("debug_2node_socket_fallback.txt", "multi-node", {"NCCL_BUSBW_BELOW_FLOOR", "NCCL_SOCKET_FALLBACK"}),
    ],
)
def test_evaluate_real_logs(name, scope, expected):
    parsed = nccl_parse(fixture(name), name)
    found = nccl_evaluate(parsed, spec(), scope, host="gpu01" if scope == "single-node" else None, label=name)
    assert expected <= codes(found), found
    assert all(v["message"].startswith(name) for v in found if v["code"] != "NCCL_SLOW_NODE")


def test_evaluate_quotes_the_launcher_when_no_table():
    out = "srun: error: Unable to allocate resources: Invalid partition name specified\n"
    found = nccl_evaluate(nccl_parse(out), spec(), "multi-node", label="all-nodes", rc=1, output=out)
    (no_run,) = [v for v in found if v["code"] == "NCCL_NO_RUN"]
    assert "exit 1" in no_run["message"] and "Invalid partition name" in no_run["message"]
    timed = nccl_evaluate(nccl_parse(""), spec(), "single-node", host="gpu01", rc=124, output="")
    assert "timed out (exit 124)" in timed[0]["message"]


def test_evaluate_scopes_and_misuse():
    parsed = nccl_parse(fixture("allreduce_2node_h100_ib_lowbw.txt"))
    assert codes(nccl_evaluate(parsed, spec(), "bisect")) == {"NCCL_BUSBW_BELOW_FLOOR"}  # no transport gate
    with pytest.raises(AnsibleFilterError, match="scope must be one of"):
        nccl_evaluate(parsed, spec(), "everything")
    with pytest.raises(AnsibleFilterError, match="nccl_parse's result"):
        nccl_evaluate("text", spec(), "bisect")
    with pytest.raises(AnsibleFilterError, match="nodes must be a list"):
        nccl_evaluate(parsed, spec(), "multi-node", nodes="gpu01,gpu02")


# --- nccl_launch_argv ----------------------------------------------------------------

BIN = "/opt/nccl-tests/bin/all_reduce_perf"
PERF1 = ["-b", "8", "-e", "8G", "-f", "2", "-g", "1", "-n", "20", "-w", "5", "-c", "1"]


@pytest.mark.parametrize(
    ("nodes", "launcher", "kwargs", "expected"),
    [
        (["gpu01"], "local", {}, [BIN, "-b", "8", "-e", "8G", "-f", "2", "-g", "8", "-n", "20", "-w", "5", "-c", "1"]),
        (
            ["gpu01", "gpu02"],
            "srun",
            {"partition": "h100-lab"},
            [
                "srun",
                "--mpi=pmix",
                "--partition",
                "h100-lab",
                "--nodes",
                "2",
                "--nodelist",
                "gpu01,gpu02",
                "--ntasks-per-node",
                "8",
                "--gres=gpu:8",
                "--exclusive",
                "--job-name",
                "gpufleet-acceptance",
                BIN,
                *PERF1,
            ],
        ),
        (
            ["gpu01", "gpu02"],
            "srun",
            {
                "srun_mpi": "",
                "container_image": "nvcr.io#nvidia/pytorch:25.01-py3",
                "container_mounts": "/data:/data",
                "launcher_args": ["--cpu-bind=none"],
                "test_extra_args": ["-d", "bfloat16"],
            },
            [
                "srun",
                "--nodes",
                "2",
                "--nodelist",
                "gpu01,gpu02",
                "--ntasks-per-node",
                "8",
                "--gres=gpu:8",
                "--exclusive",
                "--job-name",
                "gpufleet-acceptance",
                "--container-image=nvcr.io#nvidia/pytorch:25.01-py3",
                "--container-mounts=/data:/data",
                "--cpu-bind=none",
                BIN,
                *PERF1,
                "-d",
                "bfloat16",
            ],
        ),
        (
            ["gpu01", "gpu02"],
            "mpirun",
            {"env_names": ["NCCL_DEBUG"], "launcher_args": ["--allow-run-as-root"]},
            [
                "mpirun",
                "-np",
                "16",
                "-H",
                "gpu01:8,gpu02:8",
                "--map-by",
                "ppr:8:node",
                "--mca",
                "oob_tcp_if_include",
                "10.250.10.0/24",
                "--mca",
                "btl_tcp_if_include",
                "10.250.10.0/24",
                "-x",
                "NCCL_DEBUG",
                "--allow-run-as-root",
                BIN,
                *PERF1,
            ],
        ),
    ],
)
def test_launch_argv(nodes, launcher, kwargs, expected):
    assert nccl_launch_argv(nodes, launcher, BIN, spec(), **kwargs) == expected


@pytest.mark.parametrize(
    ("nodes", "launcher", "kwargs", "match"),
    [
        (["a", "b"], "local", {}, "runs on one node"),
        (["a"], "pdsh", {}, "launcher must be one of"),
        ([], "srun", {}, "at least one node"),
        ("a,b", "srun", {}, "list of nodes"),
        (["a"], "srun", {"launcher_args": "--exclusive"}, "launcher_args must be a list"),
        (["a"], "srun", {"bogus": 1}, "unexpected keyword"),
    ],
)
def test_launch_argv_misuse(nodes, launcher, kwargs, match):
    with pytest.raises(AnsibleFilterError, match=match):
        nccl_launch_argv(nodes, launcher, BIN, spec(), **kwargs)


def test_launch_argv_needs_gpus():
    with pytest.raises(AnsibleFilterError, match="gpus_per_node must be >= 1"):
        nccl_launch_argv(["a"], "local", BIN, dict(spec(), gpus_per_node=0))


# --- bisect and drain ----------------------------------------------------------------


def test_two_nodes_need_a_known_good_node():
    """The lab: gpu02 slow. The pair alone cannot tell node from link; NIC loopback proves gpu01 good."""
    results = [{"nodes": ["gpu01", "gpu02"], "busbw": 89.9, "round": 0}]
    plan = nccl_bisect_plan(results, ["gpu01", "gpu02"], 360)
    assert plan["done"] and plan["slow_nodes"] == [] and plan["slow_links"] == [["gpu01", "gpu02"]]
    assert plan["good_nodes"] == [] and plan["tests"] == results
    results.append({"nodes": ["gpu01"], "busbw": 368.2, "round": "loopback"})  # one-node tests: shown, not planned
    plan = nccl_bisect_plan(results, ["gpu01", "gpu02"], 360, known_good=["gpu01"])
    assert plan["done"] and plan["slow_nodes"] == ["gpu02"] and plan["slow_links"] == []
    assert plan["known_good"] == ["gpu01"]
    violations = nccl_bisect_violations(dict(plan, floor=360), 360)
    assert [(v["code"], v["host"]) for v in violations] == [("NCCL_SLOW_NODE", "gpu02")]


def test_bisect_four_nodes_replayed():
    nodes = ["n1", "n2", "n3", "n4"]
    slow = {"n3"}

    def busbw(group):
        return 90.0 if slow & set(group) else 370.0

    results = [{"nodes": nodes, "busbw": 90.0, "round": 0}]
    for round_no in range(1, 6):
        plan = nccl_bisect_plan(results, nodes, 360.0)
        if plan["done"]:
            break
        results += [{"nodes": g, "busbw": busbw(g), "round": round_no} for g in plan["next"]]
    assert plan["done"] and plan["slow_nodes"] == ["n3"] and len(plan["tests"]) == len(results)


def test_bisect_misuse():
    with pytest.raises(AnsibleFilterError, match="list of"):
        nccl_bisect_plan("results", ["a", "b"], 360)
    with pytest.raises(AnsibleFilterError, match="floor must be a number"):
        nccl_bisect_plan([], ["a", "b"], "fast")
    with pytest.raises(AnsibleFilterError, match="strategy"):
        nccl_bisect_plan([], ["a", "b"], 360, strategy="thirds")
    with pytest.raises(AnsibleFilterError, match="bisect plan"):
        nccl_bisect_violations(["x"], 360)


def test_drain_list_reasons():
    plan = {
        "slow_nodes": ["gpu02"],
        "floor": 360,
        "tests": [{"nodes": ["gpu01", "gpu02"], "busbw": 89.93}, {"nodes": ["gpu02"], "busbw": 90.4}],
    }
    singles = [
        {"host": "gpu01", "busbw": 470.1, "floor_gbps": 440, "violations": []},
        {
            "host": "gpu02",
            "busbw": 431.5,
            "floor_gbps": 440,
            "violations": [{"severity": "error", "code": "NCCL_BUSBW_BELOW_FLOOR"}],
        },
        {
            "host": "gpu03",
            "busbw": 470.0,
            "floor_gbps": 440,
            "violations": [
                {"severity": "error", "code": "NCCL_WRONG_RESULTS"},
                {"severity": "warning", "code": "NCCL_SIZE_TOO_SMALL"},
            ],
        },
    ]
    out = nccl_drain_list([plan], singles, stamp="20250101T120000Z")
    assert out == [
        {
            "host": "gpu02",
            "reason": "gpufleet acceptance: slow node, 89.9 GB/s with gpu01 < 360 GB/s floor; "
            "single-node 431.5 GB/s < 440 GB/s floor (report 20250101T120000Z)",
        },
        {
            "host": "gpu03",
            "reason": "gpufleet acceptance: single-node run failed: NCCL_WRONG_RESULTS (report 20250101T120000Z)",
        },
    ]
    assert [d["host"] for d in nccl_drain_list([plan], singles, failed_single=False)] == ["gpu02"]
    assert nccl_drain_list([], []) == []
    with pytest.raises(AnsibleFilterError, match="list of bisect plans"):
        nccl_drain_list({"slow_nodes": []})


# --- nccl_node_record ----------------------------------------------------------------


def test_node_record_from_gpu_facts():
    record = nccl_node_record(healthy_facts(), "gpu01", hostname="gpu01.lab", pool="h100-lab", container_image="img")
    assert record["host"] == "gpu01" and record["hostname"] == "gpu01.lab" and record["pool"] == "h100-lab"
    assert record["gpu_model"] == "NVIDIA H100 80GB HBM3" and record["gpu_count"] == 8
    assert len(record["gpu_uuids"]) == 8 and all(u.startswith("GPU-") for u in record["gpu_uuids"])
    v = record["versions"]
    assert v["gpus"] == "8x NVIDIA H100 80GB HBM3" and v["driver"] and v["container_image"] == "img"
    assert v["ofed"]  # DOCA / MLNX OFED or inbox rdma-core, whichever the node has
    empty = nccl_node_record({}, "gpu09")
    assert empty["gpu_count"] == 0 and empty["versions"]["driver"] is None and empty["hostname"] == "gpu09"
    with pytest.raises(AnsibleFilterError, match="gpufleet_hw dict"):
        nccl_node_record("facts", "gpu01")


# --- the acceptance_report module -----------------------------------------------------


def run_report(args: dict, check_mode: bool = False) -> dict:
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    result = run_main(acceptance_report.main, args)
    json.dumps(result)
    return result


def lab_records(lab) -> dict:
    """What the role collects on the lab with gpu02 slow: two single-node runs, the all-node run, the bisect."""
    s = spec()
    records, violations = [], []
    for host in ("gpu01", "gpu02"):
        out = run_double(lab, host, ["-b", "8", "-e", "1G", "-f", "2", "-g", "8"])
        parsed = nccl_parse(out, f"single-node {host}")
        found = nccl_evaluate(parsed, s, "single-node", host=host, label=f"single-node {host}")
        records.append(
            {
                "label": f"single-node {host}",
                "scope": "single-node",
                "host": host,
                "floor_gbps": 440,
                "limit_gbps": 450,
                "run": parsed["runs"][0],
                "output": out,
                "debug": parsed["debug"],
            }
        )
        violations += found
    out = run_double(
        lab,
        "gpu01",
        ["-b", "8", "-e", "1G", "-f", "2", "-g", "1"],
        SLURM_JOB_NODELIST="gpu01,gpu02",
        SLURM_NTASKS_PER_NODE="8",
    )
    parsed = nccl_parse(out, "all-nodes h100-lab")
    violations += nccl_evaluate(parsed, s, "multi-node", label="all-nodes h100-lab", nodes=["gpu01", "gpu02"])
    records.append(
        {
            "label": "all-nodes h100-lab",
            "scope": "multi-node",
            "floor_gbps": 360,
            "limit_gbps": 400,
            "run": parsed["runs"][0],
            "output": out,
            "debug": parsed["debug"],
        }
    )
    results = [{"nodes": ["gpu01", "gpu02"], "busbw": parsed["busbw"], "round": 0}]
    plan = dict(nccl_bisect_plan(results, ["gpu01", "gpu02"], 360, known_good=["gpu01"]), pool="h100-lab", floor=360)
    violations += nccl_bisect_violations(plan, 360)
    return {
        "runs": records,
        "violations": violations,
        "bisect": [plan],
        "debug": [r["debug"] for r in records if r.get("debug")],
    }


def test_report_written_with_logs_and_plots(lab, tmp_path):
    rec = lab_records(lab)
    nodes = [nccl_node_record(healthy_facts(), h, pool="h100-lab") for h in ("gpu01", "gpu02")]
    args = {
        "dest": str(tmp_path / "reports"),
        "cluster": "lab",
        "timestamp": "20250101T120000Z",
        "nodes": nodes,
        "expected_nodes": ["gpu01", "gpu02"],
        "drained": ["gpu02"],
        "floors": BRIEF["acceptance"],
        "versions": BRIEF["software"],
        "limits": {"single_node_gbps": 450, "multi_node_gbps": 400},
        "context": {"launcher": "srun"},
        **rec,
    }
    result = run_report(args)
    out_dir = tmp_path / "reports" / "lab" / "20250101T120000Z"
    assert result["dir"] == str(out_dir) and result["changed"] is True
    assert result["verdict"] == "fail" and result["bad_nodes"] == ["gpu02"]
    assert result["failed_runs"] == ["all-nodes h100-lab"]
    assert {e["code"] for e in result["errors"]} == {"NCCL_BUSBW_BELOW_FLOOR", "NCCL_SLOW_NODE"}
    report = json.loads((out_dir / "acceptance.json").read_text())
    assert report["schema"] == "gpufleet.nccl-acceptance/1" and report["drained"] == ["gpu02"]
    assert report["bisect"]["slow_nodes"] == ["gpu02"] and report["context"] == {"launcher": "srun"}
    assert {n["host"]: n["status"] for n in report["nodes"]} == {"gpu01": "pass", "gpu02": "drained"}
    assert [e["log"] for e in report["runs"]] == [
        "logs/single-node-gpu01.log",
        "logs/single-node-gpu02.log",
        "logs/all-nodes-h100-lab.log",
    ]
    assert "NCCL INFO" in (out_dir / "logs" / "all-nodes-h100-lab.log").read_text()
    assert all("output" not in e for e in report["runs"])  # raw output only in logs/
    md = (out_dir / "acceptance.md").read_text()
    assert "**Verdict: FAIL**" in md and "Slow node(s): gpu02" in md and "Drained: gpu02" in md
    pytest.importorskip("matplotlib")
    assert sorted(os.path.basename(p) for p in result["plots"]) == [
        "busbw-all-nodes-h100-lab.png",
        "busbw-single-node-gpu01.png",
        "busbw-single-node-gpu02.png",
        "history-h100-lab.png",
    ]
    assert (out_dir / "busbw-all-nodes-h100-lab.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Each measured node's record joined the cluster's history; the failed run accepted no node.
    assert result["accepted"] == [] and result["history"] == str(tmp_path / "reports" / "lab" / "history.jsonl")
    kept = [json.loads(line) for line in (tmp_path / "reports" / "lab" / "history.jsonl").read_text().splitlines()]
    assert [(r["host"], r["kind"], r["verdict"]) for r in kept] == [
        ("gpu01", "acceptance", "not accepted"),
        ("gpu02", "acceptance", "drained"),
    ]
    assert all("valid_until" not in r and r["figures"]["single_node_busbw"] > 0 for r in kept)


def test_report_check_mode_writes_nothing(lab, tmp_path):
    rec = lab_records(lab)
    result = run_report({"dest": str(tmp_path / "r"), "cluster": "lab", **rec}, check_mode=True)
    assert result["verdict"] == "fail" and result["plots"] == [] and result["logs"]
    assert not (tmp_path / "r").exists()


def test_report_untested_nodes_and_healthy_pass(tmp_path):
    parsed = nccl_parse(fixture("allreduce_multi_runs_single_node.txt"))
    runs = [
        {
            "label": "single-node gpu01",
            "scope": "single-node",
            "host": "gpu01",
            "floor_gbps": 1.0,
            "run": parsed["runs"][0],
        }
    ]
    nodes = [{"host": "gpu01", "versions": {}}]
    result = run_report(
        {"dest": str(tmp_path), "cluster": "c", "runs": runs, "nodes": nodes, "plots": False},
    )
    assert result["verdict"] == "pass" and result["plots"] == []
    result = run_report(
        {
            "dest": str(tmp_path),
            "cluster": "c",
            "runs": runs,
            "nodes": nodes,
            "expected_nodes": ["gpu01", "gpu02"],
            "plots": False,
            "timestamp": "20250101T000000Z",
        },
    )
    assert result["verdict"] == "fail" and result["bad_nodes"] == ["gpu02"]
    with open(result["json"], encoding="utf-8") as fh:
        report = json.load(fh)
    assert {n["host"]: n["status"] for n in report["nodes"]} == {"gpu01": "pass", "gpu02": "not tested"}
    assert [v["code"] for v in report["violations"]] == ["NCCL_NODE_NOT_TESTED"]


def _one_good_run(host: str = "gpu01") -> tuple[list[dict], list[dict]]:
    parsed = nccl_parse(fixture("allreduce_multi_runs_single_node.txt"))
    runs = [{"label": f"single-node {host}", "scope": "single-node", "host": host, "floor_gbps": 1.0}]
    runs[0]["run"] = parsed["runs"][0]
    return runs, [{"host": host, "versions": {}}]


def test_report_partial_when_a_node_of_the_brief_was_not_in_the_run(tmp_path):
    runs, nodes = _one_good_run()
    base = {"dest": str(tmp_path), "cluster": "c", "runs": runs, "nodes": nodes, "plots": False}
    base["expected_nodes"] = ["gpu01"]
    # Every node of the brief tested: a plain pass.
    assert run_report({**base, "brief_nodes": ["gpu01"], "timestamp": "t1"})["verdict"] == "pass"
    # gpu02 (the CLI says why), gpu03 failed an earlier play, gpu04 outside the --limit.
    result = run_report(
        {
            **base,
            "timestamp": "t2",
            "brief_nodes": ["gpu01", "gpu02", "gpu03", "gpu04"],
            "run_nodes": ["gpu01", "gpu02", "gpu03", "ctl01"],
            "failed_earlier": ["gpu03"],
            "excluded": {"gpu02": "unreachable in the GPU stack stage (Install the driver)"},
        }
    )
    assert result["verdict"] == "partial" and result["bad_nodes"] == []
    assert result["not_accepted"] == [
        {"host": "gpu02", "reason": "unreachable in the GPU stack stage (Install the driver)"},
        {"host": "gpu03", "reason": "failed or unreachable in an earlier stage of this run"},
        {"host": "gpu04", "reason": "not in this run (outside its --limit)"},
    ]
    report = json.loads(Path(result["json"]).read_text(encoding="utf-8"))
    assert report["verdict"] == "partial" and report["not_accepted"] == result["not_accepted"]
    assert {n["host"]: n["status"] for n in report["nodes"]} == {
        "gpu01": "pass",
        "gpu02": "not accepted",
        "gpu03": "not accepted",
        "gpu04": "not accepted",
    }
    md = Path(result["markdown"]).read_text(encoding="utf-8")
    assert "**Verdict: PARTIAL**" in md
    assert "**Not accepted in this run**: gpu02: unreachable in the GPU stack stage" in md
    # A failure among the nodes measured still fails: partial never hides a fail.
    failing = [dict(runs[0], floor_gbps=1e9)]
    result = run_report({**base, "runs": failing, "timestamp": "t3", "brief_nodes": ["gpu01", "gpu02"]})
    assert result["verdict"] == "fail" and [n["host"] for n in result["not_accepted"]] == ["gpu02"]


def test_report_written_elsewhere_when_its_directory_cannot_be_written(tmp_path, capsys):
    runs, nodes = _one_good_run()
    runs[0]["output"] = "the launcher's output\n"
    full = tmp_path / "full"
    full.mkdir()
    base = {"dest": str(full), "cluster": "c", "runs": runs, "nodes": nodes, "plots": False, "timestamp": "t"}
    real_replace = os.replace

    def no_space(src, dst):
        if str(dst).startswith(str(full)):
            raise OSError(28, "No space left on device")
        return real_replace(src, dst)

    with patch("os.replace", no_space):
        result = run_report({**base, "fallback_dest": str(tmp_path / "fallback")})
    assert result["verdict"] == "pass" and "No space left on device" in result["fallback"]
    assert result["json"] == str(tmp_path / "fallback" / "c" / "t" / "acceptance.json")
    assert json.loads(Path(result["json"]).read_text(encoding="utf-8"))["verdict"] == "pass"
    assert Path(result["logs"][0]).read_text(encoding="utf-8") == "the launcher's output\n"
    assert f"written under {tmp_path / 'fallback' / 'c' / 't'} instead" in capsys.readouterr().err
    # No half-written file and no temporary file is left where the disk was full.
    assert [p.name for p in (full / "c" / "t").rglob("*") if p.is_file()] == []

    # Neither place writable: a clear failure that carries the whole report, no traceback.
    with (
        patch("os.replace", lambda src, dst: (_ for _ in ()).throw(OSError(28, "No space left on device"))),
        patch_module_args({**base, "fallback_dest": str(tmp_path / "fallback2")}),
        patch.object(basic.AnsibleModule, "exit_json", _exit_json),
        patch.object(basic.AnsibleModule, "fail_json", _fail_json),
        pytest.raises(FailJson) as exc,
    ):
        acceptance_report.main()
    failed = exc.value.args[0]
    assert "cannot write the acceptance report (verdict pass)" in failed["msg"] and "fallback2" in failed["msg"]
    assert failed["report"]["verdict"] == "pass" and failed["report"]["runs"][0]["host"] == "gpu01"


def test_report_merges_plans_of_several_pools():
    a = {
        "pool": "a",
        "done": True,
        "slow_nodes": ["a1"],
        "reason": "named slow node(s) a1",
        "tests": [{"nodes": ["a1", "a2"]}],
    }
    b = {"pool": "b", "done": True, "slow_nodes": [], "inconclusive": True, "reason": "every group met the floor"}
    merged = acceptance_report.merge_bisect([a, b])
    assert (
        merged["slow_nodes"] == ["a1"] and merged["reason"] == "a: named slow node(s) a1; b: every group met the floor"
    )
    assert merged["inconclusive"] is False and len(merged["tests"]) == 1
    assert acceptance_report.merge_bisect([]) is None and acceptance_report.merge_bisect([a]) is a


def test_report_rejects_bad_options(tmp_path):
    with (
        patch_module_args({"dest": str(tmp_path), "cluster": "c", "bisect": "slow"}),
        patch.object(basic.AnsibleModule, "exit_json", _exit_json),
        patch.object(basic.AnsibleModule, "fail_json", _fail_json),
        pytest.raises(FailJson, match="bisect must be"),
    ):
        acceptance_report.main()
    with (
        patch_module_args({"dest": str(tmp_path), "cluster": "c", "violations": [{"code": "X"}]}),
        patch.object(basic.AnsibleModule, "exit_json", _exit_json),
        patch.object(basic.AnsibleModule, "fail_json", _fail_json),
        pytest.raises(FailJson, match="lacks message, severity"),
    ):
        acceptance_report.main()


@pytest.mark.parametrize(("per_task", "tasks", "g"), [(1, "8", "1"), (8, "1", "8"), (2, "4", "2")])
def test_srun_ranks_per_node_follow_gpus_per_task(per_task, tasks, g):
    from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import launch_argv

    spec = {"pool": "p", "gpus_per_node": 8, "min_bytes": 8, "max_bytes": "8G"}
    argv = launch_argv("srun", "/bin/arp", ["a", "b"], spec, gpus_per_task=per_task)
    assert argv[argv.index("--ntasks-per-node") + 1] == tasks
    assert argv[argv.index("-g") + 1] == g
    assert "--gres=gpu:8" in argv


def test_gpus_per_task_must_divide_the_node():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import SpecError, launch_argv

    with pytest.raises(SpecError, match="must divide"):
        launch_argv("srun", "/bin/arp", ["a"], {"pool": "p", "gpus_per_node": 8}, gpus_per_task=3)
