"""The collection's strategies skip a task whose ``when`` is false in the controller, and run the
tasks whose action never touches the host there too, without a worker, and with exactly the results
Ansible's own linear strategy gives.

ansible-playbook runs one play on three local hosts with every kind of condition the controller may
or must not decide (false, true for one host, per loop item, an undefined variable, a block's and an
include's conditions, run_once, check mode, no_log, a connection variable, a skipped registered
result read later) under ansible.builtin.linear, gpufleet.cluster.linear and
gpufleet.cluster.mitogen_linear, with and without --check; the JSON callback's results must be the
same. A condition that runs a command (the pipe lookup) records which process evaluated it.

A second play runs the controller's own actions (set_fact, assert, fail, debug, group_by,
include_vars, the includes, a role's argument validation) every way that could tell a worker from the controller:
a block templated per host (the executor templates a task's parent blocks in place, and every host
shares them), loops, delegated facts, run_once, failures rescued or ignored, no_log, check mode,
and a playbook's own action plugin that shadows ``debug``, which must still run in a worker; and a
fact whose template takes longer than a worker would, whose other hosts go to workers.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from lab_playbook import VENV_BIN, ansible_env, local_hosts, task_results

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

ACTIONS = """
- name: The controller's own actions
  hosts: h1,h2,h3
  gather_facts: false
  tasks:
    - name: Records the process that runs it
      ansible.builtin.set_fact:
        where: "{{ lookup('ansible.builtin.pipe', 'echo $PPID >> ' ~ actions_probe) }}"
    - name: A block templated per host
      no_log: "{{ inventory_hostname == 'h1' }}"
      ignore_errors: "{{ inventory_hostname == 'h2' }}"
      block:
        - name: Censored on h1 only
          ansible.builtin.set_fact:
            checked: "{{ inventory_hostname == 'h1' }}"
        - name: Fails, ignored on h2 only through the block
          ansible.builtin.fail:
            msg: "failed on {{ inventory_hostname }}"
          when: inventory_hostname != 'h3'
      rescue:
        - name: Rescued on h1
          ansible.builtin.set_fact:
            rescued: "{{ ansible_failed_result.msg }}"
    - name: A loop of facts
      ansible.builtin.set_fact:
        "fact_{{ item }}": "{{ item * 2 }}"
      loop: [1, 2, 3]
      loop_control:
        label: "item {{ item }}"
    - name: An assertion that holds
      ansible.builtin.assert:
        that: fact_2 | int == 4
        quiet: true
    - name: An assertion that fails, ignored
      ansible.builtin.assert:
        that: fact_3 | int == 7
        fail_msg: "fact_3 is {{ fact_3 }}"
      ignore_errors: true
    - name: An undefined variable, ignored
      ansible.builtin.set_fact:
        broken: "{{ no_such_variable }}"
      ignore_errors: true
    - name: A fact for another host
      ansible.builtin.set_fact:
        given_by: "{{ inventory_hostname }}"
      delegate_to: h3
      delegate_facts: true
      run_once: true
    - name: Reads the delegated fact
      ansible.builtin.debug:
        msg: "{{ hostvars['h3'].given_by | default('none') }}"
    - name: Groups by a fact
      ansible.builtin.group_by:
        key: "checked_{{ checked }}"
    - name: Reads the groups
      ansible.builtin.debug:
        msg: "{{ groups['checked_True'] | default([]) | sort }} {{ groups['checked_False'] | default([]) | sort }}"
    - name: A secret fact
      ansible.builtin.set_fact:
        secret: hunter2
      no_log: true
    - name: An include per item
      ansible.builtin.include_tasks: included.yml
      loop: [a, b]
    - name: Variables from a file per host
      ansible.builtin.include_vars:
        file: "vars-{{ inventory_hostname }}.yml"
    - name: Reads the file's variable
      ansible.builtin.debug:
        msg: "{{ from_file }}"
    - name: A role whose arguments are right
      ansible.builtin.include_role:
        name: checked
      vars:
        checked_count: 3
    - name: A role whose arguments are wrong
      block:
        - name: Include it
          ansible.builtin.include_role:
            name: checked
          vars:
            checked_count: many
      rescue:
        - name: The validation's message
          ansible.builtin.debug:
            msg: "{{ ansible_failed_result.msg }}"
    - name: The playbook's own debug plugin (records its process)
      debug:
        msg: shadowed
    - name: A fact whose template takes 0.3 s (records its process)
      ansible.builtin.set_fact:
        slow: "{{ lookup('ansible.builtin.pipe', 'sleep 0.3; echo $PPID >> ' ~ actions_probe) }}"
"""

ROLE_SPECS = """
argument_specs:
  main:
    short_description: A role with one checked argument
    options:
      checked_count:
        type: int
        required: true
        description: A number.
"""

ROLE_TASKS = """
- name: Uses the argument
  ansible.builtin.set_fact:
    doubled: "{{ checked_count * 2 }}"
"""

# A playbook's action plugin named like ansible-core's: a task that says `debug:` runs this one.
SHADOW_DEBUG = """
import os
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        with open(task_vars["actions_probe"], "a") as probe:
            probe.write(f"{os.getpid()}\\n")
        return {"changed": False, "msg": "shadowed"}
"""

INCLUDED = """
- name: Included
  ansible.builtin.debug: {msg: included}
"""

INVENTORY = local_hosts("h1", "h2", "h3")


def run(tmp_path: Path, strategy: str, *args: str, **env: str) -> tuple[dict, list[int], int, list[int]]:
    """(the JSON callback's output, the PIDs that evaluated the probe's condition, ansible-playbook's PID,
    the PIDs that ran the second play's set_fact probe then its shadowing debug plugin)."""
    (tmp_path / "play.yml").write_text(PLAY + ACTIONS)
    (tmp_path / "included.yml").write_text(INCLUDED)
    (tmp_path / "hosts").write_text(INVENTORY)
    for path, text in (
        ("roles/checked/meta/argument_specs.yml", ROLE_SPECS),
        ("roles/checked/tasks/main.yml", ROLE_TASKS),
        ("action_plugins/debug.py", SHADOW_DEBUG),
        *((f"vars-h{i}.yml", f"from_file: h{i} {'x' * i}\n") for i in (1, 2, 3)),
    ):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    label = f"{strategy}{''.join(args)}{''.join(env.values())}"
    probe, actions_probe = tmp_path / f"probe-{label}", tmp_path / f"actions-{label}"
    probe.unlink(missing_ok=True)
    actions_probe.unlink(missing_ok=True)
    environ = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", **env)
    environ["ANSIBLE_STRATEGY"] = strategy
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts", "play.yml", "-e", f"probe={probe}"]
    argv += ["-e", f"actions_probe={actions_probe}", *args]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-4000:] + err[-2000:]
    pids = [int(p) for p in probe.read_text().split()]
    return json.loads(out), pids, proc.pid, [int(p) for p in actions_probe.read_text().split()]


def results(output: dict) -> list[tuple[str, str, str]]:
    """Each task's result per host (its timings left out), and the play's stats."""
    rows = [(task, host, json.dumps(result, sort_keys=True)) for task, host, result in task_results(output)]
    rows.append(("stats", "", json.dumps(output["stats"], sort_keys=True)))
    return rows


@pytest.mark.parametrize("check", [(), ("--check",)], ids=["run", "check"])
def test_results_are_ansibles_own(tmp_path, check):
    reference, _, _, _ = run(tmp_path, "ansible.builtin.linear", *check)
    expected = results(reference)
    skipped = [r for r in expected if '"skipped": true' in r[2]]
    assert len(skipped) > 20, skipped  # the play does skip, for every kind of condition
    assert any('"false_condition": "flag"' in r[2] for r in skipped)
    for strategy in ("gpufleet.cluster.linear", "gpufleet.cluster.mitogen_linear"):
        seen, _, _, _ = run(tmp_path, strategy, *check)
        assert results(seen) == expected, strategy


def test_a_false_condition_is_decided_in_the_controller(tmp_path):
    _, pids, main, _ = run(tmp_path, "gpufleet.cluster.linear")
    assert pids == [main, main, main]


def test_ansibles_linear_and_the_switch_decide_it_in_a_worker(tmp_path):
    switched_off = {"GPUFLEET_CONTROLLER_SKIP": "0"}
    for strategy, env in (("ansible.builtin.linear", {}), ("gpufleet.cluster.linear", switched_off)):
        _, pids, main, _ = run(tmp_path, strategy, **env)
        assert len(pids) == 3 and main not in pids, strategy


def test_the_controllers_own_actions_run_in_it_and_a_shadowed_one_in_a_worker(tmp_path):
    # no task is too slow for the controller here: the probe's own timing is not under test
    output, _, main, pids = run(tmp_path, "gpufleet.cluster.linear", GPUFLEET_CONTROLLER_HEAVY_MS="600000")
    set_fact, shadowed, slow = pids[:3], pids[3:6], pids[6:]
    assert set_fact == [main, main, main]
    assert len(shadowed) == 3 and main not in shadowed
    assert slow == [main, main, main]
    # the block's per-host templating stayed with its host
    groups = {
        h: r["msg"]
        for t in output["plays"][1]["tasks"]
        if t["task"]["name"] == "Reads the groups"
        for h, r in t["hosts"].items()
    }
    assert groups == dict.fromkeys(("h1", "h2", "h3"), "['h1'] ['h2', 'h3']")


def test_a_task_too_slow_for_the_controller_sends_its_other_hosts_to_workers(tmp_path):
    _, _, main, pids = run(tmp_path, "gpufleet.cluster.linear")
    slow = pids[6:]
    assert len(slow) == 3 and slow[0] == main and main not in slow[1:], slow


def test_the_actions_switch_runs_them_in_workers(tmp_path):
    for env in ({"GPUFLEET_CONTROLLER_ACTIONS": "0"}, {"GPUFLEET_CONTROLLER_SKIP": "0"}):
        _, _, main, pids = run(tmp_path, "gpufleet.cluster.linear", **env)
        assert len(pids) == 9 and main not in pids, env
