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

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.collectives import collective_floors
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.acceptance import floor_limit_violations
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.catalogue import Pool


def check_collectives(brief: dict, pools: Iterable[Pool]) -> list[dict]:
    out: list[dict] = []
    speed = ((brief.get("networks") or {}).get("fabric") or {}).get("link_speed_gbps")
    for pool in pools:
        if pool.acc is None:
            continue
        for floors in collective_floors(brief, pool.spec, pool.index).values():
            out += floor_limit_violations(
                pool,
                speed,
                floors["single_node_busbw_gbps"],
                floors["single_node_busbw_gbps_field"],
                floors["multi_node_busbw_gbps"],
                floors["multi_node_busbw_gbps_field"],
            )
    return out


__all__ = ["check_collectives"]
