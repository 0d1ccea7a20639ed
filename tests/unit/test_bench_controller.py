"""scripts/bench_controller runs its plays on a small synthetic site: the firewall role's variables it
reads still exist, every play passes (its last task checks the members are every host's address),
and it prints a row per size for every part. Figures are not checked: they are the benchmark's."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from lab_playbook import ROOT, VENV_BIN

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")


def test_it_runs_every_part_on_a_small_site():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_controller"), "--scan-max", "4", "4"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines() if re.match(r"^\s+6\s", line)]
    # 4 GPU nodes and 2 controllers: one row of addresses (base, map and scan all run), one of skips,
    # one of facts set in the controller, one per way of running the events' play.
    assert len(rows) == 6, proc.stdout
    assert all(re.fullmatch(r"\d+\.\d+s", cell) for cell in rows[0][1:4]), rows[0]
    for row in rows[1:3]:
        assert all(re.fullmatch(r"\d+\.\d+s", cell) for cell in row[1:3]), row
    files = {row[1]: int(row[-1]) for row in rows[3:]}
    assert set(files) == {"plain", "cli", "all"}, rows[3:]
    # The CLI's handler keeps the play's and tasks' starts and the recap, not the 60 results that
    # changed nothing, which every-event-kept writes (with each host's start) as a file each.
    assert files["plain"] == 0
    assert 12 <= files["cli"] <= 20, files
    assert files["all"] >= files["cli"] + 120, files
