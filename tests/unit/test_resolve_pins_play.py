"""The GPU stack roles' apt installs resolve their pins against the repository, through Ansible.

Each role's setup-Debian.yml runs in a play on this machine, in check mode, with stand-ins for dpkg-query
(nothing installed: a fresh host), apt-cache (madison lists the test doubles' repository: the cited version
strings of molecule/resources/doubles/matrix_packages.py, in apt's "<package> | <version> | <URI> Packages"
rows) and apt-get / apt-mark (which must not change anything). What each role's pinned_packages task
returns as `resolved` is the repository's version, irregular revision and all: a role that spelled its
version by rule (-1, -1+cuda<minor>) would ask for one the repository does not have. Without --check, a
release the repository lacks fails before apt-get runs, naming what the repository does offer.
"""

from __future__ import annotations

import importlib.util
import json
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from lab_playbook import VENV_BIN, ansible_env, local_hosts, task_results

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

_spec = importlib.util.spec_from_file_location(
    "matrix_packages", ROOT / "molecule/resources/doubles/matrix_packages.py"
)
mp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mp)

STUB = """#!/usr/bin/env python3
# Stand-in of {tool} (test double): the doubles' repository, nothing installed; apt's output formats.
import json, os, sys
d = os.environ["RESOLVE_STUB_DIR"]
args = sys.argv[1:]
with open(os.path.join(d, "calls"), "a") as f:
    f.write(json.dumps(["{tool}", *args]) + "\\n")
repo = json.load(open(os.path.join(d, "repo.json")))
if "{tool}" == "dpkg-query":
    for name in [a for a in args if not a.startswith("-")]:
        print(f"dpkg-query: no packages found matching {{name}}", file=sys.stderr)
    sys.exit(1)
if "{tool}" == "apt-cache" and args[0] == "madison":
    uri = "file:/srv/gpufleet-doubles-repo/cuda/repos/debian12/x86_64"
    for name in args[1:]:
        for version in repo.get(name, []):
            print(f"{{name:>10}} | {{version:>10}} | {{uri}}  Packages")
    sys.exit(0)
if "{tool}" == "apt-mark" and args[0] == "showhold":
    sys.exit(0)
print("{tool} must not run here", file=sys.stderr)
sys.exit(3)
"""

ROLES = ["nvidia_driver", "cuda", "nccl", "dcgm", "container_runtime"]
PLAY = """
- name: Resolve the GPU stack's pins
  hosts: h1
  gather_facts: false
  tasks:
{includes}
"""
INCLUDE = """    - name: Install {role}
      ansible.builtin.include_role:
        name: {role}
        tasks_from: setup-Debian
"""


@pytest.fixture
def site(tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for tool in ("dpkg-query", "apt-cache", "apt-get", "apt-mark"):
        path = stubs / tool
        path.write_text(STUB.format(tool=tool))
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    repo: dict[str, list[str]] = {}
    for p in mp.packages():
        repo.setdefault(p.name, []).append(p.package_version)
    (tmp_path / "repo.json").write_text(json.dumps(repo))
    (tmp_path / "hosts").write_text(local_hosts("h1"))
    lab = yaml.safe_load((ROOT / "inventories/lab/brief.yml").read_text())
    variables = {
        "gpufleet_brief": lab,
        "gpufleet_pool": {"name": "h100", "topology": "8gpu-sxm-nvlink"},
        "ansible_facts": {
            "os_family": "Debian",
            "distribution": "Debian",
            "distribution_major_version": "12",
            "distribution_version": "12",
            "architecture": "x86_64",
        },
        # The repositories are the stand-in's; their sources, keys and apt preferences are not under test.
        "nvidia_driver_repo_manage": False,
        "nvidia_driver_hold": False,
        "container_runtime_toolkit_repo_manage": False,
        "nccl_tests_enabled": False,
    }
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    return tmp_path


def run(site: Path, *args: str, roles: list[str] = ROLES, **overrides) -> subprocess.CompletedProcess:
    (site / "play.yml").write_text(PLAY.format(includes="".join(INCLUDE.format(role=r) for r in roles)))
    variables = json.loads((site / "vars.json").read_text()) | overrides
    (site / "run.json").write_text(json.dumps(variables))
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts", "play.yml", "-e", "@run.json", *args]
    env = ansible_env(site / "bin", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", RESOLVE_STUB_DIR=str(site))
    return subprocess.run(argv, cwd=site, env=env, capture_output=True, text=True, timeout=300, check=False)


def calls(site: Path) -> list[list[str]]:
    log = site / "calls"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_every_role_installs_the_version_the_repository_offers(site):
    proc = run(site, "--check")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    resolved: dict[str, str] = {}
    for name, _host, result in task_results(json.loads(proc.stdout)):
        if "resolved" in result:
            assert result["unavailable"] == [], (name, result["unavailable"])
            resolved |= result["resolved"]
    published = mp.PUBLISHED
    driver, cuda, nccl = "570.133.20", "12.8.1", "2.26.2"
    # The driver at the revision NVIDIA's Debian repository gives it (cited), the NCCL re-spin.
    assert resolved["nvidia-driver-cuda"] == published[("driver", driver, "debian")].version == "570.133.20-1"
    assert resolved["nvidia-persistenced"] == published[("driver", driver, "debian")].version
    assert (
        resolved["nvidia-fabricmanager-570"] == published[("fabricmanager", driver, "debian")].version == "570.133.20-1"
    )
    assert resolved["cuda-toolkit-12-8"] == published[("cuda", cuda)].version
    assert resolved["libnccl2"] == resolved["libnccl-dev"] == published[("nccl", nccl, "12.8")].version
    assert resolved["datacenter-gpu-manager-4-core"] == published[("dcgm", "4.2.3")].version
    assert resolved["nvidia-container-toolkit"] == published[("container-toolkit", "1.17.5")].version
    # Check mode: the repository was asked, nothing was installed or held.
    assert not [c for c in calls(site) if c[0] in ("apt-get", "apt-mark") and c[1] != "showhold"]
    assert ["apt-cache", "madison", "libnccl2", "libnccl-dev"] in calls(site)


def test_a_release_the_repository_lacks_fails_before_any_change_naming_the_offer(site):
    proc = run(site, roles=["nccl"], nccl_version="2.27.7")
    assert proc.returncode != 0
    failed = [r for _n, _h, r in task_results(json.loads(proc.stdout)) if r.get("failed")]
    assert len(failed) == 1, failed
    msg = failed[0]["msg"]
    assert "libnccl2: no version matches 2.27.7-*+cuda12.8*; the repositories offer " in msg
    assert "2.26.2-2+cuda12.8" in msg and "software.nccl" in msg
    assert not [c for c in calls(site) if c[0] == "apt-get"]


def test_an_exact_version_set_in_the_inventory_is_asked_for_as_given(site):
    proc = run(site, "--check", roles=["nccl"], nccl_package_version="2.26.2-1+cuda12.4")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert ["apt-cache", "show", "libnccl2=2.26.2-1+cuda12.4", "libnccl-dev=2.26.2-1+cuda12.4"] in calls(site)


def test_the_driver_role_on_ubuntu_installs_the_ubuntu_trees_revisions(site):
    """On an Ubuntu 24.04 host against the Ubuntu tree (ubuntu2404/): the driver's revision follows the
    release (-0ubuntu1 for the pin, -1ubuntu1 for the newer one) and the fabric manager's is -1; none is
    Debian's -1 the Debian tree carries, so a role that spelled either layout's revision by rule would
    ask this repository for a version it does not have."""
    repo: dict[str, list[str]] = {}
    for p in mp.ubuntu_packages():
        repo.setdefault(p.name, []).append(p.package_version)
    (site / "repo.json").write_text(json.dumps(repo))
    ubuntu = {
        "os_family": "Debian",
        "distribution": "Ubuntu",
        "distribution_major_version": "24",
        "distribution_version": "24.04",
        "distribution_release": "noble",
        "architecture": "x86_64",
    }
    proc = run(site, "--check", roles=["nvidia_driver"], ansible_facts=ubuntu)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    resolved: dict[str, str] = {}
    for _name, _host, result in task_results(json.loads(proc.stdout)):
        resolved |= result.get("resolved", {})
    driver = "570.133.20"
    ubuntu_driver = mp.PUBLISHED[("driver", driver, "ubuntu")].version
    assert ubuntu_driver == "570.133.20-0ubuntu1" != mp.PUBLISHED[("driver", driver, "debian")].version
    assert resolved["nvidia-driver-570-open"] == resolved["nvidia-persistenced"] == ubuntu_driver
    assert resolved["nvidia-fabricmanager-570"] == mp.PUBLISHED[("fabricmanager", driver, "ubuntu")].version
