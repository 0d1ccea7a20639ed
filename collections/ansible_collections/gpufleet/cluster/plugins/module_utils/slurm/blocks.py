# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Slurm's topology/block for NVLink domains that span nodes (GB200 / GB300 NVL72 racks).

An NVL72 rack is one NVLink domain of 72 GPUs in 18 compute trays (nodes) of 4 GPUs. A job
inside one rack talks over NVLink; across racks, over the InfiniBand / RoCE fabric. Slurm's
topology/block plugin (Slurm 23.11 and later; topology.conf(5),
https://slurm.schedmd.com/topology.conf.html, and the topology guide,
https://slurm.schedmd.com/topology.html) places a job's nodes inside as few blocks as it can:
``topology.conf`` lists one ``BlockName=<name> Nodes=<hostlist>`` line per block and
``BlockSizes=<base>[,<2 x base>,...]`` (the planning base block size first, each further size a
power of two times the one before it). gpufleet makes one block per rack (the inventory's
``rack`` host variable, the variable topology/tree reads too) and a base block size of the
domain's nodes: 72 GPUs / ``gpus_per_node`` (18 for NVL72's 4-GPU trays).

The cluster runs one TopologyPlugin: topology/block when any pool's topology is an NVLink domain
(``nvl72``), every other pool's nodes then in a block per rack too; topology/tree otherwise.
Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.slurm.conf import feature, hostlist_compress

# GPUs in one NVLink domain, by the brief's topology (module_utils/brief/catalogue.py TOPOLOGIES).
NVLINK_DOMAIN_GPUS = {"nvl72": 72}
# The first Slurm with topology/block (SchedMD's Slurm 23.11 release notes; topology.conf(5)).
BLOCK_MIN_VERSION = (23, 11)


def version_tuple(version: Any) -> tuple[int, ...]:
    """``slurm 24.11.5`` / ``24.11.5-2`` -> (24, 11, 5); () when no number is in it."""
    return tuple(int(n) for n in re.findall(r"\d+", str(version or ""))[:3])


def supports_block(version: Any) -> bool:
    """True when the Slurm ``version`` has topology/block (23.11 or later); False when unknown."""
    found = version_tuple(version)
    return bool(found) and found[:2] >= BLOCK_MIN_VERSION


def domain_block_size(pool: Mapping[str, Any]) -> int | None:
    """Nodes per NVLink domain for a pool whose topology is one (NVL72, 4 GPUs a node: 18); else None."""
    gpus = NVLINK_DOMAIN_GPUS.get(str(pool.get("topology") or ""))
    per_node = pool.get("gpus_per_node")
    if not gpus or not isinstance(per_node, int) or isinstance(per_node, bool) or per_node <= 0:
        return None
    return max(1, gpus // per_node)


def block_pools(pools: Iterable[Any]) -> dict[str, int]:
    """``{pool name: base block size}`` for each pool whose topology is an NVLink domain."""
    out = {}
    for pool in pools or []:
        if isinstance(pool, Mapping) and pool.get("name"):
            size = domain_block_size(pool)
            if size:
                out[str(pool["name"])] = size
    return out


def topology_plugin(pools: Iterable[Any]) -> str:
    """``block`` when a pool's topology is an NVLink domain, else ``tree``."""
    return "block" if block_pools(pools) else "tree"


def block_sizes(pools: Iterable[Any]) -> list[int]:
    """The ``BlockSizes`` of the cluster: the smallest domain's node count (one value; [] without a domain)."""
    sizes = sorted(set(block_pools(pools).values()))
    return sizes[:1]


def block_lines(nodes: Sequence[Mapping[str, Any]], sizes: Sequence[int]) -> list[str]:
    """``topology.conf`` lines (topology/block) from ``{name, rack}`` nodes: one block per rack.

    Nodes without a rack are in no block (preflight's SLURM_BLOCK_NO_RACK names them first).
    [] when no node has a rack.
    """
    racks: dict[str, list[str]] = {}
    for node in nodes:
        if node.get("rack"):
            racks.setdefault(feature(node["rack"]), []).append(str(node["name"]))
    if not racks:
        return []
    lines = [f"BlockName={rack} Nodes={hostlist_compress(names)}" for rack, names in sorted(racks.items())]
    if sizes:
        lines.append("BlockSizes=" + ",".join(str(int(s)) for s in sizes))
    return lines


def check_racks(pool: Mapping[str, Any], racks: Mapping[str, str | None]) -> dict:
    """A pool's nodes against its NVLink domains: ``{"size", "no_rack", "over", "under"}``.

    ``racks`` maps each node of the pool to its rack (None: none). ``over``: racks holding more
    nodes than one domain has (two domains under one name, or a wrong rack); ``under``: racks
    with fewer (a partial rack: a job asking for a whole block cannot run there).
    """
    size = domain_block_size(pool)
    members: dict[str, list[str]] = {}
    for node, rack in racks.items():
        if rack:
            members.setdefault(str(rack), []).append(node)
    return {
        "size": size,
        "no_rack": sorted(n for n, r in racks.items() if not r),
        "over": {r: sorted(n) for r, n in sorted(members.items()) if size and len(n) > size},
        "under": {r: sorted(n) for r, n in sorted(members.items()) if size and len(n) < size},
    }


__all__ = [
    "BLOCK_MIN_VERSION",
    "NVLINK_DOMAIN_GPUS",
    "block_lines",
    "block_pools",
    "block_sizes",
    "check_racks",
    "domain_block_size",
    "supports_block",
    "topology_plugin",
    "version_tuple",
]
