"""The acceptance role's per-rail RDMA pairs as Ansible runs them (roles/acceptance/tasks/rdma_pairs.yml).

ansible-playbook runs the pool stage's RDMA pairs on local hosts: a controller and a pool of four
nodes (or two), each node's ib_write_bw a wrapper that gives the test double of
molecule/resources/doubles/bin its own hardware profile; one node has the h100-slow-rail profile
(mlx5_4 at half its line rate). Servers and clients of a round really run at once and meet over
TCP on 127.0.0.1 (each server of a round on its own port). The rails come from gpufleet_hw-shaped
facts built from the profiles (RDMA ports and nvidia-smi topo -m's GPU/NIC columns). No lab is needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lab_playbook import ROOT, VENV_BIN, ansible_env, lab_brief_without_gates

sys.path.insert(0, str(ROOT / "collections"))
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import (
    build_report,
    render_markdown,
)

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

DOUBLE = ROOT / "molecule/resources/doubles/bin/ib_write_bw"
PROFILES = ROOT / "molecule/resources/profiles"

WRAPPER = """#!/bin/sh
GPUFLEET_HW_PROFILE={profile} GPUFLEET_DOUBLE_IB_SERVER_WAIT=20 exec {python} {double} "$@"
"""

PLAYBOOK = """- name: Phase 1's records, as node.yml leaves them
  hosts: gpu_lab
  gather_facts: false
  vars:
    gpufleet_brief: "{{ lookup('file', brief) | from_yaml | combine(extra_brief, recursive=true) }}"
  tasks:
    - name: Record the node and its rails
      ansible.builtin.set_fact:
        _acceptance_node: {host: "{{ inventory_hostname }}"}
        _acceptance_rdma_rails: >-
          {{ hw[inventory_hostname] | gpufleet.cluster.rdma_pairs_rails(gpufleet_brief, 'h100-lab') }}

- name: The pool stage's RDMA pairs, on the controller
  hosts: ctl01
  gather_facts: false
  vars:
    gpufleet_brief: "{{ lookup('file', brief) | from_yaml | combine(extra_brief, recursive=true) }}"
  tasks:
    - name: Start the records
      ansible.builtin.set_fact:
        _acceptance_stamp: 20260101T000000Z
        _acceptance_violations: []
        _acceptance_pool: {name: h100-lab, group: gpu_lab}
        _acceptance_pool_nodes: "{{ groups['gpu_lab'] }}"
        # As pool.yml gives it: the pool's nodes whose phase 1 recorded their rails.
        _acceptance_rdma_nodes: "{{ groups['gpu_lab'] }}"

    - name: RDMA pairs
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: rdma_pairs

    - name: Keep what the stage recorded
      ansible.builtin.copy:
        content: >-
          {{ {'records': _acceptance_rdma_records | default([]), 'violations': _acceptance_violations,
              'drain': [] | gpufleet.cluster.rdma_pairs_drain(_acceptance_rdma_records | default([]),
                        stamp=_acceptance_stamp)} | to_json }}
        dest: "{{ out }}"
        mode: "0644"
      check_mode: false
"""


def hw_facts(profile: dict) -> dict:
    """What gpu_facts gathers of a node's RDMA ports and topo -m's GPU/NIC columns, from a profile."""
    nics = profile["nics"]
    return {
        "rdma": {
            "source": "sysfs",
            "ports": [
                {
                    "device": n["name"],
                    "port": n["port"],
                    "state": n["state"],
                    "rate_gbps": n["rate_gbps"],
                    "link_layer": n["link_layer"],
                }
                for n in nics
            ],
        },
        "topology": {
            "nics": [{"label": f"NIC{k}", "name": n["name"]} for k, n in enumerate(nics)],
            "gpu_nic": [["PIX" if n.get("gpu") == g else "SYS" for n in nics] for g in range(profile["gpu_count"])],
        },
    }


def run(
    tmp_path: Path,
    nodes: dict[str, str],
    extra_brief: dict,
    *args: str,
    absent: str | None = None,
    strategy: str = "linear",
) -> tuple[dict, str]:
    hosts, hw = [], {}
    for node, name in nodes.items():
        profile = json.loads((PROFILES / f"{name}.json").read_text())
        profile["hostname"] = node
        path = tmp_path / f"{node}.json"
        path.write_text(json.dumps(profile))
        wrapper = tmp_path / f"ib_write_bw-{node}"
        wrapper.write_text(WRAPPER.format(profile=path, python=sys.executable, double=DOUBLE))
        wrapper.chmod(0o755)
        binary = tmp_path / "absent" / "ib_write_bw" if node == absent else wrapper
        hosts.append(f"{node}: {{acceptance_ib_write_bw: {binary}, acceptance_rdma_pairs_address: 127.0.0.1}}")
        hw[node] = hw_facts(profile)
    (tmp_path / "hosts.yml").write_text(
        "all:\n  vars:\n    ansible_connection: local\n  children:\n"
        "    slurm_controllers:\n      hosts: {ctl01: {}}\n"
        "    gpu_lab:\n      hosts: {" + ", ".join(hosts) + "}\n"
    )
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    out = tmp_path / "out.json"
    env = ansible_env(None, ANSIBLE_PYTHON_INTERPRETER=str(VENV_BIN / "python"))
    env["ANSIBLE_STRATEGY"] = strategy
    extra = {
        "out": str(out),
        "brief": str(lab_brief_without_gates(tmp_path)),
        "extra_brief": extra_brief,
        "hw": hw,
        "acceptance_rdma_pairs_timeout": 40,
        "acceptance_rdma_pairs_port_spread": True,
        "acceptance_rdma_pairs_connect_wait": 3,
    }
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", json.dumps(extra), *args]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return json.loads(out.read_text()), proc.stdout


FOUR = {
    "gpu01": "h100-hgx-healthy",
    "gpu02": "h100-hgx-healthy",
    "gpu03": "h100-slow-rail",
    "gpu04": "h100-hgx-healthy",
}


def delegated_calls(stdout: str) -> dict[str, list[str]]:
    """Each task of the play's output that ran on other hosts than its own: the hosts it was delegated to."""
    out: dict[str, list[str]] = {}
    task = None
    for line in stdout.splitlines():
        if line.startswith("TASK ["):
            task = line.split("[", 1)[1].rsplit("]", 1)[0]
        elif " -> " in line and line.split(":", 1)[0] in ("ok", "changed", "failed", "fatal"):
            out.setdefault(task, []).append(line.split(" -> ", 1)[1].split("]", 1)[0])
    return out


def test_every_pair_runs_once_and_the_slow_port_is_named_and_drained(tmp_path):
    got, stdout = run(tmp_path, FOUR, {"acceptance": {"rdma_pairs": {"mode": "all"}}})
    # The dispatch: one start and one collect per node, whatever the number of rounds (3 here).
    calls = delegated_calls(stdout)
    assert sorted(calls) == [
        "acceptance : Collect each node's agenda of RDMA pairs",
        "acceptance : Start each node's agenda of RDMA pairs",
    ]
    assert all(sorted(hosts) == sorted(FOUR) for hosts in calls.values())
    (record,) = got["records"]
    assert record["rounds"] == 3 and record["gpudirect"] is True
    pairs = {(p["server"], p["client"]) for p in record["pairs"]}
    assert {frozenset(p) for p in pairs} == {
        frozenset(p)
        for p in [
            ("gpu01", "gpu02"),
            ("gpu01", "gpu03"),
            ("gpu01", "gpu04"),
            ("gpu02", "gpu03"),
            ("gpu02", "gpu04"),
            ("gpu03", "gpu04"),
        ]
    }
    # Every rail of every pair measured from a real table: 6 pairs x 8 rails.
    assert len(record["pairs"]) == 48 and {p["status"] for p in record["pairs"]} == {"measured"}
    assert record["floor_gbit"] == 360
    slow = [p for p in record["pairs"] if p["average_gbit"] < 360]
    assert {p["rail"] for p in slow} == {4} and all("gpu03" in (p["server"], p["client"]) for p in slow)
    assert min(p["average_gbit"] for p in record["pairs"] if p not in slow) > 385
    found = [(v["code"], v["host"]) for v in got["violations"]]
    assert found == [("RDMA_PORT_SLOW", "gpu03")]
    assert "mlx5_4 (rail 4)" in got["violations"][0]["message"]
    assert [d["host"] for d in got["drain"]] == ["gpu03"]
    assert "rdma port slow mlx5_4 rail 4" in got["drain"][0]["reason"]

    # The report: the section, the verdict, and each node's weakest port in its history.
    nodes = [{"host": h, "pool": "h100-lab"} for h in FOUR]
    report = build_report(
        "lab",
        runs=[],
        nodes=nodes,
        violations=got["violations"],
        rdma_pairs=got["records"],
        nccl=False,
        timestamp="20260101T000000Z",
    )
    assert report["verdict"] == "fail" and report["rdma_pairs"][0]["pool"] == "h100-lab"
    section = render_markdown(report).split("## Per-rail RDMA pairs (ib_write_bw)")[1]
    assert "| gpu03 | 4 | mlx5_4 | 3 |" in section and "| slow |" in section
    assert "Below the floor or failed" in section
    records = {r["host"]: r for r in history.acceptance_records(report, accepted=["gpu01"], valid_days=90)}
    assert records["gpu03"]["figures"]["rdma_port_min"] < 200 < records["gpu01"]["figures"]["rdma_port_min"]


def test_a_clean_pool_in_rail_mode_passes(tmp_path):
    nodes = dict.fromkeys(("gpu01", "gpu02", "gpu03"), "h100-hgx-healthy")
    got, _ = run(tmp_path, nodes, {"acceptance": {"rdma_pairs": {"mode": "rail", "min_fraction": 0.95}}})
    (record,) = got["records"]
    # Three nodes in a ring: three neighbour pairs, three rounds (an odd cycle).
    assert record["rounds"] == 3 and len({(p["server"], p["client"]) for p in record["pairs"]}) == 3
    assert record["floor_gbit"] == 380 and got["violations"] == [] and got["drain"] == []


def test_the_detached_runs_finish_under_mitogen_too(tmp_path):
    # The lab and the scenarios run over Mitogen, which never finishes Ansible's fire-and-forget async.
    nodes = {"gpu01": "h100-hgx-healthy", "gpu02": "h100-hgx-healthy"}
    got, _ = run(
        tmp_path, nodes, {"acceptance": {"rdma_pairs": {"mode": "all"}}}, strategy="gpufleet.cluster.mitogen_linear"
    )
    (record,) = got["records"]
    assert len(record["pairs"]) == 8 and {p["status"] for p in record["pairs"]} == {"measured"}
    assert got["violations"] == []


def test_two_nodes_cannot_tell_port_from_link_and_name_both_ends(tmp_path):
    nodes = {"gpu01": "h100-hgx-healthy", "gpu02": "h100-slow-rail"}
    got, _ = run(tmp_path, nodes, {"acceptance": {"rdma_pairs": {"mode": "all"}}})
    assert [v["code"] for v in got["violations"]] == ["RDMA_LINK_SLOW"]
    message = got["violations"][0]["message"]
    assert "gpu01 mlx5_4 (rail 4)" in message and "gpu02 mlx5_4 (rail 4)" in message
    assert got["drain"] == []


def test_a_node_without_ib_write_bw_fails_with_every_partner_and_is_named(tmp_path):
    nodes = {"gpu01": "h100-hgx-healthy", "gpu02": "h100-hgx-healthy", "gpu03": "h100-hgx-healthy"}
    got, _ = run(tmp_path, nodes, {"acceptance": {"rdma_pairs": {"mode": "all"}}}, absent="gpu03")
    (record,) = got["records"]
    failed = [p for p in record["pairs"] if p["status"] == "failed"]
    # Every rail of both of gpu03's pairs failed, as server or client; none read as a figure.
    assert len(failed) == 16 and all("gpu03" in (p["server"], p["client"]) for p in failed)
    assert all("average_gbit" not in p for p in failed)
    found = {(v["code"], v["host"]) for v in got["violations"]}
    assert found == {("RDMA_PAIR_FAILED", "gpu03")} and len(got["violations"]) == 8  # one per rail
    assert {d["host"] for d in got["drain"]} == {"gpu03"}


def test_check_mode_previews_the_rounds_and_runs_nothing(tmp_path):
    got, stdout = run(tmp_path, FOUR, {"acceptance": {"rdma_pairs": {"mode": "all"}}}, "--check")
    assert got["records"] == [] and got["violations"] == []
    assert "3 round(s) of ib_write_bw (all)" in stdout


READMIT = """- name: Re-admission, as the remediate role runs it after a node's single-node acceptance
  hosts: readmitted
  gather_facts: false
  vars:
    gpufleet_brief: "{{ lookup('file', brief) | from_yaml | combine(extra_brief, recursive=true) }}"
    gpufleet_pool: {name: h100-lab, group: gpu_lab}
  tasks:
    - name: The node's rails, as node.yml records them
      ansible.builtin.set_fact:
        _acceptance_rdma_rails: >-
          {{ hw[inventory_hostname] | gpufleet.cluster.rdma_pairs_rails(gpufleet_brief, 'h100-lab') }}

    - name: The RDMA pair with the healthy neighbour
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: rdma_pairs_readmit
      vars:
        _acceptance_rdma_partner: gpu01
        _acceptance_rdma_base_port: "{{ 18515 + 32 * ansible_play_batch.index(inventory_hostname) }}"

    - name: Keep the verdict
      ansible.builtin.copy:
        content: "{{ _acceptance_rdma_readmit | to_json }}"
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        mode: "0644"
"""


def test_a_readmitted_node_is_tested_against_a_healthy_neighbour(tmp_path):
    nodes = {"gpu01": "h100-hgx-healthy", "gpu02": "h100-slow-rail", "gpu03": "h100-hgx-healthy"}
    hosts, hw = [], {}
    for node, name in nodes.items():
        profile = json.loads((PROFILES / f"{name}.json").read_text())
        profile["hostname"] = node
        path = tmp_path / f"{node}.json"
        path.write_text(json.dumps(profile))
        wrapper = tmp_path / f"ib_write_bw-{node}"
        wrapper.write_text(WRAPPER.format(profile=path, python=sys.executable, double=DOUBLE))
        wrapper.chmod(0o755)
        hosts.append(f"{node}: {{acceptance_ib_write_bw: {wrapper}, acceptance_rdma_pairs_address: 127.0.0.1}}")
        hw[node] = hw_facts(profile)
    (tmp_path / "hosts.yml").write_text(
        "all:\n  vars:\n    ansible_connection: local\n  children:\n"
        "    gpu_lab:\n      hosts: {" + ", ".join(hosts) + "}\n"
        "    readmitted:\n      hosts: {gpu02: {}, gpu03: {}}\n"
    )
    (tmp_path / "play.yml").write_text(READMIT)
    out = tmp_path / "out"
    out.mkdir()
    extra = {
        "out": str(out),
        "brief": str(lab_brief_without_gates(tmp_path)),
        "extra_brief": {"acceptance": {"rdma_pairs": {"mode": "rail"}}},
        "hw": hw,
        "acceptance_rdma_pairs_timeout": 40,
        "acceptance_rdma_pairs_port_spread": True,
    }
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", json.dumps(extra)]
    env = ansible_env(None, ANSIBLE_PYTHON_INTERPRETER=str(VENV_BIN / "python"))
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    got = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    # Both re-admitted nodes wrote to the same neighbour at once, each on its own TCP ports.
    assert {p["server"] for r in got.values() for p in r["pairs"]} == {"gpu01"}
    assert all(len(r["pairs"]) == 8 and {p["status"] for p in r["pairs"]} == {"measured"} for r in got.values())
    assert got["gpu03"]["violations"] == []
    assert [(v["code"], v["host"]) for v in got["gpu02"]["violations"]] == [("RDMA_LINK_SLOW", None)]
    assert "gpu02 mlx5_4 (rail 4)" in got["gpu02"]["violations"][0]["message"]
