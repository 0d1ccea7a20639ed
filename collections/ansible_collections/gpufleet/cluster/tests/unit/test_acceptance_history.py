"""The per-node history store, trends, NODE_DEGRADED, the report's History section, and the expiry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import report as rep
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.atomic import append_line
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops.drift import drift_check, drift_markdown


def rows(busbw: float, latency: float = 30.0) -> dict:
    """A single-node run as nccl_tests.parse returns it: two sizes, busbw at the largest."""
    return {
        "rows": [
            {"size": 8, "oop_time_us": latency, "oop_busbw": 0.0, "ip_busbw": 0.0, "oop_wrong": 0, "ip_wrong": 0},
            {"size": 1 << 30, "oop_time_us": 9000.0, "oop_busbw": busbw, "ip_busbw": busbw, "oop_wrong": 0},
        ],
        "out_of_bounds": 0,
    }


def report(stamp: str, figures: dict[str, float], floor: float = 100, storage=()) -> dict:
    runs = [
        {"label": f"single-node {h}", "scope": "single-node", "host": h, "floor_gbps": floor, "run": rows(v)}
        for h, v in figures.items()
    ]
    nodes = [{"host": h, "pool": "h100", "status": "pass" if v >= floor else "fail"} for h, v in figures.items()]
    return rep.build_report("lab", runs=runs, nodes=nodes, timestamp=stamp, storage=list(storage))


def record(host: str, time: str, busbw: float, kind: str = "acceptance", pool: str = "h100") -> dict:
    return {
        "time": time,
        "run": time,
        "kind": kind,
        "host": host,
        "pool": pool,
        "verdict": "pass",
        "figures": {"single_node_busbw": busbw},
    }


# --- settings --------------------------------------------------------------------------------------


def test_settings_defaults_and_bad_fields():
    assert history.settings({}) == {"max_degradation_pct": 10.0, "severity": "warn", "valid_days": 90}
    brief = {"acceptance": {"history": {"max_degradation_pct": 5, "severity": "fail"}, "valid_days": 30}}
    assert history.settings(brief) == {"max_degradation_pct": 5, "severity": "fail", "valid_days": 30}
    with pytest.raises(history.HistoryError, match=r"max_degradation_pct: expected a number from 0 to 100, found 150"):
        history.settings({"acceptance": {"history": {"max_degradation_pct": 150}}})
    with pytest.raises(history.HistoryError, match=r"severity: expected warn or fail, found 'loud'"):
        history.settings({"acceptance": {"history": {"severity": "loud"}}})
    with pytest.raises(history.HistoryError, match=r"valid_days: expected a whole number of days from 1 to 3650"):
        history.settings({"acceptance": {"valid_days": 0}})


def test_valid_until_counts_days_from_the_runs_day():
    assert history.valid_until("2026-12-03T09:40:00Z", 90) == "2027-03-03"
    assert history.valid_until(history.stamp_time("20261231T235959Z"), 1) == "2027-01-01"


# --- the store -------------------------------------------------------------------------------------


def test_append_and_read_back_oldest_first(tmp_path):
    path = history.store_path(str(tmp_path), "lab")
    assert path == str(tmp_path / "lab" / "history.jsonl")
    assert history.read(path) == ([], [])
    assert history.append(path, [record("gpu01", "2026-12-02T10:00:00Z", 440)]) == 1
    history.append(path, [record("gpu01", "2026-11-29T10:00:00Z", 445), record("gpu02", "2026-11-29T10:00:00Z", 446)])
    records, warnings = history.read(path)
    assert warnings == []
    assert [(r["host"], r["time"][:10]) for r in records] == [
        ("gpu01", "2026-11-29"),
        ("gpu02", "2026-11-29"),
        ("gpu01", "2026-12-02"),
    ]
    mine, _ = history.read(path, "gpu01")
    assert [r["figures"]["single_node_busbw"] for r in mine] == [445, 440]
    # One line per record, each a JSON object.
    assert all(json.loads(line) for line in Path(path).read_text().splitlines())


def test_a_torn_last_line_is_skipped_with_a_warning_and_the_next_record_starts_a_line(tmp_path):
    path = str(tmp_path / "history.jsonl")
    history.append(path, [record("gpu01", "2026-11-29T10:00:00Z", 445)])
    with open(path, "a") as fh:  # a writer killed mid-record
        fh.write('{"time": "2026-11-30T10:00:00Z", "host": "gpu0')
    records, warnings = history.read(path)
    assert [r["host"] for r in records] == ["gpu01"]
    assert len(warnings) == 1 and "last line, torn" in warnings[0] and "skipped" in warnings[0]
    history.append(path, [record("gpu01", "2026-12-01T10:00:00Z", 441)])
    records, warnings = history.read(path)
    assert [r["figures"]["single_node_busbw"] for r in records] == [445, 441]
    assert len(warnings) == 1 and "line 2 " in warnings[0]


def test_a_writer_killed_mid_append_leaves_the_store_readable(tmp_path):
    """A real process killed (SIGKILL) while it appends in a loop: every line but a torn last one reads."""
    path = tmp_path / "history.jsonl"
    code = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = {sys.path!r}
        from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history as h
        i = 0
        while True:
            h.append({str(path)!r}, [{{"time": "2026-12-01T00:00:00Z", "host": "gpu01", "i": i, "pad": "x" * 4096}}])
            i += 1
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        for _ in range(200):
            if path.exists() and path.stat().st_size > 64 * 1024:
                break
            subprocess.run(["sleep", "0.05"], check=True)
    finally:
        proc.kill()
        proc.wait()
    records, warnings = history.read(str(path))
    assert len(records) >= 10
    assert [r["i"] for r in records] == list(range(len(records)))  # none lost, none interleaved
    assert len(warnings) <= 1


def test_append_line_cuts_a_failed_write_back(tmp_path, monkeypatch):
    path = tmp_path / "h.jsonl"
    append_line(str(path), "one\n")

    def full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        append_line(str(path), "two\n")
    monkeypatch.undo()
    assert path.read_text() == "one\n"


# --- records of an acceptance report ---------------------------------------------------------------


def test_acceptance_records_carry_the_figures_and_the_date_valid_until():
    r = report("20261203T094000Z", {"gpu01": 445.0, "gpu02": 300.0}, floor=400)
    recs = history.acceptance_records(r, accepted=["gpu01"], valid_days=90)
    by_host = {x["host"]: x for x in recs}
    assert by_host["gpu01"]["figures"] == {"single_node_busbw": 445.0, "latency_us": 30.0}
    assert by_host["gpu01"]["verdict"] == "pass" and by_host["gpu01"]["valid_until"] == "2027-03-03"
    assert by_host["gpu01"]["time"] == "2026-12-03T09:40:00Z" and by_host["gpu01"]["kind"] == "acceptance"
    assert by_host["gpu02"]["verdict"] == "fail" and "valid_until" not in by_host["gpu02"]
    assert by_host["gpu02"]["figures"]["single_node_busbw"] == 300.0


# --- trends and NODE_DEGRADED ----------------------------------------------------------------------


def test_trend_since_first_acceptance_and_the_degradation_flag():
    recs = [
        record("gpu01", "2026-11-29T10:00:00Z", 445),
        record("gpu01", "2026-12-01T10:00:00Z", 430),
        record("gpu01", "2026-12-03T10:00:00Z", 390),  # 12.4 % below 445
        record("gpu02", "2026-11-29T10:00:00Z", 446),
        record("gpu02", "2026-12-03T10:00:00Z", 420),  # 5.8 %
        record("gpu02", "2026-12-03T11:00:00Z", 100, kind="gate"),  # not an acceptance: ignored
    ]
    trends, found = history.trends(recs, {})
    t1 = next(t for t in trends if t["host"] == "gpu01")
    assert t1["text"] == "445 → 390 GB/s since 2026-11-29" and t1["runs"] == 3 and t1["degraded"]
    t2 = next(t for t in trends if t["host"] == "gpu02")
    assert not t2["degraded"] and t2["latest"] == 420
    assert [(v["code"], v["host"], v["severity"]) for v in found] == [("NODE_DEGRADED", "gpu01", "warning")]
    assert "12.4% worse than at its first acceptance (445 GB/s on 2026-11-29)" in found[0]["message"]
    _, strict = history.trends(recs, {"acceptance": {"history": {"max_degradation_pct": 5, "severity": "fail"}}})
    assert [(v["host"], v["severity"]) for v in strict] == [("gpu01", "error"), ("gpu02", "error")]


def test_latency_and_restore_are_worse_when_higher():
    recs = [
        {**record("gpu01", "2026-11-29T10:00:00Z", 445), "figures": {"latency_us": 30.0, "checkpoint_restore": 10}},
        {**record("gpu01", "2026-12-03T10:00:00Z", 445), "figures": {"latency_us": 40.0, "checkpoint_restore": 9}},
    ]
    trends, found = history.trends(recs, {})
    assert {t["figure"]: t["degraded"] for t in trends} == {"latency_us": True, "checkpoint_restore": False}
    assert [v["host"] for v in found] == ["gpu01"] and "latency" in found[0]["message"]


def test_a_single_acceptance_is_never_degraded():
    trends, found = history.trends([record("gpu01", "2026-11-29T10:00:00Z", 445)], {})
    assert trends[0]["runs"] == 1 and not trends[0]["degraded"] and found == []


# --- the report's History section ------------------------------------------------------------------


def test_report_history_section_flags_and_fails_by_brief(tmp_path):
    past = [record("gpu01", "2026-11-29T10:00:00Z", 445), record("gpu02", "2026-11-29T10:00:00Z", 446)]
    r = report("20261203T094000Z", {"gpu01": 400.0, "gpu02": 444.0})
    new = rep.add_history(r, past, {})
    assert r["verdict"] == "pass" and sorted(r["history"]["accepted"]) == ["gpu01", "gpu02"]
    assert [v["code"] for v in r["violations"]] == ["NODE_DEGRADED"] and r["counts"]["warnings"] == 1
    assert {x["host"]: x["valid_until"] for x in new} == {"gpu01": "2027-03-03", "gpu02": "2027-03-03"}
    md = rep.render_markdown(r)
    assert "## History" in md and "445 → 400 GB/s since 2026-11-29" in md
    assert "valid until 2027-03-03 (90 days)" in md
    # severity fail: the degraded node fails the verdict and is not accepted.
    r2 = report("20261203T094000Z", {"gpu01": 400.0, "gpu02": 444.0})
    new2 = rep.add_history(r2, past, {"acceptance": {"history": {"severity": "fail"}}})
    assert r2["verdict"] == "fail" and r2["history"]["accepted"] == []
    assert all("valid_until" not in x for x in new2) and {x["verdict"] for x in new2} == {"not accepted"}
    # The pool's plot: each node's busbw over time.
    written = rep.write_report(str(tmp_path), r, plots=True)
    pngs = [os.path.basename(p) for p in written["plots"]]
    assert "history-h100.png" in pngs
    data = json.loads(Path(written["json"]).read_text())
    assert data["history"]["series"]["h100"]["gpu01"] == [
        ["2026-11-29T10:00:00Z", 445],
        ["2026-12-03T09:40:00Z", 400.0],
    ]
    assert data["history"]["plots"] == [{"pool": "h100", "file": "history-h100.png"}]


def test_a_failed_run_accepts_no_node():
    r = report("20261203T094000Z", {"gpu01": 445.0, "gpu02": 300.0}, floor=400)
    assert r["verdict"] == "fail"
    assert rep.accepted_nodes(r) == []


# --- marks and expiry ------------------------------------------------------------------------------

SCONTROL = (
    "NodeName=gpu01 Arch=x86_64 CoresPerSocket=1 State=IDLE Comment=(null) Extra=accepted_until=2027-03-03\n"
    "NodeName=gpu02 Arch=x86_64 CoresPerSocket=1 State=IDLE Comment=(null) Extra=(null)\n"
    "NodeName=gpu03 Arch=x86_64 State=IDLE Extra=accepted_until=2020-01-01\n"
)


def test_slurm_and_kubernetes_marks():
    assert history.slurm_marks(SCONTROL) == {"gpu01": "2027-03-03", "gpu02": None, "gpu03": "2020-01-01"}
    assert history.parse_slurm_mark("accepted_until=not-a-date") is None
    nodes = {
        "items": [
            {"metadata": {"name": "gpu01", "labels": {"gpufleet.io/accepted-until": "2027-03-03"}}},
            {"metadata": {"name": "gpu02", "labels": {}}},
        ]
    }
    assert history.k8s_marks(nodes) == {"gpu01": "2027-03-03", "gpu02": None}


def test_expiry_valid_through_its_day_then_expired():
    marks = {"gpu01": "2026-12-03", "gpu02": "2026-12-02", "gpu03": None}
    assert history.expiry(marks, today="2026-12-03") == {
        "gpu01": {"valid_until": "2026-12-03", "status": "valid"},
        "gpu02": {"valid_until": "2026-12-02", "status": "expired"},
        "gpu03": {"valid_until": None, "status": "none"},
    }


def test_drift_lists_expired_and_missing_acceptance_without_changing_the_drift_status():
    brief = {"cluster": {"name": "lab"}, "software": {}}
    recs = {"gpu01": None, "gpu02": None, "gpu03": None}
    plain = drift_check(recs, brief)
    assert "acceptance_expired" not in plain
    rep_ = drift_check(recs, brief, acceptance=history.slurm_marks(SCONTROL), today="2026-12-03")
    assert rep_["acceptance_expired"] == ["gpu03"] and rep_["acceptance_missing"] == ["gpu02"]
    assert rep_["nodes"]["gpu03"]["acceptance"] == {"valid_until": "2020-01-01", "status": "expired"}
    assert [rep_["nodes"][h]["status"] for h in recs] == [plain["nodes"][h]["status"] for h in recs]
    md = drift_markdown(rep_)
    assert "## Acceptance expired or missing" in md
    assert "| gpu03 | 2020-01-01 | expired |" in md and "| gpu02 | - | none |" in md
    assert "gpu01 | 2027" not in md


def test_drift_node_results():
    rep_ = {
        "nodes": {
            "gpu01": {
                "pool": "h100",
                "status": "drifted",
                "drift": [{"component": "driver"}, {"component": "hold", "package": "libnccl2"}],
            },
            "gpu02": {"status": "clean"},
        }
    }
    assert history.drift_node_results(rep_) == [
        {"host": "gpu01", "pool": "h100", "verdict": "drifted", "codes": ["driver", "hold libnccl2"]},
        {"host": "gpu02", "pool": None, "verdict": "clean", "codes": []},
    ]
