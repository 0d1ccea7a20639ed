"""The acceptance role's bisect as Ansible runs it: the groups of a round, and the NIC loopback
runs of a pool's nodes, start at once.

ansible-playbook runs phase 2 (roles/acceptance/tasks/cluster.yml) on local hosts: a controller
and a pool of four (or two) nodes. srun is a stand-in on PATH that runs the all_reduce_perf test
double (molecule/resources/doubles) for the nodes it is given, each node answering from its
hardware profile (one planted slow), and logs when each run started and ended. The runs sleep a
little, so runs started together overlap in that log and runs started one after the other do not.
systemctl and sinfo are stand-ins too (every daemon active, every node idle). No lab is needed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lab_playbook import ROOT, SINFO_STUB, VENV_BIN, ansible_env, lab_brief_without_gates

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

DOUBLE = ROOT / "molecule/resources/doubles/bin/all_reduce_perf"
PROFILES = ROOT / "molecule/resources/profiles"

# srun --nodelist a,b ... BINARY ARGS: the double for those nodes, as the first node's rank 0, with
# the ranks srun would start. Each run is logged as "start|end <nodes> <monotonic seconds>".
SRUN_STUB = """#!{python}
import os, subprocess, sys, time
args = sys.argv[1:]
nodes = args[args.index("--nodelist") + 1].split(",")
binary = next(i for i, a in enumerate(args) if a.endswith("all_reduce_perf"))
state = os.environ["STUB_DIR"]
env = dict(os.environ, SLURM_JOB_NODELIST=",".join(nodes), SLURM_NNODES=str(len(nodes)),
           SLURM_NTASKS_PER_NODE=args[args.index("--ntasks-per-node") + 1],
           GPUFLEET_HW_PROFILE=os.path.join(state, "peers", nodes[0] + ".json"),
           GPUFLEET_DOUBLE_PEERS_DIR=os.path.join(state, "peers"))
with open(os.path.join(state, "runs"), "a") as fh:
    fh.write(f"start {{','.join(nodes)}} {{time.monotonic()}}\\n")
rc = subprocess.call([sys.executable, *args[binary:]], env=env)
with open(os.path.join(state, "runs"), "a") as fh:
    fh.write(f"end {{','.join(nodes)}} {{time.monotonic()}}\\n")
sys.exit(rc)
"""

SYSTEMCTL_STUB = """#!/bin/sh
shift
for unit in "$@"; do echo active; done
"""

PLAYBOOK = """- name: Phase 1's records, as node.yml leaves them
  hosts: gpu_lab
  gather_facts: false
  tasks:
    - name: Record the node
      ansible.builtin.set_fact:
        _acceptance_node: {host: "{{ inventory_hostname }}"}

- name: Phase 2, as cluster.yml runs it
  hosts: ctl01
  gather_facts: false
  vars:
    gpufleet_brief: "{{ lookup('file', brief) | from_yaml }}"
    acceptance_launcher: srun
    acceptance_drain: false
  tasks:
    - name: Start the records
      ansible.builtin.set_fact:
        _acceptance_stamp: 20260101T000000Z
        _acceptance_violations: []
        _acceptance_plans: []
        _acceptance_drained: []
        _acceptance_daemons_down: []
        _acceptance_breaker: null

    - name: Phase 2
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: cluster

    - name: Keep what phase 2 recorded
      ansible.builtin.copy:
        content: "{{ {'runs': _acceptance_runs, 'plans': _acceptance_plans} | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
      check_mode: false
"""


def inventory(nodes: list[str]) -> str:
    hosts = ", ".join(f"{n}: {{}}" for n in nodes)
    return f"""all:
  vars:
    ansible_connection: local
  children:
    slurm_controllers:
      hosts: {{ctl01: {{}}}}
    gpu_lab:
      hosts: {{{hosts}}}
"""


def run(tmp_path: Path, nodes: list[str], slow: str, *args: str) -> tuple[dict, list[tuple[str, str, float]]]:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, text in {
        "srun": SRUN_STUB.format(python=sys.executable),
        "systemctl": SYSTEMCTL_STUB,
        "sinfo": SINFO_STUB,
    }.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    state = tmp_path / "state"
    (state / "peers").mkdir(parents=True)
    for node in nodes:
        profile = json.loads((PROFILES / f"{'h100-slow-net' if node == slow else 'h100-hgx-healthy'}.json").read_text())
        profile["hostname"] = node
        (state / "peers" / f"{node}.json").write_text(json.dumps(profile))
    (state / "sinfo").write_text("".join(f"{n}|idle|none\n" for n in nodes))
    (tmp_path / "hosts.yml").write_text(inventory(nodes))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    out = tmp_path / "out.json"
    env = ansible_env(
        stubs,
        STUB_DIR=str(state),
        GPUFLEET_DOUBLE_SLEEP="1.5",
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"),
        ANSIBLE_PYTHON_INTERPRETER=str(VENV_BIN / "python"),
    )
    extra = {
        "out": str(out),
        "brief": str(lab_brief_without_gates(tmp_path)),
        "acceptance_all_reduce_perf": str(DOUBLE),
        # A small sweep: the double prints one row per size.
        "acceptance_min_bytes": "1G",
    }
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", json.dumps(extra), *args]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    log = []
    for line in (state / "runs").read_text().splitlines():
        what, group, at = line.split()
        log.append((what, group, float(at)))
    return json.loads(out.read_text()), log


def spans(log: list[tuple[str, str, float]]) -> dict[str, tuple[float, float]]:
    """Each group's (start, end); a group run twice keeps its last run (not the case here)."""
    start = {g: t for what, g, t in log if what == "start"}
    return {g: (start[g], t) for what, g, t in log if what == "end"}


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.fixture(autouse=True)
def _double_present():
    if not DOUBLE.exists() or shutil.which("sh") is None:
        pytest.skip("needs the all_reduce_perf double")


def test_round_groups_run_at_once_and_name_the_slow_node(tmp_path):
    nodes = ["gpu01", "gpu02", "gpu03", "gpu04"]
    recorded, log = run(tmp_path, nodes, "gpu03")
    (plan,) = recorded["plans"]
    assert plan["slow_nodes"] == ["gpu03"] and plan["slow_links"] == []
    bisect = [r for r in recorded["runs"] if r["label"].startswith("bisect ")]
    # Round 1 screens the disjoint pairs; both ran at the same time.
    first = [r["nodes"] for r in bisect if r["round"] == 1]
    assert first == [["gpu01", "gpu02"], ["gpu03", "gpu04"]]
    s = spans(log)
    assert overlap(s["gpu01,gpu02"], s["gpu03,gpu04"])
    # The record of each group is the double's figure for it: the slow node caps its group.
    busbw = {"+".join(r["nodes"]): r["busbw"] for r in bisect if r["round"] == 1}
    assert busbw["gpu03+gpu04"] < 100 < busbw["gpu01+gpu02"]


def test_one_at_a_time_when_parallel_is_1(tmp_path):
    nodes = ["gpu01", "gpu02", "gpu03", "gpu04"]
    recorded, log = run(tmp_path, nodes, "gpu03", "-e", "acceptance_bisect_parallel=1")
    assert recorded["plans"][0]["slow_nodes"] == ["gpu03"]
    s = spans(log)
    pairs = [g for g in s if g.count(",") == 1 and g != "gpu01,gpu02,gpu03,gpu04"]
    assert len(pairs) >= 3
    assert not any(overlap(s[a], s[b]) for a in pairs for b in pairs if a < b)


def test_two_nodes_loopback_runs_on_both_at_once(tmp_path):
    # Two nodes slow together cannot tell node from link: each node runs alone through its own
    # NICs, both at once, and the one at the floor is the good partner that names the other.
    recorded, log = run(tmp_path, ["gpu01", "gpu02"], "gpu02")
    (plan,) = recorded["plans"]
    assert plan["slow_nodes"] == ["gpu02"]
    loopback = [r for r in recorded["runs"] if r["label"].startswith("loopback ")]
    assert [(r["host"], r["round"], r["scope"]) for r in loopback] == [
        ("gpu01", "loopback", "bisect"),
        ("gpu02", "loopback", "bisect"),
    ]
    assert loopback[0]["busbw"] > loopback[0]["floor_gbps"] > loopback[1]["busbw"]
    s = spans(log)
    assert overlap(s["gpu01"], s["gpu02"])
