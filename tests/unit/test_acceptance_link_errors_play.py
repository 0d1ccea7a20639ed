"""The acceptance role reads each node's link error counters before and after the NCCL runs, as Ansible runs it.

ansible-playbook runs roles/acceptance/tasks/node.yml on three local GPU nodes of the lab's pool (phase 1:
the counters read, then all_reduce on each node alone), then tasks/link_errors.yml and tasks/drain.yml on a
local controller (the end of phase 2: the counters read again on every node, judged, the bad node drained).
Each node has its own fake sysfs tree, written by gpufleet-double-sysfs from its hardware profile, and its
own all_reduce_perf (the test double, given that node's profile and tree): the node with the
h100-link-flapping profile sees its mlx5_2 counters grow with each run, the healthy ones do not.
systemctl, sinfo and scontrol are stand-ins on PATH that log their calls. No lab is needed.
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

DOUBLES = ROOT / "molecule/resources/doubles/bin"
PROFILES = ROOT / "molecule/resources/profiles"

WRAPPER = """#!/bin/sh
GPUFLEET_HW_PROFILE={profile} GPUFLEET_DOUBLE_SYSFS={sysfs} exec {python} {double} "$@"
"""

STUBS = {
    "systemctl": """#!/bin/sh
echo "systemctl $*" >> "$STUB_DIR/calls"
shift
for unit in "$@"; do echo active; done
""",
    "sinfo": SINFO_STUB,
    "scontrol": """#!/bin/sh
echo "scontrol $*" >> "$STUB_DIR/calls"
""",
}

PLAYBOOK = """- name: Phase 1, as node.yml runs it
  hosts: gpu_lab
  gather_facts: false
  vars:
    gpufleet_brief: "{{ lookup('file', brief) | from_yaml | combine(extra_brief, recursive=true) }}"
  tasks:
    - name: The node's pool, as the brief role sets it
      ansible.builtin.set_fact:
        gpufleet_pool: "{{ gpufleet_brief.pools[0] }}"

    - name: Phase 1
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: node

- name: The end of phase 2, as cluster.yml runs it
  hosts: ctl01
  gather_facts: false
  vars:
    gpufleet_brief: "{{ lookup('file', brief) | from_yaml | combine(extra_brief, recursive=true) }}"
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
        _acceptance_link_errors: []

    - name: Link error counters after the NCCL runs
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: link_errors

    - name: Drain
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: drain

    - name: Keep what the play recorded
      ansible.builtin.copy:
        content: >-
          {{ {'violations': _acceptance_violations, 'drained': _acceptance_drained,
              'link_errors': _acceptance_link_errors,
              'singles': groups['gpu_lab'] | map('extract', hostvars, '_acceptance_single') | list,
              'nodes': groups['gpu_lab'] | map('extract', hostvars, '_acceptance_node') | list} | to_json }}
        dest: "{{ out }}"
        mode: "0644"
      check_mode: false
"""

# One node on its own, as the remediate role re-accepts it: node.yml then link_errors_node.yml on the node.
NODE_PLAYBOOK = """- name: Re-acceptance of each node alone, as the remediate role runs it
  hosts: gpu_lab
  gather_facts: false
  vars:
    gpufleet_brief: "{{ lookup('file', brief) | from_yaml | combine(extra_brief, recursive=true) }}"
  tasks:
    - name: The node's pool, as the brief role sets it
      ansible.builtin.set_fact:
        gpufleet_pool: "{{ gpufleet_brief.pools[0] }}"

    - name: Single-node acceptance
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: node

    - name: Its link error counters
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: link_errors_node

- name: Keep what the nodes recorded
  hosts: ctl01
  gather_facts: false
  tasks:
    - name: Write it
      ansible.builtin.copy:
        content: >-
          {{ {'link_errors': groups['gpu_lab'] | map('extract', hostvars, '_acceptance_link_node') | list,
              'drained': [], 'violations': []} | to_json }}
        dest: "{{ out }}"
        mode: "0644"
      check_mode: false
"""

NODES = {"gpu01": "h100-hgx-healthy", "gpu02": "h100-link-flapping", "gpu03": "h100-hgx-healthy"}


def run(
    tmp_path: Path, extra_brief: dict | None = None, *args: str, playbook: str = PLAYBOOK
) -> tuple[dict, list[str], str]:
    hosts = []
    for node, profile in NODES.items():
        sysfs = tmp_path / "sysfs" / node
        subprocess.run(
            [
                sys.executable,
                str(DOUBLES / "gpufleet-double-sysfs"),
                "--profile",
                str(PROFILES / f"{profile}.json"),
                str(sysfs),
            ],
            check=True,
            capture_output=True,
        )
        wrapper = tmp_path / f"all_reduce_perf-{node}"
        wrapper.write_text(
            WRAPPER.format(
                profile=PROFILES / f"{profile}.json",
                sysfs=sysfs,
                python=sys.executable,
                double=DOUBLES / "all_reduce_perf",
            )
        )
        wrapper.chmod(0o755)
        hosts.append(
            f"{node}: {{acceptance_all_reduce_perf: {wrapper}, acceptance_link_errors_sysfs_root: {sysfs}, "
            f"acceptance_nvbandwidth: {tmp_path / 'absent'}}}"
        )
    (tmp_path / "hosts.yml").write_text(
        "all:\n  vars:\n    ansible_connection: local\n  children:\n    slurm_controllers:\n      hosts: {ctl01: {}}\n"
        "    gpu_lab:\n      hosts: {" + ", ".join(hosts) + "}\n"
    )
    (tmp_path / "play.yml").write_text(playbook)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "nvidia-smi").symlink_to(DOUBLES / "nvidia-smi")
    for name, text in STUBS.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    (state / "sinfo").write_text("".join(f"{n}|idle\n" for n in NODES))
    out = tmp_path / "out.json"
    env = ansible_env(
        stubs,
        STUB_DIR=str(state),
        GPUFLEET_HW_PROFILE=str(PROFILES / "h100-hgx-healthy.json"),
        ANSIBLE_PYTHON_INTERPRETER=str(VENV_BIN / "python"),
    )
    extra = {
        "out": str(out),
        "brief": str(lab_brief_without_gates(tmp_path)),
        "extra_brief": extra_brief or {},
        "acceptance_min_bytes": "1G",
    }
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", json.dumps(extra), *args]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    calls = (state / "calls").read_text().splitlines() if (state / "calls").exists() else []
    return json.loads(out.read_text()), calls, proc.stdout


def test_the_flapping_port_is_named_and_its_node_drained_the_clean_ones_pass(tmp_path):
    recorded, calls, stdout = run(tmp_path)
    by_host = {r["host"]: r for r in recorded["link_errors"]}
    assert {h: r["status"] for h, r in by_host.items()} == dict.fromkeys(NODES, "measured")
    assert [len(r["ports"]) for r in by_host.values()] == [8, 8, 8]
    # One all_reduce run on gpu02: +40 symbol errors, +1 link down on mlx5_2 port 1; nothing elsewhere.
    grew = [(g["device"], g["port"], g["counter"], g["before"], g["after"]) for g in by_host["gpu02"]["grew"]]
    assert grew == [("mlx5_2", "1", "symbol_error", 0, 40), ("mlx5_2", "1", "link_downed", 0, 1)]
    assert by_host["gpu01"]["grew"] == [] and by_host["gpu03"]["grew"] == []
    named = sorted((v["code"], v["host"]) for v in recorded["violations"])
    assert named == [("LINK_ERRORS_GREW", "gpu02"), ("LINK_ERRORS_GREW", "gpu02")]
    # busbw passed on every node: the link errors are the only finding.
    assert all(not s["violations"] for s in recorded["singles"]), recorded["singles"]
    # Drained under the breaker (one of three nodes), with the port in the reason.
    assert recorded["drained"] == ["gpu02"]
    assert [c for c in calls if c.startswith("scontrol")] == [
        "scontrol update NodeName=gpu02 State=DRAIN Reason=gpufleet acceptance: link errors: mlx5_2 port 1 "
        "symbol_error 0->40 (max +10) and 1 more (report 20260101T000000Z)"
    ]
    assert "gpu02: measured; mlx5_2 port 1 symbol_error 0 -> 40 (tolerated +10)" in stdout

    report = build_report(
        "lab",
        runs=recorded["singles"],
        nodes=recorded["nodes"],
        violations=recorded["violations"],
        drained=recorded["drained"],
        link_errors=recorded["link_errors"],
        timestamp="20260101T000000Z",
    )
    assert report["verdict"] == "fail"
    section = render_markdown(report).split("## Link error counters")[1]
    assert "| gpu01 | measured | 8 | none |" in section
    assert "| gpu02 | measured | 8 | mlx5_2:1 symbol_error 0->40 (max +10), mlx5_2:1 link_downed 0->1 (max +0) |" in (
        section
    )


def test_a_brief_that_tolerates_the_growth_accepts_every_node(tmp_path):
    tolerant = {"acceptance": {"link_errors": {"max_growth": {"symbol_error": 100, "link_downed": 1}}}}
    recorded, calls, _ = run(tmp_path, tolerant)
    assert recorded["violations"] == [] and recorded["drained"] == []
    assert [c for c in calls if c.startswith("scontrol")] == []


def test_a_brief_that_turns_the_gate_off_reads_nothing(tmp_path):
    recorded, _, stdout = run(tmp_path, {"acceptance": {"link_errors": {"enabled": False}}})
    assert recorded["link_errors"] == [] and recorded["violations"] == [] and recorded["drained"] == []
    assert "Read this node's link error counters before the NCCL runs" in stdout  # listed, skipped


def test_the_remediate_re_acceptance_of_one_node_catches_its_flapping_port(tmp_path):
    recorded, _, _ = run(tmp_path, playbook=NODE_PLAYBOOK)
    by_host = dict(zip(NODES, recorded["link_errors"], strict=True))
    assert [(v["code"], v["host"]) for v in by_host["gpu02"]["violations"]] == [("LINK_ERRORS_GREW", "gpu02")] * 2
    assert by_host["gpu01"]["violations"] == [] and by_host["gpu03"]["violations"] == []
    assert by_host["gpu01"]["record"]["status"] == "measured"
