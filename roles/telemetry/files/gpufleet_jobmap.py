#!/usr/bin/python3
# Managed by gpufleet (role telemetry): local changes are overwritten.
"""Which Slurm job, user and account hold which GPUs: a prolog / epilog hook.

    gpufleet-jobmap prolog|epilog --map-dir DIR --state-dir DIR --output FILE.prom

Run by slurmd (through gpufleet's prolog.d / epilog.d dispatcher) as root with the job's
environment. The GPUs are SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES, else GPU_DEVICE_ORDINAL
(the node's GPU indices in the prolog and epilog).

- ``--map-dir``: dcgm-exporter's HPC job-mapping directory: one file per GPU index holding the ids of
  the jobs on that GPU, one per line (dcgm-exporter --hpc-job-mapping-dir adds them as ``hpc_job``).
- ``--state-dir``: one file per job (``<job id>``: user, uid, account, partition, GPUs), from which
- ``--output``: the textfile metric ``gpufleet_slurm_gpu_job{gpu,slurm_job,user,account,partition} 1``.

The prolog adds the job, the epilog removes it; both rewrite the textfile from the state directory
under one lock. A job without GPUs changes nothing. Errors are logged and the hook exits 0: a
monitoring hook must never drain a node. Python 3 stdlib only.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import sys
import time

# The shared module is installed beside this program (role telemetry).
from gpufleet_textfile import Exposition, write_atomic

_ID_RE = re.compile(r"^[0-9A-Za-z_.+-]+$")


def job_gpus(env: dict) -> list[str]:
    """The job's GPU indices on this node, from Slurm's prolog/epilog environment."""
    for key in ("SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"):
        value = (env.get(key) or "").strip()
        if value and value.lower() not in ("nodevfiles", "none"):
            gpus = [g.strip() for g in value.split(",") if g.strip()]
            if all(g.isdigit() for g in gpus):
                return sorted(set(gpus), key=int)
    return []


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            return [line.strip() for line in fh if line.strip()]
    except OSError:
        return []


def render(state_dir: str, now: float) -> str:
    """The textfile, from every job file in the state directory."""
    rows = []
    for name in sorted(os.listdir(state_dir)):
        if name.startswith("."):
            continue
        try:
            with open(os.path.join(state_dir, name), encoding="utf-8") as fh:
                job = json.load(fh)
        except (OSError, ValueError):
            continue
        for gpu in job.get("gpus", []):
            labels = [("gpu", gpu), ("slurm_job", job["job"]), ("user", job["user"]), ("account", job["account"])]
            rows.append((int(gpu), [*labels, ("partition", job["partition"])]))
    out = Exposition()
    out.family(
        "gpufleet_slurm_gpu_job",
        "gauge",
        "1 for each GPU of this node held by a Slurm job (job, user, account).",
        [(labels, 1) for _, labels in sorted(rows)],
    )
    out.last_run("jobmap", now)
    return out.text()


def update(action: str, env: dict, map_dir: str, state_dir: str, output: str, now: float | None = None) -> bool:
    """Apply the prolog or epilog of the job in ``env``. Returns False when there is nothing to do."""
    job = (env.get("SLURM_JOB_ID") or "").strip()
    gpus = job_gpus(env)
    if not job or not _ID_RE.match(job):
        return False
    os.makedirs(map_dir, mode=0o755, exist_ok=True)
    os.makedirs(state_dir, mode=0o755, exist_ok=True)
    state_file = os.path.join(state_dir, job)
    if action == "epilog" and not gpus:
        # The epilog of a job whose prolog recorded GPUs: use what was recorded.
        try:
            with open(state_file, encoding="utf-8") as fh:
                gpus = [str(g) for g in json.load(fh).get("gpus", [])]
        except (OSError, ValueError):
            gpus = []
    if not gpus:
        return False
    with open(os.path.join(state_dir, ".lock"), "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for gpu in gpus:
            path = os.path.join(map_dir, gpu)
            jobs = [j for j in _read_lines(path) if j != job]
            if action == "prolog":
                jobs.append(job)
            if jobs:
                write_atomic(path, "\n".join(jobs) + "\n")
            elif os.path.exists(path):
                os.unlink(path)
        if action == "prolog":
            record = {
                "job": job,
                "user": env.get("SLURM_JOB_USER", ""),
                "uid": env.get("SLURM_JOB_UID", ""),
                "account": env.get("SLURM_JOB_ACCOUNT", ""),
                "partition": env.get("SLURM_JOB_PARTITION", ""),
                "gpus": gpus,
            }
            write_atomic(state_file, json.dumps(record, sort_keys=True) + "\n")
        elif os.path.exists(state_file):
            os.unlink(state_file)
        write_atomic(output, render(state_dir, time.time() if now is None else now))
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpufleet-jobmap", description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=["prolog", "epilog"])
    ap.add_argument("--map-dir", required=True)
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--output", required=True)
    args = ap.parse_args(argv)
    try:
        update(args.action, dict(os.environ), args.map_dir, args.state_dir, args.output)
    except OSError as exc:
        # Never fail the job hook (Slurm would drain the node) for a monitoring problem.
        sys.stderr.write(f"gpufleet-jobmap {args.action}: {exc}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
