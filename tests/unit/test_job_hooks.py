"""The Slurm job hook dispatcher (roles/slurm_node): rendered and run with bash."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import jinja2
import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "roles/slurm_node/templates/usr/local/sbin/gpufleet-job-hooks.j2"


@pytest.fixture
def hooks(tmp_path):
    """The dispatcher rendered into tmp_path, linked as gpufleet-prolog / gpufleet-epilog."""
    env = jinja2.Environment(keep_trailing_newline=True)
    env.filters["comment"] = lambda text: "# " + text
    text = env.from_string(TEMPLATE.read_text()).render(
        ansible_managed="managed by test",
        slurm_node_prolog_dir=str(tmp_path / "prolog.d"),
        slurm_node_epilog_dir=str(tmp_path / "epilog.d"),
    )
    script = tmp_path / "gpufleet-job-hooks"
    script.write_text(text)
    script.chmod(0o755)
    for kind in ("prolog", "epilog"):
        (tmp_path / f"{kind}.d").mkdir()
        (tmp_path / f"gpufleet-{kind}").symlink_to(script)
    return tmp_path


def hook(base: Path, kind: str, name: str, body: str, mode: int = 0o755) -> None:
    path = base / f"{kind}.d" / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(mode)


def run(base: Path, kind: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, SLURM_JOB_ID="4242", SLURM_JOB_USER="alice", MARK=str(base / "marks"))
    return subprocess.run([str(base / f"gpufleet-{kind}")], env=env, capture_output=True, text=True, check=False)


def marks(base: Path) -> list[str]:
    path = base / "marks"
    return path.read_text().split() if path.exists() else []


def test_hooks_run_in_name_order_with_the_job_environment(hooks):
    hook(hooks, "prolog", "20-second", 'echo "b:$SLURM_JOB_ID" >> "$MARK"')
    hook(hooks, "prolog", "10-first", 'echo "a:$SLURM_JOB_USER" >> "$MARK"')
    assert run(hooks, "prolog").returncode == 0
    assert marks(hooks) == ["a:alice", "b:4242"]


def test_non_executable_and_backup_files_are_skipped(hooks):
    hook(hooks, "epilog", "10-off", 'echo off >> "$MARK"', mode=0o644)
    hook(hooks, "epilog", "20-old.dpkg-old", 'echo old >> "$MARK"')
    hook(hooks, "epilog", "30-on", 'echo on >> "$MARK"')
    assert run(hooks, "epilog").returncode == 0
    assert marks(hooks) == ["on"]


def test_a_failing_prolog_hook_stops_the_prolog(hooks):
    hook(hooks, "prolog", "10-fails", "exit 3")
    hook(hooks, "prolog", "20-never", 'echo never >> "$MARK"')
    assert run(hooks, "prolog").returncode == 3
    assert marks(hooks) == []


def test_an_epilog_runs_every_hook_and_reports_the_failure(hooks):
    hook(hooks, "epilog", "10-fails", "exit 4")
    hook(hooks, "epilog", "20-still-runs", 'echo cleaned >> "$MARK"')
    assert run(hooks, "epilog").returncode == 4
    assert marks(hooks) == ["cleaned"]


def test_empty_hook_directories_succeed(hooks):
    assert run(hooks, "prolog").returncode == 0
    assert run(hooks, "epilog").returncode == 0


def test_an_unknown_name_is_refused(hooks):
    result = subprocess.run([str(hooks / "gpufleet-job-hooks")], capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "gpufleet-prolog or gpufleet-epilog" in result.stderr
