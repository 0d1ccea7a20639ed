# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Parsers for nvidia-smi's outputs and /proc/driver/nvidia/version (stdlib only).

- ``parse_query_gpu``: ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]``
- ``parse_topo_matrix``: ``nvidia-smi topo -m`` (GPU/NIC matrix, CPU / NUMA affinity, NIC legend)
- ``parse_smi_q``: ``nvidia-smi -q`` (header, per-GPU name/UUID/bus id/memory/MIG and the Fabric section)
- ``parse_driver_proc``: ``/proc/driver/nvidia/version`` (driver version and open / proprietary flavour)

Each returns ``(data, problems)`` and never raises on odd input.
"""

from __future__ import annotations

import csv
import re

from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.parsing import clean, lines_of, to_int

QUERY_GPU_FIELDS = ("index", "name", "uuid", "pci.bus_id", "memory.total", "driver_version")
# The key each queried field gets in a GPU record (unknown fields keep their name with '.' -> '_').
_FIELD_KEYS = {
    "index": "index",
    "name": "name",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "pci.bus_id": "bus_id",
    "gpu_bus_id": "bus_id",
    "memory.total": "memory_mib",
    "driver_version": "driver_version",
    "serial": "serial",
    "vbios_version": "vbios_version",
    "mig.mode.current": "mig_mode",
    "compute_cap": "compute_cap",
}
_INT_KEYS = ("index", "memory_mib")
_SMI_FAILURE_MARKERS = (
    "nvidia-smi has failed",
    "no devices were found",
    "couldn't communicate with the nvidia driver",
    "unable to determine the device handle",
    "is not a valid field",
    "failed to initialize nvml",
)

_FIELD_NAME_RE = re.compile(r"^[a-z_][a-z0-9_.]*$")
LINK_TOKENS = ("X", "SYS", "NODE", "PHB", "PXB", "PIX", "NV#")
_NV_RE = re.compile(r"^NV(\d+)$")


def _field_key(field: str) -> str:
    field = field.strip()
    return _FIELD_KEYS.get(field, field.replace(".", "_"))


def parse_query_gpu(
    text: str | None, fields: tuple[str, ...] | list[str] = QUERY_GPU_FIELDS
) -> tuple[list[dict], list[str]]:
    """One dict per GPU from the CSV of ``--query-gpu``; a header line, if any, names the columns.

    Values nvidia-smi cannot give (``[N/A]``, ``[Not Supported]``) become None; ``memory.total``
    with units ("81559 MiB") and without ("81559") both give ``memory_mib`` as an int.
    """
    problems: list[str] = []
    gpus: list[dict] = []
    keys = [_field_key(f) for f in fields]
    for lineno, line in enumerate(lines_of(text), 1):
        if not line.strip():
            continue
        lowered = line.strip().lower()
        if any(marker in lowered for marker in _SMI_FAILURE_MARKERS):
            problems.append(f"nvidia-smi: {line.strip()}")
            continue
        try:
            row = next(csv.reader([line], skipinitialspace=True))
        except (csv.Error, StopIteration):
            problems.append(f"query-gpu line {lineno}: not CSV: {line.strip()!r}")
            continue
        row = [c.strip() for c in row]
        base = [c.split(" [")[0] for c in row]  # header cells: "memory.total [MiB]"
        if not gpus and all(_FIELD_NAME_RE.match(b) for b in base) and any(b in _FIELD_KEYS for b in base):
            keys = [_field_key(b) for b in base]
            continue
        if len(row) != len(keys):
            problems.append(f"query-gpu line {lineno}: {len(row)} values for {len(keys)} fields: {line.strip()!r}")
            continue
        gpu: dict = {}
        for key, raw in zip(keys, row):  # noqa: B905 - targets may run Python 3.9 (no strict=)
            gpu[key] = to_int(raw) if key in _INT_KEYS else clean(raw)
        gpus.append(gpu)
    return gpus, problems


def link_kind(token: str | None) -> str:
    """Classify a topo token: ``nvlink`` (NV#), ``self`` (X), ``pcie`` (PIX/PXB/PHB/NODE/SYS) or ``unknown``."""
    if token is None:
        return "unknown"
    if token == "X":
        return "self"
    if _NV_RE.match(token) or token == "NVL":
        return "nvlink"
    if token in ("PIX", "PXB", "PHB", "NODE", "SYS"):
        return "pcie"
    return "unknown"


def nvlink_count(token: str | None) -> int:
    """Number of bonded NVLinks in ``NV18`` (0 for anything else)."""
    m = _NV_RE.match(token or "")
    return int(m.group(1)) if m else 0


_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_HEADER_RE = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID|\S+")
_LEGEND_RE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def parse_topo_matrix(text: str | None) -> tuple[dict, list[str]]:
    """``nvidia-smi topo -m`` as data.

    Returns ``{gpus: [{index, label, cpu_affinity, numa_affinity, gpu_numa_id}], nics: [{label, name}],
    gpu_links: [[token]] (GPU x GPU, "X" on the diagonal), gpu_nic: [[token]] (GPU rows x NIC columns)}``.
    Columns are found from the header row, so tab- or space-separated output, older drivers that name NIC
    columns ``mlx5_0`` instead of ``NIC0``, and a missing ``GPU NUMA ID`` column all parse.
    """
    problems: list[str] = []
    result: dict = {"gpus": [], "nics": [], "gpu_links": [], "gpu_nic": []}
    lines = lines_of(text)
    header: list[str] | None = None
    rows: dict[str, list[str]] = {}
    legend: dict[str, str] = {}
    section = "matrix"
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("NIC Legend"):
            section = "nic_legend"
            continue
        if stripped.startswith("Legend"):
            section = "legend"
            continue
        if section == "nic_legend":
            m = _LEGEND_RE.match(line)
            if m:
                legend[m.group(1)] = m.group(2)
            continue
        if section == "legend":
            continue
        if header is None:
            tokens = _HEADER_RE.findall(stripped)
            if tokens and re.match(r"^GPU\d+$", tokens[0]):
                header = tokens
            continue
        first = stripped.split()[0]
        if first in header:
            rows[first] = stripped.split()[1:]
    if header is None:
        problems.append("topo -m: no header row with GPU0 found")
        return result, problems
    devices = [h for h in header if h not in _AFFINITY_COLUMNS]
    extra = [h for h in header if h in _AFFINITY_COLUMNS]
    gpu_labels = [d for d in devices if re.match(r"^GPU\d+$", d)]
    nic_labels = [d for d in devices if d not in gpu_labels]
    for label in nic_labels:
        result["nics"].append({"label": label, "name": legend.get(label, label)})
    for label in gpu_labels:
        values = rows.get(label)
        if values is None:
            problems.append(f"topo -m: no row for {label}")
            values = []
        if len(values) < len(devices):
            problems.append(f"topo -m: row {label} has {len(values)} link values for {len(devices)} devices")
        links = dict(zip(devices, values))  # noqa: B905 - targets may run Python 3.9 (no strict=)
        affinity = dict(zip(extra, values[len(devices) :]))  # noqa: B905 - targets may run Python 3.9 (no strict=)
        numa = clean(affinity.get("NUMA Affinity"))
        gpu_numa = clean(affinity.get("GPU NUMA ID"))
        result["gpus"].append(
            {
                "index": int(label[3:]),
                "label": label,
                "cpu_affinity": clean(affinity.get("CPU Affinity")),
                "numa_affinity": to_int(numa) if numa is not None and numa.isdigit() else numa,
                "gpu_numa_id": to_int(gpu_numa) if gpu_numa is not None and gpu_numa.isdigit() else gpu_numa,
            }
        )
        result["gpu_links"].append([links.get(g) for g in gpu_labels])
        result["gpu_nic"].append([links.get(n) for n in nic_labels])
    for row in result["gpu_links"] + result["gpu_nic"]:
        for token in row:
            if token is not None and link_kind(token) == "unknown":
                problems.append(f"topo -m: unknown link token {token!r}")
    return result, problems


_KV_RE = re.compile(r"^(\S.*?)\s+:(?:\s(.*))?$")
_GPU_BLOCK_RE = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


def _parse_q_tree(lines: list[str]) -> dict:
    """Indentation tree of ``Key : value`` lines; a line without ``:`` opens a section."""
    root: dict = {}
    stack: list[tuple[int, dict]] = [(-1, root)]
    for line in lines:
        if not line.strip() or line.strip().startswith("["):
            continue
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else root
        m = _KV_RE.match(body)
        if m:
            parent[m.group(1).strip()] = (m.group(2) or "").strip()
        else:
            section: dict = {}
            parent[body] = section
            stack.append((indent, section))
    return root


def _get(tree: dict, *path: str) -> str | None:
    node: object = tree
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return clean(node) if isinstance(node, str) else None


def _yes_no(value: str | None) -> bool | None:
    return {"yes": True, "no": False}.get((value or "").strip().lower())


def _row_remap(tree: dict) -> dict:
    """``Remapped Rows``: counts and the pending / failure flags (None where the GPU prints N/A or nothing)."""
    return {
        "correctable": to_int(_get(tree, "Remapped Rows", "Correctable Error")),
        "uncorrectable": to_int(_get(tree, "Remapped Rows", "Uncorrectable Error")),
        "pending": _yes_no(_get(tree, "Remapped Rows", "Pending")),
        "failure": _yes_no(_get(tree, "Remapped Rows", "Remapping Failure Occurred")),
    }


def _volatile_uncorrectable(tree: dict) -> int | None:
    """Uncorrectable ECC errors since the last reset: every ``Uncorrectable`` count under ``ECC Errors /
    Volatile`` (``DRAM Uncorrectable``, ``SRAM Uncorrectable Parity`` / ``SEC-DED``), or the older drivers'
    ``Double Bit / Total``. None when no count is printed (ECC off, N/A)."""
    volatile = (tree.get("ECC Errors") or {}).get("Volatile") if isinstance(tree.get("ECC Errors"), dict) else None
    if not isinstance(volatile, dict):
        return None
    counts = [to_int(v) for k, v in volatile.items() if isinstance(v, str) and "Uncorrectable" in k]
    double = volatile.get("Double Bit")
    if isinstance(double, dict):
        counts.append(to_int(double.get("Total")))
    counts = [c for c in counts if c is not None]
    return sum(counts) if counts else None


def parse_smi_q(text: str | None) -> tuple[dict, list[str]]:
    """``nvidia-smi -q``: header versions and, per GPU, identity, memory, MIG mode and Fabric state.

    Returns ``{driver_version, cuda_version, attached_gpus, gpus: [{bus_id, name, uuid, serial,
    architecture, vbios_version, memory_mib, mig_mode, fabric: {state, status, clique_id, cluster_uuid, bandwidth},
    row_remap: {correctable, uncorrectable, pending, failure}, ecc: {volatile_uncorrectable}}]}``.
    ``fabric`` is None when the driver prints no Fabric section (pre-535 drivers, or ``-q -d`` filters).
    """
    problems: list[str] = []
    out: dict = {"driver_version": None, "cuda_version": None, "attached_gpus": None, "gpus": []}
    lines = lines_of(text)
    header_lines: list[str] = []
    blocks: list[tuple[str, list[str]]] = []
    for line in lines:
        m = _GPU_BLOCK_RE.match(line)
        if m:
            blocks.append((m.group(1), []))
        elif blocks:
            blocks[-1][1].append(line)
        else:
            header_lines.append(line)
    header = _parse_q_tree(header_lines)
    out["driver_version"] = _get(header, "Driver Version")
    out["cuda_version"] = _get(header, "CUDA Version")
    out["attached_gpus"] = to_int(_get(header, "Attached GPUs"))
    if not blocks and not out["driver_version"]:
        problems.append("nvidia -q: no NVSMI header and no GPU block found")
        return out, problems
    for bus_id, block in blocks:
        tree = _parse_q_tree(block)
        fabric_tree = tree.get("Fabric")
        fabric = None
        if isinstance(fabric_tree, dict):
            fabric = {
                "state": _get(fabric_tree, "State"),
                "status": _get(fabric_tree, "Status"),
                "clique_id": _get(fabric_tree, "CliqueId"),
                "cluster_uuid": _get(fabric_tree, "ClusterUUID"),
                "bandwidth": _get(fabric_tree, "Health", "Bandwidth"),
            }
        out["gpus"].append(
            {
                "bus_id": bus_id,
                "name": _get(tree, "Product Name"),
                "uuid": _get(tree, "GPU UUID"),
                "serial": _get(tree, "Serial Number"),
                "architecture": _get(tree, "Product Architecture"),
                "vbios_version": _get(tree, "VBIOS Version"),
                "memory_mib": to_int(_get(tree, "FB Memory Usage", "Total")),
                "mig_mode": _get(tree, "MIG Mode", "Current"),
                "fabric": fabric,
                "row_remap": _row_remap(tree),
                "ecc": {"volatile_uncorrectable": _volatile_uncorrectable(tree)},
            }
        )
    if out["attached_gpus"] is not None and blocks and out["attached_gpus"] != len(blocks):
        problems.append(f"nvidia -q: header says {out['attached_gpus']} GPUs attached, {len(blocks)} GPU blocks read")
    return out, problems


_PROC_VERSION_RE = re.compile(r"NVRM version:\s*(.*?)\s+(\d+\.\d+(?:\.\d+)?)\s")


def parse_driver_proc(text: str | None) -> tuple[dict, list[str]]:
    """``/proc/driver/nvidia/version``: ``{version, flavor}`` with flavor ``open`` or ``proprietary``."""
    for line in lines_of(text):
        m = _PROC_VERSION_RE.search(line + " ")
        if m:
            flavor = "open" if "Open Kernel Module" in m.group(1) else "proprietary"
            return {"version": m.group(2), "flavor": flavor}, []
    if text:
        return {"version": None, "flavor": None}, ["/proc/driver/nvidia/version: no 'NVRM version' line"]
    return {"version": None, "flavor": None}, []
