"""The collection's strategies skip a task whose ``when`` is false in the controller, without a worker,
and with exactly the results Ansible's own linear strategy gives.

ansible-playbook runs one play on three local hosts with every kind of condition the controller may
or must not decide (false, true for one host, per loop item, an undefined variable, a block's and an
include's conditions, run_once, check mode, no_log, a connection variable, a skipped registered
result read later) under ansible.builtin.linear, gpufleet.cluster.linear and
gpufleet.cluster.mitogen_linear, with and without --check; the JSON callback's results must be the
same. A condition that runs a command (the pipe lookup) records which process evaluated it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lab_playbook import VENV_BIN, ansible_env

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

PLAY = """
- name: Every kind of condition
  hosts: h1,h2,h3
  gather_facts: false
  vars:
    flag: false
  tasks:
    - name: False for every host
      ansible.builtin.debug: {msg: never}
      when: flag
    - name: True for h2 only
      ansible.builtin.debug: {msg: h2}
      when: inventory_hostname == 'h2'
    - name: Per loop item
      ansible.builtin.debug: {msg: "{{ item }}"}
      loop: [1, 2]
      when: item == 2
    - name: A loop false for every item (each item's result is kept)
      ansible.builtin.debug: {msg: "{{ item }}"}
      loop: [1, 2]
      when: flag
    - name: Delegated, false
      ansible.builtin.debug: {msg: x}
      delegate_to: h1
      when: flag
    - name: An undefined variable (the worker's error)
      ansible.builtin.debug: {msg: x}
      when: no_such_variable
      ignore_errors: true
    - name: A block
      when: not flag
      block:
        - name: False inside a true block
          ansible.builtin.set_fact: {a: 1}
          when: flag
        - name: True through the block
          ansible.builtin.set_fact: {b: 1}
    - name: A block that is false
      when: flag
      block:
        - name: Inherits the block's false condition
          ansible.builtin.set_fact: {c: 1}
    - name: An include that is skipped
      ansible.builtin.include_tasks: included.yml
      when: flag
    - name: An include for h1
      ansible.builtin.include_tasks: included.yml
      when: inventory_hostname == 'h1'
    - name: Run once, false
      ansible.builtin.debug: {msg: x}
      run_once: true
      when: flag
    - name: Only in check mode
      ansible.builtin.debug: {msg: check}
      when: ansible_check_mode
    - name: A task whose check mode is forced off, when in check mode
      ansible.builtin.debug: {msg: check}
      check_mode: false
      when: ansible_check_mode
    - name: No log, skipped
      ansible.builtin.debug: {msg: secret}
      no_log: true
      when: flag
    - name: A connection variable
      ansible.builtin.debug: {msg: conn}
      when: ansible_connection == 'ssh'
    - name: Registered while skipped
      ansible.builtin.command: "true"
      register: registered
      changed_when: false
      when: flag
    - name: The registered result says skipped
      ansible.builtin.assert:
        that: registered is skipped
    - name: Evaluated where (records the evaluating process)
      ansible.builtin.debug: {msg: never}
      when: (lookup('ansible.builtin.pipe', 'echo $PPID >> ' ~ probe) | length == 0) and flag
"""

INCLUDED = """
- name: Included
  ansible.builtin.debug: {msg: included}
"""

INVENTORY = "".join(f"h{i} ansible_connection=local ansible_python_interpreter={sys.executable}\n" for i in (1, 2, 3))


def run(tmp_path: Path, strategy: str, *args: str, **env: str) -> tuple[dict, list[int], int]:
    """(the JSON callback's output, the PIDs that evaluated the probe's condition, ansible-playbook's PID)."""
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "included.yml").write_text(INCLUDED)
    (tmp_path / "hosts").write_text(INVENTORY)
    probe = tmp_path / f"probe-{strategy}{''.join(args)}{''.join(env.values())}"
    probe.unlink(missing_ok=True)
    environ = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", **env)
    environ["ANSIBLE_STRATEGY"] = strategy
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts", "play.yml", "-e", f"probe={probe}", *args]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-4000:] + err[-2000:]
    return json.loads(out), [int(p) for p in probe.read_text().split()], proc.pid


def results(output: dict) -> list[tuple[str, str, str]]:
    """Each task's result per host (its timings left out), and the play's stats."""
    rows = []
    for play in output["plays"]:
        for task in play["tasks"]:
            for host, result in sorted(task["hosts"].items()):
                rows.append((task["task"]["name"], host, json.dumps(result, sort_keys=True)))
    rows.append(("stats", "", json.dumps(output["stats"], sort_keys=True)))
    return rows


@pytest.mark.parametrize("check", [(), ("--check",)], ids=["run", "check"])
def test_results_are_ansibles_own(tmp_path, check):
    reference, _, _ = run(tmp_path, "ansible.builtin.linear", *check)
    expected = results(reference)
    skipped = [r for r in expected if '"skipped": true' in r[2]]
    assert len(skipped) > 20, skipped  # the play does skip, for every kind of condition
    assert any('"false_condition": "flag"' in r[2] for r in skipped)
    for strategy in ("gpufleet.cluster.linear", "gpufleet.cluster.mitogen_linear"):
        seen, _, _ = run(tmp_path, strategy, *check)
        assert results(seen) == expected, strategy


def test_a_false_condition_is_decided_in_the_controller(tmp_path):
    _, pids, main = run(tmp_path, "gpufleet.cluster.linear")
    assert pids == [main, main, main]


def test_ansibles_linear_and_the_switch_decide_it_in_a_worker(tmp_path):
    switched_off = {"GPUFLEET_CONTROLLER_SKIP": "0"}
    for strategy, env in (("ansible.builtin.linear", {}), ("gpufleet.cluster.linear", switched_off)):
        _, pids, main = run(tmp_path, strategy, **env)
        assert len(pids) == 3 and main not in pids, strategy
