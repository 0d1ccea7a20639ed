"""The report says how each run ended, and writes JUnit XML (parsed back here) beside the report."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import report as rep
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import run as arun
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.junit import case, junit_xml
from ansible_collections.gpufleet.cluster.plugins.modules import acceptance_report
from module_helpers import run_main

FIXTURES = Path(__file__).parent / "fixtures" / "nccl"
HEALTHY = (FIXTURES / "allreduce_2node_h100_ib_healthy_mpi_warnings.txt").read_text()
TEARDOWN = (FIXTURES / "allreduce_2node_h100_teardown_nccl_failure.txt").read_text()
SPEC = {
    "pool": "h100",
    "gpus_per_node": 8,
    "single_node_busbw_gbps": 300.0,
    "multi_node_busbw_gbps": 300.0,
    "required_max_bytes": "8G",
    "max_wrong": 0,
    "fabric": "none",
    "gpudirect_rdma": False,
}


def record(text: str, label: str, scope: str, rc, host=None, nodes=None) -> dict:
    """A run record as the role keeps it (tasks/node.yml, run_group.yml).

    The fixtures' runs have 16 ranks on hosts of their own: the gate here is told 16 GPUs per
    single-node run and no node list, so that only how each run ended (and its busbw) is judged.
    """
    parsed = arun.parse_log(text, label, rc)
    spec = dict(SPEC, gpus_per_node=16 if scope == "single-node" else 8)
    return {
        "label": label,
        "scope": scope,
        "host": host,
        "nodes": nodes or ([host] if host else []),
        "floor_gbps": 300.0,
        "run": (parsed["runs"] or [None])[0],
        "rc": rc,
        "ended": parsed["ended"],
        "output": text,
        "violations": arun.evaluate_log(parsed, spec, scope, host=host, label=label, rc=rc, output=text),
    }


def lab_report(teardown_rc=0) -> dict:
    """gpu01 healthy alone; gpu02's single-node run prints its table at full speed, then fails at teardown."""
    records = [
        record(HEALTHY, "single-node gpu01", "single-node", 0, host="gpu01"),
        record(TEARDOWN, "single-node gpu02", "single-node", teardown_rc, host="gpu02"),
        record(HEALTHY, "all-nodes h100", "multi-node", 0, nodes=["gpu01", "gpu02"]),
    ]
    violations = [v for r in records for v in r["violations"]]
    runs = [{k: v for k, v in r.items() if k != "output"} for r in records]
    return rep.build_report(
        "lab",
        runs=runs,
        nodes=[{"host": "gpu01", "versions": {}}, {"host": "gpu02", "versions": {}}],
        violations=violations,
        timestamp="20260302T101500Z",
    )


def test_report_says_how_each_run_ended():
    report = lab_report(teardown_rc=1)
    by_label = {e["label"]: e for e in report["runs"]}
    bad = by_label["single-node gpu02"]
    assert bad["busbw_largest"] > 300.0  # its table alone would pass
    assert bad["result"] == "fail"
    assert bad["ended"]["status"] == "failed" and bad["ended"]["rc"] == 1
    assert bad["ended"]["failure"].startswith("gpu-b002: Test NCCL failure")
    assert by_label["single-node gpu01"]["ended"]["status"] == "completed"
    assert report["verdict"] == "fail"
    json.dumps(report)
    md = rep.render_markdown(report)
    assert "| ended | result |" in md
    assert "| failed (exit 1) | FAIL |" in md
    assert "| completed (exit 0) | PASS |" in md
    assert "- single-node gpu02: `gpu-b002: Test NCCL failure common.cu:1204" in md


def test_record_without_ended_is_judged_from_its_exit_status():
    run = arun.parse_log(HEALTHY, "s")["runs"][0]
    ok = rep.build_report("lab", runs=[{"label": "s", "scope": "single-node", "run": run, "rc": 0}], timestamp="t")
    killed = rep.build_report(
        "lab", runs=[{"label": "s", "scope": "single-node", "run": run, "rc": 137}], timestamp="t"
    )
    assert (ok["verdict"], ok["runs"][0]["ended"]["status"]) == ("pass", "completed")
    assert (killed["verdict"], killed["runs"][0]["ended"]["status"]) == ("fail", "killed")
    assert "| killed (signal 9) | FAIL |" in rep.render_markdown(killed)


def _cases(xml_text: str) -> dict:
    root = ET.fromstring(xml_text)
    assert root.tag == "testsuites"
    out = {}
    for suite in root.findall("testsuite"):
        for tc in suite.findall("testcase"):
            failure = tc.find("failure")
            out[(suite.get("name"), tc.get("name"))] = (
                None if failure is None else failure.text,
                tc.find("skipped") is not None,
            )
        assert int(suite.get("tests")) == len(suite.findall("testcase"))
        assert int(suite.get("failures")) == len(suite.findall("testcase/failure"))
    return out


def test_junit_one_case_per_node_per_check_with_the_violation_messages():
    report = lab_report()
    cases = _cases(rep.render_junit(report))
    assert cases[("gpu01", "single-node all_reduce")] == (None, False)
    failure, _ = cases[("gpu02", "single-node all_reduce")]
    assert "NCCL_RUN_FAILED" in failure and "Test NCCL failure common.cu:1204" in failure
    # The all-node run passed: a case on each of its nodes.
    assert cases[("gpu01", "multi-node all_reduce: all-nodes h100")] == (None, False)
    assert cases[("gpu02", "multi-node all_reduce: all-nodes h100")] == (None, False)
    root = ET.fromstring(rep.render_junit(report))
    assert (root.get("tests"), root.get("failures")) == ("4", "1")


def test_junit_failed_multi_node_run_fails_on_each_node_and_cluster_errors_have_a_case():
    multi = record(TEARDOWN, "all-nodes h100", "multi-node", 2, nodes=["gpu01", "gpu02"])
    single = record(HEALTHY, "single-node gpu01", "single-node", 0, host="gpu01")
    other = {"severity": "error", "code": "DRAIN_BREAKER_TRIPPED", "host": None, "field": "x", "message": "tripped"}
    report = rep.build_report(
        "lab",
        runs=[single, multi],
        nodes=[{"host": "gpu01"}, {"host": "gpu02"}],
        violations=[*multi["violations"], other],
        timestamp="t",
    )
    cases = _cases(rep.render_junit(report))
    for host in ("gpu01", "gpu02"):
        failure, _ = cases[(host, "multi-node all_reduce: all-nodes h100")]
        assert "NCCL_RUN_FAILED" in failure and "exit 2" in failure
    # gpu02 has no single-node run in this report: skipped, not passed.
    assert cases[("gpu02", "single-node all_reduce")] == (None, True)
    assert cases[("cluster", "DRAIN_BREAKER_TRIPPED")][0] == "DRAIN_BREAKER_TRIPPED: tripped"
    # The all-node run's violation is on its nodes' cases, not repeated as a cluster case.
    assert not [k for k in cases if k[0] == "cluster" and k[1] == "NCCL_RUN_FAILED"]


def test_junit_xml_escapes_and_strips_what_xml_cannot_carry():
    text = junit_xml("s", [case("n<1>", "a & b", ["bad \x00 line <x>\nsecond"], output="o\x1b[0m")])
    root = ET.fromstring(text)
    tc = root.find("testsuite/testcase")
    assert tc.get("classname") == "gpufleet.n<1>" and tc.get("name") == "a & b"
    assert tc.find("failure").get("message") == "bad ? line <x>"
    assert tc.find("failure").text == "bad ? line <x>\nsecond"


@pytest.mark.parametrize("check_mode", [False, True])
def test_acceptance_report_module_writes_junit_beside_the_report(tmp_path, check_mode):
    records = [
        record(HEALTHY, "single-node gpu01", "single-node", 0, host="gpu01"),
        record(TEARDOWN, "single-node gpu02", "single-node", 0, host="gpu02"),
    ]
    args = {
        "dest": str(tmp_path),
        "cluster": "lab",
        "timestamp": "20260302T101500Z",
        "runs": records,
        "nodes": [{"host": "gpu01"}, {"host": "gpu02"}],
        "expected_nodes": ["gpu01", "gpu02"],
        "violations": [v for r in records for v in r["violations"]],
        "plots": False,
    }
    if check_mode:
        args["_ansible_check_mode"] = True
    result = run_main(acceptance_report.main, args)
    assert result["junit"] == str(tmp_path / "lab" / "20260302T101500Z" / "junit.xml")
    assert result["verdict"] == "fail" and result["failed_runs"] == ["single-node gpu02"]
    if check_mode:
        assert not Path(result["junit"]).exists()
        return
    cases = _cases(Path(result["junit"]).read_text())
    assert cases[("gpu01", "single-node all_reduce")] == (None, False)
    assert "NCCL_RUN_FAILED" in cases[("gpu02", "single-node all_reduce")][0]
    data = json.loads(Path(result["json"]).read_text())
    assert [e["ended"]["status"] for e in data["runs"]] == ["completed", "failed"]
