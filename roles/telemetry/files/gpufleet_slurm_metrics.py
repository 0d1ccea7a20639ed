#!/usr/bin/python3
# Managed by gpufleet (role telemetry): local changes are overwritten.
"""Slurm queue, spend and node-state signals for node_exporter's textfile collector.

    gpufleet-slurm-metrics --output FILE.prom [--window-hours 24 ...]

Runs (read-only) ``squeue``, ``sacct`` and ``sinfo`` and writes, atomically:

    gpufleet_slurm_jobs{state,account,partition}                    jobs pending / running now
    gpufleet_slurm_gpus{state,account,partition}                    GPUs they ask for / hold
    gpufleet_slurm_queue_wait_seconds_max{account,partition}        longest wait of a pending job, now
    gpufleet_slurm_started_wait_seconds{account,partition,window,stat="avg|max"}
                                                                    queue wait of the jobs that started in the window
    gpufleet_slurm_gpu_hours{account,partition,state,window}        GPU-hours used in the window (by final state:
                                                                    COMPLETED, FAILED, TIMEOUT, NODE_FAIL, RUNNING ...)
    gpufleet_slurm_node_drained{slurm_node,reason}                  1 for each drained / draining node
    gpufleet_slurm_node_state{slurm_node,state}                     1 per node, its state
    gpufleet_textfile_last_run_timestamp_seconds{collector="slurm"}

A command that fails leaves its families out and sets gpufleet_slurm_scrape_error{command} 1.
The parsers are pure functions (unit-tested with fixtures in the real tools' output).
Python 3 stdlib only.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from datetime import datetime

# The shared module is installed beside this program (role telemetry).
from gpufleet_textfile import Exposition, write_atomic

SQUEUE_FORMAT = "%i|%a|%u|%P|%T|%V|%D|%b"
SACCT_FIELDS = "JobID,Account,User,Partition,State,Submit,Start,End,AllocTRES"
SINFO_FORMAT = "%N|%T|%E"
_GPU_TRES_RE = re.compile(r"gres[/:]gpu(?::[^=:,]+)?[=:](\d+)")
_UNSET = ("", "Unknown", "None", "N/A")


def parse_time(text: str) -> float | None:
    """Slurm's local ISO time ('2026-11-30T05:10:02') -> epoch seconds; Unknown/None/N/A -> None."""
    text = (text or "").strip()
    if text in _UNSET:
        return None
    try:
        return time.mktime(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").timetuple())
    except ValueError:
        return None


def gpus_of_tres(text: str) -> int:
    """GPUs in a TRES string: 'gres/gpu=2', 'gres/gpu:h100=2' (AllocTRES), 'gres:gpu:2', 'gres/gpu:h100:2'
    (squeue %b). Typed and untyped entries of the same request are not added twice (the largest wins)."""
    found = [int(n) for n in _GPU_TRES_RE.findall(text or "")]
    return max(found) if found else 0


def _state(text: str) -> str:
    """'CANCELLED by 1000' -> 'CANCELLED'; 'COMPLETING' kept."""
    return (text or "UNKNOWN").split()[0].rstrip("+").upper()


def parse_squeue(text: str) -> list[dict]:
    """Lines of ``squeue --noheader --format='%i|%a|%u|%P|%T|%V|%D|%b'``."""
    jobs = []
    for line in (text or "").splitlines():
        parts = line.strip().split("|")
        if len(parts) != 8:
            continue
        job, account, user, partition, state, submit, nodes, tres = parts
        try:
            nodes_n = int(nodes)
        except ValueError:
            nodes_n = 1
        jobs.append(
            {
                "job": job,
                "account": account,
                "user": user,
                "partition": partition,
                "state": _state(state),
                "submit": parse_time(submit),
                "gpus": gpus_of_tres(tres) * max(nodes_n, 1),
            }
        )
    return jobs


def parse_sacct(text: str) -> list[dict]:
    """Lines of ``sacct --allusers --allocations --noheader --parsable2 --format=JobID,Account,User,Partition,
    State,Submit,Start,End,AllocTRES``."""
    jobs = []
    for line in (text or "").splitlines():
        parts = line.rstrip("\n").split("|")
        if len(parts) != 9:
            continue
        job, account, user, partition, state, submit, start, end, tres = parts
        jobs.append(
            {
                "job": job,
                "account": account,
                "user": user,
                "partition": partition,
                "state": _state(state),
                "submit": parse_time(submit),
                "start": parse_time(start),
                "end": parse_time(end),
                "gpus": gpus_of_tres(tres),
            }
        )
    return jobs


def parse_sinfo(text: str) -> list[dict]:
    """Lines of ``sinfo --noheader --Node --format='%N|%T|%E'`` (one per node and partition: deduplicated)."""
    nodes: dict[str, dict] = {}
    for line in (text or "").splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) != 3 or not parts[0]:
            continue
        name, state, reason = parts
        nodes.setdefault(name, {"node": name, "state": state.rstrip("*~#!%$@^-").lower(), "reason": reason.strip()})
    return [nodes[n] for n in sorted(nodes)]


def queue_rows(jobs: list[dict], now: float) -> dict[str, dict[tuple, float]]:
    """Per (state, account, partition): job and GPU counts; per (account, partition): the longest pending wait."""
    counts: dict[tuple, float] = {}
    gpus: dict[tuple, float] = {}
    wait: dict[tuple, float] = {}
    for j in jobs:
        if j["state"] not in ("PENDING", "RUNNING"):
            continue
        k = (j["state"].lower(), j["account"], j["partition"])
        counts[k] = counts.get(k, 0) + 1
        gpus[k] = gpus.get(k, 0) + j["gpus"]
        if j["state"] == "PENDING" and j["submit"] is not None:
            w = (j["account"], j["partition"])
            wait[w] = max(wait.get(w, 0.0), max(0.0, now - j["submit"]))
    return {"jobs": counts, "gpus": gpus, "wait_max": wait}


def window_rows(jobs: list[dict], now: float, hours: float) -> dict[str, dict[tuple, float]]:
    """GPU-hours inside [now - hours, now] by (account, partition, state), and the queue wait (avg, max)
    of the jobs that started in that window, by (account, partition)."""
    begin = now - hours * 3600
    gpu_hours: dict[tuple, float] = {}
    waits: dict[tuple, list[float]] = {}
    for j in jobs:
        start = j["start"]
        if start is None or start > now:
            continue
        end = j["end"] if j["end"] is not None else now
        overlap = min(end, now) - max(start, begin)
        if j["gpus"] and overlap > 0:
            k = (j["account"], j["partition"], j["state"])
            gpu_hours[k] = gpu_hours.get(k, 0.0) + j["gpus"] * overlap / 3600
        if start >= begin and j["submit"] is not None:
            waits.setdefault((j["account"], j["partition"]), []).append(max(0.0, start - j["submit"]))
    return {
        "gpu_hours": gpu_hours,
        "wait_avg": {k: sum(v) / len(v) for k, v in waits.items()},
        "wait_max": {k: max(v) for k, v in waits.items()},
    }


def _window_name(hours: float) -> str:
    return f"{int(hours)}h" if float(hours).is_integer() else f"{hours}h"


def render(
    squeue: list[dict] | None,
    sacct: list[dict] | None,
    sinfo: list[dict] | None,
    now: float,
    windows: list[float],
    errors: list[str] = (),
) -> str:
    out = Exposition()
    family = out.family

    if squeue is not None:
        q = queue_rows(squeue, now)
        keys = ("state", "account", "partition")
        family(
            "gpufleet_slurm_jobs",
            "gauge",
            "Slurm jobs pending or running now.",
            [(list(zip(keys, k, strict=True)), v) for k, v in sorted(q["jobs"].items())],
        )
        family(
            "gpufleet_slurm_gpus",
            "gauge",
            "GPUs asked for by pending jobs or held by running jobs now.",
            [(list(zip(keys, k, strict=True)), v) for k, v in sorted(q["gpus"].items())],
        )
        family(
            "gpufleet_slurm_queue_wait_seconds_max",
            "gauge",
            "Longest wait of a pending job, now.",
            [([("account", k[0]), ("partition", k[1])], v) for k, v in sorted(q["wait_max"].items())],
        )
    if sacct is not None:
        hours_rows, wait_rows = [], []
        for hours in windows:
            w = window_rows(sacct, now, hours)
            name = _window_name(hours)
            hours_rows += [
                ([("account", k[0]), ("partition", k[1]), ("state", k[2]), ("window", name)], v)
                for k, v in sorted(w["gpu_hours"].items())
            ]
            for stat in ("avg", "max"):
                wait_rows += [
                    ([("account", k[0]), ("partition", k[1]), ("window", name), ("stat", stat)], v)
                    for k, v in sorted(w["wait_" + stat].items())
                ]
        family(
            "gpufleet_slurm_gpu_hours",
            "gauge",
            "GPU-hours used in the window, by account, partition and job state (sacct).",
            hours_rows,
        )
        family(
            "gpufleet_slurm_started_wait_seconds",
            "gauge",
            "Queue wait of the jobs that started in the window (sacct Start - Submit).",
            wait_rows,
        )
    if sinfo is not None:
        family(
            "gpufleet_slurm_node_drained",
            "gauge",
            "1 for each Slurm node drained or draining, with the reason.",
            [
                ([("slurm_node", n["node"]), ("reason", n["reason"])], 1)
                for n in sinfo
                if n["state"].startswith("drain")
            ],
        )
        family(
            "gpufleet_slurm_node_state",
            "gauge",
            "1 per Slurm node, labelled with its state.",
            [([("slurm_node", n["node"]), ("state", n["state"])], 1) for n in sinfo],
        )
    family(
        "gpufleet_slurm_scrape_error",
        "gauge",
        "1 when a Slurm command failed on the last run.",
        [([("command", c)], 1) for c in errors],
    )
    out.last_run("slurm", now)
    return out.text()


def _run(argv: list[str], timeout: int) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpufleet-slurm-metrics", description=__doc__.split("\n")[0])
    ap.add_argument("--output", required=True)
    ap.add_argument("--window-hours", type=float, nargs="+", default=[24.0])
    ap.add_argument("--timeout", type=int, default=60)
    args = ap.parse_args(argv)
    now = time.time()
    since = datetime.fromtimestamp(now - max(args.window_hours) * 3600).strftime("%Y-%m-%dT%H:%M:%S")
    errors = []
    sq = _run(["squeue", "--noheader", "--all", "--states=PENDING,RUNNING", f"--format={SQUEUE_FORMAT}"], args.timeout)
    if sq is None:
        errors.append("squeue")
    sa = _run(
        [
            "sacct",
            "--allusers",
            "--allocations",
            "--noheader",
            "--parsable2",
            f"--starttime={since}",
            "--endtime=now",
            f"--format={SACCT_FIELDS}",
        ],
        args.timeout,
    )
    if sa is None:
        errors.append("sacct")
    si = _run(["sinfo", "--noheader", "--Node", f"--format={SINFO_FORMAT}"], args.timeout)
    if si is None:
        errors.append("sinfo")
    text = render(
        parse_squeue(sq) if sq is not None else None,
        parse_sacct(sa) if sa is not None else None,
        parse_sinfo(si) if si is not None else None,
        now,
        args.window_hours,
        errors,
    )
    write_atomic(args.output, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
