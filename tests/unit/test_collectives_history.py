"""all_gather and alltoall in a node's history (history.py's figures all_gather_busbw / alltoall_busbw, the
trend rule, the table of ``gpufleet report history NODE``) and the summary the remediate role keeps
(collectives_history.summary, the filter nccl_collectives_summary, the remediation report's table)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_collectives import nccl_collectives_summary
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import collectives_history, history
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops.drift import remediation_markdown


def run(host, busbw, collective=None, scope="single-node"):
    r = {"label": f"{scope} {collective or 'all_reduce'} {host}", "scope": scope, "busbw_largest": busbw}
    if scope == "single-node":
        r["host"] = host
    else:
        r["nodes"] = [host]
    if collective:
        r["collective"] = collective
    return r


def report(runs, timestamp="20261129T100000Z"):
    return {
        "cluster": "lab",
        "timestamp": timestamp,
        "nodes": [{"host": "gpu01", "pool": "h100"}, {"host": "gpu02", "pool": "h100"}],
        "runs": runs,
    }


def test_single_node_collectives_become_figures_the_worst_run_of_a_node_counting():
    runs = [
        run("gpu01", 445.0),
        run("gpu01", 412.5, "all_gather"),
        run("gpu01", 330.0, "alltoall"),
        run("gpu01", 320.0, "alltoall"),  # a re-run of gpu01: its worse figure counts
        run("gpu02", 446.0),
        run("gpu02", 60.0, "alltoall", scope="multi-node"),  # a pool run is no node's figure
    ]
    records = {r["host"]: r for r in history.acceptance_records(report(runs), ["gpu01", "gpu02"], 90)}
    assert records["gpu01"]["figures"] == {
        "single_node_busbw": 445.0,
        "all_gather_busbw": 412.5,
        "alltoall_busbw": 320.0,
    }
    assert records["gpu02"]["figures"] == {"single_node_busbw": 446.0}


def test_the_collectives_do_not_change_the_all_reduce_figure():
    figures = collectives_history.node_figures([run("gpu01", 900.0, "all_gather"), run("gpu01", None, "alltoall")])
    assert figures == {"all_gather_busbw": {"gpu01": 900.0}, "alltoall_busbw": {}}
    records = history.acceptance_records(report([run("gpu01", 445.0), run("gpu01", 900.0, "all_gather")]), [], 90)
    assert records[0]["figures"]["single_node_busbw"] == 445.0


def test_the_history_table_shows_the_collectives_only_where_a_record_has_them():
    without = history.acceptance_records(report([run("gpu01", 445.0)]), ["gpu01"], 90)
    headers, _ = history.node_table(without)
    assert "all_gather_busbw" not in headers and "alltoall_busbw" not in headers
    later = history.acceptance_records(
        report([run("gpu01", 444.0), run("gpu01", 318.0, "alltoall")], "20261203T100000Z"), ["gpu01"], 90
    )
    headers, rows = history.node_table(without + later)
    assert "alltoall_busbw" in headers and "all_gather_busbw" not in headers
    column = headers.index("alltoall_busbw")
    assert [row[column] for row in rows] == [None, 318.0]


@pytest.mark.parametrize(("figure", "collective"), [("alltoall_busbw", "alltoall"), ("all_gather_busbw", "all_gather")])
def test_a_node_whose_collective_fell_since_its_first_acceptance_is_degraded(figure, collective):
    records = history.acceptance_records(report([run("gpu01", 445.0), run("gpu01", 400.0, collective)]), ["gpu01"], 90)
    records += history.acceptance_records(
        report([run("gpu01", 444.0), run("gpu01", 300.0, collective)], "20261203T100000Z"), ["gpu01"], 90
    )
    trends, found = history.trends(records)
    trend = next(t for t in trends if t["figure"] == figure)
    assert trend["degraded"] and trend["text"] == "400 → 300 GB/s since 2026-11-29"
    assert [(v["code"], v["host"], v["severity"]) for v in found] == [("NODE_DEGRADED", "gpu01", "warning")]
    assert f"single-node {collective} busbw 300 GB/s is 25.0% worse" in found[0]["message"]
    # Higher is better: a faster collective is no degradation, and the rule's limit holds for it.
    records[-1]["figures"][figure] = 420.0
    assert history.trends(records)[1] == []
    records[-1]["figures"][figure] = 370.0  # 7.5 % worse, within the default 10 %
    assert history.trends(records)[1] == []
    _, found = history.trends(records, {"acceptance": {"history": {"max_degradation_pct": 5, "severity": "fail"}}})
    assert [(v["code"], v["severity"]) for v in found] == [("NODE_DEGRADED", "error")]


def collective_record(name, busbw, floor, errors=()):
    return {
        "collective": name,
        "busbw": busbw,
        "floor_gbps": floor,
        "violations": [{"code": c, "severity": "error", "collective": name} for c in errors]
        + [{"code": "NCCL_SIZE_TOO_SMALL", "severity": "warning", "collective": name}],
    }


def test_the_summary_says_each_collective_passed_or_failed_with_its_codes():
    records = [
        collective_record("all_gather", 412.34, 380.0),
        collective_record("alltoall", 250.06, 300.0, ["NCCL_BUSBW_BELOW_FLOOR", "NCCL_BUSBW_BELOW_FLOOR"]),
    ]
    text = "all_gather passed (412.3 GB/s, floor 380); alltoall failed (250.1 GB/s, floor 300): NCCL_BUSBW_BELOW_FLOOR"
    assert collectives_history.summary(records) == text
    assert nccl_collectives_summary(records) == text
    assert [v["collective"] for v in collectives_history.errors(records)] == ["alltoall", "alltoall"]
    crashed = collective_record("alltoall", None, 300, ["NCCL_RUN_FAILED"])
    assert collectives_history.summary([crashed]) == "alltoall failed (no busbw, floor 300): NCCL_RUN_FAILED"


def test_no_collective_run_is_no_summary():
    assert collectives_history.summary([]) is None
    assert nccl_collectives_summary(None) is None
    with pytest.raises(AnsibleFilterError, match="nccl_collective_records' list"):
        nccl_collectives_summary("alltoall")


def test_the_remediation_table_shows_the_collectives_beside_the_acceptance():
    nodes = {
        "gpu01": {"outcome": "resumed", "acceptance": "pass"},
        "gpu02": {
            "outcome": "drained",
            "acceptance": "fail",
            "dcgm_diag": "-r 2 passed",
            "collectives": "alltoall failed (250.1 GB/s, floor 300): NCCL_BUSBW_BELOW_FLOOR",
        },
    }
    md = remediation_markdown({"cluster": "lab", "nodes": nodes})
    rows = {line.split("|")[1].strip(): line for line in md.splitlines() if line.startswith("| gpu")}
    assert (
        "| fail (GPU diagnostics -r 2 passed; collectives: alltoall failed (250.1 GB/s, floor 300): "
        "NCCL_BUSBW_BELOW_FLOOR) |" in rows["gpu02"]
    )
    assert "| pass |" in rows["gpu01"] and "collectives" not in rows["gpu01"]
