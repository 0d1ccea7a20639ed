# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""all_gather and alltoall (acceptance/collectives.py) in a node's history and in its re-acceptance.

History: each node's single-node all_gather / alltoall busbw at the largest size are the figures
``all_gather_busbw`` and ``alltoall_busbw`` (GB/s, higher is better; history.py's FIGURES), so
``gpufleet report history NODE`` shows them where a run measured them and the trend rule
(``NODE_DEGRADED``) compares them with the node's first acceptance as it does all_reduce's.

Re-acceptance (the remediate role): :func:`summary` is the collectives' verdict in a few words,
kept beside the acceptance result as the GPU diagnostics' is, and shown in the remediation report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

# collective -> its history figure
FIGURES = {"all_gather": "all_gather_busbw", "alltoall": "alltoall_busbw"}


def node_figures(runs: Iterable[Mapping]) -> dict[str, dict[str, float]]:
    """figure -> host -> busbw (GB/s) of the report's single-node all_gather / alltoall runs.

    Several runs of one collective on one node (a re-run): its worst counts, as for all_reduce.
    """
    out: dict[str, dict[str, float]] = {figure: {} for figure in FIGURES.values()}
    for r in runs:
        if not isinstance(r, Mapping):
            continue
        figure = FIGURES.get(r.get("collective"))
        value = r.get("busbw_largest")
        if not figure or r.get("scope") != "single-node" or not r.get("host"):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        prev = out[figure].get(r["host"])
        out[figure][r["host"]] = float(value) if prev is None else min(prev, float(value))
    return out


def errors(records: Sequence[Mapping] | None) -> list[dict]:
    """The error violations of the collectives' run records (collectives.records)."""
    return [
        v
        for r in records or []
        if isinstance(r, Mapping)
        for v in r.get("violations") or []
        if isinstance(v, Mapping) and v.get("severity") == "error"
    ]


def summary(records: Sequence[Mapping] | None) -> str | None:
    """The collectives' runs on one node in a few words, None without any:
    ``all_gather passed (412.3 GB/s, floor 380); alltoall failed (250.1 GB/s, floor 300): NCCL_BUSBW_BELOW_FLOOR``."""
    parts = []
    for r in records or []:
        if not isinstance(r, Mapping) or not r.get("collective"):
            continue
        bad = errors([r])
        busbw = r.get("busbw")
        measured = f"{busbw:.1f} GB/s" if isinstance(busbw, (int, float)) else "no busbw"
        floor = r.get("floor_gbps")
        floor = f"{floor:g}" if isinstance(floor, (int, float)) else floor
        text = f"{r['collective']} {'failed' if bad else 'passed'} ({measured}, floor {floor})"
        if bad:
            text += ": " + ", ".join(dict.fromkeys(str(v.get("code")) for v in bad))
        parts.append(text)
    return "; ".join(parts) or None
