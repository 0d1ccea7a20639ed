# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The drain circuit breaker: how many nodes of a pool one run may take out of service.

Acceptance drains (Slurm) or cordons (Kubernetes) the nodes it finds bad; remediation drains the
drifted nodes it repairs. When many nodes of one pool look bad at once, the nodes are rarely the
fault: a floor set too high, a wrong pin in the brief or a fabric problem (a switch, the subnet
manager) makes every node fail, and draining them all would empty the pool. So one run may leave
at most ``ceil(share * pool size)`` nodes of a pool out of service (default share 25 %: one node
of a two-node pool may still be drained), never the last node of a pool still in service, and
when a pool would go past that, the run drains none at all. An operator who has checked may pass
``force``. NVIDIA NVSentinel's fault quarantine has the same safeguard for Kubernetes (by default
at most 50 % of the cluster's nodes cordoned within 5 minutes).

Nodes already out of service before the run (drained, down, not responding, cordoned) count
against the share: they are capacity the pool has already lost. Draining a node that is already
out takes nothing more away, so it alone never trips the breaker.

Pure functions on plain lists and dicts; :func:`judge` is what the ``drain_breaker`` filter calls.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import WARNING, violation

DEFAULT_SHARE = 0.25
TRIPPED = "DRAIN_BREAKER_TRIPPED"
FORCED = "DRAIN_BREAKER_FORCED"

# sinfo's compact states (%t) in which a node takes or runs jobs. Anything else (drain, drng, down,
# fail, maint, inval, unk, ...) is out of service, and so is any state with the "*" suffix (the
# node does not respond) or "$" (in a maintenance reservation).
_SLURM_IN_SERVICE = frozenset(
    {"idle", "mix", "mixed", "alloc", "allocated", "comp", "completing", "resv", "reserved", "plnd", "planned"}
)
_SLURM_STATE = re.compile(r"^([a-z_]+)([^a-z_]*)$")

# What each caller tells the operator to suspect, and how to override.
_HINTS = {
    "acceptance": (
        "the fault is probably the floor, the brief or the fabric rather than the nodes: check the brief's "
        "acceptance floors and the fabric (switches, cables, the subnet manager) first"
    ),
    "remediation": (
        "the fault is probably the brief (its pins) or the drift check rather than the nodes: check the pins "
        "first; a planned upgrade of the whole pool is such a case"
    ),
}


class BreakerError(ValueError):
    """The inputs cannot be judged (the filter turns this into AnsibleFilterError)."""


def drain_limit(size: int, share: float) -> int:
    """How many of a pool's ``size`` nodes may be out of service: ``share`` of them, rounded up.

    The product is rounded to 9 decimals first, so a share that is exact on paper stays exact
    (0.07 * 100 is 7.000000000000001 in floating point: the limit is 7, not 8).
    """
    if size < 0:
        raise BreakerError(f"pool size must be >= 0, found {size}")
    return math.ceil(round(float(share) * size, 9))


def slurm_out_of_service(lines: Iterable[str]) -> list[str]:
    """The nodes out of service in ``sinfo --noheader --Node --format=%N|%t`` output (one line per
    node and partition), in first-seen order."""
    out: list[str] = []
    for line in lines or []:
        name, sep, state = str(line).strip().partition("|")
        name = name.strip()
        if not sep or not name:
            continue
        match = _SLURM_STATE.fullmatch(state.strip().lower())
        in_service = bool(match) and match.group(1) in _SLURM_IN_SERVICE and not set("*$") & set(match.group(2))
        if not in_service and name not in out:
            out.append(name)
    return out


def k8s_out_of_service(nodes: Iterable[dict]) -> list[str]:
    """The nodes out of service in ``kubectl get nodes -o json``'s ``items``: cordoned
    (``spec.unschedulable``) or not Ready."""
    out: list[str] = []
    for node in nodes or []:
        if not isinstance(node, dict):
            continue
        name = (node.get("metadata") or {}).get("name")
        if not name:
            continue
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        conditions = (node.get("status") or {}).get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict))
        if (cordoned or not ready) and name not in out:
            out.append(name)
    return out


def _names(value, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise BreakerError(f"{what} must be a list of node names, found {type(value).__name__}")
    return list(dict.fromkeys(str(v) for v in value))


def judge(
    pools: Mapping[str, Iterable[str]],
    to_drain: Iterable[str],
    out_of_service: Iterable[str] = (),
    *,
    share: float = DEFAULT_SHARE,
    force: bool = False,
) -> dict:
    """Whether a run may drain ``to_drain``.

    ``pools``: pool name -> every node of the pool (the inventory's group, not only the nodes this
    run reached). ``out_of_service``: nodes already drained, down or cordoned before the run (any
    pool; others are ignored). ``share``: 0..1. Returns::

        {"tripped": bool,   # some pool would go past its limit (or lose its last node in service)
         "allowed": bool,   # the drains may go ahead: not tripped, or forced
         "forced": bool,    # tripped, and force overrode it
         "share": float, "to_drain": [...],
         "pools": [{"pool", "size", "limit", "out_of_service", "to_drain", "new", "out_after",
                    "in_service_after", "over_share", "last_node", "tripped"}, ...]}

    Only pools with a node to drain are listed. A node in no pool is an error: its pool's size,
    and so its limit, is unknown.
    """
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= float(share) <= 1:
        raise BreakerError(f"share must be a number from 0 to 1 (0.25 = 25 %), found {share!r}")
    if not isinstance(pools, Mapping):
        raise BreakerError(f"pools must map each pool's name to its nodes, found {type(pools).__name__}")
    members = {str(name): _names(nodes, f"pools[{name!r}]") for name, nodes in pools.items()}
    # Sorted: the nodes come from groups Ansible builds in the order hosts answer, and the message
    # and the report name them the same way every run.
    wanted = sorted(_names(to_drain, "to_drain"))
    already = set(_names(out_of_service, "out_of_service"))
    orphans = [n for n in wanted if not any(n in nodes for nodes in members.values())]
    if orphans:
        raise BreakerError(
            f"{', '.join(orphans)}: in no pool of the brief, so the share of its pool cannot be judged; "
            "every node to drain must belong to a pool"
        )
    rows = []
    for name, nodes in members.items():
        mine = [n for n in wanted if n in nodes]
        if not mine:
            continue
        size = len(nodes)
        limit = drain_limit(size, share)
        out_before = [n for n in nodes if n in already]
        new = [n for n in mine if n not in already]
        out_after = len(set(out_before) | set(mine))
        over_share = out_after > limit
        last_node = out_after >= size
        rows.append(
            {
                "pool": name,
                "size": size,
                "limit": limit,
                "out_of_service": out_before,
                "to_drain": mine,
                "new": new,
                "out_after": out_after,
                "in_service_after": size - out_after,
                "over_share": over_share,
                "last_node": last_node,
                # Draining only nodes that are out already takes nothing away.
                "tripped": bool(new) and (over_share or last_node),
            }
        )
    tripped = any(r["tripped"] for r in rows)
    return {
        "tripped": tripped,
        "allowed": not tripped or bool(force),
        "forced": tripped and bool(force),
        "share": float(share),
        "to_drain": wanted,
        "pools": rows,
    }


def _pool_text(row: dict, share: float) -> str:
    size, limit = row["size"], row["limit"]
    text = f"pool {row['pool']}: draining {', '.join(row['new'])}"
    before = row["out_of_service"]
    if before:
        text += f" (with {', '.join(before)} already out of service)"
    text += f" would leave {row['out_after']} of its {size} nodes out of service"
    why = []
    if row["over_share"]:
        why.append(f"more than the limit of {limit} ({share * 100:g} % of {size}, rounded up)")
    if row["last_node"]:
        why.append("and none in service" if why else "none in service")
    return text + (", " + " ".join(why) if why else "")


def message(decision: dict, source: str = "acceptance", force_hint: str = "force") -> str:
    """The operator's message for a tripped (or forced) breaker: the nodes, the limit, the likely
    fault and how to go on. ``source``: ``acceptance`` or ``remediation``; ``force_hint``: how to
    force (e.g. ``--force (acceptance_drain_force=true)``)."""
    rows = [r for r in decision.get("pools") or [] if r.get("tripped")]
    share = float(decision.get("share", DEFAULT_SHARE))
    nodes = [n for r in rows for n in r["new"]]
    parts = "; ".join(_pool_text(r, share) for r in rows)
    hint = _HINTS.get(source, _HINTS["acceptance"])
    if decision.get("forced"):
        return (
            f"drain breaker overridden by force: {parts}. Drained anyway: {', '.join(nodes)}. When so much of a "
            f"pool looks bad at once, {hint}"
        )
    return (
        f"drain breaker tripped: {parts}. None of the {len(decision.get('to_drain') or [])} node(s) to drain "
        f"({', '.join(decision.get('to_drain') or [])}) was drained. When so much of a pool looks bad at once, {hint}; "
        f"if the nodes really are bad, drain them by hand or run again with {force_hint}"
    )


def violations(decision: dict, *, field: str, source: str = "acceptance", force_hint: str = "force") -> list[dict]:
    """``[]`` when the breaker did not trip; one error when it did; one warning when force overrode it."""
    if not decision.get("tripped"):
        return []
    text = message(decision, source=source, force_hint=force_hint)
    if decision.get("forced"):
        return [violation(FORCED, field, text, severity=WARNING)]
    return [violation(TRIPPED, field, text)]


__all__ = [
    "DEFAULT_SHARE",
    "FORCED",
    "TRIPPED",
    "BreakerError",
    "drain_limit",
    "judge",
    "k8s_out_of_service",
    "message",
    "slurm_out_of_service",
    "violations",
]
