"""scripts/bench_lab: "lab not up" handled, the provision summary parsed, the figures computed."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from gpufleet_cli.runner import EventTracker

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    loader = importlib.machinery.SourceFileLoader("bench_lab", str(ROOT / "scripts/bench_lab"))
    spec = importlib.util.spec_from_loader("bench_lab", loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_lab"] = module  # dataclasses look their module up there
    loader.exec_module(module)
    return module


bench = load_bench()


def canned_summary(changed: int, phases: list[tuple[str, float, int]], tail: str = "") -> str:
    """A summary exactly as gpufleet_cli.runner prints it, from a scripted event stream."""
    now = [0.0]

    def tick() -> float:
        return now[0]

    tracker = EventTracker(clock=tick)
    for name, seconds, tasks in phases:
        tracker.handle({"event": "playbook_on_play_start", "event_data": {"play": name}})
        for t in range(tasks):
            tracker.handle({"event": "playbook_on_task_start", "event_data": {"task": f"t{t}"}})
        now[0] += seconds
    ok = {"lab-ctl01": 40, "lab-gpu01": 55, "lab-gpu02": 55}
    tracker.handle(
        {
            "event": "playbook_on_stats",
            "event_data": {
                "ok": ok,
                "changed": {"lab-gpu01": changed} if changed else {},
                "failures": {},
                "dark": {},
                "skipped": {"lab-ctl01": 3},
            },
        }
    )
    noise = "== Preflight\n   FAILED nothing\nSummary of nothing\n"  # progress lines before the summary
    return noise + tracker.summary(log_path="/tmp/x/stdout") + "\n" + tail


PHASES = [("Preflight: brief vs inventory", 2.0, 3), ("Base OS", 30.5, 20), ("GPU stack", 41.25, 30)]


@pytest.fixture(autouse=True)
def _strategy_env(monkeypatch):
    """main() sets ANSIBLE_STRATEGY for the commands it starts: restored after each test."""
    monkeypatch.setenv("ANSIBLE_STRATEGY", "gpufleet.cluster.mitogen_linear")


def test_parse_canned_summary():
    s = bench.parse_summary(canned_summary(4, PHASES))
    assert s.found
    assert s.phases == [("Preflight: brief vs inventory", 2.0, 3), ("Base OS", 30.5, 20), ("GPU stack", 41.2, 30)]
    assert s.hosts["lab-gpu01"] == {"ok": 55, "changed": 4, "failed": 0, "unreachable": 0, "skipped": 0}
    assert s.changed == 4
    assert s.host_line == {"total": 3, "ok": 3, "changed": 1, "failed": 0, "unreachable": 0}


def test_parse_without_summary():
    assert not bench.parse_summary("ERROR! the playbook could not be found\n").found


@pytest.mark.parametrize(("t2", "changed", "ratio_ok"), [(18.0, 0, True), (40.0, 2, False)])
def test_figures(t2, changed, ratio_ok):
    first = (80.0, bench.parse_summary(canned_summary(30, PHASES)))
    rerun = (t2, bench.parse_summary(canned_summary(changed, [(n, s / 5, t) for n, s, t in PHASES])))
    text = bench.format_figures(first, rerun)
    assert "first converge         80.0 s" in text
    assert f"no-op re-run       {t2:8.1f} s" in text
    assert (f"{t2 / 80 * 100:8.1f} %   (target <= 25 %: met)" in text) is ratio_ok
    assert f"re-run changed     {changed:8d}" in text
    assert ("lab-gpu01" in text) is (changed > 0)
    assert "  Base OS                            30.5       6.1     20%" in text


def test_install_stages_ratio_leaves_out_the_gates():
    phases = [
        ("Base OS", 100.0, 20),
        ("Hardware gate (facts against the brief)", 20.0, 5),
        ("NCCL acceptance report", 10.0, 3),
    ]
    rerun_phases = [
        ("Base OS", 20.0, 20),
        ("Hardware gate (facts against the brief)", 20.0, 5),
        ("NCCL acceptance report", 10.0, 3),
    ]
    first = (130.0, bench.parse_summary(canned_summary(3, phases)))
    rerun = (50.0, bench.parse_summary(canned_summary(0, rerun_phases)))
    text = bench.format_figures(first, rerun)
    assert "re-run / first         38.5 %   (target <= 25 %: NOT met)" in text
    assert "install stages        100.0 s first, 20.0 s re-run: 20.0 %   (target <= 25 %: met)" in text
    assert "gate + acceptance      30.0 s first, 30.0 s re-run" in text


def test_lab_not_up_prints_and_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(bench, "lab_up", lambda: False)
    monkeypatch.setattr(bench, "provision", lambda inv, *flags: pytest.fail("must not provision when the lab is down"))
    assert bench.main([]) == 0
    assert capsys.readouterr().out.strip() == "lab not up: run scripts/gpufleet lab up"


def test_two_runs_figures(monkeypatch, capsys):
    outputs = iter([(0, 90.0, canned_summary(25, PHASES)), (0, 20.0, canned_summary(0, PHASES))])
    monkeypatch.setattr(bench, "lab_up", lambda: True)
    monkeypatch.setattr(bench, "provision", lambda inv, *flags: next(outputs))
    assert bench.main(["-i", "inventories/lab", "--reruns", "1", "--reaccept-runs", "0"]) == 0
    out = capsys.readouterr().out
    assert "re-run / first         22.2 %   (target <= 25 %: met)" in out
    assert "re-run changed            0     (target 0: met)" in out
    assert "median" not in out


def test_median_of_three_reruns_and_the_most_changed(monkeypatch, capsys):
    # The median re-run (24 s), not the fastest (18 s) nor the first; a change in any re-run counts.
    outputs = iter(
        [
            (0, 100.0, canned_summary(25, PHASES)),
            (0, 30.0, canned_summary(0, PHASES)),
            (0, 18.0, canned_summary(2, PHASES)),
            (0, 24.0, canned_summary(0, PHASES)),
        ]
    )
    calls = []
    monkeypatch.setattr(bench, "lab_up", lambda: True)
    monkeypatch.setattr(bench, "provision", lambda inv, *flags: calls.append(inv) or next(outputs))
    assert bench.main(["--reaccept-runs", "0"]) == 0
    out = capsys.readouterr().out
    assert len(calls) == 4  # the first converge and 3 re-runs (the default)
    assert "no-op re-run           24.0 s   (median of 3: 30.0, 18.0, 24.0 s)" in out
    assert "re-run / first         24.0 %   (target <= 25 %: met)" in out
    assert "re-run changed            2     (target 0: NOT met, hosts: lab-gpu01), the most of 3 re-runs" in out


ACCEPT_PHASES = [
    *PHASES,
    ("Find the acceptance hosts from the brief", 1.0, 2),
    ("NCCL acceptance on each node alone", 20.0, 9),
]
KEPT = "NCCL acceptance: PASS, kept from 2026-12-01 10:00: nothing changed since it was measured\n"


def test_reruns_that_kept_the_acceptance_and_one_that_measured_again(monkeypatch, capsys):
    # The first run measures; the no-op re-runs keep its acceptance (their phases stop before it);
    # the --reaccept re-run measures again and is shown on its own line.
    outputs = iter(
        [
            (0, 100.0, canned_summary(25, ACCEPT_PHASES, "NCCL acceptance: PASS; report r.md\n")),
            (0, 20.0, canned_summary(0, [(n, s / 5, t) for n, s, t in PHASES], KEPT)),
            (0, 40.0, canned_summary(0, [(n, s / 5, t) for n, s, t in ACCEPT_PHASES])),
        ]
    )
    calls = []
    monkeypatch.setattr(bench, "lab_up", lambda: True)
    monkeypatch.setattr(bench, "provision", lambda inv, *flags: calls.append(flags) or next(outputs))
    assert bench.main(["--reruns", "1"]) == 0
    out = capsys.readouterr().out
    assert calls == [(), (), ("--reaccept",)]
    assert "re-run / first         20.0 %   (target <= 25 %: met)" in out
    assert "acceptance             kept     (1 of 1 re-runs kept the first run's passing acceptance)" in out
    assert "re-run --reaccept      40.0 s   (40.0 % of the first: acceptance measured again)" in out
    assert "install stages         73.7 s first, 14.7 s re-run: 19.9 %" in out
    assert "gate + acceptance      21.0 s first, 0.0 s re-run (the gate measures again, acceptance was kept)" in out
    assert "  NCCL acceptance on each node alone            20.0         -\n" in out
    assert "  Base OS                                       30.5       6.1     20%" in out


def test_median_of_an_even_number_is_the_slower_middle_one():
    runs = [(t, bench.Summary()) for t in (10.0, 40.0, 20.0, 30.0)]
    assert bench.median_run(runs)[0] == 30.0


def test_reruns_must_be_positive(monkeypatch):
    monkeypatch.setattr(bench, "lab_up", lambda: True)
    with pytest.raises(SystemExit):
        bench.main(["--reruns", "0"])


def test_failed_run_exit_1(monkeypatch, capsys):
    monkeypatch.setattr(bench, "lab_up", lambda: True)
    monkeypatch.setattr(bench, "provision", lambda inv, *flags: (1, 5.0, "boom\n"))
    assert bench.main([]) == 1
    assert "first converge: provision exited 1 without a summary" in capsys.readouterr().out


def _event(kind: str, second: float, **data) -> dict:
    return {"event": kind, "created": f"2026-11-30T10:00:{second:09.6f}+00:00", "event_data": data}


def test_slowest_tasks_sums_a_role_task_over_plays_and_counts_play_starts():
    events = [
        _event("playbook_on_play_start", 0.0, play="Base OS"),
        _event("playbook_on_task_start", 0.5, task="Read the topology brief", role="brief"),
        _event("runner_on_ok", 0.9, task="Read the topology brief", role="brief", host="lab-gpu01"),
        _event("playbook_on_task_start", 1.0, task="Install fio", role="acceptance"),
        _event("playbook_on_play_start", 5.0, play="Slurm"),
        _event("playbook_on_task_start", 5.25, task="Read the topology brief", role="brief"),
        _event("playbook_on_task_start", 6.0, task="a task without a role"),
        _event("playbook_on_stats", 6.5),
    ]
    rows = bench.slowest_tasks(events, top=3)
    assert rows == [
        (4.0, 1, "acceptance : Install fio"),
        (1.25, 2, "brief : Read the topology brief"),
        (0.5, 1, "(play start) Base OS"),
    ]
    assert bench.slowest_tasks(events, top=10)[-1] == (0.25, 1, "(play start) Slurm")


def test_rerun_slowest_tasks_read_from_the_events_beside_the_log(monkeypatch, capsys, tmp_path):
    events_dir = tmp_path / "job_events"
    events_dir.mkdir()
    for i, event in enumerate(
        [
            _event("playbook_on_task_start", 1.0, task="Let the workload run", role="acceptance"),
            _event("playbook_on_stats", 16.0),
        ]
    ):
        (events_dir / f"{i}-x.json").write_text(json.dumps(event))
    (events_dir / "9-broken.json").write_text("{not json")
    log = str(tmp_path / "stdout")
    rerun = canned_summary(0, PHASES).replace("/tmp/x/stdout", log)
    outputs = iter([(0, 90.0, canned_summary(25, PHASES)), (0, 20.0, rerun)])
    monkeypatch.setattr(bench, "lab_up", lambda: True)
    monkeypatch.setattr(bench, "provision", lambda inv, *flags: next(outputs))
    assert bench.main(["--reruns", "1", "--reaccept-runs", "0"]) == 0
    out = capsys.readouterr().out
    assert "slowest tasks of the re-run (s, times run)\n     15.0    1x  acceptance : Let the workload run" in out
