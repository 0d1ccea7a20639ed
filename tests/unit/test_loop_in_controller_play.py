"""The collection's strategies run a loop whose items never reach the host (none, or every one skipped)
in the controller, and send a loop with an item for the host to a worker, with exactly the output and
results of Ansible's own linear strategy: the same per-item lines in the same order (no item reported
twice when the controller's attempt is thrown away), the same JSON results, in a run and in check mode.

A loop's expression that runs a command (the pipe lookup) records which process evaluated it.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from lab_playbook import VENV_BIN, ansible_env, local_hosts, task_results

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

PLAY = """
- name: Loops
  hosts: h1,h2,h3
  gather_facts: false
  vars:
    wanted: []
  tasks:
    - name: No items
      ansible.builtin.command: "true"
      loop: "{{ wanted }}"
    - name: Every item skipped
      ansible.builtin.command: "true"
      loop: [1, 2, 3]
      loop_control:
        label: "item {{ item }}"
      when: item > 5
    - name: An item for h2 only
      ansible.builtin.command: "echo {{ item }}"
      loop: [1, 2]
      when: inventory_hostname == 'h2' and item == 2
      changed_when: false
      register: echoed
    - name: Read the registered loop
      ansible.builtin.assert:
        that: echoed.results | length == 2
    - name: A lookup of items (with_items)
      ansible.builtin.command: "true"
      with_items: "{{ wanted }}"
    - name: An undefined item variable, ignored
      ansible.builtin.command: "true"
      loop: [1]
      when: item.nosuch
      ignore_errors: true
    - name: Every item skipped, no_log
      ansible.builtin.command: "echo secret"
      loop: [1, 2]
      when: false
      no_log: true
    - name: Evaluated where (records the evaluating process)
      ansible.builtin.command: "true"
      loop: "{{ [lookup('ansible.builtin.pipe', 'echo $PPID >> ' ~ probe)] }}"
      when: false
"""

INVENTORY = local_hosts("h1", "h2", "h3")
TIMING = re.compile(r'"(start|end|delta|duration)": ("[^"]*"|\{[^}]*\})')


def run(tmp_path: Path, strategy: str, *args: str, callback: str = "ansible.posix.json") -> tuple[str, list[int], int]:
    """(ansible-playbook's output, the PIDs that evaluated the probe's loop, ansible-playbook's PID)."""
    (tmp_path / "play.yml").write_text(PLAY)
    (tmp_path / "hosts").write_text(INVENTORY)
    probe = tmp_path / "probe"
    probe.unlink(missing_ok=True)
    environ = ansible_env(ANSIBLE_STDOUT_CALLBACK=callback)
    environ["ANSIBLE_STRATEGY"] = strategy
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts", "play.yml", "-e", f"probe={probe}", *args]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out[-4000:] + err[-2000:]
    return out, [int(p) for p in probe.read_text().split()], proc.pid


def results(output: str) -> list[tuple[str, str, str]]:
    return [
        (task, host, TIMING.sub("", json.dumps(result, sort_keys=True)))
        for task, host, result in task_results(json.loads(output))
    ]


HOST = re.compile(r"\[(h\d)\]")


def lines(output: str) -> dict[tuple[str, str], list[str]]:
    """The default callback's result lines per task and host, in order (the hosts' workers finish in any
    order; a host's item lines come in its loop's order), and the recap's lines."""
    by_host: dict[tuple[str, str], list[str]] = {}
    task = ""
    for line in output.splitlines():
        if line.startswith(("TASK [", "PLAY RECAP")):
            task = line.rstrip("* ")
        elif line.strip() and ((host := HOST.search(line)) or task == "PLAY RECAP"):
            by_host.setdefault((task, host.group(1) if host else line.split()[0]), []).append(line)
    return by_host


@pytest.mark.parametrize("check", [(), ("--check",)], ids=["run", "check"])
def test_results_and_item_lines_are_ansibles_own(tmp_path, check):
    reference, _, _ = run(tmp_path, "ansible.builtin.linear", *check)
    expected = results(reference)
    assert any('"skipped_reason": "No items in the list"' in r[2] for r in expected)
    assert any('"msg": "All items skipped"' in r[2] for r in expected)
    shown, _, _ = run(tmp_path, "ansible.builtin.linear", *check, callback="ansible.builtin.default")
    items = [line for host_lines in lines(shown).values() for line in host_lines if "(item=" in line]
    assert len(items) > 12, items  # the play reports items, skipped and run
    for strategy in ("gpufleet.cluster.linear", "gpufleet.cluster.mitogen_linear"):
        seen, _, _ = run(tmp_path, strategy, *check)
        assert results(seen) == expected, strategy
        seen, _, _ = run(tmp_path, strategy, *check, callback="ansible.builtin.default")
        assert lines(seen) == lines(shown), strategy


def test_a_loop_that_never_reaches_its_hosts_runs_in_the_controller(tmp_path):
    _, pids, main = run(tmp_path, "gpufleet.cluster.linear")
    assert pids == [main, main, main]
    _, pids, main = run(tmp_path, "ansible.builtin.linear")
    assert len(pids) == 3 and main not in pids
