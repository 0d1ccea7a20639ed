# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Preflight checks of the brief's ``storage``, ``acceptance.storage`` and ``cost`` sections.

``check(brief, groups, hostvars)`` takes the *clean* brief (``brief_schema.validate``'s output: only
values that passed the schema, defaults filled) and returns violations. Pure: nothing is read from a
host. The codes, their severities and wordings are in ``preflight/codes.py`` (the table
docs/preflight-checks.md's Codes section is generated from).
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import show
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make

# The fastest NVMe drive's sequential throughput, GB/s: PCIe 5.0 x4 is 15.75 GB/s on the wire.
NVME_MAX_GBPS = 15.75
# Mount points that must never be replaced by a scratch or shared mount.
SYSTEM_PATHS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys", "/tmp", "/usr"}
    | {"/var"}
)
# Whole-string patterns (applied with fullmatch: re's `$` alone would admit a final newline).
_DEVICE_RE = re.compile(r"/dev/[A-Za-z0-9._/:-]+")
_HOSTNAME_RE = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9-]{1,63})*")
_LUSTRE_NID_RE = re.compile(r"[^\s@:]+@[a-z0-9]+(:[^\s@:]+@[a-z0-9]+)*")
_LUSTRE_FSNAME_RE = re.compile(r"[A-Za-z0-9_-]{1,8}")
# An NFS export lands in the mount unit's What= (server:export) and in fstab-style options: an
# absolute path of ordinary path characters, no whitespace, no '.' or '..' segment.
_EXPORT_PATH_RE = re.compile(r"/(?!.*(^|/)\.\.?(/|$))[A-Za-z0-9._/@+,=~-]*")


def _under(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or lies below it."""
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def _hosts(groups: Mapping[str, Any], name: Any) -> list[str]:
    hosts = groups.get(name) if isinstance(name, str) else None
    return [h for h in hosts if isinstance(h, str)] if isinstance(hosts, list | tuple) else []


def _device_list(devices: Any) -> bool:
    return isinstance(devices, list) and all(isinstance(d, str) and _DEVICE_RE.fullmatch(d) for d in devices)


def _duplicates(items: list) -> list:
    seen, dup = set(), []
    for item in items:
        if item in seen and item not in dup:
            dup.append(item)
        seen.add(item)
    return dup


def check(brief: dict, groups: Mapping[str, Any], hostvars: Mapping[str, Any]) -> list[dict]:
    out: list[dict] = []
    _check_scratch(brief, groups, hostvars, out)
    _check_shared(brief, out)
    _check_storage_acceptance(brief, groups, hostvars, out)
    _check_workload(brief, out)
    _check_cost(brief, out)
    return out


# --- storage ------------------------------------------------------------------------------------------


def _scratch_sources(brief: dict, groups, hostvars) -> list[tuple[str, str | None, list]]:
    """(field, host, devices) for every place scratch devices are named."""
    scratch = (brief.get("storage") or {}).get("scratch") or {}
    sources: list[tuple[str, str | None, list]] = []
    if scratch.get("devices"):
        sources.append(("storage.scratch.devices", None, scratch["devices"]))
    for i, pool in enumerate(brief.get("pools") or []):
        if pool and pool.get("scratch_devices"):
            sources.append((f"pools[{i}].scratch_devices", None, pool["scratch_devices"]))
    for host in sorted(h for h in hostvars if isinstance(h, str)):
        hv = hostvars.get(host)
        if isinstance(hv, Mapping) and "storage_scratch_devices" in hv:
            sources.append(("storage_scratch_devices", host, hv["storage_scratch_devices"]))
    return sources


def _check_scratch(brief: dict, groups, hostvars, out: list[dict]) -> None:
    storage = brief.get("storage") or {}
    scratch = storage.get("scratch") or {}
    for field, host, devices in _scratch_sources(brief, groups, hostvars):
        if host is not None and not _device_list(devices):
            out.append(make("STORAGE_SCRATCH_DEVICES_INVALID", field, host=host, found=show(devices)))
            continue
        for dev in _duplicates([d for d in devices if d]):
            out.append(make("STORAGE_SCRATCH_DUPLICATE_DEVICE", field, host=host, device=dev))
    for host in sorted(h for h in hostvars if isinstance(h, str)):
        hv = hostvars.get(host)
        wipe = hv.get("storage_scratch_wipe", False) if isinstance(hv, Mapping) else False
        if not isinstance(wipe, bool):
            out.append(make("STORAGE_SCRATCH_WIPE_INVALID", "storage_scratch_wipe", host=host, found=show(wipe)))
    for i, pool in enumerate(brief.get("pools") or []):
        if not pool:
            continue
        devices = pool.get("scratch_devices") or scratch.get("devices") or []
        count = (pool.get("nvme") or {}).get("count")
        if count is not None and len(devices) > count:
            out.append(
                make(
                    "STORAGE_SCRATCH_MORE_THAN_NVME",
                    f"pools[{i}].scratch_devices" if pool.get("scratch_devices") else "storage.scratch.devices",
                    index=i,
                    count=count,
                    pool=pool.get("name"),
                    found=len(devices),
                )
            )
    paths: list[tuple[str, str]] = []
    if scratch.get("path"):
        paths.append(("storage.scratch.path", scratch["path"]))
    for j, mount in enumerate(storage.get("shared") or []):
        if mount and mount.get("path"):
            paths.append((f"storage.shared[{j}].path", mount["path"]))
    for field, path in paths:
        if posixpath.normpath(path) in SYSTEM_PATHS:
            out.append(make("STORAGE_PATH_SYSTEM", field, path=path))
    for a in range(len(paths)):
        for b in range(a + 1, len(paths)):
            (fa, pa), (fb, pb) = paths[a], paths[b]
            if posixpath.normpath(pa) == posixpath.normpath(pb):
                out.append(make("STORAGE_PATH_DUPLICATE", fb, path=pb, other_field=fa))
            elif fa == "storage.scratch.path" and (_under(pa, pb) or _under(pb, pa)):
                out.append(make("STORAGE_PATH_NESTED", fb, shared=pb, scratch=pa))
    root = storage.get("checkpoint_root")
    if root:
        if scratch.get("path") and _under(root, scratch["path"]):
            out.append(
                make("STORAGE_CHECKPOINT_ON_SCRATCH", "storage.checkpoint_root", scratch=scratch["path"], root=root)
            )
        elif not any(_under(root, m["path"]) for m in storage.get("shared") or [] if m and m.get("path")):
            out.append(make("STORAGE_CHECKPOINT_NOT_SHARED", "storage.checkpoint_root", root=root))
        if not brief.get("tenants"):
            out.append(make("STORAGE_CHECKPOINT_NO_TENANTS", "storage.checkpoint_root", root=root))


def _check_shared(brief: dict, out: list[dict]) -> None:
    storage_net = ((brief.get("networks") or {}).get("storage") or {}).get("cidr")
    try:
        net = ipaddress.ip_network(storage_net) if storage_net else None
    except ValueError:
        net = None  # reported by the network checks
    for j, mount in enumerate((brief.get("storage") or {}).get("shared") or []):
        if not mount:
            continue
        kind, server, export = mount.get("type", "nfs"), mount.get("server"), mount.get("export")
        base = f"storage.shared[{j}]"
        if kind == "lustre":
            if server and not _LUSTRE_NID_RE.fullmatch(server):
                out.append(make("STORAGE_SHARED_SERVER", f"{base}.server", variant="lustre", found=show(server)))
            if export and not _LUSTRE_FSNAME_RE.fullmatch(export):
                out.append(make("STORAGE_SHARED_EXPORT", f"{base}.export", variant="lustre", found=show(export)))
            continue
        addr = None
        if server:
            try:
                addr = ipaddress.ip_address(server)
            except ValueError:
                if not _HOSTNAME_RE.fullmatch(server):
                    out.append(make("STORAGE_SHARED_SERVER", f"{base}.server", variant="nfs", found=show(server)))
        if export and not _EXPORT_PATH_RE.fullmatch(export):
            out.append(make("STORAGE_SHARED_EXPORT", f"{base}.export", variant="nfs", found=show(export)))
        if addr is not None and net is not None and addr.version == net.version and addr not in net:
            out.append(make("STORAGE_SHARED_OFF_NETWORK", f"{base}.server", net=storage_net, server=server))


# --- storage acceptance -------------------------------------------------------------------------------


def _check_storage_acceptance(brief: dict, groups, hostvars, out: list[dict]) -> None:
    floors = (brief.get("acceptance") or {}).get("storage") or {}
    if not floors:
        return
    storage = brief.get("storage") or {}
    scratch = storage.get("scratch") or {}
    if (floors.get("shared_write_gbps") or floors.get("shared_read_gbps")) and not storage.get("shared"):
        field = "shared_write_gbps" if floors.get("shared_write_gbps") else "shared_read_gbps"
        out.append(make("ACC_STORAGE_NO_SHARED", f"acceptance.storage.{field}"))
    scratch_floors = [k for k in ("scratch_write_gbps", "scratch_read_gbps") if floors.get(k)]
    if not scratch_floors:
        return
    level = scratch.get("raid_level", 0)
    any_devices = False
    for pool in brief.get("pools") or []:
        if not pool:
            continue
        devices = pool.get("scratch_devices") or scratch.get("devices") or []
        counts = {len(devices)} if devices else set()
        for host in _hosts(groups, pool.get("group")):
            hv = hostvars.get(host)
            if isinstance(hv, Mapping) and isinstance(hv.get("storage_scratch_devices"), list):
                counts.add(len(hv["storage_scratch_devices"]))
        counts.discard(0)
        if not counts:
            continue
        any_devices = True
        n = min(counts)
        for key in scratch_floors:
            # RAID 0 stripes both ways; RAID 1 writes every block to every device, RAID 10 to half of them.
            width = n if level == 0 or key == "scratch_read_gbps" else (1 if level == 1 else max(1, n // 2))
            ceiling = width * NVME_MAX_GBPS
            if floors[key] > ceiling:
                out.append(
                    make(
                        "ACC_STORAGE_ABOVE_LIMIT",
                        f"acceptance.storage.{key}",
                        ceiling=ceiling,
                        pool=pool.get("name"),
                        n=n,
                        level=level,
                        per_device=NVME_MAX_GBPS,
                        floor=floors[key],
                    )
                )
    if not any_devices:
        out.append(make("ACC_STORAGE_NO_SCRATCH", f"acceptance.storage.{scratch_floors[0]}"))


# --- workload acceptance (acceptance.workload) --------------------------------------------------------


def _check_workload(brief: dict, out: list[dict]) -> None:
    workload = (brief.get("acceptance") or {}).get("workload")
    if not workload:
        return
    base = "acceptance.workload"
    pools = [p for p in brief.get("pools") or [] if p]
    names = [p.get("name") for p in pools if p.get("name")]
    partition = workload.get("partition")
    pool = next((p for p in pools if p.get("name") == partition), None) if partition else (pools[:1] or [None])[0]
    if partition and pool is None:
        out.append(
            make(
                "ACC_WORKLOAD_PARTITION_UNKNOWN",
                f"{base}.partition",
                pools=", ".join(names) or "none",
                found=show(partition),
            )
        )
    plane = (brief.get("cluster") or {}).get("control_plane")
    tenants = [t for t in brief.get("tenants") or [] if isinstance(t, Mapping) and t.get("name")]
    pool_name = pool.get("name") if pool is not None else None
    if plane == "kubernetes" and pool_name and not any(not t.get("pools") or pool_name in t["pools"] for t in tenants):
        found = ", ".join(f"{t['name']} ({', '.join(t.get('pools') or [])})" for t in tenants) or "no tenants"
        out.append(make("ACC_WORKLOAD_NO_TENANT", f"{base}.partition", pool=pool_name, tenants=found))
    for what in ("dataset", "weights"):
        # A download needs the node path it goes to and the checksum it is checked against.
        if workload.get(f"{what}_url"):
            missing = [f for f in (what, f"{what}_sha256") if not workload.get(f)]
            if missing:
                out.append(
                    make(
                        "ACC_WORKLOAD_SOURCE_INCOMPLETE",
                        f"{base}.{what}_url",
                        what=what,
                        missing=" and ".join(f"{base}.{f}" for f in missing),
                    )
                )
        elif workload.get(f"{what}_sha256"):
            out.append(
                make("ACC_WORKLOAD_SOURCE_INCOMPLETE", f"{base}.{what}_sha256", what=what, missing=f"{base}.{what}_url")
            )
    gpus = workload.get("gpus")
    if gpus and pool is not None and pool.get("gpus_per_node") and gpus > pool["gpus_per_node"]:
        out.append(
            make(
                "ACC_WORKLOAD_GPUS_ABOVE_POOL",
                f"{base}.gpus",
                most=pool["gpus_per_node"],
                pool=pool.get("name"),
                gpus=gpus,
            )
        )
    ckpt = workload.get("checkpoint_dir")
    if not ckpt:
        return
    storage = brief.get("storage") or {}
    scratch = (storage.get("scratch") or {}).get("path") or "/scratch/local"
    if _under(ckpt, posixpath.join(scratch, "jobs")):
        out.append(make("ACC_WORKLOAD_CHECKPOINT_ON_JOB_SCRATCH", f"{base}.checkpoint_dir", scratch=scratch, ckpt=ckpt))
    elif not any(_under(ckpt, m["path"]) for m in storage.get("shared") or [] if m and m.get("path")):
        out.append(make("ACC_WORKLOAD_CHECKPOINT_NOT_SHARED", f"{base}.checkpoint_dir", ckpt=ckpt))


# --- cost ---------------------------------------------------------------------------------------------


def _check_cost(brief: dict, out: list[dict]) -> None:
    cost = brief.get("cost")
    if not cost:
        return
    unit = cost.get("unit") or {}
    if unit.get("measure") == "per_gpu_hour" and not unit.get("per_gpu_hour"):
        out.append(make("COST_UNIT_RATE_MISSING", "cost.unit.per_gpu_hour", found=show(unit.get("per_gpu_hour"))))
    elif unit.get("per_gpu_hour") is not None and unit.get("measure") != "per_gpu_hour":
        out.append(make("COST_UNIT_RATE_UNUSED", "cost.unit.per_gpu_hour", measure=unit.get("measure")))
    monthly = cost.get("monthly") or {}
    if monthly and not sum(v for v in monthly.values() if isinstance(v, int | float)):
        out.append(make("COST_MONTHLY_ZERO", "cost.monthly"))
    baseline = cost.get("baseline") or {}
    if baseline.get("price_per_unit") == 0:
        out.append(make("COST_BASELINE_ZERO", "cost.baseline.price_per_unit"))


__all__ = ["NVME_MAX_GBPS", "check"]
