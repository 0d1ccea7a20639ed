# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The hardware gate: the facts gathered on each node (``gpufleet_hw``, see ``hwfacts``) against the brief.

``check_node`` compares one node with its pool, its accelerator and the brief's pins;
``check_pool_homogeneity`` compares the nodes of a pool with each other and names the odd one out.
Both return violations (``violation.py``); an empty list means the node / pool passes.
Every check that cannot be made because a fact is missing says so (``HW_FACTS_MISSING``) instead of
passing silently.

Brief fields read (pool = the node's entry of ``pools``):
``pool.gpus_per_node``, ``pool.accelerator``, ``pool.topology``, ``pool.nics_per_node``,
``pool.nic_speed_gbps`` (optional, else ``networks.fabric.link_speed_gbps``), ``pool.rail_optimized``
(optional, default ``nics_per_node == gpus_per_node``), ``pool.rdma_devices`` (optional list of device
names / globs that carry the compute fabric), ``pool.memory_gib``, ``pool.numa_nodes``,
``pool.nvme.{count,min_size_gb}``, ``pool.cpus`` / ``sockets`` / ``cores_per_socket`` /
``threads_per_core`` (optional), ``networks.fabric.type``, ``software.{driver, driver_flavor, cuda, nccl,
container_toolkit, rdma_stack, doca_ofed, rdma_core, kernel}``, ``acceptance.firmware`` and
``pool.acceptance.firmware`` (``firmware.py``).
"""

from __future__ import annotations

import fnmatch
from collections import Counter

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.junit import case, junit_xml
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, violation
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw import firmware
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.nvidia import link_kind, nvlink_count
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.parsing import version_matches
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import xid_catalogue

GPU_MEMORY_TOLERANCE = 0.02  # nvidia-smi memory.total within 2 % of the catalogue
HOST_MEMORY_FLOOR = 0.95  # MemTotal >= 95 % of pool.memory_gib (firmware and kernel keep the rest)
HOMOGENEITY_MEMORY_TOLERANCE = 0.01  # nodes of a pool within 1 % of the pool's median MemTotal
NEAR_TOKENS = ("PIX", "PXB")  # a NIC "close to a GPU": at most PCIe switches between them
_DISTANCE = {"X": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}
_LAYER_FOR_FABRIC = {"infiniband": "InfiniBand", "roce": "Ethernet"}

CODES = {
    "HW_FACTS_MISSING": "a fact the check needs was not gathered (tool missing, output unreadable)",
    "HW_GPU_COUNT": "number of GPUs nvidia-smi lists vs pool.gpus_per_node",
    "HW_GPU_MODEL": "GPU product name vs the catalogue's nvidia_smi_name for pool.accelerator",
    "HW_GPU_MEMORY": "GPU memory.total vs the catalogue's memory_mib (2 % tolerance)",
    "HW_NVLINK_MISSING": "a GPU pair not linked by NVLink (topo -m SYS/NODE/PHB/PXB/PIX) where the topology says all",
    "HW_NVLINK_DEGRADED": "a GPU pair with fewer bonded NVLinks than the node's others (NV12 among NV18)",
    "HW_FABRIC_MANAGER": "NVSwitch fabric not Completed/Success, fabric manager not active or not the driver's version",
    "HW_RDMA_PORT_COUNT": "number of compute-fabric RDMA ports vs pool.nics_per_node",
    "HW_RDMA_PORT_DOWN": "an RDMA port not ACTIVE / LinkUp",
    "HW_RDMA_RATE": "an active port's rate vs networks.fabric.link_speed_gbps",
    "HW_RDMA_LINK_LAYER": "a port's link layer vs networks.fabric.type (InfiniBand, or Ethernet for RoCE)",
    "HW_NIC_AFFINITY": "a fabric NIC not PIX/PXB to any GPU (or a GPU without one) in a rail-optimised pool",
    "HW_CPU": "sockets / cores / threads / logical CPUs vs the pool's optional CPU fields",
    "HW_MEMORY": "MemTotal vs pool.memory_gib (at least 95 %)",
    "HW_NUMA": "NUMA nodes vs pool.numa_nodes",
    "HW_NVME": "NVMe drives of at least pool.nvme.min_size_gb vs pool.nvme.count",
    "HW_DRIVER_FLAVOR": "loaded kernel module (open / proprietary) vs software.driver_flavor",
    "HW_VERSION_DRIVER": "running driver vs software.driver",
    "HW_VERSION_CUDA": "installed CUDA toolkit vs software.cuda (and the driver's CUDA ceiling)",
    "HW_VERSION_NCCL": "libnccl vs software.nccl",
    "HW_VERSION_CONTAINER_TOOLKIT": "nvidia-ctk vs software.container_toolkit",
    "HW_VERSION_DOCA_OFED": "doca-ofed vs software.doca_ofed (rdma_stack doca-ofed)",
    "HW_VERSION_RDMA_CORE": "rdma-core installed (and vs software.rdma_core when pinned) for rdma_stack inbox",
    "HW_VERSION_KERNEL": "running kernel vs software.kernel (when pinned)",
    "HW_HETEROGENEOUS": "a node whose hardware or versions differ from its pool peers",
    "HW_GPU_XID": "an XID in this boot's kernel log whose action in NVIDIA's catalogue is not none",
    "HW_GPU_MEMORY_ERROR": "a GPU with row remapping pending or failed, or uncorrectable ECC errors since reset",
    "HW_FIRMWARE_MIXED": "GPU VBIOS, fabric NIC firmware or BIOS differing inside a node or from the pool's majority",
    "HW_FIRMWARE_OLD": "a GPU VBIOS, fabric NIC firmware or BIOS older than acceptance.firmware.min",
}


# ------------------------------------------------------------------ helpers


def _attr(obj: object, name: str, default: object = None) -> object:
    """Read a field from a catalogue dataclass or from its dict form."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    out: list[str] = []
    nums = sorted(set(numbers))
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(out)


def _num(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except (TypeError, ValueError):
        return None


def _fmt(value: float | None) -> str:
    if value is None:
        return "unknown"
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _resolve_catalogue(pool: dict, accelerator: object, topology: object) -> tuple[object, object]:
    if accelerator is None or topology is None:
        from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import catalogue

        if accelerator is None:
            accelerator = catalogue.get_accelerator(pool.get("accelerator"))
        if topology is None:
            topology = catalogue.TOPOLOGIES.get(pool.get("topology")) if isinstance(pool.get("topology"), str) else None
    return accelerator, topology


def _software(brief: dict) -> dict:
    return (brief or {}).get("software") or {}


def _fabric(brief: dict) -> dict:
    return ((brief or {}).get("networks") or {}).get("fabric") or {}


def _source_note(facts: dict, source: str) -> str:
    state = (facts.get("sources") or {}).get(source)
    return f" ({source}: {state})" if state and state != "ok" else ""


# ------------------------------------------------------------------ GPUs, NVLink, fabric manager


def check_gpus(host: str, facts: dict, pool: dict, accelerator: object) -> list[dict]:
    out: list[dict] = []
    gpus = facts.get("gpus") or []
    expected = pool.get("gpus_per_node")
    if expected is not None and len(gpus) != int(expected):
        indices = [g.get("index") for g in gpus if isinstance(g.get("index"), int)]
        gaps = sorted(set(range(int(expected))) - set(indices)) if indices else []
        gap_note = f"; index {_ranges(gaps)} absent" if gaps and len(gpus) < int(expected) else ""
        reason = _source_note(facts, "nvidia_smi")
        out.append(
            violation(
                "HW_GPU_COUNT",
                "gpus",
                f"found {len(gpus)} GPUs{reason}{gap_note}, brief expects {expected} (pool.gpus_per_node): "
                "check the driver is loaded (nvidia-smi), `dmesg | grep -i xid` for a GPU fallen off the bus, "
                "reseat the GPU or baseboard, then RMA",
                host,
            )
        )
    if accelerator is None or not gpus:
        return out
    want_name = _attr(accelerator, "nvidia_smi_name")
    names_ok = {want_name, *(_attr(accelerator, "nvidia_smi_aliases") or ())}
    wrong: dict[str, list[int]] = {}
    for i, gpu in enumerate(gpus):
        if gpu.get("name") not in names_ok:
            wrong.setdefault(str(gpu.get("name")), []).append(gpu.get("index", i))
    for name, idx in sorted(wrong.items()):
        out.append(
            violation(
                "HW_GPU_MODEL",
                "gpus[].name",
                f"GPU {_ranges(idx)} is {name!r}, accelerator {_attr(accelerator, 'key')} expects {want_name!r}: "
                "the node is not the model the provider quoted; move it to the right pool or get it replaced",
                host,
            )
        )
    want_mem = _num(_attr(accelerator, "memory_mib"))
    if want_mem:
        bad: dict[int | None, list[int]] = {}
        for i, gpu in enumerate(gpus):
            mem = gpu.get("memory_mib")
            if mem is None or abs(float(mem) - want_mem) > want_mem * GPU_MEMORY_TOLERANCE:
                bad.setdefault(mem, []).append(gpu.get("index", i))
        for mem, idx in bad.items():
            out.append(
                violation(
                    "HW_GPU_MEMORY",
                    "gpus[].memory_mib",
                    f"GPU {_ranges(idx)} reports {_fmt(mem)} MiB, accelerator {_attr(accelerator, 'key')} expects "
                    f"{_fmt(want_mem)} MiB (±{int(GPU_MEMORY_TOLERANCE * 100)} %): wrong SKU, or MIG / ECC / "
                    "retired memory reduces it — check `nvidia-smi -q -d MEMORY,ECC,ROW_REMAPPER`",
                    host,
                )
            )
    return out


def check_nvlink(host: str, facts: dict, topology: object) -> list[dict]:
    if topology is None or not _attr(topology, "all_pairs_nvlink"):
        return []
    topo = facts.get("topology")
    links = (topo or {}).get("gpu_links") or []
    if not links:
        return [
            violation(
                "HW_FACTS_MISSING",
                "topology",
                f"no `nvidia-smi topo -m` matrix{_source_note(facts, 'nvidia_smi_topo')}: cannot check that "
                f"every GPU pair is NVLinked as topology {_attr(topology, 'name')} requires",
                host,
            )
        ]
    missing: list[str] = []
    counts: dict[tuple[int, int], int] = {}
    for i, row in enumerate(links):
        for j in range(i + 1, len(row)):
            token = row[j]
            if link_kind(token) != "nvlink":
                missing.append(f"GPU{i}-GPU{j} {token or '?'}")
            else:
                counts[(i, j)] = nvlink_count(token)
    out: list[dict] = []
    if missing:
        shown = ", ".join(missing[:12]) + (f" and {len(missing) - 12} more" if len(missing) > 12 else "")
        out.append(
            violation(
                "HW_NVLINK_MISSING",
                "topology.gpu_links",
                f"{len(missing)} GPU pair(s) not on NVLink: {shown}; topology {_attr(topology, 'name')} expects "
                "NV# between every pair: check `nvidia-smi nvlink -s`, the fabric manager, the NVSwitch tray "
                "and the GPU's seating",
                host,
            )
        )
    if counts:
        top = max(counts.values())
        weak = [f"GPU{i}-GPU{j} NV{n}" for (i, j), n in sorted(counts.items()) if n < top]
        if weak:
            out.append(
                violation(
                    "HW_NVLINK_DEGRADED",
                    "topology.gpu_links",
                    f"{len(weak)} GPU pair(s) with fewer NVLinks than the node's NV{top}: {', '.join(weak[:12])}: "
                    "links are down — `nvidia-smi nvlink -s -i <gpu>`, reseat, RMA",
                    host,
                )
            )
    return out


def check_fabric_manager(host: str, facts: dict, topology: object, brief: dict | None = None) -> list[dict]:
    if topology is None or not _attr(topology, "nvswitch"):
        return []
    out: list[dict] = []
    fabric = facts.get("fabric") or {}
    fm = facts.get("fabric_manager") or {}
    service = fm.get("service")
    driver = (facts.get("versions") or {}).get("driver")
    service_note = f" (nvidia-fabricmanager is {service})" if service else ""
    todo = "start it: `systemctl enable --now nvidia-fabricmanager`, its version must equal the driver's"
    if fabric.get("reported"):
        bad: dict[tuple, list[int]] = {}
        for i, gpu in enumerate(fabric.get("gpus") or []):
            state, status = gpu.get("state"), gpu.get("status")
            if state != "Completed" or (status is not None and status != "Success"):
                bad.setdefault((state, status), []).append(i)
        for (state, status), idx in bad.items():
            out.append(
                violation(
                    "HW_FABRIC_MANAGER",
                    "fabric.gpus[].state",
                    f"NVSwitch fabric state {state or 'none'} / status {status or 'none'} on GPU {_ranges(idx)}"
                    f"{service_note}, expected Completed / Success: CUDA fails with 'system not yet initialized' "
                    f"until the fabric manager registers the GPUs — {todo}",
                    host,
                )
            )
    elif service:
        if service != "active":
            out.append(
                violation(
                    "HW_FABRIC_MANAGER",
                    "fabric_manager.service",
                    f"nvidia-fabricmanager is {service}, expected active on an NVSwitch node — {todo}",
                    host,
                )
            )
    else:
        out.append(
            violation(
                "HW_FACTS_MISSING",
                "fabric",
                "NVSwitch node but neither `nvidia-smi -q` printed a Fabric section nor systemctl a "
                "nvidia-fabricmanager state: cannot tell whether the fabric manager runs",
                host,
                WARNING,
            )
        )
    # The fabric manager must be the driver's exact build. Compared with the pinned driver when there is a
    # pin (what the nvidia_driver role installs), so a drifted driver is reported once, as HW_VERSION_DRIVER.
    fm_version = fm.get("version")
    reference = _software(brief or {}).get("driver") or driver
    if fm_version and reference and fm_version != str(reference):
        out.append(
            violation(
                "HW_FABRIC_MANAGER",
                "fabric_manager.version",
                f"fabric manager {fm_version} differs from the driver {reference}: they must be the same build — "
                "install the nvidia-fabricmanager package of the driver's exact version",
                host,
            )
        )
    return out


# ------------------------------------------------------------------ RDMA and NIC affinity


def fabric_ports(ports: list[dict], pool: dict, expected_layer: str | None) -> list[dict]:
    """The ports that carry the compute fabric.

    ``pool.rdma_devices`` (names or globs such as ``mlx5_[0-7]``) decides when given. Otherwise bonded
    devices (``mlx5_bond_0``, front-end) are left out, and if exactly ``nics_per_node`` of the rest have
    the fabric's link layer those are the fabric (a BlueField front-end port on an IB node is not);
    else all of the rest are, and the count / link-layer checks say what is wrong.
    """
    names = pool.get("rdma_devices")
    if names:
        return [p for p in ports if any(fnmatch.fnmatchcase(str(p.get("device")), n) for n in names)]
    candidates = [p for p in ports if "bond" not in str(p.get("device"))]
    matching = [p for p in candidates if p.get("link_layer") == expected_layer]
    if expected_layer and len(matching) == int(pool.get("nics_per_node") or 0):
        return matching
    return candidates


def _port_name(p: dict) -> str:
    return f"{p.get('device')} (port {p.get('port')})"


def check_rdma(host: str, facts: dict, brief: dict, pool: dict) -> list[dict]:
    fabric = _fabric(brief)
    ftype = str(fabric.get("type") or "none").lower()
    nics = pool.get("nics_per_node")
    if ftype not in _LAYER_FOR_FABRIC or not nics:
        return []  # no RDMA fabric (none / plain ethernet) or no NIC expected
    layer = _LAYER_FOR_FABRIC[ftype]
    rdma = facts.get("rdma") or {}
    if rdma.get("source") is None:
        return [
            violation(
                "HW_FACTS_MISSING",
                "rdma",
                f"no RDMA device found (no /sys/class/infiniband, ibstat{_source_note(facts, 'ibstat') or ' empty'}): "
                f"brief expects {nics} {ftype} ports — load the HCA driver (mlx5_ib) and rdma-core",
                host,
            )
        ]
    ports = fabric_ports(rdma.get("ports") or [], pool, layer)
    out: list[dict] = []
    if len(ports) != int(nics):
        names = ", ".join(_port_name(p) for p in ports) or "none"
        out.append(
            violation(
                "HW_RDMA_PORT_COUNT",
                "rdma.ports",
                f"found {len(ports)} compute-fabric RDMA port(s) [{names}], brief expects {nics} (pool.nics_per_node): "
                "check every HCA is seated and seen (`ibv_devinfo`, `lspci | grep -i mellanox`); if the node has "
                "other RDMA devices, name the fabric's in pool.rdma_devices",
                host,
            )
        )
    speed = _num(pool.get("nic_speed_gbps") or fabric.get("link_speed_gbps"))
    for p in ports:
        name = _port_name(p)
        field = f"rdma.ports[{p.get('device')}:{p.get('port')}]"
        if p.get("link_layer") != layer:
            out.append(
                violation(
                    "HW_RDMA_LINK_LAYER",
                    f"{field}.link_layer",
                    f"{name} link layer {p.get('link_layer') or 'unknown'}, fabric type {ftype} expects {layer}: "
                    f"set the port type (`mlxconfig -d {p.get('device')} set LINK_TYPE_P{p.get('port')}="
                    f"{1 if layer == 'InfiniBand' else 2}`) and reboot, or fix networks.fabric.type",
                    host,
                )
            )
        state, phys = p.get("state"), p.get("phys_state")
        if state != "ACTIVE" or phys != "LinkUp":
            if phys == "LinkUp" and state in ("INIT", "ARMED"):
                todo = "the link is up but no subnet manager configured it: check opensm / the UFM on this subnet"
            else:
                todo = "check the cable, the transceiver and the switch port (`mlxlink -d <dev>`), then reseat"
            out.append(
                violation(
                    "HW_RDMA_PORT_DOWN",
                    f"{field}.state",
                    f"{name} is {state or 'unknown'} / {phys or 'unknown'}, expected ACTIVE / LinkUp: {todo}",
                    host,
                )
            )
            continue  # a down port reports a meaningless rate
        rate = _num(p.get("rate_gbps"))
        if speed and rate != speed:
            out.append(
                violation(
                    "HW_RDMA_RATE",
                    f"{field}.rate_gbps",
                    f"reseat / check cable on {name}: rate {_fmt(rate)} Gb/s, brief expects {_fmt(speed)} "
                    "(networks.fabric.link_speed_gbps); a lower rate is a degraded cable, transceiver or "
                    "switch-port speed setting",
                    host,
                )
            )
    return out


def rail_optimized(pool: dict) -> bool:
    """``pool.rail_optimized`` when set; else a pool is rail-optimised when it has one NIC per GPU."""
    if pool.get("rail_optimized") is not None:
        return bool(pool.get("rail_optimized"))
    nics, gpus = pool.get("nics_per_node"), pool.get("gpus_per_node")
    return bool(nics) and nics == gpus


def check_nic_affinity(host: str, facts: dict, brief: dict, pool: dict) -> list[dict]:
    ftype = str(_fabric(brief).get("type") or "none").lower()
    if not rail_optimized(pool) or ftype == "none":
        return []
    topo = facts.get("topology") or {}
    if not topo.get("gpu_nic"):
        return [
            violation(
                "HW_FACTS_MISSING",
                "topology.gpu_nic",
                f"no GPU/NIC columns in `nvidia-smi topo -m`{_source_note(facts, 'nvidia_smi_topo')}: cannot check "
                "that each NIC sits next to a GPU as a rail-optimised pool needs",
                host,
            )
        ]
    want_gpus = pool.get("gpus_per_node")
    if want_gpus and len(topo.get("gpus") or []) < int(want_gpus):
        return []  # a GPU is missing: its NIC has no GPU to sit next to; HW_GPU_COUNT already says so
    layer = _LAYER_FOR_FABRIC.get(ftype)
    ports = fabric_ports((facts.get("rdma") or {}).get("ports") or [], pool, layer)
    devices = sorted({p.get("device") for p in ports}, key=str)
    nic_index = {n.get("name"): k for k, n in enumerate(topo.get("nics") or [])}
    numa_of_nic = {p.get("device"): p.get("numa_node") for p in ports}
    gpu_numa = {g.get("index"): g.get("numa_affinity") for g in topo.get("gpus") or []}
    matrix = topo["gpu_nic"]
    out: list[dict] = []
    served: set[int] = set()
    for dev in devices:
        k = nic_index.get(dev)
        if k is None:
            continue  # not in topo -m (e.g. a device nvidia-smi does not list); the count check covers absence
        tokens = [(g, row[k] if k < len(row) else None) for g, row in enumerate(matrix)]
        near = [g for g, t in tokens if t in NEAR_TOKENS]
        served.update(near)
        if near:
            continue
        g_best, t_best = min(tokens, key=lambda gt: _DISTANCE.get(gt[1] or "", 9)) if tokens else (None, None)
        numa_note = ""
        if numa_of_nic.get(dev) is not None and g_best is not None and gpu_numa.get(g_best) is not None:
            numa_note = f" (NIC on NUMA {numa_of_nic[dev]}, GPU{g_best} on NUMA {gpu_numa[g_best]})"
        out.append(
            violation(
                "HW_NIC_AFFINITY",
                f"topology.gpu_nic[{dev}]",
                f"{dev} is not PIX/PXB to any GPU: nearest is GPU{g_best} at {t_best}{numa_note}; a rail-optimised "
                "pool needs each NIC behind its GPU's PCIe switch — move the NIC to the right slot / riser "
                "(wrong socket) or fix the BIOS PCIe bifurcation",
                host,
            )
        )
    if not out and devices:
        lonely = [g for g in range(len(matrix)) if g not in served]
        if lonely and len(devices) >= len(matrix):
            out.append(
                violation(
                    "HW_NIC_AFFINITY",
                    "topology.gpu_nic",
                    f"GPU {_ranges(lonely)} has no NIC at PIX/PXB while others share one: NICs are in the wrong "
                    "slots for a rail-optimised pool",
                    host,
                )
            )
    return out


# ------------------------------------------------------------------ CPU, memory, NUMA, NVMe


def check_host(host: str, facts: dict, pool: dict) -> list[dict]:
    out: list[dict] = []
    cpu = facts.get("cpu") or {}
    for key, fact, label in (
        ("sockets", "sockets", "sockets"),
        ("cores_per_socket", "cores_per_socket", "cores per socket"),
        ("threads_per_core", "threads_per_core", "threads per core"),
        ("cpus", "logical_cpus", "logical CPUs"),
    ):
        want = pool.get(key)
        if want is None:
            continue
        found = cpu.get(fact)
        if found != int(want):
            out.append(
                violation(
                    "HW_CPU",
                    f"cpu.{fact}",
                    f"{found if found is not None else 'unknown'} {label}, brief expects {want} (pool.{key}): "
                    "check the CPU SKU, SMT / hyper-threading and cores disabled in the BIOS",
                    host,
                )
            )
    want_gib = _num(pool.get("memory_gib"))
    if want_gib:
        kib = _num((facts.get("memory") or {}).get("total_kib"))
        if kib is None:
            out.append(violation("HW_FACTS_MISSING", "memory", "no MemTotal in /proc/meminfo", host))
        elif kib < want_gib * 1024 * 1024 * HOST_MEMORY_FLOOR:
            out.append(
                violation(
                    "HW_MEMORY",
                    "memory.total_kib",
                    f"MemTotal {kib / 1024 / 1024:.0f} GiB, brief expects {_fmt(want_gib)} GiB (at least "
                    f"{int(HOST_MEMORY_FLOOR * 100)} %: {want_gib * HOST_MEMORY_FLOOR:.0f} GiB): a DIMM is missing or "
                    "disabled — check `dmidecode -t memory` and the BMC event log",
                    host,
                )
            )
    want_numa = pool.get("numa_nodes")
    if want_numa is not None:
        found = cpu.get("numa_nodes")
        if found != int(want_numa):
            out.append(
                violation(
                    "HW_NUMA",
                    "cpu.numa_nodes",
                    f"{found if found is not None else 'unknown'} NUMA node(s), brief expects {want_numa} "
                    "(pool.numa_nodes): check the BIOS NPS / SNC setting and that numa=off is not on the "
                    "kernel command line",
                    host,
                )
            )
    nvme_want = pool.get("nvme") or {}
    if nvme_want.get("count"):
        want_count = int(nvme_want["count"])
        min_gb = _num(nvme_want.get("min_size_gb")) or 0
        disks = facts.get("nvme") or []
        big = [d for d in disks if (_num(d.get("size_bytes")) or 0) >= min_gb * 1e9]
        small = [d for d in disks if d not in big]
        if len(big) < want_count:
            small_note = ""
            if small:
                small_note = (
                    " (smaller: "
                    + ", ".join(f"{d.get('name')} {(_num(d.get('size_bytes')) or 0) / 1e9:.0f} GB" for d in small[:8])
                    + ")"
                )
            out.append(
                violation(
                    "HW_NVME",
                    "nvme",
                    f"{len(big)} NVMe drive(s) of at least {_fmt(min_gb)} GB{small_note}, brief expects "
                    f"{want_count} (pool.nvme): check the drives are seated and seen (`nvme list`), and the "
                    "quoted size",
                    host,
                )
            )
    return out


# ------------------------------------------------------------------ versions


def _version_violation(code: str, field: str, what: str, found: object, pin: object, todo: str, host: str) -> dict:
    found_s = found if found else "not installed"
    return violation(code, field, f"{what} {found_s}, brief pins {pin}: {todo}", host)


def _version_tuple(text: object) -> tuple[int, ...]:
    parts = []
    for piece in str(text or "").split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def check_versions(host: str, facts: dict, brief: dict, accelerator: object = None) -> list[dict]:
    sw = _software(brief)
    v = facts.get("versions") or {}
    out: list[dict] = []
    reimage = "re-run the stack roles (or `gpufleet drift` / reimage) to restore the pinned version"
    if sw.get("driver") and not version_matches(v.get("driver"), sw["driver"]):
        fm = v.get("fabric_manager")
        fm_note = (
            f"; the fabric manager ({fm}) must match the running driver too" if fm and fm != v.get("driver") else ""
        )
        out.append(
            _version_violation(
                "HW_VERSION_DRIVER",
                "versions.driver",
                "running NVIDIA driver",
                v.get("driver"),
                sw["driver"],
                f"{reimage}; a driver upgraded under a running module needs a reboot{fm_note}",
                host,
            )
        )
    flavor = v.get("driver_flavor")
    want_flavor = sw.get("driver_flavor")
    if flavor and want_flavor and flavor != want_flavor:
        out.append(
            violation(
                "HW_DRIVER_FLAVOR",
                "versions.driver_flavor",
                f"loaded kernel module is {flavor}, brief pins driver_flavor {want_flavor}: install the "
                f"{want_flavor} kernel module package of the pinned driver and reboot",
                host,
            )
        )
    elif flavor == "proprietary" and _attr(accelerator, "open_kernel_modules_required"):
        out.append(
            violation(
                "HW_DRIVER_FLAVOR",
                "versions.driver_flavor",
                f"{_attr(accelerator, 'key')} runs only with the open kernel modules, the proprietary module is "
                "loaded: install the open flavour and reboot",
                host,
            )
        )
    if sw.get("cuda"):
        if not version_matches(v.get("cuda"), sw["cuda"]):
            out.append(
                _version_violation(
                    "HW_VERSION_CUDA",
                    "versions.cuda",
                    "installed CUDA toolkit",
                    v.get("cuda"),
                    sw["cuda"],
                    reimage,
                    host,
                )
            )
        ceiling = v.get("cuda_driver")
        if ceiling and _version_tuple(ceiling)[:2] < _version_tuple(sw["cuda"])[:2]:
            out.append(
                violation(
                    "HW_VERSION_CUDA",
                    "versions.cuda_driver",
                    f"the driver supports CUDA up to {ceiling}, brief pins CUDA {sw['cuda']}: the pinned driver is "
                    "too old for the pinned CUDA (fix the brief) or the wrong driver is running",
                    host,
                )
            )
    if sw.get("nccl") and not version_matches(v.get("nccl"), sw["nccl"]):
        out.append(
            _version_violation("HW_VERSION_NCCL", "versions.nccl", "libnccl", v.get("nccl"), sw["nccl"], reimage, host)
        )
    if sw.get("container_toolkit") and not version_matches(v.get("container_toolkit"), sw["container_toolkit"]):
        out.append(
            _version_violation(
                "HW_VERSION_CONTAINER_TOOLKIT",
                "versions.container_toolkit",
                "NVIDIA container toolkit",
                v.get("container_toolkit"),
                sw["container_toolkit"],
                reimage,
                host,
            )
        )
    stack = sw.get("rdma_stack")
    ftype = str(_fabric(brief).get("type") or "none").lower()
    if stack == "doca-ofed" and sw.get("doca_ofed") and not version_matches(v.get("doca_ofed"), sw["doca_ofed"]):
        ofed_note = f" (ofed_info says {v['ofed']})" if v.get("ofed") else ""
        out.append(
            _version_violation(
                "HW_VERSION_DOCA_OFED",
                "versions.doca_ofed",
                f"doca-ofed{ofed_note}",
                v.get("doca_ofed"),
                sw["doca_ofed"],
                reimage,
                host,
            )
        )
    elif stack == "inbox" and ftype in _LAYER_FOR_FABRIC:
        if sw.get("rdma_core") and not version_matches(v.get("rdma_core"), sw["rdma_core"]):
            out.append(
                _version_violation(
                    "HW_VERSION_RDMA_CORE",
                    "versions.rdma_core",
                    "rdma-core",
                    v.get("rdma_core"),
                    sw["rdma_core"],
                    reimage,
                    host,
                )
            )
        elif not v.get("rdma_core"):
            out.append(
                violation(
                    "HW_VERSION_RDMA_CORE",
                    "versions.rdma_core",
                    f"rdma-core is not installed, rdma_stack inbox on a {ftype} fabric needs it: run the rdma role",
                    host,
                )
            )
    if sw.get("kernel") and not version_matches(v.get("kernel"), sw["kernel"]):
        out.append(
            _version_violation(
                "HW_VERSION_KERNEL",
                "versions.kernel",
                "running kernel",
                v.get("kernel"),
                sw["kernel"],
                "boot the pinned kernel (and rebuild the driver's DKMS modules for it)",
                host,
            )
        )
    return out


# ------------------------------------------------------------------ entry points


def check_node(
    host: str,
    facts: dict | None,
    brief: dict,
    pool: dict,
    accelerator: object = None,
    topology: object = None,
) -> list[dict]:
    """Every hardware check of one node against its pool; ``[]`` when it passes.

    ``accelerator`` / ``topology`` are looked up in the catalogue from ``pool.accelerator`` /
    ``pool.topology`` when not given (tests inject stand-ins; dicts with the same keys work too).
    """
    if not facts or not isinstance(facts, dict):
        return [
            violation(
                "HW_FACTS_MISSING",
                "gpufleet_hw",
                "no hardware facts for this node: run gpufleet.cluster.gpu_facts on it first",
                host,
            )
        ]
    pool = pool or {}
    accelerator, topology = _resolve_catalogue(pool, accelerator, topology)
    out: list[dict] = []
    out += check_gpus(host, facts, pool, accelerator)
    out += check_nvlink(host, facts, topology)
    out += check_fabric_manager(host, facts, topology, brief)
    out += check_rdma(host, facts, brief, pool)
    out += check_nic_affinity(host, facts, brief, pool)
    out += check_host(host, facts, pool)
    out += check_versions(host, facts, brief, accelerator)
    out += check_gpu_errors(host, facts)
    out += firmware.check_node(host, facts, brief, pool)
    return out


def check_gpu_errors(host: str, facts: dict) -> list[dict]:
    """The GPU errors since boot (``gpu_errors``: the kernel log's XIDs, nvidia-smi's row-remap and ECC
    state), each judged by NVIDIA's XID catalogue: any event whose action is not ``none`` is an error.
    Facts gathered before ``gpu_errors`` existed, or a kernel log that could not be read, are not checked
    (the log's source says why in ``gpufleet_hw.sources.kernel_log``)."""
    errors = facts.get("gpu_errors")
    if not isinstance(errors, dict):
        return []
    return xid_catalogue.violations(
        host,
        errors.get("xids") or [],
        errors.get("memory") or [],
        field="gpu_errors",
        codes=("HW_GPU_XID", "HW_GPU_MEMORY_ERROR"),
    )


def _gib(facts: dict) -> float | None:
    kib = _num((facts.get("memory") or {}).get("total_kib"))
    return round(kib / 1024 / 1024, 1) if kib else None


def node_signature(facts: dict) -> dict:
    """What must be equal on every node of a pool (memory compared with a 1 % tolerance)."""
    gpus = facts.get("gpus") or []
    topo = facts.get("topology") or {}
    ports = (facts.get("rdma") or {}).get("ports") or []
    cpu = facts.get("cpu") or {}
    v = facts.get("versions") or {}
    links = sorted({t for row in topo.get("gpu_links") or [] for t in row if t and t != "X"})
    return {
        "gpu_count": len(gpus),
        "gpu_name": ", ".join(sorted({str(g.get("name")) for g in gpus})) or None,
        "gpu_memory_mib": min((g.get("memory_mib") or 0 for g in gpus), default=None),
        "nvlink": " ".join(links) or None,
        "rdma_ports": len(ports),
        # active ports per rate, "1x200 8x400": a port trained lower or down shows up here
        "rdma_rates_gbps": " ".join(
            f"{n}x{rate}"
            for rate, n in sorted(
                Counter(_fmt(_num(p.get("rate_gbps"))) for p in ports if p.get("state") == "ACTIVE").items()
            )
        )
        or None,
        "cpu_model": cpu.get("model"),
        "sockets": cpu.get("sockets"),
        "cores_per_socket": cpu.get("cores_per_socket"),
        "threads_per_core": cpu.get("threads_per_core"),
        "numa_nodes": cpu.get("numa_nodes"),
        "memory_gib": _gib(facts),
        "nvme_count": len(facts.get("nvme") or []),
        "driver": v.get("driver"),
        "driver_flavor": v.get("driver_flavor"),
        "cuda": v.get("cuda"),
        "nccl": v.get("nccl"),
        "rdma_core": v.get("rdma_core"),
        "ofed": v.get("ofed"),
        "doca_ofed": v.get("doca_ofed"),
        "container_toolkit": v.get("container_toolkit"),
        "fabric_manager": v.get("fabric_manager"),
        "kernel": v.get("kernel"),
    }


def check_pool_homogeneity(facts_by_host: dict, pool: dict | None = None, brief: dict | None = None) -> list[dict]:
    """Name the nodes of a pool that differ from their peers.

    For each attribute of ``node_signature``, the value most nodes share is the reference and every node
    with another value is an error. When no value has a strict majority (two nodes that differ, a 2-2
    split) every node is reported as a warning: which one is odd cannot be told. The firmware (VBIOS, NIC,
    BIOS) is compared the same way per device kind, unless the brief's ``acceptance.firmware.homogeneous``
    (or the pool's) is false (``firmware.check_pool``).
    """
    out = firmware.check_pool(facts_by_host, brief, pool)
    pool_name = (pool or {}).get("name") or "the pool"
    sigs = {h: node_signature(f) for h, f in sorted((facts_by_host or {}).items()) if isinstance(f, dict) and f}
    if len(sigs) < 2:
        return out
    keys = next(iter(sigs.values())).keys()
    for key in keys:
        values = {h: s[key] for h, s in sigs.items()}
        if key == "memory_gib":
            known = sorted(v for v in values.values() if v is not None)
            if not known:
                continue
            median = known[len(known) // 2]
            odd = {
                h: v for h, v in values.items() if v is None or abs(v - median) > median * HOMOGENEITY_MEMORY_TOLERANCE
            }
            groups = {median: [h for h in values if h not in odd]}
            for h, v in odd.items():
                groups.setdefault(v, []).append(h)
        else:
            groups = {}
            for h, v in values.items():
                groups.setdefault(v, []).append(h)
        if len(groups) < 2:
            continue
        counts = Counter({v: len(hs) for v, hs in groups.items()})
        ((ref, n_ref),) = counts.most_common(1)
        strict = n_ref * 2 > len(sigs)
        for value, hosts in sorted(groups.items(), key=lambda kv: str(kv[0])):
            if strict and value == ref:
                continue
            if strict:
                message = (
                    f"{key} is {value!r} here, {n_ref} of {len(sigs)} peers in {pool_name} have {ref!r}: "
                    "bring this node in line (reimage, swap the part) or move it to its own pool"
                )
                sev = ERROR
            else:
                others = "; ".join(f"{v!r} on {', '.join(hs)}" for v, hs in groups.items() if v != value)
                message = (
                    f"{key} is {value!r} here but {others} in {pool_name}; no value is shared by most nodes, "
                    "so which one is odd cannot be told"
                )
                sev = WARNING
            for h in hosts:
                out.append(violation("HW_HETEROGENEOUS", key, message, h, sev))
    return out


def node_record(host: str, facts: dict | None, violations: list[dict], pool: dict | None = None) -> dict:
    """The per-node JSON record of the gate (reports/<run>/hardware/<host>.json) and the CLI table row."""
    facts = facts or {}
    ports = (facts.get("rdma") or {}).get("ports") or []
    gpus = facts.get("gpus") or []
    fabric = facts.get("fabric") or {}
    states = sorted({str(g.get("state")) for g in fabric.get("gpus") or [] if g.get("state")})
    v = facts.get("versions") or {}
    mine = [x for x in violations or [] if x.get("host") in (host, None)]
    return {
        "host": host,
        "pool": (pool or {}).get("name"),
        "status": "fail" if any(x.get("severity") == ERROR for x in mine) else "pass",
        "summary": {
            "gpus": f"{len(gpus)}x {gpus[0].get('name')}" if gpus else "0",
            "nvlink": node_signature(facts).get("nvlink") if facts else None,
            "fabric": "/".join(states) or None,
            "rdma": f"{sum(1 for p in ports if p.get('state') == 'ACTIVE')}/{len(ports)} active",
            "rates_gbps": sorted({_fmt(_num(p.get("rate_gbps"))) for p in ports if p.get("state") == "ACTIVE"}),
            "driver": v.get("driver"),
            "cuda": v.get("cuda"),
            "nccl": v.get("nccl"),
            "kernel": v.get("kernel"),
            "firmware": firmware.summary(facts),
        },
        "codes": sorted({x.get("code") for x in mine if x.get("severity") == ERROR}),
        "violations": mine,
        "facts": facts,
    }


# ------------------------------------------------------------------ JUnit XML

# The gate's checks, each with the codes it reports: the JUnit XML has one test case per node
# per check (a check passes on a node when none of its codes is an error there).
CHECKS = {
    "facts gathered": ("HW_FACTS_MISSING",),
    "GPUs": ("HW_GPU_COUNT", "HW_GPU_MODEL", "HW_GPU_MEMORY"),
    "NVLink": ("HW_NVLINK_MISSING", "HW_NVLINK_DEGRADED"),
    "fabric manager": ("HW_FABRIC_MANAGER",),
    "RDMA ports": ("HW_RDMA_PORT_COUNT", "HW_RDMA_PORT_DOWN", "HW_RDMA_RATE", "HW_RDMA_LINK_LAYER"),
    "NIC affinity": ("HW_NIC_AFFINITY",),
    "CPU, memory, NUMA, NVMe": ("HW_CPU", "HW_MEMORY", "HW_NUMA", "HW_NVME"),
    "versions": (
        "HW_DRIVER_FLAVOR",
        "HW_VERSION_DRIVER",
        "HW_VERSION_CUDA",
        "HW_VERSION_NCCL",
        "HW_VERSION_CONTAINER_TOOLKIT",
        "HW_VERSION_DOCA_OFED",
        "HW_VERSION_RDMA_CORE",
        "HW_VERSION_KERNEL",
    ),
    "GPU errors (XID, ECC, row remapping)": ("HW_GPU_XID", "HW_GPU_MEMORY_ERROR"),
    "firmware (VBIOS, NIC, BIOS)": ("HW_FIRMWARE_MIXED", "HW_FIRMWARE_OLD"),
    "same as the pool's peers": ("HW_HETEROGENEOUS",),
}


def not_applicable(brief: dict | None, pool: dict | None) -> dict:
    """The checks the gate does not make for a node of ``pool`` (check -> why), as :func:`check_node`
    skips them: a pass there would claim what was never measured."""
    pool = pool or {}
    _accelerator, topology = _resolve_catalogue(pool, None, None)
    ftype = str(_fabric(brief or {}).get("type") or "none").lower()
    out = {}
    if topology is None or not _attr(topology, "all_pairs_nvlink"):
        out["NVLink"] = "the pool's topology does not say every GPU pair is on NVLink"
    if topology is None or not _attr(topology, "nvswitch"):
        out["fabric manager"] = "the pool's topology has no NVSwitch"
    if ftype not in _LAYER_FOR_FABRIC or not pool.get("nics_per_node"):
        out["RDMA ports"] = f"no RDMA fabric in the brief (fabric {ftype}, {pool.get('nics_per_node') or 0} NICs)"
    if ftype == "none" or not rail_optimized(pool):
        out["NIC affinity"] = "the pool is not rail-optimised on a compute fabric"
    return out


def junit_cases(results: dict, unreachable=(), skipped: dict | None = None) -> list[dict]:
    """``results`` (host -> that node's violations) as JUnit cases: per node, one case per check
    of :data:`CHECKS`, failed by its error violations, its warnings in the case's output; a code
    no check lists gets a case of its own. ``skipped`` (host -> :func:`not_applicable`) marks the
    checks not made on a node. ``unreachable``: nodes the gate never judged (their facts were not
    gathered), each one failed case."""
    check_of = {code: name for name, codes in CHECKS.items() for code in codes}
    cases = []
    for host in sorted(results):
        mine = [v for v in results[host] or [] if isinstance(v, dict)]
        names = list(CHECKS) + sorted({check_of.get(v.get("code"), str(v.get("code"))) for v in mine} - set(CHECKS))
        not_made = (skipped or {}).get(host) or {}
        for name in names:
            found = [v for v in mine if check_of.get(v.get("code"), str(v.get("code"))) == name]
            errors = [f"{v.get('code')}: {v.get('message')}" for v in found if v.get("severity") == ERROR]
            warnings = [f"warning {v.get('code')}: {v.get('message')}" for v in found if v.get("severity") != ERROR]
            why = None if found else not_made.get(name)
            cases.append(case(host, name, errors, skipped=why, output="\n".join(warnings) or None))
    for host in sorted(set(unreachable) - set(results)):
        cases.append(case(host, "facts gathered", [f"{host}: unreachable or failed before the gate: not judged"]))
    return cases


def junit(
    results: dict, cluster: str, unreachable=(), timestamp: str | None = None, skipped: dict | None = None
) -> str:
    """The gate's run as a JUnit XML document (``junit.xml`` beside the nodes' records)."""
    return junit_xml(
        f"gpufleet hardware gate {cluster}",
        junit_cases(results, unreachable, skipped),
        prefix="gpufleet.hardware_gate",
        timestamp=timestamp,
    )
