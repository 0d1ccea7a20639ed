"""site.yml's acceptance tag: `--skip-tags acceptance` converges without measuring again, the
hardware gate still runs; `--tags acceptance` keeps the acceptance (ansible-playbook --list-tasks,
no host is contacted)."""

from __future__ import annotations

import pytest
from lab_playbook import HAVE_VENV, ROOT, run_lab_playbook

pytestmark = pytest.mark.skipif(not HAVE_VENV, reason="needs the project venv (make venv)")


def _tasks(*args: str) -> str:
    proc = run_lab_playbook(ROOT / "playbooks/site.yml", "--list-tasks", *args, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_skip_tags_acceptance_keeps_the_gate_and_the_install_stages():
    everything = _tasks()
    skipped = _tasks("--skip-tags", "acceptance")
    assert "acceptance : " in everything
    assert "acceptance : " not in skipped
    for kept in ("hardware_gate : ", "nvidia_driver : ", "slurm_node : ", "firewall : "):
        assert kept in skipped, kept


def test_tags_acceptance_lists_the_acceptance():
    only = _tasks("--tags", "acceptance")
    assert "acceptance : " in only
    assert "Workload acceptance (Slurm or Kubernetes)" in only
    assert "nvidia_driver : Install" not in only
