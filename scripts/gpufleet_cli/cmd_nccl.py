"""``gpufleet nccl parse``: nccl-tests logs (text or ``-J`` JSON) and NCCL_DEBUG evidence, as data."""

from __future__ import annotations

import json
import sys

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_debug, nccl_tests
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.nccl import human_size, summarize_run
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import (
    InputError,
    read_regular_file,
    read_stream,
)

from .common import CliError
from .table import columns

# The per-size table of a run: its columns and their least widths (the layout of nccl-tests' own table).
NCCL_HEAD = ("size", "type", "oop busbw", "ip busbw", "oop time us", "ip time us", "#wrong")
NCCL_WIDTHS = (10, 6, 10, 9, 11, 10, 9)

_MAX_BYTES = 256 * 1024 * 1024  # a log bigger than this is not an nccl-tests log


def register(sub) -> None:
    p = sub.add_parser(
        "nccl",
        help="NCCL acceptance tools: parse nccl-tests output",
        description="NCCL acceptance tools.",
    )
    nsub = p.add_subparsers(dest="nccl_command", metavar="SUBCOMMAND")
    nsub.required = True
    parse = nsub.add_parser(
        "parse",
        help="parse nccl-tests logs (text or -J JSON) and NCCL_DEBUG=INFO evidence",
        description=(
            "Parse nccl-tests output (every text format, mpirun/srun prefixes, several runs per log, "
            "or the -J JSON file) and the NCCL_DEBUG=INFO lines in the same files. "
            'Prints {"runs": [...], "debug": [...], "warnings": [...]}. '
            "Exit 0 when every file was read (a file with no run is reported in warnings), 2 when one cannot be read."
        ),
    )
    parse.add_argument("files", nargs="+", metavar="FILE", help="log or -J JSON file ('-' reads stdin)")
    parse.add_argument("--format", choices=("json", "text"), default="json", help="output format (default: json)")
    parse.set_defaults(func=run_parse)


def read_input(path: str) -> str:
    """The file's text (undecodable bytes replaced); CliError(code 2) when it cannot be read."""
    what = "an nccl-tests log or -J JSON file"
    try:
        if path == "-":
            data = read_stream(getattr(sys.stdin, "buffer", sys.stdin), what, _MAX_BYTES)
        else:
            data = read_regular_file(path, what, _MAX_BYTES)
    except InputError as exc:
        raise CliError(str(exc)) from None
    return data.decode("utf-8", errors="replace")


def parse_files(paths: list[str]) -> dict:
    """``{"runs": [...], "debug": [...], "warnings": [...]}`` for the given files (all read first)."""
    texts = [(p, read_input(p)) for p in paths]
    out: dict = {"runs": [], "debug": [], "warnings": []}
    for path, text in texts:
        name = "<stdin>" if path == "-" else path
        runs, warnings = nccl_tests.parse(text, name)
        out["runs"].extend(runs)
        out["warnings"].extend(warnings)
        if not nccl_tests.looks_like_json(text):
            debug = nccl_debug.parse_debug(text, name)
            if debug is not None:
                out["debug"].append(debug)
    return out


def _f(value, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


def _w(value: int | None, none: str = "N/A") -> str:
    return none if value is None else str(value)


def format_text(result: dict) -> str:
    lines: list[str] = []
    for run in result["runs"]:
        hosts = ", ".join(run["hosts"]) or "?"
        gpus = ", ".join(run["gpu_names"]) or "?"
        lines.append(
            f"{run['file']}: {run['collective'] or 'nccl-tests'}, {run['ranks'] or '?'} ranks on {hosts} ({gpus}), "
            f"NCCL {run['nccl_version'] or '?'}"
        )
        rows = [
            (
                human_size(r["size"]),
                r["type"],
                _f(r["oop_busbw"]),
                _f(r["ip_busbw"]),
                _f(r["oop_time_us"], ".1f"),
                _f(r["ip_time_us"], ".1f"),
                f"{_w(r['oop_wrong'])}/{_w(r['ip_wrong'])}",
            )
            for r in run["rows"]
        ]
        lines += columns(rows, NCCL_HEAD, right=range(len(NCCL_HEAD)), min_widths=NCCL_WIDTHS, indent="  ")
        s = summarize_run(run)
        lines.append(
            f"  busbw at {human_size(s['largest_size'])}: {_f(s['busbw_largest'])} GB/s; peak {_f(run['peak_busbw'])}; "
            f"avg over all sizes {_f(run['avg_busbw'])}; latency {_f(s['latency_us'], '.1f')} us at "
            f"{human_size(s['smallest_size'])}; out of bounds {_w(run['out_of_bounds'], '-')}"
        )
        lines.append("")
    for d in result["debug"]:
        gdr = {True: "yes", False: "NO", None: "unknown"}[d["gdr"]]
        devices = " ".join(d.get("ib_devices") or []) or "-"
        transports = ", ".join(f"{k} x{v}" for k, v in (d.get("transports") or {}).items()) or "-"
        lines.append(
            f"{d['file']}: NCCL {d['nccl_version'] or '?'}, network {d['network'] or '?'}, devices {devices}, "
            f"GDR {gdr}, NVLS {({True: 'yes', False: 'no', None: 'unknown'})[d.get('nvls')]}"
            + (", SOCKET FALL-BACK" if d["socket_fallback"] else "")
        )
        lines.append(f"  channels: {transports}")
    if result["debug"]:
        lines.append("")
    for w in result["warnings"]:
        lines.append(f"warning: {w}")
    if not result["runs"]:
        lines.append("no nccl-tests run found")
    return "\n".join(lines).rstrip() + "\n"


def run_parse(args) -> int:
    result = parse_files(args.files)
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        sys.stdout.write(format_text(result))
    return 0
