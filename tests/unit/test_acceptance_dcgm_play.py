"""The GPU diagnostics gate as Ansible runs it: phase 1 (roles/acceptance/tasks/node.yml) runs dcgmi diag on
every node, and the drain step (tasks/drain.yml) takes the node with the failing GPU out of Slurm.

ansible-playbook runs node.yml on three local hosts of one pool with the lab brief and
acceptance.dcgm_diag.level 2. all_reduce_perf, nvidia-smi and dcgmi are the test doubles of
molecule/resources/doubles/bin; each node's dcgmi is a wrapper that gives the double that node's hardware
profile, gpu02's planting a failing memory test on GPU 3 (h100-dcgm-memory-fail). Then drain.yml runs on a
local controller, with systemctl, sinfo and scontrol stand-ins that log their calls (as in
test_acceptance_drain_play.py). The records go through the report. No lab is needed.
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
GPUFLEET_HW_PROFILE={profile} GPUFLEET_DCGMI_SECONDS_PER_LEVEL=0 exec {python} {double} "$@"
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

- name: The drain of phase 2, as cluster.yml runs it
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

    - name: Drain
      ansible.builtin.include_role:
        name: acceptance
        tasks_from: drain

    - name: Keep what the drain recorded
      ansible.builtin.copy:
        content: "{{ {'violations': _acceptance_violations, 'drained': _acceptance_drained} | to_json }}"
        dest: "{{ out }}/drain.json"
        mode: "0644"
"""

NODES = {
    "gpu01": "h100-hgx-healthy",
    "gpu02": "h100-dcgm-memory-fail",
    "gpu03": "h100-hgx-healthy",
}


def run(tmp_path: Path, extra_brief: dict, **role_vars) -> tuple[dict, list[str], str]:
    hosts = []
    for node, profile in NODES.items():
        wrapper = tmp_path / f"dcgmi-{node}"
        wrapper.write_text(
            WRAPPER.format(profile=PROFILES / f"{profile}.json", python=sys.executable, double=DOUBLES / "dcgmi")
        )
        wrapper.chmod(0o755)
        hosts.append(f"{node}: {{acceptance_dcgmi: {wrapper}}}")
    (tmp_path / "hosts.yml").write_text(
        "all:\n  vars:\n    ansible_connection: local\n  children:\n"
        "    slurm_controllers:\n      hosts: {ctl01: {}}\n"
        "    gpu_lab:\n      hosts: {" + ", ".join(hosts) + "}\n"
    )
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    out = tmp_path / "out"
    out.mkdir()
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "nvidia-smi").symlink_to(DOUBLES / "nvidia-smi")
    for name, text in STUBS.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    (state / "sinfo").write_text("".join(f"{n}|idle\n" for n in NODES))
    env = ansible_env(
        stubs,
        STUB_DIR=str(state),
        GPUFLEET_HW_PROFILE=str(PROFILES / "h100-hgx-healthy.json"),
        ANSIBLE_PYTHON_INTERPRETER=str(VENV_BIN / "python"),
    )
    extra = {
        "out": str(out),
        "brief": str(lab_brief_without_gates(tmp_path)),
        "extra_brief": extra_brief,
        "acceptance_all_reduce_perf": str(DOUBLES / "all_reduce_perf"),
        "acceptance_min_bytes": "1G",
        "acceptance_p2p": False,
        **role_vars,
    }
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", json.dumps(extra)]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    recorded = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
    calls = (state / "calls").read_text().splitlines() if (state / "calls").exists() else []
    return recorded, calls, proc.stdout


def test_the_planted_gpu_fault_is_caught_named_and_drained_and_clean_nodes_pass(tmp_path):
    recorded, calls, stdout = run(tmp_path, {"acceptance": {"dcgm_diag": {"level": 2}}})
    diag = {h: recorded[h]["single"]["dcgm_diag"] for h in NODES}
    assert {h: d["status"] for h, d in diag.items()} == {"gpu01": "passed", "gpu02": "failed", "gpu03": "passed"}
    assert {d["level"] for d in diag.values()} == {2}
    assert [t["name"] for t in diag["gpu01"]["tests"]] == ["software", "memory", "pcie"]
    assert [(f["gpu"], f["test"]) for f in diag["gpu02"]["failures"]] == [(3, "memory")]
    found = {h: [(v["code"], v["severity"]) for v in recorded[h]["single"]["violations"]] for h in NODES}
    assert found == {"gpu01": [], "gpu02": [("DCGM_DIAG_FAILED", "error")], "gpu03": []}
    assert (
        "GPU 3 failed test memory (Hardware): Found 6 faulty memory elements on GPU 3"
        in (recorded["gpu02"]["single"]["violations"][0]["message"])
    )
    # The all_reduce run itself passed on every node: the diagnostics alone fail gpu02.
    assert all(recorded[h]["single"]["busbw"] for h in NODES)
    assert "GPU diagnostics (dcgmi diag -r 2): FAILED - GPU 3 memory" in stdout

    # Drained under the breaker (one node of three), with the GPU and the test as the reason.
    assert [c for c in calls if c.startswith("scontrol")] == [
        "scontrol update NodeName=gpu02 State=DRAIN "
        "Reason=gpufleet acceptance: dcgmi diag -r 2 failed: GPU 3 memory (report 20260101T000000Z)"
    ]
    assert recorded["drain"] == {"violations": [], "drained": ["gpu02"]}

    report = build_report(
        "lab",
        runs=[recorded[h]["single"] for h in NODES],
        nodes=[recorded[h]["node"] for h in NODES],
        violations=[v for h in NODES for v in recorded[h]["single"]["violations"]],
        drained=["gpu02"],
        timestamp="20260101T000000Z",
    )
    # Every all_reduce run passed its gate; the one error is the diagnostics', and it fails the verdict.
    assert [e["result"] for e in report["runs"]] == ["pass"] * 3
    assert report["verdict"] == "fail" and report["counts"]["errors"] == 1
    section = render_markdown(report).split("## GPU diagnostics (dcgmi diag)")[1].split("\n## ")[0]
    assert "| gpu01 | 2 | 4.2.3 | passed |" in section and "| gpu02 | 2 | 4.2.3 | failed |" in section


def test_level_1_does_not_run_the_memory_test_and_passes_every_node(tmp_path):
    # The planted fault is in a test level 1 does not run: the node passes, as it would on real hardware.
    recorded, calls, _ = run(tmp_path, {"acceptance": {"dcgm_diag": {"level": 1}}})
    assert {h: recorded[h]["single"]["dcgm_diag"]["status"] for h in NODES} == dict.fromkeys(NODES, "passed")
    assert [c for c in calls if c.startswith("scontrol")] == []


def test_off_without_a_level_and_a_missing_dcgmi_fails_the_node(tmp_path):
    recorded, _, _ = run(tmp_path, {})
    assert all(recorded[h]["single"]["dcgm_diag"] is None for h in NODES)
    (tmp_path / "absent").mkdir()
    recorded, calls, _ = run(
        tmp_path / "absent", {"acceptance": {"dcgm_diag": {"level": 2}}}, acceptance_dcgmi="/nonexistent/dcgmi"
    )
    assert {h: recorded[h]["single"]["dcgm_diag"]["status"] for h in NODES} == dict.fromkeys(NODES, "error")
    assert {v["code"] for h in NODES for v in recorded[h]["single"]["violations"]} == {"DCGM_DIAG_RUN_FAILED"}
    # Every node failing at once trips the breaker: nothing is drained.
    assert [c for c in calls if c.startswith("scontrol")] == []
    assert [v["code"] for v in recorded["drain"]["violations"]] == ["DRAIN_BREAKER_TRIPPED"]
