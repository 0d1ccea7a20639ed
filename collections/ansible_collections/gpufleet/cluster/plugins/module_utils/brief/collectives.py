# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The collectives gated besides all_reduce and their floors in the brief (no imports: preflight and the
acceptance stage both read them; acceptance/collectives.py runs and judges them).

busbw / algbw as nccl-tests computes it (https://github.com/NVIDIA/nccl-tests, src/all_reduce.cu
``AllReduceGetBw``, src/all_gather.cu ``AllGatherGetBw``, src/alltoall.cu ``AlltoAllGetBw``):
all_reduce 2(n-1)/n, all_gather and alltoall (n-1)/n.
"""

from __future__ import annotations

# The collectives gated besides all_reduce, with their nccl-tests binary and busbw factor.
COLLECTIVES = {
    "all_gather": {"binary": "all_gather_perf", "factor": "(n-1)/n"},
    "alltoall": {"binary": "alltoall_perf", "factor": "(n-1)/n"},
}
FLOOR_KEYS = ("single_node_busbw_gbps", "multi_node_busbw_gbps")


def busbw_factor(collective: str, nranks: int) -> float:
    """nccl-tests' busbw / algbw for ``nranks`` ranks (0 for a collective on one rank)."""
    n = int(nranks)
    if n < 1:
        raise ValueError(f"nranks must be at least 1, got {nranks!r}")
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in COLLECTIVES:
        return (n - 1) / n
    raise ValueError(f"unknown collective {collective!r} (known: all_reduce, {', '.join(COLLECTIVES)})")


def _section(block) -> dict:
    value = (block or {}).get("collectives") if isinstance(block, dict) else None
    return value if isinstance(value, dict) else {}


def collective_floors(brief: dict, pool: dict, index: int) -> dict:
    """``{collective: {key: floor, key_field: brief field}}`` for each collective with a floor.

    The pool's ``acceptance.collectives`` overrides the brief's, floor by floor.
    """
    top = _section(brief.get("acceptance"))
    own = _section(pool.get("acceptance"))
    out: dict = {}
    for name in COLLECTIVES:
        mine, theirs = own.get(name) or {}, top.get(name) or {}
        floors: dict = {}
        for key in FLOOR_KEYS:
            if isinstance(mine, dict) and mine.get(key) is not None:
                floors[key] = float(mine[key])
                floors[f"{key}_field"] = f"pools[{index}].acceptance.collectives.{name}.{key}"
            elif isinstance(theirs, dict) and theirs.get(key) is not None:
                floors[key] = float(theirs[key])
                floors[f"{key}_field"] = f"acceptance.collectives.{name}.{key}"
            else:
                floors[key] = None
                floors[f"{key}_field"] = f"acceptance.collectives.{name}.{key}"
        if any(floors[k] is not None for k in FLOOR_KEYS):
            out[name] = floors
    return out


__all__ = ["COLLECTIVES", "FLOOR_KEYS", "busbw_factor", "collective_floors"]
