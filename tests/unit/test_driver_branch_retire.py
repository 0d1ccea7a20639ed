"""The nvidia_driver role's choice of the packages of another driver branch (tasks/retire-Debian.yml).

When the brief's driver moves to another branch, the installed packages named for the old branch
(Ubuntu's nvidia-driver-570-open, libnvidia-compute-570, nvidia-utils-570; the fabric manager's
nvidia-fabricmanager-570 and libnvidia-nscq-570, renamed without the branch from 580) are purged
before the new branch is installed. The role's own expression (vars/main.yml) is rendered here by
Ansible over a dpkg-query listing: it must pick exactly the old branch's packages and never a package
of this run, one without a branch in its name, one whose name ends in another number, or one that is
only a removed package's left-over configuration.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lab_playbook import ROOT, VENV_BIN, ansible_env

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

PLAY = f"""
- hosts: localhost
  gather_facts: false
  vars_files: [{ROOT}/roles/nvidia_driver/vars/main.yml]
  tasks:
    - ansible.builtin.copy:
        content: "{{{{ _nvidia_driver_other_branch_packages | to_json }}}}"
        dest: "{{{{ out }}}}"
        mode: "0644"
"""

# dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' 'nvidia-*' 'libnvidia-*' on an Ubuntu host at 570.
UBUNTU_570 = [
    "nvidia-driver-570-open ii ",
    "nvidia-dkms-570-open ii ",
    "libnvidia-compute-570 ii ",
    "nvidia-utils-570 ii ",
    "nvidia-persistenced hi ",
    "nvidia-fabricmanager-570 hi ",
    "libnvidia-nscq-570 hi ",
    "nvidia-gds-12-8 ii ",
    "libnvidia-container1 ii ",
    "libnvidia-container-tools ii ",
    "nvidia-utils-550 rc ",
]


def other_branch(tmp_path: Path, branch: str, this_run: list[str], listing: list[str]) -> list[str]:
    (tmp_path / "play.yml").write_text(PLAY)
    extra = {
        "nvidia_driver_branch": branch,
        "_nvidia_driver_all_packages": this_run,
        "__nvidia_driver_dpkg_branches": {"stdout_lines": listing},
        "out": str(tmp_path / "out.json"),
        "ansible_python_interpreter": sys.executable,
    }
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    proc = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "play.yml", "-e", "@extra.json"],
        cwd=tmp_path,
        env=ansible_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads((tmp_path / "out.json").read_text())


def test_moving_to_580_on_ubuntu_purges_exactly_the_570_packages(tmp_path):
    this_run = ["nvidia-driver-580-open", "nvidia-dkms-580-open", "nvidia-persistenced"]
    this_run += ["nvidia-fabricmanager", "libnvidia-nscq"]
    assert other_branch(tmp_path, "580", this_run, UBUNTU_570) == [
        "nvidia-driver-570-open",
        "nvidia-dkms-570-open",
        "libnvidia-compute-570",
        "nvidia-utils-570",
        "nvidia-fabricmanager-570",
        "libnvidia-nscq-570",
    ]


def test_moving_to_580_on_debian_purges_the_branch_named_fabric_manager_only(tmp_path):
    listing = [
        "nvidia-driver-cuda ii ",
        "nvidia-kernel-open-dkms ii ",
        "nvidia-smi ii ",
        "nvidia-persistenced hi ",
        "nvidia-fabricmanager-570 hi ",
    ]
    this_run = ["nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-persistenced", "nvidia-fabricmanager"]
    assert other_branch(tmp_path, "580", this_run, listing) == ["nvidia-fabricmanager-570"]


def test_a_run_on_the_installed_branch_purges_nothing(tmp_path):
    this_run = ["nvidia-driver-570-open", "nvidia-dkms-570-open", "nvidia-persistenced"]
    this_run += ["nvidia-fabricmanager-570", "libnvidia-nscq-570"]
    assert other_branch(tmp_path, "570", this_run, UBUNTU_570) == []
