"""``gpufleet drift`` / ``gpufleet remediate`` with a fake runner, and ``gpufleet report`` on their reports.

The fake ``run_playbook`` records what it was asked to run and writes the report the playbook would
(under a temporary reports/ directory), built by the real ``drift_check`` from ``build_facts`` outputs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.facts import build_facts
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops.drift import drift_check
from gpufleet_cli import cmd_drift
from gpufleet_cli.main import main

PIN = "570.133.20"
NEWER = "570.148.08"
BRIEF = {
    "cluster": {"name": "lab"},
    "software": {"driver": PIN, "driver_flavor": "open", "cuda": "12.8", "nccl": "2.26.2"},
    "pools": [{"name": "h100"}],
}
PROC = f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {PIN}  Release Build  (dvs-builder@U16)  Fri Mar 14\n"


def facts(driver: str = PIN, kernel: str = "6.8.0-51-generic", loaded: str = PIN) -> dict:
    """A node's gpufleet_hw from the raw outputs the module gathers (dpkg-query, /proc, osrelease)."""
    dpkg = f"nvidia-driver-cuda\t{driver}-1\thi \nlibnccl2\t2.26.2-1+cuda12.8\thi \ncuda-toolkit-12-8\t12.8.1-1\thi \n"
    return build_facts({"dpkg": dpkg, "driver_proc": PROC.replace(PIN, loaded), "osrelease": kernel + "\n"})


def record(f: dict | None) -> dict:
    return {"pool": "h100", "facts": f, "holds": sorted((f or {}).get("packages") or {}) if f else None}


def write(reports: Path, name: str, report: dict, stamp: str = "20260310T100000Z", md: bool = True) -> Path:
    d = reports / str(report.get("cluster") or "lab") / stamp
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(json.dumps(report))
    if md:
        (d / name.replace(".json", ".md")).write_text("# report\n")
    return d / name


class FakeRunner:
    """Stands in for runner.run_playbook: records the call, writes ``report`` as ``name``, returns ``rc``."""

    def __init__(self, reports: Path, name: str, report: dict | None, rc: int):
        self.reports, self.name, self.report, self.rc = reports, name, report, rc
        self.calls: list[tuple[str, object, object]] = []

    def __call__(self, playbook, opts, stream=None):
        self.calls.append((playbook, opts, stream))
        if self.report is not None:
            write(self.reports, self.name, self.report)
        return self.rc


@pytest.fixture
def reports(tmp_path, monkeypatch):
    d = tmp_path / "reports"
    d.mkdir()
    monkeypatch.setattr(cmd_drift, "REPORTS_DIR", str(d))
    return d


def fake(monkeypatch, reports: Path, name: str, report: dict | None, rc: int = 0) -> FakeRunner:
    runner = FakeRunner(reports, name, report, rc)
    monkeypatch.setattr(cmd_drift, "run_playbook", runner)
    return runner


def inventory(tmp_path: Path) -> str:
    inv = tmp_path / "inv"
    inv.mkdir(exist_ok=True)
    (inv / "hosts.yml").write_text("all: {}\n")
    return str(inv)


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.startswith("  ")]


# ------------------------------------------------------------------ drift


def test_drift_all_clean_exits_0_and_says_where_the_report_is(capsys, tmp_path, reports, monkeypatch):
    report = drift_check({"gpu01": record(facts()), "gpu02": record(facts())}, BRIEF)
    runner = fake(monkeypatch, reports, "drift.json", report, rc=0)
    rc, out, _err = cli(capsys, "drift", "-i", inventory(tmp_path))
    assert rc == 0
    assert runner.calls[0][0] == "drift.yml"
    assert "Drift: lab: 0 drifted, 0 unknown, 2 clean of 2 nodes" in out
    assert ["gpu01", "h100", "CLEAN", "-", "-", "-", "-"] in rows(out)
    assert "drift.json" in out and "drift.md" in out


def test_drift_found_exits_1_with_a_row_per_item(capsys, tmp_path, reports, monkeypatch):
    bad = facts(driver=NEWER)
    records = {"gpu01": record(facts()), "gpu02": record(bad), "gpu03": record(facts())}
    records["gpu02"]["holds"] = ["libnccl2", "cuda-toolkit-12-8"]  # nvidia-driver-cuda unheld
    fake(monkeypatch, reports, "drift.json", drift_check(records, BRIEF), rc=1)  # the playbook fails on drift
    rc, out, _err = cli(capsys, "drift", "-i", inventory(tmp_path))
    assert rc == 1
    table = rows(out)
    assert table[0] == ["host", "pool", "status", "component", "expected", "found", "basis"]
    # the new packages' module is not loaded yet (/proc says the pin): no reboot flagged by the loaded module
    assert table[1] == ["gpu02", "h100", "DRIFTED", "driver-package", PIN, NEWER, "pin"]
    assert table[2] == ["gpu02", "h100", "DRIFTED", "hold", "nvidia-driver-cuda", "held", "not", "held", "hold"]
    assert [r[0] for r in table[3:]] == ["gpu01", "gpu03"]  # the drifted node first
    assert "1 drifted, 0 unknown, 2 clean of 3 nodes" in out


def test_drift_row_says_when_a_reboot_is_needed(capsys, tmp_path, reports, monkeypatch):
    records = {"gpu01": record(facts(driver=NEWER, loaded=NEWER)), "gpu02": record(facts())}
    fake(monkeypatch, reports, "drift.json", drift_check(records, BRIEF), rc=1)
    rc, out, _err = cli(capsys, "drift", "-i", inventory(tmp_path))
    assert rc == 1
    table = rows(out)
    assert ["gpu01", "h100", "DRIFTED", "(reboot)", "driver-loaded", PIN, NEWER, "pin"] in table
    assert ["gpu02", "h100", "CLEAN", "-", "-", "-", "-"] in table


def test_drift_unknown_node_exits_1(capsys, tmp_path, reports, monkeypatch):
    fake(monkeypatch, reports, "drift.json", drift_check({"gpu01": record(facts()), "gpu02": record(None)}, BRIEF), 1)
    rc, out, _err = cli(capsys, "drift", "-i", inventory(tmp_path))
    assert rc == 1
    assert ["gpu02", "h100", "UNKNOWN", "-", "-", "-", "could", "not", "be", "read"] in rows(out)


def test_drift_clean_report_from_a_failed_run_exits_1(capsys, tmp_path, reports, monkeypatch):
    fake(monkeypatch, reports, "drift.json", drift_check({"gpu01": record(facts())}, BRIEF), rc=1)
    rc, _out, err = cli(capsys, "drift", "-i", inventory(tmp_path))
    assert rc == 1 and "the run failed" in err


def test_drift_without_a_report_from_this_run_exits_1(capsys, tmp_path, reports, monkeypatch):
    old = write(reports, "drift.json", drift_check({"gpu01": record(facts())}, BRIEF), stamp="20250101T000000Z")
    os.utime(old, (1_000_000_000, 1_000_000_000))  # written by an earlier run
    fake(monkeypatch, reports, "drift.json", None, rc=0)
    rc, out, err = cli(capsys, "drift", "-i", inventory(tmp_path))
    assert rc == 1 and "no drift report was written" in err and "gpu01" not in out


def test_drift_reads_the_newest_report(tmp_path):
    base = tmp_path / "reports"
    first = write(base, "drift.json", {"cluster": "a", "nodes": {}}, stamp="20260310T100000Z")
    second = write(base, "drift.json", {"cluster": "b", "nodes": {}}, stamp="20260310T110000Z")
    os.utime(first, (2_000_000_000, 2_000_000_000))
    os.utime(second, (2_000_000_100, 2_000_000_100))
    assert cmd_drift.latest_report(str(base), "drift.json", since=2_000_000_000) == str(second)
    assert cmd_drift.latest_report(str(base), "drift.json", since=2_000_000_200) is None


def test_drift_json_prints_the_report_and_keeps_stdout_clean(capsys, tmp_path, reports, monkeypatch):
    report = drift_check({"gpu01": record(facts()), "gpu02": record(facts(kernel="6.8.0-60-generic"))}, BRIEF)
    runner = fake(monkeypatch, reports, "drift.json", report, rc=0)
    rc, out, _err = cli(capsys, "drift", "-i", inventory(tmp_path), "--json")
    assert rc == 0  # two nodes that differ: no majority, so no drift
    assert json.loads(out) == report
    assert runner.calls[0][2] is sys.stderr  # progress and summary to stderr


def test_drift_passes_the_run_arguments(capsys, tmp_path, reports, monkeypatch):
    runner = fake(monkeypatch, reports, "drift.json", drift_check({"gpu01": record(facts())}, BRIEF))
    rc, _out, _err = cli(capsys, "drift", "-i", inventory(tmp_path), "-l", "gpu01", "-C", "-e", "x=1", "--no-progress")
    assert rc == 0
    _playbook, opts, _stream = runner.calls[0]
    assert (opts.limit, opts.check, opts.extra_vars, opts.progress) == ("gpu01", True, ["x=1"], False)


@pytest.mark.parametrize("sub", ["drift", "remediate"])
def test_help_texts(capsys, sub):
    with pytest.raises(SystemExit) as exc:
        main([sub, "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert "docs/drift.md" in out and "Exit 0" in out and "--inventory" in out


def test_drift_without_inventory_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["drift"])
    assert exc.value.code == 2


# ------------------------------------------------------------------ remediate


def remediation(**outcomes: tuple[str, list]) -> dict:
    """outcomes: host -> (outcome, before drift items)."""
    nodes = {}
    for host, (outcome, before) in outcomes.items():
        nodes[host] = {
            "before": before,
            "outcome": outcome,
            "reason": "" if outcome == "resumed" else f"{host}: NCCL busbw below the floor",
            "gate": "pass",
            "acceptance": "pass" if outcome == "resumed" else "fail",
            "rebooted": True,
        }
    return {
        "kind": "remediation",
        "schema": 1,
        "cluster": "lab",
        "started": "2026-03-10T10:00:00Z",
        "finished": "2026-03-10T10:30:00Z",
        "serial": 1,
        "batches": [[h] for h in outcomes],
        "nodes": nodes,
    }


def drifted_items() -> list[dict]:
    bad = record(facts(driver=NEWER))
    return drift_check({"gpu02": bad}, BRIEF)["nodes"]["gpu02"]["drift"]


def test_remediate_passes_only_the_options_given(capsys, tmp_path, reports, monkeypatch):
    runner = fake(monkeypatch, reports, "remediation.json", remediation())
    argv = ["remediate", "-i", inventory(tmp_path), "-e", "remediate_serial=9"]
    rc, _out, _err = cli(capsys, *argv, "--serial", "25%", "--max-fail-percentage", "0", "--drain-timeout", "900")
    assert rc == 0 and runner.calls[0][0] == "remediate.yml"
    extra = runner.calls[0][1].extra_vars
    assert extra[0] == "remediate_serial=9" and len(extra) == 2  # the option comes last, so it wins
    assert json.loads(extra[1]) == {
        "remediate_serial": "25%",
        "remediate_max_fail_percentage": 0,
        "remediate_drain_timeout": 900,
    }
    rc, _out, _err = cli(capsys, "remediate", "-i", inventory(tmp_path), "--serial", "2")
    assert json.loads(runner.calls[1][1].extra_vars[-1]) == {"remediate_serial": 2}
    rc, _out, _err = cli(capsys, "remediate", "-i", inventory(tmp_path))
    assert runner.calls[2][1].extra_vars == []


@pytest.mark.parametrize(
    "argv",
    [
        ["--serial", "0"],
        ["--serial", "-1"],
        ["--serial", "150%"],
        ["--serial", "two"],
        ["--max-fail-percentage", "101"],
        ["--max-fail-percentage", "x"],
        ["--drain-timeout", "0"],
    ],
)
def test_remediate_rejects_bad_options(capsys, tmp_path, reports, monkeypatch, argv):
    runner = fake(monkeypatch, reports, "remediation.json", remediation())
    with pytest.raises(SystemExit) as exc:
        main(["remediate", "-i", inventory(tmp_path), *argv])
    assert exc.value.code == 2 and runner.calls == []
    assert argv[0] in capsys.readouterr().err


@pytest.mark.parametrize(
    ("outcomes", "run_rc", "expected"),
    [
        ({"gpu01": ("resumed", "drift"), "gpu02": ("resumed", "drift")}, 0, 0),
        ({}, 0, 0),  # nothing drifted
        ({"gpu01": ("resumed", "drift"), "gpu03": ("skipped", [])}, 0, 0),  # clean, nothing to do
        ({"gpu01": ("resumed", "drift"), "gpu02": ("drained", "drift")}, 1, 1),
        ({"gpu01": ("unreachable", "drift")}, 1, 1),
        ({"gpu01": ("skipped", "drift")}, 0, 1),  # left drifted (the run stopped before its batch)
        ({"gpu01": ("resumed", "drift")}, 1, 1),  # the run failed after the report
        ({"gpu01": ("remediated", "drift")}, 0, 0),  # no scheduler to resume in
        ({"gpu01": ("previewed", "drift")}, 0, 0),  # --check
    ],
)
def test_remediate_exit_codes(capsys, tmp_path, reports, monkeypatch, outcomes, run_rc, expected):
    outcomes = {h: (o, drifted_items() if before == "drift" else before) for h, (o, before) in outcomes.items()}
    fake(monkeypatch, reports, "remediation.json", remediation(**outcomes), rc=run_rc)
    rc, _out, _err = cli(capsys, "remediate", "-i", inventory(tmp_path))
    assert rc == expected


def test_remediate_table(capsys, tmp_path, reports, monkeypatch):
    report = remediation(gpu02=("drained", drifted_items()), gpu01=("resumed", drifted_items()))
    fake(monkeypatch, reports, "remediation.json", report, rc=1)
    rc, out, _err = cli(capsys, "remediate", "-i", inventory(tmp_path))
    assert rc == 1
    assert "Remediation: lab: 2 node(s) in 2 batch(es), serial 1" in out
    table = rows(out)
    assert table[0] == ["host", "before", "outcome", "gate", "acceptance", "reason"]
    assert table[1] == ["gpu01", "driver-package", "RESUMED", "pass", "pass", "-"]
    assert table[2][:5] == ["gpu02", "driver-package", "DRAINED", "pass", "fail"]
    assert out.splitlines()[3].rstrip().endswith("gpu02: NCCL busbw below the floor")
    assert "remediation.json" in out


def test_remediate_without_a_report_keeps_the_run_code(capsys, tmp_path, reports, monkeypatch):
    fake(monkeypatch, reports, "remediation.json", None, rc=1)
    rc, _out, err = cli(capsys, "remediate", "-i", inventory(tmp_path))
    assert rc == 1 and "no remediation report" in err


# ------------------------------------------------------------------ gpufleet report


def test_report_renders_drift_and_remediation(capsys, tmp_path):
    bad = record(facts(driver=NEWER))
    drift = drift_check({"gpu01": record(facts()), "gpu02": bad}, BRIEF)
    write(tmp_path, "drift.json", drift, stamp="20260310T100000Z", md=False)
    path = write(
        tmp_path, "remediation.json", remediation(gpu02=("resumed", drifted_items())), stamp="20260310T110000Z"
    )
    rc, out, _err = cli(capsys, "report", "--dir", str(tmp_path), "--kind", "drift")
    assert rc == 0 and out.startswith("# Drift: lab\n")
    assert f"| driver-package | {PIN} | {NEWER} | pin |" in out
    rc, out, _err = cli(capsys, "report", "--dir", str(tmp_path))  # the newest of any kind
    assert rc == 0 and out.startswith("# Remediation: lab\n") and "| gpu02 | driver-package" in out
    rc, out, _err = cli(capsys, "report", str(path))
    assert rc == 0 and out.startswith("# Remediation: lab\n")
    rc, out, _err = cli(capsys, "report", "--dir", str(tmp_path), "--list")
    assert rc == 0 and "remediation" in out and "drift" in out


def test_report_on_a_bad_remediation_file_is_exit_2(capsys, tmp_path):
    d = tmp_path / "lab" / "20260310T100000Z"
    d.mkdir(parents=True)
    (d / "remediation.json").write_text(json.dumps({"nodes": []}))
    rc, _out, err = cli(capsys, "report", "--dir", str(tmp_path), "--kind", "remediation")
    assert rc == 2 and "expected a remediation report" in err
