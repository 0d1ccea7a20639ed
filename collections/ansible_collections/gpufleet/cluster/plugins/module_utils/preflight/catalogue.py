# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phase: each pool against the catalogue (accelerator, topology, sharing) and pool names unique.

``check_catalogue(brief)`` reads only the clean brief's ``pools`` and returns its violations and the
pools it resolved (``Pool``: the brief's entry with its catalogue accelerator and topology), which
every later phase that looks at pools takes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.catalogue import (
    ACCELERATORS,
    Accelerator,
    Topology,
    get_accelerator,
    get_topology,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import show
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make


@dataclass(frozen=True)
class Pool:
    """One pool of the brief: ``index`` in ``pools``, the brief's ``spec``, its catalogue entries (None: unknown)."""

    index: int
    spec: dict
    acc: Accelerator | None
    topo: Topology | None

    @property
    def label(self) -> str:
        """``pools[1] (h100)``: how messages name a pool."""
        return pool_label(self.spec, self.index)


def pool_label(pool: dict, i: int) -> str:
    return f"pools[{i}]" + (f" ({pool['name']})" if pool.get("name") else "")


def check_catalogue(brief: dict) -> tuple[list[dict], tuple[Pool, ...]]:
    out: list[dict] = []
    pools: list[Pool] = []
    seen_names: dict[str, int] = {}
    for i, pool in enumerate(brief["pools"]):
        if pool is None:
            continue
        name = pool.get("name")
        if name in seen_names:
            out.append(make("POOL_DUPLICATE_NAME", f"pools[{i}].name", name=name, first=seen_names[name]))
        elif name:
            seen_names[name] = i
        acc = get_accelerator(pool.get("accelerator"))
        if acc is None and "accelerator" in pool:
            out.append(
                make(
                    "CAT_UNKNOWN_ACCELERATOR",
                    f"pools[{i}].accelerator",
                    keys=", ".join(ACCELERATORS),
                    found=show(pool["accelerator"]),
                )
            )
        topo = get_topology(pool.get("topology"))
        gpus = pool.get("gpus_per_node")
        if topo is not None and topo.gpus is not None and gpus is not None and gpus != topo.gpus:
            out.append(
                make(
                    "CAT_TOPOLOGY_GPUS", f"pools[{i}].gpus_per_node", expected=topo.gpus, topology=topo.name, found=gpus
                )
            )
        if acc is not None and topo is not None:
            out.extend(_topology_fit(i, acc, topo))
        out.extend(_sharing(i, pool, acc))
        pools.append(Pool(i, pool, acc, topo))
    return out, tuple(pools)


def _topology_fit(i: int, acc: Accelerator, topo: Topology) -> list[dict]:
    out = []
    field = f"pools[{i}].topology"
    if acc.form_factor not in topo.form_factors:
        out.append(
            make(
                "CAT_TOPOLOGY_FORM_FACTOR",
                field,
                variant="form_factor",
                form_factors="/".join(topo.form_factors),
                topology=topo.name,
                acc=acc.key,
                form_factor=acc.form_factor,
            )
        )
    elif topo.name == "pcie-nvlink-bridge" and acc.nvlink_generation is None:
        out.append(make("CAT_TOPOLOGY_NVLINK", field, acc=acc.key))
    if topo.name == "nvl72" and acc.key != "gb200-nvl72":
        out.append(make("CAT_TOPOLOGY_FORM_FACTOR", field, variant="nvl72", acc=acc.key))
    return out


def _sharing(i: int, pool: dict, acc: Accelerator | None) -> list[dict]:
    out = []
    sharing = pool.get("sharing")
    cfg = pool.get("sharing_config") or {}
    base = f"pools[{i}].sharing_config"
    if sharing == "mig":
        if acc is not None and not acc.mig:
            out.append(make("CAT_MIG_UNSUPPORTED", f"pools[{i}].sharing", acc=acc.key))
        elif not cfg.get("mig_profile"):
            example = acc.mig_profiles[0] if acc else "1g.10gb"
            out.append(make("CAT_MIG_PROFILE_MISSING", f"{base}.mig_profile", example=example))
        elif acc is not None and cfg["mig_profile"] not in acc.mig_profiles:
            out.append(
                make(
                    "CAT_MIG_PROFILE_UNKNOWN",
                    f"{base}.mig_profile",
                    acc=acc.key,
                    profiles=", ".join(acc.mig_profiles),
                    found=cfg["mig_profile"],
                )
            )
    elif cfg.get("mig_profile"):
        out.append(
            make("CAT_SHARING_CONFIG_UNUSED", f"{base}.mig_profile", key="mig_profile", mode="mig", sharing=sharing)
        )
    if sharing == "time-slicing":
        replicas = cfg.get("replicas")
        if replicas is None or replicas < 2:
            out.append(make("CAT_TIMESLICING_REPLICAS", f"{base}.replicas", found=show(replicas)))
    elif cfg.get("replicas") is not None:
        out.append(
            make("CAT_SHARING_CONFIG_UNUSED", f"{base}.replicas", key="replicas", mode="time-slicing", sharing=sharing)
        )
    return out


__all__ = ["Pool", "check_catalogue", "pool_label"]
