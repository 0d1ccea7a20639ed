"""Run ansible-playbook from the project venv on the lab inventory, for tests of plays that connect
to no host (preflight, the brief role): the lab need not be up."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
HAVE_VENV = (VENV_BIN / "ansible-playbook").exists()


def run_lab_playbook(playbook: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """ansible-playbook -i inventories/lab ARGS PLAYBOOK with the project's configuration, plain
    linear strategy, no colour and the lab brief; never raises on a failed run."""
    env = dict(
        os.environ,
        PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}",
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(ROOT / "roles"),
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STRATEGY="linear",
        GPUFLEET_BRIEF=str(ROOT / "inventories/lab/brief.yml"),
    )
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(ROOT / "inventories/lab"), *args, str(playbook)]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False)
