"""The hardware gate: every check failing and passing, homogeneity, the filters, and the doubles' profiles."""

from __future__ import annotations

import copy

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.hardware_gate import hardware_gate
from ansible_collections.gpufleet.cluster.plugins.filter.hardware_homogeneity import hardware_homogeneity
from ansible_collections.gpufleet.cluster.plugins.filter.hardware_record import hardware_record
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.catalogue import TOPOLOGIES, get_accelerator
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw import gate as hwgate
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.facts import build_facts, parse_ibstat
from hw_helpers import (
    brief_and_pool,
    codes,
    facts_from_doubles,
    fixture,
    healthy_facts,
    healthy_raw,
    load_profile,
)


def test_healthy_node_passes():
    brief, pool = brief_and_pool()
    assert hwgate.check_node("gpu001", healthy_facts(), brief, pool) == []


def test_gpu_errors_needing_an_action_fail_the_gate_and_application_faults_do_not():
    brief, pool = brief_and_pool()
    raw = healthy_raw()
    raw["kernel_log"] = fixture("kernel_log_h100_xids.txt")
    raw["smi_q"] = fixture("smi_q_h100_remap_pending.txt")
    found = hwgate.check_node("gpu001", build_facts(raw), brief, pool)
    errors = sorted(v["message"].split(" in ")[0] for v in found if v["code"] in ("HW_GPU_XID", "HW_GPU_MEMORY_ERROR"))
    assert errors == [
        "ECC Errors / Volatile / DRAM and SRAM Uncorrectable (uncorrectable ECC errors since the last GPU reset; "
        "action: reset_gpu) on 00000000:19:00.0",
        "Remapped Rows / Pending (row remapping pending (applied at the next GPU reset); action: reset_gpu) "
        "on 00000000:19:00.0",
        "XID 154 (recovery action changed to Node Reboot Required; action: reboot) on 0000:1b:00.0",
        "XID 48 (double-bit ECC error; action: reset_gpu) on 0000:3a:00.0 (2 times)",
        "XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0",
    ]
    # Only the application's Xid 13 in the log: the gate passes.
    raw = healthy_raw()
    raw["kernel_log"] = "\n".join(line for line in fixture("kernel_log_h100_xids.txt").splitlines() if "): 13," in line)
    assert hwgate.check_node("gpu001", build_facts(raw), brief, pool) == []


def test_facts_without_gpu_errors_are_not_judged_on_them():
    """Facts cached by an older gpu_facts (no gpu_errors key) still pass the gate."""
    brief, pool = brief_and_pool()
    facts = healthy_facts()
    del facts["gpu_errors"]
    assert hwgate.check_node("gpu001", facts, brief, pool) == []


def test_every_code_is_documented():
    import os
    import re

    with open(hwgate.__file__, encoding="utf-8") as fh:
        used = set(re.findall(r'"(HW_[A-Z_]+)"', fh.read()))
    assert used <= set(hwgate.CODES)
    doc_path = os.path.join(os.path.dirname(hwgate.__file__), *[".."] * 7, "docs", "hardware-gate.md")
    with open(doc_path, encoding="utf-8") as fh:
        doc = fh.read()
    assert [c for c in hwgate.CODES if c not in doc] == []


# --- mutations of the healthy node: (id, mutate facts, mutate brief/pool, expected error codes)


def _drop_gpu(f):
    f["gpus"] = f["gpus"][:7]


def _rename(f):
    for g in f["gpus"]:
        g["name"] = "NVIDIA H100 PCIe"


def _memory(f):
    f["gpus"][2]["memory_mib"] = 40960


def _nvlink_gone(f):
    f["topology"]["gpu_links"][1][6] = f["topology"]["gpu_links"][6][1] = "SYS"


def _nvlink_phb(f):
    f["topology"]["gpu_links"][0][1] = f["topology"]["gpu_links"][1][0] = "PHB"


def _nvlink_degraded(f):
    f["topology"]["gpu_links"][0][3] = f["topology"]["gpu_links"][3][0] = "NV12"


def _no_topo(f):
    f["topology"] = None


def _fm_down(f):
    f.update(build_facts(dict(healthy_raw(), smi_q=fixture("smi_q_h100_fabricmanager_down.txt"))))


def _fm_no_section_inactive(f):
    f.update(build_facts(dict(healthy_raw(), smi_q=None, fabricmanager_service="inactive\n")))


def _old_driver_no_fabric_section(f):
    f.update(
        build_facts(
            dict(
                healthy_raw(), smi_q=fixture("smi_q_h100_525_no_fabric_one_block.txt"), fabricmanager_service="active\n"
            )
        )
    )


def _fm_no_section_active(f):
    f.update(build_facts(dict(healthy_raw(), smi_q=None, fabricmanager_service="active\n")))


def _fm_version(f):
    f["fabric_manager"]["version"] = f["versions"]["fabric_manager"] = "570.124.06"


def _port(dev, **kw):
    def mutate(f):
        for p in f["rdma"]["ports"]:
            if p["device"] == dev:
                p.update(kw)

    return mutate


def _drop_port(f):
    f["rdma"]["ports"] = [p for p in f["rdma"]["ports"] if p["device"] != "mlx5_6"]


def _no_rdma(f):
    f["rdma"] = {"source": None, "ports": []}


def _roce_two_down(f):
    f["rdma"] = {"source": "ibstat", "ports": parse_ibstat(fixture("ibstat_h100_roce_two_down.txt"))[0]}


def _nic_far(f):
    for row in f["topology"]["gpu_nic"]:
        row[3] = "SYS"


def _nics_doubled(f):
    # NIC3 moved next to GPU2: NIC3 is PIX to GPU2 (fine), GPU3 has no NIC of its own.
    for g, row in enumerate(f["topology"]["gpu_nic"]):
        row[3] = "PIX" if g == 2 else "NODE"


def _nic_pxb(f):
    f["topology"]["gpu_nic"][3][3] = "PXB"


def _mem(kib):
    def mutate(f):
        f["memory"]["total_kib"] = kib

    return mutate


def _numa1(f):
    f["cpu"]["numa_nodes"] = 1


def _nvme_missing(f):
    f["nvme"] = f["nvme"][:-1]


def _version(key, value):
    def mutate(f):
        f["versions"][key] = value

    return mutate


def _pool(**kw):
    def mutate(brief, pool):
        pool.update(kw)

    return mutate


def _sw(**kw):
    def mutate(brief, pool):
        brief["software"].update(kw)

    return mutate


def _fabric(**kw):
    def mutate(brief, pool):
        brief["networks"]["fabric"].update(kw)

    return mutate


CASES = [
    # GPUs
    ("gpu-missing", _drop_gpu, None, {"HW_GPU_COUNT"}),
    ("gpu-count-brief-4", None, _pool(gpus_per_node=4), {"HW_GPU_COUNT"}),
    ("gpu-model", _rename, None, {"HW_GPU_MODEL"}),
    ("gpu-memory", _memory, None, {"HW_GPU_MEMORY"}),
    ("gpu-memory-within-2pct", lambda f: f["gpus"][0].update(memory_mib=81000), None, set()),
    # NVLink
    ("nvlink-sys", _nvlink_gone, None, {"HW_NVLINK_MISSING"}),
    ("nvlink-phb", _nvlink_phb, None, {"HW_NVLINK_MISSING"}),
    ("nvlink-degraded", _nvlink_degraded, None, {"HW_NVLINK_DEGRADED"}),
    ("nvlink-not-required-on-pcie", _nvlink_gone, _pool(topology="pcie"), set()),
    ("topo-missing", _no_topo, None, {"HW_FACTS_MISSING"}),
    # fabric manager
    ("fm-down", _fm_down, None, {"HW_FABRIC_MANAGER"}),
    ("fm-no-section-inactive", _fm_no_section_inactive, None, {"HW_FABRIC_MANAGER"}),
    ("fm-no-section-active", _fm_no_section_active, None, set()),
    ("fm-525-driver-too-old-for-cuda", _old_driver_no_fabric_section, None, {"HW_VERSION_CUDA"}),
    ("fm-version", _fm_version, None, {"HW_FABRIC_MANAGER"}),
    ("fm-not-needed-4gpu", _fm_down, _pool(topology="4gpu-sxm-nvlink", gpus_per_node=8), set()),
    # RDMA
    ("port-down", _port("mlx5_3", state="DOWN", phys_state="Disabled", rate_gbps=40), None, {"HW_RDMA_PORT_DOWN"}),
    ("port-init-no-sm", _port("mlx5_1", state="INIT"), None, {"HW_RDMA_PORT_DOWN"}),
    ("port-200", _port("mlx5_5", rate_gbps=200), None, {"HW_RDMA_RATE"}),
    ("port-rate-brief-200", None, _fabric(link_speed_gbps=200), {"HW_RDMA_RATE"}),
    ("port-rate-pool-override", None, _pool(nic_speed_gbps=400) and _fabric(link_speed_gbps=200), {"HW_RDMA_RATE"}),
    ("port-count", _drop_port, None, {"HW_RDMA_PORT_COUNT"}),
    ("port-count-brief", None, _pool(nics_per_node=4, rail_optimized=False), {"HW_RDMA_PORT_COUNT"}),
    ("port-eth-on-ib", _port("mlx5_2", link_layer="Ethernet"), None, {"HW_RDMA_LINK_LAYER"}),
    ("fabric-roce-on-ib-ports", None, _fabric(type="roce"), {"HW_RDMA_LINK_LAYER"}),
    ("no-rdma-device", _no_rdma, None, {"HW_FACTS_MISSING"}),
    ("no-fabric-no-rdma-check", _no_rdma, _fabric(type="none"), set()),
    ("rdma-devices-pin", None, _pool(rdma_devices=["mlx5_[0-7]"]), set()),
    ("rdma-devices-wrong", None, _pool(rdma_devices=["mlx5_1*"]), {"HW_RDMA_PORT_COUNT"}),
    # NIC affinity
    ("nic-wrong-socket", _nic_far, None, {"HW_NIC_AFFINITY"}),
    ("nic-doubled-up", _nics_doubled, None, {"HW_NIC_AFFINITY"}),
    ("nic-pxb-is-close", _nic_pxb, None, set()),
    ("nic-affinity-not-rail", _nic_far, _pool(rail_optimized=False), set()),
    # CPU / memory / NUMA / NVMe
    ("cpu-sockets", None, _pool(sockets=4), {"HW_CPU"}),
    ("cpu-threads", None, _pool(cpus=224, threads_per_core=1), {"HW_CPU"}),
    ("cpu-ok", None, _pool(cpus=224, sockets=2, cores_per_socket=56, threads_per_core=2), set()),
    ("memory-dimm-missing", _mem(1584965704), None, {"HW_MEMORY"}),
    ("memory-95pct-ok", _mem(int(2048 * 1024 * 1024 * 0.951)), None, set()),
    ("memory-unknown", _mem(None), None, {"HW_FACTS_MISSING"}),
    ("numa", _numa1, None, {"HW_NUMA"}),
    ("nvme-missing", _nvme_missing, None, {"HW_NVME"}),
    ("nvme-too-small", None, _pool(nvme={"count": 8, "min_size_gb": 7680}), {"HW_NVME"}),
    # versions
    ("driver", _version("driver", "570.124.06"), None, {"HW_VERSION_DRIVER"}),
    ("driver-flavor", _version("driver_flavor", "proprietary"), None, {"HW_DRIVER_FLAVOR"}),
    ("cuda", _version("cuda", "12.6.3"), None, {"HW_VERSION_CUDA"}),
    ("cuda-missing", _version("cuda", None), None, {"HW_VERSION_CUDA"}),
    ("cuda-driver-too-old", _version("cuda_driver", "12.4"), None, {"HW_VERSION_CUDA"}),
    ("nccl", _version("nccl", "2.23.4"), None, {"HW_VERSION_NCCL"}),
    ("toolkit", _version("container_toolkit", "1.16.2"), None, {"HW_VERSION_CONTAINER_TOOLKIT"}),
    ("rdma-core-missing", _version("rdma_core", None), None, {"HW_VERSION_RDMA_CORE"}),
    ("rdma-core-pin", None, _sw(rdma_core="52.0"), {"HW_VERSION_RDMA_CORE"}),
    ("doca-ofed-missing", None, _sw(rdma_stack="doca-ofed", doca_ofed="2.10.0"), {"HW_VERSION_DOCA_OFED"}),
    ("doca-ofed-ok", _version("doca_ofed", "2.10.0"), _sw(rdma_stack="doca-ofed", doca_ofed="2.10.0"), set()),
    ("kernel-pin", None, _sw(kernel="6.8.0-60-generic"), {"HW_VERSION_KERNEL"}),
    ("kernel-pin-ok", None, _sw(kernel="6.8.0-51-generic"), set()),
    ("no-pins", None, lambda b, p: b.pop("software"), set()),
]


@pytest.mark.parametrize(
    ("mutate_facts", "mutate_brief", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_check_node_table(mutate_facts, mutate_brief, expected):
    brief, pool = brief_and_pool()
    facts = healthy_facts()
    if mutate_facts:
        mutate_facts(facts)
    if mutate_brief:
        mutate_brief(brief, pool)
    violations = hwgate.check_node("gpu001", facts, brief, pool)
    assert codes(violations) == expected, violations
    for v in violations:
        assert v["host"] == "gpu001" and v["field"] and v["message"]


def test_rate_message_names_port_and_says_what_to_do():
    brief, pool = brief_and_pool()
    facts = healthy_facts()
    _port("mlx5_3", rate_gbps=200)(facts)
    (v,) = hwgate.check_node("gpu007", facts, brief, pool)
    assert v["message"].startswith("reseat / check cable on mlx5_3 (port 1): rate 200 Gb/s, brief expects 400")
    assert v["field"] == "rdma.ports[mlx5_3:1].rate_gbps"


def test_roce_node_with_two_ports_down_and_storage_nics():
    brief, pool = brief_and_pool()
    brief["networks"]["fabric"]["type"] = "roce"
    facts = healthy_facts()
    _roce_two_down(facts)
    got = hwgate.check_node("gpu001", facts, brief, pool)
    # 10 ports, 8 of them rails: the count says so and names the way out (pool.rdma_devices) ...
    assert codes(got) == {"HW_RDMA_PORT_COUNT", "HW_RDMA_PORT_DOWN", "HW_RDMA_RATE"}
    assert "pool.rdma_devices" in next(v["message"] for v in got if v["code"] == "HW_RDMA_PORT_COUNT")
    # ... and with the rails named, only the two down ports remain.
    pool["rdma_devices"] = [f"mlx5_{i}" for i in range(8)]
    got = hwgate.check_node("gpu001", facts, brief, pool)
    assert codes(got) == {"HW_RDMA_PORT_DOWN"} and len(got) == 2


def test_no_facts_at_all():
    brief, pool = brief_and_pool()
    for facts in (None, {}):
        (v,) = hwgate.check_node("gpu001", facts, brief, pool)
        assert v["code"] == "HW_FACTS_MISSING"


def test_nothing_gathered_reports_each_missing_part():
    brief, pool = brief_and_pool()
    got = hwgate.check_node("gpu001", build_facts({"sources": {"nvidia_smi": "not found"}}), brief, pool)
    assert "HW_GPU_COUNT" in codes(got) and "HW_FACTS_MISSING" in codes(got)
    assert "(nvidia_smi: not found)" in next(v["message"] for v in got if v["code"] == "HW_GPU_COUNT")


def test_stand_in_catalogue_can_be_injected():
    brief, pool = brief_and_pool()
    pool["accelerator"] = "not-in-catalogue"
    acc = {"key": "x100", "nvidia_smi_name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}
    topo = {"name": "8gpu-sxm-nvlink", "nvswitch": True, "all_pairs_nvlink": True}
    assert hwgate.check_node("gpu001", healthy_facts(), brief, pool, accelerator=acc, topology=topo) == []
    acc["nvidia_smi_name"] = "NVIDIA X100"
    assert codes(hwgate.check_node("gpu001", healthy_facts(), brief, pool, accelerator=acc, topology=topo)) == {
        "HW_GPU_MODEL"
    }


def test_alias_names_accepted_and_open_modules_required():
    brief, pool = brief_and_pool()
    facts = healthy_facts()
    acc = get_accelerator("gb200-nvl72")
    for g in facts["gpus"]:
        g["name"], g["memory_mib"] = "NVIDIA Graphics Device", acc.memory_mib
    brief["software"].pop("driver_flavor")
    facts["versions"]["driver_flavor"] = "proprietary"
    got = hwgate.check_node("gpu001", facts, brief, pool, accelerator=acc, topology=TOPOLOGIES["8gpu-sxm-nvlink"])
    assert codes(got) == {"HW_DRIVER_FLAVOR"}


def test_driver_drift_with_pinned_fabric_manager_is_one_violation():
    brief, pool = brief_and_pool()
    facts = healthy_facts()
    facts["versions"]["driver"] = "570.124.06"
    (v,) = hwgate.check_node("gpu001", facts, brief, pool)
    assert v["code"] == "HW_VERSION_DRIVER" and "fabric manager (570.133.20) must match" in v["message"]


# --- homogeneity


def _pool_facts(n: int = 4) -> dict:
    return {f"gpu00{i}": healthy_facts() for i in range(1, n + 1)}


def test_homogeneous_pool():
    assert hwgate.check_pool_homogeneity(_pool_facts(), {"name": "h100-train"}) == []


@pytest.mark.parametrize(
    ("key", "mutate"),
    [
        ("kernel", lambda f: f["versions"].update(kernel="6.8.0-60-generic")),
        ("driver", lambda f: f["versions"].update(driver="570.124.06")),
        ("gpu_count", _drop_gpu),
        ("nvlink", _nvlink_degraded),
        ("rdma_rates_gbps", _port("mlx5_5", rate_gbps=200)),
        ("memory_gib", _mem(1584965704)),
        ("cpu_model", lambda f: f["cpu"].update(model="Intel(R) Xeon(R) Platinum 8468")),
    ],
)
def test_odd_node_is_named(key, mutate):
    facts = _pool_facts()
    mutate(facts["gpu003"])
    got = hwgate.check_pool_homogeneity(facts, {"name": "h100-train"})
    assert {(v["host"], v["field"], v["severity"]) for v in got} >= {("gpu003", key, "error")}
    assert {v["host"] for v in got} == {"gpu003"}
    assert "3 of 4 peers in h100-train" in got[0]["message"]


def test_memory_within_one_percent_is_uniform():
    facts = _pool_facts()
    facts["gpu002"]["memory"]["total_kib"] -= 4 * 1024 * 1024  # 4 GiB less of 2 TiB: firmware reservations
    assert hwgate.check_pool_homogeneity(facts) == []


def test_two_nodes_that_differ_are_warnings_on_both():
    facts = _pool_facts(2)
    facts["gpu002"]["versions"]["kernel"] = "6.8.0-60-generic"
    got = hwgate.check_pool_homogeneity(facts)
    assert {(v["host"], v["severity"]) for v in got} == {("gpu001", "warning"), ("gpu002", "warning")}


def test_homogeneity_ignores_hosts_without_facts_and_single_nodes():
    facts = _pool_facts(2)
    facts["gpu003"] = None
    assert hwgate.check_pool_homogeneity(facts) == []
    assert hwgate.check_pool_homogeneity({"gpu001": healthy_facts()}) == []


# --- the doubles' hardware profiles: each faulty one caught by exactly its code

PROFILES = [
    "h100-hgx-healthy",
    "h100-gpu-missing",
    "h100-wrong-model",
    "h100-rdma-port-down",
    "h100-rdma-rate-200",
    "h100-nvlink-missing",
    "h100-nic-wrong-socket",
    "h100-driver-drift",
    "h100-firmware-odd",
]


@pytest.mark.parametrize("profile", PROFILES)
def test_profile_caught_by_its_code(profile, tmp_path):
    brief, pool = brief_and_pool()
    facts = facts_from_doubles(profile, str(tmp_path))
    assert facts["problems"] == []
    fault = load_profile(profile)["fault"]
    expected = {fault["code"]} if fault else set()
    got = hwgate.check_node("lab-gpu02", facts, brief, pool)
    assert codes(got, None) == expected, got


def test_lab_cluster_one_faulty_node(tmp_path):
    """What Molecule verify asserts: only the faulty node is reported, with its code."""
    brief, pool = brief_and_pool()
    facts = {
        "lab-gpu01": facts_from_doubles("h100-hgx-healthy", str(tmp_path / "a")),
        "lab-gpu02": facts_from_doubles("h100-rdma-rate-200", str(tmp_path / "b")),
    }
    per_node = {h: hwgate.check_node(h, f, brief, pool) for h, f in facts.items()}
    assert per_node["lab-gpu01"] == []
    assert codes(per_node["lab-gpu02"]) == {"HW_RDMA_RATE"}
    records = {h: hwgate.node_record(h, facts[h], per_node[h], pool) for h in facts}
    assert records["lab-gpu01"]["status"] == "pass" and records["lab-gpu02"]["status"] == "fail"
    assert records["lab-gpu02"]["codes"] == ["HW_RDMA_RATE"]
    assert records["lab-gpu02"]["summary"]["rdma"] == "8/8 active"


def test_the_acceptance_gates_profile_passes_the_gate_and_carries_each_gates_fault(tmp_path):
    """h100-acceptance-gates-fail: the faults of the four acceptance-gate profiles, none the hardware gate's."""
    brief, pool = brief_and_pool()
    facts = facts_from_doubles("h100-acceptance-gates-fail", str(tmp_path))
    assert facts["problems"] == []
    assert hwgate.check_node("lab-gpu02", facts, brief, pool) == []
    combined = load_profile("h100-acceptance-gates-fail")
    singles = {
        "dcgm_diag": "h100-dcgm-memory-fail",
        "rdma_bw": "h100-slow-rail",
        "link_errors": "h100-link-flapping",
        "collectives": "h100-slow-alltoall",
    }
    for key, single in singles.items():
        theirs = load_profile(single)[key]
        if key == "dcgm_diag":
            # The same GPU and test; the warning text names the profile that planted it.
            strip = [{k: v for k, v in f.items() if k != "warning"} for f in theirs["fail"]]
            assert [{k: v for k, v in f.items() if k != "warning"} for f in combined[key]["fail"]] == strip
        else:
            assert combined[key] == theirs, key
    assert combined["fault"]["codes"] == [
        "DCGM_DIAG_FAILED",
        "RDMA_LINK_SLOW",
        "LINK_ERRORS_GREW",
        "NCCL_BUSBW_BELOW_FLOOR",
    ]
    healthy = load_profile("h100-hgx-healthy")
    assert {k: v for k, v in combined.items() if k not in {*singles, "fault", "description"}} == {
        k: v for k, v in healthy.items() if k not in {"fault", "description"}
    }


# --- filters


def test_filters_resolve_pool_by_name_and_reject_misuse():
    brief, _pool_entry = brief_and_pool()
    facts = healthy_facts()
    assert hardware_gate(facts, brief, "h100-train", "gpu001") == []
    with pytest.raises(AnsibleFilterError, match="no pool named"):
        hardware_gate(facts, brief, "nope", "gpu001")
    with pytest.raises(AnsibleFilterError, match="brief must be a dict"):
        hardware_gate(facts, "brief.yml", "h100-train", "gpu001")
    with pytest.raises(AnsibleFilterError, match="gpufleet_hw dict"):
        hardware_gate([facts], brief, "h100-train", "gpu001")
    with pytest.raises(AnsibleFilterError):
        hardware_homogeneity([facts])
    with pytest.raises(AnsibleFilterError):
        hardware_record(facts, "gpu001", "not a list")


def test_record_filter():
    brief, pool = brief_and_pool()
    facts = healthy_facts()
    bad = copy.deepcopy(facts)
    _port("mlx5_0", state="DOWN", phys_state="Disabled")(bad)
    v = hardware_gate(bad, brief, pool, "gpu009")
    rec = hardware_record(bad, "gpu009", v, pool)
    assert rec["status"] == "fail" and rec["codes"] == ["HW_RDMA_PORT_DOWN"] and rec["pool"] == "h100-train"
    assert rec["summary"]["gpus"] == "8x NVIDIA H100 80GB HBM3" and rec["summary"]["rdma"] == "8/9 active"
    warn_only = [dict(v[0], severity="warning")]
    assert hardware_record(facts, "gpu009", warn_only, pool)["status"] == "pass"
    assert hardware_homogeneity({"a": facts, "b": bad}, pool)  # 2 nodes differ: warnings
