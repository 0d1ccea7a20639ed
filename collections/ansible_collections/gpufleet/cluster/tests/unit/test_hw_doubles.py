"""The Molecule test doubles (nvidia-smi, ibstat, gpufleet-double-sysfs) speak the real tools' formats."""

from __future__ import annotations

import json
import os

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw import facts as h
from hw_helpers import PROFILES, load_profile, profile_path, run_double

# The hardware-gate profiles (other profiles in the directory belong to other scenarios).
ALL = sorted(f[:-5] for f in os.listdir(PROFILES) if f.startswith("h100-") and f.endswith(".json"))


@pytest.mark.parametrize("profile", ALL)
def test_profile_schema(profile):
    p = load_profile(profile)
    assert p["schema"] == 1 and p["gpu_count"] == len(p["gpus"])
    assert {
        "gpu_name",
        "memory_mib",
        "driver_version",
        "cuda_version",
        "nccl_version",
        "nvlink",
        "nics",
        "fabric_manager",
        "busbw_gbps",
        "net_busbw_gbps",
        "network",
        "gdr",
    } <= set(p)
    assert "hostname" not in p
    assert (p["fault"] is None) == (profile == "h100-hgx-healthy")


def test_query_gpu_honours_fields_header_and_units():
    path = profile_path("h100-hgx-healthy")
    out = run_double("nvidia-smi", ["--query-gpu=memory.total,index,name", "--format=csv"], path)
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == "memory.total [MiB], index, name" and lines[1] == "81559 MiB, 0, NVIDIA H100 80GB HBM3"
    gpus, problems = h.parse_query_gpu(out.stdout, ["memory.total", "index", "name"])
    assert problems == [] and gpus[7] == {"memory_mib": 81559, "index": 7, "name": "NVIDIA H100 80GB HBM3"}
    one = run_double("nvidia-smi", ["--query-gpu=index,uuid", "--format=csv,noheader", "-i", "3"], path)
    assert one.stdout.startswith("3, GPU-") and len(one.stdout.splitlines()) == 1


def test_query_gpu_rejects_unknown_field():
    out = run_double("nvidia-smi", ["--query-gpu=index,bogus", "--format=csv"], profile_path("h100-hgx-healthy"))
    assert out.returncode == 2 and 'Field "bogus" is not a valid field to query.' in out.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["-L"], "GPU 7: NVIDIA H100 80GB HBM3 (UUID: GPU-"),
        ([], "Driver Version: 570.133.20"),
        (["--version"], "DRIVER version      : 570.133.20"),
        (["-pm", "1"], "Persistence mode is already Enabled"),
    ],
)
def test_other_commands(args, needle):
    out = run_double("nvidia-smi", args, profile_path("h100-hgx-healthy"))
    assert out.returncode == 0 and needle in out.stdout


def test_q_parses_per_gpu_block():
    out = run_double("nvidia-smi", ["-q"], profile_path("h100-gpu-missing"))
    q, problems = h.parse_smi_q(out.stdout)
    assert problems == [] and q["attached_gpus"] == 7 and len(q["gpus"]) == 7
    assert q["gpus"][0]["fabric"]["state"] == "Completed" and q["gpus"][0]["memory_mib"] == 81559


def test_topo_degraded_pair():
    p = load_profile("h100-hgx-healthy")
    p["nvlink"]["degraded_pairs"] = [{"pair": [0, 3], "links": 12}]
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"gpufleet-degraded-{os.getpid()}.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(p, fh)
    try:
        topo, problems = h.parse_topo_matrix(run_double("nvidia-smi", ["topo", "-m"], path).stdout)
    finally:
        os.unlink(path)
    assert problems == [] and topo["gpu_links"][3][0] == "NV12" and topo["gpu_links"][1][2] == "NV18"


@pytest.mark.parametrize("profile", ["h100-hgx-healthy", "h100-rdma-port-down", "h100-rdma-rate-200"])
def test_ibstat_and_sysfs_agree(profile, tmp_path):
    path = profile_path(profile)
    from_ibstat, problems = h.parse_ibstat(run_double("ibstat", [], path).stdout)
    assert problems == []
    assert run_double("gpufleet-double-sysfs", [str(tmp_path)], path).stdout.strip() == "changed"
    from_sysfs, problems = h.read_rdma_sysfs(str(tmp_path))
    assert problems == []
    keys = ("device", "port", "state", "phys_state", "rate_gbps", "link_layer", "ca_type", "fw_ver")
    assert [{k: p[k] for k in keys} for p in from_ibstat] == [{k: p[k] for k in keys} for p in from_sysfs]
    assert from_sysfs[0]["netdevs"] == ["ibp24s0"] and from_sysfs[4]["numa_node"] == 1


def test_ibstat_subcommands():
    path = profile_path("h100-hgx-healthy")
    assert run_double("ibstat", ["-l"], path).stdout.split() == [f"mlx5_{i}" for i in range(8)]
    one, _ = h.parse_ibstat(run_double("ibstat", ["mlx5_2"], path).stdout)
    assert [p["device"] for p in one] == ["mlx5_2"]
    assert run_double("ibstat", ["mlx5_99"], path).returncode == 1


def test_sysfs_helper_is_idempotent_and_follows_profile_changes(tmp_path):
    dest = str(tmp_path / "sysfs")
    healthy, down = profile_path("h100-hgx-healthy"), profile_path("h100-rdma-port-down")
    assert run_double("gpufleet-double-sysfs", [dest], healthy).stdout.strip() == "changed"
    assert run_double("gpufleet-double-sysfs", [dest], healthy).stdout.strip() == "ok"
    assert run_double("gpufleet-double-sysfs", [dest], down).stdout.strip() == "changed"
    ports, _ = h.read_rdma_sysfs(dest)
    assert [p["device"] for p in ports if p["state"] == "DOWN"] == ["mlx5_3"]


def test_doubles_without_profile(tmp_path):
    missing = str(tmp_path / "none.json")
    env_backup = os.environ.get("GPUFLEET_HW_PROFILE")
    out = run_double("nvidia-smi", ["-L"], missing)
    if not os.path.exists("/etc/gpufleet-doubles/hw-profile.json"):
        assert out.returncode == 9 and "NVIDIA-SMI has failed" in out.stdout
        assert run_double("ibstat", [], missing).returncode == 1
        assert run_double("gpufleet-double-sysfs", [str(tmp_path)], missing).returncode == 2
    assert os.environ.get("GPUFLEET_HW_PROFILE") == env_backup
