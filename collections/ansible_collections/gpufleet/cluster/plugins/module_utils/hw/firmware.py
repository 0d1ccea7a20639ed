# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Firmware in the hardware gate: the GPUs' VBIOS, the fabric NICs' firmware and the BIOS of each node.

Read from ``gpufleet_hw`` (``gpus[].vbios_version``, ``rdma.ports[].fw_ver``, ``firmware.bios.version``)
and judged against the brief's ``acceptance.firmware`` (a pool's ``acceptance.firmware`` overrides it key
by key, see :func:`settings`):

* ``homogeneous`` (default true): the devices of one kind carry one version. Inside a node
  (:func:`check_node`) any difference is an error naming every device with its version and the node's
  majority; across a pool (:func:`check_pool`) each node's version (its majority) is compared with its
  peers' as the hardware gate compares the other facts (``gate.check_pool_homogeneity``): a node off the
  strict majority is an error, without a strict majority every node gets a warning.
* ``min.{vbios, nic, bios}``: each device at least this version (``HW_FIRMWARE_OLD``).

Version formats, as the tools print them:

* VBIOS (``nvidia-smi -q`` ``VBIOS Version``): five two-digit hexadecimal fields, ``96.00.74.00.0D``;
  the first field is the GPU family (96 GH100, 92 GA100) and two families are never ordered.
* NIC (``ibstat`` ``Firmware version``, ``/sys/class/infiniband/<dev>/fw_ver``): decimal fields,
  ConnectX ``28.39.1002`` = family.minor.subminor, the family being the device (28 ConnectX-7,
  22 ConnectX-6 Dx, 32 BlueField-3); a minimum applies to the NICs of its own family.
* BIOS (``/sys/class/dmi/id/bios_version``): free text set by the vendor. Ordered only when it is dotted
  decimals (``2.19.1``, ``1.4``); anything else is compared for equality only.

Every unknown version a minimum needs is ``HW_FACTS_MISSING``: nothing passes unmeasured.
"""

from __future__ import annotations

import re
from collections import Counter

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, violation

KINDS = ("vbios", "nic", "bios")
LABELS = {"vbios": "VBIOS", "nic": "NIC firmware", "bios": "BIOS"}
FIELDS = {"vbios": "gpus[].vbios_version", "nic": "rdma.ports[].fw_ver", "bios": "firmware.bios.version"}
FORMATS = {
    "vbios": "five two-digit hexadecimal fields like '96.00.99.00.01' (nvidia-smi's VBIOS Version)",
    "nic": "dotted decimal fields like '28.39.1002' (ibstat's Firmware version, sysfs fw_ver)",
    "bios": "dotted decimal fields like '2.19.1' (other BIOS texts can only be compared for equality: "
    "leave min.bios out and keep homogeneous: true)",
}
_VBIOS_RE = re.compile(r"[0-9A-Fa-f]{2}(\.[0-9A-Fa-f]{2}){4}")
_DOTTED_RE = re.compile(r"\d+(\.\d+)+")
_REMEDY = {
    "vbios": "flash the GPU with the VBIOS of its peers (the system vendor's firmware bundle, nvfwupd / nvflash) "
    "and reboot",
    "nic": "burn the NIC's firmware to its peers' (`mlxfwmanager --online -u` or flint with the vendor's image), "
    "then `mlxfwreset -d <dev> reset` or reboot",
    "bios": "update the BIOS to its peers' release through the BMC (Redfish UpdateService) and reboot",
}

_UPGRADE = {
    "vbios": "flash a VBIOS at least this release (the system vendor's firmware bundle, nvfwupd / nvflash) and reboot",
    "nic": "burn a firmware at least this release (`mlxfwmanager --online -u`, or flint with the vendor's image), "
    "then `mlxfwreset -d <dev> reset` or reboot",
    "bios": "update the BIOS to at least this release through the BMC (Redfish UpdateService) and reboot",
}


def parse(kind: str, text: object) -> tuple[int, ...] | None:
    """The version as a tuple that orders releases of one family, or None when it is not in ``kind``'s format."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if kind == "vbios":
        return tuple(int(f, 16) for f in text.split(".")) if _VBIOS_RE.fullmatch(text) else None
    return tuple(int(f) for f in text.split(".")) if _DOTTED_RE.fullmatch(text) else None


def compare(kind: str, found: object, minimum: object) -> int | None:
    """-1, 0 or 1 as ``found`` is older than, the same as or newer than ``minimum``; None when the two
    cannot be ordered: either is not in the kind's format, or (VBIOS, NIC) their first field, the device
    family, differs. Missing trailing fields count as 0."""
    a, b = parse(kind, found), parse(kind, minimum)
    if a is None or b is None:
        return None
    if kind in ("vbios", "nic") and a[0] != b[0]:
        return None
    width = max(len(a), len(b))
    a, b = a + (0,) * (width - len(a)), b + (0,) * (width - len(b))
    return (a > b) - (a < b)


def settings(brief: dict | None, pool: dict | None) -> dict:
    """``{homogeneous, min: {kind: version}, fields: {kind: brief field}}`` for ``pool``: the brief's
    ``acceptance.firmware``, with the pool's ``acceptance.firmware`` overriding each key it sets."""
    top = (((brief or {}).get("acceptance") or {}).get("firmware")) or {}
    mine = (((pool or {}).get("acceptance") or {}).get("firmware")) or {}
    homogeneous = mine.get("homogeneous")
    if homogeneous is None:
        homogeneous = top.get("homogeneous")
    mins, fields = {}, {}
    name = (pool or {}).get("name")
    for kind in KINDS:
        for source, where in (
            ((mine.get("min") or {}), f"pools[{name}].acceptance.firmware.min"),
            (top.get("min") or {}, "acceptance.firmware.min"),
        ):
            if source.get(kind) is not None:
                mins[kind], fields[kind] = str(source[kind]), f"{where}.{kind}"
                break
    return {"homogeneous": homogeneous is not False, "min": mins, "fields": fields}


# ------------------------------------------------------------------ the devices of a node


def _ranges(numbers: list[int]) -> str:
    nums = sorted(set(numbers))
    out, i = [], 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        out.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(out)


def _nic_family(version: str | None) -> str:
    return str(version).split(".")[0] if version else "?"


def devices(facts: dict, brief: dict | None = None, pool: dict | None = None) -> dict[str, list[tuple]]:
    """Per kind, ``(device label, sort key, version, group)`` of this node: every GPU, every fabric NIC
    (one per device, the ports of a dual-port card share its firmware; ``pool.rdma_devices`` or the
    fabric's link layer picks them as the gate's RDMA checks do, none when the brief has no RDMA fabric
    or the pool no NICs; without a brief, every RDMA device but bonds) and the BIOS. ``group`` is what versions
    are compared within: the NIC family (first field), else the kind."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.gate import _LAYER_FOR_FABRIC, fabric_ports

    out: dict[str, list[tuple]] = {kind: [] for kind in KINDS}
    for i, gpu in enumerate(facts.get("gpus") or []):
        index = gpu.get("index", i)
        out["vbios"].append(
            (f"GPU {index}", (0, index if isinstance(index, int) else i), gpu.get("vbios_version"), "vbios")
        )
    ftype = str((((brief or {}).get("networks") or {}).get("fabric") or {}).get("type") or "none").lower()
    ports = fabric_ports((facts.get("rdma") or {}).get("ports") or [], pool or {}, _LAYER_FOR_FABRIC.get(ftype))
    no_fabric = ftype not in _LAYER_FOR_FABRIC or not (pool or {}).get("nics_per_node")
    if brief is not None and not (pool or {}).get("rdma_devices") and no_fabric:
        ports = []  # no compute fabric in the brief: the gate judges no NIC (as its RDMA checks)
    seen = set()
    for p in sorted(ports, key=lambda p: str(p.get("device"))):
        dev = str(p.get("device"))
        if dev in seen:
            continue
        seen.add(dev)
        fw = p.get("fw_ver")
        out["nic"].append((dev, (1, dev), fw, f"nic {_nic_family(fw)}" if fw else "nic"))
    bios = ((facts.get("firmware") or {}).get("bios") or {}).get("version")
    out["bios"].append(("BIOS", (2, ""), bios, "bios"))
    return out


def _names(devs: list[tuple]) -> str:
    """'GPU 0-2,5' for GPUs, 'mlx5_0, mlx5_3' for NICs, 'BIOS'."""
    gpus = [d[1][1] for d in devs if d[1][0] == 0]
    others = [d[0] for d in devs if d[1][0] != 0]
    parts = ([f"GPU {_ranges(gpus)}"] if gpus else []) + others
    return ", ".join(parts)


def _what(kind: str, names: str) -> str:
    """'VBIOS of GPU 5', 'NIC firmware of mlx5_3', 'BIOS' (one per node)."""
    return LABELS[kind] if kind == "bios" else f"{LABELS[kind]} of {names}"


def _by_version(devs: list[tuple]) -> dict[str, list[tuple]]:
    groups: dict[str, list[tuple]] = {}
    for d in devs:
        groups.setdefault(str(d[2]), []).append(d)
    return groups


def _majority(counts: Counter) -> tuple[str, int, bool]:
    ((ref, n),) = counts.most_common(1)
    strict = n * 2 > sum(counts.values())
    return ref, n, strict


# ------------------------------------------------------------------ one node


def check_node(host: str, facts: dict, brief: dict | None, pool: dict | None) -> list[dict]:
    """This node's firmware: its devices of one kind on one version (when homogeneous) and each at
    least the brief's minimum."""
    cfg = settings(brief, pool)
    found = devices(facts, brief, pool)
    out: list[dict] = []
    for kind in KINDS:
        devs = found[kind]
        known = [d for d in devs if d[2]]
        if cfg["homogeneous"]:
            for group in sorted({d[3] for d in known}):
                mine = [d for d in known if d[3] == group]
                versions = _by_version(mine)
                if len(versions) < 2:
                    continue
                ref, n, _strict = _majority(Counter({v: len(ds) for v, ds in versions.items()}))
                listing = "; ".join(
                    f"{_names(ds)} {v}" for v, ds in sorted(versions.items(), key=lambda kv: (-len(kv[1]), kv[0]))
                )
                out.append(
                    violation(
                        "HW_FIRMWARE_MIXED",
                        FIELDS[kind],
                        f"{LABELS[kind]} differs inside this node: {listing}; the majority is {ref} "
                        f"({n} of {len(mine)}): {_REMEDY[kind]}",
                        host,
                    )
                )
        minimum = cfg["min"].get(kind)
        if minimum is None:
            continue
        field = cfg["fields"][kind]
        missing = [d for d in devs if not d[2]]
        if missing:
            what = _names(missing)
            out.append(
                violation(
                    "HW_FACTS_MISSING",
                    FIELDS[kind],
                    f"{_what(kind, what)} not read ({_source(kind, facts)}): cannot check it against {field} {minimum}",
                    host,
                )
            )
        old: dict[str, list[tuple]] = {}
        other: dict[str, list[tuple]] = {}
        for d in known:
            c = compare(kind, d[2], minimum)
            if c is None:
                other.setdefault(str(d[2]), []).append(d)
            elif c < 0:
                old.setdefault(str(d[2]), []).append(d)
        for version, ds in sorted(old.items()):
            out.append(
                violation(
                    "HW_FIRMWARE_OLD",
                    FIELDS[kind],
                    f"{_what(kind, _names(ds))} is {version}, older than the minimum {minimum} ({field}): "
                    + _UPGRADE[kind],
                    host,
                )
            )
        for version, ds in sorted(other.items()):
            family = kind in ("vbios", "nic") and parse(kind, version) is not None and parse(kind, minimum) is not None
            why = (
                f"its family {version.split('.')[0]} is not the minimum's {minimum.split('.')[0]}: "
                "set this pool's own pools[].acceptance.firmware.min"
                if family
                else f"it is not {FORMATS[kind].split(' (')[0]}"
            )
            out.append(
                violation(
                    "HW_FIRMWARE_OLD",
                    FIELDS[kind],
                    f"{_what(kind, _names(ds))} is {version!r}, which cannot be compared with the minimum "
                    f"{minimum} ({field}): {why}",
                    host,
                    # A device of another family is not judged against a minimum made for a different one;
                    # a version the gate cannot order against the site's minimum fails: nothing passes unmeasured.
                    WARNING if family else ERROR,
                )
            )
    return out


def _source(kind: str, facts: dict) -> str:
    key = {"vbios": "nvidia_smi_q", "nic": "rdma_sysfs", "bios": "dmi"}[kind]
    state = (facts.get("sources") or {}).get(key)
    return f"{key}: {state}" if state else "not gathered"


# ------------------------------------------------------------------ a pool


def check_pool(facts_by_host: dict, brief: dict | None = None, pool: dict | None = None) -> list[dict]:
    """Name the nodes of a pool whose firmware differs from their peers' (when homogeneous).

    Each node stands for its majority version of each kind (its own differences are
    :func:`check_node`'s); the version most nodes share is the reference. A node off a strict majority is
    an error naming its devices with their version and the majority version; without a strict majority
    every node of the kind gets a warning listing each version's nodes.
    """
    cfg = settings(brief, pool)
    if not cfg["homogeneous"]:
        return []
    pool_name = (pool or {}).get("name") or "the pool"
    nodes = {h: devices(f, brief, pool) for h, f in sorted((facts_by_host or {}).items()) if isinstance(f, dict) and f}
    if len(nodes) < 2:
        return []
    out: list[dict] = []
    for kind in KINDS:
        groups = sorted({d[3] for devs in nodes.values() for d in devs[kind] if d[2]})
        for group in groups:
            rep: dict[str, tuple[str, list[tuple]]] = {}
            for host, devs in nodes.items():
                mine = [d for d in devs[kind] if d[2] and d[3] == group]
                if not mine:
                    continue
                versions = _by_version(mine)
                top, _n, _s = _majority(Counter({v: len(ds) for v, ds in versions.items()}))
                rep[host] = (top, versions[top])
            by_version: dict[str, list[str]] = {}
            for host, (version, _ds) in rep.items():
                by_version.setdefault(version, []).append(host)
            if len(by_version) < 2:
                continue
            ref, n_ref, strict = _majority(Counter({v: len(hs) for v, hs in by_version.items()}))
            for version, hosts in sorted(by_version.items()):
                if strict and version == ref:
                    continue
                for host in hosts:
                    names = _names(rep[host][1])
                    if strict:
                        message = (
                            f"{_what(kind, names)} is {version} here, {n_ref} of {len(rep)} nodes in "
                            f"{pool_name} have {ref} (the majority): {_REMEDY[kind]}"
                        )
                        sev = ERROR
                    else:
                        others = "; ".join(
                            f"{v} on {', '.join(hs)}" for v, hs in sorted(by_version.items()) if v != version
                        )
                        message = (
                            f"{_what(kind, names)} is {version} here but {others} in {pool_name}; no version "
                            "is shared by most nodes, so which one is odd cannot be told"
                        )
                        sev = WARNING
                    out.append(violation("HW_FIRMWARE_MIXED", FIELDS[kind], message, host, sev))
    return out


def summary(facts: dict | None) -> str | None:
    """One cell for the gate's table: ``VBIOS 96.00.99.00.01, NIC 28.43.2026 + 32.38.3056, BIOS 2.3.5``
    (NIC families joined by ``+``); a family with several versions lists each with its count
    (``VBIOS 96.00.99.00.01 x7 / 96.00.74.00.0D x1``)."""
    if not facts:
        return None
    found = devices(facts)
    parts = []
    for kind, short in (("vbios", "VBIOS"), ("nic", "NIC"), ("bios", "BIOS")):
        cells = []
        for group in sorted({d[3] for d in found[kind] if d[2]}):
            counts = Counter(str(d[2]) for d in found[kind] if d[2] and d[3] == group)
            if len(counts) == 1:
                cells.append(next(iter(counts)))
            else:
                cells.append(" / ".join(f"{v} x{n}" for v, n in counts.most_common()))
        if cells:
            parts.append(f"{short} {' + '.join(cells)}")
    return ", ".join(parts) or None
