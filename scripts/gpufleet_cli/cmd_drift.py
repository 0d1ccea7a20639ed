"""``gpufleet drift`` and ``gpufleet remediate``: find driver / GPU-stack drift, and repair it node by node.

``drift`` runs playbooks/drift.yml, which compares every GPU node with the brief's pins, its pool and its
package holds (``module_utils/ops/drift.py``) and writes ``reports/<cluster>/<stamp>/drift.json`` (+ ``.md``).
``remediate`` runs playbooks/remediate.yml, which drains, repairs, reboots where needed, re-gates and
resumes the drifted nodes in batches and writes ``remediation.json`` (+ ``.md``). Both then print a
table from the report the run wrote (see docs/drift.md).

Exit codes: 0 every node clean / resumed; 1 a node drifted, unknown, drained or unreachable, or the run
failed; 2 usage errors.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import time

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import (
    InputError,
    load_json_bytes,
    read_regular_file,
)

from .common import EXIT_FAILED, EXIT_OK, ROOT, CliError
from .runner import add_run_arguments, options_from_args, run_playbook
from .table import columns

REPORTS_DIR = os.path.join(ROOT, "reports")
_SERIAL_RE = re.compile(r"^[1-9]\d*%?$")


def register(sub) -> None:
    p = sub.add_parser(
        "drift",
        help="find driver / CUDA / NCCL / kernel drift against the brief's pins, the pool and the package holds",
        description=(
            "Run playbooks/drift.yml: read the GPU stack on every GPU node (installed driver packages, the loaded "
            "kernel module, the driver nvidia-smi reports, fabric manager, CUDA, NCCL, DCGM, container toolkit, "
            "OFED, kernel, package holds) and compare it with the brief's software pins, with what most nodes of "
            "its pool run, and with the holds gpufleet's roles set. Nothing is changed. Prints one row per "
            "drifted component and where the report is (reports/<cluster>/<stamp>/drift.json and drift.md; "
            "`gpufleet report --kind drift` renders it again). Exit 0: every node clean; 1: a node drifted or "
            "could not be read, or the run failed; 2: usage error. Repair with `gpufleet remediate`."
        ),
        epilog="See docs/drift.md for what each component is compared with.",
    )
    add_run_arguments(p)
    p.add_argument(
        "--json",
        action="store_true",
        help="print the drift report's JSON on stdout instead of the table (progress goes to stderr)",
    )
    p.set_defaults(func=run_drift)

    p = sub.add_parser(
        "remediate",
        help="repair drifted nodes in rolling batches: drain, restore the pins, reboot, re-gate, resume",
        description=(
            "Run playbooks/remediate.yml: find the drifted nodes (as `gpufleet drift` does) and those an earlier "
            "remediation left drained, then in batches of "
            "--serial nodes drain each from the scheduler, reinstall and hold the pinned packages, reboot when "
            "the loaded driver module changes, re-run the hardware gate and the single-node NCCL acceptance, and "
            "resume the node only when both pass. A node that fails stays drained. When more than 25% of a pool "
            "(remediate_drain_max_share, counting the nodes already drained or down) or its last node in service "
            "would be taken out, nothing is drained and the run fails (the drain breaker) unless --force. "
            "The run stops when more than "
            "--max-fail-percentage of a batch fails. Prints one row per node from "
            "reports/<cluster>/<stamp>/remediation.json (and .md). Exit 0: every drifted node was resumed, or "
            "none drifted; 1: a node stays drained or unreachable, or the run failed; 2: usage error."
        ),
        epilog=(
            "Options left out keep the playbook's defaults (remediate_serial, remediate_max_fail_percentage, "
            "remediate_drain_timeout). Try -C (check mode) first. See docs/drift.md."
        ),
    )
    add_run_arguments(p)
    p.add_argument(
        "--serial",
        type=_serial,
        metavar="N|N%",
        help="nodes remediated at once: a count or a percentage of the drifted nodes (e.g. 2 or 25%%)",
    )
    p.add_argument(
        "--max-fail-percentage",
        type=_percentage,
        metavar="P",
        help="stop before the next batch when more than P %% of a batch failed (0-100; 0 stops at the first)",
    )
    p.add_argument(
        "--drain-timeout",
        type=_positive_int,
        metavar="SECONDS",
        help="how long to wait for a node's running jobs to finish after draining it before giving up on it",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help=(
            "remediate even when the drain breaker trips: more than remediate_drain_max_share (25%%) of a pool, "
            "or its last node in service, would be taken out (e.g. after changing the brief's pins on purpose)"
        ),
    )
    p.set_defaults(func=run_remediate)


# --- argument types -------------------------------------------------------------------------------


def _serial(text: str) -> int | str:
    value = text.strip()
    if not _SERIAL_RE.fullmatch(value) or (value.endswith("%") and int(value[:-1]) > 100):
        raise argparse.ArgumentTypeError(
            f"expected a positive count or a percentage up to 100%, e.g. 2 or 25%: {text!r}"
        )
    return value if value.endswith("%") else int(value)


def _percentage(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole percentage 0-100: {text!r}") from None
    if not 0 <= value <= 100:
        raise argparse.ArgumentTypeError(f"expected a whole percentage 0-100: {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds: {text!r}")
    return value


# --- reports --------------------------------------------------------------------------------------


def latest_report(reports: str, name: str, since: float = 0.0) -> str | None:
    """The newest ``<reports>/<cluster>/<stamp>/<name>`` written at or after ``since``."""
    found = []
    for path in glob.glob(os.path.join(reports, "*", "*", name)):
        try:
            mtime = os.path.getmtime(path)
        except OSError:
            continue
        if mtime >= since - 1:
            found.append((mtime, path))
    return max(found)[1] if found else None


def _load(path: str, kind: str) -> dict:
    # The report the run just wrote: one that cannot be read is a failed run (exit 1), not bad input.
    try:
        data = load_json_bytes(read_regular_file(path, f"a {kind} report"), path)
    except InputError as exc:
        raise CliError(f"cannot read the {kind} report: {exc}", EXIT_FAILED) from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), dict):
        raise CliError(f"{path}: not a {kind} report (expected a JSON object with nodes: {{host: ...}})", EXIT_FAILED)
    return data


def _natural(name: str) -> tuple:
    # Runs of ASCII digits compare as numbers, by length then digits: no int(), however long the run.
    return tuple(
        (0, len(p.lstrip("0")), p.lstrip("0")) if p.isdigit() else (1, 0, p) for p in re.split(r"([0-9]+)", name) if p
    )


def _text(value) -> str:
    if value is None or value == "" or value == []:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def drift_table(report: dict) -> str:
    """One row per drift item (a clean node: one row), drifted first, then unknown, then clean."""
    nodes = report.get("nodes") or {}
    order = {"drifted": 0, "unknown": 1, "clean": 2}
    hosts = sorted(nodes, key=lambda h: (order.get(str((nodes[h] or {}).get("status")), 1), _natural(str(h))))
    rows: list[tuple[str, ...]] = []
    for host in hosts:
        node = nodes[host] if isinstance(nodes[host], dict) else {}
        status = str(node.get("status") or "unknown")
        pool = _text(node.get("pool"))
        items = [d for d in node.get("drift") or [] if isinstance(d, dict)]
        if not items:
            note = "could not be read" if status == "unknown" else ""
            rows.append((_text(host), pool, status.upper(), "-", "-", "-", note or "-"))
            continue
        for d in items:
            component = d.get("component")
            if component == "hold" and d.get("package"):
                component = f"hold {d['package']}"
            rows.append(
                (
                    _text(host),
                    pool,
                    status.upper() + (" (reboot)" if node.get("reboot") else ""),
                    _text(component),
                    _text(d.get("expected")),
                    _text(d.get("found")),
                    _text(d.get("basis")),
                )
            )
    counts = {s: sum(1 for n in nodes.values() if isinstance(n, dict) and n.get("status") == s) for s in order}
    lines = [
        f"Drift: {report.get('cluster') or '?'}: {counts['drifted']} drifted, {counts['unknown']} unknown, "
        f"{counts['clean']} clean of {len(nodes)} nodes"
    ]
    if rows:
        lines += columns(rows, ("host", "pool", "status", "component", "expected", "found", "basis"), indent="  ")
    return "\n".join(lines)


def remediation_table(report: dict) -> str:
    nodes = report.get("nodes") or {}
    rows: list[tuple[str, ...]] = []
    for host in sorted(nodes, key=lambda h: _natural(str(h))):
        node = nodes[host] if isinstance(nodes[host], dict) else {}
        before: list[str] = []
        for d in node.get("before") or []:
            if isinstance(d, dict):
                name = (
                    f"hold {d['package']}" if d.get("component") == "hold" and d.get("package") else d.get("component")
                )
                if name and str(name) not in before:
                    before.append(str(name))
        rows.append(
            (
                _text(host),
                _text(", ".join(before)),
                _text(node.get("outcome")).upper(),
                _text(node.get("gate")),
                _text(node.get("acceptance")),
                _text(node.get("reason")),
            )
        )
    batches = report.get("batches") or []
    lines = [
        f"Remediation: {report.get('cluster') or '?'}: {len(nodes)} node(s) in {len(batches)} batch(es), "
        f"serial {_text(report.get('serial'))}"
    ]
    breaker = report.get("breaker") if isinstance(report.get("breaker"), dict) else {}
    if breaker.get("tripped") and breaker.get("message"):
        # Tripped: nothing was drained (the nodes are BLOCKED); forced: it went on anyway.
        lines.append(_text(breaker["message"]))
    if rows:
        lines += columns(rows, ("host", "before", "outcome", "gate", "acceptance", "reason"), indent="  ")
    else:
        lines.append("  no node needed remediation")
    return "\n".join(lines)


def _where(path: str) -> str:
    md = os.path.splitext(path)[0] + ".md"
    rel = os.path.relpath(path)
    shown = rel if not rel.startswith("..") else path
    if os.path.isfile(md):
        return f"report: {shown} (Markdown: {os.path.splitext(shown)[0]}.md)"
    return f"report: {shown} (`gpufleet report {os.path.dirname(shown)}` renders it)"


def drift_exit(report: dict) -> int:
    nodes = [n for n in (report.get("nodes") or {}).values() if isinstance(n, dict)]
    return EXIT_OK if nodes and all(n.get("status") == "clean" for n in nodes) else EXIT_FAILED


def remediation_exit(report: dict) -> int:
    """0 when every node was resumed (remediated outside a scheduler, or previewed in check mode),
    or skipped with nothing to repair (or there was nothing to do)."""
    for node in (report.get("nodes") or {}).values():
        if not isinstance(node, dict):
            return EXIT_FAILED
        outcome = node.get("outcome")
        if outcome in ("resumed", "remediated", "previewed") or (outcome == "skipped" and not node.get("before")):
            continue
        return EXIT_FAILED
    return EXIT_OK


# --- commands -------------------------------------------------------------------------------------


def run_drift(args) -> int:
    started = time.time()
    opts = options_from_args(args)
    # With --json, stdout carries the report only: progress and the summary go to stderr.
    rc = run_playbook("drift.yml", opts, stream=sys.stderr if args.json else None)
    path = latest_report(REPORTS_DIR, "drift.json", since=started)
    if path is None:
        print(
            "no drift report was written by this run (see the failures above; in check mode the playbook may "
            "write none)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    report = _load(path, "drift")
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
    else:
        print(drift_table(report))
        print(_where(path))
    code = drift_exit(report)
    if code == EXIT_OK and rc != EXIT_OK:
        # The playbook fails only on drift; a clean report from a failed run means something else failed.
        print("every node is clean, but the run failed: see the failures above", file=sys.stderr)
        return EXIT_FAILED
    return code


def remediate_vars(args) -> dict:
    """The extra variables for the options given (the playbook's defaults stand for the others)."""
    out: dict = {}
    if args.serial is not None:
        out["remediate_serial"] = args.serial
    if args.max_fail_percentage is not None:
        out["remediate_max_fail_percentage"] = args.max_fail_percentage
    if args.drain_timeout is not None:
        out["remediate_drain_timeout"] = args.drain_timeout
    if getattr(args, "force", False):
        out["remediate_drain_force"] = True
    return out


def run_remediate(args) -> int:
    started = time.time()
    opts = options_from_args(args)
    extra = remediate_vars(args)
    if extra:
        # As JSON, so the numbers reach the playbook as numbers; after the user's -e, so the options win.
        opts.extra_vars.append(json.dumps(extra, sort_keys=True))
    rc = run_playbook("remediate.yml", opts)
    path = latest_report(REPORTS_DIR, "remediation.json", since=started)
    if path is None:
        print("no remediation report was written by this run", file=sys.stderr)
        return rc
    report = _load(path, "remediation")
    print(remediation_table(report))
    print(_where(path))
    code = remediation_exit(report)
    return code if code != EXIT_OK else rc
