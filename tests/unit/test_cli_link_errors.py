"""Link error counters in the CLI: `gpufleet report history NODE` shows them per acceptance, and the summary
line after an acceptance says whether any port's counters grew (scripts/gpufleet_cli, acceptance/history.py)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import accepted_nodes, build_report
from gpufleet_cli.cmd_provision import link_errors_summary
from gpufleet_cli.main import main

GREW = {
    "host": "gpu02",
    "status": "measured",
    "ports": [{"device": "mlx5_2", "port": "1", "status": "measured", "counters": []}],
    "grew": [
        {
            "device": "mlx5_2",
            "port": "1",
            "counter": "symbol_error",
            "before": 0,
            "after": 40,
            "growth": 40,
            "threshold": 10,
        },
        {
            "device": "mlx5_2",
            "port": "1",
            "counter": "link_downed",
            "before": 0,
            "after": 1,
            "growth": 1,
            "threshold": 0,
        },
    ],
}
CLEAN = {
    "host": "gpu01",
    "status": "measured",
    "ports": [{"device": f"mlx5_{i}", "port": "1", "status": "measured", "counters": []} for i in range(8)],
    "grew": [],
}


def rows(busbw: float) -> dict:
    """A passing single-node run as nccl_tests.parse returns it: two sizes, busbw at the largest."""
    return {
        "rows": [
            {"size": 8, "oop_time_us": 30.0, "oop_busbw": 0.0, "ip_busbw": 0.0, "oop_wrong": 0, "ip_wrong": 0},
            {"size": 1 << 30, "oop_time_us": 9000.0, "oop_busbw": busbw, "ip_busbw": busbw, "oop_wrong": 0},
        ],
        "out_of_bounds": 0,
    }


def report_with_links(violations=()) -> dict:
    runs = [
        {"label": f"single-node {h}", "scope": "single-node", "host": h, "floor_gbps": 100, "run": rows(445.0)}
        for h in ("gpu01", "gpu02")
    ]
    return build_report(
        "lab",
        runs=runs,
        nodes=[{"host": "gpu01", "pool": "h100"}, {"host": "gpu02", "pool": "h100"}],
        violations=list(violations),
        link_errors=[CLEAN, GREW],
        timestamp="20261206T100000Z",
    )


def test_history_records_carry_the_link_errors_and_the_cli_shows_them(capsys, tmp_path: Path):
    report = report_with_links()
    records = history.acceptance_records(report, accepted_nodes(report), 90)
    by = {r["host"]: r for r in records}
    assert by["gpu01"]["link_errors"] == "clean (8 ports)"
    assert by["gpu02"]["link_errors"] == "mlx5_2:1 symbol_error +40, link_downed +1"
    history.append(history.store_path(str(tmp_path), "lab"), records)
    rc = main(["report", "history", "gpu02", "--dir", str(tmp_path), "--cluster", "lab"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert (
        "link errors" in out.splitlines()[next(i for i, ln in enumerate(out.splitlines()) if ln.startswith("| time"))]
    )
    assert "| mlx5_2:1 symbol_error +40, link_downed +1 |" in out


def test_summary_line_names_the_nodes_whose_counters_grew_or_were_not_read():
    assert link_errors_summary({"link_errors": [CLEAN]}) == "; link errors: PASS on 1 node(s)"
    unread = {"host": "gpu03", "status": "not read", "reason": "x", "ports": [], "grew": []}
    assert link_errors_summary({"link_errors": [CLEAN, GREW, unread]}) == (
        "; link errors: FAIL (gpu02 mlx5_2:1 symbol_error +40, link_downed +1; gpu03 not read)"
    )
    assert link_errors_summary({"link_errors": [{"host": "gpu01", "status": "not applicable"}]}) == ""
    assert link_errors_summary({}) == ""


def test_a_node_whose_counters_grew_is_not_accepted():
    # The records alone judge nothing: the violations (the gate's, in the acceptance's violations) do.
    assert report_with_links()["verdict"] == "pass"
    grew = {"severity": "error", "code": "LINK_ERRORS_GREW", "host": "gpu02", "field": "x", "message": "grew"}
    found = report_with_links([grew])
    assert found["verdict"] == "fail" and accepted_nodes(found) == []
