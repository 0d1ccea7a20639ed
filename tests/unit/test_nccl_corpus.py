"""The parser over a corpus of nccl-tests / NCCL outputs that other people published.

tests/fixtures/nccl_corpus/manifest.yml lists each file with the values a person read off it
(``expected``); this test parses each file as the acceptance does (``acceptance.run.parse_log``)
and compares every value. The corpus's names and the parser's differ; ``observed`` maps one to
the other. Entries the parser is known to read wrong are listed in KNOWN_WRONG with the reason:
they are strict xfails, so fixing one makes the test say so.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_tests
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.nccl_debug import network_kind
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import COMPLETED, NO_TABLE, parse_log

ROOT = Path(__file__).resolve().parents[2]
# NCCL_CORPUS_DIR points the test at another copy of the corpus (one being collected).
CORPUS = Path(os.environ.get("NCCL_CORPUS_DIR") or ROOT / "tests" / "fixtures" / "nccl_corpus")
MANIFEST = CORPUS / "manifest.yml"
FIELDS = (
    "collective",
    "completed",
    "failure_line",
    "ranks",
    "hosts",
    "gpus",
    "wrong",
    "avg_busbw",
    "max_size_bytes",
    "busbw_at_max_size",
    "rows",
    "transport",
    "intra",
)

# (file, field) -> why the parser reads it otherwise (found by running this test on the corpus).
KNOWN_WRONG: dict[tuple[str, str], str] = {
    ("06-gke-h200-2node-allgather-kubectl-exec.txt", "collective"): (
        "named only as a wrapper script's '-t all_gather' argument, never as a *_perf binary"
    ),
    ("12-2node-socket-warn-socketFinalizeAccept-p2p-cumem.txt", "transport"): (
        "no 'Using network' line nor NET/ channel: only the WARN's source file (misc/socket.cc) says sockets"
    ),
    ("13-2node-alltoall-ib-qp-async-fatal-warn.txt", "transport"): (
        "every NCCL line is node-0's: nothing in the text says a second node took part"
    ),
    ("21-prte-lost-remote-daemon-ssh-refused.txt", "collective"): (
        "the command line is wrapped inside the binary's name ('./build/all_' / 'reduce_perf')"
    ),
    ("38-a100-4node-collnet-sharp-hang-no-table.txt", "failure_line"): (
        "a hang prints no failure; the parser quotes the first NCCL WARN of a run without a table "
        "(the SHARP datatype notice), where the person reads none"
    ),
}


def _entries() -> list[dict]:
    if not MANIFEST.is_file():
        return []
    data = yaml.safe_load(MANIFEST.read_text(encoding="utf-8")) or []
    return [e for e in data if isinstance(e, dict) and e.get("file")]


ENTRIES = _entries()
CASES = [(e, field) for e in ENTRIES for field in FIELDS if field in (e.get("expected") or {})]


def _wrong(runs: list[dict]) -> int | None:
    values = [w for run in runs for row in run["rows"] for w in (row["oop_wrong"], row["ip_wrong"]) if w is not None]
    return sum(values) if values else None


def _transport(debug: dict | None, run_hosts: list[str] | None = None) -> str | None:
    """The corpus's names: IB, RoCE, Socket, OFI (EFA), IBext; None on one node or without NCCL lines.

    How many nodes took part: NCCL's nNodes, the hosts of its lines, or the run's device lines."""
    if not debug:
        return None
    debug_hosts = [h for h in debug["hosts"] if h != "unknown"]
    if max(debug.get("nnodes") or 0, len(debug_hosts), len(run_hosts or [])) < 2:
        return None
    # Without a "Using network" line, the network the channels went through (NET/<name>/...).
    via = [t.split("/")[1] for t in debug.get("transports") or {} if t.startswith("NET/")]
    network = debug.get("network") or (via[0] if via else "")
    if debug.get("socket_fallback"):
        return "Socket"
    if "IBext" in network:
        return "IBext"
    if "Libfabric" in network or "OFI" in network:
        return "OFI (EFA)"
    kind = network_kind(debug)
    if kind == "ib":
        return "RoCE" if debug.get("link_layers") == ["RoCE"] else "IB"
    return network or None


def _intra(debug: dict | None) -> str | None:
    if not debug:
        return None
    if debug.get("nvls"):
        return "NVLS"
    kinds = [t.split("/")[0] for t in debug.get("transports") or {}]
    for name in ("P2P", "SHM"):
        if name in kinds:
            return name
    return None


def observed(text: str, name: str) -> dict:
    """What the parser reads in one file, in the manifest's names."""
    parsed = parse_log(text, name)
    runs = parsed["runs"]
    # A run that printed its header and devices but no table still says who took part.
    first = (runs or parsed["no_table"] or [{}])[0]
    debug = parsed["debug"] or {}
    rows = [row for run in runs for row in run["rows"]]
    largest = max((row["size"] for row in rows), default=None)
    top = [row for row in rows if row["size"] == largest]
    wrong = _wrong(runs)
    oob = [run["out_of_bounds"] for run in runs if run["out_of_bounds"]]
    ended = parsed["ended"]
    return {
        "collective": first.get("collective"),
        # The corpus's "completed": the run ended and its results are right.
        "completed": ended["status"] in (COMPLETED, NO_TABLE) and not wrong and not oob,
        "failure_line": ended["failure"],
        # The corpus reads ranks from the device lines, else from NCCL's "nranks".
        "ranks": first.get("ranks") or debug.get("nranks"),
        "hosts": first.get("hosts") or None,
        "gpus": first.get("gpu_names") or None,
        "wrong": wrong,
        "avg_busbw": first.get("avg_busbw"),
        "max_size_bytes": largest,
        "busbw_at_max_size": {
            "out_of_place": min(r["oop_busbw"] for r in top) if top and top[0]["oop_busbw"] is not None else None,
            "in_place": min(r["ip_busbw"] for r in top) if top and top[0]["ip_busbw"] is not None else None,
        }
        if top
        else None,
        "rows": len(rows),
        "transport": _transport(parsed["debug"], first.get("hosts")),
        "intra": _intra(parsed["debug"]),
    }


def _same(field: str, want, got) -> bool:
    if field == "failure_line" and isinstance(want, str):
        # The manifest quotes the line as the file has it, launcher framing included.
        want = nccl_tests.strip_prefix(want).strip()
    if field in ("hosts", "gpus") and want is not None:
        return sorted(want) == sorted(got or [])
    if field == "busbw_at_max_size" and want is not None and got is not None:
        return all(got.get(k) == pytest.approx(v, abs=0.006) for k, v in want.items())
    if isinstance(want, float) or (field == "avg_busbw" and want is not None):
        return got is not None and got == pytest.approx(float(want), rel=1e-6, abs=1e-9)
    return want == got


_CACHE: dict[str, dict] = {}


@pytest.mark.skipif(not ENTRIES, reason=f"no NCCL corpus manifest at {MANIFEST} (the corpus is collected apart)")
@pytest.mark.parametrize(("entry", "field"), CASES, ids=[f"{e['file']}:{f}" for e, f in CASES])
def test_corpus_entry(entry, field):
    name = entry["file"]
    if name not in _CACHE:
        text = (CORPUS / name).read_text(encoding="utf-8", errors="replace")
        _CACHE[name] = observed(text, name)
    want = entry["expected"][field]
    got = _CACHE[name][field]
    if field == "collective" and entry.get("collective_in_text") is False:
        # The file never names it (the manifest took it from the post): the parser may not invent one.
        assert got in (None, want), f"{name}: the parser says collective {got!r}, the file names none"
        return
    reason = KNOWN_WRONG.get((name, field))
    if reason:
        if _same(field, want, got):
            pytest.fail(f"{name}: {field} is now read right ({got!r}): remove it from KNOWN_WRONG")
        pytest.xfail(reason)
    assert _same(field, want, got), f"{name}: {field}: expected {want!r}, the parser says {got!r}"


def test_corpus_manifest_is_absent_or_well_formed():
    if not ENTRIES:
        pytest.skip(f"no NCCL corpus manifest at {MANIFEST}")
    for entry in ENTRIES:
        assert (CORPUS / entry["file"]).is_file(), entry["file"]
        # Each fixture is our own text modelled on a published output, named here.
        assert entry.get("modelled_on"), f"{entry['file']}: no modelled_on"
        assert isinstance(entry.get("expected"), dict), f"{entry['file']}: no expected values"
