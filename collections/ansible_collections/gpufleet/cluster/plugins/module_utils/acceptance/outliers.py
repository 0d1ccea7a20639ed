# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Nodes judged against their own pool: the one above the floor that is slower than its peers.

A floor catches a broken node; it misses the node 8 % slower than its seven neighbours, which every
synchronous training step then waits for. :func:`judge` compares each node's figures with the other
nodes of its pool, with a robust rule (docs/nccl-acceptance.md, "Outliers"):

* the pool's median ``m`` and median absolute deviation ``MAD = median(|x - m|)``;
* a node is an outlier when it is worse than ``m`` by at least ``min_deviation`` of ``m`` (default
  5 %) **and** its modified z-score ``0.6745 x |x - m| / MAD`` is at least ``mad_threshold`` (default
  3.5, Iglewicz and Hoaglin's cut-off); a MAD of 0 (all others equal) passes the second test.
  The first test keeps a pool of near-identical nodes, whose MAD is tiny, from naming a node 1 %
  off; the second keeps a noisy pool from naming its ordinary spread.
* a pool smaller than ``min_pool_size`` (default 4) has no meaningful MAD: each node is compared
  with the median of the *other* nodes by the first test alone, and an outlier there is only ever a
  warning (with two nodes, which one is odd cannot be told).
* optionally, per metric, ``min_abs``: a node must also be worse than ``m`` by at least that much in
  the metric's own unit. A share of a small figure can be the measurement's own noise: fio on a
  loaded container disk of 1 GB/s spreads by 0.1 GB/s, 10 %, with nothing wrong; ``min_abs`` is that
  noise floor, measured at the site, and leaves the share and z-score tests as they are. None by
  default.

Only the worse side counts: lower busbw or bandwidth, longer restore. Metrics: single-node NCCL
busbw at the largest size (``NCCL_OUTLIER``); the node's GPU-to-GPU copies from nvbandwidth, its
weakest pair and the sum of its pairs (``P2P_OUTLIER``: its own code, as the fix is the node's
NVLinks or its GPUs' PCIe paths, not the NCCL run); storage scratch / shared write and read GB/s and
the checkpoint restore time (``STORAGE_OUTLIER``). Severity: the brief's ``acceptance.outliers.severity``,
``warn`` (default) or ``fail``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, violation

DEFAULTS = {"severity": "warn", "min_deviation": 0.05, "mad_threshold": 3.5, "min_pool_size": 4}
# The constant that makes the MAD of normally distributed values comparable with a standard deviation.
MAD_SCALE = 0.6745

# metric -> (code, what it is, unit, higher is better)
METRICS = {
    "single_node_busbw": ("NCCL_OUTLIER", "single-node busbw", "GB/s", True),
    "latency_us": ("NCCL_OUTLIER", "single-node latency at the smallest size", "us", False),
    "p2p_min": ("P2P_OUTLIER", "weakest GPU pair's copy bandwidth (nvbandwidth)", "GB/s", True),
    "p2p_sum": ("P2P_OUTLIER", "sum of the GPU pairs' copy bandwidth (nvbandwidth)", "GB/s", True),
    "scratch_write": ("STORAGE_OUTLIER", "scratch write", "GB/s", True),
    "scratch_read": ("STORAGE_OUTLIER", "scratch read", "GB/s", True),
    "shared_write": ("STORAGE_OUTLIER", "shared file system write", "GB/s", True),
    "shared_read": ("STORAGE_OUTLIER", "shared file system read", "GB/s", True),
    "checkpoint_restore": ("STORAGE_OUTLIER", "checkpoint restore", "s", False),
}
_TODO = {
    "NCCL_OUTLIER": "check its GPUs' clocks and throttle reasons (nvidia-smi -q -d PERFORMANCE), NVLink "
    "(nvidia-smi nvlink -s) and PCIe links, or drain it before hand-over",
    "P2P_OUTLIER": "check the NVLinks of its weakest pair (nvidia-smi nvlink -s and -e, nvidia-smi topo -m) "
    "and the fabric manager, or drain it before hand-over",
    "STORAGE_OUTLIER": "check its drives (nvme smart-log), their PCIe links and its mount options",
}


class OutlierError(ValueError):
    """The brief's acceptance.outliers block is not what the rule needs."""


def settings(brief: Mapping | None) -> dict:
    """``acceptance.outliers`` with its defaults; raises OutlierError naming a bad field."""
    given = ((brief or {}).get("acceptance") or {}).get("outliers") or {}
    if not isinstance(given, Mapping):
        raise OutlierError(f"acceptance.outliers: expected a mapping, found {type(given).__name__} {given!r}")
    out = {**DEFAULTS, **given}
    min_abs = out.get("min_abs") or {}
    if not isinstance(min_abs, Mapping):
        raise OutlierError(f"acceptance.outliers.min_abs: expected a mapping of metric to a number, found {min_abs!r}")
    for metric, value in min_abs.items():
        if metric not in METRICS:
            raise OutlierError(f"acceptance.outliers.min_abs.{metric}: expected one of {', '.join(METRICS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise OutlierError(f"acceptance.outliers.min_abs.{metric}: expected a number at least 0, found {value!r}")
    out["min_abs"] = dict(min_abs)
    if out["severity"] not in ("warn", "fail"):
        raise OutlierError(f"acceptance.outliers.severity: expected warn or fail, found {out['severity']!r}")
    for key, low, high in (("min_deviation", 0, 1), ("mad_threshold", 0, None), ("min_pool_size", 2, None)):
        value = out[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low or (high and value > high):
            bounds = f"from {low} to {high}" if high else f"at least {low}"
            raise OutlierError(f"acceptance.outliers.{key}: expected a number {bounds}, found {value!r}")
    return out


def find(
    values: Mapping[str, float], higher_is_better: bool = True, rule: Mapping | None = None, min_abs: float = 0.0
) -> list[dict]:
    """The outliers among one pool's ``values`` (host -> figure), worst first; ``min_abs``: the least
    distance from the median, in the figure's unit, that can name a node.

    Each: ``{host, value, median, deviation, z, small_pool}``; ``median`` is the pool's (or, in a small
    pool, the other nodes'), ``deviation`` the share worse than it, ``z`` the modified z-score (None in a
    small pool, or when the MAD is 0).
    """
    rule = {**DEFAULTS, **(rule or {})}
    figures = {h: float(v) for h, v in values.items() if v is not None}
    if len(figures) < 2:
        return []
    small = len(figures) < int(rule["min_pool_size"])
    found = []
    for host, x in figures.items():
        others = [v for h, v in figures.items() if h != host]
        m = statistics.median(others if small else figures.values())
        if m <= 0:
            continue
        worse = (m - x) if higher_is_better else (x - m)
        deviation = worse / m
        if deviation < float(rule["min_deviation"]) or worse < float(min_abs):
            continue
        z = None
        if not small:
            mad = statistics.median(abs(v - m) for v in figures.values())
            if mad > 0:
                z = MAD_SCALE * abs(x - m) / mad
                if z < float(rule["mad_threshold"]):
                    continue
        found.append({"host": host, "value": x, "median": m, "deviation": deviation, "z": z, "small_pool": small})
    return sorted(found, key=lambda o: -o["deviation"])


def _gbps(part) -> float | None:
    return part.get("gbps") if isinstance(part, Mapping) else None


def node_figures(runs: Sequence[Mapping], storage: Sequence[Mapping]) -> dict[str, dict[str, float]]:
    """metric -> host -> figure, from the report's run entries and storage records."""
    out: dict[str, dict[str, float]] = {m: {} for m in METRICS}
    for r in runs:
        if r.get("collective", "all_reduce") != "all_reduce":
            continue  # all_gather / alltoall have floors of their own, not all_reduce's figures
        if r.get("scope") == "single-node" and r.get("host") and r.get("busbw_largest") is not None:
            # Several single-node runs of one node (a re-run): its worst counts.
            prev = out["single_node_busbw"].get(r["host"])
            value = float(r["busbw_largest"])
            out["single_node_busbw"][r["host"]] = value if prev is None else min(prev, value)
        if r.get("scope") == "single-node" and r.get("host") and r.get("latency_us") is not None:
            # The time of the smallest message: the worst (highest) of the node's runs.
            prev = out["latency_us"].get(r["host"])
            value = float(r["latency_us"])
            out["latency_us"][r["host"]] = value if prev is None else max(prev, value)
        p2p = r.get("p2p") if r.get("scope") == "single-node" and r.get("host") else None
        if isinstance(p2p, Mapping) and p2p.get("status") == "measured":
            # The node's weakest pair and its sum, from nvbandwidth (acceptance/p2p.py); the worst of its runs.
            for metric, key in (("p2p_min", "min_gbps"), ("p2p_sum", "sum_gbps")):
                if p2p.get(key) is not None:
                    prev = out[metric].get(r["host"])
                    value = float(p2p[key])
                    out[metric][r["host"]] = value if prev is None else min(prev, value)
    for rec in storage:
        host = rec.get("host")
        if not host or rec.get("skipped"):
            continue
        for target in rec.get("targets") or []:
            kind = target.get("kind")
            if kind not in ("scratch", "shared") or target.get("status") not in (None, "measured"):
                continue
            for direction in ("write", "read"):
                value = _gbps(target.get(direction))
                if value is not None:
                    # One figure per node and kind: the first shared mount stands for the shared FS.
                    out[f"{kind}_{direction}"].setdefault(host, float(value))
        restore = (rec.get("checkpoint") or {}).get("read_s")
        if restore is not None:
            out["checkpoint_restore"][host] = float(restore)
    return out


def judge(
    brief: Mapping | None,
    *,
    pools: Mapping[str, str],
    runs: Sequence[Mapping] = (),
    storage: Sequence[Mapping] = (),
) -> tuple[list[dict], list[dict]]:
    """The outlier section (one entry per pool and metric measured on two nodes or more) and its
    ``NCCL_OUTLIER`` / ``P2P_OUTLIER`` / ``STORAGE_OUTLIER`` violations. ``pools``: host -> pool name. Pure."""
    rule = settings(brief)
    figures = node_figures(runs, storage)
    # Which pair is each node's weakest, to name it beside the figure.
    weakest = {
        r["host"]: r["p2p"].get("min_pair")
        for r in runs
        if r.get("scope") == "single-node" and r.get("host") and isinstance(r.get("p2p"), Mapping)
    }
    section: list[dict] = []
    found: list[dict] = []
    for metric, (code, what, unit, higher) in METRICS.items():
        by_pool: dict[str, dict[str, float]] = {}
        for host, value in figures[metric].items():
            if pools.get(host):
                by_pool.setdefault(pools[host], {})[host] = value
        for pool, values in sorted(by_pool.items()):
            if len(values) < 2:
                continue
            outliers = find(values, higher, rule, float(rule["min_abs"].get(metric, 0)))
            section.append(
                {
                    "pool": pool,
                    "metric": metric,
                    "unit": unit,
                    "nodes": len(values),
                    "median": statistics.median(values.values()),
                    "mad": statistics.median(abs(v - statistics.median(values.values())) for v in values.values()),
                    "outliers": outliers,
                }
            )
            for o in outliers:
                side = "below" if higher else "above"
                if o["small_pool"]:
                    why = (
                        f"the median of the other {len(values) - 1} node(s) of pool {pool}; a pool under "
                        f"{rule['min_pool_size']} nodes is too small to judge robustly, so this only warns"
                    )
                else:
                    z = f"modified z-score {o['z']:.1f}" if o["z"] is not None else "the others all equal"
                    why = f"pool {pool}'s median of {len(values)} nodes ({z})"
                severity = ERROR if rule["severity"] == "fail" and not o["small_pool"] else WARNING
                pair = f" (GPU {weakest[o['host']]})" if metric == "p2p_min" and weakest.get(o["host"]) else ""
                found.append(
                    violation(
                        code,
                        "acceptance.outliers",
                        f"{what}{pair} {o['value']:.4g} {unit} is {o['deviation']:.1%} {side} "
                        f"{o['median']:.4g} {unit}, "
                        f"{why}: expected within {rule['min_deviation']:.0%} of its peers. Floors passed or not, "
                        f"{_TODO[code]}",
                        host=o["host"],
                        severity=severity,
                    )
                )
    return section, found
