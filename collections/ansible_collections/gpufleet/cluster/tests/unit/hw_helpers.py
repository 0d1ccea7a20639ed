"""Shared helpers for the hardware-gate tests: fixtures, a brief, fake sysfs trees and the test doubles."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.facts import build_facts, read_rdma_sysfs

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "hw")
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", "..", "..", ".."))
DOUBLES_BIN = os.path.join(REPO, "molecule", "resources", "doubles", "bin")
PROFILES = os.path.join(REPO, "molecule", "resources", "profiles")

# A site like shared/examples/brief.yml: 8x H100 HGX, 8 NDR400 IB rails, inbox rdma-core.
BRIEF = {
    "brief_version": 1,
    "software": {
        "driver": "570.133.20",
        "driver_flavor": "open",
        "cuda": "12.8",
        "nccl": "2.26.2",
        "container_toolkit": "1.17.5",
        "rdma_stack": "inbox",
    },
    "networks": {"fabric": {"type": "infiniband", "link_speed_gbps": 400, "mtu": 4092}},
    "pools": [
        {
            "name": "h100-train",
            "group": "gpu_h100",
            "accelerator": "h100-sxm-80gb",
            "gpus_per_node": 8,
            "topology": "8gpu-sxm-nvlink",
            "nics_per_node": 8,
            "memory_gib": 2048,
            "numa_nodes": 2,
            "nvme": {"count": 8, "min_size_gb": 3840},
        }
    ],
}


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as fh:
        return fh.read()


def brief_and_pool() -> tuple[dict, dict]:
    brief = copy.deepcopy(BRIEF)
    return brief, brief["pools"][0]


def healthy_raw() -> dict:
    """Raw outputs of a healthy 8x H100 HGX node, every one from a real-format fixture."""
    return {
        "query_gpu": fixture("query_gpu_h100.csv"),
        "topo": fixture("topo_h100_8nic_rail.txt"),
        "smi_q": fixture("smi_q_h100_healthy.txt"),
        "driver_proc": fixture("driver_proc_open.txt"),
        "ibstat": fixture("ibstat_h100_8x_ndr400_ib_bf3.txt"),
        "lscpu": fixture("lscpu_2s_spr.txt"),
        "meminfo": fixture("meminfo_2tib.txt"),
        "lsblk": fixture("lsblk_9nvme.json"),
        "osrelease": "6.8.0-51-generic\n",
        "cuda_version_json": fixture("cuda_version.json"),
        "dpkg": fixture("dpkg_query.txt"),
        "nvidia_ctk": fixture("nvidia_ctk_version.txt"),
        "fabricmanager_version": fixture("fabricmanager_version.txt"),
        "fabricmanager_service": "active\n",
    }


def healthy_facts() -> dict:
    return build_facts(healthy_raw())


def write_tree(root: str, files: dict[str, str]) -> None:
    """Create files (relative path -> content) under root; a path ending in '/' makes a directory."""
    for rel, content in files.items():
        path = os.path.join(root, rel)
        if rel.endswith("/"):
            os.makedirs(path, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(content)


def rdma_sysfs_files(ports: list[tuple[str, int, str, str, str, str]], numa: dict | None = None) -> dict[str, str]:
    """Sysfs files for (device, port, state, phys_state, rate, link_layer) tuples, in the kernel's format."""
    files: dict[str, str] = {}
    for dev, port, state, phys, rate, layer in ports:
        base = f"class/infiniband/{dev}"
        files[f"{base}/hca_type"] = "MT4129\n"
        files[f"{base}/fw_ver"] = "28.43.2026\n"
        files[f"{base}/node_guid"] = "9c63:c003:00e1:0040\n"
        files[f"{base}/device/numa_node"] = f"{(numa or {}).get(dev, -1)}\n"
        files[f"{base}/ports/{port}/state"] = state + "\n"
        files[f"{base}/ports/{port}/phys_state"] = phys + "\n"
        files[f"{base}/ports/{port}/rate"] = rate + "\n"
        files[f"{base}/ports/{port}/link_layer"] = layer + "\n"
    return files


def run_double(name: str, args: list[str], profile: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, GPUFLEET_HW_PROFILE=profile)
    return subprocess.run(
        [sys.executable, os.path.join(DOUBLES_BIN, name), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def profile_path(name: str) -> str:
    return os.path.join(PROFILES, f"{name}.json")


def load_profile(name: str) -> dict:
    with open(profile_path(name), encoding="utf-8") as fh:
        return json.load(fh)


def facts_from_doubles(profile: str, sysfs_dir: str) -> dict:
    """Facts as the module would build them on a lab node: GPU/NIC outputs from the doubles, host from fixtures."""
    path = profile_path(profile)
    query = run_double(
        "nvidia-smi",
        ["--query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version", "--format=csv,noheader,nounits"],
        path,
    )
    topo = run_double("nvidia-smi", ["topo", "-m"], path)
    smi_q = run_double("nvidia-smi", ["-q"], path)
    sysfs = run_double("gpufleet-double-sysfs", [sysfs_dir], path)
    assert query.returncode == topo.returncode == smi_q.returncode == sysfs.returncode == 0, (
        query.stderr + topo.stderr + smi_q.stderr + sysfs.stderr
    )
    ports, problems = read_rdma_sysfs(sysfs_dir)
    assert not problems
    raw = healthy_raw()
    raw.update(query_gpu=query.stdout, topo=topo.stdout, smi_q=smi_q.stdout, rdma_sysfs=ports, ibstat=None)
    for key in ("version", "vendor", "date"):  # the BIOS as gpu_facts reads it, from the double's DMI files
        with open(os.path.join(sysfs_dir, "class", "dmi", "id", f"bios_{key}"), encoding="utf-8") as fh:
            raw[f"dmi_bios_{key}"] = fh.read()
    raw.pop("driver_proc")  # the doubles play no kernel module
    raw.pop("fabricmanager_version")  # nor nv-fabricmanager
    return build_facts(raw)


def codes(violations: list[dict], severity: str | None = "error") -> set[str]:
    return {v["code"] for v in violations if severity is None or v["severity"] == severity}
