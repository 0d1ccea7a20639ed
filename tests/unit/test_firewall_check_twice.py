"""The firewall's checks run twice in one run (security.yml checks every host first, the role checks
again before it changes anything). The second pass must keep the fabric interfaces the first read:
a read that is skipped the second time registers its skip over the first result, and a firewall
built from that has no fabric rules. Played on localhost with a stand-in `ip` that prints a GPU
node's `ip -j -4 address show` (two interfaces on the brief's rails), and the firewall's check
tasks run twice, then the spec's fabric interfaces printed."""

from __future__ import annotations

import json
import subprocess

import pytest
from lab_playbook import HAVE_VENV, ROOT, VENV_BIN, ansible_env

pytestmark = pytest.mark.skipif(not HAVE_VENV, reason="needs the project venv (make venv)")

IP_JSON = [
    {"ifindex": 1, "ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
    {"ifindex": 2, "ifname": "eth0", "addr_info": [{"family": "inet", "local": "10.250.10.11", "prefixlen": 24}]},
    {"ifindex": 5, "ifname": "ibp24s0", "addr_info": [{"family": "inet", "local": "10.250.20.11", "prefixlen": 24}]},
    {"ifindex": 6, "ifname": "ibp41s0", "addr_info": [{"family": "inet", "local": "10.250.21.11", "prefixlen": 24}]},
]

PLAY = """
- name: The firewall's checks, twice, as one security.yml run does
  hosts: localhost
  gather_facts: false
  tasks:
    - name: First pass
      ansible.builtin.include_role:
        name: firewall
        tasks_from: check.yml
    - name: Second pass
      ansible.builtin.include_role:
        name: firewall
        tasks_from: check.yml
    - name: Show the fabric interfaces
      ansible.builtin.debug:
        msg: "FABRIC={{ _firewall_spec.fabric_interfaces | to_json }}"
"""


def test_the_second_pass_keeps_the_fabric_interfaces(tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "ip.json").write_text(json.dumps(IP_JSON))
    ip = stubs / "ip"
    ip.write_text(f'#!/bin/sh\necho "ip $*" >> {tmp_path}/calls\ncat {stubs}/ip.json\n')
    ip.chmod(0o755)
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    brief = {
        "cluster": {"control_plane": "slurm"},
        "controllers": {"group": "slurm_controllers"},
        "pools": [],
        "networks": {"fabric": {"rails": [{"cidr": "10.250.20.0/24"}, {"cidr": "10.250.21.0/24"}]}},
    }
    extra = {
        "ansible_python_interpreter": str(VENV_BIN / "python"),
        "gpufleet_brief": brief,
        "firewall_management_sources": ["10.250.10.0/24"],
    }
    argv = [str(VENV_BIN / "ansible-playbook"), "-c", "local", "-i", "localhost,", str(play), "-e", json.dumps(extra)]
    proc = subprocess.run(
        argv, cwd=ROOT, env=ansible_env(stubs), capture_output=True, text=True, timeout=180, check=False
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert 'FABRIC=["ibp24s0", "ibp41s0"]' in out, out[-3000:]
    # Read once for the run, not once per pass.
    assert (tmp_path / "calls").read_text().splitlines() == ["ip -j -4 address show"]
