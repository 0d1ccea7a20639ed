"""The SSH policy's and the firewall's checks run once per host and run: playbooks/security.yml
checks every host first, and the roles then skip the checks that passed in this run; a role run on
its own (no first pass) still checks before it changes anything. Played on localhost with stand-in
`id` and `ip` commands that log their calls; only the check tags run, so nothing of the machine is
changed (a preview, limited to the checks' tags)."""

from __future__ import annotations

import json
import subprocess

import pytest
from lab_playbook import HAVE_VENV, ROOT, VENV_BIN, ansible_env

pytestmark = pytest.mark.skipif(not HAVE_VENV, reason="needs the project venv (make venv)")

IP_JSON = [
    {"ifindex": 1, "ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}]},
    {"ifindex": 2, "ifname": "eth0", "addr_info": [{"family": "inet", "local": "10.250.10.11", "prefixlen": 24}]},
]

FIRST_PASS = """
    - name: First pass (as security.yml)
      ansible.builtin.include_role:
        name: "{{ item }}"
        tasks_from: check.yml
        apply:
          tags: [always]
      loop: [ssh_hardening, firewall]
      tags: [always]
"""

# The roles' own tags select their tasks: with --tags of the checks only the checks run, and the run
# is a preview (--check) besides, so no task of the roles can change this machine.
ROLES = """
    - name: The roles
      ansible.builtin.include_role:
        name: "{{ item }}"
      loop: [ssh_hardening, firewall]
      tags: [always]
"""


def run(tmp_path, first_pass: bool, **extra_vars) -> tuple[subprocess.CompletedProcess, list[str]]:
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    calls = tmp_path / "calls"
    (stubs / "ip.json").write_text(json.dumps(IP_JSON))
    for name, out in (("id", "echo root"), ("ip", f"cat {stubs}/ip.json")):
        (stubs / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\n{out}\n')
        (stubs / name).chmod(0o755)
    play = tmp_path / "play.yml"
    head = "- name: Checks\n  hosts: localhost\n  gather_facts: false\n  tasks:\n"
    play.write_text(head + (FIRST_PASS if first_pass else "") + ROLES)
    brief = {
        "cluster": {"control_plane": "slurm"},
        "controllers": {"group": "slurm_controllers"},
        "pools": [],
        "networks": {"fabric": {"rails": [{"cidr": "10.250.20.0/24"}]}},
    }
    extra = {
        "ansible_python_interpreter": str(VENV_BIN / "python"),
        # The account Ansible connects as, as an inventory names it (the play gathers no facts, and
        # a fact cache left by another test must not decide this one).
        "ansible_user": "root",
        "gpufleet_brief": brief,
        "firewall_management_sources": ["10.250.10.0/24"],
        **extra_vars,
    }
    argv = [
        *(str(VENV_BIN / "ansible-playbook"), "-c", "local", "-i", "localhost,", str(play)),
        *("--check", "--tags", "ssh_hardening_check,firewall_check", "-e", json.dumps(extra)),
    ]
    env = ansible_env(stubs, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    return proc, calls.read_text().split("\n")[:-1] if calls.exists() else []


def ran(proc: subprocess.CompletedProcess, name: str) -> int:
    """How many times the task of that name (after its "role : ") ran and was not skipped."""
    out = json.loads(proc.stdout)
    tasks = [t for p in out["plays"] for t in p["tasks"]]
    results = [t["hosts"]["localhost"] for t in tasks if t["task"]["name"].split(" : ", 1)[-1] == name]
    return sum(not r.get("skipped") for r in results)


@pytest.mark.parametrize("first_pass", [True, False])
def test_each_check_runs_once_whether_or_not_a_first_pass_ran(tmp_path, first_pass):
    proc, calls = run(tmp_path, first_pass)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert calls.count("id -Gn root") == 1, calls
    assert ran(proc, "Refuse a policy that would lock out the account Ansible connects as") == 1
    assert ran(proc, "Check the firewall settings") == 1
    assert ran(proc, "Refuse a firewall that would close SSH to Ansible's own connection") == 1


def test_a_role_run_alone_still_refuses_a_lock_out(tmp_path):
    proc, _ = run(tmp_path, False, ssh_hardening_allow_groups=["gpufleet-admins"])
    assert proc.returncode != 0
    assert "Refusing to change sshd on localhost" in proc.stdout, proc.stdout[-3000:]
