# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Workload acceptance (run, kill, resume from the checkpoint): the workload's output and the judgement.

The workload (the brief's ``acceptance.workload.command``) prints lines of ``key=value`` words after the
marker ``gpufleet-workload`` (anything before the marker, such as srun's ``0:`` prefix, is ignored)::

    gpufleet-workload event=start step=0 time=1764490000.10
    gpufleet-workload step=120 samples_per_s=5230.4 loss=0.0123 time=1764490001.12
    gpufleet-workload event=checkpoint step=200 time=1764490002.40
    gpufleet-workload event=resumed step=200 time=1764490031.90

A line with ``samples_per_s`` and no ``event`` is a progress line (the throughput); ``time`` is the
Unix time on the node (the restore time compares it with the submission time on the controller: the
clocks must agree, as NTP keeps them). ``step`` counts optimiser steps; a resumed job's first line
is ``event=resumed`` with the step it restored.

* :func:`parse_output` - the lines of one job's output -> progress, events, throughput.
* :func:`workload_spec` - the brief's ``acceptance.workload`` with its defaults, and whether its
  checkpoint directory is on a shared mount (else the resubmission is pinned to the first job's node).
* :func:`sbatch_argv` - the submission.
* :func:`evaluate` - both jobs against the brief: throughput floor, resumed step > 0, restore time.
"""

from __future__ import annotations

import math
import posixpath
import re
import statistics
from collections.abc import Mapping, Sequence

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, violation

MARKER = "gpufleet-workload"
_LINE_RE = re.compile(r"(?:^|\s)" + MARKER + r"\s+(?P<body>\S+=\S+(?:\s+\S+=\S+)*)\s*$")
_INT_KEYS = ("step", "samples")
_FLOAT_KEYS = ("samples_per_s", "time", "loss")
DEFAULT_WINDOW_MINUTES = 10


class WorkloadError(ValueError):
    """The brief's workload cannot be submitted as given (the filters turn it into AnsibleFilterError)."""


def parse_line(line: str) -> dict | None:
    """One ``gpufleet-workload k=v ...`` line -> dict (ints / floats where they parse), else None."""
    m = _LINE_RE.search(line.rstrip("\r\n"))
    if not m:
        return None
    out: dict = {}
    for word in m.group("body").split():
        key, _, value = word.partition("=")
        if key in _INT_KEYS:
            try:
                out[key] = int(value)
            except ValueError:
                return None
        elif key in _FLOAT_KEYS:
            try:
                out[key] = float(value)
            except ValueError:
                return None
        else:
            out[key] = value
    return out


def parse_output(text: str) -> dict:
    """A job's output -> ``{progress, events, resumed_step, last_checkpoint_step, last_step, first_step_time,
    throughput: {median, mean, last, lines}}``. Lines without the marker are ignored."""
    progress: list[dict] = []
    events: list[dict] = []
    for line in (text or "").splitlines():
        rec = parse_line(line)
        if rec is None:
            continue
        if rec.get("event"):
            events.append(rec)
        elif "samples_per_s" in rec and "step" in rec:
            progress.append(rec)
    resumed = [e for e in events if e.get("event") == "resumed"]
    ckpts = [e.get("step") for e in events if e.get("event") == "checkpoint" and isinstance(e.get("step"), int)]
    rates = [p["samples_per_s"] for p in progress]
    resumed_step = resumed[0].get("step") if resumed else None
    after = progress
    if resumed and resumed[0].get("time") is not None:
        after = [p for p in progress if p.get("time") is None or p["time"] >= resumed[0]["time"]]
    return {
        "progress": progress,
        "events": events,
        "resumed_step": resumed_step,
        "last_checkpoint_step": max(ckpts) if ckpts else None,
        "last_step": max((p["step"] for p in progress), default=None),
        "first_step_time": next((p.get("time") for p in after if p.get("time") is not None), None),
        "first_step": after[0]["step"] if after else None,
        "throughput": {
            "median": statistics.median(rates) if rates else None,
            "mean": statistics.fmean(rates) if rates else None,
            "last": rates[-1] if rates else None,
            "lines": len(rates),
        },
    }


def _under(path: str, root: str) -> bool:
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def workload_spec(brief: Mapping) -> dict | None:
    """The brief's ``acceptance.workload`` with defaults: partition (the first pool), window seconds,
    ``shared`` (its checkpoint directory lies on a ``storage.shared`` mount). None when absent."""
    if not isinstance(brief, Mapping):
        raise WorkloadError(f"brief must be a mapping, got {type(brief).__name__}")
    raw = (brief.get("acceptance") or {}).get("workload")
    if not raw:
        return None
    if not isinstance(raw, Mapping) or not raw.get("command") or not raw.get("checkpoint_dir"):
        raise WorkloadError("acceptance.workload needs command and checkpoint_dir (run preflight)")
    pools = [p for p in brief.get("pools") or [] if isinstance(p, Mapping)]
    shared = [m.get("path") for m in (brief.get("storage") or {}).get("shared") or [] if isinstance(m, Mapping)]
    window = float(raw.get("window_minutes", DEFAULT_WINDOW_MINUTES))
    return {
        "command": str(raw["command"]),
        "image": raw.get("image") or "",
        "dataset": raw.get("dataset") or "",
        "weights": raw.get("weights") or "",
        "checkpoint_dir": str(raw["checkpoint_dir"]),
        "partition": raw.get("partition") or (pools[0].get("name") if pools else ""),
        "gpus": raw.get("gpus"),
        "window_minutes": window,
        "window_s": window * 60,
        "min_samples_per_s": raw.get("min_samples_per_s"),
        "max_restore_s": raw.get("max_restore_s"),
        "shared": any(p and _under(str(raw["checkpoint_dir"]), p) for p in shared),
    }


def sbatch_argv(
    spec: Mapping,
    *,
    job_name: str,
    output: str,
    checkpoint_dir: str,
    nodelist: str = "",
    container_mounts: str = "",
    extra_args: Sequence[str] = (),
    sbatch: str = "sbatch",
    time_limit_s: float | None = None,
) -> list[str]:
    """``sbatch --parsable`` of the workload: one node, the pool's partition, its GPUs, the production
    image through pyxis when set; the job sees GPUFLEET_CHECKPOINT_DIR / _DATASET / _WEIGHTS.
    ``time_limit_s``: Slurm ends the job that long after it started (``--time``, whole minutes
    rounded up), whoever is watching it; an ``extra_args`` ``--time`` comes later and wins."""
    env = ["ALL", f"GPUFLEET_CHECKPOINT_DIR={checkpoint_dir}"]
    if spec.get("dataset"):
        env.append(f"GPUFLEET_DATASET={spec['dataset']}")
    if spec.get("weights"):
        env.append(f"GPUFLEET_WEIGHTS={spec['weights']}")
    for value in env:
        if "," in value:
            raise WorkloadError(f"sbatch --export cannot carry a comma: {value!r}")
    argv = [sbatch, "--parsable", f"--job-name={job_name}", "--nodes=1", f"--output={output}"]
    if spec.get("partition"):
        argv.append(f"--partition={spec['partition']}")
    if spec.get("gpus"):
        argv.append(f"--gres=gpu:{int(spec['gpus'])}")
    if nodelist:
        argv.append(f"--nodelist={nodelist}")
    if time_limit_s is not None:
        if float(time_limit_s) <= 0:
            raise WorkloadError(f"the job's time limit: expected more than 0 s, found {time_limit_s}")
        argv.append(f"--time={max(1, math.ceil(float(time_limit_s) / 60))}")
    if spec.get("image"):
        argv.append(f"--container-image={spec['image']}")
        mounts = [checkpoint_dir] + [spec[k] for k in ("dataset", "weights") if spec.get(k)]
        extra = [m for m in container_mounts.split(",") if m] if container_mounts else []
        argv.append("--container-mounts=" + ",".join([*extra, *(f"{m}:{m}" for m in mounts)]))
    argv.append("--export=" + ",".join(env))
    argv.extend(extra_args)
    # The checkpoint directory exists before the workload starts (a fresh one per acceptance run).
    argv.append(f"--wrap=mkdir -p {_quote(checkpoint_dir)} && {spec['command']}")
    return argv


_FIELD_SPLIT = re.compile(r"\s+(?=[A-Za-z][A-Za-z0-9_:/]*=)")


def parse_job(text: str) -> dict:
    """``scontrol show job -o <id>`` -> its ``Key=Value`` fields (JobState, Reason, NodeList, StdOut, ...).

    The fields of the job's line are split at each space followed by ``Key=``, so values holding spaces
    (a command line) stay whole. No job line (``Invalid job id specified``): ``{}``."""
    for line in (text or "").splitlines():
        line = line.strip()
        if not line.startswith("JobId="):
            continue
        fields = {}
        for part in _FIELD_SPLIT.split(line):
            key, sep, value = part.partition("=")
            if sep:
                fields.setdefault(key, value)
        return fields
    return {}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def evaluate(first: Mapping, second: Mapping, spec: Mapping) -> dict:
    """Both jobs against the brief -> ``{throughput, resumed_step, restore_s, ..., violations}``.

    ``first`` / ``second``: ``{"job_id", "node", "state", "output", "submit_time", "start_time"?,
    "error"?}`` (``output`` is the job's text). The restore time is the second job's first progress line
    after it resumed, less its submission time (queue wait, start and restore together).
    """
    out: list[dict] = []
    one = parse_output(first.get("output") or "")
    two = parse_output(second.get("output") or "")
    tput = one["throughput"]["median"]
    floor = spec.get("min_samples_per_s")
    max_restore = spec.get("max_restore_s")
    field = "acceptance.workload"
    if first.get("error"):
        out.append(violation("WORKLOAD_NOT_RUN", f"{field}.command", first["error"], host=first.get("node")))
    elif not one["progress"]:
        out.append(
            violation(
                "WORKLOAD_NO_THROUGHPUT",
                f"{field}.command",
                f"job {first.get('job_id')}: expected '{MARKER} step=N samples_per_s=X time=T' lines within the "
                f"window, found none (state {first.get('state')}); last output: {_tail(first.get('output'))}",
                host=first.get("node"),
            )
        )
    elif floor is not None and tput is not None and tput < float(floor):
        out.append(
            violation(
                "WORKLOAD_BELOW_FLOOR",
                f"{field}.min_samples_per_s",
                f"job {first.get('job_id')}: expected >= {float(floor):g} samples/s, measured {tput:.4g} "
                f"(median of {one['throughput']['lines']} lines)",
                host=first.get("node"),
            )
        )
    restore_s = None
    if not first.get("error") and one["progress"]:
        if second.get("error"):
            out.append(violation("WORKLOAD_NOT_RESUMED", f"{field}.checkpoint_dir", second["error"]))
        elif not two["resumed_step"]:
            found = (
                f"it started at step {two['first_step']}"
                if two["progress"]
                else f"no '{MARKER} event=resumed step=N' line"
            )
            out.append(
                violation(
                    "WORKLOAD_NOT_RESUMED",
                    f"{field}.checkpoint_dir",
                    f"job {second.get('job_id')}: expected the resubmitted job to resume from its checkpoint "
                    f"(step > 0; the first job reached step {one['last_step']}, last checkpoint "
                    f"{one['last_checkpoint_step']}), found {found}; last output: {_tail(second.get('output'))}",
                    host=second.get("node"),
                )
            )
        elif two["first_step_time"] is None:
            out.append(
                violation(
                    "WORKLOAD_NOT_RESUMED",
                    f"{field}.checkpoint_dir",
                    f"job {second.get('job_id')}: resumed at step {two['resumed_step']} but printed no progress "
                    f"line after it; last output: {_tail(second.get('output'))}",
                    host=second.get("node"),
                )
            )
        else:
            older = one["last_checkpoint_step"]
            if older is not None and two["resumed_step"] < older:
                out.append(
                    violation(
                        "WORKLOAD_RESUMED_OLDER",
                        f"{field}.checkpoint_dir",
                        f"job {second.get('job_id')}: expected it to resume from the last checkpoint the first job "
                        f"announced (step {older}), found step {two['resumed_step']}: a checkpoint was lost",
                        host=second.get("node"),
                        severity=WARNING,
                    )
                )
            submit = second.get("submit_time")
            restore_s = two["first_step_time"] - float(submit) if submit is not None else None
            if max_restore is not None and restore_s is not None and restore_s > float(max_restore):
                out.append(
                    violation(
                        "WORKLOAD_RESTORE_SLOW",
                        f"{field}.max_restore_s",
                        f"job {second.get('job_id')}: expected the first resumed step within {float(max_restore):g} s "
                        f"of the submission, measured {restore_s:.3g} s (queue, start and restore from step "
                        f"{two['resumed_step']})",
                        host=second.get("node"),
                    )
                )
    # What the job says it started from (the dataset and base weights it read), when it says so.
    start = next((e for e in one["events"] if e.get("event") == "start"), {})
    return {
        "started_from": {k: start[k] for k in ("dataset", "weights", "samples") if k in start},
        "throughput_samples_per_s": tput,
        "throughput_mean": one["throughput"]["mean"],
        "throughput_lines": one["throughput"]["lines"],
        "steps_first_job": one["last_step"],
        "last_checkpoint_step": one["last_checkpoint_step"],
        "resumed_step": two["resumed_step"],
        "first_resumed_step": two["first_step"],
        "restore_s": restore_s,
        "min_samples_per_s": floor,
        "max_restore_s": max_restore,
        "verdict": "fail" if any(v["severity"] == ERROR for v in out) else "pass",
        "violations": out,
    }


def _tail(text, n: int = 3) -> str:
    lines = [ln.strip() for ln in str(text or "").splitlines() if ln.strip()]
    return " / ".join(lines[-n:])[:400] or "(none)"


__all__ = [
    "MARKER",
    "WorkloadError",
    "evaluate",
    "parse_job",
    "parse_line",
    "parse_output",
    "sbatch_argv",
    "workload_spec",
]
