# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Parse nccl-tests output (``all_reduce_perf`` and friends) into plain dicts.

Standard library only: this runs on target hosts inside a module as well as in
the controller's filters and the CLI.

Reads every text format in use:

* the pre-2.17.4 header (``# nThread ...`` first, no version line) and the
  2.17+ one (``# nccl-tests version X nccl-headers=N nccl-library=N``,
  ``# Collective test starting: <binary>``, ``unalign: 0``, the wider
  ``#wrong`` column and the ``# Collective test concluded`` footer);
* both device forms, ``[0000:19:00]`` and ``[0x0f]``;
* every launcher's framing, stripped from each line before it is read: Open MPI
  ``--tag-output`` (``[1,0]<stdout>:``), MPICH / Intel MPI ``-prepend-rank``
  (``[0] ``), ``srun --label`` (``0: ``), Kubernetes log prefixes (an RFC 3339
  timestamp, with the container runtime's ``stdout F `` after it, or
  ``kubectl logs --prefix``'s ``[pod/name/container] ``), Ray's / SkyPilot's
  ``(head, rank=0, pid=3808) ``, indented or not; ANSI colour codes, tabs and
  CRLF line ends; MPI / pmix / pyxis warnings between header lines,
  NCCL INFO lines between rows;
* header, device and footer lines with or without their ``#`` (log collectors
  and some launchers drop it); device lines with a ``Group`` field (2.13 and
  later) and without (``#   Rank  0 Pid 25 on host device  0 [0x10] A100``);
* how a run ended: ``completed`` (its footer was printed), the failure lines
  printed anywhere in the log (``Test NCCL failure``, ``Test CUDA failure``,
  ``Test failure``, an MPI abort, a rank or srun task that died, a Slurm step
  cancelled, ``Out of bounds values : N FAILED``) with the node each one names
  (:func:`find_failures`), and whether the table stopped, with no footer,
  before the largest size the run asked for (``truncated``); ``keep_empty``
  also returns the runs that printed no table (what their header said);
* the old ``error`` column (a relative error, so ``#wrong`` is None), nccl-tests'
  ``Reducing maxBytes to N`` (memory), a footer with no table before it;
* several runs in one log (split on the header lines), single-size runs,
  ``N/A`` in ``#wrong`` (``-c 0``), the ``Out of bounds`` / ``Avg bus bandwidth``
  footer, a run that failed before its table (reported as a warning);
* the ``-J`` JSON file; its ``env`` dump is never copied into a run, and
  :func:`redact_json_env` blanks it before the raw document is stored.

Every run is a dict in the CLI schema (``gpufleet nccl parse``)::

    {"file", "collective", "ranks", "hosts", "rank_hosts", "gpu_names", "nccl_version",
     "rows": [{"size", "type", "oop_busbw", "ip_busbw", "oop_wrong", "ip_wrong",
               "oop_time_us", "ip_time_us"}],
     "peak_busbw", "avg_busbw", "out_of_bounds",
     "max_bytes", "completed", "truncated", "failures": [{"line", "text", "hosts"}]}

``rank_hosts[i]`` is the host of rank ``i`` (None where the log has no device line
for it); ``max_bytes`` the largest size the run asked for (its parameter line);
``failures`` the failure lines printed after the run started (and before the next
run of the log started), each with the node(s) it names.

Sizes are int bytes, bandwidths float GB/s, times float microseconds, ``*_wrong``
an int or None (``N/A``). ``peak_busbw`` is the max over rows (out-of-place and
in-place); ``avg_busbw`` is nccl-tests' own footer figure: the mean over *all*
sizes, small ones included, so it is no gate.

Nothing here raises on garbage: parsers return ``(runs, warnings)``.
"""

from __future__ import annotations

import json
import math
import re
import reprlib
import sys

# Launcher framing, stripped from each line before anything else reads it.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# Kubernetes: an RFC 3339 timestamp (``kubectl logs --timestamps``), followed in the node's own
# log files by the container runtime's stream and tag (``stdout F ``, ``stderr P ``).
_K8S_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s(?:(?:stdout|stderr)\s[FP]\s?)?"
)
# ``kubectl logs --prefix``: ``[pod/<name>/<container>] ``.
_K8S_POD = re.compile(r"^\s*\[pod/[^\]\s]+\]\s?")
# Per-rank tags, possibly nested (``[1,0]<stdout>:3: x``) and indented: Open MPI's
# ``[job,rank]<stdout>:``, MPICH / Intel MPI ``-prepend-rank``'s ``[rank] ``, ``srun --label``'s
# ``rank: ``, Ray's (SkyPilot's) ``(head, rank=0, pid=3808) ``.
_PREFIX_RES = (
    re.compile(r"^\s*\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:\s?"),
    re.compile(r"^\s*\[\d{1,6}\]\s"),
    re.compile(r"^\s{0,4}\d{1,6}: "),
    re.compile(r"^\s*\((?:[\w.-]+, )?(?:rank=\d+, )?pid=\d+(?:, ip=[\w.:]+)?\)\s"),
)
# Header, device and footer lines, matched on the line without its leading ``#``.
_VERSION_LINE = re.compile(r"^nccl-tests version\s+(\S+)(?:.*?nccl-library=(\d+))?")
_STARTING = re.compile(r"^Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^Collective test concluded:\s*(\S+)")
_REDUCING = re.compile(r"^Reducing maxBytes to\s+(\d+)")
_PARAMS = re.compile(r"^nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_STEP = re.compile(r"\bstep:\s*(\d+)\s*\((factor|bytes)\)")
_USING_DEVICES = re.compile(r"^Using devices")
# ``Group`` came with nccl-tests 2.13; older builds print ``Rank 0 Pid 25 on host device 0 [0x10] name``.
_RANK = re.compile(
    r"^Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*?)\s*$"
)
_NCCL_VERSION = re.compile(r"(?:^|\s)NCCL version\s+(\d+\.\d+\.\d+)")
_TABLE_HEAD = re.compile(r"^size\s+count\s+type\b")
# nccl-tests before 2.0 printed the largest relative error ("error", a float such as 2e-07)
# where later ones count wrong values ("#wrong"): that column is no count.
_ERROR_COLUMN = re.compile(r"\berror\s*$")
_OOB = re.compile(r"^Out of bounds values\s*:\s*(\d+)")
_AVG = re.compile(r"^Avg bus bandwidth\s*:\s*([-+0-9.eE]+|nan|inf)")
_ERROR = re.compile(r"^error:\s*(.+)$")
_NCCL_DEBUG = re.compile(r"\bNCCL (?:INFO|WARN)\b")
_NCCL_WARN = re.compile(r"\bNCCL WARN\b")
# Lines worth quoting when a run printed no table (the first one becomes the warning's detail).
_FAILURE = re.compile(r"(Test (?:CUDA|NCCL|NVML)? ?failure|Test failure|Invalid number of GPUs|NCCL WARN|error:)")
# Lines that mean the run failed, wherever they are: nccl-tests' own test failures, an MPI
# abort or a rank that died (Open MPI, MPICH / Intel MPI), an srun task that exited non-zero
# or was killed, a Slurm step cancelled (time limit, node failure), a crashed process.
_RUN_FAILURE = re.compile(
    r"Test (?:NCCL |CUDA |NVML )?failure\b"
    r"|Invalid number of GPUs"
    r"|MPI_ABORT was invoked"
    r"|\bnoticed that process rank \d+ .*\b(?:exited on signal|exited with|returned)"
    r"|\bdetected that one or more processes exited with non-zero status"
    r"|BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
    r"|^Abort\(\d+\) on node \d+"
    r"|^srun: error: .*\btask \d+(?:-\d+)?: (?:Exited with exit code [1-9]|Killed|Aborted|Segmentation|Terminated|"
    r"Bus error|Floating point|Illegal)"
    r"|\*\*\* (?:STEP|JOB) \S+ ON \S+ CANCELLED"
    r"|\bSegmentation fault\b|\(core dumped\)"
    r"|\bis aborting the MPI job\b"
    r"|^ssh: connect to host \S+ port \d+: "
    r"|\b(?:ORTE|PRTE) (?:was unable to reliably start|has lost communication with)"
    r"|^Out of bounds values\s*:\s*[1-9]\d*\s+FAILED"
)
# Lines that explain a run that printed no table, when nothing above does: what NCCL or UCX
# reported as it failed (a run with a table may print such lines and still be sound).
_WEAK_FAILURE = re.compile(r"\bNCCL WARN\b|\bUCX\s+ERROR\b")
# The node a failure line names: ``gpu01: Test NCCL failure``, `` .. gpu01 pid 25: Test failure``,
# ``... on node gpu02 exited on signal 6``, ``srun: error: gpu02: task 1: ...``, ``STEP 7.0 ON gpu01``.
_FAILURE_HOST = (
    # Also where the failure cut a table row: ``  2097152  32768  float  none  -1 node0: Test CUDA failure``.
    re.compile(r"(?:^|\s)(?:\.\.\s+)?([\w.-]+?)(?:\s+pid\s+\d+)?:\s+Test (?:NCCL |CUDA |NVML )?failure"),
    re.compile(r"\bon node ([\w.-]*[A-Za-z_][\w.-]*)"),  # not Intel MPI's "on node 9" (a rank)
    re.compile(r"^srun: error: ([\w.-]+): task"),
    re.compile(r"\b(?:STEP|JOB) \S+ ON ([\w.-]+) CANCELLED"),
)
# The rank a failure line names, to find its node from the device lines.
_FAILURE_RANK = re.compile(r"\b(?:process rank|task|invoked on rank|rank) (\d+)\b")
_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$|^\d{2}:\d{2}:\d{2}$")
_HEADER_ORDER = {"version": 1, "starting": 2, "params": 3}
_BINARY = re.compile(r"(?:^|[/\s])(\w+)_perf(?:_mpi)?\b")

# Collectives whose table has no reduction operator / root column in some builds.
KNOWN_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "alltoall",
    "broadcast",
    "gather",
    "hypercube",
    "reduce",
    "reduce_scatter",
    "scatter",
    "sendrecv",
)


def nccl_version_from_code(code: int | str | None) -> str | None:
    """``22705`` -> ``"2.27.5"``; ``2804`` -> ``"2.8.4"`` (NCCL_VERSION_CODE before 2.9)."""
    try:
        value = int(code)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float
        return None
    if value <= 0:
        return None
    if value >= 10000:
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"


def strip_prefix(line: str) -> str:
    """One line as the tool printed it: without the launcher's framing and the line end.

    Removes ANSI colour codes, carriage returns, a Kubernetes timestamp (and the runtime's
    ``stdout F ``) or ``[pod/...]`` prefix, then per-rank tags (``[1,0]<stdout>:``, ``[0] ``,
    ``3: ``, also nested), and turns tabs into spaces.
    """
    line = _ANSI.sub("", line.rstrip("\r\n")).replace("\r", "").replace("\t", " ")
    line = _K8S_TIME.sub("", line, count=1)
    line = _K8S_POD.sub("", line, count=1)
    for _ in range(3):
        before = line
        for rx in _PREFIX_RES:
            line = rx.sub("", line, count=1)
        if line == before:
            break
    return line


def failure_in(line: str, weak: bool = False) -> str | None:
    """The failure a (framing-free) line reports, stripped; None when it reports none.

    ``weak`` also takes NCCL WARN and UCX ERROR lines (the cause of a run without a table)."""
    stripped = line.strip()
    body = stripped.lstrip("#").strip()
    if _RUN_FAILURE.search(body) or (weak and _WEAK_FAILURE.search(body)):
        return stripped
    return None


def failure_hosts(text: str, rank_hosts: list | None = None) -> list[str]:
    """The node(s) a failure line names: by name, or by the rank it names (``rank_hosts[rank]``)."""
    for rx in _FAILURE_HOST:
        m = rx.search(text)
        if m:
            return [m.group(1)]
    m = _FAILURE_RANK.search(text)
    if m and rank_hosts:
        rank = _many(m.group(1))
        if rank < len(rank_hosts) and rank_hosts[rank]:
            return [rank_hosts[rank]]
    return []


def find_failures(text: str, rank_hosts: list | None = None, weak: bool = False) -> list[dict]:
    """Every failure line of a whole log: ``[{"line", "text", "hosts"}]`` (line numbers from 1);
    ``weak`` adds NCCL WARN and UCX ERROR lines."""
    out = []
    if not isinstance(text, str):
        return out
    for line_no, raw in enumerate(text.splitlines(), start=1):
        found = failure_in(strip_prefix(raw), weak)
        if found:
            out.append({"line": line_no, "text": found[:300], "hosts": failure_hosts(found, rank_hosts)})
    return out


def collective_name(text: str | None) -> str | None:
    """``/opt/nccl-tests/build/all_reduce_perf`` -> ``all_reduce``; None when no binary is named."""
    if not text:
        return None
    m = _BINARY.search(text)
    return m.group(1) if m else None


def _num(token: str) -> float | None:
    return float(token) if _NUMBER.match(token) else None


def _wrong(token: str) -> int | None:
    if token.upper() == "N/A":
        return None
    return _whole(_num(token))


def parse_row(line: str) -> dict | None:
    """One table row -> a row dict, or None when the line is not a result row.

    Columns: size count type [redop] [root] then out-of-place (time algbw busbw
    #wrong) and in-place (same four), optionally followed by a timestamp (``-T``).
    A run replaying only in-place results leaves the out-of-place block blank.
    """
    tokens = line.split()
    if len(tokens) < 7 or _count(tokens[0]) is None or _count(tokens[1]) is None:
        return None
    if _num(tokens[2]) is not None:  # the third column is the data type name
        return None
    while tokens and _DATE.match(tokens[-1]):
        tokens.pop()
    rest = tokens[3:]
    # redop is a word ("sum", "none", "prod", "avg", "min", "max"); root an int.
    if rest and _num(rest[0]) is None and rest[0].upper() != "N/A":
        rest = rest[1:]
    values = rest
    if len(values) in (9, 5):  # a root column precedes the figures
        values = values[1:]
    if len(values) not in (8, 4):
        return None
    parsed = [_num(v) if i % 4 != 3 else None for i, v in enumerate(values)]
    if any(parsed[i] is None for i in range(len(values)) if i % 4 != 3):
        return None
    if any(values[i].upper() != "N/A" and _num(values[i]) is None for i in range(3, len(values), 4)):
        return None
    row = {"size": int(tokens[0]), "type": tokens[2]}
    if len(values) == 8:
        oop, ip = values[:4], values[4:]
        row.update(
            oop_time_us=float(oop[0]),
            oop_busbw=float(oop[2]),
            oop_wrong=_wrong(oop[3]),
            ip_time_us=float(ip[0]),
            ip_busbw=float(ip[2]),
            ip_wrong=_wrong(ip[3]),
        )
    else:
        row.update(
            oop_time_us=None,
            oop_busbw=None,
            oop_wrong=None,
            ip_time_us=float(values[0]),
            ip_busbw=float(values[2]),
            ip_wrong=_wrong(values[3]),
        )
    return {
        k: row[k]
        for k in ("size", "type", "oop_busbw", "ip_busbw", "oop_wrong", "ip_wrong", "oop_time_us", "ip_time_us")
    }


def _row_peak(row: dict) -> float | None:
    values = [v for v in (row.get("oop_busbw"), row.get("ip_busbw")) if v is not None]
    return max(values) if values else None


def _new_state(file: str | None, line_no: int) -> dict:
    return {
        "file": file,
        "line": line_no,
        "collective": None,
        "ranks": {},
        "nccl_version": None,
        "nccl_library_code": None,
        "rows": [],
        "avg_busbw": None,
        "out_of_bounds": None,
        "closed": False,
        "header": 0,  # the last header line seen: 1 version, 2 test starting, 3 parameters
        "errors": [],
        "max_bytes": None,
        "step": None,  # (value, "factor" | "bytes") from the parameter line
        "failures": [],
        "error_column": False,  # the table's 4th figures are a relative error, not a count
        "reduced_to": None,  # "Reducing maxBytes to N due to memory limitation"
    }


def _rank_hosts(ranks: dict) -> list:
    return [ranks[i][0] if i in ranks else None for i in range(max(ranks) + 1)] if ranks else []


def _truncated(state: dict) -> bool:
    """The table stopped before the largest size the run asked for: the next size would still fit,
    and no footer says the run got to its end."""
    rows, limit = state["rows"], state["reduced_to"] or state["max_bytes"]
    if not rows or not limit or state["closed"]:
        return False
    largest = max(r["size"] for r in rows)
    value, kind = state["step"] or (2, "factor")
    following = largest + value if kind == "bytes" else largest * max(value, 2)
    return largest < limit and following <= limit


def _finish(state: dict) -> dict:
    ranks = state["ranks"]
    rows = state["rows"]
    peaks = [p for p in (_row_peak(r) for r in rows) if p is not None]
    version = state["nccl_version"] or nccl_version_from_code(state["nccl_library_code"])
    return {
        "file": state["file"],
        "collective": state["collective"],
        # The highest rank + 1: some published logs keep only the last Rank line.
        "ranks": (max(ranks) + 1) if ranks else None,
        "hosts": sorted({r[0] for r in ranks.values()}),
        "gpu_names": sorted({r[1] for r in ranks.values() if r[1]}),
        "nccl_version": version,
        "rows": rows,
        "rank_hosts": _rank_hosts(ranks),
        "peak_busbw": max(peaks) if peaks else None,
        "avg_busbw": state["avg_busbw"],
        "out_of_bounds": state["out_of_bounds"],
        "max_bytes": state["max_bytes"],
        "completed": bool(state["closed"]),
        "truncated": _truncated(state),
        "failures": [
            dict(f, hosts=f["hosts"] or failure_hosts(f["text"], _rank_hosts(ranks))) for f in state["failures"]
        ],
    }


def parse_text(text: str, file: str | None = None, keep_empty: bool = False) -> tuple[list[dict], list[str]]:
    """Parse nccl-tests text output (a whole log) -> ``(runs, warnings)``.

    A run with no result row (the test failed before its table) becomes a warning naming
    the line and the failure text when there is one; it is returned as well (with no rows,
    what its header and device lines said) only with ``keep_empty``.
    """
    runs: list[dict] = []
    warnings: list[str] = []
    where = file or "<input>"
    state: dict | None = None
    pending_binary: str | None = None  # a command line naming the binary, seen before the header
    pending_version: str | None = None  # "NCCL version" printed before the run it belongs to

    def close() -> None:
        nonlocal state
        if state is None:
            return
        if state["rows"]:
            runs.append(_finish(state))
        else:
            detail = f": {state['errors'][0]}" if state["errors"] else ""
            warnings.append(f"{where}:{state['line']}: nccl-tests run has no result rows{detail}")
            if keep_empty:
                runs.append(_finish(state))
        state = None

    def open_run(line_no: int) -> dict:
        nonlocal state, pending_binary, pending_version
        close()
        state = _new_state(file, line_no)
        if pending_binary:
            state["collective"] = pending_binary
        if pending_version:
            state["nccl_version"] = pending_version
        pending_binary = pending_version = None
        return state

    def current(line_no: int, *, header: bool = False) -> dict:
        """The open run; a header line after rows (or after the footer) starts a new one."""
        if state is None or state["closed"] or (header and state["rows"]):
            return open_run(line_no)
        return state

    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = strip_prefix(raw)
        stripped = line.strip()
        if not stripped:
            continue
        if _NCCL_DEBUG.search(line):
            m = _NCCL_VERSION.search(line)
            if m and not _NCCL_WARN.search(line):
                if state is not None and not state["closed"] and not state["nccl_version"]:
                    state["nccl_version"] = m.group(1)
                elif state is None or state["closed"]:
                    pending_version = m.group(1)
            elif _NCCL_WARN.search(line) and state is not None and not state["closed"]:
                state["errors"].append(stripped)
            continue
        commented = stripped.startswith("#")
        # Header, device and footer lines read the same with or without their "#".
        body = stripped.lstrip("#").strip() if commented else stripped
        if not commented:
            row = parse_row(stripped)
            if row is not None:
                run = current(line_no)
                if run["error_column"]:
                    row.update(oop_wrong=None, ip_wrong=None)
                run["rows"].append(row)
                continue
            m = _NCCL_VERSION.search(stripped)
            if m and stripped.startswith("NCCL version"):
                if state is not None and not state["closed"] and not state["nccl_version"]:
                    state["nccl_version"] = m.group(1)
                elif state is None or state["closed"]:
                    pending_version = m.group(1)
                continue
        failed = failure_in(stripped)
        if failed:
            # A failure belongs to the last run that started before it, finished or not.
            if state is not None:
                state["failures"].append({"line": line_no, "text": failed[:300], "hosts": failure_hosts(failed)})
                if not state["closed"]:
                    state["errors"].append(failed)
            else:
                warnings.append(f"{where}:{line_no}: {failed}")
            if not _OOB.match(body):  # "Out of bounds values : N FAILED" is the footer as well
                continue
        kind = None
        m = _VERSION_LINE.match(body)
        if m:
            kind = "version"
        else:
            m = _STARTING.match(body)
            if m:
                kind = "starting"
            else:
                m = _PARAMS.match(body)
                kind = "params" if m else None
        if kind:
            run = state
            order = _HEADER_ORDER[kind]
            if run is None or run["closed"] or run["rows"] or run["header"] >= order:
                run = open_run(line_no)
            run["header"] = order
            if kind == "version":
                run["nccl_library_code"] = m.group(2)
            elif kind == "starting":
                run["collective"] = collective_name(m.group(1)) or m.group(1)
            else:
                run["max_bytes"] = _many(m.group(4))
                sm = _STEP.search(body)
                if sm:
                    run["step"] = (_many(sm.group(1)), sm.group(2))
            continue
        if _USING_DEVICES.match(body):
            current(line_no, header=True)
            continue
        m = _RANK.match(body)
        if m:
            run = current(line_no, header=True)
            rank = _count(m.group(1))
            if rank is not None and rank < MAX_RANKS:  # a larger one is no rank of a real run
                run["ranks"][rank] = (m.group(4), m.group(7))
            continue
        if _TABLE_HEAD.match(body):
            current(line_no, header=True)["error_column"] = bool(_ERROR_COLUMN.search(body))
            continue
        m = _REDUCING.match(body)
        if m and state is not None and not state["rows"]:
            state["reduced_to"] = _many(m.group(1))
            continue
        m = _OOB.match(body)
        if m:
            # A footer with no run before it (an excerpt that starts there) is a run of its own.
            (state if state is not None else current(line_no))["out_of_bounds"] = _many(m.group(1))
            continue
        m = _AVG.match(body)
        if m and state is None:
            current(line_no)
        if m and state is not None:
            try:
                state["avg_busbw"] = float(m.group(1))
            except ValueError:
                state["avg_busbw"] = None
            if state["out_of_bounds"] is not None or state["rows"]:
                state["closed"] = True
            continue
        m = _CONCLUDED.match(body)
        if m and state is not None:
            state["closed"] = True
            continue
        m = _ERROR.match(body)
        if m and state is not None:
            state["errors"].append(m.group(1))
            continue
        if commented:
            continue
        if _FAILURE.search(stripped):
            if state is not None and not state["closed"]:
                state["errors"].append(stripped)
            else:
                warnings.append(f"{where}:{line_no}: {stripped}")
            continue
        name = collective_name(stripped)
        if name and (state is None or state["closed"] or state["rows"]):
            pending_binary = name
    close()
    if keep_empty and not runs and pending_binary:
        # The launcher named the binary but nccl-tests printed no header (it failed to start).
        state = _new_state(file, 0)
        state["collective"] = pending_binary
        runs.append(_finish(state))
    if not runs and not warnings:
        warnings.append(f"{where}: no nccl-tests run found")
    return runs, warnings


# --- -J JSON output ----------------------------------------------------------------

# Environment variables whose values are kept in a redacted dump: NCCL / UCX
# tuning is evidence; everything else may hold a secret and is blanked.
_ENV_KEEP_PREFIXES = ("NCCL_", "UCX_", "CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID", "SLURM_NNODES", "OMPI_COMM_WORLD_SIZE")
_ENV_SECRET_WORDS = ("TOKEN", "SECRET", "PASS", "KEY", "CRED", "AUTH", "COOKIE", "PRIVATE", "SESSION")
REDACTED = "<redacted>"


def redact_env_entry(entry: str) -> str:
    """``NAME=value`` -> ``NAME=<redacted>`` unless NAME is NCCL/UCX tuning (and no secret-ish name)."""
    if not isinstance(entry, str):
        return REDACTED
    name, sep, _value = entry.partition("=")
    upper = name.upper()
    if sep and upper.startswith(_ENV_KEEP_PREFIXES) and not any(w in upper for w in _ENV_SECRET_WORDS):
        return entry
    return f"{name}={REDACTED}" if sep else REDACTED


def redact_json_env(doc: dict) -> dict:
    """A copy of an nccl-tests ``-J`` document with its ``env`` dump redacted (store this, never the raw one)."""
    if not isinstance(doc, dict):
        return doc
    out = dict(doc)
    env = out.get("env")
    if isinstance(env, list):
        out["env"] = [redact_env_entry(e) for e in env]
    elif isinstance(env, dict):
        out["env"] = {k: redact_env_entry(f"{k}={v}").partition("=")[2] for k, v in env.items()}
    elif env is not None:
        out["env"] = REDACTED
    return out


# Sizes and counts: ASCII digits only (``str.isdigit`` is true for "²", which int() refuses), and no
# more of them than any real size has (int() refuses past 4,300 digits).
_MAX_COUNT_DIGITS = 30


def _count(token: str) -> int | None:
    """A size or count token as an int, or None when it is not a plain decimal of at most 30 digits."""
    if not token or len(token) > _MAX_COUNT_DIGITS or not (token.isascii() and token.isdigit()):
        return None
    return int(token)


# Ranks of one run: more than any cluster has GPUs. The per-rank host list is as long as the largest
# rank, so a rank past this (a garbled line, a hostile file) is not taken for one.
MAX_RANKS = 1 << 20


def _many(token: str) -> int:
    """A count matched by ``\\d+``: its value, or as many as an int holds when it has more than 30 digits."""
    value = _count(token)
    return sys.maxsize if value is None else value


def _jcount(value) -> int | None:
    """A JSON size or count: a non-negative int, or a float with an integral finite value, of at most
    30 digits; None for anything else (NaN, Infinity, a string, a bool, a 5,000-digit number)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():  # NaN and the infinities are not integers either
            return None
        value = int(value)
    if not isinstance(value, int) or value < 0 or value.bit_length() > 100:
        return None
    return value


def _jerrors(value) -> list:
    """nccl-tests' ``errors``: a list of messages; anything else (a string, an object) as one."""
    if value is None or value == []:
        return []
    return value if isinstance(value, list) else [value]


def _jnum(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value.bit_length() > 1000:
        return None  # no bandwidth or time; float() would overflow
    if isinstance(value, (int, float)):
        return float(value) if value == value else None  # NaN -> None
    if isinstance(value, str):
        return _num(value.strip())
    return None


def _whole(number: float | None) -> int | None:
    """A #wrong figure rounded to an int; None for none or NaN. An infinite count (1e999 reads as one)
    is as many wrong values as an int holds, never "not checked"."""
    if number is None or math.isnan(number):
        return None
    if math.isinf(number):
        return sys.maxsize if number > 0 else -sys.maxsize
    return round(number)


def _jwrong(value) -> int | None:
    return _whole(_jnum(value))


def parse_json_doc(doc, file: str | None = None) -> tuple[list[dict], list[str]]:
    """Parse a decoded nccl-tests ``-J`` document -> ``(runs, warnings)``."""
    where = file or "<input>"
    if not isinstance(doc, dict):
        return [], [f"{where}: JSON is not an nccl-tests document (top level is not an object)"]
    results = doc.get("results")
    if not isinstance(results, list):
        return [], [f"{where}: JSON has no 'results' list: not an nccl-tests -J file"]
    config = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    devices = config.get("devices") or doc.get("devices") or []
    ranks: dict[int, tuple[str, str]] = {}
    for dev in devices if isinstance(devices, list) else []:
        rank = dev.get("rank") if isinstance(dev, dict) else None
        if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < MAX_RANKS:
            ranks[dev["rank"]] = (str(dev.get("hostname") or "").strip(), str(dev.get("device_info") or "").strip())
    args = doc.get("args") if isinstance(doc.get("args"), list) else []
    collective = collective_name(str(args[0])) if args else None
    rows = []
    warnings = []
    for i, res in enumerate(results):
        if not isinstance(res, dict) or not isinstance(res.get("size"), (int, float)):
            warnings.append(f"{where}: results[{i}] is not a result record; skipped")
            continue
        size = _jcount(res["size"])
        if size is None:
            warnings.append(f"{where}: results[{i}].size: expected a byte count, found {_shown(res['size'])}; skipped")
            continue
        oop = res.get("out_of_place") if isinstance(res.get("out_of_place"), dict) else {}
        ip = res.get("in_place") if isinstance(res.get("in_place"), dict) else {}
        rows.append(
            {
                "size": size,
                "type": str(res.get("type") or ""),
                "oop_busbw": _jnum(oop.get("bus_bw")),
                "ip_busbw": _jnum(ip.get("bus_bw")),
                "oop_wrong": _jwrong(oop.get("nwrong")),
                "ip_wrong": _jwrong(ip.get("nwrong")),
                "oop_time_us": _jnum(oop.get("time", oop.get("cpu_time"))),
                "ip_time_us": _jnum(ip.get("time", ip.get("cpu_time"))),
            }
        )
        if collective is None:
            collective = collective_name(str(res.get("experiment_name") or ""))
    state = _new_state(file, 0)
    state.update(collective=collective, ranks=ranks, rows=rows)
    state["nccl_library_code"] = doc.get("nccl_version")
    oob = doc.get("out_of_bounds")
    if isinstance(oob, dict) and _jcount(oob.get("count")) is not None:
        state["out_of_bounds"] = _jcount(oob["count"])
    avg = doc.get("average_bus_bandwidth")
    if isinstance(avg, dict):
        state["avg_busbw"] = _jnum(avg.get("bandwidth"))
    # The -J file is written whole at the end of a run: its footer figures mean the run got there.
    state["closed"] = isinstance(avg, dict) or isinstance(oob, dict)
    if isinstance(config.get("max_bytes", config.get("maxBytes")), int):
        state["max_bytes"] = config.get("max_bytes", config.get("maxBytes"))
    for err in _jerrors(doc.get("errors")):
        text = err if isinstance(err, str) else _shown(err, 300)
        warnings.append(f"{where}: nccl-tests reported: {_shown(text, 300)}")
        state["failures"].append({"line": 0, "text": text[:300], "hosts": failure_hosts(text[:300])})
    if not rows:
        warnings.append(f"{where}: nccl-tests JSON has no result rows")
        return [], warnings
    return [_finish(state)], warnings


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 80, 80


def _shown(value, limit: int = 60) -> str:
    """A JSON value for a warning, cut without printing all of it first."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1000:
        return "an integer of more than 300 digits"
    if isinstance(value, str):
        return value[:limit] + ("..." if len(value) > limit else "")
    # Numbers as JSON writes them (NaN, Infinity), the rest cut level by level while it is built.
    text = json.dumps(value) if isinstance(value, int | float) else _REPR.repr(value)
    return text[:limit] + ("..." if len(text) > limit else "")


def looks_like_json(text: str) -> bool:
    return text.lstrip().startswith("{")


def parse(text: str, file: str | None = None, keep_empty: bool = False) -> tuple[list[dict], list[str]]:
    """Parse either format (text or ``-J`` JSON, told apart by content) -> ``(runs, warnings)``;
    ``keep_empty`` as :func:`parse_text` takes it."""
    if not isinstance(text, str):
        return [], [f"{file or '<input>'}: input is not text"]
    if looks_like_json(text):
        try:
            doc = json.loads(text)
        except RecursionError:
            return [], [f"{file or '<input>'}: JSON nested too deep: not an nccl-tests -J file"]
        except ValueError as exc:
            # A -J file cut short by a crash: say so, then try the text parser anyway.
            runs, warnings = parse_text(text, file, keep_empty)
            return runs, [f"{file or '<input>'}: invalid JSON ({exc}); read as text", *warnings]
        return parse_json_doc(doc, file)
    return parse_text(text, file, keep_empty)


def busbw_at_largest(run: dict) -> float | None:
    """Out-of-place busbw at the run's largest message size (in-place when out-of-place was not run).

    With several rows at the largest size (several data types), the lowest one.
    """
    rows = run.get("rows") or []
    if not rows:
        return None
    largest = max(r["size"] for r in rows)
    values = []
    for r in rows:
        if r["size"] == largest:
            value = r.get("oop_busbw") if r.get("oop_busbw") is not None else r.get("ip_busbw")
            if value is not None:
                values.append(value)
    return min(values) if values else None
