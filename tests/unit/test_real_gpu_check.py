"""scripts/real_gpu_check: fails clearly without a GPU; with the nvidia-smi stand-in it runs the gate end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "real_gpu_check"
DOUBLE = ROOT / "molecule" / "resources" / "doubles" / "bin" / "nvidia-smi"
PROFILES = ROOT / "molecule" / "resources" / "profiles"


def run(args, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "GPUFLEET_HW_PROFILE"}
    full.update(env)
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=full, timeout=280
    )


def test_without_nvidia_smi_it_fails_clearly_and_runs_nothing(tmp_path):
    out = tmp_path / "out"
    done = run([out], PATH=str(tmp_path))
    assert done.returncode == 2
    assert "nvidia-smi not found on PATH: this check needs a machine with an NVIDIA GPU" in done.stderr
    assert not out.exists()
    done = run([out, "--nvidia-smi", tmp_path / "no" / "nvidia-smi"])
    assert done.returncode == 2 and "not found" in done.stderr


def test_nvidia_smi_that_cannot_reach_the_driver_is_kept_and_reported(tmp_path):
    # The stand-in without a hardware profile answers as nvidia-smi does without a driver.
    out = tmp_path / "out"
    done = run([out, "--nvidia-smi", DOUBLE], GPUFLEET_HW_PROFILE=str(tmp_path / "none.json"))
    assert done.returncode == 2
    assert "the driver does not answer" in done.stderr
    assert "couldn't communicate with the NVIDIA driver" in (out / "raw" / "nvidia-smi-query-gpu.csv").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit"] == 2 and "driver" in summary["error"]


def test_with_the_stand_in_the_gate_runs_and_its_verdict_is_recorded(tmp_path):
    out = tmp_path / "out"
    profile = PROFILES / "h100-wrong-model.json"
    # The brief asks for H100 SXM; the profile's GPUs carry another name: the gate must say so.
    done = run([out, "--nvidia-smi", DOUBLE, "--accelerator", "h100-sxm-80gb"], GPUFLEET_HW_PROFILE=str(profile))
    assert done.returncode == 1, done.stdout + done.stderr
    raw = out / "raw"
    query = (raw / "nvidia-smi-query-gpu.csv").read_text()
    assert query.count("\n") == json.loads(profile.read_text())["gpu_count"]
    assert "GPU" in (raw / "nvidia-smi-topo-m.txt").read_text()
    assert "Product Name" in (raw / "nvidia-smi-q.txt").read_text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["gate"]["status"] == "fail"
    assert "HW_GPU_MODEL" in summary["gate"]["codes"]
    (junit,) = summary["playbook"]["junit"]
    root = ET.parse(junit).getroot()
    failure = root.find("testsuite[@name='localhost']/testcase[@name='GPUs']/failure")
    assert failure is not None and "HW_GPU_MODEL" in failure.text
    # No NVLink topology and no fabric in this brief: those checks are skipped, not passed.
    assert root.find("testsuite/testcase[@name='NVLink']/skipped") is not None
