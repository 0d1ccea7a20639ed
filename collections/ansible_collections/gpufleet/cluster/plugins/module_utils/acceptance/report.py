# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The NCCL acceptance report: ``acceptance.json``, ``acceptance.md`` and one busbw plot per run.

Controller-side. :func:`build_report` is pure (plain dicts in, one dict out);
:func:`render_markdown` is pure; :func:`write_report` writes the files under
``<base>/<cluster>/<timestamp>/``. matplotlib is imported only to draw the
plots, so this module imports without it (the plots are then skipped and the
report says so).

A run record (what the playbook collects per test) is::

    {"label": "all-nodes" | "single-node gpu01" | "pair gpu01+gpu02",
     "scope": "single-node" | "multi-node" | "bisect",
     "host": "gpu01" | None,            # single-node runs
     "floor_gbps": 440, "limit_gbps": 450,
     "run": <a run from nccl_tests.parse> | None,
     "rc": the launcher's exit status (optional),
     "ended": how the run ended, run.run_end's dict (optional; derived from rc and run without it),
     "nodes": the nodes of a multi-node or bisect run (optional),
     "violations": the run's own violations (optional; the JUnit XML attributes them to its nodes),
     "log": "path of the raw log" (optional),
     "p2p": <the node's nvbandwidth record, acceptance/p2p.py> (single-node runs, optional),
     "collective": "all_gather" | "alltoall" (optional; all_reduce without it)}

Runs of the collectives beyond all_reduce count in the verdict and in a node's acceptance like
all_reduce's; the outliers, the quote and the history compare all_reduce figures only.

Bisect runs are diagnostics: shown, plotted, never counted in the verdict.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.link_errors import (
    render_markdown as render_link_errors,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.nccl import (
    FAIL,
    PASS,
    human_size,
    summarize_run,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.outliers import judge as judge_outliers
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.quote import compare as compare_quote
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import COMPLETED, run_end
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.atomic import write_atomic
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.junit import case, junit_xml
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, sort_key

SCHEMA = "gpufleet.nccl-acceptance/1"
# Every node that was measured passed, but a node of the brief was not accepted in this run
# (left out by --limit, unreachable, or failed an earlier stage): never a plain pass.
PARTIAL = "partial"
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def timestamp_now() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def slug(label: str) -> str:
    return _SLUG.sub("-", label).strip("-") or "run"


def _ended(record: dict, run: dict | None) -> dict:
    """How the record's run ended: the record's own ``ended``, else from its exit status and table."""
    ended = record.get("ended")
    if isinstance(ended, dict) and ended.get("status"):
        return ended
    return run_end({"runs": [run] if run and run.get("rows") else []}, record.get("rc"))


def _run_entry(record: dict) -> dict:
    run = record.get("run") or None
    summary = summarize_run(run) if run else summarize_run({})
    floor = record.get("floor_gbps")
    busbw = summary["busbw_largest"]
    ended = _ended(record, run)
    if (
        run is None
        or not run.get("rows")
        or ended["status"] != COMPLETED
        or (floor is not None and (busbw is None or busbw < float(floor)))
        or summary["wrong_total"]
        or (run.get("out_of_bounds") or 0) > 0
    ):
        result = FAIL
    else:
        result = PASS
    label = record.get("label") or "run"
    return {
        "label": label,
        "slug": slug(label),
        "scope": record.get("scope") or "multi-node",
        # all_reduce, or a collective beyond it (all_gather, alltoall; acceptance/collectives.py).
        "collective": record.get("collective") or "all_reduce",
        "host": record.get("host"),
        "floor_gbps": floor,
        "limit_gbps": record.get("limit_gbps"),
        "result": result,
        # How the run ended: status (completed, failed, timed out, killed, incomplete, no table),
        # the launcher's exit status and the first failure line it printed.
        "ended": {k: ended.get(k) for k in ("status", "rc", "signal", "failure", "hosts", "detail")},
        "nodes": list(record.get("nodes") or []),
        "violations": list(record.get("violations") or []),
        "log": record.get("log"),
        "p2p": record.get("p2p") or None,
        "dcgm_diag": record.get("dcgm_diag") or None,
        **summary,
        "run": run,
    }


def build_report(
    cluster: str,
    *,
    runs: Sequence[dict],
    debug: Sequence[dict] = (),
    nodes: Sequence[dict] = (),
    violations: Sequence[dict] = (),
    bisect: dict | None = None,
    drained: Iterable[str] = (),
    floors: dict | None = None,
    limits: dict | None = None,
    versions: dict | None = None,
    timestamp: str | None = None,
    storage: Sequence[dict] = (),
    workload: dict | None = None,
    nccl: bool = True,
    not_accepted: Sequence[dict] = (),
    brief: dict | None = None,
    link_errors: Sequence[dict] = (),
    rdma_pairs: Sequence[dict] = (),
) -> dict:
    """Everything the report shows, as one JSON-able dict. Pure.

    ``nodes``: ``{"host", "versions": {"driver": ..., "cuda": ..., "nccl": ...}, "status"?}``;
    ``floors``: the brief's ``acceptance`` block; ``limits``: ``{"single_node_gbps", "multi_node_gbps"}``;
    ``versions``: the brief's pins (``software``), shown beside what nodes report.
    ``not_accepted``: ``{"host", "reason"}`` for each node of the brief that this run did not measure.
    The verdict fails on any error violation or any single-/multi-node run that failed its gate; it is
    ``partial`` when nothing failed but ``not_accepted`` names a node.
    ``link_errors``: each node's link error counters record (acceptance/link_errors.py), shown in its
    section; their violations come in ``violations``.
    ``brief``: the topology brief; with it the report judges each node against its pool
    (``outliers``, acceptance_outliers.py) and sets the provider's quote beside the brief and the
    measurement (``quote``, acceptance_quote.py), their violations joining ``violations``.
    ``rdma_pairs``: each pool's per-rail RDMA pairs record (acceptance/rdma_pairs.py); its violations
    come in ``violations`` with the others.
    """
    entries = [_run_entry(r) for r in runs]
    drained = sorted(set(drained))
    quote_section: list[dict] = []
    outlier_section: list[dict] = []
    if brief:
        quote_section, found = compare_quote(brief, nodes=nodes, runs=entries, debug=debug)
        pools = {n.get("host"): n.get("pool") for n in nodes if n.get("host") and n.get("pool")}
        outlier_section, more = judge_outliers(brief, pools=pools, runs=entries, storage=storage)
        violations = [*violations, *found, *more]
    violations = sorted(violations, key=sort_key)
    errors = sum(1 for v in violations if v.get("severity") == ERROR)
    warnings = sum(1 for v in violations if v.get("severity") == WARNING)
    gated_fail = any(e["result"] == FAIL for e in entries if e["scope"] != "bisect")
    # Storage / workload: their violations are in ``violations``; ``nccl`` False when the NCCL
    # phases were not selected (tags), so an empty Runs table is not a failure, but testing nothing is.
    storage = [dict(r) for r in storage]
    tested = bool(entries or storage or (workload and not workload.get("skipped")) or rdma_pairs)
    verdict = FAIL if errors or gated_fail or (nccl and not entries) or not tested else PASS
    not_accepted = [dict(n) for n in not_accepted]
    if verdict == PASS and not_accepted:
        verdict = PARTIAL
    node_rows = []
    for node in nodes:
        host = node.get("host")
        status = node.get("status") or ("drained" if host in drained else "ok")
        node_rows.append({**node, "status": status})
    known = {n["host"] for n in node_rows}
    node_rows.extend({"host": h, "status": "drained", "versions": {}} for h in drained if h not in known)
    known |= set(drained)
    node_rows.extend(
        {"host": n["host"], "status": "not accepted", "versions": {}} for n in not_accepted if n["host"] not in known
    )
    return {
        "schema": SCHEMA,
        "cluster": cluster,
        "timestamp": timestamp or timestamp_now(),
        "verdict": verdict,
        "counts": {"errors": errors, "warnings": warnings, "runs": len(entries)},
        "floors": dict(floors or {}),
        "limits": dict(limits or {}),
        "versions": dict(versions or {}),
        "nodes": node_rows,
        "runs": entries,
        "transport": list(debug),
        "bisect": bisect,
        "drained": drained,
        "not_accepted": not_accepted,
        "violations": violations,
        "nccl_run": bool(nccl),
        "storage": storage,
        "workload": dict(workload) if workload else None,
        "quote": quote_section,
        "outliers": outlier_section,
        "link_errors": [dict(r) for r in link_errors],
        "rdma_pairs": [dict(r) for r in rdma_pairs],
    }


def not_accepted(
    brief_nodes: Sequence[str],
    *,
    tested: Sequence[str],
    run_nodes: Sequence[str] | None = None,
    failed_earlier: Sequence[str] = (),
    excluded: dict | None = None,
) -> list[dict]:
    """``{"host", "reason"}`` for each node of the brief this acceptance did not test. Pure.

    ``tested``: the nodes the acceptance ran on; ``run_nodes``: the hosts the run covered (its
    ``--limit``; None: all); ``failed_earlier``: hosts of the run that failed or were unreachable
    in an earlier stage; ``excluded``: reasons the caller knows better (host -> reason), e.g. the
    CLI's "unreachable in the GPU stack stage".
    """
    excluded = excluded or {}
    tested_set, failed = set(tested), set(failed_earlier)
    covered = None if run_nodes is None else set(run_nodes)
    out = []
    for host in dict.fromkeys(brief_nodes):
        if host in tested_set:
            continue
        if excluded.get(host):
            reason = str(excluded[host])
        elif host in failed:
            reason = "failed or unreachable in an earlier stage of this run"
        elif covered is not None and host not in covered:
            reason = "not in this run (outside its --limit)"
        else:
            reason = "not in this run"
        out.append({"host": host, "reason": reason})
    return out


# --- Markdown ----------------------------------------------------------------------


def _cell(value) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "-"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(headers: Sequence[str], rows: Iterable[Sequence]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(report: dict) -> str:
    """The human report: verdict first, then runs, nodes, transport, bisect, violations, plots."""
    out: list[str] = []
    verdict = report["verdict"].upper()
    counts = report.get("counts", {})
    out.append(f"# NCCL acceptance: {report['cluster']}")
    out.append("")
    out.append(
        f"**Verdict: {verdict}** ({counts.get('errors', 0)} errors, {counts.get('warnings', 0)} warnings), "
        f"{report['timestamp']}"
    )
    out.append("")
    errors = [v for v in report.get("violations", []) if v.get("severity") == ERROR]
    for v in errors[:10]:
        where = f"{v['host']}: " if v.get("host") else ""
        out.append(f"- **{v['code']}** {where}{v['message']}")
    if len(errors) > 10:
        out.append(f"- ... and {len(errors) - 10} more (see Violations)")
    if report.get("drained"):
        out.append(f"- Drained: {', '.join(report['drained'])}")
    not_accepted = report.get("not_accepted") or []
    for n in not_accepted:
        out.append(f"- **Not accepted in this run**: {n['host']}: {n.get('reason') or 'not measured'}")
    if errors or report.get("drained") or not_accepted:
        out.append("")

    if report.get("nccl_run") is False:
        out.append("_NCCL phases not run in this invocation (tags): the NCCL sections below are empty._")
        out.append("")

    floors = report.get("floors") or {}
    if floors:
        out.append("Brief: " + ", ".join(f"{k} = {v}" for k, v in floors.items() if not isinstance(v, dict)))
        out.append("")

    out.append("## Runs")
    out.append("")
    out.append(
        "busbw is gated out-of-place at the largest message size; peak is the max over all rows; "
        "avg is nccl-tests' mean over all sizes (not a gate); latency is the time of the smallest size."
    )
    out.append("")
    rows = []
    for e in report.get("runs", []):
        run = e.get("run") or {}
        rows.append(
            [
                e["label"],
                e["scope"],
                run.get("hosts"),
                run.get("ranks"),
                human_size(e.get("largest_size")),
                e.get("busbw_largest"),
                e.get("floor_gbps"),
                e.get("limit_gbps"),
                e.get("peak_busbw"),
                e.get("avg_busbw"),
                f"{e['latency_us']:.1f} us @ {human_size(e['smallest_size'])}" if e.get("latency_us") else None,
                e.get("wrong_total"),
                _ended_cell(e.get("ended")),
                e["result"].upper(),
            ]
        )
    out += _table(
        [
            "run",
            "scope",
            "hosts",
            "ranks",
            "largest",
            "busbw (GB/s)",
            "floor",
            "limit",
            "peak",
            "avg",
            "latency",
            "#wrong",
            "ended",
            "result",
        ],
        rows,
    )
    out.append("")
    failed = [e for e in report.get("runs", []) if (e.get("ended") or {}).get("failure")]
    if failed:
        out.append("Failure lines (the first each run printed; its log has the rest):")
        out.append("")
        for e in failed:
            out.append(f"- {e['label']}: `{_cell(e['ended']['failure']).replace('`', chr(39))}`")
        out.append("")
    out += render_p2p(report)
    out += render_dcgm_diag(report)
    out += render_collectives(report)
    out += render_link_errors(report)
    out += render_rdma_pairs(report)

    nodes = report.get("nodes") or []
    if nodes:
        out.append("## Nodes")
        out.append("")
        keys: list[str] = []
        for n in nodes:
            for k in n.get("versions") or {}:
                if k not in keys:
                    keys.append(k)
        pins = report.get("versions") or {}
        header = ["host", "status", *keys]
        body = [[n.get("host"), n.get("status"), *[(n.get("versions") or {}).get(k) for k in keys]] for n in nodes]
        if pins and keys:
            body.insert(0, ["(brief pins)", "", *[pins.get(k) for k in keys]])
        out += _table(header, body)
        out.append("")

    transport = report.get("transport") or []
    out.append("## Transport evidence (NCCL_DEBUG=INFO)")
    out.append("")
    if transport:
        out += _table(
            ["source", "NCCL", "network", "NET/IB devices", "GDR", "NVLS", "socket fall-back", "channels"],
            [
                [
                    os.path.basename(d.get("file") or "") or "-",
                    d.get("nccl_version"),
                    d.get("network"),
                    d.get("ib_devices"),
                    d.get("gdr"),
                    d.get("nvls"),
                    d.get("socket_fallback"),
                    ", ".join(f"{k} x{v}" for k, v in (d.get("transports") or {}).items()),
                ]
                for d in transport
            ],
        )
    else:
        out.append("No NCCL_DEBUG=INFO lines were collected.")
    out.append("")

    plan = report.get("bisect")
    if plan:
        out.append("## Bisect")
        out.append("")
        out.append(f"{plan.get('reason', '')}.")
        out.append("")
        if plan.get("slow_nodes"):
            out.append(f"- Slow node(s): {', '.join(plan['slow_nodes'])}")
        for link in plan.get("slow_links") or []:
            out.append(f"- Slow link: {' - '.join(link)}")
        for group in plan.get("slow_groups") or []:
            out.append(f"- Slow group: {', '.join(group)}")
        tests = plan.get("tests") or []
        if tests:
            out.append("")
            out += _table(
                ["round", "nodes", "busbw (GB/s)"],
                [[t.get("round"), " + ".join(t.get("nodes") or []), t.get("busbw")] for t in tests],
            )
        out.append("")

    out.append("## Drained nodes")
    out.append("")
    out.append(", ".join(report["drained"]) if report.get("drained") else "None.")
    out.append("")
    out += render_breaker(report)

    out += render_storage_workload(report)
    out += render_outliers(report)
    out += render_history(report)
    out += render_quote(report)

    viols = report.get("violations") or []
    if viols:
        out.append("## Violations")
        out.append("")
        out += _table(
            ["severity", "code", "host", "field", "message"],
            [[v.get("severity"), v.get("code"), v.get("host"), v.get("field"), v.get("message")] for v in viols],
        )
        out.append("")

    plots = [e for e in report.get("runs", []) if e.get("plot")]
    if plots:
        out.append("## Plots")
        out.append("")
        for e in plots:
            out.append(f"![busbw vs message size, {e['label']}]({e['plot']})")
            out.append("")
    skipped = report.get("plot_error")
    if skipped:
        out.append(f"_Plots skipped: {skipped}_")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _ended_cell(ended: dict | None) -> str | None:
    """``completed (exit 0)``, ``failed (exit 2)``, ``killed (signal 9)``, ``timed out (exit 124)``."""
    if not ended:
        return None
    rc, signal = ended.get("rc"), ended.get("signal")
    how = f"signal {signal}" if signal else (f"exit {rc}" if rc is not None else "exit status not known")
    return f"{ended.get('status')} ({how})"


def render_collectives(report: dict) -> list[str]:
    """The runs of all_gather and alltoall (acceptance/collectives.py), one table per collective;
    nothing when the brief gates none."""
    runs = [e for e in report.get("runs", []) if e.get("collective") not in (None, "all_reduce")]
    if not runs:
        return []
    out = ["## Collectives beyond all_reduce", ""]
    out.append(
        "Judged like all_reduce against their own floors (acceptance.collectives); a pool run below its floor "
        "is not bisected, its nodes are named."
    )
    out.append("")
    for name in dict.fromkeys(e["collective"] for e in runs):
        out.append(f"### {name}")
        out.append("")
        rows = [
            [
                e["label"],
                e["scope"],
                e.get("host") or ", ".join(e.get("nodes") or []),
                human_size(e.get("largest_size")),
                e.get("busbw_largest"),
                e.get("floor_gbps"),
                e.get("limit_gbps"),
                _ended_cell(e.get("ended")),
                e["result"].upper(),
            ]
            for e in runs
            if e["collective"] == name
        ]
        out += _table(["run", "scope", "nodes", "largest", "busbw (GB/s)", "floor", "limit", "ended", "result"], rows)
        out.append("")
    return out


def render_p2p(report: dict) -> list[str]:
    """Each node's GPU-to-GPU copies (nvbandwidth, acceptance/p2p.py) beside its single-node busbw;
    nothing when no single-node run carries a p2p record."""
    singles = [e for e in report.get("runs", []) if e.get("scope") == "single-node" and e.get("p2p")]
    if not singles:
        return []
    out = ["## GPU-to-GPU copies (nvbandwidth)", ""]
    rows = []
    for e in singles:
        p = e["p2p"]
        measured = p.get("status") == "measured"
        rows.append(
            [
                e.get("host"),
                e.get("busbw_largest"),
                p.get("testcase"),
                p.get("status") if measured else f"{p.get('status')}: {p.get('reason') or ''}".rstrip(": "),
                f"{p['min_gbps']:.2f} ({p.get('min_pair')})" if measured and p.get("min_gbps") is not None else None,
                f"{p['sum_gbps']:.2f}" if measured and p.get("sum_gbps") is not None else None,
                len(p.get("unmeasured") or []) if measured else None,
            ]
        )
    out += _table(
        ["host", "busbw (GB/s)", "testcase", "status", "weakest pair (GB/s)", "sum (GB/s)", "pairs N/A"], rows
    )
    out.append("")
    return out


def render_dcgm_diag(report: dict) -> list[str]:
    """Each node's GPU diagnostics (dcgmi diag, acceptance/dcgm_diag.py): its level, verdict, the tests
    run and each failed or warning test with its GPU; nothing when no single-node run carries one."""
    singles = [e for e in report.get("runs", []) if e.get("scope") == "single-node" and e.get("dcgm_diag")]
    if not singles:
        return []
    out = ["## GPU diagnostics (dcgmi diag)", ""]
    rows = []
    for e in singles:
        d = e["dcgm_diag"]
        named = "; ".join(
            f"{'node' if f.get('gpu') is None else 'GPU ' + str(f['gpu'])} {f.get('test')} {f.get('status')}"
            + (f": {' | '.join(f.get('warnings') or [])[:160]}" if f.get("warnings") else "")
            for f in (d.get("failures") or []) + (d.get("warnings") or [])
        )
        tests = d.get("tests") or []
        rows.append(
            [
                e.get("host"),
                d.get("level"),
                d.get("version"),
                d.get("status") if d.get("status") != "error" else f"error: {d.get('reason') or ''}",
                f"{len(tests)} ({', '.join(t.get('name') or '' for t in tests)})" if tests else None,
                named or None,
            ]
        )
    out += _table(["host", "level", "DCGM", "status", "tests", "failed / warned (GPU, test)"], rows)
    out.append("")
    return out


def render_rdma_pairs(report: dict) -> list[str]:
    """Each pool's per-rail RDMA pairs (ib_write_bw, acceptance/rdma_pairs.py): every port with its
    weakest and best figure over its partners and its verdict, then every rail of a pair below the floor or
    failed; nothing when no pool ran them."""
    records = report.get("rdma_pairs") or []
    if not records:
        return []
    out = ["## Per-rail RDMA pairs (ib_write_bw)", ""]
    for rec in records:
        pairs = rec.get("pairs") or []
        floor = rec.get("floor_gbit")
        out.append(
            f"Pool {rec.get('pool')}: mode {rec.get('mode')}, {rec.get('rounds')} round(s), {len(pairs)} rail run(s), "
            f"GPUDirect {'on' if rec.get('gpudirect') else 'off'}, floor "
            + (f"{floor:g} Gb/s per port ({rec.get('floor_how')})." if floor is not None else "none.")
        )
        out.append("")
        rows = [
            [
                p.get("host"),
                p.get("rail"),
                p.get("device"),
                p.get("partners"),
                p.get("min_gbit"),
                p.get("best_gbit"),
                p.get("verdict"),
                p.get("slow_with"),
                p.get("failed_with"),
            ]
            for p in rec.get("ports") or []
        ]
        out += _table(
            [
                "host",
                "rail",
                "device",
                "partners",
                "weakest (Gb/s)",
                "best (Gb/s)",
                "verdict",
                "slow with",
                "failed with",
            ],
            rows,
        )
        out.append("")
        bad = [
            p
            for p in pairs
            if p.get("status") != "measured" or (floor is not None and p.get("average_gbit", 0) < floor)
        ]
        if bad:
            out.append("Below the floor or failed (client -> server):")
            out.append("")
            out += _table(
                ["round", "rail", "client", "server", "Gb/s", "status"],
                [
                    [
                        p.get("round"),
                        p.get("rail"),
                        f"{p.get('client')} {p.get('client_device')}",
                        f"{p.get('server')} {p.get('server_device')}",
                        p.get("average_gbit"),
                        p.get("status") if p.get("status") == "measured" else f"failed: {p.get('reason')}",
                    ]
                    for p in bad
                ],
            )
            out.append("")
        if rec.get("skipped"):
            out.append(
                "Not run: "
                + "; ".join(f"{s['server']}-{s['client']} rail {s['rail']} ({s['why']})" for s in rec["skipped"])
            )
            out.append("")
    return out


def render_outliers(report: dict) -> list[str]:
    """Each pool's figures against its median (acceptance_outliers.py); nothing when no pool had two nodes."""
    section = report.get("outliers") or []
    if not section:
        return []
    out = ["## Outliers within a pool", ""]
    rows = []
    for s in section:
        named = ", ".join(
            f"{o['host']} {o['value']:.4g} ({-o['deviation'] if s['unit'] != 's' else o['deviation']:+.1%})"
            for o in s["outliers"]
        )
        rows.append([s["pool"], s["metric"], s["nodes"], f"{s['median']:.4g} {s['unit']}", f"{s['mad']:.3g}", named])
    out += _table(["pool", "figure", "nodes", "median", "MAD", "outliers"], rows)
    out.append("")
    return out


def accepted_nodes(report: dict) -> list[str]:
    """The nodes this report accepts: a passing single-node run, no error violation, not drained, and a
    verdict of pass or partial (a failed run accepts no node)."""
    if report.get("verdict") not in (PASS, PARTIAL):
        return []
    bad = {v.get("host") for v in report.get("violations") or [] if v.get("severity") == ERROR}
    bad |= set(report.get("drained") or [])
    singles: dict[str, bool] = {}
    for e in report.get("runs") or []:
        if e.get("scope") == "single-node" and e.get("host"):
            singles[e["host"]] = singles.get(e["host"], True) and e.get("result") == PASS
    return [
        n["host"]
        for n in report.get("nodes") or []
        if n.get("host") and n["host"] not in bad and singles.get(n["host"]) and n.get("status") in ("pass", "ok")
    ]


def add_history(report: dict, past: Sequence[dict], brief: dict | None = None) -> list[dict]:
    """Judge each node measured here against its own history (acceptance_history.py) and add the
    ``history`` section: trends, ``NODE_DEGRADED`` violations (the verdict fails on an error one), the
    nodes accepted and the date their acceptance is valid until, and each pool's busbw series for its
    plot. ``past``: the store's records before this run. Returns this run's records for the store."""
    rule = history.settings(brief)
    new = history.acceptance_records(report, accepted_nodes(report), rule["valid_days"])
    trend, found = history.trends([*past, *new], brief)
    mine = {r["host"] for r in new}
    found = [v for v in found if v.get("host") in mine]
    if found:
        report["violations"] = sorted([*report.get("violations", []), *found], key=sort_key)
        errors = sum(1 for v in report["violations"] if v.get("severity") == ERROR)
        warnings = sum(1 for v in report["violations"] if v.get("severity") == WARNING)
        report["counts"] = dict(report.get("counts") or {}, errors=errors, warnings=warnings)
        if errors:
            report["verdict"] = FAIL
    accepted = accepted_nodes(report)
    new = history.acceptance_records(report, accepted, rule["valid_days"])
    pools = {r.get("pool") for r in new}
    series = {
        p: s for p, s in history.busbw_series([*past, *new]).items() if p in pools or (p == "no pool" and None in pools)
    }
    report["history"] = {
        "max_degradation_pct": rule["max_degradation_pct"],
        "severity": rule["severity"],
        "valid_days": rule["valid_days"],
        "valid_until": history.valid_until(history.stamp_time(report.get("timestamp")), rule["valid_days"]),
        "accepted": accepted,
        "trends": [t for t in trend if t["host"] in mine],
        "series": series,
    }
    return new


def render_history(report: dict) -> list[str]:
    """Each node's trend since its first acceptance, the nodes degraded, the date acceptance is valid until."""
    section = report.get("history")
    if not section:
        return []
    out = ["## History", ""]
    accepted = section.get("accepted") or []
    out.append(
        f"Accepted in this run: {', '.join(accepted) or 'none'}"
        + (f"; valid until {section.get('valid_until')} ({section.get('valid_days')} days)" if accepted else "")
        + f". A node worse than at its first acceptance by more than {section.get('max_degradation_pct'):g} % "
        f"is NODE_DEGRADED ({'an error' if section.get('severity') == 'fail' else 'a warning'})."
    )
    out.append("")
    rows = [
        [t["host"], t.get("pool"), t["figure"], t["text"], t["runs"], f"{(-t['change'] or 0.0):+.1%}", t["degraded"]]
        for t in section.get("trends") or []
    ]
    if rows:
        out += _table(["node", "pool", "figure", "trend", "runs", "change", "degraded"], rows)
        out.append("")
    for plot in section.get("plots") or []:
        out.append(f"![single-node busbw over time, pool {plot['pool']}]({plot['file']})")
        out.append("")
    return out


def render_quote(report: dict) -> list[str]:
    """Per pool with a quote: quoted, in the brief, measured, and each difference (acceptance_quote.py)."""
    section = report.get("quote") or []
    if not section:
        return []
    out = ["## Provider's quote", ""]
    for entry in section:
        source = f" ({entry['source']})" if entry.get("source") else ""
        out.append(f"### {entry['pool']}{source}")
        out.append("")
        rows = [
            [
                r["field"],
                r["quote"],
                r["brief"],
                ", ".join(map(str, r["measured"])) if isinstance(r["measured"], list) else r["measured"],
                "; ".join(r["differences"]) or "none",
            ]
            for r in entry["rows"]
        ]
        out += _table(["field", "quoted", "brief", "measured", "differences"], rows)
        out.append("")
    return out


def render_breaker(report: dict) -> list[str]:
    """The drain breaker's section (module_utils/ops/drain_breaker.py): whether it let this run drain, and
    per pool the nodes to drain, those already out of service and the limit. Absent when the drain step
    did not run."""
    breaker = report.get("breaker")
    if not isinstance(breaker, dict):
        return []
    if breaker.get("forced"):
        state = "tripped, overridden by force: the nodes were drained"
    elif breaker.get("tripped"):
        state = "TRIPPED: no node was drained"
    else:
        state = "closed: the drain went ahead"
    share = float(breaker.get("share") or 0) * 100
    out = [
        "## Drain breaker",
        "",
        f"**{state}**. One run may leave at most {share:g} % of a pool's nodes out of service (rounded up, counting "
        "the nodes already drained or down), never the pool's last node in service.",
        "",
    ]
    rows = [
        [
            r.get("pool"),
            r.get("size"),
            r.get("limit"),
            r.get("out_of_service"),
            r.get("to_drain"),
            r.get("out_after"),
            "TRIPPED" if r.get("tripped") else "ok",
        ]
        for r in breaker.get("pools") or []
        if isinstance(r, dict)
    ]
    if rows:
        out += _table(["pool", "nodes", "limit", "out of service before", "to drain", "out after", "breaker"], rows)
    else:
        out.append("Nothing to drain.")
    out.append("")
    return out


# --- storage and workload sections -------------------------------------------------------------


def _result(errors: bool) -> str:
    return "FAIL" if errors else "PASS"


def render_storage_workload(report: dict) -> list[str]:
    """The Storage and Workload sections (absent when neither was run)."""
    out: list[str] = []
    storage = report.get("storage") or []
    floors = next((r["floors"] for r in storage if isinstance(r.get("floors"), dict)), None)
    if floors is None:
        floors = (report.get("floors") or {}).get("storage") or {}
    if storage:
        out.append("## Storage")
        out.append("")
        out.append(
            "fio sequential write then read (GB/s = 1e9 bytes/s) of the scratch and each mounted shared file "
            "system, then a checkpoint round trip (write + fsync, caches dropped where permitted, read back, "
            "sha256). Floors: " + (", ".join(f"{k} = {v}" for k, v in floors.items()) or "none (measured only)") + "."
        )
        out.append("")
        rows = []
        for rec in storage:
            errs = [v for v in rec.get("violations") or [] if v.get("severity") == ERROR]
            for t in rec.get("targets") or []:
                rows.append(
                    [
                        rec.get("host"),
                        t.get("kind") if t.get("kind") == "scratch" else f"shared[{t.get('index', 0)}]",
                        t.get("path"),
                        t.get("status"),
                        (t.get("write") or {}).get("gbps"),
                        (t.get("read") or {}).get("gbps"),
                        {True: "O_DIRECT", False: "buffered"}.get(t.get("direct"), "-"),
                        t.get("note"),
                    ]
                )
            if rec.get("skipped"):
                rows.append([rec.get("host"), "-", "-", "skipped", None, None, "-", rec["skipped"]])
            rec["_result"] = _result(bool(errs))
        out += _table(["host", "what", "path", "status", "write GB/s", "read GB/s", "I/O", "note"], rows)
        out.append("")
        ckpts = [(r.get("host"), r.get("checkpoint"), r.get("_result")) for r in storage if r.get("checkpoint")]
        if ckpts:
            out += _table(
                [
                    "host",
                    "checkpoint",
                    "GiB",
                    "status",
                    "write s",
                    "read (restore) s",
                    "read GB/s",
                    "sha256",
                    "caches",
                    "node",
                ],
                [
                    [
                        host,
                        c.get("path") or c.get("directory"),
                        (c.get("size_bytes") or 0) / (1 << 30),
                        c.get("status"),
                        c.get("write_s"),
                        c.get("read_s"),
                        c.get("read_gbps"),
                        None if c.get("verified") is None else ("verified" if c.get("verified") else "MISMATCH"),
                        "dropped" if c.get("caches_dropped") else (c.get("note") or "not dropped"),
                        result,
                    ]
                    for host, c, result in ckpts
                ],
            )
            out.append("")
        for rec in storage:
            rec.pop("_result", None)
    workload = report.get("workload")
    if workload:
        out.append("## Workload")
        out.append("")
        spec = workload.get("spec") or {}
        if workload.get("skipped"):
            out.append(f"Not run: {workload['skipped']}.")
            out.append("")
            return out
        jobs = workload.get("jobs") or []
        if workload.get("control_plane") == "kubernetes":
            out += _k8s_workload(workload, spec, jobs)
            return out
        out.append(
            f"`{spec.get('command')}` on partition {spec.get('partition') or '-'}"
            + (f", image `{spec['image']}`" if spec.get("image") else ", the host's stack")
            + f"; ran {spec.get('window_minutes')} min, killed (scancel), resubmitted"
            + ("" if spec.get("shared") else " to the same node (checkpoints on its own disk)")
            + "."
        )
        out.append("")
        out += _table(
            ["measure", "value", "floor / ceiling"],
            [
                [
                    "throughput (median samples/s)",
                    workload.get("throughput_samples_per_s"),
                    spec.get("min_samples_per_s"),
                ],
                ["progress lines", workload.get("throughput_lines"), None],
                ["steps before the kill", workload.get("steps_first_job"), None],
                ["last checkpoint step", workload.get("last_checkpoint_step"), None],
                ["resumed at step", workload.get("resumed_step"), "> 0"],
                ["restore: resubmission to first step (s)", workload.get("restore_s"), spec.get("max_restore_s")],
                ["jobs", ", ".join(f"{j.get('job_id')}@{j.get('node')}" for j in jobs if j.get("job_id")), None],
                ["result", str(workload.get("verdict") or "-").upper(), None],
            ],
        )
        out.append("")
    return out


def _k8s_workload(workload: dict, spec: dict, jobs: list) -> list[str]:
    """The Workload section of a Kubernetes brief: the Job through Kueue, its pod deleted, the new pod."""
    job = workload.get("job") or {}
    adm = workload.get("admission") or {}
    out = [
        f"`{spec.get('command')}` as Job {job.get('namespace')}/{job.get('name')} (queue {job.get('queue')}, "
        f"ClusterQueue {adm.get('cluster_queue') or '-'}) on pool {spec.get('partition') or '-'}"
        + (f", image `{spec['image']}`" if spec.get("image") else "")
        + f"; trained {spec.get('window_minutes')} min in all, its pod deleted halfway (kubectl delete pod), "
        "the Job's new pod resumed"
        + ("" if spec.get("shared") else " on the same node (checkpoints on its own disk)")
        + ".",
        "",
    ]
    out += _table(
        ["measure", "value", "floor / ceiling"],
        [
            ["queue wait: Kueue admission less creation (s)", workload.get("queue_wait_s"), None],
            ["throughput (median samples/s)", workload.get("throughput_samples_per_s"), spec.get("min_samples_per_s")],
            ["progress lines", workload.get("throughput_lines"), None],
            ["steps before the deletion", workload.get("steps_first_job"), None],
            ["last checkpoint step", workload.get("last_checkpoint_step"), None],
            ["resumed at step", workload.get("resumed_step"), "> 0"],
            ["restore: deletion to first step (s)", workload.get("restore_s"), spec.get("max_restore_s")],
            ["pods", ", ".join(f"{j.get('pod')}@{j.get('node')}" for j in jobs if j.get("pod")), None],
            ["Job complete", workload.get("job_complete"), None],
            ["result", str(workload.get("verdict") or "-").upper(), None],
        ],
    )
    out.append("")
    return out


# --- plot --------------------------------------------------------------------------


def _size_label(n: float) -> str:
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div:
            value = n / div
            return f"{value:g}{unit}"
    return f"{int(n)}"


def plot_run(entry: dict, path: str) -> str:
    """Draw busbw vs message size for one run entry (of :func:`build_report`) into ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    # A log scale has no place for 0 bytes: all_gather and alltoall print rows of size 0 where a rank's
    # share of a small message rounds down to nothing (8 bytes over 16 ranks); they are not drawn.
    rows = sorted(
        (r for r in (entry.get("run") or {}).get("rows") or [] if (r.get("size") or 0) > 0), key=lambda r: r["size"]
    )
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    try:
        sizes = [r["size"] for r in rows]
        oop = [r.get("oop_busbw") for r in rows]
        ip = [r.get("ip_busbw") for r in rows]
        if any(v is not None for v in oop):
            ax.plot(
                sizes,
                [math.nan if v is None else v for v in oop],
                "o-",
                color="#1f77b4",
                lw=2,
                ms=4,
                label="busbw out-of-place",
            )
        if any(v is not None for v in ip):
            ax.plot(
                sizes,
                [math.nan if v is None else v for v in ip],
                "s--",
                color="#9ecae1",
                lw=1.2,
                ms=3,
                label="busbw in-place",
            )
        floor = entry.get("floor_gbps")
        limit = entry.get("limit_gbps")
        if floor is not None:
            ax.axhline(float(floor), color="#d62728", ls="--", lw=1.5, label=f"floor {float(floor):g} GB/s")
        if limit is not None:
            ax.axhline(float(limit), color="#555555", ls=":", lw=1.5, label=f"physical limit {float(limit):g} GB/s")
        if entry.get("busbw_largest") is not None and sizes:
            ax.annotate(
                f"{entry['busbw_largest']:.1f} GB/s",
                (entry["largest_size"], entry["busbw_largest"]),
                textcoords="offset points",
                xytext=(-10, 10),
                ha="right",
                fontsize=9,
            )
        ax.set_xscale("log", base=2)
        if sizes:
            lo, hi = int(math.log2(min(sizes))), math.ceil(math.log2(max(sizes)))
            step = max(1, math.ceil((hi - lo + 1) / 14))
            ticks = [2**e for e in range(lo, hi + 1, step)]
            if len(sizes) == 1:
                ticks = sizes
                ax.set_xlim(sizes[0] / 2, sizes[0] * 2)
            ax.xaxis.set_major_locator(FixedLocator(ticks))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticks(ticks, [_size_label(t) for t in ticks])
        top = max([v for v in oop + ip if v is not None] + [float(floor or 0), float(limit or 0), 1.0])
        ax.set_ylim(0, top * 1.12)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        run = entry.get("run") or {}
        hosts = run.get("hosts") or []
        who = ", ".join(hosts[:4]) + (f" +{len(hosts) - 4}" if len(hosts) > 4 else "")
        title = f"{run.get('collective') or 'nccl-tests'}: {entry.get('label')}"
        sub = f"{run.get('ranks') or '?'} ranks on {who or '?'}; NCCL {run.get('nccl_version') or '?'}"
        ax.set_title(f"{title}  [{entry.get('result', '').upper()}]\n{sub}", fontsize=11)
        ax.grid(True, which="major", alpha=0.3)
        # busbw rises to the right, so the lower right corner is empty, unless the run stayed low (a slow
        # run): its curve ends there, and the middle left is empty instead.
        low = entry.get("busbw_largest") is not None and entry["busbw_largest"] < 0.5 * top
        ax.legend(loc="center left" if low else "lower right", fontsize=9, framealpha=0.9)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


# --- JUnit XML ------------------------------------------------------------------------


def _errors_of(violations) -> list[dict]:
    return [v for v in violations or [] if isinstance(v, dict) and v.get("severity") == ERROR]


def _say(v: dict) -> str:
    return f"{v.get('code')}: {v.get('message')}"


def junit_cases(report: dict) -> list[dict]:
    """The report as JUnit cases: per node, its single-node run, each multi-node run it took part
    in, and each other error violation naming it (by code); then the cluster's own errors.

    A run's failures are its error violations (the record's own, or the report's that name its
    label), else why its result is a fail. Bisect runs are diagnostics, not cases; what the
    bisect found (a slow node) is a violation naming the node.
    """
    violations = report.get("violations") or []
    used: set[tuple] = set()
    runs = [e for e in report.get("runs") or [] if e.get("scope") != "bisect"]

    def run_failures(e: dict) -> list[str]:
        own = _errors_of(e.get("violations"))
        if not own:
            label = f"{e.get('label')}:"
            own = [v for v in _errors_of(violations) if str(v.get("message", "")).startswith(label)]
        used.update((v.get("code"), v.get("host"), v.get("message")) for v in own)
        texts = [_say(v) for v in own]
        if e.get("result") == FAIL and not texts:
            ended = e.get("ended") or {}
            texts = [
                f"{e.get('label')}: result fail (busbw {e.get('busbw_largest')} GB/s at "
                f"{human_size(e.get('largest_size'))}, floor {e.get('floor_gbps')}; run {ended.get('status')})"
            ]
        return texts

    cases: list[dict] = []
    hosts = [n.get("host") for n in report.get("nodes") or [] if n.get("host")]
    for host in dict.fromkeys(hosts):
        singles = [e for e in runs if e.get("scope") == "single-node" and e.get("host") == host]
        if singles:
            for e in singles:
                name = f"single-node {e.get('collective') or 'all_reduce'}"
                cases.append(case(host, name, run_failures(e), output=_run_output(e)))
        else:
            cases.append(case(host, "single-node all_reduce", skipped="no single-node run of this node in the report"))
        for e in runs:
            if e.get("scope") == "single-node":
                continue
            members = e.get("nodes") or (e.get("run") or {}).get("hosts") or []
            if host in members or (e.get("host") == host):
                name = f"{e.get('scope')} {e.get('collective') or 'all_reduce'}: {e.get('label')}"
                cases.append(case(host, name, run_failures(e)))
    for host in dict.fromkeys(hosts):
        for v in _errors_of(violations):
            key = (v.get("code"), v.get("host"), v.get("message"))
            if v.get("host") == host and key not in used:
                used.add(key)
                cases.append(case(host, str(v.get("code")), [_say(v)]))
    for v in _errors_of(violations):
        key = (v.get("code"), v.get("host"), v.get("message"))
        if key not in used:
            used.add(key)
            cases.append(case(v.get("host") or "cluster", str(v.get("code")), [_say(v)]))
    if not cases:
        cases.append(case("cluster", "acceptance", ["nothing was measured"] if report.get("verdict") == FAIL else []))
    return cases


def _run_output(e: dict) -> str | None:
    if e.get("busbw_largest") is None:
        return None
    return (
        f"busbw {e['busbw_largest']:.2f} GB/s at {human_size(e.get('largest_size'))} "
        f"(floor {e.get('floor_gbps')}); ended {_ended_cell(e.get('ended'))}"
    )


def render_junit(report: dict) -> str:
    """The report as a JUnit XML document (``junit.xml`` beside ``acceptance.json``)."""
    return junit_xml(
        f"gpufleet acceptance {report.get('cluster')}",
        junit_cases(report),
        prefix="gpufleet.acceptance",
        timestamp=report.get("timestamp"),
    )


def write_report(base_dir: str, report: dict, *, plots: bool = True) -> dict:
    """Write ``<base_dir>/<cluster>/<timestamp>/{acceptance.json, acceptance.md, junit.xml, busbw-<run>.png}``.

    Returns ``{"dir", "json", "markdown", "junit", "plots": [...]}``. A plot that cannot be
    drawn (no matplotlib) is skipped; the report says why.
    """
    out_dir = os.path.join(base_dir, slug(report["cluster"]), report["timestamp"])
    os.makedirs(out_dir, exist_ok=True)
    report = dict(report, runs=[dict(e) for e in report.get("runs", [])])
    written: list[str] = []
    if plots:
        for e in report["runs"]:
            if not (e.get("run") or {}).get("rows"):
                continue
            name = f"busbw-{e['slug']}.png"
            try:
                plot_run(e, os.path.join(out_dir, name))
            except ImportError as exc:
                report["plot_error"] = f"matplotlib is not available ({exc})"
                break
            e["plot"] = name
            written.append(os.path.join(out_dir, name))
    if plots and report.get("history", {}).get("series") and not report.get("plot_error"):
        report["history"] = dict(report["history"], plots=[])
        for pool, series in sorted(report["history"]["series"].items()):
            name = f"history-{slug(pool)}.png"
            try:
                history.plot_pool(pool, series, os.path.join(out_dir, name))
            except ImportError as exc:
                report["plot_error"] = f"matplotlib is not available ({exc})"
                break
            report["history"]["plots"].append({"pool": pool, "file": name})
            written.append(os.path.join(out_dir, name))
    json_path = os.path.join(out_dir, "acceptance.json")
    md_path = os.path.join(out_dir, "acceptance.md")
    junit_path = os.path.join(out_dir, "junit.xml")
    write_atomic(junit_path, render_junit(report))
    write_atomic(json_path, json.dumps(report, indent=2, sort_keys=False) + "\n")
    write_atomic(md_path, render_markdown(report))
    return {"dir": out_dir, "json": json_path, "markdown": md_path, "junit": junit_path, "plots": written}
