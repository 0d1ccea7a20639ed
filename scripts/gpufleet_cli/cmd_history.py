"""``gpufleet report history NODE``: one node's acceptance, hardware gate and drift results, oldest first.

A subcommand of ``gpufleet report`` (``cmd_report`` adds it with :func:`register_report`). The history
store is ``<--dir>/<cluster>/history.jsonl``
(``module_utils/acceptance/history.py``; appended by every acceptance report, hardware gate and drift
check). The cluster is the brief's ``cluster.name`` (``-i INVENTORY`` or ``--brief``), ``--cluster``, or
the only cluster under ``--dir`` that has a history.

Output: a table, one row per record (time, kind, run, pool, verdict, the figures, the date an
acceptance is valid until or what a gate / drift named), then the node's trend per figure since its
first acceptance ("445 → 410 GB/s since 2026-11-29"). ``--format json``: the records and trends.

Exit codes: 0 printed; 2 no history, no record of the node, or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.history import HistoryError
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import InputError, check_regular_file
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.report import markdown_table

from .cmd_cost import add_brief_arguments, load_brief
from .common import EXIT_OK, CliError
from .reports import add_dir_option

# Years of nightly records for thousands of nodes fit in far less.
MAX_HISTORY_BYTES = 1024 * 1024 * 1024


def register_report(reports) -> None:
    """``gpufleet report history NODE``, on ``report``'s subcommands."""
    g = reports.add_parser(
        "history",
        help="one node's acceptance, hardware gate and drift results over time, and its trend",
        description=(
            "One node's records from <--dir>/<cluster>/history.jsonl, oldest first, then its trend per figure "
            "since its first acceptance. Exit 0: printed; 2: no history, no record of the node, or unreadable input."
        ),
    )
    g.add_argument("node", metavar="NODE", help="the node whose history to print")
    add_brief_arguments(g, "its brief gives the cluster's name and the degradation rule")
    g.add_argument(
        "--cluster",
        metavar="NAME",
        help="the cluster whose history to read (default: the brief's cluster.name with -i/--brief, else the only "
        "cluster under --dir with a history)",
    )
    g.add_argument("--format", choices=("markdown", "json"), default="markdown", help="output (default: markdown)")
    add_dir_option(g, inherited=True)
    g.set_defaults(func=run)


def _cluster(args) -> str:
    if getattr(args, "cluster", None):
        return args.cluster
    if args.inventory or args.brief:
        brief, _ = load_brief(args)
        name = ((brief or {}).get("cluster") or {}).get("name") if isinstance(brief, dict) else None
        if not isinstance(name, str) or not name:
            raise CliError("the brief has no cluster.name: give --cluster NAME")
        return name
    try:
        found = sorted(d for d in os.listdir(args.dir) if os.path.isfile(os.path.join(args.dir, d, "history.jsonl")))
    except OSError:
        found = []
    if len(found) == 1:
        return found[0]
    if not found:
        raise CliError(f"no history under {args.dir}: run gpufleet accept (or verify, drift) first")
    raise CliError(f"several clusters have a history under {args.dir} ({', '.join(found)}): give -i or --cluster")


def run(args: argparse.Namespace) -> int:
    node = args.node
    cluster = _cluster(args)
    path = history.store_path(args.dir, cluster)
    if not os.path.lexists(path):
        raise CliError(f"{path}: no history of cluster {cluster}: run gpufleet accept (or verify, drift) first")
    # A regular file of bounded size before history.read (standard library only, it runs in modules too) opens it.
    try:
        size = check_regular_file(path, "a history (JSON lines)").st_size
    except InputError as exc:
        raise CliError(str(exc)) from None
    if size > MAX_HISTORY_BYTES:
        raise CliError(f"{path}: {size} bytes, expected a history of at most {MAX_HISTORY_BYTES} bytes")
    records, warnings = history.read(path, node)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not records:
        raise CliError(f"{path}: no record of {node} (is it a node of cluster {cluster}?)")
    brief = None
    if args.inventory or args.brief:
        brief, _ = load_brief(args)
    try:
        trends, degraded = history.trends(records, brief)
    except HistoryError as exc:
        raise CliError(f"brief: {exc}") from None
    if args.format == "json":
        print(json.dumps({"cluster": cluster, "node": node, "records": records, "trends": trends}, indent=2))
        return EXIT_OK
    headers, rows = history.node_table(records)
    out = [f"# History: {node} ({cluster})", "", f"{len(records)} record(s) in {path}", ""]
    out += markdown_table(headers, rows)
    if trends:
        out += ["", "## Since its first acceptance", ""]
        out += [f"- {t['figure']}: {t['text']}{' — DEGRADED' if t['degraded'] else ''}" for t in trends]
    if degraded:
        out += ["", *[f"{v['severity'].upper()} {v['code']}: {v['message']}" for v in degraded]]
    print("\n".join(out))
    return EXIT_OK
