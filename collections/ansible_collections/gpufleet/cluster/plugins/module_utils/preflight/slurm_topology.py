# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phase: Slurm's topology/block for the pools whose topology is an NVLink domain (NVL72).

The slurm_controller role writes topology/block when a pool's topology is ``nvl72``: one block per
rack (the ``rack`` host variable), a base block size of one NVLink domain's nodes (72 GPUs /
``gpus_per_node``: 18). Each such node needs its rack, a rack cannot hold more nodes than one
domain, and the Slurm the brief pins must have topology/block (23.11 and later); a partial rack
is a warning (module_utils/slurm/blocks.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.addresses import vars_of
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make
from ansible_collections.gpufleet.cluster.plugins.module_utils.slurm.blocks import (
    BLOCK_MIN_VERSION,
    NVLINK_DOMAIN_GPUS,
    check_racks,
    domain_block_size,
    supports_block,
    version_tuple,
)

RACK_VAR = "rack"


def check_slurm_topology(brief: dict, groups: Mapping[str, Any], hostvars: Mapping[str, Any]) -> list[dict]:
    out: list[dict] = []
    if (brief.get("cluster") or {}).get("control_plane") != "slurm":
        return out
    pinned = (brief.get("software") or {}).get("slurm")
    for index, pool in enumerate(brief.get("pools") or []):
        if not isinstance(pool, Mapping) or not domain_block_size(pool):
            continue
        label = f"pools[{index}] ({pool.get('name')})"
        gpus = NVLINK_DOMAIN_GPUS[pool["topology"]]
        if pinned and version_tuple(pinned) and not supports_block(pinned):
            out.append(
                make(
                    "SLURM_BLOCK_VERSION",
                    "software.slurm",
                    pool=label,
                    topology=pool["topology"],
                    minimum=".".join(map(str, BLOCK_MIN_VERSION)),
                    found=pinned,
                )
            )
        hosts = groups.get(pool.get("group")) if isinstance(groups, Mapping) else None
        hosts = [str(h) for h in hosts] if isinstance(hosts, list) else []
        racks = {h: (str(vars_of(hostvars, h).get(RACK_VAR) or "") or None) for h in hosts}
        found = check_racks(pool, racks)
        size = found["size"]
        for host in found["no_rack"]:
            out.append(make("SLURM_BLOCK_NO_RACK", RACK_VAR, host=host, pool=label, topology=pool["topology"]))
        for rack, nodes in found["over"].items():
            out.append(
                make(
                    "SLURM_BLOCK_RACK_OVERFULL",
                    f"{RACK_VAR} ({rack})",
                    rack=rack,
                    size=size,
                    gpus=gpus,
                    per_node=pool["gpus_per_node"],
                    pool=label,
                    n=len(nodes),
                    nodes=", ".join(nodes),
                )
            )
        for rack, nodes in found["under"].items():
            out.append(
                make(
                    "SLURM_BLOCK_RACK_PARTIAL",
                    f"{RACK_VAR} ({rack})",
                    rack=rack,
                    size=size,
                    pool=label,
                    n=len(nodes),
                )
            )
    return out


__all__ = ["RACK_VAR", "check_slurm_topology"]
