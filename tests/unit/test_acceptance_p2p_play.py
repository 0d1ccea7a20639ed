"""The acceptance role's single-node phase gathers each node's GPU-to-GPU copies, as Ansible runs it.

ansible-playbook runs roles/acceptance/tasks/node.yml on local hosts of one pool. all_reduce_perf,
nvidia-smi and nvbandwidth are the test doubles of molecule/resources/doubles/bin, each node's
nvbandwidth a wrapper that gives the double that node's hardware profile (one planted with a slow
GPU pair); one node has no nvbandwidth at all. The records the play leaves go through the report
and the pool's outlier rule. No lab is needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lab_playbook import ROOT, VENV_BIN, ansible_env, lab_brief_without_gates

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

sys.path.insert(0, str(ROOT / "collections"))
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import (  # noqa: E402
    build_report,
    render_markdown,
)

DOUBLES = ROOT / "molecule/resources/doubles/bin"
PROFILES = ROOT / "molecule/resources/profiles"

WRAPPER = """#!/bin/sh
GPUFLEET_HW_PROFILE={profile} exec {python} {double} "$@"
"""

PLAYBOOK = """- name: Phase 1, as node.yml runs it
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
        content: "{{ {'node': _acceptance_node, 'single': _acceptance_single} | to_json }}"
        dest: "{{ out }}/{{ inventory_hostname }}.json"
        mode: "0644"
"""

NODES = {
    "gpu01": "h100-hgx-healthy",
    "gpu02": "h100-hgx-healthy",
    "gpu03": "h100-slow-p2p",
    "gpu04": "h100-hgx-healthy",
}


def run(tmp_path: Path, extra_brief: dict | None = None, **role_vars) -> dict:
    hosts = []
    for node, profile in NODES.items():
        wrapper = tmp_path / f"nvbandwidth-{node}"
        wrapper.write_text(
            WRAPPER.format(profile=PROFILES / f"{profile}.json", python=sys.executable, double=DOUBLES / "nvbandwidth")
        )
        wrapper.chmod(0o755)
        hosts.append(f"{node}: {{acceptance_nvbandwidth: {wrapper}}}")
    # A fifth node without nvbandwidth.
    hosts.append(f"gpu05: {{acceptance_nvbandwidth: {tmp_path / 'absent' / 'nvbandwidth'}}}")
    (tmp_path / "hosts.yml").write_text(
        "all:\n  vars:\n    ansible_connection: local\n  children:\n    gpu_lab:\n      hosts: {"
        + ", ".join(hosts)
        + "}\n"
    )
    (tmp_path / "play.yml").write_text(PLAYBOOK)
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
        "extra_brief": extra_brief or {},
        "acceptance_all_reduce_perf": str(DOUBLES / "all_reduce_perf"),
        "acceptance_min_bytes": "1G",
        **role_vars,
    }
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", json.dumps(extra)]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}


def test_each_node_gathers_its_copies_and_the_slow_pair_is_named(tmp_path):
    recorded = run(tmp_path)
    p2p = {h: r["single"]["p2p"] for h, r in recorded.items()}
    assert {h: p["status"] for h, p in p2p.items()} == {
        "gpu01": "measured",
        "gpu02": "measured",
        "gpu03": "measured",
        "gpu04": "measured",
        "gpu05": "not gathered",
    }
    assert p2p["gpu03"]["min_pair"] in ("3->6", "6->3") and p2p["gpu03"]["format"] == "json"
    assert p2p["gpu01"]["min_gbps"] > 370 > p2p["gpu03"]["min_gbps"]
    assert str(tmp_path / "absent" / "nvbandwidth") in p2p["gpu05"]["reason"]
    # Without acceptance.p2p.required nothing fails for the missing binary.
    assert not [v for r in recorded.values() for v in r["single"]["violations"] if v["code"].startswith("P2P_")]

    singles = [r["single"] for r in recorded.values()]
    nodes = [r["node"] for r in recorded.values()]
    brief = {"acceptance": {}}
    report = build_report("lab", runs=singles, nodes=nodes, brief=brief, timestamp="20260101T000000Z")
    named = [(v["code"], v["host"]) for v in report["violations"] if v["code"] == "P2P_OUTLIER"]
    assert named == [("P2P_OUTLIER", "gpu03")]
    assert "| gpu05 |" in render_markdown(report).split("## GPU-to-GPU copies (nvbandwidth)")[1]


def test_a_brief_that_requires_the_copies_fails_the_node_without_nvbandwidth(tmp_path):
    recorded = run(tmp_path, {"acceptance": {"p2p": {"required": True}}})
    found = [(v["code"], v["host"], v["severity"]) for r in recorded.values() for v in r["single"]["violations"]]
    assert ("P2P_NOT_GATHERED", "gpu05", "error") in found
    assert [f for f in found if f[0].startswith("P2P_")] == [("P2P_NOT_GATHERED", "gpu05", "error")]


def test_a_brief_that_requires_the_copies_overrules_the_roles_switch(tmp_path):
    # acceptance_p2p false would skip nvbandwidth; the brief requires the figures, so they are still
    # gathered, and the node without the tool still fails rather than being accepted without them.
    recorded = run(tmp_path, {"acceptance": {"p2p": {"required": True}}}, acceptance_p2p=False)
    status = {h: (r["single"]["p2p"] or {}).get("status") for h, r in recorded.items()}
    assert status == dict.fromkeys(NODES, "measured") | {"gpu05": "not gathered"}
    found = [(v["code"], v["host"]) for r in recorded.values() for v in r["single"]["violations"]]
    assert [f for f in found if f[0].startswith("P2P_")] == [("P2P_NOT_GATHERED", "gpu05")]
