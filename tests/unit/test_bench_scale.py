"""scripts/bench_scale: the sizes it is given, the steps it runs for each, the table it prints, and
the 2-node lab it puts back; the gpufleet commands are stand-ins (no lab is touched)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    loader = importlib.machinery.SourceFileLoader("bench_scale", str(ROOT / "scripts/bench_scale"))
    spec = importlib.util.spec_from_loader("bench_scale", loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_scale"] = module
    loader.exec_module(module)
    return module


bench = load_bench()

SUMMARY = """Summary
  host         ok changed failed unreach skipped
  lab-ctl01   206      {c}      0       0      71
  lab-gpu01   312      {c}      0       0      84
  hosts: 2 total, 2 ok, 0 changed, 0 failed, 0 unreachable
NCCL acceptance: PASS; report reports/lab/x/acceptance.md (scripts/gpufleet report)
"""


def fake_gpufleet(monkeypatch, fail=None):
    calls = []

    def timed(*args):
        calls.append(list(args))
        rc = 1 if fail and list(args[: len(fail)]) == fail else 0
        first = sum(1 for c in calls if c[0] == "provision") % 2 == 1
        return rc, 100.0 if first else 20.0, 30.0, SUMMARY.format(c=50 if first else 0)

    monkeypatch.setattr(bench, "timed", timed)
    monkeypatch.setattr(bench, "busy_scenarios", lambda: [])
    return calls


@pytest.fixture(autouse=True)
def _strategy_env(monkeypatch):
    """main() sets ANSIBLE_STRATEGY for the commands it starts: restored after each test."""
    monkeypatch.setenv("ANSIBLE_STRATEGY", "gpufleet.cluster.mitogen_linear")


def test_each_size_is_a_fresh_lab_provisioned_twice_and_accepted_then_the_lab_is_put_back(monkeypatch, capsys):
    calls = fake_gpufleet(monkeypatch)
    assert bench.main(["4"]) == 0
    inv = bench.INVENTORY
    assert calls == [
        ["lab", "down"],
        ["lab", "up", "--gpu-nodes", "4"],
        ["provision", "-i", inv, "--no-progress"],
        ["provision", "-i", inv, "--no-progress"],
        ["accept", "-i", inv, "--no-progress"],
        ["lab", "up"],
        ["provision", "-i", inv, "--no-progress"],
    ]
    row = capsys.readouterr().out.splitlines()[1].split()
    # N, hosts, first, changed, cpu/host, no-op, changed, cpu/host, ratio, accept, cpu/host, verdict
    assert row[:12] == ["4", "5", "100.0s", "100", "6.0s", "20.0s", "0", "6.0s", "20%", "20.0s", "6.0s", "PASS"]


def test_a_failed_step_stops_the_sizes_and_still_restores(monkeypatch, capsys):
    calls = fake_gpufleet(monkeypatch, fail=["lab", "up", "--gpu-nodes", "4"])
    assert bench.main(["4", "8"]) == 1
    assert ["lab", "up", "--gpu-nodes", "8"] not in calls
    assert calls[-2:] == [["lab", "up"], ["provision", "-i", bench.INVENTORY, "--no-progress"]]
    assert "lab up --gpu-nodes 4 failed" in capsys.readouterr().err


def test_no_restore_leaves_the_last_size(monkeypatch):
    calls = fake_gpufleet(monkeypatch)
    assert bench.main(["--no-restore", "2"]) == 0
    assert calls[-1][0] == "accept"
