"""scripts/bench_ab: no commit or no lab handled, ansible-playbook's recap read, the report computed."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    loader = importlib.machinery.SourceFileLoader("bench_ab", str(ROOT / "scripts/bench_ab"))
    spec = importlib.util.spec_from_loader("bench_ab", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


bench = load_bench()

RECAP = """
TASK [firewall : Start and enable nftables] ************************************
ok: [lab-ctl01]

PLAY RECAP *********************************************************************
lab-ctl01                  : ok=122  changed=0    unreachable=0    failed=0    skipped=61   rescued=0    ignored=0
lab-gpu01                  : ok=202  changed=5    unreachable=0    failed=0    skipped=84   rescued=0    ignored=0
lab-gpu02                  : ok=194  changed=1    unreachable=1    failed=2    skipped=85   rescued=0    ignored=0
"""


def test_the_recap_sums_changed_and_failed_results_over_the_hosts():
    assert bench.recap_changed(RECAP) == (6, 3)


def test_only_the_last_recap_counts():
    first = RECAP.replace("changed=5", "changed=9")
    assert bench.recap_changed(first + RECAP) == (6, 3)


def test_output_without_a_recap_is_an_error():
    with pytest.raises(ValueError, match="no PLAY RECAP"):
        bench.recap_changed("ERROR! the playbook could not be parsed")


def test_the_report_gives_medians_and_the_difference():
    times = {"rev": [50.0, 49.0, 53.0], "tree": [46.0, 47.5, 45.0]}
    report = bench.format_report("e4e3897", times, {"rev": [0, 0, 0], "tree": [0, 2, 0]})
    assert "median       50.0 s        46.0 s" in report
    assert "this tree - e4e3897: -4.0 s (-8.0 %)" in report
    assert "changed results: e4e3897 0, this tree 2" in report


def test_without_a_commit_it_says_how_and_exits_0(capsys):
    assert bench.main([]) == 0
    assert "scripts/bench_ab REV" in capsys.readouterr().out


def test_without_the_lab_it_says_so_and_exits_0(monkeypatch, capsys):
    monkeypatch.setattr(bench, "lab_up", lambda: False)
    assert bench.main(["HEAD~1"]) == 0
    assert "lab not up" in capsys.readouterr().out
