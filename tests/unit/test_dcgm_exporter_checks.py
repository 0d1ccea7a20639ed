"""The dcgm_exporter role refuses bad settings before it installs anything, naming each one with what
was expected and what was found; an unknown DCGM release leaves no exporter release to guess. The
role runs on localhost (local connection, --check) with only its `always` tasks, so nothing is installed here."""

from __future__ import annotations

import json
import subprocess

import pytest
from lab_playbook import HAVE_VENV, ROOT, VENV_BIN, ansible_env

pytestmark = pytest.mark.skipif(not HAVE_VENV, reason="needs the project venv (make venv)")

PLAY = """
- name: The exporter role on this machine, its checks only
  hosts: localhost
  gather_facts: false
  vars:
    gpufleet_brief: {software: {cuda: "12.8"}}
  roles:
    - role: dcgm_exporter
"""


def _run(tmp_path, **extra) -> subprocess.CompletedProcess:
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    # --check, and a tag no task has: only the role's `always` tasks run (facts, its checks).
    argv = [str(VENV_BIN / "ansible-playbook"), "-c", "local", "-i", "localhost,", str(play), "--check"]
    argv += ["--tags", "no_task_has_this_tag"]
    argv += ["-e", json.dumps({"ansible_python_interpreter": str(VENV_BIN / "python"), **extra})]
    return subprocess.run(argv, cwd=ROOT, env=ansible_env(), capture_output=True, text=True, timeout=180, check=False)


def test_every_bad_setting_is_named_at_once(tmp_path):
    proc = _run(
        tmp_path,
        dcgm_version="4.3.1",
        dcgm_exporter_counters=[["DCGM_FI_DEV_GPU_TEMP", "gauge", "ok"], ["bad", "gauge", "x"]],
        dcgm_exporter_job_mapping_dir="rel/dir",
    )
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode != 0, out[-2000:]
    assert "dcgm_exporter_version: expected an exact release such as 4.1.3, found ''" in out
    assert "no exporter release is known to pair with DCGM 4.3.1; known: 4.2.3, 4.4.0" in out
    assert 'found [["bad", "gauge", "x"]]' in out
    assert "dcgm_exporter_job_mapping_dir: expected empty or an absolute path, found 'rel/dir'" in out
    assert "TASK [dcgm_exporter : Check the DCGM exporter settings] " in out


def test_a_known_dcgm_release_passes_the_check(tmp_path):
    proc = _run(tmp_path, dcgm_version="4.4.0")
    out = " ".join((proc.stdout + proc.stderr).split())
    assert proc.returncode == 0, out[-2000:]
    assert "TASK [dcgm_exporter : Check the DCGM exporter settings] " in out
