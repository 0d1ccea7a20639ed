# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phases: the acceptance floors against what the hardware can reach, and the acceptance launcher.

``check_acceptance(brief, pools)`` needs the catalogue's pools (accelerator, topology, NICs);
``check_launcher(brief, hostvars, controllers)`` needs the controllers (the groups phase's result):
the launcher is read as the first controller sees it. ``pool_floors``, ``multi_node_ceiling_gbps``
and ``size_bytes`` are also what the acceptance stage itself uses (through ``preflight.gate``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import link_errors
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.catalogue import (
    Accelerator,
    Topology,
    default_single_node_floor_gbps,
    single_node_ceiling_gbps,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.addresses import vars_of
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.catalogue import Pool
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make

LAUNCHERS = {"srun": "slurm", "mpirun": None, "mpijob": "kubernetes"}


def floor_limit_violations(
    pool: Pool, speed: Any, single: Any, single_field: str, multi: Any, multi_field: str
) -> list[dict]:
    """A busbw floor above what the hardware can reach: ``single`` against the accelerator's NVLink figure
    in one node, ``multi`` against the pool's NICs x link speed / 8 across nodes. nccl-tests normalises
    every collective's busbw to the link bandwidth, so all_reduce's, all_gather's and alltoall's floors
    (acceptance/collectives.py) share these limits; each violation names its own field."""
    acc, topo, spec = pool.acc, pool.topo, pool.spec
    out: list[dict] = []
    ceiling = single_node_ceiling_gbps(acc, topo)
    if single is not None and spec.get("gpus_per_node", 0) >= 2 and single > ceiling:
        out.append(
            make(
                "ACCEPT_SINGLE_NODE_ABOVE_LIMIT",
                single_field,
                ceiling=ceiling,
                acc=acc.key,
                topology=topo.name if topo else "this topology",
                pool=pool.label,
                floor=single,
            )
        )
    nics = spec.get("nics_per_node", 0)
    m_ceiling = multi_node_ceiling_gbps(nics, speed, acc, topo)
    if multi is not None and m_ceiling is not None and multi > m_ceiling:
        how = f"{nics} NICs x {speed:g} Gb/s / 8" if nics and speed else "no fabric NICs"
        out.append(
            make(
                "ACCEPT_MULTI_NODE_ABOVE_LIMIT",
                multi_field,
                ceiling=m_ceiling,
                how=how,
                pool=pool.label,
                floor=multi,
            )
        )
    return out


def check_acceptance(brief: dict, pools: Iterable[Pool]) -> list[dict]:
    out: list[dict] = []
    acc_cfg = brief["acceptance"]
    speed = (brief["networks"].get("fabric") or {}).get("link_speed_gbps")
    max_wrong = acc_cfg.get("max_wrong", 0)
    if max_wrong and not acc_cfg.get("max_wrong_waived"):
        out.append(make("ACCEPT_MAX_WRONG", "acceptance.max_wrong", max_wrong=max_wrong))
    elif max_wrong:
        out.append(make("ACCEPT_MAX_WRONG_WAIVED", "acceptance.max_wrong", max_wrong=max_wrong))
    lo, hi = size_bytes(acc_cfg.get("min_bytes")), size_bytes(acc_cfg.get("max_bytes"))
    if lo is not None and hi is not None and lo > hi:
        out.append(
            make(
                "ACCEPT_SIZE_RANGE",
                "acceptance.min_bytes",
                max_bytes=acc_cfg.get("max_bytes"),
                min_bytes=acc_cfg.get("min_bytes"),
            )
        )
    out += check_link_errors(acc_cfg)
    out.extend(check_rdma_pairs(brief))
    for pool in pools:
        acc, topo, spec = pool.acc, pool.topo, pool.spec
        if acc is None:
            continue
        floors = pool_floors(brief, spec, acc, topo, pool.index)
        out += floor_limit_violations(
            pool,
            speed,
            floors["single_node_busbw_gbps"],
            floors["single_node_field"],
            floors["multi_node_busbw_gbps"],
            floors["multi_node_field"],
        )
    return out


def check_link_errors(acc_cfg: Mapping) -> list[dict]:
    """Each tolerated growth of ``acceptance.link_errors.max_growth`` against the physical limit: the most its
    counter can count (the InfiniBand PortCounters fields are 4 to 16 bits wide and saturate)."""
    out: list[dict] = []
    growth = (acc_cfg.get("link_errors") or {}).get("max_growth") or {}
    for counter, value in sorted(growth.items()):
        width = link_errors.WIDTHS.get(counter)
        if width is None or not isinstance(value, int) or isinstance(value, bool):
            continue
        top = link_errors.saturation(counter)
        if value >= top:
            out.append(
                make(
                    "ACCEPT_LINK_ERRORS_ABOVE_LIMIT",
                    f"acceptance.link_errors.max_growth.{counter}",
                    top=top,
                    width=width,
                    counter=counter,
                    value=value,
                )
            )
    return out


# Above this estimate of its wall time a pool's `all` schedule is warned about. The first controller's
# dispatch is two calls per node whatever the mode (each node runs its own agenda of rounds, roles/
# acceptance/tasks/rdma_pairs_agendas.yml); the rounds take the time: N-1 of them (N for an odd N),
# each the brief's duration plus about 3 s of QP exchange and CUDA setup (docs/nccl-acceptance.md,
# "Duration on real hardware"): 256 nodes, 255 rounds of 8 s, about 34 minutes.
RDMA_PAIRS_ALL_MAX_SECONDS = 30 * 60
RDMA_PAIRS_ROUND_SETUP_SECONDS = 3


def rdma_pairs_all_seconds(nodes: int, rule: Mapping) -> int:
    """The estimated wall time of the ``all`` schedule on ``nodes`` nodes, in seconds."""
    rounds = nodes - 1 if nodes % 2 == 0 else nodes
    run = 1 if rule.get("iters") else int(rule.get("duration") or 5)  # -n 5000 x 1 MiB: well under a second
    return max(rounds, 0) * (run + RDMA_PAIRS_ROUND_SETUP_SECONDS)


def check_rdma_pairs_scale(brief: dict, members: Iterable) -> list[dict]:
    """``ACCEPT_RDMA_PAIRS_ALL_LONG`` for each pool whose inventory group is large enough that the ``all``
    schedule's rounds would take more than RDMA_PAIRS_ALL_MAX_SECONDS (``members``: the groups'
    PoolHosts, preflight/groups.py)."""
    rule = (brief.get("acceptance") or {}).get("rdma_pairs") or {}
    if not isinstance(rule, Mapping) or rule.get("mode") != "all":
        return []
    out: list[dict] = []
    for member in members:
        n = len(member.hosts)
        seconds = rdma_pairs_all_seconds(n, rule)
        if seconds > RDMA_PAIRS_ALL_MAX_SECONDS:
            out.append(
                make(
                    "ACCEPT_RDMA_PAIRS_ALL_LONG",
                    "acceptance.rdma_pairs.mode",
                    limit=RDMA_PAIRS_ALL_MAX_SECONDS // 60,
                    rounds=n - 1 if n % 2 == 0 else n,
                    per_round=seconds // max(n - 1 if n % 2 == 0 else n, 1),
                    minutes=round(seconds / 60),
                    nodes=n,
                    pool=member.pool.label,
                )
            )
    return out


def check_rdma_pairs(brief: dict) -> list[dict]:
    """``acceptance.rdma_pairs``: a floor the port can reach, on a fabric ib_write_bw can run on.

    ``min_fraction`` is a share of the port's line rate, in (0, 1]; ``min_gbps`` is GB/s (like every
    acceptance floor) and at most ``link_speed_gbps / 8``; ib_write_bw reports Gb/s (x 8).
    """
    rule = (brief.get("acceptance") or {}).get("rdma_pairs") or {}
    if not isinstance(rule, Mapping) or not rule.get("mode"):
        return []
    field = "acceptance.rdma_pairs"
    fabric = brief["networks"].get("fabric") or {}
    speed = fabric.get("link_speed_gbps")
    out: list[dict] = []
    if str(fabric.get("type") or "none").lower() not in ("infiniband", "roce") or not speed:
        found = f"type {fabric.get('type') or 'none'}" + ("" if speed else ", no link_speed_gbps")
        out.append(make("ACCEPT_RDMA_PAIRS_FLOOR", f"{field}.mode", variant="no_fabric", fabric=found))
    fraction, absolute = rule.get("min_fraction"), rule.get("min_gbps")
    if fraction is not None and absolute is not None:
        out.append(
            make("ACCEPT_RDMA_PAIRS_FLOOR", f"{field}.min_gbps", variant="both", fraction=fraction, found=absolute)
        )
    if fraction is not None and not 0 < fraction <= 1:
        out.append(make("ACCEPT_RDMA_PAIRS_FLOOR", f"{field}.min_fraction", variant="fraction", found=fraction))
    if absolute is not None and speed and absolute > speed / 8:
        out.append(
            make(
                "ACCEPT_RDMA_PAIRS_FLOOR",
                f"{field}.min_gbps",
                variant="absolute",
                ceiling=speed / 8,
                speed=speed,
                found=absolute,
                gbit=absolute * 8,
            )
        )
    return out


def literal(value: Any) -> bool:
    """A value the inventory or -e gives as it is: not a template preflight cannot resolve."""
    return isinstance(value, str) and "{{" not in value and "{%" not in value


def check_launcher(brief: dict, hostvars: Mapping[str, Any], controllers: Sequence[str]) -> list[dict]:
    """The acceptance launcher as the first controller (where acceptance launches the all-node runs)
    sees it in the inventory or -e: one of srun / mpirun / mpijob, srun only with Slurm and mpijob
    only with Kubernetes, and mpijob with the production image it runs. Unset leaves the role's
    default: srun on Slurm, mpijob on Kubernetes (the MPI Operator is installed there), mpirun
    otherwise; a template is not resolved here and is not checked.

    The image is acceptance_container_image where the inventory or -e sets it, else, on a
    Kubernetes brief (the role's default there), the brief's acceptance.workload.image: the field
    named when it is missing is the one to set (the host's variable when it is set but empty or
    the brief is not Kubernetes, else the brief's field, host-free)."""
    if not controllers:
        return []
    out: list[dict] = []
    host = controllers[0]
    hv = vars_of(hostvars, host)
    plane = brief["cluster"].get("control_plane")
    launcher = hv.get("acceptance_launcher")
    if launcher is None:
        launcher = "mpijob" if plane == "kubernetes" else None
    if launcher is None or not literal(launcher):
        return out
    if launcher not in LAUNCHERS:
        out.append(
            make(
                "ACCEPT_LAUNCHER_INVALID",
                "acceptance_launcher",
                host=host,
                launchers=", ".join(LAUNCHERS),
                launcher=launcher,
            )
        )
        return out
    needs = LAUNCHERS[launcher]
    fits = "mpirun or mpijob" if plane == "kubernetes" else "srun or mpirun"
    if needs is not None and plane != needs:
        out.append(
            make(
                "ACCEPT_LAUNCHER_PLANE",
                "acceptance_launcher",
                host=host,
                fits=fits,
                plane=plane,
                launcher=launcher,
                needs=needs,
            )
        )
    if launcher != "mpijob":
        return out
    image = hv.get("acceptance_container_image")
    if image is not None or plane != "kubernetes":
        if image is None or (literal(image) and not image.strip()):
            found = "none" if image is None else "an empty string"
            out.append(
                make("ACCEPT_IMAGE_MISSING", "acceptance_container_image", host=host, variant="host", found=found)
            )
        return out
    workload = (brief.get("acceptance") or {}).get("workload") or {}
    brief_image = workload.get("image") if isinstance(workload, dict) else None
    if not isinstance(brief_image, str) or not brief_image.strip():
        default = " (the default on cluster.control_plane kubernetes)" if hv.get("acceptance_launcher") is None else ""
        found = "none" if brief_image is None else repr(brief_image)
        out.append(
            make("ACCEPT_IMAGE_MISSING", "acceptance.workload.image", variant="brief", default=default, found=found)
        )
    return out


def multi_node_ceiling_gbps(
    nics: int, speed: float | None, acc: Accelerator | None, topo: Topology | None
) -> float | None:
    """nics x link speed / 8 (GB/s); an NVL72 rack also spans nodes over NVLink (MNNVL)."""
    if not nics or not speed:
        return None
    ceiling = nics * speed / 8
    if topo is not None and topo.name == "nvl72" and acc is not None:
        ceiling = max(ceiling, acc.nvlink_busbw_gbps)
    return ceiling


def pool_floors(brief: dict, pool: dict, acc: Accelerator | None, topo: Topology | None, index: int = 0) -> dict:
    """Effective floors of a pool: the pool's acceptance, else the brief's, else derived.

    Derived single-node floor: the catalogue's expected figure for the topology. Derived multi-node
    floor: 85 % of nics x link speed / 8, never above the single-node floor; none without NICs.
    """
    fabric = (brief.get("networks") or {}).get("fabric") or {}
    own, top = pool.get("acceptance") or {}, brief.get("acceptance") or {}
    res: dict[str, Any] = {}
    for key in ("single_node_busbw_gbps", "multi_node_busbw_gbps"):
        short = key.split("_busbw")[0]
        if own.get(key) is not None:
            res[key], res[f"{short}_field"], res[f"{short}_source"] = (
                own[key],
                f"pools[{index}].acceptance.{key}",
                "pool",
            )
        elif top.get(key) is not None:
            res[key], res[f"{short}_field"], res[f"{short}_source"] = top[key], f"acceptance.{key}", "brief"
        else:
            res[key], res[f"{short}_field"], res[f"{short}_source"] = None, f"acceptance.{key}", "catalogue"
    if res["single_node_busbw_gbps"] is None and acc is not None and pool.get("gpus_per_node", 0) >= 2:
        res["single_node_busbw_gbps"] = default_single_node_floor_gbps(acc, topo)
    if res["multi_node_busbw_gbps"] is None and acc is not None:
        ceiling = multi_node_ceiling_gbps(pool.get("nics_per_node", 0), fabric.get("link_speed_gbps"), acc, topo)
        if ceiling is not None:
            derived = round(ceiling * 0.85, 1)
            if res["single_node_busbw_gbps"]:
                derived = min(derived, res["single_node_busbw_gbps"])
            res["multi_node_busbw_gbps"] = derived
    return res


_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def size_bytes(value: Any) -> int | None:
    """nccl-tests sizes: ``8G`` → 8 GiB (nccl-tests' K/M/G are powers of 1024)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?) *([KMGT]?)(?:I?B)?", value.strip(" ").upper())
    if not m:
        return None
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])


__all__ = [
    "LAUNCHERS",
    "check_acceptance",
    "check_launcher",
    "check_rdma_pairs",
    "check_rdma_pairs_scale",
    "floor_limit_violations",
    "literal",
    "multi_node_ceiling_gbps",
    "pool_floors",
    "size_bytes",
]
