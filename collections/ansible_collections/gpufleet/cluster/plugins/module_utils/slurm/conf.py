# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Slurm configuration, built from the brief and the inventory: pure functions, no I/O.

- hostlist compression / expansion (``gpu[001-512]``), compatible with Slurm's syntax;
- node shapes (CPUs, sockets, memory, GRES, features) from gathered facts or the brief;
- ``NodeName`` lines collapsing identical nodes into ranges, ``PartitionName`` lines;
- ``topology.conf`` (topology/tree) from racks and leaf switches;
- a minimal ``slurm.conf`` reader and the reconfigure plan: what a configuration change
  asks of slurmctld and slurmd (start, restart, ``scontrol reconfigure`` or nothing).

Used by the ``gpufleet.cluster.slurm_*`` filters and ``scripts/bench_slurm_conf``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Keys of a NodeName line, in the order Slurm documents them.
NODE_KEYS = (
    "CPUs",
    "Boards",
    "Sockets",
    "CoresPerSocket",
    "ThreadsPerCore",
    "RealMemory",
    "MemSpecLimit",
    "Gres",
    "Features",
    "Weight",
    "State",
)

# slurm.conf parameters whose change slurmctld (and slurmd) only pick up on a restart,
# not on `scontrol reconfigure` (scontrol(1) "reconfigure", slurm.conf(5), Slurm 22.05).
RESTART_KEYS = frozenset(
    k.lower()
    for k in (
        "AccountingStorageHost",
        "AccountingStoragePort",
        "AccountingStorageTRES",
        "AccountingStorageType",
        "AuthAltTypes",
        "AuthType",
        "ClusterName",
        "CommunicationParameters",
        "CredType",
        "GresTypes",
        "JobAcctGatherType",
        "MpiDefault",
        "PluginDir",
        "PrologFlags",
        "ProctrackType",
        "SelectType",
        "SelectTypeParameters",
        "SlurmctldHost",
        "SlurmctldPort",
        "SlurmdPort",
        "SlurmdSpoolDir",
        "SlurmUser",
        "StateSaveLocation",
        "SwitchType",
        "TaskPlugin",
        "TopologyPlugin",
    )
)

_FEATURE_BAD = re.compile(r"[^A-Za-z0-9_.\-]+")
_TRAILING_NUM = re.compile(r"^(.*?)(\d+)$")


# --------------------------------------------------------------------------- hostlists


def _split(name: str) -> tuple[str, str | None]:
    """Prefix and trailing number (as written) of a host name."""
    m = _TRAILING_NUM.fullmatch(name)
    if not m or not m.group(1):
        return name, None
    return m.group(1), m.group(2)


def hostlist_compress(names: Iterable[str]) -> str:
    """Compress host names into Slurm's hostlist syntax.

    ``gpu001..gpu512`` -> ``gpu[001-512]``; zero padding is kept (``gpu09,gpu10`` ->
    ``gpu[09-10]``), names without a trailing number stay as they are, and the result
    expands back to exactly the input set. Output is sorted by prefix then number.
    """
    literal: set[str] = set()
    by_prefix: dict[str, dict[int, set[str]]] = {}
    for raw in names:
        name = str(raw).strip()
        if not name:
            continue
        prefix, digits = _split(name)
        if digits is None:
            literal.add(name)
        else:
            by_prefix.setdefault(prefix, {}).setdefault(int(digits), set()).add(digits)

    parts: list[tuple[str, int, str]] = [(n, -1, n) for n in literal]
    for prefix, numbers in by_prefix.items():
        # Each (value, spelling) pair; the same value spelled twice (gpu1, gpu01) are two hosts.
        items = sorted((value, spelling) for value, spellings in numbers.items() for spelling in spellings)
        ranges: list[tuple[int, int, int]] = []  # (lo, hi, width); width 0 = no padding
        leftovers: list[tuple[int, str]] = []
        for value, spelling in items:
            padded = len(spelling) > 1 and spelling[0] == "0"
            if ranges:
                lo, hi, width = ranges[-1]
                if value == hi + 1:
                    # A padded number joins only a run of its own width; an unpadded one joins
                    # a run whose width does not change its spelling.
                    if padded and width == len(spelling):
                        ranges[-1] = (lo, value, len(spelling))
                        continue
                    if not padded and len(spelling) >= width:
                        ranges[-1] = (lo, value, width)
                        continue
                elif value == hi:
                    leftovers.append((value, spelling))
                    continue
            ranges.append((value, value, len(spelling) if padded else 0))
        rendered = []
        for lo, hi, width in ranges:
            lo_s, hi_s = str(lo).zfill(width), str(hi).zfill(width)
            rendered.append(lo_s if lo == hi else f"{lo_s}-{hi_s}")
        if len(rendered) == 1 and "-" not in rendered[0]:
            parts.append((prefix, ranges[0][0], prefix + rendered[0]))
        else:
            parts.append((prefix, ranges[0][0], f"{prefix}[{','.join(rendered)}]"))
        for value, spelling in leftovers:
            parts.append((prefix, value, prefix + spelling))
    parts.sort(key=lambda p: (p[0], p[1], p[2]))
    return ",".join(p[2] for p in parts)


def _split_top(expr: str) -> list[str]:
    """Split on commas outside brackets."""
    out, depth, cur = [], 0, []
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [p.strip() for p in out if p.strip()]


def hostlist_expand(expr: str) -> list[str]:
    """Expand a Slurm hostlist (``gpu[001-003,007],ctl01``) into host names, in order."""
    if expr is None:
        return []
    names: list[str] = []
    for part in _split_top(str(expr)):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if not m:
            names.append(part)
            continue
        prefix, body, rest = m.groups()
        for tail in hostlist_expand(rest) if rest else [""]:
            for item in body.split(","):
                item = item.strip()
                if "-" in item:
                    lo_s, hi_s = item.split("-", 1)
                    width = len(lo_s) if lo_s.startswith("0") and len(lo_s) > 1 else 0
                    lo, hi = int(lo_s), int(hi_s)
                    if hi < lo:
                        raise ValueError(f"bad hostlist range '{item}' in '{expr}'")
                    names.extend(f"{prefix}{str(n).zfill(width)}{tail}" for n in range(lo, hi + 1))
                elif item:
                    names.append(f"{prefix}{item}{tail}")
    return names


# --------------------------------------------------------------------------- GRES and features


def gres_type(accelerator: str | None, overrides: Mapping[str, str] | None = None) -> str:
    """Short GRES type of an accelerator catalogue key: ``h100-sxm-80gb`` -> ``h100``.

    ``overrides`` maps catalogue keys to the type to use instead.
    """
    if not accelerator:
        return ""
    key = str(accelerator)
    if overrides and key in overrides:
        return str(overrides[key])
    return key.split("-", 1)[0].lower()


def feature(text: Any) -> str:
    """A Slurm feature name: characters outside [A-Za-z0-9_.-] become '_'."""
    return _FEATURE_BAD.sub("_", str(text)).strip("_")


def node_features(pool: Mapping[str, Any], rack: str | None = None, gres_type_name: str = "") -> list[str]:
    """Features of a node: pool name, GRES type, accelerator key, rack (failure domain), labels."""
    raw = [pool.get("name"), gres_type_name, pool.get("accelerator")]
    if rack:
        raw.append(f"rack_{rack}")
    for key, value in sorted((pool.get("labels") or {}).items()):
        raw.append(f"{str(key).rsplit('/', 1)[-1]}_{value}")
    out: list[str] = []
    for item in raw:
        f = feature(item) if item else ""
        if f and f not in out:
            out.append(f)
    return out


# --------------------------------------------------------------------------- node shapes


def node_shape(
    name: str,
    pool: Mapping[str, Any],
    facts: Mapping[str, Any] | None = None,
    *,
    gres_type_name: str = "",
    rack: str | None = None,
    memory_reserve_mb: int = 1024,
    brief_memory_fraction: float = 0.95,
    weight: int | None = None,
) -> dict[str, Any]:
    """One node's NodeName attributes, from its gathered facts or, without them, the brief.

    ``facts`` is the host's ``ansible_facts`` (processor_count, processor_cores,
    processor_threads_per_core, processor_vcpus, memtotal_mb); when it lacks them the
    pool's ``cpus``, ``sockets`` and ``memory_gib`` are used and the rest left to Slurm.
    """
    facts = facts or {}
    node: dict[str, Any] = {"NodeName": name}
    if facts.get("processor_vcpus"):
        node["CPUs"] = int(facts["processor_vcpus"])
        if facts.get("processor_count"):
            node["Sockets"] = int(facts["processor_count"])
        if facts.get("processor_cores"):
            node["CoresPerSocket"] = int(facts["processor_cores"])
        if facts.get("processor_threads_per_core"):
            node["ThreadsPerCore"] = int(facts["processor_threads_per_core"])
    else:
        if pool.get("cpus"):
            node["CPUs"] = int(pool["cpus"])
        if pool.get("sockets"):
            node["Sockets"] = int(pool["sockets"])
    if facts.get("memtotal_mb"):
        node["RealMemory"] = max(1, int(facts["memtotal_mb"]) - int(memory_reserve_mb))
    elif pool.get("memory_gib"):
        node["RealMemory"] = max(1, int(int(pool["memory_gib"]) * 1024 * float(brief_memory_fraction)))
    gpus = int(pool.get("gpus_per_node") or 0)
    if gpus and gres_type_name:
        node["Gres"] = f"gpu:{gres_type_name}:{gpus}"
    elif gpus:
        node["Gres"] = f"gpu:{gpus}"
    features = node_features(pool, rack, gres_type_name)
    if features:
        node["Features"] = ",".join(features)
    if weight is not None:
        node["Weight"] = int(weight)
    node["State"] = "UNKNOWN"
    return node


def _attrs(node: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    keys = [k for k in NODE_KEYS if k in node and node[k] not in (None, "")]
    keys += sorted(k for k in node if k not in NODE_KEYS and k != "NodeName" and node[k] not in (None, ""))
    return tuple((k, str(node[k])) for k in keys)


def node_lines(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """``NodeName=`` lines; nodes with identical attributes share one hostlist-compressed line.

    Lines are ordered by their first node name, so the output is stable.
    """
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    seen: set[str] = set()
    for node in nodes:
        name = str(node.get("NodeName") or "")
        if not name:
            raise ValueError(f"node without NodeName: {dict(node)!r}")
        if name in seen:
            raise ValueError(f"node {name} is defined twice")
        seen.add(name)
        groups.setdefault(_attrs(node), []).append(name)
    lines = []
    for attrs, names in groups.items():
        body = " ".join(f"{k}={v}" for k, v in attrs)
        lines.append((min(names), f"NodeName={hostlist_compress(names)} {body}".rstrip()))
    return [line for _, line in sorted(lines)]


def partition_lines(
    partitions: Sequence[Mapping[str, Any]],
) -> list[str]:
    """``PartitionName=`` lines from ``{name, nodes: [..], default: bool, options: {..}}``."""
    lines = []
    for part in partitions:
        nodes = list(part.get("nodes") or [])
        if not nodes:
            continue
        opts = {"Default": "YES" if part.get("default") else "NO"}
        opts.update({str(k): str(v) for k, v in (part.get("options") or {}).items()})
        body = " ".join(f"{k}={v}" for k, v in opts.items())
        lines.append(f"PartitionName={part['name']} Nodes={hostlist_compress(nodes)} {body}")
    return lines


def partitions_from_pools(
    pools: Sequence[Mapping[str, Any]],
    members: Mapping[str, Sequence[str]],
    default_name: str = "all",
    options: Mapping[str, Any] | None = None,
    pool_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One partition per pool (named after it) plus a default partition over every pool node.

    ``members`` maps a pool name to its Slurm node names. When ``default_name`` is empty
    or names a pool, that pool's partition (or the first) is the default instead.
    """
    parts = []
    all_nodes: list[str] = []
    for pool in pools:
        names = list(members.get(pool["name"], []))
        opts = dict(options or {})
        opts.update((pool_options or {}).get(pool["name"], {}))
        parts.append({"name": pool["name"], "nodes": names, "default": False, "options": opts})
        all_nodes.extend(n for n in names if n not in all_nodes)
    pool_names = [p["name"] for p in parts]
    if default_name and default_name not in pool_names:
        parts.append({"name": default_name, "nodes": all_nodes, "default": True, "options": dict(options or {})})
    elif parts:
        target = default_name if default_name in pool_names else pool_names[0]
        for p in parts:
            p["default"] = p["name"] == target
    return parts


# --------------------------------------------------------------------------- topology


def topology_lines(
    nodes: Sequence[Mapping[str, Any]],
    top_switch: str = "top",
    unplaced_switch: str = "leaf-unplaced",
) -> list[str]:
    """``topology.conf`` lines (topology/tree) from ``{name, rack, switch}`` nodes.

    A node's leaf switch is its ``switch`` when given, else ``leaf-<rack>``; nodes with
    neither hang off ``unplaced_switch`` (topology/tree cannot schedule nodes outside the
    tree). Every leaf hangs off one ``top_switch``. Returns [] when no node has a rack or
    a switch: then the tree says nothing and topology/tree should stay off.
    """
    leaves: dict[str, list[str]] = {}
    placed = False
    for node in nodes:
        switch = node.get("switch") or (f"leaf-{node['rack']}" if node.get("rack") else None)
        placed = placed or bool(switch)
        leaves.setdefault(feature(switch) if switch else unplaced_switch, []).append(str(node["name"]))
    if not placed:
        return []
    lines = [f"SwitchName={leaf} Nodes={hostlist_compress(names)}" for leaf, names in sorted(leaves.items())]
    if len(leaves) > 1 or top_switch:
        lines.append(f"SwitchName={top_switch} Switches={hostlist_compress(leaves)}")
    return lines


# --------------------------------------------------------------------------- reading slurm.conf


def parse_slurm_conf(text: str | None) -> dict[str, Any]:
    """Read the parts of a slurm.conf that the reconfigure plan needs.

    Returns ``{"params": {lower-case key: value}, "nodes": {name: "attrs"},
    "partitions": {name: "attrs"}}``; comments and blank lines are ignored.
    """
    params: dict[str, str] = {}
    nodes: dict[str, str] = {}
    partitions: dict[str, str] = {}
    for raw in (text or "").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or "=" not in line:
            continue
        key, _, rest = line.partition("=")
        key_l = key.strip().lower()
        if key_l == "nodename":
            first, _, attrs = rest.partition(" ")
            norm = " ".join(sorted(attrs.split()))
            for name in hostlist_expand(first):
                nodes[name] = norm
        elif key_l == "partitionname":
            first, _, attrs = rest.partition(" ")
            partitions[first] = " ".join(attrs.split())
        elif key_l == "slurmctldhost":
            params[key_l] = (params[key_l] + "," + rest.strip()) if key_l in params else rest.strip()
        else:
            params[key_l] = rest.strip()
    return {"params": params, "nodes": nodes, "partitions": partitions}


def node_attrs(text: str | None, name: str) -> dict[str, str]:
    """Attributes of one node's NodeName line in a slurm.conf (empty when absent)."""
    attrs = parse_slurm_conf(text)["nodes"].get(name)
    if attrs is None:
        return {}
    out = {}
    for item in attrs.split():
        k, _, v = item.partition("=")
        out[k] = v
    return out


def node_gres(text: str | None, name: str) -> list[dict[str, Any]]:
    """GRES of one node from its NodeName line: ``gpu:h100:8`` -> ``[{name, type, count}]``."""
    out = []
    gres = node_attrs(text, name).get("Gres", "")
    for item in filter(None, gres.split(",")):
        fields = item.split(":")
        count = 1
        if len(fields) > 1 and fields[-1].split("(")[0].isdigit():
            count = int(fields.pop().split("(")[0])
        out.append({"name": fields[0], "type": fields[1] if len(fields) > 1 else "", "count": count})
    return out


def _version_tuple(version: str | None) -> tuple[int, ...]:
    nums = re.findall(r"\d+", str(version or ""))
    return tuple(int(n) for n in nums[:3]) if nums else (0,)


def reconfigure_plan(old_text: str | None, new_text: str | None, version: str | None = "22.05") -> dict[str, Any]:
    """What a slurm.conf change asks of the daemons, controller first.

    Returns ``{"slurmctld": action, "slurmd": action, "restart_nodes": [...],
    "added": [...], "removed": [...], "reasons": [...]}`` where an action is ``start``
    (no previous configuration), ``restart``, ``reconfigure`` (``scontrol reconfigure``:
    running jobs and daemons are kept) or ``none``.

    - Parameters in RESTART_KEYS need both daemons restarted.
    - Adding or removing nodes: Slurm < 23.11 needs slurmctld and every slurmd restarted
      (Slurm FAQ); 23.11+ picks them up with ``scontrol reconfigure``.
    - A node whose own NodeName attributes changed (CPUs, memory, Gres) is restarted:
      ``restart_nodes``; the others are reconfigured.
    Running jobs survive both a restart and a reconfigure: slurmstepd keeps them.
    """
    old = parse_slurm_conf(old_text)
    new = parse_slurm_conf(new_text)
    plan: dict[str, Any] = {
        "slurmctld": "none",
        "slurmd": "none",
        "restart_nodes": [],
        "added": [],
        "removed": [],
        "reasons": [],
    }
    if not (old_text or "").strip():
        plan.update(
            slurmctld="start", slurmd="start", added=sorted(new["nodes"]), reasons=["no previous configuration"]
        )
        return plan
    plan["added"] = sorted(set(new["nodes"]) - set(old["nodes"]))
    plan["removed"] = sorted(set(old["nodes"]) - set(new["nodes"]))
    changed_keys = sorted(
        k for k in set(old["params"]) | set(new["params"]) if old["params"].get(k) != new["params"].get(k)
    )
    restart_keys = [k for k in changed_keys if k in RESTART_KEYS]
    plan["restart_nodes"] = sorted(
        n for n in set(old["nodes"]) & set(new["nodes"]) if old["nodes"][n] != new["nodes"][n]
    )
    if restart_keys:
        plan["reasons"].append("changed parameters that need a restart: " + ", ".join(restart_keys))
        plan.update(slurmctld="restart", slurmd="restart")
    elif (plan["added"] or plan["removed"]) and _version_tuple(version) < (23, 11):
        plan["reasons"].append(
            "nodes added/removed ("
            + hostlist_compress(plan["added"] + plan["removed"])
            + "): Slurm < 23.11 needs restarts"
        )
        plan.update(slurmctld="restart", slurmd="restart")
    elif (
        plan["added"]
        or plan["removed"]
        or changed_keys
        or plan["restart_nodes"]
        or old["partitions"] != new["partitions"]
    ):
        if plan["added"] or plan["removed"]:
            plan["reasons"].append("nodes added/removed: " + hostlist_compress(plan["added"] + plan["removed"]))
        if changed_keys:
            plan["reasons"].append("changed parameters: " + ", ".join(changed_keys))
        if plan["restart_nodes"]:
            plan["reasons"].append("changed node definitions: " + hostlist_compress(plan["restart_nodes"]))
        if old["partitions"] != new["partitions"]:
            plan["reasons"].append("changed partitions")
        plan.update(slurmctld="reconfigure", slurmd="reconfigure")
    return plan


def slurmd_action(plan: Mapping[str, Any], node: str) -> str:
    """The action for one node's slurmd under a plan: start, restart, reconfigure or none."""
    if plan.get("slurmd") == "start" or node in plan.get("added", []):
        return "start"
    if plan.get("slurmd") == "restart" or node in plan.get("restart_nodes", []):
        return "restart"
    return str(plan.get("slurmd") or "none")


__all__ = [
    "NODE_KEYS",
    "RESTART_KEYS",
    "feature",
    "gres_type",
    "hostlist_compress",
    "hostlist_expand",
    "node_attrs",
    "node_features",
    "node_gres",
    "node_lines",
    "node_shape",
    "parse_slurm_conf",
    "partition_lines",
    "partitions_from_pools",
    "reconfigure_plan",
    "slurmd_action",
    "topology_lines",
]
