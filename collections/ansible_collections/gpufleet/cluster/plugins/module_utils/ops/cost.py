# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Sizing and unit cost from Slurm accounting or Kueue's Workloads: the two formulas below, with their inputs shown.

    required_gpu_capacity       = target_work_per_month / useful_work_per_gpu_month
    effective_cluster_unit_cost = (compute + network + storage + support + operations + idle + retries)
                                  / accepted units

Pure. :func:`parse_sacct` reads ``sacct --parsable2`` output (a header line, ``|``-separated; job steps
such as ``123.batch`` are skipped, only allocations count); :func:`parse_kueue_workloads` reads
``kubectl get workloads.kueue.x-k8s.io -A -o json`` into the same job records (a Kubernetes brief).
:func:`usage` turns jobs into GPU-hours
over a window: allocated (AllocTRES ``gres/gpu`` x elapsed), accepted (COMPLETED), retries (jobs
that ended without completing: FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, CANCELLED, PREEMPTED...),
in progress (RUNNING), idle (capacity not allocated) and queue waits (Start - Submit).
:func:`unit_cost` applies the brief's ``cost:`` section.

The monthly compute cost pays for every GPU-hour, used or not: it is split by GPU-hours into the part
that did accepted work (the formula's ``compute``), ``idle`` and ``retries``, so that the seven terms add
up to what the cluster costs, and nothing is counted twice.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

HOURS_PER_MONTH = 730.0  # 8,760 / 12
ACCEPTED_STATES = ("COMPLETED",)
IN_PROGRESS_STATES = ("RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "STAGE_OUT", "SIGNALING")
NOT_STARTED_STATES = ("PENDING", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING")
# Everything else that ran and ended is work that must be redone: a retry.
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
_ELAPSED_RE = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?$")
_JOBID_RE = re.compile(r"^\d+(?:_(?:\d+|\[[^\]]*\]))?(?:\+\d+)?$")
REQUIRED_COLUMNS = ("JobID", "State", "Submit", "Start", "AllocTRES")
SACCT_FIELDS = "JobID,JobName,User,Account,Partition,State,ExitCode,Submit,Start,End,ElapsedRaw,AllocTRES,NNodes"


class CostError(ValueError):
    """Input that is not sacct output, or a cost section that cannot be applied."""


# --- sacct ------------------------------------------------------------------------------------------


def parse_time(text: str) -> datetime | None:
    """sacct's ``2026-03-01T08:05:12``; None for ``Unknown`` / ``None`` / empty."""
    text = (text or "").strip()
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S") if _DATE_RE.fullmatch(text) else None


def parse_elapsed(text: str) -> int | None:
    """``[D-]HH:MM:SS`` or ``MM:SS`` → seconds."""
    m = _ELAPSED_RE.fullmatch((text or "").strip())
    if not m:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def tres_gpus(tres: str) -> int:
    """GPUs in an AllocTRES string: ``gres/gpu=8``; typed counts (``gres/gpu:h100=8``) only when the
    untyped total is absent (newer Slurm prints both)."""
    total, typed = None, 0
    for part in (tres or "").split(","):
        key, _, value = part.partition("=")
        if not value.isdigit():
            continue
        if key == "gres/gpu":
            total = int(value)
        elif key.startswith("gres/gpu:"):
            typed += int(value)
    return total if total is not None else typed


def parse_sacct(text: str) -> list[dict]:
    """``sacct --parsable2`` output (with its header) → one dict per job allocation."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    if not lines:
        return []
    header = lines[0].rstrip("|").split("|")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise CostError(
            f"expected sacct --parsable2 output with a header naming {', '.join(REQUIRED_COLUMNS)} "
            f"(sacct -o {SACCT_FIELDS}), found header {lines[0][:120]!r} without {', '.join(missing)}"
        )
    if "ElapsedRaw" not in header and "Elapsed" not in header:
        raise CostError("expected an ElapsedRaw or Elapsed column in the sacct output, found neither")
    jobs = []
    for n, line in enumerate(lines[1:], start=2):
        cells = line.rstrip("\n").split("|")
        if len(cells) == len(header) + 1 and cells[-1] == "":  # --parsable (trailing |)
            cells = cells[:-1]
        if len(cells) != len(header):
            raise CostError(f"line {n}: expected {len(header)} fields as in the header, found {len(cells)}")
        row = dict(zip(header, cells, strict=True))
        job_id = row["JobID"].strip()
        if not _JOBID_RE.fullmatch(job_id):
            continue  # a step: 123.batch, 123.extern, 123.0
        elapsed = None
        if row.get("ElapsedRaw", "").strip().isdigit():
            elapsed = int(row["ElapsedRaw"])
        elif "Elapsed" in row:
            elapsed = parse_elapsed(row["Elapsed"])
        state = (row["State"].split() or ["UNKNOWN"])[0].rstrip("+")
        jobs.append(
            {
                "job_id": job_id,
                "name": row.get("JobName", ""),
                "user": row.get("User", ""),
                "account": row.get("Account", ""),
                "state": state,
                "exit_code": row.get("ExitCode", ""),
                "submit": parse_time(row["Submit"]),
                "start": parse_time(row["Start"]),
                "end": parse_time(row.get("End", "")),
                "elapsed_s": elapsed or 0,
                "gpus": tres_gpus(row["AllocTRES"]),
            }
        )
    return jobs


# --- Kueue ------------------------------------------------------------------------------------------

# Kueue's Workload (kueue.x-k8s.io/v1beta1, apis/kueue/v1beta1/workload_types.go): conditions Admitted,
# Finished (reasons Succeeded, Failed, AdmissionChecksRejected, OutOfSync) and Evicted (Preempted,
# PodsReadyTimeout, AdmissionCheck, ClusterQueueStopped, LocalQueueStopped, Deactivated,
# MaximumExecutionTimeExceeded, ...). Each maps to the sacct state whose cost it has.
GPU_RESOURCE = "nvidia.com/gpu"
_K8S_TIME_RE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_EVICTED_STATES = {"Preempted": "PREEMPTED", "PodsReadyTimeout": "TIMEOUT", "MaximumExecutionTimeExceeded": "TIMEOUT"}


def parse_k8s_time(text: object) -> datetime | None:
    """A Kubernetes timestamp (RFC 3339, ``2026-03-01T08:05:12Z``) as a naive UTC datetime; None otherwise."""
    m = _K8S_TIME_RE.fullmatch(str(text or "").strip())
    if not m:
        return None
    when = datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(2) == "Z" else m.group(2)))
    return (when - when.utcoffset()).replace(tzinfo=None)


def _quantity(value: object) -> int:
    """A GPU count from a Kubernetes quantity (``"8"``, ``8``); 0 for anything else."""
    text = str(value if value is not None else "").strip()
    return int(text) if text.isdigit() else 0


def _workload_gpus(wl: Mapping) -> int:
    """GPUs the Workload holds: its admission's resourceUsage (the total of all the pod set's pods, as
    Kueue admitted it), else the pod sets' count times each pod's GPU requests (or limits)."""
    assignments = ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    if assignments:
        return sum(_quantity((a.get("resourceUsage") or {}).get(GPU_RESOURCE)) for a in assignments)
    total = 0
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        containers = ((ps.get("template") or {}).get("spec") or {}).get("containers") or []
        per_pod = 0
        for c in containers:
            res = c.get("resources") or {}
            per_pod += _quantity(
                (res.get("requests") or {}).get(GPU_RESOURCE) or (res.get("limits") or {}).get(GPU_RESOURCE)
            )
        total += per_pod * _quantity(ps.get("count", 1))
    return total


def parse_kueue_workloads(doc: object, now: datetime | None = None) -> list[dict]:
    """``kubectl get workloads.kueue.x-k8s.io -A -o json`` → one job record per Workload, as :func:`parse_sacct`.

    Submit is the Workload's creation, start its Admitted condition's time, end its Finished condition's
    time. Finished/Succeeded is ``COMPLETED``, any other Finished reason ``FAILED``; admitted and not
    finished is ``RUNNING`` (elapsed up to ``now``, default the current UTC time); evicted and not admitted
    again is ``PREEMPTED`` (``TIMEOUT`` for a PodsReady or execution-time eviction; any other reason
    ``CANCELLED``), its accumulated run time up to the eviction; never admitted is ``PENDING``. The time
    an evicted Workload ran before its current admission (``status.accumulatedPastExexcutionTimeSeconds``)
    is a second, ``PREEMPTED`` record just before that admission: work done and lost. Kueue deletes a
    Workload with its Job: a Job deleted before the report is not counted (docs/cost.md).
    """
    if not isinstance(doc, Mapping) or not isinstance(doc.get("items"), list):
        raise CostError(
            "expected kubectl get workloads.kueue.x-k8s.io -A -o json (a List with items), found "
            + (f"a mapping with keys {sorted(doc)[:6]}" if isinstance(doc, Mapping) else type(doc).__name__)
        )
    jobs = []
    for wl in doc["items"]:
        if not isinstance(wl, Mapping) or wl.get("kind", "Workload") != "Workload":
            continue
        meta = wl.get("metadata") or {}
        status = wl.get("status") or {}
        conds = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, Mapping)}

        def _at(ctype, conds=conds):
            c = conds.get(ctype) or {}
            return parse_k8s_time(c.get("lastTransitionTime")) if c.get("status") == "True" else None

        submit = parse_k8s_time(meta.get("creationTimestamp"))
        elapsed_to = None
        finished, evicted = _at("Finished"), _at("Evicted")
        past = status.get("accumulatedPastExexcutionTimeSeconds")
        past = past if isinstance(past, int) and not isinstance(past, bool) and past > 0 else 0
        # Admitted since (QuotaReserved when the admission checks' condition is not kept).
        start, end = _at("Admitted") or _at("QuotaReserved"), None
        if finished:
            state = "COMPLETED" if (conds.get("Finished") or {}).get("reason") == "Succeeded" else "FAILED"
            end = finished
        elif start:
            state = "RUNNING"
            elapsed_to = now or datetime.now(UTC).replace(tzinfo=None)
        elif evicted:
            # Not admitted again: every second it ran is in the accumulated time, up to the eviction.
            state = _EVICTED_STATES.get((conds.get("Evicted") or {}).get("reason", ""), "CANCELLED")
            start, end = (evicted - timedelta(seconds=past), evicted) if past else (None, None)
            past = 0
        else:
            state = "PENDING"
        owner = next(iter(meta.get("ownerReferences") or []), {}) or {}
        record = {
            "job_id": f"{meta.get('namespace', '')}/{meta.get('name', '')}",
            "name": owner.get("name", meta.get("name", "")),
            "user": "",
            "account": (wl.get("spec") or {}).get("queueName", ""),
            "state": state,
            "exit_code": "",
            "submit": submit,
            "start": start,
            "end": end,
            "elapsed_s": int(max(((end or elapsed_to) - start).total_seconds(), 0))
            if start and (end or elapsed_to)
            else 0,
            "gpus": _workload_gpus(wl),
        }
        jobs.append(record)
        if past and start is not None:
            jobs.append(
                {
                    **record,
                    "job_id": record["job_id"] + "#evicted",
                    "state": "PREEMPTED",
                    "start": start - timedelta(seconds=past),
                    "end": start,
                    "elapsed_s": past,
                }
            )
    return jobs


# --- usage ------------------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = (len(ordered) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def kind_of(state: str) -> str:
    if state in ACCEPTED_STATES:
        return "accepted"
    if state in IN_PROGRESS_STATES:
        return "in_progress"
    if state in NOT_STARTED_STATES:
        return "pending"
    return "retry"


def usage(
    jobs: list[dict],
    gpus: int,
    window_start: datetime | None = None,
    window_end: datetime | None = None,
    source: str = "Slurm accounting",
) -> dict:
    """GPU-hours of the cluster's ``gpus`` over a window (default: from the first start to the last end).

    ``source`` names where the jobs came from in the report ("Slurm accounting", "Kueue Workloads").

    Each job counts ``gpus x`` the part of its run inside the window.
    """
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus <= 0:
        raise CostError(f"expected the cluster's GPU count (a positive integer), found {gpus!r}")
    runs = []
    for job in jobs:
        start = job["start"]
        if start is None or job["gpus"] <= 0:
            continue
        end = job["end"] or (start + timedelta(seconds=job["elapsed_s"]))
        runs.append((job, start, max(end, start)))
    if window_start is None:
        window_start = min((s for _, s, _ in runs), default=None)
    if window_end is None:
        window_end = max((e for _, _, e in runs), default=None)
    if window_start is None or window_end is None or window_end <= window_start:
        raise CostError("expected jobs that ran on GPUs (or an explicit window), found none to measure a window by")
    window_h = (window_end - window_start).total_seconds() / 3600.0
    hours = {"accepted": 0.0, "retry": 0.0, "in_progress": 0.0}
    retry_states: dict[str, float] = {}
    counts = {"accepted": 0, "retry": 0, "in_progress": 0}
    for job, start, end in runs:
        overlap = (min(end, window_end) - max(start, window_start)).total_seconds()
        if overlap <= 0:
            continue
        kind = kind_of(job["state"])
        if kind == "pending":
            continue
        gh = job["gpus"] * overlap / 3600.0
        hours[kind] += gh
        counts[kind] += 1
        if kind == "retry":
            retry_states[job["state"]] = retry_states.get(job["state"], 0.0) + gh
    waits = [
        (j["start"] - j["submit"]).total_seconds()
        for j in jobs
        if j["start"] and j["submit"] and window_start <= j["start"] <= window_end
    ]
    allocated = sum(hours.values())
    capacity = gpus * window_h
    return {
        "gpus": gpus,
        "source": source,
        "window_start": window_start.isoformat(),
        "window_end": window_end.isoformat(),
        "window_hours": window_h,
        "capacity_gpu_hours": capacity,
        "allocated_gpu_hours": allocated,
        "accepted_gpu_hours": hours["accepted"],
        "retry_gpu_hours": hours["retry"],
        "in_progress_gpu_hours": hours["in_progress"],
        "idle_gpu_hours": max(capacity - allocated, 0.0),
        "over_allocated": allocated > capacity * 1.0001,
        "retry_gpu_hours_by_state": dict(sorted(retry_states.items())),
        "jobs": dict(counts),
        "queue_wait_s": {
            "jobs": len(waits),
            "mean": sum(waits) / len(waits) if waits else 0.0,
            "p50": _percentile(waits, 0.5),
            "p95": _percentile(waits, 0.95),
            "max": max(waits, default=0.0),
        },
    }


# --- unit cost --------------------------------------------------------------------------------------

COST_ITEMS = ("compute", "network", "storage", "support", "operations", "idle", "retries")


def unit_cost(use: dict, cost: dict, acceptance: dict | None = None) -> dict:
    """The report: both formulas with their inputs, the idle / retry shares and the baseline comparison.

    ``cost`` is the brief's (validated) ``cost:`` section; ``acceptance`` the latest acceptance report
    (its ``verdict`` is shown: units of a cluster that failed acceptance are provisional).
    """
    monthly = cost.get("monthly") or {}
    unit = cost.get("unit") or {}
    if "compute" not in monthly or not unit.get("name"):
        raise CostError("expected cost.monthly.compute and cost.unit.name in the brief's cost section")
    to_month = HOURS_PER_MONTH / use["window_hours"]
    # Compute pays for every GPU-hour: split it by where the GPU-hours went.
    basis = max(use["capacity_gpu_hours"], use["allocated_gpu_hours"])
    compute_total = float(monthly["compute"])
    items = {
        "compute": compute_total * (use["accepted_gpu_hours"] + use["in_progress_gpu_hours"]) / basis,
        "network": float(monthly.get("network", 0)),
        "storage": float(monthly.get("storage", 0)),
        "support": float(monthly.get("support", 0)),
        "operations": float(monthly.get("operations", 0)),
        "idle": compute_total * use["idle_gpu_hours"] / basis,
        "retries": compute_total * use["retry_gpu_hours"] / basis,
    }
    total = sum(items.values())
    measure = unit.get("measure", "completed_jobs")
    if measure == "completed_jobs":
        units_window = float(use["jobs"]["accepted"])
        units_how = f"{use['jobs']['accepted']} completed jobs in {_h(use['window_hours'])} h"
    elif measure == "gpu_hours":
        units_window = use["accepted_gpu_hours"]
        units_how = f"{_h(use['accepted_gpu_hours'])} GPU-hours of completed jobs in {_h(use['window_hours'])} h"
    elif measure == "per_gpu_hour":
        rate = unit.get("per_gpu_hour")
        if not rate:
            raise CostError("expected cost.unit.per_gpu_hour for measure per_gpu_hour, found none")
        units_window = use["accepted_gpu_hours"] * float(rate)
        units_how = (
            f"{_h(use['accepted_gpu_hours'])} GPU-hours of completed jobs x {rate:g} {unit['name']} per GPU-hour "
            f"in {_h(use['window_hours'])} h"
        )
    else:
        raise CostError(f"expected cost.unit.measure completed_jobs, gpu_hours or per_gpu_hour, found {measure!r}")
    units_month = units_window * to_month
    unit_cost_value = total / units_month if units_month > 0 else None
    per_gpu_month = units_month / use["gpus"]
    target = cost.get("target_units_per_month")
    required = None
    if target is not None:
        required = {
            "target_units_per_month": float(target),
            "useful_units_per_gpu_month": per_gpu_month,
            "required_gpus": (float(target) / per_gpu_month) if per_gpu_month > 0 else None,
            "cluster_gpus": use["gpus"],
        }
        if required["required_gpus"] is not None:
            required["required_gpus_whole"] = math.ceil(required["required_gpus"] - 1e-9)
    baseline = None
    if cost.get("baseline"):
        price = float(cost["baseline"]["price_per_unit"])
        baseline = {"name": cost["baseline"]["name"], "price_per_unit": price}
        if unit_cost_value is not None:
            diff = price - unit_cost_value
            baseline.update(
                beats=diff > 0,
                difference_per_unit=diff,
                difference_share=(diff / price) if price > 0 else None,
                monthly_difference=diff * units_month,
            )
        else:
            baseline.update(beats=False, difference_per_unit=None, difference_share=None, monthly_difference=None)
    verdict = (acceptance or {}).get("verdict")
    return {
        "currency": cost.get("currency", "USD"),
        "unit": unit["name"],
        "measure": measure,
        "usage": use,
        "monthly_items": items,
        "monthly_total": total,
        "monthly_billed": float(sum(float(v) for v in monthly.values())),
        "monthly_compute": compute_total,
        "accepted_units_window": units_window,
        "accepted_units_month": units_month,
        "accepted_units_how": units_how,
        "unit_cost": unit_cost_value,
        "idle_share": items["idle"] / total if total else 0.0,
        "retry_share": items["retries"] / total if total else 0.0,
        "utilisation": use["allocated_gpu_hours"] / use["capacity_gpu_hours"],
        "capacity": required,
        "baseline": baseline,
        "acceptance": {"verdict": verdict, "timestamp": (acceptance or {}).get("timestamp")} if acceptance else None,
    }


# --- rendering --------------------------------------------------------------------------------------


def _money(value: float | None, currency: str) -> str:
    return "n/a" if value is None else f"{value:,.2f} {currency}"


def _num(value: float) -> str:
    if abs(value) >= 1000 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def _h(value: float) -> str:
    """Hours: one decimal, or three significant digits below 10 (a short lab window)."""
    return f"{value:,.1f}" if value >= 10 or value == 0 else f"{value:.3g}"


def render_markdown(rep: dict) -> str:
    cur, unit, use = rep["currency"], rep["unit"], rep["usage"]
    it = rep["monthly_items"]
    out = [
        "# Sizing and unit cost",
        "",
        f"{use.get('source', 'Slurm accounting')} {use['window_start']} → {use['window_end']} "
        f"({_h(use['window_hours'])} h), "
        f"{use['gpus']} GPUs; costs per month ({HOURS_PER_MONTH:.0f} h), in {cur}; unit: {unit}.",
        "",
    ]
    acc = rep.get("acceptance")
    if acc is None:
        out += ["Acceptance: no acceptance report found: the units below are not backed by an accepted cluster.", ""]
    elif str(acc.get("verdict") or "").lower() != "pass":
        out += [f"Acceptance: {acc.get('verdict')} ({acc.get('timestamp')}): the unit cost is provisional.", ""]
    else:
        out += [f"Acceptance: pass ({acc.get('timestamp')}).", ""]
    q = use["queue_wait_s"]
    out += [
        "## Where the GPU-hours went",
        "",
        "| | GPU-hours | share of capacity |",
        "|---|---:|---:|",
    ]
    cap = use["capacity_gpu_hours"]
    for label, key in (
        ("capacity (GPUs x window)", "capacity_gpu_hours"),
        ("allocated (AllocTRES gres/gpu x elapsed)", "allocated_gpu_hours"),
        ("accepted (COMPLETED)", "accepted_gpu_hours"),
        ("retries (ended without completing)", "retry_gpu_hours"),
        ("in progress (RUNNING)", "in_progress_gpu_hours"),
        ("idle (not allocated)", "idle_gpu_hours"),
    ):
        out.append(f"| {label} | {_h(use[key])} | {use[key] / cap:.1%} |")
    if use["retry_gpu_hours_by_state"]:
        by = ", ".join(f"{k} {_h(v)}" for k, v in use["retry_gpu_hours_by_state"].items())
        out += ["", f"Retries by state (GPU-hours): {by}."]
    if use["over_allocated"]:
        out += ["", "Warning: more GPU-hours allocated than the GPUs can give: is the GPU count right?"]
    out += [
        "",
        f"Jobs: {use['jobs']['accepted']} completed, {use['jobs']['retry']} to retry, "
        f"{use['jobs']['in_progress']} running. Queue wait (Start - Submit, {q['jobs']} jobs): "
        f"mean {q['mean']:.0f} s, median {q['p50']:.0f} s, p95 {q['p95']:.0f} s, max {q['max']:.0f} s.",
        "",
        "## Effective unit cost",
        "",
        "```",
        "effective_cluster_unit_cost = (compute + network + storage + support + operations + idle + retries)"
        " / accepted units",
        "  = (" + " + ".join(_num(it[k]) for k in COST_ITEMS) + f") {cur} / {_num(rep['accepted_units_month'])} {unit}",
        f"  = {_num(rep['monthly_total'])} {cur} / {_num(rep['accepted_units_month'])} {unit}",
        f"  = {_money(rep['unit_cost'], cur)} per {unit}",
        "```",
        "",
        f"compute is the share of cost.monthly.compute ({_num(rep['monthly_compute'])})"
        f" that did accepted or running work; idle and retries are the rest of it, by GPU-hours. "
        f"Accepted units per month: {rep['accepted_units_how']}, x {HOURS_PER_MONTH:.0f} / "
        f"{_h(use['window_hours'])} = {_num(rep['accepted_units_month'])}.",
        "",
        f"Idle share {rep['idle_share']:.1%}, retry share {rep['retry_share']:.1%} of the monthly cost; "
        f"GPU utilisation {rep['utilisation']:.1%}.",
    ]
    if rep["unit_cost"] is None:
        out += ["", "No accepted units in the window: the unit cost is not defined."]
    b = rep.get("baseline")
    if b:
        out += ["", "## Against the baseline", ""]
        if b.get("difference_per_unit") is None:
            out.append(f"{b['name']} at {_money(b['price_per_unit'], cur)} per {unit}: cannot compare (no units).")
        elif b["beats"]:
            out.append(
                f"The cluster BEATS {b['name']} ({_money(b['price_per_unit'], cur)} per {unit}) by "
                f"{_money(b['difference_per_unit'], cur)} per {unit}"
                + (f" ({b['difference_share']:.1%})" if b["difference_share"] is not None else "")
                + f", {_money(b['monthly_difference'], cur)} per month, after idle, retries, storage and labour."
            )
        else:
            out.append(
                f"The cluster does NOT beat {b['name']} ({_money(b['price_per_unit'], cur)} per {unit}): it costs "
                f"{_money(-b['difference_per_unit'], cur)} more per {unit}"
                + (f" ({-b['difference_share']:.1%})" if b["difference_share"] is not None else "")
                + f", {_money(-b['monthly_difference'], cur)} per month."
            )
    c = rep.get("capacity")
    if c:
        out += ["", "## GPU capacity for the target", "", "```"]
        out.append("required_gpu_capacity = target_work_per_month / useful_work_per_gpu_month")
        if c["required_gpus"] is None:
            out.append(f"  = {_num(c['target_units_per_month'])} {unit} / 0: no accepted work measured")
            out.append("```")
        else:
            out += [
                f"  = {_num(c['target_units_per_month'])} {unit} / {c['useful_units_per_gpu_month']:,.3f} {unit} "
                "per GPU-month",
                f"  = {c['required_gpus']:,.1f} → {c['required_gpus_whole']} GPUs",
                "```",
                "",
                f"useful work per GPU-month = {_num(rep['accepted_units_month'])} {unit} / {c['cluster_gpus']} GPUs, "
                "at the measured utilisation and retry rate. The cluster has "
                f"{c['cluster_gpus']} GPUs: "
                + (
                    "enough."
                    if c["required_gpus_whole"] <= c["cluster_gpus"]
                    else f"{c['required_gpus_whole'] - c['cluster_gpus']} more are needed."
                ),
            ]
    return "\n".join(out) + "\n"


def plot_money(rep: dict, path: str) -> str:
    """A horizontal bar chart of the monthly cost by item; returns the path. Needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = rep["monthly_items"]
    labels = ["compute (accepted work)", "network", "storage", "support", "operations", "idle GPUs", "retries"]
    values = [items[k] for k in COST_ITEMS]
    colors = ["#2e7d32", "#1565c0", "#6a1b9a", "#00838f", "#5d4037", "#ef6c00", "#c62828"]
    fig, ax = plt.subplots(figsize=(8, 4))
    bars = ax.barh(labels[::-1], values[::-1], color=colors[::-1])
    total = rep["monthly_total"] or 1.0
    for bar, value in zip(bars, values[::-1], strict=True):
        ax.text(
            bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {value:,.0f} ({value / total:.0%})", va="center"
        )
    title = f"Where the money goes: {rep['monthly_total']:,.0f} {rep['currency']} per month"
    if rep["unit_cost"] is not None:
        title += f", {rep['unit_cost']:,.2f} per {rep['unit']}"
    ax.set_title(title)
    ax.set_xlabel(f"{rep['currency']} per month")
    ax.set_xlim(0, max([*values, 1.0]) * 1.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


__all__ = [
    "HOURS_PER_MONTH",
    "SACCT_FIELDS",
    "CostError",
    "parse_kueue_workloads",
    "parse_sacct",
    "plot_money",
    "render_markdown",
    "tres_gpus",
    "unit_cost",
    "usage",
]
