# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Preflight checks of the brief's ``storage``, ``acceptance.storage`` and ``cost`` sections.

``check(brief, groups, hostvars)`` takes the *clean* brief (``brief_schema.validate``'s output: only
values that passed the schema, defaults filled) and returns violations. Pure: nothing is read from a
host. The codes are listed in docs/preflight-checks.md.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import show
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import WARNING, violation

# The fastest NVMe drive's sequential throughput, GB/s: PCIe 5.0 x4 is 15.75 GB/s on the wire.
NVME_MAX_GBPS = 15.75
# Mount points that must never be replaced by a scratch or shared mount.
SYSTEM_PATHS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys", "/tmp", "/usr"}
    | {"/var"}
)
_DEVICE_RE = re.compile(r"^/dev/[A-Za-z0-9._/:-]+$")
_HOSTNAME_RE = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9-]{1,63})*$")
_LUSTRE_NID_RE = re.compile(r"^[^\s@:]+@[a-z0-9]+(:[^\s@:]+@[a-z0-9]+)*$")


def _under(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or lies below it."""
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def _hosts(groups: Mapping[str, Any], name: Any) -> list[str]:
    hosts = groups.get(name) if isinstance(name, str) else None
    return [h for h in hosts if isinstance(h, str)] if isinstance(hosts, list | tuple) else []


def _device_list(devices: Any) -> bool:
    return isinstance(devices, list) and all(isinstance(d, str) and _DEVICE_RE.match(d) for d in devices)


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
            out.append(
                violation(
                    "STORAGE_SCRATCH_DEVICES_INVALID",
                    field,
                    f"expected a list of block devices such as ['/dev/nvme0n1'], found {show(devices)}",
                    host=host,
                )
            )
            continue
        for dev in _duplicates([d for d in devices if d]):
            out.append(
                violation(
                    "STORAGE_SCRATCH_DUPLICATE_DEVICE",
                    field,
                    f"expected each scratch device once, found {dev} more than once",
                    host=host,
                )
            )
    for host in sorted(h for h in hostvars if isinstance(h, str)):
        hv = hostvars.get(host)
        wipe = hv.get("storage_scratch_wipe", False) if isinstance(hv, Mapping) else False
        if not isinstance(wipe, bool):
            out.append(
                violation(
                    "STORAGE_SCRATCH_WIPE_INVALID",
                    "storage_scratch_wipe",
                    "expected true or false (consent to wipe the scratch devices: a YAML or JSON boolean, "
                    f"e.g. -e '{{\"storage_scratch_wipe\": true}}', not a string), found {show(wipe)}",
                    host=host,
                )
            )
    for i, pool in enumerate(brief.get("pools") or []):
        if not pool:
            continue
        devices = pool.get("scratch_devices") or scratch.get("devices") or []
        count = (pool.get("nvme") or {}).get("count")
        if count is not None and len(devices) > count:
            out.append(
                violation(
                    "STORAGE_SCRATCH_MORE_THAN_NVME",
                    f"pools[{i}].scratch_devices" if pool.get("scratch_devices") else "storage.scratch.devices",
                    f"expected at most pools[{i}].nvme.count = {count} scratch devices for pool "
                    f"{pool.get('name')}, found {len(devices)}",
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
            out.append(
                violation(
                    "STORAGE_PATH_SYSTEM",
                    field,
                    f"expected a dedicated mount point (such as /scratch/local or /shared), found the system "
                    f"directory {path}: mounting over it breaks the node",
                )
            )
    for a in range(len(paths)):
        for b in range(a + 1, len(paths)):
            (fa, pa), (fb, pb) = paths[a], paths[b]
            if posixpath.normpath(pa) == posixpath.normpath(pb):
                out.append(
                    violation("STORAGE_PATH_DUPLICATE", fb, f"expected a mount point of its own, found {pb} ({fa})")
                )
            elif fa == "storage.scratch.path" and (_under(pa, pb) or _under(pb, pa)):
                out.append(
                    violation(
                        "STORAGE_PATH_NESTED",
                        fb,
                        f"expected the shared mount {pb} apart from the local scratch {pa}: one would hide the other",
                    )
                )
    root = storage.get("checkpoint_root")
    if root:
        if scratch.get("path") and _under(root, scratch["path"]):
            out.append(
                violation(
                    "STORAGE_CHECKPOINT_ON_SCRATCH",
                    "storage.checkpoint_root",
                    f"expected checkpoints outside the local scratch {scratch['path']} (it is cleaned after each "
                    f"job and lost with the node), found {root}",
                )
            )
        elif not any(_under(root, m["path"]) for m in storage.get("shared") or [] if m and m.get("path")):
            out.append(
                violation(
                    "STORAGE_CHECKPOINT_NOT_SHARED",
                    "storage.checkpoint_root",
                    f"expected the checkpoint root on a shared mount (storage.shared[].path) so a job can "
                    f"resume on another node, found {root} on each node's own disk",
                    severity=WARNING,
                )
            )
        if not brief.get("tenants"):
            out.append(
                violation(
                    "STORAGE_CHECKPOINT_NO_TENANTS",
                    "storage.checkpoint_root",
                    "expected tenants[] to create one checkpoint directory per tenant under "
                    f"{root}, found no tenants: only the root is created",
                    severity=WARNING,
                )
            )


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
            if server and not _LUSTRE_NID_RE.match(server):
                out.append(
                    violation(
                        "STORAGE_SHARED_SERVER",
                        f"{base}.server",
                        f"expected a Lustre MGS NID such as 10.0.0.5@o2ib (several joined by ':'), "
                        f"found {show(server)}",
                    )
                )
            if export and not re.match(r"^[A-Za-z0-9_-]{1,8}$", export):
                out.append(
                    violation(
                        "STORAGE_SHARED_EXPORT",
                        f"{base}.export",
                        f"expected a Lustre file system name (1-8 of A-Z a-z 0-9 _ -), found {show(export)}",
                    )
                )
            continue
        addr = None
        if server:
            try:
                addr = ipaddress.ip_address(server)
            except ValueError:
                if not _HOSTNAME_RE.match(server):
                    out.append(
                        violation(
                            "STORAGE_SHARED_SERVER",
                            f"{base}.server",
                            f"expected an NFS server host name or IP address, found {show(server)}",
                        )
                    )
        if export and not export.startswith("/"):
            out.append(
                violation(
                    "STORAGE_SHARED_EXPORT",
                    f"{base}.export",
                    f"expected an absolute exported path such as /export/data, found {show(export)}",
                )
            )
        if addr is not None and net is not None and addr.version == net.version and addr not in net:
            out.append(
                violation(
                    "STORAGE_SHARED_OFF_NETWORK",
                    f"{base}.server",
                    f"expected the NFS server inside networks.storage ({storage_net}) so file traffic stays off "
                    f"the management network, found {server}",
                    severity=WARNING,
                )
            )


# --- storage acceptance -------------------------------------------------------------------------------


def _check_storage_acceptance(brief: dict, groups, hostvars, out: list[dict]) -> None:
    floors = (brief.get("acceptance") or {}).get("storage") or {}
    if not floors:
        return
    storage = brief.get("storage") or {}
    scratch = storage.get("scratch") or {}
    if (floors.get("shared_write_gbps") or floors.get("shared_read_gbps")) and not storage.get("shared"):
        out.append(
            violation(
                "ACC_STORAGE_NO_SHARED",
                "acceptance.storage.shared_write_gbps"
                if floors.get("shared_write_gbps")
                else "acceptance.storage.shared_read_gbps",
                "expected storage.shared[] to measure shared file system floors on, found no shared mount",
            )
        )
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
                    violation(
                        "ACC_STORAGE_ABOVE_LIMIT",
                        f"acceptance.storage.{key}",
                        f"expected at most {ceiling:g} GB/s for pool {pool.get('name')} ({n} device(s), RAID "
                        f"{level}, {NVME_MAX_GBPS} GB/s per PCIe 5.0 x4 NVMe), found {floors[key]:g}",
                    )
                )
    if not any_devices:
        out.append(
            violation(
                "ACC_STORAGE_NO_SCRATCH",
                f"acceptance.storage.{scratch_floors[0]}",
                "expected scratch devices (storage.scratch.devices, pools[].scratch_devices or the host variable "
                "storage_scratch_devices) for the scratch floors, found none: the floors would be measured on "
                "the OS disk",
                severity=WARNING,
            )
        )


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
            violation(
                "ACC_WORKLOAD_PARTITION_UNKNOWN",
                f"{base}.partition",
                f"expected a pool's name (Slurm has one partition per pool; on Kubernetes the Job's pool: "
                f"{', '.join(names) or 'none'}), found {show(partition)}",
                severity=WARNING,
            )
        )
    plane = (brief.get("cluster") or {}).get("control_plane")
    tenants = [t for t in brief.get("tenants") or [] if isinstance(t, Mapping) and t.get("name")]
    pool_name = pool.get("name") if pool is not None else None
    if plane == "kubernetes" and pool_name and not any(not t.get("pools") or pool_name in t["pools"] for t in tenants):
        out.append(
            violation(
                "ACC_WORKLOAD_NO_TENANT",
                f"{base}.partition",
                f"expected a tenant whose pools include {pool_name} (on Kubernetes the workload's Job is queued "
                f"through that tenant's Kueue LocalQueue), found "
                + (", ".join(f"{t['name']} ({', '.join(t.get('pools') or [])})" for t in tenants) or "no tenants"),
            )
        )
    gpus = workload.get("gpus")
    if gpus and pool is not None and pool.get("gpus_per_node") and gpus > pool["gpus_per_node"]:
        out.append(
            violation(
                "ACC_WORKLOAD_GPUS_ABOVE_POOL",
                f"{base}.gpus",
                f"expected at most {pool['gpus_per_node']} GPUs (one node of pool {pool.get('name')}), found {gpus}",
            )
        )
    ckpt = workload.get("checkpoint_dir")
    if not ckpt:
        return
    storage = brief.get("storage") or {}
    scratch = (storage.get("scratch") or {}).get("path") or "/scratch/local"
    if _under(ckpt, posixpath.join(scratch, "jobs")):
        out.append(
            violation(
                "ACC_WORKLOAD_CHECKPOINT_ON_JOB_SCRATCH",
                f"{base}.checkpoint_dir",
                f"expected the checkpoints outside {scratch}/jobs (the epilog removes each job's directory when "
                f"it ends, so nothing could resume), found {ckpt}",
            )
        )
    elif not any(_under(ckpt, m["path"]) for m in storage.get("shared") or [] if m and m.get("path")):
        out.append(
            violation(
                "ACC_WORKLOAD_CHECKPOINT_NOT_SHARED",
                f"{base}.checkpoint_dir",
                f"expected the checkpoints on a shared mount (storage.shared[].path) so a job resumes on any "
                f"node, found {ckpt} on each node's own disk: the resubmitted job is pinned to the first job's node",
                severity=WARNING,
            )
        )


# --- cost ---------------------------------------------------------------------------------------------


def _check_cost(brief: dict, out: list[dict]) -> None:
    cost = brief.get("cost")
    if not cost:
        return
    unit = cost.get("unit") or {}
    if unit.get("measure") == "per_gpu_hour" and not unit.get("per_gpu_hour"):
        out.append(
            violation(
                "COST_UNIT_RATE_MISSING",
                "cost.unit.per_gpu_hour",
                "expected a positive per_gpu_hour (units one GPU-hour yields) for measure per_gpu_hour, "
                f"found {show(unit.get('per_gpu_hour'))}",
            )
        )
    elif unit.get("per_gpu_hour") is not None and unit.get("measure") != "per_gpu_hour":
        out.append(
            violation(
                "COST_UNIT_RATE_UNUSED",
                "cost.unit.per_gpu_hour",
                f"expected per_gpu_hour only with measure per_gpu_hour, found measure {unit.get('measure')}",
                severity=WARNING,
            )
        )
    monthly = cost.get("monthly") or {}
    if monthly and not sum(v for v in monthly.values() if isinstance(v, int | float)):
        out.append(
            violation(
                "COST_MONTHLY_ZERO",
                "cost.monthly",
                "expected the monthly cost of the cluster (compute at least), found 0 in every item",
            )
        )
    baseline = cost.get("baseline") or {}
    if baseline.get("price_per_unit") == 0:
        out.append(
            violation(
                "COST_BASELINE_ZERO",
                "cost.baseline.price_per_unit",
                "expected the baseline's price per unit, found 0: no cluster can beat a free baseline",
                severity=WARNING,
            )
        )


__all__ = ["NVME_MAX_GBPS", "check"]
