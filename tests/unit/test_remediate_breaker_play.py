"""The remediate role's pick step as Ansible runs it: the drain breaker stops a run before any drain.

ansible-playbook runs roles/remediate/tasks/pick.yml on local hosts (a controller and a two-node pool)
with a drift report as the drift role leaves it, then a stand-in for the remediation play that only
records which nodes it was given. sinfo is a stand-in on PATH that prints a file. No lab is needed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from lab_playbook import LOCAL_POOL_INVENTORY, SINFO_STUB, VENV_BIN, ansible_env

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")


PLAYBOOK = """- name: Pick the nodes to remediate
  hosts: gpu_lab
  gather_facts: false
  vars:
    gpufleet_brief:
      cluster: {name: t, control_plane: slurm}
      controllers: {group: slurm_controllers}
      pools: [{name: h100, group: gpu_lab}]
  tasks:
    - name: The drift role's report
      ansible.builtin.set_fact:
        _drift_dir: "{{ reports }}/t/20260101T000000Z"
        _drift_report: "{{ drift_report }}"

    - name: Pick
      ansible.builtin.import_role:
        name: remediate
        tasks_from: pick

- name: Stands in for the remediation, which drains
  hosts: gpufleet_drifted
  gather_facts: false
  tasks:
    - name: Record the node as drained
      ansible.builtin.lineinfile:
        path: "{{ reports }}/drained"
        line: "{{ inventory_hostname }}"
        create: true
        mode: "0644"
      delegate_to: localhost
      throttle: 1
"""


def run(tmp_path: Path, *, drifted: list[str], sinfo: str, args: tuple[str, ...] = ()):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "sinfo").write_text(SINFO_STUB)
    (tmp_path / "bin" / "sinfo").chmod(0o755)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "sinfo").write_text(sinfo)
    # The drift role made this run's report directory.
    (tmp_path / "reports" / "t" / "20260101T000000Z").mkdir(parents=True)
    (tmp_path / "hosts.yml").write_text(LOCAL_POOL_INVENTORY)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    env = ansible_env(
        tmp_path / "bin",
        STUB_DIR=str(tmp_path / "state"),
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"),
        ANSIBLE_PYTHON_INTERPRETER=str(VENV_BIN / "python"),
    )
    drift = {
        "drifted": drifted,
        "unknown": [],
        "nodes": {h: {"status": "drifted", "drift": [{"component": "driver-package"}]} for h in drifted},
    }
    extra = json.dumps({"drift_report": drift, "reports": str(tmp_path / "reports")})
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", extra, *args]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    drained_file = tmp_path / "reports" / "drained"
    drained = drained_file.read_text().split() if drained_file.exists() else []
    report_file = tmp_path / "reports" / "t" / "20260101T000000Z" / "remediation.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else None
    return proc, drained, report


def test_one_drifted_node_of_two_goes_on(tmp_path):
    proc, drained, report = run(tmp_path, drifted=["gpu02"], sinfo="gpu01|idle\ngpu02|idle\n")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert drained == ["gpu02"] and report is None  # the stand-in writes no report


def test_a_whole_pool_drifted_is_blocked_before_any_drain(tmp_path):
    proc, drained, report = run(tmp_path, drifted=["gpu01", "gpu02"], sinfo="gpu01|idle\ngpu02|idle\n")
    assert proc.returncode != 0 and drained == []
    assert "drain breaker tripped: pool h100: draining gpu01, gpu02" in proc.stdout
    assert "--force (remediate_drain_force=true)" in proc.stdout
    assert {h: n["outcome"] for h, n in report["nodes"].items()} == {"gpu01": "blocked", "gpu02": "blocked"}
    assert report["breaker"]["tripped"] is True and report["breaker"]["allowed"] is False
    assert (tmp_path / "reports" / "t" / "20260101T000000Z" / "remediation.md").exists()


def test_the_other_node_down_blocks_the_last_one(tmp_path):
    proc, drained, report = run(tmp_path, drifted=["gpu02"], sinfo="gpu01|drain\ngpu02|idle\n")
    assert proc.returncode != 0 and drained == []
    assert report["breaker"]["pools"][0]["out_of_service"] == ["gpu01"]


def test_force_goes_on_and_says_it_overrode_the_breaker(tmp_path):
    force = ("-e", "remediate_drain_force=true")
    proc, drained, _ = run(tmp_path, drifted=["gpu01", "gpu02"], sinfo="gpu01|idle\ngpu02|idle\n", args=force)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert sorted(drained) == ["gpu01", "gpu02"]
    assert "drain breaker overridden by force" in proc.stdout
