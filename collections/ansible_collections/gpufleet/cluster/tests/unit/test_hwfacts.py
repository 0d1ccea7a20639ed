"""Parsers of the hardware facts, on fixtures in the tools' real formats (tests/unit/fixtures/hw)."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw import facts as h
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.parsing import (
    clean,
    parse_cpu_list,
    to_int,
    to_number,
    upstream_version,
    version_matches,
)
from hw_helpers import fixture, healthy_raw, rdma_sysfs_files, write_tree

# ------------------------------------------------------------------ common helpers


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("81559 MiB", 81559),
        ("81559", 81559),
        ("[N/A]", None),
        ("[Not Supported]", None),
        (None, None),
        ("x", None),
        ("1,234 kB", 1234),
    ],
)
def test_to_int(value, expected):
    assert to_int(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("400 Gb/sec (4X NDR)", 400),
        ("2.5 Gb/sec (1X SDR)", 2.5),
        ("400", 400),
        ("", None),
        ("N/A", None),
    ],
)
def test_to_number(value, expected):
    assert to_number(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2.26.2-1+cuda12.8", "2.26.2"),
        ("1:2.26.2-1+cuda12.8", "2.26.2"),
        ("50.0-2ubuntu0.2", "50.0"),
        ("1.17.5", "1.17.5"),
        (None, None),
        ("  ", None),
    ],
)
def test_upstream_version(value, expected):
    assert upstream_version(value) == expected


@pytest.mark.parametrize(
    ("found", "pin", "ok"),
    [
        ("12.8.1", "12.8", True),
        ("12.8", "12.8", True),
        ("12.80", "12.8", False),
        ("12.6.3", "12.8", False),
        ("570.133.20", "570.133.20", True),
        ("570.124.06", "570.133.20", False),
        (None, "12.8", False),
    ],
)
def test_version_matches(found, pin, ok):
    assert version_matches(found, pin) is ok


def test_clean_and_cpu_list():
    assert clean("  [N/A] ") is None and clean(" a ") == "a"
    assert parse_cpu_list("0-2,8,bad,10-11") == [0, 1, 2, 8, 10, 11]


# ------------------------------------------------------------------ nvidia-smi --query-gpu


@pytest.mark.parametrize("name", ["query_gpu_h100.csv", "query_gpu_h100_header_units.csv"])
def test_query_gpu_reads_eight_h100(name):
    gpus, problems = h.parse_query_gpu(fixture(name))
    assert problems == []
    assert [g["index"] for g in gpus] == list(range(8))
    assert {g["name"] for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert {g["memory_mib"] for g in gpus} == {81559}
    assert gpus[4]["bus_id"] == "00000000:9D:00.0" and gpus[0]["driver_version"] == "570.133.20"
    assert gpus[0]["uuid"].startswith("GPU-")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (fixture("query_gpu_driver_not_loaded.txt"), "couldn't communicate"),
        ("0, NVIDIA H100 80GB HBM3, GPU-x\n", "3 values for 6 fields"),
        ("No devices were found\n", "No devices"),
    ],
)
def test_query_gpu_reports_what_it_cannot_read(text, problem):
    gpus, problems = h.parse_query_gpu(text)
    assert gpus == []
    assert any(problem in p for p in problems)


def test_query_gpu_custom_fields_and_na():
    gpus, problems = h.parse_query_gpu("0, [N/A], Disabled\n", ["index", "serial", "mig.mode.current"])
    assert problems == [] and gpus == [{"index": 0, "serial": None, "mig_mode": "Disabled"}]


def test_query_gpu_empty_input():
    assert h.parse_query_gpu("") == ([], []) and h.parse_query_gpu(None) == ([], [])


# ------------------------------------------------------------------ nvidia-smi topo -m


def test_topo_h100_rail_layout():
    topo, problems = h.parse_topo_matrix(fixture("topo_h100_8nic_rail.txt"))
    assert problems == []
    assert [n["name"] for n in topo["nics"]] == [f"mlx5_{i}" for i in range(8)] + ["mlx5_bond_0"]
    assert len(topo["gpu_links"]) == 8 and all(len(r) == 8 for r in topo["gpu_links"])
    assert topo["gpu_links"][3][3] == "X" and topo["gpu_links"][0][7] == "NV18"
    for g in range(8):  # NIC g is PIX to GPU g and to no other GPU
        assert [i for i, t in enumerate(topo["gpu_nic"][g]) if t == "PIX"] == [g]
    assert topo["gpus"][0]["cpu_affinity"] == "0-55,112-167" and topo["gpus"][5]["numa_affinity"] == 1
    assert topo["gpus"][5]["gpu_numa_id"] is None


def test_topo_legacy_driver_names_nic_columns_and_has_no_gpu_numa_id():
    topo, problems = h.parse_topo_matrix(fixture("topo_a100_legacy_mlx_columns.txt"))
    assert problems == []
    assert topo["nics"] == [{"label": "mlx5_0", "name": "mlx5_0"}, {"label": "mlx5_1", "name": "mlx5_1"}]
    assert topo["gpu_nic"] == [["PXB", "SYS"], ["PXB", "SYS"], ["SYS", "PXB"], ["SYS", "PXB"]]
    assert topo["gpus"][2]["numa_affinity"] == 1 and topo["gpus"][2]["gpu_numa_id"] is None
    assert h.nvlink_count(topo["gpu_links"][0][1]) == 12


def test_topo_pcie_box_has_no_nvlink():
    topo, problems = h.parse_topo_matrix(fixture("topo_l40s_pcie.txt"))
    assert problems == [] and topo["nics"] == []
    kinds = {h.link_kind(t) for row in topo["gpu_links"] for t in row}
    assert kinds == {"self", "pcie"}


def test_topo_space_separated_with_prefix_line():
    text = "NVIDIA Topology: \n" + fixture("topo_h100_8nic_rail.txt").replace("\t", "    ")
    topo, problems = h.parse_topo_matrix(text)
    assert problems == [] and len(topo["gpus"]) == 8 and topo["gpu_nic"][7][7] == "PIX"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no header row"),
        ("garbage\nmore garbage\n", "no header row"),
        ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV18\t0-1\t0\n", "no row for GPU1"),
        (
            "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tQQQ\t0-1\t0\nGPU1\tQQQ\t X \t0-1\t0\n",
            "unknown link token",
        ),
    ],
)
def test_topo_reports_what_it_cannot_read(text, problem):
    _topo, problems = h.parse_topo_matrix(text)
    assert any(problem in p for p in problems)


@pytest.mark.parametrize(
    ("token", "kind", "count"),
    [
        ("NV18", "nvlink", 18),
        ("NV4", "nvlink", 4),
        ("X", "self", 0),
        ("SYS", "pcie", 0),
        ("PIX", "pcie", 0),
        ("???", "unknown", 0),
        (None, "unknown", 0),
    ],
)
def test_link_kind(token, kind, count):
    assert h.link_kind(token) == kind and h.nvlink_count(token) == count


# ------------------------------------------------------------------ nvidia-smi -q


def test_smi_q_healthy_fabric():
    q, problems = h.parse_smi_q(fixture("smi_q_h100_healthy.txt"))
    assert problems == []
    assert (q["driver_version"], q["cuda_version"], q["attached_gpus"]) == ("570.133.20", "12.8", 8)
    assert len(q["gpus"]) == 8
    g = q["gpus"][7]
    assert g["bus_id"] == "00000000:DF:00.0" and g["name"] == "NVIDIA H100 80GB HBM3"
    assert g["memory_mib"] == 81559 and g["mig_mode"] == "Disabled" and g["architecture"] == "Hopper"
    assert g["fabric"] == {
        "state": "Completed",
        "status": "Success",
        "clique_id": "0",
        "cluster_uuid": "00000000-0000-0000-0000-000000000000",
        "bandwidth": "Full",
    }


def test_smi_q_fabric_manager_down():
    q, problems = h.parse_smi_q(fixture("smi_q_h100_fabricmanager_down.txt"))
    assert problems == []
    assert {(g["fabric"]["state"], g["fabric"]["status"]) for g in q["gpus"]} == {("In Progress", None)}


def test_smi_q_old_driver_without_fabric_section():
    q, problems = h.parse_smi_q(fixture("smi_q_h100_525_no_fabric_one_block.txt"))
    assert q["gpus"][0]["fabric"] is None and q["driver_version"] == "525.147.05"
    assert any("8 GPUs attached, 1 GPU blocks" in p for p in problems)


def test_smi_q_garbage():
    q, problems = h.parse_smi_q("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    assert q["gpus"] == [] and problems


@pytest.mark.parametrize(
    ("name", "version", "flavor"),
    [
        ("driver_proc_open.txt", "570.133.20", "open"),
        ("driver_proc_proprietary.txt", "550.144.03", "proprietary"),
    ],
)
def test_driver_proc(name, version, flavor):
    assert h.parse_driver_proc(fixture(name)) == ({"version": version, "flavor": flavor}, [])


def test_driver_proc_odd_and_missing():
    assert h.parse_driver_proc("hello")[1] and h.parse_driver_proc(None) == ({"version": None, "flavor": None}, [])


# ------------------------------------------------------------------ RDMA: ibstat and sysfs


def test_ibstat_ib_ndr400_with_bluefield_front_end():
    ports, problems = h.parse_ibstat(fixture("ibstat_h100_8x_ndr400_ib_bf3.txt"))
    assert problems == [] and len(ports) == 9
    ib = [p for p in ports if p["link_layer"] == "InfiniBand"]
    assert len(ib) == 8 and {(p["state"], p["phys_state"], p["rate_gbps"]) for p in ib} == {("ACTIVE", "LinkUp", 400)}
    bf3 = ports[-1]
    assert (bf3["device"], bf3["link_layer"], bf3["rate_gbps"], bf3["ca_type"]) == (
        "mlx5_bond_0",
        "Ethernet",
        200,
        "MT41692",
    )


def test_ibstat_roce_two_ports_down():
    ports, problems = h.parse_ibstat(fixture("ibstat_h100_roce_two_down.txt"))
    assert problems == [] and len(ports) == 10
    down = [p["device"] for p in ports if p["state"] != "ACTIVE"]
    assert down == ["mlx5_2", "mlx5_6"]
    assert ports[2]["phys_state"] == "Disabled" and ports[2]["rate_gbps"] == 40
    assert {p["link_layer"] for p in ports} == {"Ethernet"}


@pytest.mark.parametrize("text", ["", "ibpanic: [1] main: stat of IB device 'mlx5_0' failed\n"])
def test_ibstat_nothing_usable(text):
    ports, problems = h.parse_ibstat(text)
    assert ports == [] and (problems != []) == bool(text)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (("4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand"), ("ACTIVE", "LinkUp", 400, "InfiniBand")),
        (("1: DOWN", "3: Disabled", "40 Gb/sec (4X QDR)", "Ethernet"), ("DOWN", "Disabled", 40, "Ethernet")),
        (("2: INIT", "5: LinkUp", "200 Gb/sec (2X NDR)", "InfiniBand"), ("INIT", "LinkUp", 200, "InfiniBand")),
        (("1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)", "InfiniBand"), ("DOWN", "Polling", 10, "InfiniBand")),
    ],
)
def test_sysfs_port_formats(tmp_path, raw, expected):
    write_tree(str(tmp_path), rdma_sysfs_files([("mlx5_0", 1, *raw)], numa={"mlx5_0": 1}))
    ports, problems = h.read_rdma_sysfs(str(tmp_path))
    assert problems == []
    p = ports[0]
    assert (p["state"], p["phys_state"], p["rate_gbps"], p["link_layer"]) == expected
    assert p["numa_node"] == 1 and p["ca_type"] == "MT4129" and p["rate"] == raw[2]


def test_sysfs_orders_devices_naturally_and_lists_netdevs(tmp_path):
    ports = [(f"mlx5_{i}", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand") for i in (10, 2, 1)]
    files = rdma_sysfs_files(ports)
    files["class/infiniband/mlx5_1/device/net/ibp24s0/"] = ""
    write_tree(str(tmp_path), files)
    found, _ = h.read_rdma_sysfs(str(tmp_path))
    assert [p["device"] for p in found] == ["mlx5_1", "mlx5_2", "mlx5_10"]
    assert found[0]["netdevs"] == ["ibp24s0"] and found[0]["numa_node"] is None  # -1 = no NUMA info


def test_sysfs_missing_and_broken(tmp_path):
    assert h.read_rdma_sysfs(str(tmp_path / "nope")) == (None, [])
    write_tree(
        str(tmp_path),
        {
            "class/infiniband/mlx5_0/hca_type": "MT4129\n",
            "class/infiniband/mlx5_1/ports/1/state": "4: ACTIVE\n",
            "class/infiniband/mlx5_2/ports/1/state": "9: WEIRD\n",
        },
    )
    ports, problems = h.read_rdma_sysfs(str(tmp_path))
    assert [p["device"] for p in ports] == ["mlx5_1", "mlx5_2"]
    assert any("mlx5_0: no ports" in p for p in problems)
    assert any("mlx5_1 port 1: no rate" in p for p in problems)
    assert any("unknown state" in p for p in problems)


# ------------------------------------------------------------------ CPU, NUMA, memory, NVMe


def test_lscpu_two_socket():
    cpu, problems = h.parse_lscpu(fixture("lscpu_2s_spr.txt"))
    assert problems == []
    assert (
        cpu["sockets"],
        cpu["cores_per_socket"],
        cpu["threads_per_core"],
        cpu["logical_cpus"],
        cpu["numa_nodes"],
    ) == (2, 56, 2, 224, 2)
    assert cpu["model"] == "Intel(R) Xeon(R) Platinum 8480+" and cpu["numa_cpus"]["1"] == "56-111,168-223"


def test_lscpu_nested_layout_of_newer_util_linux():
    cpu, problems = h.parse_lscpu(fixture("lscpu_1s_smt_off_numa1.txt"))
    assert problems == [] and (cpu["sockets"], cpu["threads_per_core"], cpu["numa_nodes"]) == (1, 1, 1)


def test_lscpu_garbage():
    cpu, problems = h.parse_lscpu("no colon here")
    assert cpu["logical_cpus"] is None and problems


def test_cpuinfo_fallback():
    cpu, problems = h.parse_cpuinfo(fixture("cpuinfo_2s_small.txt"))
    assert problems == []
    assert (cpu["sockets"], cpu["cores_per_socket"], cpu["threads_per_core"], cpu["logical_cpus"]) == (2, 2, 2, 8)
    assert h.parse_cpuinfo("junk")[1]


def test_count_numa_nodes(tmp_path):
    write_tree(
        str(tmp_path),
        {"devices/system/node/node0/": "", "devices/system/node/node1/": "", "devices/system/node/possible": "0-1\n"},
    )
    assert h.count_numa_nodes(str(tmp_path)) == 2
    assert h.count_numa_nodes(str(tmp_path / "missing")) is None


@pytest.mark.parametrize(
    ("name", "kib", "gib"),
    [
        ("meminfo_2tib.txt", 2113292936, 2015.4),
        ("meminfo_1_5tib_dimm_missing.txt", 1584965704, 1511.5),
    ],
)
def test_meminfo(name, kib, gib):
    mem, problems = h.parse_meminfo(fixture(name))
    assert problems == [] and mem["total_kib"] == kib and mem["total_gib"] == gib


def test_meminfo_garbage():
    assert h.parse_meminfo("Foo: 1\n")[1] and h.parse_meminfo(None) == (
        {"total_kib": None, "total_gib": None, "hugepages_total": None, "hugepage_size_kib": None},
        [],
    )


def test_lsblk_keeps_nvme_disks_only():
    disks, problems = h.parse_lsblk(fixture("lsblk_9nvme.json"))
    assert problems == [] and len(disks) == 9
    assert sum(1 for d in disks if d["size_bytes"] >= 3840e9) == 8
    old, _ = h.parse_lsblk(fixture("lsblk_old_string_sizes.json"))
    assert old == [
        {"name": "nvme0n1", "size_bytes": 3840755982336, "model": "Dell Ent NVMe CM6-V 3.84TB", "serial": "Z0C0A0XY"}
    ]


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_lsblk_garbage(text):
    disks, _problems = h.parse_lsblk(text)
    assert disks == []


def test_nvme_sysfs(tmp_path):
    write_tree(
        str(tmp_path),
        {
            "class/nvme/nvme0/model": "SAMSUNG MZQL23T8HCLS-00A07\n",
            "class/nvme/nvme0/serial": "S64HNN0W700001\n",
            "class/nvme/nvme0/nvme0n1/size": "7501476528\n",
            "class/nvme/nvme1/model": "X\n",
            "class/nvme/nvme1/nvme1n1/": "",
        },
    )
    disks, problems = h.read_nvme_sysfs(str(tmp_path))
    assert disks[0] == {
        "name": "nvme0n1",
        "size_bytes": 7501476528 * 512,
        "model": "SAMSUNG MZQL23T8HCLS-00A07",
        "serial": "S64HNN0W700001",
    }
    assert disks[1]["size_bytes"] is None and problems == ["nvme1/nvme1n1: no size"]
    assert h.read_nvme_sysfs(str(tmp_path / "none")) == (None, [])


# ------------------------------------------------------------------ versions


@pytest.mark.parametrize(
    ("parser", "name", "expected"),
    [
        (h.parse_cuda_version_json, "cuda_version.json", "12.8.1"),
        (h.parse_nvcc_version, "nvcc_version.txt", "12.8.93"),
        (h.parse_ofed_info, "ofed_info_doca.txt", "25.01-0.6.0"),
        (h.parse_ofed_info, "ofed_info_mlnx.txt", "23.10-1.1.9.0"),
        (h.parse_nvidia_ctk_version, "nvidia_ctk_version.txt", "1.17.5"),
        (h.parse_fabricmanager_version, "fabricmanager_version.txt", "570.133.20"),
    ],
)
def test_version_parsers(parser, name, expected):
    assert parser(fixture(name)) == (expected, [])


@pytest.mark.parametrize(
    "parser",
    [
        h.parse_cuda_version_json,
        h.parse_nvcc_version,
        h.parse_ofed_info,
        h.parse_nvidia_ctk_version,
        h.parse_fabricmanager_version,
    ],
)
def test_version_parsers_on_garbage(parser):
    value, problems = parser("{}\nsomething unexpected\n")
    assert value is None and problems
    assert parser("") == (None, [])


def test_dpkg_and_rpm():
    pk, _ = h.parse_dpkg_query(fixture("dpkg_query.txt"))
    assert pk["libnccl2"] == "2.26.2-1+cuda12.8" and pk["nvidia-fabricmanager-570"] == "570.133.20-1"
    assert "cuda-toolkit-12-6" not in pk and "doca-ofed" not in pk  # 'rc' = removed, config files left
    rpm, _ = h.parse_rpm_query(fixture("rpm_query.txt"))
    assert rpm == {"libnccl": "2.23.4-1+cuda12.6", "rdma-core": "48.0-1.el9", "nvidia-container-toolkit": "1.17.3-1"}


def test_service_state_and_osrelease():
    assert h.parse_service_state("inactive\n") == "inactive" and h.parse_service_state("") is None
    assert h.parse_osrelease("6.8.0-51-generic\n") == "6.8.0-51-generic" and h.parse_osrelease(None) is None


# ------------------------------------------------------------------ build_facts


def test_build_facts_healthy():
    f = h.build_facts(healthy_raw())
    assert f["schema"] == 1 and f["problems"] == []
    assert f["gpu_count"] == 8 and f["rdma"]["source"] == "ibstat" and len(f["rdma"]["ports"]) == 9
    assert f["fabric"]["reported"] is True and f["fabric_manager"] == {"service": "active", "version": "570.133.20"}
    assert f["versions"] == {
        "driver": "570.133.20",
        "driver_flavor": "open",
        "driver_loaded": "570.133.20",
        "cuda": "12.8.1",
        "cuda_driver": "12.8",
        "nccl": "2.26.2",
        "rdma_core": "50.0",
        "ofed": None,
        "doca_ofed": None,
        "container_toolkit": "1.17.5",
        "fabric_manager": "570.133.20",
        "kernel": "6.8.0-51-generic",
    }
    assert f["cpu"]["numa_nodes"] == 2 and len(f["nvme"]) == 9


def test_build_facts_nothing_gathered():
    f = h.build_facts({})
    assert f["gpu_count"] == 0 and f["topology"] is None and f["fabric"] is None
    assert f["rdma"] == {"source": None, "ports": []} and f["nvme"] == []
    assert set(f["versions"].values()) == {None}


def test_build_facts_fallbacks():
    raw = {
        "query_gpu": fixture("query_gpu_driver_not_loaded.txt"),  # CSV failed: GPUs from the -q blocks
        "smi_q": fixture("smi_q_h100_healthy.txt"),
        "rdma_sysfs": [],  # class/infiniband present, empty: no ibstat given either
        "cpuinfo": fixture("cpuinfo_2s_small.txt"),
        "numa_nodes": 2,
        "nvme_sysfs": [{"name": "nvme0n1", "size_bytes": 1, "model": None, "serial": None}],
        "nvcc": fixture("nvcc_version.txt"),
        "rpm": fixture("rpm_query.txt"),
        "sources": {"nvidia_smi": "rc=9: NVIDIA-SMI has failed"},
    }
    f = h.build_facts(raw)
    assert f["gpu_count"] == 8 and f["gpus"][0]["bus_id"] == "00000000:1B:00.0"
    assert f["rdma"]["source"] == "sysfs" and f["rdma"]["ports"] == []
    assert f["cpu"]["numa_nodes"] == 2 and f["cpu"]["sockets"] == 2 and len(f["nvme"]) == 1
    assert f["versions"]["cuda"] == "12.8.93" and f["versions"]["nccl"] == "2.23.4"
    assert f["versions"]["container_toolkit"] == "1.17.3"
    assert f["sources"]["nvidia_smi"].startswith("rc=9") and f["problems"]


def test_build_facts_cuda_from_package_when_no_toolkit_file():
    f = h.build_facts({"dpkg": fixture("dpkg_query.txt")})
    assert f["versions"]["cuda"] == "12.8.1"


def test_smi_q_row_remap_and_ecc_state():
    """A GPU with one uncorrectable DRAM error since reset and its row remapping pending (the R535 -q format
    with ECC Errors / Volatile and Remapped Rows sections)."""
    q, problems = h.parse_smi_q(fixture("smi_q_h100_remap_pending.txt"))
    assert problems == [] or all("GPU blocks read" in p for p in problems)
    g = q["gpus"][0]
    assert g["row_remap"] == {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False}
    assert g["ecc"] == {"volatile_uncorrectable": 1}
    healthy, _ = h.parse_smi_q(fixture("smi_q_h100_healthy.txt"))
    assert {(g["row_remap"]["pending"], g["row_remap"]["failure"]) for g in healthy["gpus"]} == {(False, False)}
    # That fixture prints no ECC Errors section: unknown, not zero.
    assert {g["ecc"]["volatile_uncorrectable"] for g in healthy["gpus"]} == {None}


def test_gpu_errors_from_the_kernel_log_and_smi_q():
    raw = healthy_raw()
    raw["kernel_log"] = fixture("kernel_log_h100_xids.txt")
    raw["smi_q"] = fixture("smi_q_h100_remap_pending.txt")
    errors = h.build_facts(raw)["gpu_errors"]
    assert errors["kernel_log_read"] is True
    assert [e["code"] for e in errors["xids"]] == [13, 13, 94, 79, 154, 45, 48, 48]
    assert [(e["event"], e["action"]) for e in errors["memory"]] == [
        ("row_remap_pending", "reset_gpu"),
        ("ecc_uncorrectable", "reset_gpu"),
    ]
    clean = h.build_facts(healthy_raw())["gpu_errors"]
    assert clean == {"kernel_log_read": False, "xids": [], "memory": []}
