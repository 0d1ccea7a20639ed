"""all_gather and alltoall as the acceptance role runs them: on each node alone (phase 1, node.yml)
and across the pool (phase 2, cluster.yml), where the brief gives their floors.

ansible-playbook runs the role's tasks on local hosts. all_reduce_perf, all_gather_perf and
alltoall_perf are the nccl-tests double of molecule/resources/doubles/bin (one program, playing the
binary it is run as), each node answering from its hardware profile; in phase 2 srun is a stand-in on
PATH that runs the double for the nodes it is given. The pool's gpu02 is h100-slow-alltoall: its
fabric carries all_reduce at the healthy figure and alltoall at 20 GB/s. systemctl and sinfo are
stand-ins (every daemon active, every node idle). The records the plays leave go through the report.
No lab is needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lab_playbook import ROOT, SINFO_STUB, VENV_BIN, ansible_env, lab_brief_without_gates

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

sys.path.insert(0, str(ROOT / "collections"))
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import (  # noqa: E402
    build_report,
    render_markdown,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops.drift import remediation_markdown  # noqa: E402

DOUBLES = ROOT / "molecule/resources/doubles/bin"
PROFILES = ROOT / "molecule/resources/profiles"

# A program named like the binary it plays (the double reads its own name), with this node's profile.
WRAPPER = """#!/bin/sh
GPUFLEET_HW_PROFILE={profile} exec {python} {double} "$@"
"""

NODE_PLAY = """- name: Phase 1, as node.yml runs it
  hosts: gpu_lab
  gather_facts: false
  vars:
    gpufleet_brief: "{{ lookup('file', brief) | from_yaml | combine(extra_brief, recursive=true) }}"
    gpufleet_pool: {name: h100-lab}
  tasks:
    - name: Phase 1
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: node

    - name: Keep what phase 1 recorded
      ansible.builtin.copy:
        content: >-
          {{ {'node': _acceptance_node, 'single': _acceptance_single,
              'collectives': _acceptance_collective_singles} | to_json }}
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        mode: "0644"
"""

# A node's re-acceptance as the remediate role runs it (roles/remediate/tasks/main.yml): acceptance's
# node.yml, then the remediate role's judge of it.
REMEDIATE_PLAY = """- name: A node's re-acceptance, as the remediate role runs it
  hosts: gpu_lab
  gather_facts: false
  vars:
    gpufleet_brief: "{{ lookup('file', brief) | from_yaml | combine(extra_brief, recursive=true) }}"
    gpufleet_pool: {name: h100-lab}
  tasks:
    - name: The result so far, as the remediate role starts it
      ansible.builtin.set_fact:
        _remediate_result: {outcome: unreachable, acceptance: null}

    - name: Single-node acceptance
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: node

    - name: Judge it
      ansible.builtin.include_role:
        name: remediate
        tasks_from: judge_acceptance

    - name: Keep the judged result
      ansible.builtin.copy:
        content: >-
          {{ {'result': _remediate_result, 'errors': _remediate_acceptance_errors} | to_json }}
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        mode: "0644"
"""

# srun --nodelist a,b ... BINARY ARGS: the double for those nodes, as the first node's rank 0.
SRUN_STUB = """#!{python}
import os, subprocess, sys
args = sys.argv[1:]
nodes = args[args.index("--nodelist") + 1].split(",")
binary = next(i for i, a in enumerate(args) if a.endswith("_perf"))
state = os.environ["STUB_DIR"]
env = dict(os.environ, SLURM_JOB_NODELIST=",".join(nodes), SLURM_NNODES=str(len(nodes)),
           SLURM_NTASKS_PER_NODE=args[args.index("--ntasks-per-node") + 1],
           GPUFLEET_HW_PROFILE=os.path.join(state, "peers", nodes[0] + ".json"),
           GPUFLEET_DOUBLE_PEERS_DIR=os.path.join(state, "peers"))
with open(os.path.join(state, "runs"), "a") as fh:
    fh.write(os.path.basename(args[binary]) + " " + ",".join(nodes) + "\\n")
sys.exit(subprocess.call([sys.executable, *args[binary:]], env=env))
"""

SYSTEMCTL_STUB = """#!/bin/sh
shift
for unit in "$@"; do echo active; done
"""

CLUSTER_PLAY = """- name: Phase 1's records, as node.yml leaves them
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
    gpufleet_brief: "{{ lookup('file', brief) | from_yaml | combine(extra_brief, recursive=true) }}"
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
        content: >-
          {{ {'runs': _acceptance_runs, 'plans': _acceptance_plans, 'violations': _acceptance_violations} | to_json }}
        dest: "{{ out }}"
        mode: "0644"
      check_mode: false
"""


def wrapper(tmp_path: Path, node: str, program: str, profile: Path) -> Path:
    path = tmp_path / "bin-of" / node / program
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(WRAPPER.format(profile=profile, python=sys.executable, double=DOUBLES / program))
    path.chmod(0o755)
    return path


def run_nodes(tmp_path: Path, nodes: dict[str, Path], extra_brief: dict, play: str = NODE_PLAY) -> dict:
    hosts = []
    for node, profile in nodes.items():
        ag = wrapper(tmp_path, node, "all_gather_perf", profile)
        a2a = wrapper(tmp_path, node, "alltoall_perf", profile)
        hosts.append(f"{node}: {{acceptance_all_gather_perf: {ag}, acceptance_alltoall_perf: {a2a}}}")
    (tmp_path / "hosts.yml").write_text(
        "all:\n  vars:\n    ansible_connection: local\n  children:\n    gpu_lab:\n      hosts: {"
        + ", ".join(hosts)
        + "}\n"
    )
    (tmp_path / "play.yml").write_text(play)
    out = tmp_path / "out"
    out.mkdir()
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "nvidia-smi").symlink_to(DOUBLES / "nvidia-smi")
    env = ansible_env(
        stubs,
        GPUFLEET_HW_PROFILE=str(PROFILES / "h100-hgx-healthy.json"),
        ANSIBLE_PYTHON_INTERPRETER=str(VENV_BIN / "python"),
    )
    extra = {
        "out": str(out),
        "brief": str(lab_brief_without_gates(tmp_path)),
        "extra_brief": extra_brief,
        "acceptance_all_reduce_perf": str(DOUBLES / "all_reduce_perf"),
        "acceptance_p2p": False,
        "acceptance_min_bytes": "1G",
    }
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", json.dumps(extra)]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}


def test_each_node_runs_the_gated_collectives_alone_and_a_slow_one_is_named(tmp_path):
    # gpu02's alltoall inside the node is slow (a profile of this test: 250 GB/s); all_reduce is healthy.
    slow = json.loads((PROFILES / "h100-hgx-healthy.json").read_text())
    slow["collectives"] = {"alltoall": {"busbw_gbps": 250}}
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    healthy = PROFILES / "h100-hgx-healthy.json"
    floors = {"alltoall": {"single_node_busbw_gbps": 300}, "all_gather": {"single_node_busbw_gbps": 380}}
    recorded = run_nodes(
        tmp_path, {"gpu01": healthy, "gpu02": tmp_path / "slow.json"}, {"acceptance": {"collectives": floors}}
    )
    for host, rec in recorded.items():
        assert [r["collective"] for r in rec["collectives"]] == ["all_gather", "alltoall"]
        assert all(r["host"] == host and r["scope"] == "single-node" for r in rec["collectives"])
        # all_reduce passes on both: the fault is alltoall's only.
        assert not [v for v in rec["single"]["violations"] if v["severity"] == "error"]
    errors = {
        (h, r["collective"], v["code"], v["field"])
        for h, rec in recorded.items()
        for r in rec["collectives"]
        for v in r["violations"]
        if v["severity"] == "error"
    }
    assert errors == {
        ("gpu02", "alltoall", "NCCL_BUSBW_BELOW_FLOOR", "acceptance.collectives.alltoall.single_node_busbw_gbps")
    }
    a2a = {h: next(r for r in rec["collectives"] if r["collective"] == "alltoall") for h, rec in recorded.items()}
    assert a2a["gpu02"]["busbw"] < 300 < a2a["gpu01"]["busbw"]

    # The report: the node with the slow alltoall is not accepted, the other is.
    runs = [rec["single"] for rec in recorded.values()] + [r for rec in recorded.values() for r in rec["collectives"]]
    violations = [v for r in runs for v in r["violations"]]
    report = build_report(
        "lab", runs=runs, nodes=[rec["node"] for rec in recorded.values()], violations=violations, brief={}
    )
    assert report["verdict"] == "fail"
    md = render_markdown(report)
    assert "| single-node alltoall gpu02 |" in md.split("## Collectives beyond all_reduce")[1]


def test_no_floor_runs_no_other_collective(tmp_path):
    recorded = run_nodes(tmp_path, {"gpu01": PROFILES / "h100-hgx-healthy.json"}, {})
    assert recorded["gpu01"]["collectives"] == []


def test_the_remediate_re_acceptance_fails_a_node_on_its_collectives_and_keeps_their_verdict(tmp_path):
    # gpu02's alltoall inside the node is slow (250 GB/s against a floor of 300); its all_reduce passes.
    slow = json.loads((PROFILES / "h100-hgx-healthy.json").read_text())
    slow["collectives"] = {"alltoall": {"busbw_gbps": 250}}
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    floors = {"alltoall": {"single_node_busbw_gbps": 300}, "all_gather": {"single_node_busbw_gbps": 380}}
    recorded = run_nodes(
        tmp_path,
        {"gpu01": PROFILES / "h100-hgx-healthy.json", "gpu02": tmp_path / "slow.json"},
        {"acceptance": {"collectives": floors}},
        play=REMEDIATE_PLAY,
    )
    healthy, slow_node = recorded["gpu01"], recorded["gpu02"]
    assert healthy["result"]["acceptance"] == "pass" and healthy["errors"] == []
    assert healthy["result"]["collectives"].startswith("all_gather passed (")
    assert "alltoall passed (" in healthy["result"]["collectives"]
    # The slow alltoall alone fails the node's re-acceptance, and its verdict names it.
    assert slow_node["result"]["acceptance"] == "fail"
    assert [(v["code"], v.get("collective")) for v in slow_node["errors"]] == [("NCCL_BUSBW_BELOW_FLOOR", "alltoall")]
    assert "all_gather passed (" in slow_node["result"]["collectives"]
    assert "alltoall failed (" in slow_node["result"]["collectives"]
    assert slow_node["result"]["collectives"].endswith("floor 300): NCCL_BUSBW_BELOW_FLOOR")
    # The remediation report's table shows it beside the acceptance result.
    md = remediation_markdown({"cluster": "lab", "nodes": {h: r["result"] for h, r in recorded.items()}})
    row = next(line for line in md.splitlines() if line.startswith("| gpu02 |"))
    assert "fail (collectives: all_gather passed (" in row and "NCCL_BUSBW_BELOW_FLOOR" in row


def test_without_a_floor_the_remediate_judge_keeps_no_collectives(tmp_path):
    recorded = run_nodes(tmp_path, {"gpu01": PROFILES / "h100-hgx-healthy.json"}, {}, play=REMEDIATE_PLAY)
    assert recorded["gpu01"]["result"]["acceptance"] == "pass"
    assert "collectives" not in recorded["gpu01"]["result"]


def run_pool(tmp_path: Path, nodes: dict[str, str], extra_brief: dict) -> tuple[dict, list[str]]:
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
    for node, profile_name in nodes.items():
        profile = json.loads((PROFILES / f"{profile_name}.json").read_text())
        profile["hostname"] = node
        (state / "peers" / f"{node}.json").write_text(json.dumps(profile))
    (state / "sinfo").write_text("".join(f"{n}|idle|none\n" for n in nodes))
    hosts = ", ".join(f"{n}: {{}}" for n in nodes)
    (tmp_path / "hosts.yml").write_text(
        "all:\n  vars:\n    ansible_connection: local\n  children:\n"
        f"    slurm_controllers:\n      hosts: {{ctl01: {{}}}}\n    gpu_lab:\n      hosts: {{{hosts}}}\n"
    )
    (tmp_path / "play.yml").write_text(CLUSTER_PLAY)
    out = tmp_path / "out.json"
    env = ansible_env(
        stubs,
        STUB_DIR=str(state),
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"),
        ANSIBLE_PYTHON_INTERPRETER=str(VENV_BIN / "python"),
    )
    extra = {
        "out": str(out),
        "brief": str(lab_brief_without_gates(tmp_path)),
        "extra_brief": extra_brief,
        "acceptance_all_reduce_perf": str(DOUBLES / "all_reduce_perf"),
        "acceptance_all_gather_perf": str(DOUBLES / "all_gather_perf"),
        "acceptance_alltoall_perf": str(DOUBLES / "alltoall_perf"),
        "acceptance_min_bytes": "1G",
    }
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", json.dumps(extra)]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return json.loads(out.read_text()), (state / "runs").read_text().split("\n")


def test_a_slow_alltoall_fabric_that_all_reduce_passes_fails_the_pool_naming_its_nodes(tmp_path):
    nodes = {"gpu01": "h100-hgx-healthy", "gpu02": "h100-slow-alltoall", "gpu03": "h100-hgx-healthy"}
    floors = {"alltoall": {"multi_node_busbw_gbps": 40}, "all_gather": {"multi_node_busbw_gbps": 300}}
    recorded, launched = run_pool(tmp_path, nodes, {"acceptance": {"collectives": floors}})
    # all_reduce across the pool first, then each gated collective once, on every node of the pool.
    assert [line for line in launched if line] == [
        "all_reduce_perf gpu01,gpu02,gpu03",
        "all_gather_perf gpu01,gpu02,gpu03",
        "alltoall_perf gpu01,gpu02,gpu03",
    ]
    runs = {r.get("collective", "all_reduce"): r for r in recorded["runs"]}
    # all_reduce passes, nothing to bisect; all_gather passes its floor.
    assert runs["all_reduce"]["busbw"] > 300 and recorded["plans"] == []
    assert runs["all_gather"]["busbw"] > 300
    assert runs["alltoall"]["busbw"] < 40 and runs["alltoall"]["nodes"] == list(nodes)
    errors = [v for v in recorded["violations"] if v["severity"] == "error"]
    assert [(v["code"], v.get("collective"), v["field"]) for v in errors] == [
        ("NCCL_BUSBW_BELOW_FLOOR", "alltoall", "acceptance.collectives.alltoall.multi_node_busbw_gbps")
    ]
    assert "gpu01, gpu02, gpu03" in errors[0]["message"] and "not bisected" in errors[0]["message"]
    report = build_report("lab", runs=recorded["runs"], violations=recorded["violations"])
    assert report["verdict"] == "fail"
    results = {e["label"]: e["result"] for e in report["runs"]}
    assert results == {
        "all-nodes h100-lab": "pass",
        "all-nodes all_gather h100-lab": "pass",
        "all-nodes alltoall h100-lab": "fail",
    }
    md = render_markdown(report)
    assert "### alltoall" in md and "| all-nodes alltoall h100-lab |" in md
