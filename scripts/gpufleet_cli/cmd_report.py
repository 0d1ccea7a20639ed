"""``gpufleet report``: render the latest (or a given) report as Markdown on stdout.

Reports live under ``reports/<cluster>/<timestamp>/``:

- acceptance: ``acceptance.json`` (``module_utils/acceptance/report.py``; rendered by its ``render_markdown``);
- hardware gate: ``hardware/<host>.json`` or ``gate/<host>.json``, one record per node (``hwgate.node_record``),
  or one ``gate.json`` / ``hardware.json`` holding a list of them;
- drift: ``drift.json`` as ``gpufleet drift`` writes it (``module_utils/ops/drift.py``, ``kind: drift``; rendered by
  its ``drift_markdown``), or older per-node records: ``drift/<host>.json``, or a ``drift.json`` holding a list
  of records or ``{"nodes": [...]}``;
- remediation: ``remediation.json`` as ``gpufleet remediate`` writes it (``kind: remediation``; rendered by
  ``drift.remediation_markdown``).

A per-node record is read tolerantly: ``{host, ok | status, violations: [{severity, code, host, field,
message}], pool?, summary?, facts?}``; the host defaults to the file name, the status to "fail" when
an error violation is present.

Exit codes: 0 rendered; 2 no report, or one that cannot be read.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import report as acceptance_report
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import short_repr
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.report import markdown_table
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import drift

from . import cmd_cost, cmd_history
from .common import EXIT_OK, CliError
from .reports import (
    GATE_DIRS,
    GATE_FILES,
    KINDS,
    ReportDir,
    add_dir_option,
    find_reports,
    json_files,
    kinds_in,
    load_json,
    show_dir,
)
from .table import columns

MAX_RECORDS = 100_000
# `report`'s subcommands; any other first word is the PATH of `report show`.
SHOW = "show"


class _SubcommandOrPath(argparse._SubParsersAction):
    """``report``'s subcommands (show, cost, history), where a first word that names none of them is the
    PATH of ``show``: ``gpufleet report [PATH]`` is ``gpufleet report show [PATH]``."""

    class _AnyWord:
        """What argparse checks the first word against before it calls the action: every word passes,
        and :meth:`__call__` hands one that names no subcommand to show."""

        def __init__(self, names: dict):
            self.names = names

        def __contains__(self, word) -> bool:
            return True

        def __iter__(self):
            return iter(self.names)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.choices = self._AnyWord(self._name_parser_map)

    def __call__(self, parser, namespace, values, option_string=None):
        if values[0] not in self._name_parser_map:
            values = [SHOW, *values]
        super().__call__(parser, namespace, values, option_string)


def _show_options(p: argparse.ArgumentParser, inherited: bool = False) -> None:
    """``report``'s options, on ``report`` itself and again on ``report show`` (``inherited``: a value
    given before ``show`` is kept unless given again after it)."""
    unset = {"default": argparse.SUPPRESS} if inherited else {}
    add_dir_option(p, inherited)
    p.add_argument(
        "--kind",
        choices=KINDS,
        help=(
            "acceptance (NCCL), gate (hardware facts per node), drift (gpufleet drift) or remediation "
            "(gpufleet remediate); default: whatever the report holds"
        ),
        **unset,
    )
    p.add_argument(
        "--plots",
        action="store_true",
        help="redraw the acceptance report's busbw-vs-size PNGs into its directory (needs matplotlib)",
        **unset,
    )
    p.add_argument("--list", action="store_true", help="list the reports under --dir (oldest first) instead", **unset)


def register(sub) -> None:
    description = (
        "Render a report's JSON as Markdown on stdout: the latest report under --dir "
        "(reports/<cluster>/<timestamp>/, latest = greatest timestamp) of --kind (default: any), or PATH: a "
        "report directory, a cluster directory (its latest report) or a JSON file. "
        "Exit 0: rendered; 2: no report, or one that cannot be read."
    )
    p = sub.add_parser(
        "report",
        help="render the latest (or a given) acceptance / hardware-gate / drift / remediation report as Markdown; "
        "report cost, report history NODE",
        usage="%(prog)s [--dir DIR] [--kind KIND] [--plots] [--list] [PATH]\n       %(prog)s {show,cost,history} ...",
        description=description + " The subcommands: report show [PATH] (the same), report cost, report history.",
    )
    _show_options(p)
    p.set_defaults(func=run, path=None)
    reports = p.add_subparsers(
        dest="report_command",
        metavar="{show,cost,history}",
        action=_SubcommandOrPath,
        title="subcommands",
        prog=p.prog,
    )
    show = reports.add_parser(
        SHOW,
        help="the latest (or a given) report as Markdown (the default: gpufleet report [PATH])",
        description=description,
    )
    show.add_argument(
        "path", nargs="?", metavar="PATH", help="report directory, cluster directory or JSON file (default: the latest)"
    )
    _show_options(show, inherited=True)
    show.set_defaults(func=run)
    cmd_cost.register_report(reports)
    cmd_history.register_report(reports)


def resolve(path: str | None, base: str, kind: str | None) -> ReportDir | str:
    """The report to render: a ReportDir, or a JSON file path. CliError(code 2) when there is none."""
    what = f"{kind} report" if kind else "report"
    if path is None:
        found = find_reports(base, kind)
        if not found:
            hint = {"gate": "gpufleet verify", "drift": "gpufleet drift", "remediation": "gpufleet remediate"}.get(
                kind or "", "gpufleet accept"
            )
            raise CliError(f"no {what} under {show_dir(base)}: run {hint} first")
        return found[-1]
    if os.path.isfile(path):
        return path
    if not os.path.isdir(path):
        raise CliError(f"{path}: no such report directory or JSON file")
    ks = kinds_in(path)
    if ks and (kind is None or kind in ks):
        return ReportDir(path, ks)
    found = find_reports(path, kind)
    if not found:
        raise CliError(
            f"no {what} in {path}: expected acceptance.json, hardware/*.json, gate/*.json, drift.json or "
            "remediation.json"
        )
    return found[-1]


# --- reading --------------------------------------------------------------------------------------


def _records_from(data, path: str) -> tuple[list[dict], list[dict], dict]:
    """(node records, report-wide violations, meta) from one JSON document of a gate or drift report."""
    meta: dict = {}
    extra: list[dict] = []
    if isinstance(data, dict) and any(k in data for k in ("nodes", "hosts", "records")):
        meta = {k: data.get(k) for k in ("cluster", "timestamp", "verdict") if isinstance(data.get(k), str)}
        extra = _violations(data.get("violations"))
        items = data.get("nodes") or data.get("hosts") or data.get("records") or []
    elif isinstance(data, list):
        items = data
    elif isinstance(data, dict):
        items = [data]
    else:
        raise CliError(
            f"{path}: expected a per-node record (a JSON object) or a list of them, found {type(data).__name__}"
        )
    if not isinstance(items, list):
        raise CliError(f"{path}: expected a list of per-node records, found {type(items).__name__}")
    default_host = os.path.splitext(os.path.basename(path))[0]
    records = []
    for i, item in enumerate(items[:MAX_RECORDS]):
        if not isinstance(item, dict):
            raise CliError(f"{path}: record {i}: expected a JSON object, found {type(item).__name__}")
        records.append(normalize_record(item, default_host if len(items) == 1 else f"#{i}"))
    return records, extra, meta


def normalize_record(item: dict, default_host: str) -> dict:
    """A per-node record with every field the renderer reads, whatever the writer left out."""
    host = item.get("host") if isinstance(item.get("host"), str) and item.get("host") else default_host
    violations = _violations(item.get("violations"))
    errors = [v for v in violations if v.get("severity") == "error"]
    if isinstance(item.get("ok"), bool):
        status = "pass" if item["ok"] else "fail"
    elif isinstance(item.get("status"), str) and item["status"]:
        status = item["status"]
    else:
        status = "fail" if errors else "pass"
    summary = item.get("summary") if isinstance(item.get("summary"), dict) else {}
    summary = {str(k): _cell(v) for k, v in summary.items()}
    return {
        "host": host,
        "pool": item.get("pool") if isinstance(item.get("pool"), str) else None,
        "status": status,
        "summary": summary,
        "violations": violations,
    }


_VIOLATION_TEXT = ("severity", "code", "field", "message")


def _violations(items) -> list[dict]:
    """The violations of a record in their normal form: objects only, severity / code / field / message
    strings, host a string or None (a report edited by hand, or cut short, holds anything)."""
    out = []
    for v in items if isinstance(items, list) else []:
        if not isinstance(v, dict):
            continue
        norm = {k: _text_of(v.get(k)) for k in _VIOLATION_TEXT}
        norm["host"] = v["host"] if isinstance(v.get("host"), str) else None
        out.append(norm)
    return out


def _cell(value) -> str | int | float | bool | None:
    """A summary value for a table cell: a scalar as it is, anything else cut short."""
    if value is None or isinstance(value, str | bool | float):
        return value
    if isinstance(value, int):
        return value if value.bit_length() < 1000 else short_repr(value)
    return short_repr(value, 200)


def _text_of(value) -> str:
    return "" if value is None else value if isinstance(value, str) else short_repr(value, 200)


def load_nodes(report: ReportDir | str, kind: str) -> tuple[list[dict], list[dict], dict]:
    """Every node record of a gate / drift report (records, report-wide violations, meta)."""
    if isinstance(report, str):
        files = [report]
    elif kind == "gate":
        files = [os.path.join(report.path, f) for f in GATE_FILES if os.path.isfile(os.path.join(report.path, f))]
        for d in GATE_DIRS:
            files += json_files(os.path.join(report.path, d))
    else:
        single = os.path.join(report.path, "drift.json")
        files = [single] if os.path.isfile(single) else []
        files += json_files(os.path.join(report.path, "drift"))
    records: list[dict] = []
    extra: list[dict] = []
    meta: dict = {}
    for f in files:
        r, e, m = _records_from(load_json(f), f)
        records += r
        extra += e
        meta = {**m, **meta}
    if not isinstance(report, str):
        meta.setdefault("cluster", report.cluster)
        meta.setdefault("timestamp", report.stamp)
    by_host: dict[str, dict] = {}
    for r in records:  # a host written twice (gate/ and hardware/): the last file wins
        by_host[r["host"]] = r
    return [by_host[h] for h in sorted(by_host, key=_natural)], extra, meta


def _natural(name: str) -> tuple:
    # Runs of ASCII digits compare as numbers, by length then digits: no int(), however long the run.
    return tuple(
        (0, len(p.lstrip("0")), p.lstrip("0")) if p.isdigit() else (1, 0, p) for p in re.split(r"([0-9]+)", name) if p
    )


# --- Markdown ---------------------------------------------------------------------------------------


def render_nodes_markdown(title: str, records: list[dict], extra: list[dict], meta: dict) -> str:
    """A gate or drift report: verdict, one row per node, then every violation."""
    violations = [v for r in records for v in r["violations"]] + extra
    errors = sum(1 for v in violations if v.get("severity") == "error")
    warnings = sum(1 for v in violations if v.get("severity") == "warning")
    failed = [r["host"] for r in records if r["status"] not in ("pass", "ok", "passed")]
    verdict = meta.get("verdict") or ("fail" if failed or any(v.get("severity") == "error" for v in extra) else "pass")
    out = [f"# {title}: {meta.get('cluster') or '?'}", ""]
    out.append(
        f"**Verdict: {verdict.upper()}** ({len(failed)} of {len(records)} nodes failed; "
        f"{errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}), "
        f"{meta.get('timestamp') or '?'}"
    )
    out.append("")
    if failed:
        out += [f"- Failed: {', '.join(failed)}", ""]
    keys: list[str] = []
    for r in records:
        keys += [k for k in r["summary"] if k not in keys]
    out += ["## Nodes", ""]
    if records:
        with_pool = any(r["pool"] for r in records)
        header = ["host", *(["pool"] if with_pool else []), "status", *keys, "errors"]
        rows = []
        for r in records:
            codes = sorted({str(v.get("code")) for v in r["violations"] if v.get("severity") == "error"})
            rows.append(
                [
                    r["host"],
                    *([r["pool"]] if with_pool else []),
                    r["status"].upper(),
                    *[r["summary"].get(k) for k in keys],
                    codes,
                ]
            )
        out += markdown_table(header, rows)
    else:
        out.append("No node records.")
    out.append("")
    out += ["## Violations", ""]
    if violations:
        order = {"error": 0, "warning": 1}
        ordered = sorted(
            violations,
            key=lambda v: (order.get(v.get("severity"), 2), _natural(str(v.get("host") or "")), str(v.get("code"))),
        )
        out += markdown_table(
            ["severity", "code", "host", "field", "message"],
            [[v.get("severity"), v.get("code"), v.get("host"), v.get("field"), v.get("message")] for v in ordered],
        )
    else:
        out.append("None.")
    return "\n".join(out).rstrip() + "\n"


def render_acceptance(path: str, plots: bool) -> str:
    report = load_json(path)
    if not isinstance(report, dict) or not isinstance(report.get("runs", []), list):
        raise CliError(f"{path}: expected an NCCL acceptance report (a JSON object with runs), found something else")
    if plots:
        report = dict(report, runs=[dict(e) if isinstance(e, dict) else e for e in report.get("runs", [])])
        _redraw(report, os.path.dirname(os.path.abspath(path)))
    try:
        return acceptance_report.render_markdown(report)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise CliError(
            f"{path}: not an NCCL acceptance report this version can read ({type(exc).__name__}: {exc})"
        ) from None


def _redraw(report: dict, out_dir: str) -> None:
    drawn = 0
    for e in report["runs"]:
        if not isinstance(e, dict) or not (e.get("run") or {}).get("rows"):
            continue
        name = f"busbw-{acceptance_report.slug(str(e.get('label') or 'run'))}.png"
        try:
            acceptance_report.plot_run(e, os.path.join(out_dir, name))
        except ImportError as exc:
            report["plot_error"] = f"matplotlib is not available ({exc})"
            print(f"warning: plots not drawn: {report['plot_error']}", file=sys.stderr)
            return
        except OSError as exc:
            raise CliError(f"{out_dir}: cannot write {name} ({exc.strerror or exc})") from None
        except (KeyError, TypeError, ValueError) as exc:
            print(f"warning: plot for {e.get('label')!r} not drawn ({type(exc).__name__}: {exc})", file=sys.stderr)
            continue
        e["plot"] = name
        drawn += 1
    if drawn:
        report.pop("plot_error", None)
    print(f"drew {drawn} plot{'s' if drawn != 1 else ''} in {out_dir}", file=sys.stderr)


def _file_kind(path: str, data_hint: str | None) -> str:
    if data_hint:
        return data_hint
    name = os.path.basename(path)
    if name == "acceptance.json":
        return "acceptance"
    if name == "remediation.json":
        return "remediation"
    if name == "drift.json" or os.path.basename(os.path.dirname(os.path.abspath(path))) == "drift":
        return "drift"
    return "gate"


TITLES = {"gate": "Hardware gate", "drift": "Drift"}


def _drift_report(path: str):
    """The JSON of ``path`` when it is a report of ``module_utils/ops/drift.py`` (``kind`` drift or remediation,
    ``nodes`` keyed by host), else None (an older per-node drift file)."""
    data = load_json(path)
    if isinstance(data, dict) and data.get("kind") in ("drift", "remediation") and isinstance(data.get("nodes"), dict):
        return data
    return None


def render_drift_kind(path: str, kind: str) -> str:
    """A drift or remediation report written by the drift / remediate playbooks."""
    data = _drift_report(path)
    if data is None or data.get("kind") != kind:
        raise CliError(f"{path}: expected a {kind} report (a JSON object with kind: {kind} and nodes by host)")
    try:
        return drift.drift_markdown(data) if kind == "drift" else drift.remediation_markdown(data)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise CliError(f"{path}: not a {kind} report this version can read ({type(exc).__name__}: {exc})") from None


def render(report: ReportDir | str, kind: str | None, plots: bool) -> str:
    if isinstance(report, str):
        k = _file_kind(report, kind)
        if k == "acceptance":
            return render_acceptance(report, plots)
        data = _drift_report(report)
        if data is not None and kind in (None, "drift", "remediation"):
            return render_drift_kind(report, kind or data["kind"])
        if k == "remediation":
            return render_drift_kind(report, k)  # says what it expected
        records, extra, meta = load_nodes(report, k)
        return render_nodes_markdown(TITLES[k], records, extra, meta)
    parts = []
    for k in [kind] if kind else list(report.kinds):
        if k not in report.kinds:
            raise CliError(f"{report.path}: holds no {k} report (it holds: {', '.join(report.kinds)})")
        if k == "acceptance":
            parts.append(render_acceptance(os.path.join(report.path, "acceptance.json"), plots))
        elif k == "remediation":
            parts.append(render_drift_kind(os.path.join(report.path, "remediation.json"), "remediation"))
        elif (
            k == "drift" and os.path.isfile(single := os.path.join(report.path, "drift.json")) and _drift_report(single)
        ):
            parts.append(render_drift_kind(single, "drift"))
        else:
            records, extra, meta = load_nodes(report, k)
            parts.append(render_nodes_markdown(TITLES[k], records, extra, meta))
    return "\n".join(parts)


def run(args: argparse.Namespace) -> int:
    if args.list:
        found = find_reports(args.dir, args.kind)
        if not found:
            raise CliError(
                f"no {args.kind + ' ' if args.kind else ''}report under {show_dir(args.dir)}: run "
                + {"gate": "gpufleet verify", "drift": "gpufleet drift", "remediation": "gpufleet remediate"}.get(
                    args.kind or "", "gpufleet accept"
                )
                + " first"
            )
        rows = [(r.cluster, r.stamp, ",".join(r.kinds), r.path) for r in found]
        for line in columns(rows, min_widths=(20, 20, 24), gap=" "):
            print(line)
        return EXIT_OK
    report = resolve(args.path, args.dir, args.kind)
    if args.plots and not (
        (isinstance(report, str) and _file_kind(report, args.kind) == "acceptance")
        or (isinstance(report, ReportDir) and "acceptance" in report.kinds and args.kind in (None, "acceptance"))
    ):
        print("warning: --plots: only acceptance reports have plots", file=sys.stderr)
    if isinstance(report, ReportDir):
        print(f"report: {report.path}", file=sys.stderr)
    sys.stdout.write(render(report, args.kind, args.plots))
    return EXIT_OK
