"""The CLI's event tracker and progress, fed with ansible-runner event sequences."""

from __future__ import annotations

import io
import itertools
import os

import pytest
from gpufleet_cli.runner import EventTracker, Progress, RunOptions, build_cmdline


def _clock():
    ticks = itertools.count(0, 2)
    return lambda: float(next(ticks))


def play(name):
    return {"event": "playbook_on_play_start", "event_data": {"play": name}}


def task(name):
    return {"event": "playbook_on_task_start", "event_data": {"task": name}}


def ok(host, changed=False):
    return {"event": "runner_on_ok", "event_data": {"host": host, "res": {"changed": changed}}}


def failed(host, msg, ignore=False):
    return {
        "event": "runner_on_failed",
        "event_data": {"host": host, "task": "t", "res": {"msg": msg}, "ignore_errors": ignore},
    }


def unreachable(host):
    return {"event": "runner_on_unreachable", "event_data": {"host": host, "res": {"msg": "ssh: no route"}}}


def stats(**kw):
    return {"event": "playbook_on_stats", "event_data": kw}


HEALTHY = [
    play("Preflight"),
    task("Check"),
    ok("ctl"),
    play("Base"),
    task("Pkgs"),
    ok("ctl", True),
    ok("gpu1"),
    stats(ok={"ctl": 2, "gpu1": 1}, changed={"ctl": 1}, failures={}, dark={}, skipped={}),
]
ONE_BAD = [
    play("Gate"),
    task("Check GPUs"),
    ok("gpu1"),
    failed("gpu2", "HW_GPU_COUNT: expected 8 GPUs, found 7"),
    unreachable("gpu3"),
    stats(ok={"gpu1": 1}, failures={"gpu2": 1}, dark={"gpu3": 1}),
]


@pytest.mark.parametrize(
    ("events", "rc", "expected"),
    [
        (HEALTHY, 0, 0),
        (HEALTHY, 2, 1),  # ansible-playbook itself failed (e.g. syntax): not a success
        (ONE_BAD, 0, 1),
        ([play("p"), task("t"), failed("h", "boom", ignore=True), stats(ok={"h": 1})], 0, 0),
    ],
)
def test_exit_code(events, rc, expected):
    tracker = EventTracker(clock=_clock())
    for e in events:
        tracker.handle(e)
    assert tracker.exit_code(rc) == expected


def test_summary_names_failed_and_unreachable_hosts_with_their_messages():
    tracker = EventTracker(clock=_clock())
    for e in ONE_BAD:
        tracker.handle(e)
    text = tracker.summary(log_path="/tmp/log")
    assert "hosts: 3 total, 1 ok, 0 changed, 1 failed, 1 unreachable" in text
    assert "gpu2 [Gate / t]" in text
    assert "HW_GPU_COUNT: expected 8 GPUs, found 7" in text
    assert "ssh: no route" in text
    assert "full log: /tmp/log" in text


def test_phases_are_timed_from_play_start_to_the_next():
    tracker = EventTracker(clock=_clock())
    for e in HEALTHY:
        tracker.handle(e)
    assert [(p.name, p.seconds, p.tasks) for p in tracker.phases] == [("Preflight", 6.0, 1), ("Base", 8.0, 1)]


def test_stats_are_authoritative_over_counted_events():
    tracker = EventTracker(clock=_clock())
    for e in HEALTHY:
        tracker.handle(e)
    assert tracker.host_totals()["ctl"] == {"ok": 2, "changed": 1, "failed": 0, "unreachable": 0, "skipped": 0}


def test_two_playbooks_of_one_session_sum_their_stats():
    # `gpufleet provision` runs site.yml and then acceptance.yml: one summary counts both.
    tracker = EventTracker(clock=_clock())
    for e in [*HEALTHY, play("Acceptance"), stats(ok={"gpu1": 3, "gpu2": 1}, changed={}, failures={"ctl": 1})]:
        tracker.handle(e)
    totals = tracker.host_totals()
    assert totals["ctl"] == {"ok": 2, "changed": 1, "failed": 1, "unreachable": 0, "skipped": 0}
    assert totals["gpu1"]["ok"] == 4 and totals["gpu2"]["ok"] == 1
    assert [p.name for p in tracker.phases] == ["Preflight", "Base", "Acceptance"]
    assert tracker.exit_code(0) == 1
    text = tracker.summary(log_path=["/tmp/a/stdout", "/tmp/b/stdout"])
    assert "  full log: /tmp/a/stdout\n  full log: /tmp/b/stdout" in text


def test_plain_progress_prints_phases_and_failures_only():
    out = io.StringIO()
    progress = Progress(EventTracker(clock=_clock()), stream=out, live=False)
    for e in ONE_BAD:
        progress(e)
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "== Gate"
    assert lines[1].startswith("   FAILED gpu2: t: HW_GPU_COUNT")
    assert lines[2].startswith("   UNREACHABLE gpu3")
    assert "\r" not in out.getvalue()


def test_live_progress_rewrites_one_status_line():
    out = io.StringIO()
    progress = Progress(EventTracker(clock=_clock()), stream=out, live=True)
    for e in HEALTHY[:3]:
        progress(e)
    assert "\r\033[K   [Preflight] Check (1 hosts, 1 results)" in out.getvalue()


def test_only_events_worth_keeping_are_written():
    """What the handler returns decides whether ansible-runner writes the event's file under job_events/."""
    progress = Progress(EventTracker(clock=_clock()), stream=io.StringIO(), live=False)
    kept = {
        "play": play("Base"),
        "task": task("Write a file"),
        "changed": ok("gpu1", changed=True),
        "failed": failed("gpu2", "HW_GPU_COUNT"),
        "ignored failure": failed("gpu2", "tolerated", ignore=True),
        "unreachable": unreachable("gpu3"),
        "changed item": {"event": "runner_item_on_ok", "event_data": {"host": "gpu1", "res": {"changed": True}}},
        "failed item": {"event": "runner_item_on_failed", "event_data": {"host": "gpu1", "res": {"msg": "x"}}},
        "retry": {"event": "runner_retry", "event_data": {"host": "gpu1", "res": {"attempts": 1}}},
        "stats": {"event": "playbook_on_stats", "event_data": {"ok": {"gpu1": 3}}},
        "warning": {"event": "warning", "event_data": {}},
    }
    dropped = {
        "ok": ok("gpu1"),
        "start": {"event": "runner_on_start", "event_data": {"host": "gpu1"}},
        "skipped": {"event": "runner_on_skipped", "event_data": {"host": "gpu1"}},
        "ok item": {"event": "runner_item_on_ok", "event_data": {"host": "gpu1", "res": {"changed": False}}},
        "skipped item": {"event": "runner_item_on_skipped", "event_data": {"host": "gpu1", "res": {}}},
    }
    assert {name for name, event in kept.items() if not progress(event)} == set()
    assert {name for name, event in dropped.items() if progress(event)} == set()
    # Dropped from the files, still counted.
    assert progress.tracker.hosts["gpu1"]["ok"] == 1 and progress.tracker.hosts["gpu1"]["skipped"] == 1


def test_cmdline_passes_options_through_quoted():
    opts = RunOptions(inventory="inv", check=True, diff=True, tags="slurm", extra_vars=["a=1", "b='x y'"])
    assert build_cmdline(opts) == "--check --diff --tags slurm -e a=1 -e 'b='\"'\"'x y'\"'\"''"


def test_cmdline_passes_flush_cache():
    assert build_cmdline(RunOptions(inventory="inv", flush_cache=True)) == "--flush-cache"


def test_runs_keep_the_fact_cache_between_runs(tmp_path):
    """ansible-runner as configured by the CLI leaves ansible.cfg's fact cache (one directory for every
    run) in place; with its default it pointed the cache at each run's own artifact directory."""
    from ansible_runner.config.runner import RunnerConfig
    from gpufleet_cli.common import FACT_CACHE, ROOT
    from gpufleet_cli.runner import runner_kwargs

    kwargs = runner_kwargs(
        os.path.join(ROOT, "playbooks", "site.yml"), "inv", RunOptions(inventory="inv"), str(tmp_path), "one"
    )
    for key in ("quiet", "rotate_artifacts", "verbosity"):
        kwargs.pop(key)
    config = RunnerConfig(**kwargs)
    config.prepare()
    assert config.env["ANSIBLE_CACHE_PLUGIN_CONNECTION"] == FACT_CACHE == os.path.join(ROOT, ".cache", "facts")
    assert "--flush-cache" not in " ".join(config.command)


def test_summary_folds_plays_with_nothing_to_run_into_one_line():
    # A Slurm brief's Kubernetes plays match no host; provision's first step skips the
    # acceptance plays by tag, and its second run has them again with their tasks.
    tracker = EventTracker(clock=_clock())
    events = [
        play("Preflight"),
        task("t"),
        play("Kubernetes control plane"),
        play("NCCL acceptance"),
        stats(ok={"h": 1}),
        play("NCCL acceptance"),
        task("measure"),
        play("Kueue"),
        stats(ok={"h": 1}),
    ]
    for e in events:
        tracker.handle(e)
    text = tracker.summary()
    phase_lines = [line.strip() for line in text.splitlines() if line.startswith("    ")]
    assert [line.split(None, 1)[1] for line in phase_lines] == ["Preflight (1 tasks)", "NCCL acceptance (1 tasks)"]
    assert "  nothing to run in 2 more play(s): Kubernetes control plane; Kueue" in text
    # A long list wraps under its first line.
    for i in range(12):
        tracker.handle(play(f"Kubernetes stage number {i}"))
    wrapped = tracker.summary().split("  nothing to run in 14 more play(s): ", 1)[1].split("\n  hosts: ")[0]
    assert all(len(line) <= 110 and line.startswith("    ") for line in wrapped.splitlines()[1:])
    assert " ".join(line.strip() for line in wrapped.splitlines()).endswith("Kubernetes stage number 11")
    assert "(0 tasks)" not in text


def test_summary_has_no_idle_line_when_every_play_ran_tasks():
    tracker = EventTracker(clock=_clock())
    for e in HEALTHY:
        tracker.handle(e)
    assert "nothing to run" not in tracker.summary()


def test_stop_leftovers_kills_only_the_processes_of_its_run():
    """Workers of a killed ansible-playbook carry the run's mark in their environment: those are
    stopped, a process of another run (another mark) is not."""
    import subprocess

    from gpufleet_cli import runner as r

    ours = subprocess.Popen(["sleep", "60"], env={**os.environ, r.RUN_MARK: "1-ours"})
    theirs = subprocess.Popen(["sleep", "60"], env={**os.environ, r.RUN_MARK: "1-ours-too-long"})
    try:
        assert r.stop_leftovers("1-ours") == 1
        assert ours.wait(timeout=10) == -9
        assert theirs.poll() is None
        assert r.stop_leftovers("1-nobody") == 0
    finally:
        theirs.kill()
        theirs.wait()
        ours.kill()
