# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Each node's history: every acceptance, hardware gate and drift result, kept per node, and the
acceptance that expires.

The store is one JSON-lines file per cluster, ``reports/<cluster>/history.jsonl``: one record per
node per run, appended under a lock in one ``write`` (``atomic.append_line``), so a run killed
mid-write leaves at most a torn last line, which :func:`read` skips with a warning. A record::

    {"time": "2026-11-29T10:00:00Z", "run": "20261129T100000Z", "kind": "acceptance" | "gate" | "drift",
     "cluster": "lab", "host": "gpu01", "pool": "h100", "verdict": "pass",
     "figures": {"single_node_busbw": 445.1, "latency_us": 30.2, "scratch_write": 5.1, ...},
     "valid_until": "2027-02-27",          # acceptance records of an accepted node only
     "dcgm_diag": {"level": 2, "status": "failed", "failed": ["GPU 3 memory"]},   # where diagnostics ran
     "link_errors": "clean (8 ports)"}     # acceptance records: its fabric ports' error counters

Figures (the same names as the outlier rule's, acceptance_outliers.py, ``latency_us`` being the
single-node run's time at the smallest size; ``all_gather_busbw`` / ``alltoall_busbw`` where the brief
gates those collectives, collectives_history.py): higher is better, except ``latency_us`` and
``checkpoint_restore``. :func:`trends` sets each node's first acceptance figure beside its latest
and flags (``NODE_DEGRADED``) a node worse by more than ``acceptance.history.max_degradation_pct``
since its own first acceptance (docs/nccl-acceptance.md, "History").

An accepted node carries the date its acceptance is valid until (:func:`valid_until`, the brief's
``acceptance.valid_days``): on Slurm in the node's ``Extra`` field (``accepted_until=YYYY-MM-DD``),
on Kubernetes in the label ``gpufleet.io/accepted-until``. :func:`expiry` says which nodes' mark
expired or is missing (the drift report lists them).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.collectives_history import (
    node_figures as collective_figures,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.link_errors import (
    history_summary as link_history,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.outliers import node_figures
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.atomic import append_line
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, violation

STORE = "history.jsonl"
KINDS = ("acceptance", "gate", "drift")
DEFAULTS = {"max_degradation_pct": 10.0, "severity": "warn"}
DEFAULT_VALID_DAYS = 90
# figure -> (what, unit, higher is better)
FIGURES = {
    "single_node_busbw": ("single-node busbw", "GB/s", True),
    "latency_us": ("latency at the smallest size", "us", False),
    "scratch_write": ("scratch write", "GB/s", True),
    "scratch_read": ("scratch read", "GB/s", True),
    "shared_write": ("shared file system write", "GB/s", True),
    "shared_read": ("shared file system read", "GB/s", True),
    "checkpoint_restore": ("checkpoint restore", "s", False),
    "rdma_port_min": ("weakest RDMA port (ib_write_bw)", "Gb/s", True),
    # Single-node all_gather / alltoall where the brief gates them (acceptance/collectives_history.py).
    "all_gather_busbw": ("single-node all_gather busbw", "GB/s", True),
    "alltoall_busbw": ("single-node alltoall busbw", "GB/s", True),
}
# The Slurm node's Extra field and the Kubernetes label that carry the mark.
SLURM_KEY = "accepted_until"
K8S_LABEL = "gpufleet.io/accepted-until"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_STAMP = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$")


class HistoryError(ValueError):
    """The brief's acceptance.history / valid_days is not what the rules need."""


# --- settings ------------------------------------------------------------------------------------


def settings(brief: Mapping | None) -> dict:
    """``acceptance.history`` with its defaults, and ``valid_days``; HistoryError names a bad field."""
    acceptance = (brief or {}).get("acceptance") or {}
    given = acceptance.get("history") or {}
    if not isinstance(given, Mapping):
        raise HistoryError(f"acceptance.history: expected a mapping, found {type(given).__name__} {given!r}")
    out = {**DEFAULTS, **given}
    pct = out["max_degradation_pct"]
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or not 0 <= pct <= 100:
        raise HistoryError(f"acceptance.history.max_degradation_pct: expected a number from 0 to 100, found {pct!r}")
    if out["severity"] not in ("warn", "fail"):
        raise HistoryError(f"acceptance.history.severity: expected warn or fail, found {out['severity']!r}")
    days = acceptance.get("valid_days", DEFAULT_VALID_DAYS)
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= 3650:
        raise HistoryError(f"acceptance.valid_days: expected a whole number of days from 1 to 3650, found {days!r}")
    out["valid_days"] = days
    return out


def stamp_time(stamp: str | None) -> str:
    """A report stamp (``20261129T100000Z``) as an ISO time; now when there is none or it is not a stamp."""
    m = _STAMP.fullmatch(stamp or "")
    if m:
        y, mo, d, h, mi, s = m.groups()
        return f"{y}-{mo}-{d}T{h}:{mi}:{s}Z"
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def valid_until(time: str, valid_days: int) -> str:
    """The date an acceptance of ``time`` (ISO, UTC) is valid until: its day plus ``valid_days``."""
    return (date.fromisoformat(time[:10]) + timedelta(days=int(valid_days))).isoformat()


# --- records ---------------------------------------------------------------------------------------


def acceptance_records(report: Mapping, accepted: Iterable[str], valid_days: int, run: str | None = None) -> list[dict]:
    """One record per node the acceptance report measured, with its figures and verdict. Pure.

    ``accepted``: the nodes this run accepted (they get ``valid_until``); the others' verdict is the
    node's status in the report (``fail``, ``drained``), or ``not accepted``.
    """
    figures = node_figures(report.get("runs") or [], report.get("storage") or [])
    links = {r.get("host"): link_history(r) for r in report.get("link_errors") or [] if isinstance(r, Mapping)}
    figures["rdma_port_min"] = rdma_port_figures(report.get("rdma_pairs") or [])
    figures.update(collective_figures(report.get("runs") or []))
    time = stamp_time(report.get("timestamp"))
    accepted = set(accepted)
    out = []
    for node in report.get("nodes") or []:
        host = node.get("host")
        mine = {m: round(v[host], 3) for m, v in figures.items() if host in v}
        diag = diag_summary(report, host) if host else None
        if not host or (not mine and host not in accepted and not diag):
            continue  # not measured in this run (not accepted, left out): nothing to keep
        record = {
            "time": time,
            "run": run or report.get("timestamp") or time,
            "kind": "acceptance",
            "cluster": report.get("cluster"),
            "host": host,
            "pool": node.get("pool"),
            "verdict": "pass" if host in accepted else _not_accepted(node.get("status")),
            "figures": mine,
        }
        if diag:
            record["dcgm_diag"] = diag
        if links.get(host):
            record["link_errors"] = links[host]
        if host in accepted:
            record["valid_until"] = valid_until(time, valid_days)
        out.append(record)
    return out


def diag_summary(report: Mapping, host: str) -> dict | None:
    """The node's GPU diagnostics in this report (acceptance/dcgm_diag.py), for its history:
    ``{level, status, failed: ["GPU 3 memory", ...]}``; None when the run had none."""
    for run in report.get("runs") or []:
        d = run.get("dcgm_diag") if run.get("scope") == "single-node" and run.get("host") == host else None
        if isinstance(d, Mapping):
            failed = [
                f"{'node' if f.get('gpu') is None else 'GPU ' + str(f['gpu'])} {f.get('test')}"
                for f in d.get("failures") or []
            ]
            return {"level": d.get("level"), "status": d.get("status"), "failed": failed}
    return None


def diag_cell(value) -> str | None:
    """One history record's GPU diagnostics as a table cell: ``-r 2 passed``, ``-r 2 failed: GPU 3 memory``."""
    if not isinstance(value, Mapping):
        return None
    text = f"-r {value.get('level')} {value.get('status')}"
    return text + (f": {', '.join(value['failed'])}" if value.get("failed") else "")


def rdma_port_figures(records: Iterable[Mapping]) -> dict[str, float]:
    """host -> its weakest RDMA port's ib_write_bw figure (Gb/s), from the report's per-rail RDMA pairs
    (acceptance/rdma_pairs.py). A port's figure is its best partner's: a partner's slow port does not
    make this node's port look slow, its own slow port is slow with every partner."""
    out: dict[str, float] = {}
    for rec in records:
        for port in (rec or {}).get("ports") or []:
            host, value = port.get("host"), port.get("best_gbit")
            if host and isinstance(value, (int, float)):
                out[host] = min(out.get(host, float(value)), float(value))
    return out


def _not_accepted(status) -> str:
    """A measured node this run did not accept: its status, or "not accepted" when its own status passed
    (the run failed elsewhere, or the node degraded)."""
    return "not accepted" if status in (None, "", "pass", "ok") else str(status)


def record(kind: str, cluster: str, host: str, verdict: str, *, run: str, pool=None, figures=None, codes=()) -> dict:
    """One gate or drift record (no figures of acceptance; ``codes``: the violations' or drift's names)."""
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {', '.join(KINDS)}, found {kind!r}")
    return {
        "time": stamp_time(run),
        "run": run,
        "kind": kind,
        "cluster": cluster,
        "host": host,
        "pool": pool or None,
        "verdict": verdict,
        "figures": dict(figures or {}),
        **({"codes": sorted(set(codes))} if codes else {}),
    }


def drift_node_results(report: Mapping) -> list[dict]:
    """``{host, pool, verdict, codes}`` per node of a drift report (drift.py): its status and what drifted."""
    out = []
    for host, node in sorted(((report or {}).get("nodes") or {}).items()):
        node = node if isinstance(node, Mapping) else {}
        codes = [
            f"hold {d.get('package')}" if d.get("component") == "hold" else str(d.get("component"))
            for d in node.get("drift") or []
            if isinstance(d, Mapping)
        ]
        out.append(
            {"host": host, "pool": node.get("pool"), "verdict": str(node.get("status") or "unknown"), "codes": codes}
        )
    return out


# --- the store -------------------------------------------------------------------------------------


def store_path(base: str, cluster: str) -> str:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import slug

    return os.path.join(base, slug(cluster), STORE)


def append(path: str, records: Sequence[Mapping]) -> int:
    """Append ``records`` to the store at ``path`` (made with its directory if missing); returns how many."""
    if not records:
        return 0
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    text = "".join(json.dumps(dict(r), sort_keys=True, separators=(",", ":")) + "\n" for r in records)
    append_line(path, text)
    return len(records)


def read(path: str, host: str | None = None) -> tuple[list[dict], list[str]]:
    """(records, warnings): every record of the store (of ``host`` only when given), oldest first.

    A line that is not a JSON object (a writer killed mid-line leaves a torn last line) is skipped and
    named in a warning; a missing store is an empty history.
    """
    records: list[dict] = []
    warnings: list[str] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().split("\n")
    except FileNotFoundError:
        return [], []
    last = len(lines) - 1
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as exc:  # also an integer past 4,300 digits, or nesting too deep
            where = "its last line, torn (a run killed while writing it)" if i - 1 >= last else f"line {i}"
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
            warnings.append(f"{path}: {where} is not a record ({why}): skipped")
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("host"), str) or not isinstance(rec.get("time"), str):
            warnings.append(f"{path}: line {i} is not a record (expected an object with host and time): skipped")
            continue
        if host is None or rec["host"] == host:
            records.append(rec)
    records.sort(key=lambda r: r["time"])
    return records, warnings


# --- trends ----------------------------------------------------------------------------------------


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def trends(records: Sequence[Mapping], brief: Mapping | None = None) -> tuple[list[dict], list[dict]]:
    """Each node's first acceptance figure beside its latest, and the ``NODE_DEGRADED`` violations. Pure.

    Only acceptance records count. A figure is flagged when it is worse than the node's own first
    acceptance figure by more than ``max_degradation_pct`` (a warning, or an error with severity fail).
    Each trend: ``{host, pool, figure, unit, first, first_date, latest, latest_date, change, runs,
    degraded, text}``; ``change`` is the share worse (negative when better).
    """
    rule = settings(brief)
    limit = float(rule["max_degradation_pct"]) / 100
    by_node: dict[str, list[Mapping]] = {}
    for r in records:
        if r.get("kind") == "acceptance" and isinstance(r.get("figures"), Mapping):
            by_node.setdefault(r["host"], []).append(r)
    out: list[dict] = []
    found: list[dict] = []
    for host in sorted(by_node):
        recs = sorted(by_node[host], key=lambda r: r["time"])
        for figure, (what, unit, higher) in FIGURES.items():
            points = [(r, r["figures"][figure]) for r in recs if isinstance(r["figures"].get(figure), (int, float))]
            if not points:
                continue
            (first_rec, first), (last_rec, latest) = points[0], points[-1]
            worse = (first - latest) if higher else (latest - first)
            change = worse / first if first else 0.0
            degraded = len(points) > 1 and change > limit
            since = first_rec["time"][:10]
            trend = {
                "host": host,
                "pool": last_rec.get("pool"),
                "figure": figure,
                "unit": unit,
                "first": first,
                "first_date": since,
                "latest": latest,
                "latest_date": last_rec["time"][:10],
                "change": change,
                "runs": len(points),
                "degraded": degraded,
                "text": f"{_fmt(first)} → {_fmt(latest)} {unit} since {since}",
            }
            out.append(trend)
            if degraded:
                found.append(
                    violation(
                        "NODE_DEGRADED",
                        "acceptance.history.max_degradation_pct",
                        f"{what} {_fmt(latest)} {unit} is {change:.1%} worse than at its first acceptance "
                        f"({_fmt(first)} {unit} on {since}): expected at most {limit:.0%} worse. Compare its "
                        "runs (gpufleet report history " + host + ") and check the node before it degrades further",
                        host=host,
                        severity=ERROR if rule["severity"] == "fail" else WARNING,
                    )
                )
    return out, found


def busbw_series(records: Sequence[Mapping]) -> dict[str, dict[str, list[tuple[str, float]]]]:
    """pool -> host -> [(time, single-node busbw)] of the acceptance records, oldest first."""
    out: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for r in sorted(records, key=lambda r: r["time"]):
        value = (r.get("figures") or {}).get("single_node_busbw") if r.get("kind") == "acceptance" else None
        if isinstance(value, (int, float)):
            out.setdefault(r.get("pool") or "no pool", {}).setdefault(r["host"], []).append((r["time"], float(value)))
    return out


def plot_pool(pool: str, series: Mapping[str, Sequence[tuple[str, float]]], path: str) -> str:
    """Every node of ``pool``'s single-node busbw over time, one line per node, into ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    try:
        every_time, every_value = [], []
        for host in sorted(series):
            points = series[host]
            times = [datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ") for t, _ in points]
            ax.plot(times, [v for _, v in points], "o-", lw=1.5, ms=4, label=host)
            every_time += times
            every_value += [v for _, v in points]
        # The whole span of the runs, a day either side (one run alone is a point, not a year of axis).
        if every_time:
            ax.set_xlim(min(every_time) - timedelta(days=1), max(every_time) + timedelta(days=1))
        locator = mdates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        ax.set_ylim(0, max([*every_value, 1.0]) * 1.12)
        ax.set_xlabel("time (UTC)")
        ax.set_ylabel("single-node busbw (GB/s)")
        ax.set_title(f"Pool {pool}: each node's single-node busbw over time")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower left", fontsize=9, framealpha=0.9)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


# --- the table of one node -----------------------------------------------------------------------


def node_table(records: Sequence[Mapping]) -> tuple[list[str], list[list]]:
    """(headers, rows) of one node's history: one row per record, the figures any record has as columns."""
    figures = [f for f in FIGURES if any(f in (r.get("figures") or {}) for r in records)]
    diag = any(r.get("dcgm_diag") for r in records)
    links = any(r.get("link_errors") for r in records)
    headers = [
        "time",
        "kind",
        "run",
        "pool",
        "verdict",
        *figures,
        *(["GPU diagnostics"] if diag else []),
        *(["link errors"] if links else []),
        "valid until / named",
    ]
    rows = []
    for r in records:
        f = r.get("figures") or {}
        rows.append(
            [
                r.get("time"),
                r.get("kind"),
                r.get("run"),
                r.get("pool"),
                r.get("verdict"),
                *[f.get(k) for k in figures],
                *([diag_cell(r.get("dcgm_diag"))] if diag else []),
                *([r.get("link_errors")] if links else []),
                r.get("valid_until") or (", ".join(r.get("codes") or []) if r.get("codes") else None),
            ]
        )
    return headers, rows


# --- expiry ----------------------------------------------------------------------------------------


def parse_slurm_mark(extra: str | None) -> str | None:
    """The date of ``accepted_until=YYYY-MM-DD`` in a Slurm node's Extra field, or None."""
    for part in re.split(r"[\s,]+", extra or ""):
        key, _, value = part.partition("=")
        if key == SLURM_KEY and _DATE.fullmatch(value):
            return value
    return None


def slurm_marks(scontrol_oneliner: str) -> dict[str, str | None]:
    """node -> its mark's date (or None), from ``scontrol show node -o`` (one node per line)."""
    out: dict[str, str | None] = {}
    for line in scontrol_oneliner.splitlines():
        m = re.match(r"^NodeName=(\S+)", line.strip())
        if not m:
            continue
        extra = re.search(r"(?:^|\s)Extra=(\S*)", line)
        out[m.group(1)] = parse_slurm_mark(extra.group(1) if extra else None)
    return out


def k8s_marks(nodes: Mapping) -> dict[str, str | None]:
    """node -> its label's date (or None), from ``kubectl get nodes -o json``."""
    out: dict[str, str | None] = {}
    for item in (nodes or {}).get("items") or []:
        meta = item.get("metadata") or {} if isinstance(item, Mapping) else {}
        if meta.get("name"):
            value = str((meta.get("labels") or {}).get(K8S_LABEL) or "")
            out[meta["name"]] = value if _DATE.fullmatch(value) else None
    return out


def expiry(marks: Mapping[str, str | None], today: str | None = None) -> dict[str, dict]:
    """host -> ``{valid_until, status}``: ``valid`` (until today included), ``expired`` or ``none`` (no mark)."""
    today = today or datetime.now(UTC).date().isoformat()
    out = {}
    for host, until in marks.items():
        if not until:
            out[host] = {"valid_until": None, "status": "none"}
        else:
            out[host] = {"valid_until": until, "status": "valid" if until >= today else "expired"}
    return out
