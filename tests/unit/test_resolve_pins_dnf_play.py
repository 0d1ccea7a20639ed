"""The GPU stack roles' Red Hat paths resolve their pins from a read-only dnf probe, through Ansible.

No Rocky host here: each role's setup-RedHat.yml runs on this machine with stand-ins for dnf and rpm on
PATH. The stand-in dnf answers `dnf --showduplicates list --available` in dnf 4's real format (headings,
name.arch / [epoch:]version-release / repository columns, a name.arch too wide for its column wrapped onto
a line of its own: dnf/cli/output.py, Output.simpleList / fmtColumns); NVIDIA's RHEL driver packages carry
epoch 3 (https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/). The figures are ours.
What is checked is the role's resolution task: its answer is the one listed version of the release, epoch
and release kept. The install after it needs dnf's Python bindings, which this machine lacks, so the run
stops there; the installs themselves are not tested here.
"""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest
from lab_playbook import VENV_BIN, ansible_env, local_hosts, task_results

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

REPO = "cuda-rhel9-x86_64"
LISTING = {
    "libnccl": ["2.26.2-1+cuda12.8", "2.26.2-1+cuda12.4", "2.27.7-1+cuda12.9"],
    "libnccl-devel": ["2.26.2-1+cuda12.8", "2.26.2-1+cuda12.4", "2.27.7-1+cuda12.9"],
    "datacenter-gpu-manager-4-core": ["1:4.2.3-1", "1:4.4.0-1"],
    "datacenter-gpu-manager-4-cuda12": ["1:4.2.3-1", "1:4.4.0-1"],
    "cuda-toolkit-12-8": ["12.8.0-1", "12.8.1-1"],
    "datacenter-gpu-manager-exporter": ["4.1.3-1", "4.8.4.3955-1"],
    "nvidia-driver-cuda": ["3:570.133.20-1.el9", "3:570.148.08-1.el9"],
    "kmod-nvidia-open-dkms": ["3:570.133.20-1.el9", "3:570.148.08-1.el9"],
    "nvidia-persistenced": ["3:570.133.20-1.el9", "3:570.148.08-1.el9"],
}

STUB = """#!/usr/bin/env python3
# Stand-in of {tool} (test double): dnf 4's list format for $RESOLVE_STUB_DIR/listing.json.
import json, os, sys
d = os.environ["RESOLVE_STUB_DIR"]
args = sys.argv[1:]
with open(os.path.join(d, "calls"), "a") as f:
    f.write(json.dumps(["{tool}", *args]) + "\\n")
if "{tool}" == "rpm":
    print("package " + args[-1] + " is not installed")
    sys.exit(1)
if "list" in args and "--available" in args:
    listing = json.load(open(os.path.join(d, "listing.json")))
    names = [a for a in args if not a.startswith("-") and a != "list"]
    rows = [(n, v) for n in names for v in listing.get(n, [])]
    if not rows:
        print("Error: No matching Packages to list", file=sys.stderr)
        sys.exit(1)
    print("Available Packages")
    for n, v in rows:
        na = n + ".x86_64"
        if len(na) > 38:
            print(na)
            print(" " * 39 + f"{{v:<38}}{REPO}")
        else:
            print(f"{{na:<39}}{{v:<38}}{REPO}")
    sys.exit(0)
sys.exit(0)
"""

BRIEF = {"software": {"driver": "570.133.20", "driver_flavor": "open", "cuda": "12.8", "nccl": "2.26.2"}}
FACTS = {
    "os_family": "RedHat",
    "distribution": "Rocky",
    "distribution_major_version": "9",
    "distribution_version": "9.6",
    "architecture": "x86_64",
}


@pytest.fixture
def site(tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for tool in ("dnf", "rpm"):
        path = stubs / tool
        path.write_text(STUB.format(tool=tool, REPO=REPO))
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "listing.json").write_text(json.dumps(LISTING))
    (tmp_path / "hosts").write_text(local_hosts("h1"))
    return tmp_path


def resolve(site: Path, role: str, **extra) -> dict:
    """The facts the role's resolution task set (it runs before the install, which fails here)."""
    play = f"""
- name: Resolve {role}'s pin
  hosts: h1
  gather_facts: false
  tasks:
    - name: Install {role}
      ansible.builtin.include_role:
        name: {role}
        tasks_from: setup-RedHat
"""
    (site / "play.yml").write_text(play)
    variables = {"gpufleet_brief": BRIEF, "ansible_facts": FACTS, "nvidia_driver_repo_manage": False} | extra
    (site / "vars.json").write_text(json.dumps(variables))
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts", "play.yml", "-e", "@vars.json"]
    env = ansible_env(site / "bin", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", RESOLVE_STUB_DIR=str(site))
    proc = subprocess.run(argv, cwd=site, env=env, capture_output=True, text=True, timeout=300, check=False)
    results = task_results(json.loads(proc.stdout))
    found = [r for n, _h, r in results if n.split(" : ")[-1].startswith("Resolve the ")]
    assert len(found) == 1, (proc.stdout[-3000:], proc.stderr[-2000:])
    return found[0]


def test_nccl_resolves_the_build_for_the_cuda_minor(site):
    result = resolve(site, "nccl", nccl_tests_enabled=False)
    assert result["ansible_facts"]["_nccl_dnf_resolved"] == {
        "libnccl": "2.26.2-1+cuda12.8",
        "libnccl-devel": "2.26.2-1+cuda12.8",
    }


def test_dcgm_keeps_the_epoch(site):
    result = resolve(site, "dcgm")
    assert result["ansible_facts"]["_dcgm_dnf_resolved"] == {
        "datacenter-gpu-manager-4-core": "1:4.2.3-1",
        "datacenter-gpu-manager-4-cuda12": "1:4.2.3-1",
    }


def test_cuda_and_the_exporter_resolve_their_release(site):
    assert resolve(site, "cuda")["ansible_facts"]["_cuda_dnf_resolved"] == {"cuda-toolkit-12-8": "12.8.1-1"}
    exporter = resolve(site, "dcgm_exporter")["ansible_facts"]["_dcgm_exporter_dnf_resolved"]
    assert exporter == {"datacenter-gpu-manager-exporter": "4.1.3-1"}


def test_the_driver_keeps_epoch_and_release_from_the_module_stream(site):
    result = resolve(site, "nvidia_driver", nvidia_driver_hold=False)
    assert result["ansible_facts"]["_nvidia_driver_dnf_resolved"] == {
        "nvidia-driver-cuda": "3:570.133.20-1.el9",
        "kmod-nvidia-open-dkms": "3:570.133.20-1.el9",
        "nvidia-persistenced": "3:570.133.20-1.el9",
    }


def test_a_release_the_repositories_lack_fails_naming_what_they_offer(site):
    result = resolve(site, "nccl", nccl_tests_enabled=False, nccl_version="2.28.3")
    assert result.get("failed")
    assert "libnccl: no version matches 2.28.3-*+cuda12.8*; the repositories offer 2.26.2-1+cuda12.8" in result["msg"]
    assert "software.nccl" in result["msg"]
