"""Playbook-running subcommands: ``provision`` (site.yml) and the stages that run alone."""

from __future__ import annotations

import glob
import json
import os
import time

import yaml

from .common import ROOT
from .runner import add_run_arguments, options_from_args, run_playbook

# subcommand -> (playbook, one-line help, description)
COMMANDS = {
    "provision": (
        "site.yml",
        "run the whole site playbook: preflight, base OS, GPU stack, control plane, gates",
        "Run playbooks/site.yml through ansible-runner: every stage in order, with live progress per "
        "phase and host and a summary (hosts ok/changed/failed/unreachable, time per phase, failures).",
    ),
    "verify": (
        "verify.yml",
        "hardware gate: gather facts on every node and check them against the brief",
        "Run playbooks/verify.yml: gather GPU/NIC/CPU/memory/NVMe/version facts on each node, check them "
        "against the brief, write a per-node JSON record, fail only the nodes that violate.",
    ),
    "accept": (
        "acceptance.yml",
        "NCCL acceptance: per-node and all-node all_reduce against the brief's floors",
        "Run playbooks/acceptance.yml: NCCL all_reduce on every node and across the pool, compared with "
        "the brief's floors; bisect and drain a slow node; write the report.",
    ),
}


def register(sub) -> None:
    for name, (playbook, help_, desc) in COMMANDS.items():
        if name != "provision" and not os.path.exists(os.path.join(ROOT, "playbooks", playbook)):
            continue  # the stage has not landed yet
        p = sub.add_parser(name, help=help_, description=desc)
        add_run_arguments(p)
        p.set_defaults(func=_runner_for(playbook))


def _runner_for(playbook: str):
    def run(args) -> int:
        started = time.time()
        opts = options_from_args(args)
        rc = run_playbook(playbook, opts)
        reports = os.path.join(ROOT, "reports")
        # Only this cluster's reports: another inventory's run may write its own meanwhile.
        cluster = brief_cluster_name(opts.inventory, opts.brief)
        if playbook in ("verify.yml", "site.yml"):
            gate = latest_gate_dir(reports, since=started, cluster=cluster)
            if gate or playbook == "verify.yml":
                print(gate_table(gate))
        if playbook in ("acceptance.yml", "site.yml"):
            line = acceptance_line(reports, since=started, cluster=cluster)
            if line:
                print(line)
        return rc

    return run


def brief_cluster_name(inventory: str, brief: str | None = None) -> str | None:
    """cluster.name of the run's brief (--brief, $GPUFLEET_BRIEF, else brief.yml beside the inventory)."""
    path = brief or os.environ.get("GPUFLEET_BRIEF") or ""
    if not path:
        inv = os.path.abspath(inventory)
        path = os.path.join(inv if os.path.isdir(inv) else os.path.dirname(inv), "brief.yml")
    try:
        with open(path, encoding="utf-8") as fh:
            name = ((yaml.safe_load(fh) or {}).get("cluster") or {}).get("name")
    except (OSError, yaml.YAMLError, AttributeError):
        return None
    return name if isinstance(name, str) and name and "/" not in name else None


def latest_gate_dir(reports: str, since: float = 0.0, cluster: str | None = None) -> str | None:
    """The newest ``<reports>/<cluster>/<stamp>/gate`` written at or after ``since`` (any cluster when None)."""
    found = []
    for gate in glob.glob(os.path.join(reports, cluster or "*", "*", "gate")):
        mtime = os.path.getmtime(gate)
        if mtime >= since - 1:
            found.append((mtime, gate))
    return max(found)[1] if found else None


def acceptance_line(reports: str, since: float = 0.0, cluster: str | None = None) -> str | None:
    """The verdict and where the newest acceptance report written since ``since`` is (any cluster when None)."""
    found = [
        (os.path.getmtime(p), p)
        for p in glob.glob(os.path.join(reports, cluster or "*", "*", "acceptance.json"))
        if os.path.getmtime(p) >= since - 1
    ]
    if not found:
        return None
    path = max(found)[1]
    data: dict = {}
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        verdict = str(data.get("verdict", "?")).upper()
    except (OSError, ValueError, AttributeError):
        verdict = "UNREADABLE"
    extra = storage_workload_summary(data) if isinstance(data, dict) else ""
    return f"NCCL acceptance: {verdict}; report {os.path.splitext(path)[0]}.md (scripts/gpufleet report){extra}"


# --- storage and workload acceptance in the summary (docs/storage.md) ---
def storage_workload_summary(report: dict) -> str:
    """``; storage: ...; workload: ...`` for a report that has those sections, else ``""``."""
    parts = []
    storage = report.get("storage") or []
    if storage:
        bad = sorted(
            {r.get("host") for r in storage for v in r.get("violations") or [] if v.get("severity") == "error"}
        )
        parts.append(
            f"storage: {'FAIL (' + ', '.join(str(h) for h in bad) + ')' if bad else 'PASS'} on {len(storage)} node(s)"
        )
    workload = report.get("workload") or {}
    if workload.get("skipped"):
        parts.append(f"workload: not run ({workload['skipped']})")
    elif workload:
        restore = workload.get("restore_s")
        rate = workload.get("throughput_samples_per_s")
        # A median of floats: 243972.15000000002 reads as 243972.2.
        rate = f"{rate:.1f}" if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate else "-"
        parts.append(
            f"workload: {str(workload.get('verdict', '?')).upper()} "
            f"({rate} samples/s, resumed at step "
            f"{workload.get('resumed_step') or '-'}, restore {'-' if restore is None else f'{restore:.1f}'} s)"
        )
    return "".join(f"; {p}" for p in parts)


# --- end storage and workload acceptance ---


def gate_table(gate_dir: str | None) -> str:
    """The hardware gate's per-node table from its JSON records."""
    if not gate_dir:
        return "no hardware gate records were written (check mode, or no GPU node in the inventory)"
    rows = []
    for path in sorted(glob.glob(os.path.join(gate_dir, "*.json"))):
        try:
            with open(path, encoding="utf-8") as fh:
                rec = json.load(fh)
        except (OSError, ValueError) as exc:
            rows.append((os.path.basename(path), "unreadable", "", "", "", "", str(exc)))
            continue
        summ = rec.get("summary") or {}
        rows.append(
            (
                str(rec.get("host", "?")),
                str(rec.get("status", "?")).upper(),
                str(summ.get("gpus") or "-"),
                str(summ.get("driver") or "-"),
                str(summ.get("nvlink") or "-"),
                str(summ.get("rdma") or "-"),
                " ".join(rec.get("codes") or []),
            )
        )
    head = ("host", "gate", "gpus", "driver", "nvlink", "rdma", "codes")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    lines = [f"Hardware gate: {gate_dir}"]
    for r in [head, *rows]:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    return "\n".join(lines)
