# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""NCCL acceptance: judge parsed nccl-tests runs and NCCL_DEBUG evidence against the brief.

Pure functions on plain dicts (the shapes :mod:`nccl_tests` and
:mod:`nccl_debug` return); each gate returns a list of violations
(:func:`violation.violation`), empty when it passes.

Gate rules
----------
* **busbw** — the out-of-place busbw at the run's largest message size (the
  last row; the lowest such row when several data types were run) must be at
  least the brief's floor: ``acceptance.single_node_busbw_gbps`` for a run on
  one node, ``acceptance.multi_node_busbw_gbps`` across nodes. Out-of-place is
  what nccl-tests users quote and what vendors' expected figures use; the
  in-place figure is reported, never gated (taking the better of the two
  would hide an asymmetric fault). Peak busbw (max over all rows) and the
  footer's "Avg bus bandwidth" (mean over *all* sizes, small ones included)
  are reported only.
* **#wrong** — every row's out-of-place and in-place ``#wrong`` must be at most
  ``max_wrong`` (the brief's, always 0); a non-zero "Out of bounds values"
  fails too. ``N/A`` (run with ``-c 0``) is a warning: nothing was validated.
* **transport** (multi-node runs) — with an ``infiniband`` / ``roce`` fabric,
  NCCL must have used IB verbs (built-in ``IB`` or an RDMA plugin over NET/IB
  devices) on ports of the declared link layer, never sockets; with
  ``gpudirect_rdma`` the network channels must be ``GDRDMA``.
* **bisect** — when the all-node run is below its floor, :func:`plan_bisect`
  proposes disjoint node groups to run next, and names the slow node(s) (to
  drain) or the slow link (a pair slow together, each fine with others).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from itertools import combinations

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.nccl_debug import network_kind
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, violation

NCCL_NO_RUN = "NCCL_NO_RUN"
# A run that printed a table but did not end cleanly: the launcher exited non-zero, was killed
# or timed out, or a failure line was printed (RUN_FAILED); the table stopped early (INCOMPLETE).
NCCL_RUN_FAILED = "NCCL_RUN_FAILED"
NCCL_RUN_INCOMPLETE = "NCCL_RUN_INCOMPLETE"
NCCL_BUSBW_BELOW_FLOOR = "NCCL_BUSBW_BELOW_FLOOR"
NCCL_WRONG_RESULTS = "NCCL_WRONG_RESULTS"
NCCL_NOT_VALIDATED = "NCCL_NOT_VALIDATED"
NCCL_SIZE_TOO_SMALL = "NCCL_SIZE_TOO_SMALL"
NCCL_RANKS_MISMATCH = "NCCL_RANKS_MISMATCH"
NCCL_HOSTS_MISMATCH = "NCCL_HOSTS_MISMATCH"
NCCL_SOCKET_FALLBACK = "NCCL_SOCKET_FALLBACK"
NCCL_WRONG_NETWORK = "NCCL_WRONG_NETWORK"
NCCL_NO_GDR = "NCCL_NO_GDR"
NCCL_NO_DEBUG_EVIDENCE = "NCCL_NO_DEBUG_EVIDENCE"
NCCL_SLOW_NODE = "NCCL_SLOW_NODE"
NCCL_SLOW_LINK = "NCCL_SLOW_LINK"
NCCL_BISECT_INCONCLUSIVE = "NCCL_BISECT_INCONCLUSIVE"

FIELD_SINGLE = "acceptance.single_node_busbw_gbps"
FIELD_MULTI = "acceptance.multi_node_busbw_gbps"
FIELD_WRONG = "acceptance.max_wrong"
FIELD_MAX_BYTES = "acceptance.max_bytes"
FIELD_FABRIC = "networks.fabric.type"
FIELD_GDR = "pools[].gpudirect_rdma"

RDMA_FABRICS = ("infiniband", "roce")
_LINK_LAYER = {"infiniband": "IB", "roce": "RoCE"}

PASS = "pass"
FAIL = "fail"

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.I)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


# --- sizes and limits ------------------------------------------------------------


def parse_size(value: int | str | None) -> int | None:
    """nccl-tests sizes: ``8G`` -> 8589934592 (K/M/G are powers of 1024, as ``-e 8G`` means)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    m = _SIZE.match(str(value))
    if not m:
        return None
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def human_size(n: int | float | None) -> str:
    """8589934592 -> ``8 GiB``; 1536 -> ``1.5 KiB``; 8 -> ``8 B``."""
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:g} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def physical_limit_single_node(nvlink_gbps: float | None) -> float | None:
    """Single-node busbw limit: the accelerator's NVLink bandwidth per GPU per direction (GB/s).

    The catalogue carries the figure (H100 SXM: 450). NVLS (NVLink SHARP) reduces in the
    switch and can measure a little above it; the line is a reference, not a gate.
    """
    return float(nvlink_gbps) if nvlink_gbps else None


def physical_limit_multi_node(nics_per_node: int | None, link_speed_gbps: float | None) -> float | None:
    """Multi-node busbw limit: NICs per node x link speed (Gb/s) / 8 -> GB/s (8 x 400G -> 400)."""
    if not nics_per_node or not link_speed_gbps:
        return None
    return float(nics_per_node) * float(link_speed_gbps) / 8.0


# --- one run ------------------------------------------------------------------------


def largest_rows(run: dict) -> list[dict]:
    rows = (run or {}).get("rows") or []
    if not rows:
        return []
    largest = max(r["size"] for r in rows)
    return [r for r in rows if r["size"] == largest]


def _gated(row: dict) -> float | None:
    return row.get("oop_busbw") if row.get("oop_busbw") is not None else row.get("ip_busbw")


def summarize_run(run: dict) -> dict:
    """The figures a report shows for one run.

    ``busbw_largest`` is the gated figure (out-of-place at the largest size);
    ``latency_us`` the out-of-place time of the smallest size.
    """
    rows = (run or {}).get("rows") or []
    out = {
        "largest_size": None,
        "busbw_largest": None,
        "busbw_largest_ip": None,
        "smallest_size": None,
        "latency_us": None,
        "peak_busbw": (run or {}).get("peak_busbw"),
        "avg_busbw": (run or {}).get("avg_busbw"),
        "wrong_total": None,
        "sizes": len({r["size"] for r in rows}),
    }
    if not rows:
        return out
    top = largest_rows(run)
    gated = [v for v in (_gated(r) for r in top) if v is not None]
    ip = [r["ip_busbw"] for r in top if r.get("ip_busbw") is not None]
    smallest = min(r["size"] for r in rows)
    small = [r for r in rows if r["size"] == smallest]
    times = [r["oop_time_us"] if r.get("oop_time_us") is not None else r.get("ip_time_us") for r in small]
    times = [t for t in times if t is not None]
    wrongs = [w for r in rows for w in (r.get("oop_wrong"), r.get("ip_wrong")) if w is not None]
    out.update(
        largest_size=top[0]["size"],
        busbw_largest=min(gated) if gated else None,
        busbw_largest_ip=min(ip) if ip else None,
        smallest_size=smallest,
        latency_us=max(times) if times else None,
        wrong_total=sum(wrongs) if wrongs else None,
    )
    return out


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def evaluate_run(
    run: dict | None,
    floor_gbps: float | None,
    max_wrong: int = 0,
    *,
    host: str | None = None,
    label: str | None = None,
    field: str = FIELD_MULTI,
    min_size: int | str | None = None,
    expected_ranks: int | None = None,
    expected_hosts: Iterable[str] | None = None,
) -> list[dict]:
    """Violations of one parsed run against a busbw floor (GB/s) and the wrong-value tolerance.

    ``host`` is the node a single-node run belongs to (None for multi-node runs);
    ``field`` names the brief's floor (:data:`FIELD_SINGLE` or :data:`FIELD_MULTI`);
    ``min_size`` (bytes or ``8G``) warns when the run stopped below the brief's message size.
    """
    what = label or (f"single-node run on {host}" if host else "all_reduce run")
    if not run or not run.get("rows"):
        return [
            violation(
                NCCL_NO_RUN,
                field,
                f"{what}: expected an nccl-tests result table, found none; read the job's log "
                "(CUDA/NCCL failure, fabric manager down, wrong GPU count) and re-run",
                host,
            )
        ]
    out: list[dict] = []
    s = summarize_run(run)
    size = human_size(s["largest_size"])
    busbw = s["busbw_largest"]
    if floor_gbps is not None and (busbw is None or busbw < float(floor_gbps)):
        hint = (
            "check NVLink / fabric manager (nvidia-smi topo -m, nvidia-smi -q | grep -A2 Fabric)"
            if field == FIELD_SINGLE
            else "bisect into pairs to name the slow node or link, then check its NICs, cables and GPUDirect"
        )
        out.append(
            violation(
                NCCL_BUSBW_BELOW_FLOOR,
                field,
                f"{what}: busbw at {size} (out-of-place) expected >= {float(floor_gbps):g} GB/s, "
                f"found {_fmt(busbw)} GB/s (peak {_fmt(s['peak_busbw'])}, avg over all sizes "
                f"{_fmt(s['avg_busbw'])}); {hint}",
                host,
            )
        )
    want = parse_size(min_size)
    if want and s["largest_size"] is not None and s["largest_size"] < want:
        out.append(
            violation(
                NCCL_SIZE_TOO_SMALL,
                FIELD_MAX_BYTES,
                f"{what}: expected results up to {human_size(want)}, the run stopped at {size}; "
                f"run all_reduce_perf with -e {human_size(want).replace(' ', '').replace('iB', '')}",
                host,
                WARNING,
            )
        )
    bad = [
        (r["size"], w)
        for r in run["rows"]
        for w in (r.get("oop_wrong"), r.get("ip_wrong"))
        if w is not None and w > max_wrong
    ]
    oob = run.get("out_of_bounds")
    if bad or (oob is not None and oob > 0):
        sizes = ", ".join(f"{human_size(sz)}: {w}" for sz, w in bad[:5]) + (" ..." if len(bad) > 5 else "")
        found = f"wrong values at {sizes}" if bad else f"'Out of bounds values : {oob}'"
        out.append(
            violation(
                NCCL_WRONG_RESULTS,
                FIELD_WRONG,
                f"{what}: expected at most {max_wrong} wrong values per size, found {found}; "
                "data corruption: run dcgmi diag -r 3 and check ECC / XID errors before anything else",
                host,
            )
        )
    elif all(r.get("oop_wrong") is None and r.get("ip_wrong") is None for r in run["rows"]):
        out.append(
            violation(
                NCCL_NOT_VALIDATED,
                FIELD_WRONG,
                f"{what}: expected validated results, found '#wrong' N/A on every row (run with -c 0); "
                "re-run with -c 1 so wrong values are counted",
                host,
                WARNING,
            )
        )
    if expected_ranks is not None and run.get("ranks") is not None and run["ranks"] != expected_ranks:
        out.append(
            violation(
                NCCL_RANKS_MISMATCH,
                field,
                f"{what}: expected {expected_ranks} ranks, found {run['ranks']}; check the launcher's "
                "tasks per node and -g",
                host,
            )
        )
    if expected_hosts is not None and run.get("hosts"):
        missing = sorted(set(expected_hosts) - set(run["hosts"]))
        if missing:
            out.append(
                violation(
                    NCCL_HOSTS_MISMATCH,
                    field,
                    f"{what}: expected ranks on {', '.join(missing)}, found only {', '.join(run['hosts'])}; "
                    "check the job's node list",
                    host,
                )
            )
    return out


def evaluate_runs(runs: Sequence[dict], floor_gbps: float | None, max_wrong: int = 0, **kwargs) -> list[dict]:
    """:func:`evaluate_run` over every run of a log; NCCL_NO_RUN when the log has none."""
    if not runs:
        return evaluate_run(None, floor_gbps, max_wrong, **kwargs)
    out: list[dict] = []
    for run in runs:
        out.extend(evaluate_run(run, floor_gbps, max_wrong, **kwargs))
    return out


# --- transport ---------------------------------------------------------------------


def evaluate_transport(
    debug: dict | None,
    fabric_type: str | None,
    gpudirect_rdma: bool,
    *,
    host: str | None = None,
    multi_node: bool = True,
) -> list[dict]:
    """Violations of a multi-node run's NCCL_DEBUG=INFO evidence against the declared fabric.

    Single-node runs (``multi_node=False``) and fabrics ``none`` / unset use no network: [].
    """
    fabric = (fabric_type or "none").lower()
    if not multi_node or fabric == "none":
        return []
    if not debug:
        severity = ERROR if fabric in RDMA_FABRICS else WARNING
        return [
            violation(
                NCCL_NO_DEBUG_EVIDENCE,
                FIELD_FABRIC,
                f"expected NCCL_DEBUG=INFO lines proving the {fabric} transport, found none; "
                "run the test with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET",
                host,
                severity,
            )
        ]
    out: list[dict] = []
    network = debug.get("network")
    kind = network_kind(debug)
    if fabric in RDMA_FABRICS:
        if debug.get("socket_fallback"):
            devices = ", ".join(debug.get("socket_devices") or []) or "TCP"
            out.append(
                violation(
                    NCCL_SOCKET_FALLBACK,
                    FIELD_FABRIC,
                    f"expected NCCL over {fabric} (IB verbs), found a fall-back to sockets ({devices}); "
                    "check ibstat ports are Active, NCCL_IB_HCA, NCCL_IB_DISABLE and that the container "
                    "sees /dev/infiniband",
                    host,
                )
            )
        elif kind == "plugin":
            out.append(
                violation(
                    NCCL_WRONG_NETWORK,
                    FIELD_FABRIC,
                    f"expected NCCL over {fabric} (network IB), found network '{network}'; "
                    "remove the stray net plugin (NCCL_NET_PLUGIN) or declare the fabric the site has",
                    host,
                )
            )
        elif kind is None:
            out.append(
                violation(
                    NCCL_NO_DEBUG_EVIDENCE,
                    FIELD_FABRIC,
                    f"expected a 'Using network' line or network channels for {fabric}, found neither; "
                    "run with NCCL_DEBUG_SUBSYS=INIT,NET",
                    host,
                    WARNING,
                )
            )
        want = _LINK_LAYER[fabric]
        layers = debug.get("link_layers") or []
        if layers and want not in layers:
            out.append(
                violation(
                    NCCL_WRONG_NETWORK,
                    FIELD_FABRIC,
                    f"expected {want} ports for a {fabric} fabric, NCCL used {'/'.join(layers)} "
                    f"({', '.join(debug.get('ib_devices') or [])}); set NCCL_IB_HCA to the fabric's ports",
                    host,
                )
            )
        if gpudirect_rdma and not debug.get("socket_fallback"):
            gdr = debug.get("gdr")
            if gdr is False:
                out.append(
                    violation(
                        NCCL_NO_GDR,
                        FIELD_GDR,
                        "expected network channels via NET/.../GDRDMA (GPUDirect RDMA), found them without "
                        "GDRDMA (or GDR 0); load nvidia-peermem or use DMA-BUF, check ACS / IOMMU passthrough "
                        "and NCCL_NET_GDR_LEVEL",
                        host,
                    )
                )
            elif gdr is None:
                out.append(
                    violation(
                        NCCL_NO_GDR,
                        FIELD_GDR,
                        "expected evidence of GPUDirect RDMA (channels via .../GDRDMA or 'GDR 1'), found none "
                        "in the log; run with NCCL_DEBUG_SUBSYS=INIT,NET",
                        host,
                        WARNING,
                    )
                )
    return out


# --- bisect ------------------------------------------------------------------------


def _pairs(nodes: Sequence[str]) -> list[list[str]]:
    return [list(nodes[i : i + 2]) for i in range(0, len(nodes) - 1, 2)]


def _halves(nodes: Sequence[str]) -> list[list[str]]:
    mid = len(nodes) // 2
    return [list(nodes[:mid]), list(nodes[mid:])]


def plan_bisect(
    nodes: Sequence[str],
    floor_gbps: float,
    results: Iterable[dict] = (),
    *,
    strategy: str = "pairs",
    known_good: Iterable[str] = (),
) -> dict:
    """The next step of a bisect, from the results so far (stateless: replay-able from a list).

    ``results`` are ``{"nodes": [...], "busbw": float | None, "failed": bool}`` (busbw None:
    the run printed no table; ``failed``: the run did not end cleanly, see ``run.run_end``);
    either is counted as below the floor, whatever the busbw. Returns::

        {"done": bool, "next": [[node, ...], ...],   # disjoint groups: run them, at once if you like
         "slow_nodes": [...], "slow_links": [[a, b], ...], "slow_groups": [[...], ...],
         "good_nodes": [...], "inconclusive": bool, "reason": str, "tests_run": int}

    Strategy ``pairs`` runs disjoint pairs first (one round for any number of slow
    nodes); ``halves`` runs halves, then halves of the slow halves, down to groups
    of 2-3 (fewer, larger jobs: it also catches slowness that needs more nodes).
    Then every suspect is paired with a node that passed: slow with a good node
    means a slow node; two nodes that pass with others but fail together are a
    slow link.
    """
    if strategy not in ("pairs", "halves"):
        raise ValueError(f"strategy must be 'pairs' or 'halves', got {strategy!r}")
    nodes = list(dict.fromkeys(nodes))
    floor = float(floor_gbps)
    tested: dict[frozenset, float | None] = {}
    for r in results:
        group = frozenset(r.get("nodes") or ())
        if len(group) >= 2:
            # A re-run of the same group: the latest result counts. A run that failed (exit
            # status, failure line, table cut short) is a failed group whatever its busbw.
            tested[group] = None if r.get("failed") else r.get("busbw")

    def passed(group: frozenset) -> bool:
        value = tested.get(group)
        return value is not None and value >= floor

    good = set(known_good)
    for group in tested:
        if passed(group):
            good |= group

    def result(done: bool, nxt: list, reason: str = "", **extra) -> dict:
        slow_nodes = extra.get("slow_nodes", [])
        slow_links = extra.get("slow_links", [])
        slow_groups = extra.get("slow_groups", [])
        return {
            "done": done,
            "next": nxt,
            "slow_nodes": slow_nodes,
            "slow_links": slow_links,
            "slow_groups": slow_groups,
            "good_nodes": [n for n in nodes if n in good],
            "inconclusive": done and not (slow_nodes or slow_links or slow_groups),
            "reason": reason,
            "tests_run": len(tested),
        }

    if len(nodes) < 2:
        return result(True, [], "fewer than 2 nodes: nothing to bisect")

    # Phase 1: screening groups.
    suspects: list[str] = []
    pending: list[list[str]] = []
    failed_leaves: list[list[str]] = []
    if strategy == "pairs":
        screen = _pairs(nodes)
        if len(nodes) % 2:
            suspects.append(nodes[-1])  # the odd one out is checked against a good node later
        for group in screen:
            key = frozenset(group)
            if key not in tested:
                pending.append(group)
            elif not passed(key):
                failed_leaves.append(group)
    else:
        frontier = _halves(nodes)
        while frontier:
            group = frontier.pop(0)
            key = frozenset(group)
            if key not in tested:
                pending.append(group)
            elif not passed(key):
                if len(group) >= 4:
                    frontier.extend(_halves(group))
                else:
                    failed_leaves.append(group)
    if pending:
        return result(False, pending, "screening")
    for group in failed_leaves:
        suspects.extend(n for n in group if n not in suspects)

    # Phase 2: without any good node, cross-pair untested nodes (bounded) until one pair passes.
    if not good:
        screened = {frozenset(g) for g in failed_leaves}
        extra = [g for g in tested if g not in screened]
        used: set[str] = set()
        cross_pending = []
        if len(extra) < len(nodes):
            for a, b in combinations(nodes, 2):
                if frozenset((a, b)) not in tested and not used & {a, b}:
                    cross_pending.append([a, b])
                    used |= {a, b}
        if cross_pending:
            return result(False, cross_pending, "every group so far is slow: cross-pairing to find a good node")
        slow_groups = [sorted(g) for g in failed_leaves]
        if len(nodes) == 2:
            return result(
                True,
                [],
                "2 nodes, slow together and no other node to compare with: node or link cannot be told "
                "apart; compare with each node's single-node result or add a known-good node",
                slow_links=[sorted(nodes)],
            )
        return result(
            True,
            [],
            "no group met the floor: the fault is not one node (fabric, switch or configuration)",
            slow_groups=slow_groups,
        )

    # Phase 3: each suspect against a good node.
    slow_nodes: list[str] = []
    nxt: list[list[str]] = []
    busy: set[str] = set()
    free_good = [n for n in nodes if n in good] + sorted(good - set(nodes))
    for s in suspects:
        if s in good:
            continue
        # Good nodes s has already failed with (every such test failed, or s would be good).
        failed_with = {n for g in tested if s in g and len(g) == 2 and (g - {s}) <= good for n in g - {s}}
        candidates = [g for g in free_good if g != s and g not in failed_with]
        # Slow with two different good nodes, or with the only good one there is: a slow node.
        # Slow with one good node only could still be that link: try a second good node first.
        if len(failed_with) >= 2 or (failed_with and not candidates):
            slow_nodes.append(s)
            continue
        partner = next((g for g in candidates if g not in busy), None)
        if partner is None or s in busy:
            continue  # next round
        busy |= {s, partner}
        nxt.append([s, partner])
    waiting = [s for s in suspects if s not in good and s not in slow_nodes and not any(s in g for g in nxt)]
    if nxt or waiting:
        return result(False, nxt, "checking suspects against good nodes", slow_nodes=slow_nodes)

    slow_links = sorted(sorted(g) for g in tested if len(g) == 2 and not passed(g) and g <= good)
    # A slow group of good nodes that no slow link explains: the fault is between them (switch, uplinks).
    slow_groups = sorted(
        sorted(g)
        for g in tested
        if len(g) > 2
        and not passed(g)
        and g <= good
        and set(g) != set(nodes)
        and not any(set(link) <= g for link in slow_links)
    )
    if slow_nodes or slow_links or slow_groups:
        reason = "named " + ", ".join(
            filter(
                None,
                [
                    f"slow node(s) {', '.join(slow_nodes)}" if slow_nodes else "",
                    "slow link(s) " + ", ".join("-".join(link) for link in slow_links) if slow_links else "",
                    "slow group(s) " + "; ".join(",".join(g) for g in slow_groups) if slow_groups else "",
                ],
            )
        )
    else:
        reason = "every group met the floor: the slowness appears only with all nodes (spine, uplinks or scale)"
    return result(True, [], reason, slow_nodes=slow_nodes, slow_links=slow_links, slow_groups=slow_groups)


def bisect(
    nodes: Sequence[str],
    run_group: Callable[[list[str]], float | None],
    floor_gbps: float,
    *,
    strategy: str = "pairs",
    known_good: Iterable[str] = (),
    max_tests: int | None = None,
) -> dict:
    """Drive :func:`plan_bisect` to the end with ``run_group(nodes) -> busbw`` (None: the run failed).

    Returns the final plan plus ``tests``: every group run and its busbw, in order.
    """
    results: list[dict] = []
    limit = max_tests if max_tests is not None else 4 * len(nodes) + 8
    round_no = 0
    while True:
        plan = plan_bisect(nodes, floor_gbps, results, strategy=strategy, known_good=known_good)
        if plan["done"] or len(results) >= limit:
            break
        round_no += 1
        for group in plan["next"]:
            results.append({"nodes": group, "busbw": run_group(list(group)), "round": round_no})
    if not plan["done"]:
        plan = dict(plan, done=True, inconclusive=True, reason=f"stopped after {len(results)} tests")
    plan["tests"] = results
    return plan


def bisect_violations(plan: dict, floor_gbps: float) -> list[dict]:
    """Violations naming what a finished bisect found (slow nodes are the ones to drain)."""
    out: list[dict] = []
    tests = plan.get("tests") or []

    def seen(node: str) -> str:
        figures = [
            f"{'+'.join(t['nodes'])}: {_fmt(t.get('busbw'))} GB/s" + (" (run failed)" if t.get("failed") else "")
            for t in tests
            if node in (t.get("nodes") or [])
        ]
        return "; ".join(figures[:4]) or "see the bisect tests"

    for node in plan.get("slow_nodes") or []:
        out.append(
            violation(
                NCCL_SLOW_NODE,
                FIELD_MULTI,
                f"expected >= {float(floor_gbps):g} GB/s in a pair with a good node, found {seen(node)}; "
                "drained: check its NICs (ibstat, port rate, cables), GPUDirect and PCIe before resuming",
                node,
            )
        )
    for a, b in plan.get("slow_links") or []:
        out.append(
            violation(
                NCCL_SLOW_LINK,
                FIELD_MULTI,
                f"expected >= {float(floor_gbps):g} GB/s between {a} and {b}, each fine with other nodes but slow "
                "together; check the switch ports / cables between them (not drained)",
                a,
            )
        )
    for group in plan.get("slow_groups") or []:
        out.append(
            violation(
                NCCL_SLOW_LINK,
                FIELD_MULTI,
                f"expected >= {float(floor_gbps):g} GB/s across {', '.join(group)}, found it slower; the fault "
                "is between these nodes (switch, uplinks), not in one of them",
                None,
            )
        )
    if plan.get("inconclusive"):
        out.append(
            violation(
                NCCL_BISECT_INCONCLUSIVE,
                FIELD_MULTI,
                f"expected the bisect to name a slow node or link, found none: {plan.get('reason')}",
                None,
                WARNING,
            )
        )
    return out


def verdict(violations: Iterable[dict]) -> str:
    """``pass`` when no violation is an error."""
    return FAIL if any(v.get("severity") == ERROR for v in violations) else PASS
