"""The boot double (molecule/resources/doubles/bin/gpufleet-double-boot): the GPUs' device nodes at each boot."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOUBLE = ROOT / "molecule/resources/doubles/bin/gpufleet-double-boot"
UNIT = ROOT / "molecule/resources/doubles/units/gpufleet-double-boot.service"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of character devices needs root")


def run(tmp_path, profile: dict) -> str:
    (tmp_path / "hw.json").write_text(json.dumps(profile))
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    out = subprocess.run(
        [
            sys.executable,
            str(DOUBLE),
            "--profile",
            str(tmp_path / "hw.json"),
            "--nic-profile",
            str(tmp_path / "absent.json"),
            "--dev",
            str(dev),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def devices(dev: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for entry in dev.iterdir():
        st = entry.lstat()
        assert stat.S_ISCHR(st.st_mode), f"{entry} is not a character device"
        assert stat.S_IMODE(st.st_mode) == 0o666, f"{entry} mode {oct(st.st_mode)}"
        found[entry.name] = (os.major(st.st_rdev), os.minor(st.st_rdev))
    return found


@needs_root
def test_creates_every_gpu_node_then_changes_nothing(tmp_path):
    assert run(tmp_path, {"gpu_count": 4}) == "changed"
    assert devices(tmp_path / "dev") == {
        "nvidia0": (195, 0),
        "nvidia1": (195, 1),
        "nvidia2": (195, 2),
        "nvidia3": (195, 3),
        "nvidiactl": (195, 255),
        "nvidia-uvm": (511, 0),
    }
    assert run(tmp_path, {"gpu_count": 4}) == "ok"


@needs_root
def test_replaces_a_plain_file_with_the_device(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidia1").write_text("not a device")
    assert run(tmp_path, {"gpu_count": 2}) == "changed"
    assert devices(tmp_path / "dev")["nvidia1"] == (195, 1)


@needs_root
def test_recreates_a_lost_node_as_a_boot_does(tmp_path):
    run(tmp_path, {"gpu_count": 2})
    (tmp_path / "dev" / "nvidia1").unlink()
    assert run(tmp_path, {"gpu_count": 2}) == "changed"
    assert "nvidia1" in devices(tmp_path / "dev")


def test_a_host_without_gpus_gets_no_nodes(tmp_path):
    assert run(tmp_path, {"gpu_count": 0}) == "ok"
    assert list((tmp_path / "dev").iterdir()) == []


def test_unit_runs_it_before_the_network_at_every_boot():
    text = UNIT.read_text()
    assert "ExecStart=/usr/local/libexec/gpufleet-doubles/gpufleet-double-boot" in text
    assert "Before=sysinit.target network-pre.target systemd-networkd.service" in text
    assert "WantedBy=sysinit.target" in text
    assert "Type=oneshot" in text
