"""The acceptance role's drain step as Ansible runs it: the Slurm daemon check and the drain breaker.

ansible-playbook runs roles/acceptance/tasks/drain.yml on local hosts (a controller and a two-node
pool) after a play that records phase 1's results as node.yml would. systemctl, sinfo and scontrol
are stand-ins on PATH that answer from files and log every call, so each test can say which Slurm
command ran: the breaker and a dead daemon must leave scontrol uncalled. No lab is needed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from lab_playbook import LOCAL_POOL_INVENTORY, SINFO_STUB, VENV_BIN, ansible_env, lab_brief_without_gates

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

STUBS = {
    # systemctl is-active UNIT...: "inactive" for the units listed in $STUB_DIR/down, else "active".
    "systemctl": """#!/bin/sh
echo "systemctl $*" >> "$STUB_DIR/calls"
shift
rc=0
for unit in "$@"; do
  if grep -qx "$unit" "$STUB_DIR/down" 2>/dev/null; then echo inactive; rc=3; else echo active; fi
done
exit $rc
""",
    "sinfo": SINFO_STUB,
    "scontrol": """#!/bin/sh
echo "scontrol $*" >> "$STUB_DIR/calls"
""",
}


PLAYBOOK = """- name: Phase 1's records, as node.yml leaves them
  hosts: gpu_lab
  gather_facts: false
  tasks:
    - name: Record the node and its single-node result
      ansible.builtin.set_fact:
        _acceptance_node: {host: "{{ inventory_hostname }}"}
        _acceptance_single:
          host: "{{ inventory_hostname }}"
          busbw: "{{ 90.0 if inventory_hostname in slow else 470.0 }}"
          floor_gbps: 440
          violations: >-
            {{ [{'severity': 'error', 'code': 'NCCL_BUSBW_BELOW_FLOOR', 'host': inventory_hostname,
                 'field': 'acceptance.single_node_busbw_gbps', 'message': 'slow'}]
               if inventory_hostname in slow else [] }}

- name: The end of phase 2, as cluster.yml runs it
  hosts: ctl01
  gather_facts: false
  vars:
    gpufleet_brief: {cluster: {name: t, control_plane: slurm}, pools: [{name: h100, group: gpu_lab}]}
    acceptance_launcher: srun
  tasks:
    - name: Start the records
      ansible.builtin.set_fact:
        _acceptance_stamp: 20260101T000000Z
        _acceptance_violations: []
        _acceptance_plans: []
        _acceptance_drained: []
        _acceptance_daemons_down: []
        _acceptance_breaker: null

    - name: Drain
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: drain

    - name: Keep what the drain recorded
      ansible.builtin.copy:
        content: >-
          {{ {'violations': _acceptance_violations, 'drained': _acceptance_drained,
              'breaker': _acceptance_breaker, 'down': _acceptance_daemons_down} | to_json }}
        dest: "{{ out }}"
        mode: "0644"
      check_mode: false
"""


# The whole of phase 2 (tasks_from cluster) with the lab's brief, for a daemon that is down from the start.
CLUSTER_PLAYBOOK = (
    PLAYBOOK.split("    - name: Drain\n")[0].replace(
        "    gpufleet_brief: {cluster: {name: t, control_plane: slurm}, pools: [{name: h100, group: gpu_lab}]}\n",
        "    gpufleet_brief: \"{{ lookup('file', brief) | from_yaml }}\"\n",
    )
    + """    - name: Phase 2
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: cluster

    - name: Keep what phase 2 recorded
      ansible.builtin.copy:
        content: >-
          {{ {'violations': _acceptance_violations, 'drained': _acceptance_drained, 'runs': _acceptance_runs,
              'breaker': _acceptance_breaker, 'down': _acceptance_daemons_down} | to_json }}
        dest: "{{ out }}"
        mode: "0644"
      check_mode: false
"""
)


def run(
    tmp_path: Path,
    *,
    slow: list[str],
    sinfo: str,
    down: str = "",
    args: tuple[str, ...] = (),
    playbook: str = PLAYBOOK,
) -> tuple:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, text in STUBS.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    (state / "sinfo").write_text(sinfo)
    (state / "down").write_text(down)
    (tmp_path / "hosts.yml").write_text(LOCAL_POOL_INVENTORY)
    (tmp_path / "play.yml").write_text(playbook)
    out = tmp_path / "out.json"
    env = ansible_env(
        stubs,
        STUB_DIR=str(state),
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"),
        ANSIBLE_PYTHON_INTERPRETER=str(VENV_BIN / "python"),
    )
    extra = json.dumps({"slow": slow, "out": str(out), "brief": str(lab_brief_without_gates(tmp_path))})
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", extra, *args]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    calls = (state / "calls").read_text().splitlines() if (state / "calls").exists() else []
    return json.loads(out.read_text()), calls, proc.stdout


def codes(recorded: dict) -> list[tuple[str, str]]:
    return [(v["code"], v["severity"]) for v in recorded["violations"]]


def test_one_bad_node_of_two_is_drained(tmp_path):
    recorded, calls, _ = run(tmp_path, slow=["gpu02"], sinfo="gpu01|idle\ngpu02|idle\n")
    assert [c for c in calls if c.startswith("scontrol")] == [
        "scontrol update NodeName=gpu02 State=DRAIN "
        "Reason=gpufleet acceptance: single-node 90.0 GB/s < 440 GB/s floor (report 20260101T000000Z)"
    ]
    assert recorded["drained"] == ["gpu02"] and codes(recorded) == []
    assert recorded["breaker"]["allowed"] is True and recorded["breaker"]["tripped"] is False
    # The daemons were asked first: the controller's units, then each node's.
    assert calls[:3] == [
        "systemctl is-active slurmctld munge slurmdbd",
        "systemctl is-active munge slurmd",
        "systemctl is-active munge slurmd",
    ]


def test_breaker_keeps_the_last_node_in_service(tmp_path):
    # gpu01 is down already: draining gpu02 would leave the pool with no node in service.
    recorded, calls, stdout = run(tmp_path, slow=["gpu02"], sinfo="gpu01|down*\ngpu02|idle\n")
    assert [c for c in calls if c.startswith("scontrol")] == []
    assert recorded["drained"] == [] and codes(recorded) == [("DRAIN_BREAKER_TRIPPED", "error")]
    assert "would leave 2 of its 2 nodes out of service" in recorded["violations"][0]["message"]
    assert "Not drained: gpu02. drain breaker tripped" in stdout


def test_breaker_forced_drains_and_warns(tmp_path):
    recorded, calls, _ = run(
        tmp_path, slow=["gpu01", "gpu02"], sinfo="gpu01|idle\ngpu02|idle\n", args=("-e", "acceptance_drain_force=true")
    )
    assert [c.split()[2] for c in calls if c.startswith("scontrol")] == ["NodeName=gpu01", "NodeName=gpu02"]
    assert recorded["drained"] == ["gpu01", "gpu02"]
    assert codes(recorded) == [("DRAIN_BREAKER_FORCED", "warning")]


def test_a_dead_slurmctld_drains_nothing_and_is_named(tmp_path):
    recorded, calls, stdout = run(tmp_path, slow=["gpu02"], sinfo="gpu01|idle\ngpu02|idle\n", down="slurmctld\n")
    assert [c for c in calls if c.startswith(("scontrol", "sinfo"))] == []
    assert recorded["drained"] == [] and recorded["breaker"] is None
    assert [(v["code"], v["host"]) for v in recorded["violations"]] == [("ACCEPTANCE_CONTROL_DAEMON_DOWN", "ctl01")]
    assert recorded["violations"][0]["message"].startswith(
        "slurmctld is not running on ctl01 (systemd unit slurmctld: inactive), found before the drain"
    )
    assert "Not drained: gpu02. Slurm daemon(s) down: slurmctld on ctl01 (inactive)." in stdout


def test_check_mode_judges_but_drains_nothing(tmp_path):
    recorded, calls, _ = run(tmp_path, slow=["gpu02"], sinfo="gpu01|idle\ngpu02|idle\n", args=("--check",))
    assert "sinfo --noheader --Node --format=%N|%t" in calls
    assert [c for c in calls if c.startswith("scontrol")] == []
    assert recorded["breaker"]["allowed"] is True and recorded["drained"] == []


def test_a_dead_slurmctld_skips_the_multi_node_runs_and_the_drain(tmp_path):
    # slurmctld stopped before phase 2: no sinfo, no srun, no scontrol; the daemon is named once.
    recorded, calls, _ = run(
        tmp_path, slow=["gpu02"], sinfo="gpu01|idle\ngpu02|idle\n", down="slurmctld\n", playbook=CLUSTER_PLAYBOOK
    )
    assert [c.split()[0] for c in calls] == ["systemctl"] * 3
    assert recorded["runs"] == [] and recorded["drained"] == [] and recorded["breaker"] is None
    ((code, host, message),) = [(v["code"], v["host"], v["message"]) for v in recorded["violations"]]
    assert (code, host) == ("ACCEPTANCE_CONTROL_DAEMON_DOWN", "ctl01")
    assert message.startswith("slurmctld is not running on ctl01 (systemd unit slurmctld: inactive), found before")
    assert "the multi-node runs, the bisect and the drain were skipped" in message
