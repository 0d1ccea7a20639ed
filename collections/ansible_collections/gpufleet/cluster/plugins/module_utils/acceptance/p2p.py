# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""GPU-to-GPU copy bandwidth of one node, from NVIDIA's nvbandwidth (github.com/NVIDIA/nvbandwidth).

A node with one NVLink down, or a GPU pair whose copies go over PCIe, can still pass an all_reduce
floor; its GPU-to-GPU copy matrix shows it. The acceptance runs nvbandwidth on each node with one
testcase (by default ``device_to_device_memcpy_read_ce``: a copy-engine ``cuMemcpyAsync`` between
each pair of GPUs with peer access, one pair at a time) and :func:`parse` reads its output.

What nvbandwidth prints, as its source v0.8 writes it (read there, not guessed):

* **JSON** (``-j``, json_output.cpp): one object ``{"nvbandwidth": {...}}`` with ``version``,
  ``git_version``, ``CUDA Runtime Version``, ``Driver Version``, ``GPU Device list`` and
  ``testcases``: a list of ``{"name", "status", "bandwidth_description", "bandwidth_matrix",
  "sum"}``. ``status`` is ``Passed``, ``Waived`` (no GPU pair has peer access: the testcase's
  filter), ``Error`` or ``ERROR`` (an unknown testcase name). ``bandwidth_matrix`` is a list of
  rows, each cell a *string*: the figure in GB/s, or ``"N/A"`` where nothing was measured (the
  diagonal, and a pair without peer access). ``sum`` is the sum of the cells. An error before the
  testcases (e.g. both ``-t`` and ``-p``) sets ``nvbandwidth.error``. v0.8 has a slip worth
  knowing: a testcase that throws is appended a second time with status ``Error`` (the lookup of
  the first checks the wrong key), so the list may hold one name twice.
* **Text** (output.cpp, inline_common.h ``operator<<``)::

      Running device_to_device_memcpy_read_ce.
      memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
                 0         1         2
       0       N/A    376.03    375.88
       1    375.92       N/A    376.21
       2    376.10    375.97       N/A

      SUM device_to_device_memcpy_read_ce 2256.11

  a header of column labels (each right-aligned in 10 characters), one row per GPU (its label in
  2, each cell in 10, two decimals), a blank line and ``SUM <testcase> <sum>``. The README's sample
  (an older release) prints ``0.00`` on the diagonal; v0.8 prints ``N/A``, as in issue #50 of the
  repository (six A6000s, ``SUM device_to_device_memcpy_read_ce 715.53``). A waived testcase
  prints ``Waived: ``, an unknown one ``ERROR: Testcase <name> not found!``, and arguments it does
  not know ``ERROR: Invalid Arguments`` with exit status 1.

The figure judged is the node's **weakest pair** (``min_gbps``): one slow link shows there, while
the sum of 56 pairs moves by a fraction of a per cent. Output that is malformed or cut short
(no matrix, a row of the wrong length, a cell that is not a number, a text matrix without its
``SUM`` line or one that does not add up) raises :class:`P2PError` with what was missing; it is
never read as 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, violation

TESTCASE = "device_to_device_memcpy_read_ce"
NOT_AVAILABLE = "N/A"
FIELD = "acceptance.p2p"
DEFAULTS = {"required": False, "min_gbps": None}

_RUNNING = re.compile(r"^Running (\S+)\.\s*$")
_SUM = re.compile(r"^SUM (\S+) (\S+)\s*$")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")


class P2PError(ValueError):
    """nvbandwidth's output is not a complete result of the testcase asked for."""


def settings(brief: Mapping | None) -> dict:
    """The brief's ``acceptance.p2p`` with its defaults (the brief schema has validated it)."""
    given = ((brief or {}).get("acceptance") or {}).get("p2p") or {}
    if not isinstance(given, Mapping):
        raise P2PError(f"{FIELD}: expected a mapping, found {type(given).__name__} {given!r}")
    return {**DEFAULTS, **given}


def _cell(text: str, where: str) -> float | None:
    text = str(text).strip()
    if text == NOT_AVAILABLE:
        return None
    if not _NUMBER.match(text):
        raise P2PError(f"{where}: {text!r} is neither a figure in GB/s nor N/A")
    return float(text)


def _matrix(rows: list[list], where: str) -> list[list[float | None]]:
    """Square matrix of figures (None: not measured); raises on a ragged or empty one."""
    if not rows:
        raise P2PError(f"{where}: the bandwidth matrix has no rows")
    size = len(rows)
    out = []
    for i, row in enumerate(rows):
        if len(row) != size:
            raise P2PError(
                f"{where}: row {i} of the bandwidth matrix has {len(row)} cells, expected {size} "
                "(one per GPU): the output is cut short or not nvbandwidth's"
            )
        out.append([_cell(c, f"{where}, row {i} column {j}") for j, c in enumerate(row)])
    return out


def summarize(matrix: list[list[float | None]], testcase: str, fmt: str, reported_sum: float | None = None) -> dict:
    """The figures of one matrix: per pair, the weakest pair, the sum, the pairs not measured."""
    pairs = []
    unmeasured = []
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            if i == j:
                continue
            if value is None:
                unmeasured.append([i, j])
            else:
                pairs.append({"row": i, "column": j, "gbps": value})
    weakest = min(pairs, key=lambda p: p["gbps"]) if pairs else None
    total = sum(p["gbps"] for p in pairs) + sum(matrix[i][i] or 0.0 for i in range(len(matrix)))
    return {
        "testcase": testcase,
        "format": fmt,
        "gpus": len(matrix),
        "pairs": pairs,
        "unmeasured": unmeasured,
        "min_gbps": weakest["gbps"] if weakest else None,
        "min_pair": f"{weakest['row']}->{weakest['column']}" if weakest else None,
        "max_gbps": max(p["gbps"] for p in pairs) if pairs else None,
        "sum_gbps": round(reported_sum if reported_sum is not None else total, 2),
    }


def _parse_json(doc: Mapping, testcase: str) -> dict:
    root = doc.get("nvbandwidth")
    if not isinstance(root, Mapping):
        raise P2PError("JSON output without its 'nvbandwidth' object")
    entries = [t for t in root.get("testcases") or [] if isinstance(t, Mapping) and t.get("name") == testcase]
    if not entries:
        why = f": {root['error']}" if root.get("error") else ""
        raise P2PError(f"testcase {testcase} is not in the JSON output{why}")
    failed = [t for t in entries if str(t.get("status", "")).lower() == "error"]
    if failed:
        why = failed[0].get("error") or root.get("error") or "no reason given"
        raise P2PError(f"testcase {testcase} ended in error: {why}")
    if any(t.get("status") == "Waived" for t in entries):
        return {"testcase": testcase, "format": "json", "waived": True}
    done = [t for t in entries if "bandwidth_matrix" in t]
    if not done:
        states = ", ".join(sorted({str(t.get("status")) for t in entries}))
        raise P2PError(f"testcase {testcase} has no bandwidth matrix (status {states}): the run did not finish")
    entry = done[-1]
    matrix = _matrix(entry["bandwidth_matrix"], f"testcase {testcase}")
    reported = entry.get("sum")
    out = summarize(matrix, testcase, "json", float(reported) if isinstance(reported, (int, float)) else None)
    out["description"] = entry.get("bandwidth_description")
    out["version"] = root.get("version")
    return out


def _parse_text(lines: list[str], testcase: str) -> dict:
    version = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("nvbandwidth Version:")), None)
    if any(ln.startswith("ERROR: Invalid Arguments") for ln in lines):
        raise P2PError("nvbandwidth rejected its arguments (ERROR: Invalid Arguments)")
    start = next((i for i, ln in enumerate(lines) if (m := _RUNNING.match(ln)) and m.group(1) == testcase), None)
    if start is None:
        for ln in lines:
            if ln.startswith("Waived"):
                return {"testcase": testcase, "format": "text", "waived": True, "version": version}
            if ln.startswith("ERROR:") or ln.startswith("Error:"):
                raise P2PError(f"testcase {testcase}: {ln.strip()}")
        raise P2PError(f"no 'Running {testcase}.' line: the testcase did not run")
    body = lines[start + 1 :]
    # The description, then the header of column labels, then one row per GPU up to a blank line.
    if len(body) < 3 or not body[0].strip():
        raise P2PError(f"testcase {testcase}: no bandwidth matrix after 'Running {testcase}.'")
    description = body[0].strip()
    if description.startswith(("Error:", "ERROR:", "Waived")):
        if description.startswith("Waived"):
            return {"testcase": testcase, "format": "text", "waived": True, "version": version}
        raise P2PError(f"testcase {testcase}: {description}")
    columns = body[1].split()
    rows = []
    end = 2
    for ln in body[2:]:
        if not ln.strip():
            break
        parts = ln.split()
        if parts[0] != str(len(rows)):
            raise P2PError(f"testcase {testcase}: matrix row {len(rows)} expected, found {ln.strip()!r}")
        rows.append(parts[1:])
        end += 1
    if columns != [str(i) for i in range(len(columns))] or len(columns) != len(rows):
        raise P2PError(
            f"testcase {testcase}: a header of {len(columns)} column(s) and {len(rows)} row(s): "
            "expected one of each per GPU (the output is cut short)"
        )
    matrix = _matrix(rows, f"testcase {testcase}")
    total = next((m for ln in body[end:] if (m := _SUM.match(ln))), None)
    if total is None or total.group(1) != testcase:
        raise P2PError(f"testcase {testcase}: no 'SUM {testcase} ...' line after the matrix (the output is cut short)")
    try:
        reported = float(total.group(2))
    except ValueError as exc:
        raise P2PError(f"testcase {testcase}: SUM {total.group(2)!r} is not a number") from exc
    out = summarize(matrix, testcase, "text")
    # Each cell is printed to 0.01 GB/s: their sum may differ from the tool's by half of that per cell.
    cells = sum(1 for row in matrix for v in row if v is not None)
    if abs(out["sum_gbps"] - reported) > 0.005 * cells + 1e-6 * abs(reported) + 0.01:
        raise P2PError(
            f"testcase {testcase}: the matrix adds up to {out['sum_gbps']:.2f} GB/s, its SUM line says "
            f"{reported:.2f}: the matrix is not the one the tool measured"
        )
    out["sum_gbps"] = round(reported, 2)
    out["description"] = description
    out["version"] = version
    return out


def parse(output: str, testcase: str = TESTCASE) -> dict:
    """nvbandwidth's output (JSON with ``-j``, else text) -> the testcase's figures.

    Returns ``{testcase, format, gpus, pairs: [{row, column, gbps}], unmeasured: [[row, column]],
    min_gbps, min_pair ("row->column"), max_gbps, sum_gbps, description, version}``, or
    ``{testcase, format, waived: True}`` when the tool waived the testcase (no GPU pair with peer
    access). Raises :class:`P2PError` naming what is wrong with anything else.
    """
    text = output or ""
    if not text.strip():
        raise P2PError("no output")
    if text.lstrip().startswith(("{", "[")):
        try:
            doc, _ = json.JSONDecoder().raw_decode(text.lstrip())
        except ValueError as exc:
            raise P2PError(f"JSON output that does not parse ({exc}): cut short?") from exc
        if not isinstance(doc, Mapping):
            raise P2PError("JSON output that is not an object")
        return _parse_json(doc, testcase)
    return _parse_text(text.splitlines(), testcase)


def judge(
    host: str,
    *,
    path: str,
    present: bool,
    rc: int | None = None,
    stdout: str = "",
    stderr: str = "",
    testcase: str = TESTCASE,
    brief: Mapping | None = None,
) -> dict:
    """One node's p2p record and its violations: ``{"record": {...}, "violations": [...]}``. Pure.

    ``record.status``: ``measured``; ``not gathered`` (no binary at ``path``: nothing fails unless
    the brief's ``acceptance.p2p.required``, then ``P2P_NOT_GATHERED``); ``waived`` (no GPU pair
    with peer access: ``P2P_NOT_GATHERED`` where required); ``failed`` (the tool failed or its
    output is malformed: ``P2P_RUN_FAILED``). A measured node with pairs the tool could not measure
    (``N/A`` off the diagonal) gets ``P2P_NO_PEER_ACCESS`` (an error where required, else a
    warning); one whose weakest pair is under the brief's ``acceptance.p2p.min_gbps`` gets
    ``P2P_BELOW_FLOOR``.
    """
    rule = settings(brief)
    required = bool(rule.get("required"))
    record: dict = {"host": host, "path": path, "testcase": testcase}
    found: list[dict] = []
    if not present:
        record.update(status="not gathered", reason=f"no executable nvbandwidth at {path}")
        if required:
            found.append(
                violation(
                    "P2P_NOT_GATHERED",
                    f"{FIELD}.required",
                    f"no executable nvbandwidth at {path}: the brief requires GPU-to-GPU copy figures. Build it "
                    "from github.com/NVIDIA/nvbandwidth and install it there, or point acceptance_nvbandwidth "
                    "at it",
                    host=host,
                )
            )
        return {"record": record, "violations": found}
    try:
        if rc not in (0, None):
            tail = " | ".join(ln.strip() for ln in f"{stdout}\n{stderr}".strip().splitlines()[-3:])
            raise P2PError(f"exited with status {rc}: {tail or 'no output'}")
        result = parse(stdout, testcase)
    except P2PError as exc:
        record.update(status="failed", reason=str(exc))
        found.append(
            violation(
                "P2P_RUN_FAILED",
                "acceptance_nvbandwidth",
                f"{path} -t {testcase}: {exc}. A node whose GPUs cannot copy to each other is not ready; "
                "see the output in the report",
                host=host,
            )
        )
        return {"record": record, "violations": found}
    if result.get("waived"):
        record.update(status="waived", reason="nvbandwidth waived the testcase: no GPU pair has peer access")
        if required:
            found.append(
                violation(
                    "P2P_NOT_GATHERED",
                    f"{FIELD}.required",
                    f"{path} -t {testcase} was waived: no GPU pair of this node has peer access, and the "
                    "brief requires GPU-to-GPU copy figures",
                    host=host,
                )
            )
        return {"record": record, "violations": found}
    record.update(status="measured", **{k: v for k, v in result.items() if k != "testcase"})
    if result["unmeasured"]:
        shown = ", ".join(f"{r}->{c}" for r, c in result["unmeasured"][:8])
        more = f" and {len(result['unmeasured']) - 8} more" if len(result["unmeasured"]) > 8 else ""
        found.append(
            violation(
                "P2P_NO_PEER_ACCESS",
                FIELD,
                f"{len(result['unmeasured'])} GPU pair(s) without peer access (N/A in nvbandwidth's matrix): "
                f"{shown}{more}; expected every pair measured. Check nvidia-smi topo -m and the fabric manager",
                host=host,
                severity=ERROR if required else WARNING,
            )
        )
    floor = rule.get("min_gbps")
    if floor is not None and result["min_gbps"] is not None and result["min_gbps"] < float(floor):
        found.append(
            violation(
                "P2P_BELOW_FLOOR",
                f"{FIELD}.min_gbps",
                f"weakest GPU pair {result['min_pair']} copies at {result['min_gbps']:.2f} GB/s ({testcase}), "
                f"expected at least {float(floor):g} GB/s. Check that pair's NVLinks (nvidia-smi nvlink -s, -e)",
                host=host,
            )
        )
    return {"record": record, "violations": found}
