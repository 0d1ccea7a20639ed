"""Run ansible-playbook from the project venv on the lab inventory, for tests of plays that connect
to no host (preflight, the brief role): the lab need not be up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
HAVE_VENV = (VENV_BIN / "ansible-playbook").exists()


# A controller and a two-node pool, all local: for plays whose commands are stand-ins on PATH.
LOCAL_POOL_INVENTORY = """all:
  vars:
    ansible_connection: local
  children:
    slurm_controllers:
      hosts: {ctl01: {}}
    gpu_lab:
      hosts: {gpu01: {}, gpu02: {}}
"""

# A stand-in sinfo: logs its arguments to $STUB_DIR/calls and prints $STUB_DIR/sinfo.
SINFO_STUB = """#!/bin/sh
echo "sinfo $*" >> "$STUB_DIR/calls"
cat "$STUB_DIR/sinfo"
"""


def ansible_env(stubs: Path | None = None, **extra: str) -> dict:
    """The environment of an ansible-playbook run with the project's configuration, plain linear
    strategy and no colour; ``stubs`` (stand-in commands) first on PATH, then the venv."""
    path = f"{VENV_BIN}:{os.environ.get('PATH', '')}"
    return dict(
        os.environ,
        PATH=f"{stubs}:{path}" if stubs else path,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(ROOT / "roles"),
        ANSIBLE_COLLECTIONS_PATH=str(ROOT / "collections"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_STRATEGY="linear",
        **extra,
    )


# The lab's brief turns every acceptance gate on; a play test of one part of the acceptance runs on
# it without those it does not test (GPU diagnostics, the collectives' floors), which would look for
# dcgmi and nccl-tests binaries this machine does not have. A test of a gate sets its own.
LAB_BRIEF_GATES = ("dcgm_diag", "collectives")


def lab_brief_without_gates(tmp_path: Path, gates: tuple[str, ...] = LAB_BRIEF_GATES) -> Path:
    """A copy of inventories/lab/brief.yml under ``tmp_path`` without ``acceptance.<gate>`` for each gate."""
    import yaml

    brief = yaml.safe_load((ROOT / "inventories/lab/brief.yml").read_text(encoding="utf-8"))
    for gate in gates:
        brief["acceptance"].pop(gate, None)
    path = tmp_path / "lab-brief-without-gates.yml"
    path.write_text(yaml.safe_dump(brief, sort_keys=False), encoding="utf-8")
    return path


def run_lab_playbook(playbook: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """ansible-playbook -i inventories/lab ARGS PLAYBOOK with the project's configuration, plain
    linear strategy, no colour and the lab brief; never raises on a failed run."""
    env = ansible_env(GPUFLEET_BRIEF=str(ROOT / "inventories/lab/brief.yml"))
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(ROOT / "inventories/lab"), *args, str(playbook)]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=180, check=False)


def local_hosts(*names: str) -> str:
    """An INI inventory of these names, all this machine (local connection, the venv's Python)."""
    return "".join(f"{name} ansible_connection=local ansible_python_interpreter={sys.executable}\n" for name in names)


def task_results(output: dict) -> list[tuple[str, str, dict]]:
    """(task name, host, result) for every task of the JSON callback's output, hosts in name order."""
    return [
        (task["task"]["name"], host, result)
        for play in output["plays"]
        for task in play["tasks"]
        for host, result in sorted(task["hosts"].items())
    ]


def write_local_play(play_dir: Path, play: str, templates: dict[str, str]) -> None:
    """A play (play.yml) on one local host h1 run by the venv's Python, with these templates."""
    (play_dir / "templates").mkdir()
    for name, text in templates.items():
        (play_dir / "templates" / name).write_text(text)
    (play_dir / "play.yml").write_text(play)
    (play_dir / "hosts").write_text(local_hosts("h1"))


def run_local_play(play_dir: Path, *args: str) -> dict[str, dict]:
    """Run play_dir's play.yml (write_local_play) with ARGS and ``d`` set to play_dir/out; each task's (and
    handler's) result on h1, by task name, from the JSON callback. Fails the test when the run fails."""
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts", "play.yml", "-e", f"d={play_dir / 'out'}", *args]
    proc = subprocess.run(argv, cwd=play_dir, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    return {t["task"]["name"]: t["hosts"]["h1"] for p in out["plays"] for t in p["tasks"]}
