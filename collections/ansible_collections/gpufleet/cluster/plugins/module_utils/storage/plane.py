# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The storage plane's decisions, as pure functions (role ``storage``).

:func:`scratch_plan` decides what may be done with a node's scratch devices, from what the node
reports: ``lsblk -J -p -o NAME,TYPE,FSTYPE,LABEL,MOUNTPOINT,PKNAME`` (the tree) and ``wipefs -J``
of each device (signatures lsblk may not show). The rules, in order:

1. A device that is missing, or that shares a disk with anything mounted on a system path
   (``/``, ``/boot``, ``/usr``, ``/var``...) or with swap, is an error: never touched, even with consent.
2. A device with anything mounted on it (other than this scratch at its own path), or that is a member
   of an active RAID array that is not this scratch, is an error: in use, never touched.
3. Devices already assembled as this scratch (filesystem label ``label`` on the array or the single
   device) are kept: nothing is wiped; the scratch is mounted if it is not.
4. A device holding partitions, a filesystem, a RAID/LVM member or any other signature is wiped only
   with consent; without it every such device is reported (host, device, what was found) and nothing
   at all is done to the scratch (no smaller array is built from the clean devices).
5. Clean devices need no consent: there is nothing on them to lose.

:func:`mount_unit_name` is ``systemd-escape --path --suffix=mount``; :func:`shared_mounts` turns the
brief's ``storage.shared`` into what the role writes as systemd mount units.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import WARNING, violation

PROTECTED_MOUNTS = ("/", "/boot", "/boot/efi", "/usr", "/var", "/home", "/opt", "/srv", "/var/log")
DEFAULT_LABEL = "gf-scratch"  # XFS labels hold at most 12 characters
# wipefs signature types that are partition tables, not filesystems.
PARTITION_TABLES = frozenset({"gpt", "PMBR", "dos", "atari", "bsd", "sun", "sgi", "mac", "aix"})

# Actions, in what the role does.
NONE, MOUNT, CREATE, REFUSE, ERROR, SKIP = "none", "mount", "create", "refuse", "error", "skip"


class StoragePlanError(ValueError):
    """The input is not what lsblk / wipefs print (misuse, not a finding)."""


def _dev(name: Any) -> str:
    name = str(name or "")
    return name if name.startswith("/") else f"/dev/{name}"


def _mounts(node: Mapping) -> list[str]:
    points = node.get("mountpoints")
    if isinstance(points, list):
        return [p for p in points if p]
    return [node["mountpoint"]] if node.get("mountpoint") else []


def flatten_lsblk(lsblk: Any) -> dict[str, dict]:
    """lsblk's JSON tree → {device: {type, fstype, label, mounts, parents, children}}.

    A device listed under several parents (an md array under each member) is merged: its
    ``parents`` holds every one of them.
    """
    roots = lsblk.get("blockdevices") if isinstance(lsblk, Mapping) else lsblk
    if not isinstance(roots, list):
        raise StoragePlanError(
            "expected lsblk -J output (a mapping with 'blockdevices'), found " + type(lsblk).__name__
        )
    nodes: dict[str, dict] = {}

    def walk(node: Any, parent: str | None) -> None:
        if not isinstance(node, Mapping) or not node.get("name"):
            return
        name = _dev(node.get("path") or node["name"])
        entry = nodes.setdefault(
            name,
            {
                "type": str(node.get("type") or ""),
                "fstype": node.get("fstype") or None,
                "label": node.get("label") or None,
                "mounts": [],
                "parents": [],
                "children": [],
            },
        )
        for m in _mounts(node):
            if m not in entry["mounts"]:
                entry["mounts"].append(m)
        pk = parent or (_dev(node["pkname"]) if node.get("pkname") else None)
        if pk and pk not in entry["parents"]:
            entry["parents"].append(pk)
        for child in node.get("children") or []:
            if isinstance(child, Mapping) and child.get("name"):
                cname = _dev(child.get("path") or child["name"])
                if cname not in entry["children"]:
                    entry["children"].append(cname)
            walk(child, name)

    for root in roots:
        walk(root, None)
    # lsblk -l (a flat list) gives parents only through PKNAME: rebuild the children.
    for name, entry in nodes.items():
        for p in entry["parents"]:
            if p in nodes and name not in nodes[p]["children"]:
                nodes[p]["children"].append(name)
    return nodes


def _descendants(nodes: dict[str, dict], name: str) -> list[str]:
    out, todo = [], list(nodes.get(name, {}).get("children", []))
    while todo:
        n = todo.pop(0)
        if n in out or n == name:
            continue
        out.append(n)
        todo.extend(nodes.get(n, {}).get("children", []))
    return out


def _disks(nodes: dict[str, dict], name: str) -> set[str]:
    """The top-level devices (disks) ``name`` lives on: itself when it has no parent."""
    out, todo, seen = set(), [name], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        parents = nodes.get(n, {}).get("parents", [])
        if not parents:
            out.add(n)
        todo.extend(parents)
    return out


def _system_disks(nodes: dict[str, dict], protected: Iterable[str]) -> dict[str, str]:
    """{disk: why} for every disk that holds a protected mount or swap."""
    protected = set(protected)
    why: dict[str, str] = {}
    for name, node in nodes.items():
        hits = [m for m in node["mounts"] if m in protected or m == "[SWAP]"]
        if node["fstype"] == "swap" and not hits:
            hits = ["swap"]
        for hit in hits:
            for disk in _disks(nodes, name):
                why.setdefault(disk, f"{name} holds {hit}")
    return why


def _signatures(raw: Any, device: str) -> list[str]:
    """Signature types from ``wipefs -J`` output (or a list of them) for ``device``."""
    if raw is None:
        return []
    if isinstance(raw, Mapping):
        raw = raw.get("signatures", [])
    if not isinstance(raw, list):
        raise StoragePlanError(f"expected wipefs -J output for {device}, found {type(raw).__name__}")
    out = []
    for sig in raw:
        kind = sig.get("type") if isinstance(sig, Mapping) else sig
        if kind:
            at = f" at {sig['offset']}" if isinstance(sig, Mapping) and sig.get("offset") else ""
            text = f"{kind} signature{at}"
            if text not in out:
                out.append(text)
    return out


def _merge_probed(nodes: dict[str, dict], signatures: Mapping[str, Any]) -> None:
    """lsblk reads FSTYPE / LABEL from udev's database: without udev (a container, early boot) they are
    empty. wipefs probes the device itself: its first filesystem signature fills them in."""
    for name, raw in signatures.items():
        node = nodes.get(_dev(name))
        if node is None or node["fstype"] or raw is None:
            continue
        sigs = raw.get("signatures", []) if isinstance(raw, Mapping) else raw
        for sig in sigs if isinstance(sigs, list) else []:
            if isinstance(sig, Mapping) and sig.get("type") and sig["type"] not in PARTITION_TABLES:
                node["fstype"], node["label"] = sig["type"], sig.get("label") or None
                break


def probe_targets(lsblk: Any, devices: Any) -> list[str]:
    """The devices to run ``wipefs -J`` on: the scratch devices and everything on them (partitions,
    arrays), so that a filesystem lsblk cannot see is still known."""
    nodes = flatten_lsblk(lsblk)
    out: list[str] = []
    for dev in [_dev(d) for d in devices or []]:
        for name in [dev, *_descendants(nodes, dev)]:
            if name not in out:
                out.append(name)
    return out


def _findings(nodes: dict[str, dict], device: str, signatures: list[str]) -> list[str]:
    node = nodes[device]
    found = []
    parts = [c for c in node["children"] if nodes.get(c, {}).get("type") == "part"]
    if parts:
        found.append("partitions " + ", ".join(parts))
    if node["fstype"]:
        label = f" (label {node['label']})" if node["label"] else ""
        found.append(f"a {node['fstype']} filesystem{label}")
    for c in node["children"]:
        ctype = nodes.get(c, {}).get("type", "")
        if ctype.startswith("raid") or ctype == "md":
            found.append(f"member of RAID array {c}")
        elif ctype == "lvm":
            found.append(f"LVM volume {c}")
        elif ctype == "crypt":
            found.append(f"encrypted volume {c}")
    for s in signatures:
        if not any(s.split(" ", 1)[0] in f for f in found):
            found.append(s)
    return found


def scratch_plan(
    lsblk: Any,
    devices: Any,
    *,
    host: str,
    path: str,
    consent: bool = False,
    signatures: Mapping[str, Any] | None = None,
    label: str = DEFAULT_LABEL,
    protected: Iterable[str] = PROTECTED_MOUNTS,
) -> dict:
    """What the role may do with ``devices`` on ``host``. See the module's docstring for the rules.

    Returns ``{host, action, devices, target, wipe, create_raid, mkfs, findings, violations}``:
    ``action`` is one of none / mount / create / refuse / error / skip (no devices);
    ``wipe`` the devices to wipe first (only ever non-empty with consent);
    ``findings`` one ``{device, found: [...]}`` per device that holds something.
    """
    if not isinstance(devices, list) or not all(isinstance(d, str) and d for d in devices):
        raise StoragePlanError(f"expected a list of device paths, found {devices!r}")
    devices = [_dev(d) for d in devices]
    plan = {
        "host": host,
        "action": SKIP,
        "devices": devices,
        "target": None,
        "wipe": [],
        "create_raid": False,
        "mkfs": False,
        "label": label,
        "findings": [],
        "violations": [],
    }
    if not devices:
        return plan
    nodes = flatten_lsblk(lsblk)
    signatures = signatures or {}
    _merge_probed(nodes, signatures)
    system = _system_disks(nodes, protected)
    out: list[dict] = plan["violations"]
    field = "storage_scratch_devices"
    path = posixpath.normpath(path)

    if len(set(devices)) != len(devices):
        out.append(violation("SCRATCH_DEVICE_DUPLICATE", field, f"expected each device once, found {devices}", host))
    for dev in devices:
        if dev not in nodes:
            out.append(
                violation(
                    "SCRATCH_DEVICE_MISSING",
                    field,
                    f"expected block device {dev}, found no such device (lsblk lists "
                    f"{', '.join(n for n, v in nodes.items() if not v['parents'])[:200] or 'none'})",
                    host,
                )
            )
            continue
        hits = [f"{d}: {system[d]}" for d in sorted(_disks(nodes, dev)) if d in system]
        hits += [system[dev]] if dev in system and not hits else []
        for d in _descendants(nodes, dev):
            if d in system and not hits:
                hits.append(f"{d}: {system[d]}")
        if hits:
            out.append(
                violation(
                    "SCRATCH_DEVICE_OS_DISK",
                    field,
                    f"expected a data device, found {dev} on the OS disk ({'; '.join(hits)}): never touched, "
                    "even with storage_scratch_wipe",
                    host,
                )
            )
    if out:
        plan["action"] = ERROR
        return plan

    # Already this scratch?
    target = _ours(nodes, devices, label)
    if target is not None:
        mounted_elsewhere = [m for m in nodes[target]["mounts"] if posixpath.normpath(m) != path]
        if mounted_elsewhere:
            out.append(
                violation(
                    "SCRATCH_MOUNTED_ELSEWHERE",
                    field,
                    f"expected the scratch {target} mounted at {path} only, found it at {', '.join(mounted_elsewhere)}",
                    host,
                )
            )
            plan["action"] = ERROR
            return plan
        plan["target"] = target
        plan["action"] = NONE if path in [posixpath.normpath(m) for m in nodes[target]["mounts"]] else MOUNT
        return plan

    dirty = []
    for dev in devices:
        in_use = []
        for d in [dev, *_descendants(nodes, dev)]:
            in_use += [f"{d} mounted at {m}" for m in nodes[d]["mounts"]]
            if d != dev and (nodes[d]["type"].startswith("raid") or nodes[d]["type"] == "md"):
                in_use.append(f"member of active RAID array {d} (stop it first: mdadm --stop {d})")
            elif d != dev and nodes[d]["type"] in ("lvm", "crypt"):
                in_use.append(f"active {nodes[d]['type']} volume {d}")
        if in_use:
            out.append(
                violation(
                    "SCRATCH_DEVICE_IN_USE",
                    field,
                    f"expected an unused device, found {dev} in use ({'; '.join(in_use)}): never touched, "
                    "even with storage_scratch_wipe",
                    host,
                )
            )
            continue
        found = _findings(nodes, dev, _signatures(signatures.get(dev), dev))
        if found:
            dirty.append(dev)
            plan["findings"].append({"device": dev, "found": found})
    if out:
        plan["action"] = ERROR
        return plan
    if dirty and not consent:
        for f in plan["findings"]:
            out.append(
                violation(
                    "SCRATCH_DEVICE_NOT_EMPTY",
                    field,
                    f"expected an empty device or consent to wipe it, found {f['device']} holding "
                    f"{', '.join(f['found'])}: left untouched (set storage_scratch_wipe: true for this host, or "
                    "list it in storage_scratch_wipe_hosts, to wipe it)",
                    host,
                    severity=WARNING,
                )
            )
        plan["action"] = REFUSE
        return plan
    plan.update(
        action=CREATE,
        # Partitions first (their signatures survive the partition table's), then the device itself.
        wipe=[p for d in dirty for p in [*_partitions(nodes, d), d]],
        create_raid=len(devices) > 1,
        mkfs=True,
        target=f"/dev/md/{label}" if len(devices) > 1 else devices[0],
    )
    return plan


def _partitions(nodes: dict[str, dict], device: str) -> list[str]:
    return [c for c in nodes[device]["children"] if nodes.get(c, {}).get("type") == "part"]


def _ours(nodes: dict[str, dict], devices: list[str], label: str) -> str | None:
    """The device holding this scratch's filesystem, when ``devices`` are exactly it."""
    if len(devices) == 1:
        node = nodes[devices[0]]
        if node["label"] == label and not node["children"]:
            return devices[0]
        return None
    arrays = set()
    for dev in devices:
        kids = [c for c in nodes[dev]["children"] if nodes.get(c, {}).get("type", "").startswith("raid")]
        if len(kids) != 1:
            return None
        arrays.add(kids[0])
    if len(arrays) != 1:
        return None
    (md,) = arrays
    if nodes[md]["label"] == label and sorted(nodes[md]["parents"]) == sorted(devices):
        return md
    return None


# --- shared file systems ------------------------------------------------------------------------------

_UNIT_SAFE = re.compile(r"[A-Za-z0-9:_.]")


def mount_unit_name(path: str, suffix: str = "mount") -> str:
    """``systemd-escape --path --suffix=mount PATH``: /shared/ckpt → shared-ckpt.mount."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise StoragePlanError(f"expected an absolute path, found {path!r}")
    trimmed = "/".join(p for p in path.split("/") if p)
    if not trimmed:
        return f"-.{suffix}"
    out = []
    for i, ch in enumerate(trimmed):
        if ch == "/":
            out.append("-")
        elif _UNIT_SAFE.match(ch) and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out.extend(f"\\x{b:02x}" for b in ch.encode())
    return "".join(out) + f".{suffix}"


def shared_mounts(shared: Any, default_options: Mapping[str, str]) -> list[dict]:
    """The brief's ``storage.shared`` → [{unit, automount, what, where, type, options}] for the role."""
    if not isinstance(shared, list):
        raise StoragePlanError(f"expected storage.shared (a list), found {type(shared).__name__}")
    out = []
    for m in shared:
        if not isinstance(m, Mapping):
            raise StoragePlanError(f"expected a mount mapping, found {m!r}")
        kind = m.get("type") or "nfs"
        server, export = str(m["server"]), str(m["export"])
        options = m.get("options") or default_options.get(kind, "defaults")
        # What= and Options= of a mount unit end at the line's end, and a space splits fstab's fields:
        # a value with whitespace or a control character would write lines of its own.
        for name, value in (("server", server), ("export", export), ("options", options)):
            if not isinstance(value, str) or not value or any(ch.isspace() or not ch.isprintable() for ch in value):
                raise StoragePlanError(
                    f"expected storage.shared[].{name} without whitespace or control characters, found {value!r:.80}"
                )
        if kind == "lustre":
            what = f"{server}:/{export.lstrip('/')}"
        else:
            what = f"[{server}]:{export}" if ":" in server else f"{server}:{export}"
        out.append(
            {
                "unit": mount_unit_name(m["path"]),
                "automount": mount_unit_name(m["path"], "automount"),
                "what": what,
                "where": posixpath.normpath(m["path"]),
                "type": kind,
                "options": options,
            }
        )
    return out


__all__ = [
    "CREATE",
    "DEFAULT_LABEL",
    "ERROR",
    "MOUNT",
    "NONE",
    "REFUSE",
    "SKIP",
    "StoragePlanError",
    "flatten_lsblk",
    "mount_unit_name",
    "probe_targets",
    "scratch_plan",
    "shared_mounts",
]
