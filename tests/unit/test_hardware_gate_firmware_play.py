"""The hardware_gate role judges firmware as Ansible runs it: a pool of four local nodes, one with a GPU
on an older VBIOS (profile h100-firmware-odd), one whose BIOS differs from its three peers.

ansible-playbook runs roles/hardware_gate on local hosts of one pool. Each node's nvidia-smi is a wrapper
that gives the test double (molecule/resources/doubles/bin) that node's hardware profile, and its sysfs
root a tree gpufleet-double-sysfs wrote from the profile (RDMA ports, the BIOS under class/dmi/id). The
nodes' records, the JUnit XML and the history the role leaves are read back. No lab is needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gpufleet_cli.main import main
from lab_playbook import ROOT, VENV_BIN, ansible_env

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

DOUBLES = ROOT / "molecule/resources/doubles/bin"
PROFILES = ROOT / "molecule/resources/profiles"

WRAPPER = """#!/bin/sh
GPUFLEET_HW_PROFILE={profile} exec {python} {double} "$@"
"""

PLAYBOOK = """- name: The hardware gate, as verify runs it
  hosts: gpu_lab
  gather_facts: false
  vars:
    gpufleet_brief: "{{ brief }}"
    gpufleet_pool: "{{ brief.pools[0] }}"
  roles:
    - role: hardware_gate
"""

# A brief like the lab's, with only what these local nodes can meet: the doubles' GPUs and rails and the
# driver they report (no CUDA / NCCL / toolkit pins: this machine has none of them).
BRIEF = {
    "cluster": {"name": "fwlab", "control_plane": "slurm", "os": "ubuntu-24.04"},
    "software": {"driver": "570.133.20"},
    "networks": {"fabric": {"type": "infiniband", "link_speed_gbps": 400}},
    "pools": [
        {
            "name": "h100-lab",
            "group": "gpu_lab",
            "accelerator": "h100-sxm-80gb",
            "gpus_per_node": 8,
            "topology": "8gpu-sxm-nvlink",
            "nics_per_node": 8,
        }
    ],
}


def run(tmp_path: Path, firmware: dict | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    profiles = {
        "gpu01": PROFILES / "h100-hgx-healthy.json",
        "gpu02": PROFILES / "h100-hgx-healthy.json",
        "gpu03": PROFILES / "h100-firmware-odd.json",
        "gpu04": tmp_path / "bios-2.3.0.json",
    }
    other = json.loads((PROFILES / "h100-hgx-healthy.json").read_text())
    other["bios"] = {"version": "2.3.0", "date": "11/02/2024"}  # updated apart from its peers
    profiles["gpu04"].write_text(json.dumps(other))
    hosts = []
    for node, profile in profiles.items():
        wrapper = tmp_path / f"nvidia-smi-{node}"
        wrapper.write_text(WRAPPER.format(profile=profile, python=sys.executable, double=DOUBLES / "nvidia-smi"))
        wrapper.chmod(0o755)
        sysfs = tmp_path / f"sysfs-{node}"
        made = subprocess.run(
            [sys.executable, str(DOUBLES / "gpufleet-double-sysfs"), "--profile", str(profile), str(sysfs)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert made.returncode == 0, made.stderr
        hosts.append(
            f"{node}: {{hardware_gate_nvidia_smi: {wrapper}, hardware_gate_sysfs_root: {sysfs}, "
            f"hardware_gate_ibstat: {tmp_path / 'absent' / 'ibstat'}, hardware_gate_cuda_home: {tmp_path / 'cuda'}}}"
        )
    (tmp_path / "hosts.yml").write_text(
        "all:\n  vars:\n    ansible_connection: local\n  children:\n    gpu_lab:\n      hosts: {"
        + ", ".join(hosts)
        + "}\n"
    )
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    reports = tmp_path / "reports"
    brief = json.loads(json.dumps(BRIEF))
    if firmware is not None:
        brief["acceptance"] = {"firmware": firmware}
    env = ansible_env(ANSIBLE_PYTHON_INTERPRETER=str(VENV_BIN / "python"))
    extra = {"brief": brief, "hardware_gate_report_dir": str(reports)}
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", json.dumps(extra)]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    return proc, reports / "fwlab"


def _records(cluster_dir: Path) -> dict:
    (gate,) = cluster_dir.glob("*/gate")
    return {p.stem: json.loads(p.read_text()) for p in sorted(gate.glob("*.json"))}


def test_the_gate_names_the_odd_gpu_and_the_odd_nodes_bios(tmp_path, capsys):
    proc, cluster_dir = run(tmp_path)
    # The two odd nodes fail on their own; the healthy ones pass.
    assert proc.returncode == 2, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "1 hardware violation(s) on gpu03" in proc.stdout and "1 hardware violation(s) on gpu04" in proc.stdout
    records = _records(cluster_dir)
    assert {h: (r["status"], r["codes"]) for h, r in records.items()} == {
        "gpu01": ("pass", []),
        "gpu02": ("pass", []),
        "gpu03": ("fail", ["HW_FIRMWARE_MIXED"]),
        "gpu04": ("fail", ["HW_FIRMWARE_MIXED"]),
    }
    (odd_gpu,) = records["gpu03"]["violations"]
    assert odd_gpu["message"].startswith(
        "VBIOS differs inside this node: GPU 0-4,6-7 96.00.99.00.01; GPU 5 96.00.74.00.0D; "
        "the majority is 96.00.99.00.01 (7 of 8)"
    )
    (odd_bios,) = records["gpu04"]["violations"]
    assert odd_bios["field"] == "firmware.bios.version"
    assert odd_bios["message"].startswith("BIOS is 2.3.0 here, 3 of 4 nodes in h100-lab have 2.4.1")
    assert records["gpu03"]["summary"]["firmware"] == (
        "VBIOS 96.00.99.00.01 x7 / 96.00.74.00.0D x1, NIC 28.43.2026, BIOS 2.4.1"
    )
    assert records["gpu01"]["facts"]["firmware"]["bios"]["vendor"] == "American Megatrends International, LLC."
    junit = next(cluster_dir.glob("*/gate/junit.xml")).read_text()
    assert junit.count('name="firmware (VBIOS, NIC, BIOS)"') == 4
    assert 'failures="2"' in junit  # the two firmware cases; every other check passed on all four
    assert '<failure message="HW_FIRMWARE_MIXED: BIOS is 2.3.0 here' in junit
    history = [json.loads(line) for line in (cluster_dir / "history.jsonl").read_text().splitlines()]
    assert {r["host"]: (r["verdict"], r.get("codes", [])) for r in history} == {
        "gpu01": ("pass", []),
        "gpu02": ("pass", []),
        "gpu03": ("fail", ["HW_FIRMWARE_MIXED"]),
        "gpu04": ("fail", ["HW_FIRMWARE_MIXED"]),
    }
    # The CLI: the gate's Markdown report has the firmware column, the node's history the code.
    assert main(["report", "--dir", str(cluster_dir.parent), "--kind", "gate"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("| host |")).split(" | ")
    row = next(line for line in out.splitlines() if line.startswith("| gpu03 |")).split(" | ")
    assert row[header.index("firmware")] == "VBIOS 96.00.99.00.01 x7 / 96.00.74.00.0D x1, NIC 28.43.2026, BIOS 2.4.1"
    assert row[-1] == "HW_FIRMWARE_MIXED |"
    assert main(["report", "history", "gpu04", "--dir", str(cluster_dir.parent), "--cluster", "fwlab"]) == 0
    out = capsys.readouterr().out
    assert "| gate |" in out and "HW_FIRMWARE_MIXED" in out


def test_a_minimum_instead_of_homogeneity(tmp_path):
    proc, cluster_dir = run(tmp_path, {"homogeneous": False, "min": {"vbios": "96.00.99.00.01", "bios": "2.4"}})
    assert proc.returncode == 2, proc.stdout[-4000:] + proc.stderr[-2000:]
    records = _records(cluster_dir)
    assert {h: r["codes"] for h, r in records.items()} == {
        "gpu01": [],
        "gpu02": [],
        "gpu03": ["HW_FIRMWARE_OLD"],
        "gpu04": ["HW_FIRMWARE_OLD"],
    }
    assert records["gpu03"]["violations"][0]["message"].startswith(
        "VBIOS of GPU 5 is 96.00.74.00.0D, older than the minimum 96.00.99.00.01 (acceptance.firmware.min.vbios)"
    )
    assert records["gpu04"]["violations"][0]["message"].startswith(
        "BIOS is 2.3.0, older than the minimum 2.4 (acceptance.firmware.min.bios)"
    )
