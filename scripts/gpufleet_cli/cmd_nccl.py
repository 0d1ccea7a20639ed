"""``gpufleet nccl parse``: nccl-tests logs (text or ``-J`` JSON) and NCCL_DEBUG evidence, as data."""

from __future__ import annotations

import json
import sys

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import run as acceptance_run
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.nccl import (
    human_size,
    parse_size,
    summarize_run,
)
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
            "Parse nccl-tests output (every text format; mpirun, MPICH / Intel MPI, srun and Kubernetes "
            "prefixes; several runs per log; or the -J JSON file) and the NCCL_DEBUG=INFO lines in the same files. "
            'Prints {"runs": [...], "debug": [...], "warnings": [...], "ended": [...]}; "ended" says per file '
            "how its run ended (completed, failed, incomplete, no table) and quotes the failure line. "
            "Exit 0 when every file was read and no run failed (a file with no run is reported in warnings), "
            "1 when a file shows a failed run (a failure line such as 'Test NCCL failure' or an MPI abort, or a "
            "table that stops before the size its run asked for, or before --max-bytes), "
            "2 when one cannot be read."
        ),
    )
    parse.add_argument("files", nargs="+", metavar="FILE", help="log or -J JSON file ('-' reads stdin)")
    parse.add_argument(
        "--max-bytes",
        metavar="SIZE",
        help="the message size the table must reach (8G, as all_reduce_perf -e takes it); a run that stops "
        "below it is incomplete",
    )
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


def parse_files(paths: list[str], max_bytes: int | None = None) -> dict:
    """``{"runs", "debug", "warnings", "ended"}`` for the given files (all read first).

    ``ended`` holds one entry per file: how its run ended (``acceptance.run.run_end``), with
    ``file``; ``max_bytes`` makes a run whose table stops below it ``incomplete``.
    """
    texts = [(p, read_input(p)) for p in paths]
    out: dict = {"runs": [], "debug": [], "warnings": [], "ended": []}
    for path, text in texts:
        name = "<stdin>" if path == "-" else path
        parsed = acceptance_run.parse_log(text, name)
        out["runs"].extend(parsed["runs"])
        out["warnings"].extend(parsed["warnings"])
        if parsed["debug"] is not None:
            out["debug"].append(parsed["debug"])
        ended = dict(parsed["ended"], file=name)
        short = [r for r in parsed["runs"] if max_bytes and r["rows"] and max(x["size"] for x in r["rows"]) < max_bytes]
        if short and ended["status"] == acceptance_run.COMPLETED:
            largest = max(x["size"] for x in short[0]["rows"])
            ended.update(
                status=acceptance_run.INCOMPLETE,
                detail=f"its table stops at {human_size(largest)}, expected results up to {human_size(max_bytes)}",
            )
        out["ended"].append(ended)
    return out


# How a run may end and still be read as a result; the others make `nccl parse` exit 1.
_CLEAN_ENDS = (acceptance_run.COMPLETED, acceptance_run.NO_TABLE)


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
    for ended in result.get("ended") or []:
        if ended["status"] not in _CLEAN_ENDS:
            lines.append(f"FAILED: {ended['file']}: run {ended['status']}: {ended['detail']}")
    for w in result["warnings"]:
        lines.append(f"warning: {w}")
    if not result["runs"]:
        lines.append("no nccl-tests run found")
    return "\n".join(lines).rstrip() + "\n"


def run_parse(args) -> int:
    max_bytes = None
    if args.max_bytes is not None:
        max_bytes = parse_size(args.max_bytes)
        if not max_bytes:
            raise CliError(f"--max-bytes: expected a size such as 8G or 1048576, found {args.max_bytes!r}")
    result = parse_files(args.files, max_bytes)
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        sys.stdout.write(format_text(result))
    return 1 if any(e["status"] not in _CLEAN_ENDS for e in result["ended"]) else 0
