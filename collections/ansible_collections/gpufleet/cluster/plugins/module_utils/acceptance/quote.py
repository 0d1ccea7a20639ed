# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The provider's quote beside the brief and the measurement, per pool (the acceptance report's "Quote").

The brief may carry what the provider quoted: ``quote:`` at the top level (every pool) and
``pools[].quote`` (that pool; its fields win). For each pool with a quote, :func:`compare` lines up
every quoted field with what the brief says and what this acceptance measured, and names each
difference as a ``QUOTE_DIFFERS`` violation: a warning, or an error when the brief's
``acceptance.quote_differs`` is ``fail``.

What "measured" is, per field (``None`` when this acceptance has nothing to show):

* ``accelerator``, ``gpus_per_node``: the node records' GPU model and count (every value seen).
* ``nics_per_node``, ``nic_speed_gbps``: the node records' ``nics`` / ``nic_speed_gbps`` when they
  carry them; the hardware gate checks the brief's values on each node in any case.
* ``fabric``: the transport NCCL used in the pool's runs (NCCL_DEBUG evidence): IB verbs over
  InfiniBand ports ``infiniband``, over RoCE ports ``roce``, sockets ``ethernet``.
* ``topology``: not measured here (the hardware gate checks NVLink against the brief).
* ``single_node_busbw_gbps``: the median of the pool's single-node runs (busbw at the largest size);
  ``multi_node_busbw_gbps``: the slowest run across the pool's nodes.

A difference is: a quoted value the brief contradicts; a measured value other than the quoted one;
a measured busbw more than ``acceptance.quote_busbw_tolerance`` (default 5 %) below the quoted one;
a brief floor above the quoted busbw (the brief asks more than was bought).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.catalogue import get_accelerator
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, violation

FIELDS = (
    "accelerator",
    "gpus_per_node",
    "topology",
    "nics_per_node",
    "nic_speed_gbps",
    "fabric",
    "single_node_busbw_gbps",
    "multi_node_busbw_gbps",
)
BUSBW_FIELDS = ("single_node_busbw_gbps", "multi_node_busbw_gbps")
DEFAULT_TOLERANCE = 0.05


class QuoteError(ValueError):
    """The brief's quote or the report's inputs are not what the comparison needs."""


def pool_quote(brief: dict, pool: dict) -> dict | None:
    """The quote that applies to ``pool``: the top-level one, overridden field by field by the pool's."""
    top = brief.get("quote") or {}
    own = pool.get("quote") or {}
    for where, value in (("quote", top), (f"pools[{pool.get('name')}].quote", own)):
        if not isinstance(value, dict):
            raise QuoteError(f"{where}: expected a mapping of quoted fields, found {type(value).__name__} {value!r}")
    merged = {**top, **own}
    return merged or None


def _accelerator_names(value) -> set[str]:
    """A catalogue key or an nvidia-smi name -> every name it is known by (lower case)."""
    text = str(value).strip()
    acc = get_accelerator(text)
    if acc is None:
        return {text.lower()}
    return {n.lower() for n in (acc.key, acc.nvidia_smi_name, *acc.nvidia_smi_aliases)}


def _same(field: str, a, b) -> bool:
    if field == "accelerator":
        return bool(_accelerator_names(a) & _accelerator_names(b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    return str(a).strip().lower() == str(b).strip().lower()


def _brief_side(brief: dict, pool: dict) -> dict:
    fabric = (brief.get("networks") or {}).get("fabric") or {}
    top = brief.get("acceptance") or {}
    own = pool.get("acceptance") or {}
    return {
        "accelerator": pool.get("accelerator"),
        "gpus_per_node": pool.get("gpus_per_node"),
        "topology": pool.get("topology"),
        "nics_per_node": pool.get("nics_per_node"),
        "nic_speed_gbps": pool.get("nic_speed_gbps") or fabric.get("link_speed_gbps"),
        "fabric": fabric.get("type"),
        "single_node_busbw_gbps": own.get("single_node_busbw_gbps", top.get("single_node_busbw_gbps")),
        "multi_node_busbw_gbps": own.get("multi_node_busbw_gbps", top.get("multi_node_busbw_gbps")),
    }


def _fabric_of(evidence: dict) -> str | None:
    if evidence.get("socket_fallback") or evidence.get("network") == "Socket":
        return "ethernet"
    layers = set(evidence.get("link_layers") or [])
    if layers == {"RoCE"}:
        return "roce"
    if layers == {"IB"}:
        return "infiniband"
    return None


def _values(values: list) -> object:
    """One value when every node agrees, the sorted distinct values when they do not, None when none."""
    seen = sorted({v for v in values if v not in (None, "")}, key=str)
    if not seen:
        return None
    return seen[0] if len(seen) == 1 else seen


def _measured_side(pool_name: str, nodes: Sequence[dict], runs: Sequence[dict], debug: Sequence[dict]) -> dict:
    mine = [n for n in nodes if n.get("pool") == pool_name]
    hosts = {n.get("host") for n in mine}
    # The quote is of all_reduce: runs of other collectives (acceptance/collectives.py) are left out.
    runs = [r for r in runs if r.get("collective", "all_reduce") == "all_reduce"]
    singles = [
        r.get("busbw_largest")
        for r in runs
        if r.get("scope") == "single-node" and r.get("host") in hosts and r.get("busbw_largest") is not None
    ]
    multis = [
        r.get("busbw_largest")
        for r in runs
        if r.get("scope") == "multi-node"
        and r.get("busbw_largest") is not None
        and set((r.get("run") or {}).get("hosts") or []) & hosts
        and set((r.get("run") or {}).get("hosts") or []) <= hosts
    ]
    fabrics = [_fabric_of(d) for d in debug if set(d.get("hosts") or []) & hosts and (d.get("nnodes") or 0) > 1]
    return {
        "accelerator": _values([n.get("gpu_model") for n in mine]),
        "gpus_per_node": _values([n.get("gpu_count") for n in mine]),
        "topology": None,
        "nics_per_node": _values([n.get("nics") for n in mine]),
        "nic_speed_gbps": _values([n.get("nic_speed_gbps") for n in mine]),
        "fabric": _values(fabrics),
        "single_node_busbw_gbps": round(statistics.median(singles), 1) if singles else None,
        "multi_node_busbw_gbps": min(multis) if multis else None,
    }


def _differences(field: str, quoted, in_brief, measured, tolerance: float) -> list[str]:
    found = []
    if field in BUSBW_FIELDS:
        if in_brief is not None and float(in_brief) > float(quoted):
            found.append(f"the brief's floor {in_brief} GB/s is above the quoted {quoted} GB/s")
        if measured is not None and float(measured) < float(quoted) * (1 - tolerance):
            found.append(
                f"measured {measured} GB/s is more than {tolerance:.0%} below the quoted {quoted} GB/s "
                f"({float(measured) / float(quoted) - 1:+.1%})"
            )
        return found
    if in_brief is not None and not _same(field, quoted, in_brief):
        found.append(f"the brief says {in_brief}, the quote {quoted}")
    if measured is not None:
        seen = measured if isinstance(measured, list) else [measured]
        odd = [m for m in seen if not _same(field, quoted, m)]
        if odd:
            found.append(f"measured {', '.join(str(m) for m in seen)}, quoted {quoted}")
    return found


def compare(
    brief: dict,
    *,
    nodes: Sequence[dict] = (),
    runs: Sequence[dict] = (),
    debug: Sequence[dict] = (),
) -> tuple[list[dict], list[dict]]:
    """The quote section (one entry per pool with a quote) and its ``QUOTE_DIFFERS`` violations. Pure.

    ``nodes``: the report's node records (``host``, ``pool``, ``gpu_model``, ``gpu_count``, optional
    ``nics`` / ``nic_speed_gbps``); ``runs``: the report's run entries (``scope``, ``host``,
    ``busbw_largest``, ``run.hosts``); ``debug``: the NCCL_DEBUG evidence (``hosts``, ``nnodes``,
    ``network``, ``link_layers``, ``socket_fallback``).
    """
    if not isinstance(brief, dict):
        raise QuoteError(f"brief: expected the topology brief (a mapping), found {type(brief).__name__}")
    acceptance = brief.get("acceptance") or {}
    mode = acceptance.get("quote_differs", "warn")
    if mode not in ("warn", "fail"):
        raise QuoteError(f"acceptance.quote_differs: expected warn or fail, found {mode!r}")
    tolerance = acceptance.get("quote_busbw_tolerance", DEFAULT_TOLERANCE)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance <= 1:
        raise QuoteError(f"acceptance.quote_busbw_tolerance: expected a share from 0 to 1, found {tolerance!r}")
    severity = ERROR if mode == "fail" else WARNING
    section: list[dict] = []
    found: list[dict] = []
    for pool in brief.get("pools") or []:
        if not isinstance(pool, dict):
            continue
        quote = pool_quote(brief, pool)
        if not quote:
            continue
        name = pool.get("name")
        in_brief = _brief_side(brief, pool)
        measured = _measured_side(name, nodes, runs, debug)
        rows = []
        for field in FIELDS:
            if quote.get(field) is None:
                continue
            diffs = _differences(field, quote[field], in_brief[field], measured[field], float(tolerance))
            rows.append(
                {
                    "field": field,
                    "quote": quote[field],
                    "brief": in_brief[field],
                    "measured": measured[field],
                    "differences": diffs,
                }
            )
            for text in diffs:
                found.append(
                    violation(
                        "QUOTE_DIFFERS",
                        f"pools[{name}].quote.{field}",
                        f"pool {name}: {field}: {text}; settle it with the provider or correct the brief "
                        f"(acceptance.quote_differs: {mode})",
                        severity=severity,
                    )
                )
        section.append({"pool": name, "source": quote.get("source"), "rows": rows})
    return section, found
