"""The collection's strategies answer a role's package questions (gpufleet.cluster.missing_packages) in
the controller from each host's package list, read with the host's first question of the run, with
exactly the results a query per question gives under Ansible's own linear strategy; and they read the
host again after anything on it changed, failed or was done to it by a delegated task.

The hosts are local (three inventory names for this machine), and ``dpkg-query`` is a double on PATH:
it answers from a per-host package list and logs, per host and step, whether it was asked for every
package or for named ones. The list changes during the play (a package "installed" on one host), as a
package task would change the host's database.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from lab_playbook import VENV_BIN, ansible_env, local_hosts, task_results

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

# A double of dpkg-query -W -f=FORMAT [NAME...]: the host's list ($DOUBLE_DIR/$HOST.list, dpkg's own
# format) in full without names; with names only their lines, and exit status 1 when one is unknown, as
# dpkg-query does. Each call is logged as "HOST STEP all|named".
DPKG_QUERY_DOUBLE = """#!/bin/sh
list="$DOUBLE_DIR/$GPUFLEET_DOUBLE_HOST.list"
shift 2
if [ $# -eq 0 ]; then
  echo "$GPUFLEET_DOUBLE_HOST $GPUFLEET_DOUBLE_STEP all" >> "$DOUBLE_DIR/calls"
  cat "$list"
  exit 0
fi
echo "$GPUFLEET_DOUBLE_HOST $GPUFLEET_DOUBLE_STEP named" >> "$DOUBLE_DIR/calls"
rc=0
for name in "$@"; do
  grep "^$name	" "$list" || { echo "dpkg-query: no packages found matching $name" >&2; rc=1; }
done
exit $rc
"""

LIST = "munge\t0.5.15-2\tii \nslurmd\t22.05.8-4+deb12u3\thi \nchrony\t4.3-2+deb12u1\trc \n"

PLAY = """
- name: Package questions
  hosts: h1,h2,h3
  gather_facts: false
  environment:
    GPUFLEET_DOUBLE_HOST: "{{ inventory_hostname }}"
    GPUFLEET_DOUBLE_STEP: "{{ step | default('-') }}"
  tasks:
    - name: q1 first question
      gpufleet.cluster.missing_packages:
        names: [munge, "slurmd=22.05.8-4+deb12u3", nosuch, ""]
      vars: {step: q1}
      register: q1
    - name: q2 second question
      gpufleet.cluster.missing_packages:
        names: ["munge=0.5*", "slurmd=23.11*", chrony]
      vars: {step: q2}
    - name: Install chrony on h1
      ansible.builtin.lineinfile:
        path: "{{ double_dir }}/h1.list"
        regexp: "^chrony\\t"
        line: "chrony\\t4.3-2+deb12u1\\tii "
      when: inventory_hostname == 'h1'
    - name: q3 after a change on h1
      gpufleet.cluster.missing_packages:
        names: [chrony]
      vars: {step: q3}
    - name: Install chrony on h3, from h2's task
      ansible.builtin.lineinfile:
        path: "{{ double_dir }}/h3.list"
        regexp: "^chrony\\t"
        line: "chrony\\t4.3-2+deb12u1\\tii "
      delegate_to: h3
      when: inventory_hostname == 'h2'
    - name: q4 after a delegated change
      gpufleet.cluster.missing_packages:
        names: [chrony]
      vars: {step: q4}
    - name: A failure on h2, ignored
      ansible.builtin.fail:
        msg: failed
      when: inventory_hostname == 'h2'
      ignore_errors: true
    - name: q5 after a failure on h2
      gpufleet.cluster.missing_packages:
        names: "munge,chrony"
      vars: {step: q5}
      register: q5
    - name: q6 the whole list asked for
      gpufleet.cluster.missing_packages:
        names: [munge]
        snapshot: true
      vars: {step: q6}
      register: q6
    - name: q7 a question skipped
      gpufleet.cluster.missing_packages:
        names: [munge]
      vars: {step: q7}
      when: false
    - name: What register keeps
      ansible.builtin.assert:
        that:
          - q1.keys() | select('match', '.*snapshot') | list == []
          - q5.keys() | select('match', '.*snapshot') | list == []
          - q6.snapshot.installed.munge == '0.5.15-2'
"""

INVENTORY = local_hosts("h1", "h2", "h3")
KEYS = ("changed", "failed", "skipped", "missing", "installed", "manager", "msg")


def run(tmp_path: Path, strategy: str, *args: str, **env: str) -> tuple[dict, list[str]]:
    """(the JSON callback's output, the double's calls as "HOST STEP all|named")."""
    doubles = tmp_path / "bin"
    doubles.mkdir(exist_ok=True)
    (doubles / "dpkg-query").write_text(DPKG_QUERY_DOUBLE)
    (doubles / "dpkg-query").chmod(0o755)
    for host in ("h1", "h2", "h3"):
        (tmp_path / f"{host}.list").write_text(LIST)
    (tmp_path / "calls").unlink(missing_ok=True)
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "hosts").write_text(INVENTORY)
    environ = ansible_env(doubles, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", DOUBLE_DIR=str(tmp_path), **env)
    environ["ANSIBLE_STRATEGY"] = strategy
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts", "play.yml", "-e", f"double_dir={tmp_path}", *args]
    proc = subprocess.run(argv, cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    calls = (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []
    return json.loads(proc.stdout), calls


def answers(output: dict) -> list[tuple[str, str, dict]]:
    """Each task's result per host, in the keys a question's result and its display are made of."""
    return [(task, host, {k: result[k] for k in KEYS if k in result}) for task, host, result in task_results(output)]


def by_step(calls: list[str]) -> dict[str, list[str]]:
    steps: dict[str, list[str]] = {}
    for call in calls:
        host, step, kind = call.split()
        steps.setdefault(step, []).append(f"{host} {kind}")
    return {step: sorted(hosts) for step, hosts in steps.items()}


@pytest.mark.parametrize("check", [(), ("--check",)], ids=["run", "check"])
def test_answers_are_those_of_a_query_per_question(tmp_path, check):
    reference, calls = run(tmp_path, "ansible.builtin.linear", *check)
    expected = answers(reference)
    # Ansible's own strategy asks the host every time, for the names only.
    assert by_step(calls) == {step: ["h1 named", "h2 named", "h3 named"] for step in ("q1", "q2", "q3", "q4", "q5")} | {
        "q6": ["h1 all", "h2 all", "h3 all"]
    }
    q1 = {host: result for task, host, result in expected if task == "q1 first question"}
    assert q1["h1"]["missing"] == ["nosuch"] and q1["h1"]["installed"] == {
        "munge": "0.5.15-2",
        "slurmd": "22.05.8-4+deb12u3",
    }
    q4 = {host: result["missing"] for task, host, result in expected if task == "q4 after a delegated change"}
    # in check mode the line is not written: chrony stays missing everywhere
    written = {"h1": [], "h2": ["chrony"], "h3": []}
    assert q4 == ({host: ["chrony"] for host in ("h1", "h2", "h3")} if check else written)
    for strategy in ("gpufleet.cluster.linear", "gpufleet.cluster.mitogen_linear"):
        seen, _ = run(tmp_path, strategy, *check)
        assert answers(seen) == expected, strategy


def test_each_host_is_read_once_until_something_on_it_changes(tmp_path):
    _, calls = run(tmp_path, "gpufleet.cluster.linear")
    every = ["h1 all", "h2 all", "h3 all"]
    assert by_step(calls) == {
        "q1": every,  # the first question of the run reads every package
        "q3": ["h1 all"],  # h1 changed; the others are answered from their lists
        "q4": every,  # a delegated task changed a host: every host is read again
        "q5": ["h2 all"],  # h2 failed
        "q6": every,  # asked for the whole list: the module runs
    }


def test_the_switch_asks_the_host_every_time(tmp_path):
    _, calls = run(tmp_path, "gpufleet.cluster.linear", GPUFLEET_CONTROLLER_ACTIONS="0")
    named, every = ["h1 named", "h2 named", "h3 named"], ["h1 all", "h2 all", "h3 all"]
    assert by_step(calls) == dict.fromkeys(("q1", "q2", "q3", "q4", "q5"), named) | {"q6": every}
