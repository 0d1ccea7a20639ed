# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phase: the floors of all_gather and alltoall against what the hardware can reach.

nccl-tests normalises every collective's busbw to the hardware's link bandwidth (all_gather and
alltoall: algbw x (n-1)/n; acceptance/collectives.py), so the limits that bound all_reduce bound
them too: the accelerator's NVLink figure in one node, NICs x link speed / 8 across nodes. A floor
above its limit is the same error as an all_reduce floor above it, naming the collective's field.
"""

from __future__ import annotations

from collections.abc import Iterable

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.catalogue import single_node_ceiling_gbps
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.collectives import collective_floors
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.acceptance import multi_node_ceiling_gbps
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.catalogue import Pool
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make


def check_collectives(brief: dict, pools: Iterable[Pool]) -> list[dict]:
    out: list[dict] = []
    speed = ((brief.get("networks") or {}).get("fabric") or {}).get("link_speed_gbps")
    for pool in pools:
        acc, topo, spec = pool.acc, pool.topo, pool.spec
        if acc is None:
            continue
        for floors in collective_floors(brief, spec, pool.index).values():
            single = floors["single_node_busbw_gbps"]
            ceiling = single_node_ceiling_gbps(acc, topo)
            if single is not None and spec.get("gpus_per_node", 0) >= 2 and single > ceiling:
                out.append(
                    make(
                        "ACCEPT_SINGLE_NODE_ABOVE_LIMIT",
                        floors["single_node_busbw_gbps_field"],
                        ceiling=ceiling,
                        acc=acc.key,
                        topology=topo.name if topo else "this topology",
                        pool=pool.label,
                        floor=single,
                    )
                )
            multi = floors["multi_node_busbw_gbps"]
            nics = spec.get("nics_per_node", 0)
            m_ceiling = multi_node_ceiling_gbps(nics, speed, acc, topo)
            if multi is not None and m_ceiling is not None and multi > m_ceiling:
                out.append(
                    make(
                        "ACCEPT_MULTI_NODE_ABOVE_LIMIT",
                        floors["multi_node_busbw_gbps_field"],
                        ceiling=m_ceiling,
                        how=f"{nics} NICs x {speed:g} Gb/s / 8",
                        pool=pool.label,
                        floor=multi,
                    )
                )
    return out


__all__ = ["check_collectives"]
