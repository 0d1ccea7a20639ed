"""Playbook-running subcommands: ``provision`` (site.yml) and the stages that run alone."""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import re
import time

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.link_errors import (
    history_summary as link_history,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import InputError
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import load_yaml_file

from . import acceptance_reuse as reuse
from .common import ROOT
from .reports import try_load_json
from .runner import RunSession, RunStopped, add_run_arguments, options_from_args, run_playbook
from .table import columns

# subcommand -> (playbook, one-line help, description)
COMMANDS = {
    "provision": (
        "site.yml",
        "run the whole site playbook: preflight, base OS, GPU stack, control plane, gates",
        "Run playbooks/site.yml through ansible-runner: every stage in order, with live progress per "
        "phase and host and a summary (hosts ok/changed/failed/unreachable, time per phase, failures). "
        "Acceptance, the last stage, takes the GPU nodes from users' jobs to measure: a run that changed "
        "and failed nothing keeps the last passing acceptance instead when it was measured on the same "
        "inventory, brief, -e arguments, gpufleet code and hardware (the gate's GPU UUIDs, packages, kernel, "
        "RDMA ports) within --accept-max-age hours and no acceptance ran since; --reaccept measures anyway. "
        "--check, --limit, --tags and --skip-tags run site.yml as given (acceptance included unless skipped); "
        "--flush-cache measures too (hosts may have been re-imaged).",
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
        p = sub.add_parser(name, help=help_, description=desc)
        add_run_arguments(p)
        if name in _DRAINS:
            p.add_argument(
                "--force",
                action="store_true",
                help=(
                    "let acceptance drain the nodes it finds bad even when the drain breaker trips: more than "
                    "acceptance_drain_max_share (25%%) of a pool, counting the nodes already drained or down, or its "
                    "last node in service (by default such a run drains none and fails: check the floors, the brief "
                    "and the fabric first)"
                ),
            )
        if name == "provision":
            p.add_argument(
                "--reaccept",
                action="store_true",
                help="measure acceptance again even when nothing changed since the last passing one",
            )
            p.add_argument(
                "--accept-max-age",
                type=_hours,
                default=reuse.DEFAULT_MAX_AGE_H,
                metavar="HOURS",
                help=(
                    "the oldest passing acceptance a run that changed nothing keeps, in hours "
                    f"(default {reuse.DEFAULT_MAX_AGE_H:g}; 0: always measure)"
                ),
            )
            p.set_defaults(func=provision)
        else:
            p.set_defaults(func=_runner_for(playbook))


# The commands whose acceptance drains the nodes it finds bad, and so take --force.
_DRAINS = ("provision", "accept")


def _options(args):
    """The run options, with acceptance_drain_force when --force was given (as JSON, after the user's -e:
    the option wins and reaches the playbook as a boolean)."""
    opts = options_from_args(args)
    if getattr(args, "force", False):
        opts.extra_vars.append(json.dumps({"acceptance_drain_force": True}))
    return opts


def _hours(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected hours (a number >= 0), found {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected hours (a number >= 0), found {text!r}")
    return value


# ansible-playbook's exit codes after which the play went on for the hosts that did not fail:
# 0 all well, 2 some hosts failed, 4 some hosts unreachable. Others (1 error, 3, 5 bad options or
# playbook, 99 interrupted, 250 unexpected) stop the run.
_RC_HOSTS_WENT_ON = (0, 2, 4)


def provision(args) -> int:
    """site.yml; acceptance as a second run, or the last passing one kept (see acceptance_reuse)."""
    try:
        return _provision(args)
    except RunStopped:
        # What the interrupted or killed run changed is unknown: the next whole run measures again.
        reuse.forget(args.inventory)
        raise


def _provision(args) -> int:
    started = time.time()
    opts = _options(args)
    reports = os.path.join(ROOT, "reports")
    cluster = brief_cluster_name(opts.inventory, opts.brief)
    session = RunSession(opts)
    whole = not (opts.check or opts.limit or opts.tags or opts.skip_tags)
    if not whole or args.reaccept or opts.flush_cache:
        # As given: one run of site.yml, acceptance measured unless the tags leave it out. A run
        # limited to some nodes gathers their facts anew (see playbooks/base.yml).
        run_opts = opts
        if opts.limit:
            run_opts = dataclasses.replace(opts, extra_vars=[*opts.extra_vars, '{"gpufleet_refresh_facts": true}'])
        session.run("site.yml", run_opts)
        gate = latest_gate_dir(reports, since=started, cluster=cluster)
        if whole:
            _keep_record(opts, session, gate, reports, started, cluster)
        elif not opts.check and any(
            t["changed"] or t["failed"] or t["unreachable"] for t in session.tracker.host_totals().values()
        ):
            reuse.forget(opts.inventory)  # part of the cluster changed: the next whole run measures
        return _finish(session, gate, acceptance_line(reports, since=started, cluster=cluster))

    rc = session.run("site.yml", dataclasses.replace(opts, skip_tags="acceptance"))
    gate = latest_gate_dir(reports, since=started, cluster=cluster)
    totals = session.tracker.host_totals()
    failed = sorted(h for h, t in totals.items() if t["failed"] or t["unreachable"])
    changed = sorted(h for h, t in totals.items() if t["changed"])
    if rc not in _RC_HOSTS_WENT_ON or not [h for h in totals if h not in failed]:
        reuse.forget(opts.inventory)
        why = f"ansible-playbook stopped (rc {rc})" if rc not in _RC_HOSTS_WENT_ON else "every host failed"
        return _finish(session, gate, f"NCCL acceptance: not run: {why} before it")
    if failed:
        why = "this run failed on " + _hosts_text(failed)
    elif changed:
        why = "this run changed " + _hosts_text(changed)
    else:
        gate_hosts, gate_problems = reuse.read_gate(gate)
        fp = reuse.fingerprint(opts.inventory, opts.brief, opts.extra_vars)
        record = reuse.load(opts.inventory)
        why = reuse.why_not_reuse(record, fp, gate_hosts, gate_problems, reports, cluster, args.accept_max_age)
        if not why and record:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(record["accepted_at"])))
            return _finish(
                session,
                gate,
                f"NCCL acceptance: PASS, kept from {when}: nothing changed since it was measured "
                f"(--reaccept measures again); report {os.path.splitext(str(record['report']))[0]}.md "
                "(scripts/gpufleet report)",
            )
    print(f"== NCCL acceptance: measuring: {why}", flush=True)
    accept_opts = opts
    if failed:
        # As in one site.yml run, a host that failed a stage takes no part in the later ones; the
        # report names each one with the stage that lost it, so the verdict is partial at best.
        excluded = {"acceptance_excluded_nodes": excluded_reasons(session.tracker, failed)}
        accept_opts = dataclasses.replace(
            opts,
            limit=":".join([opts.limit or "all", *(f"!{h}" for h in failed)]),
            extra_vars=[*opts.extra_vars, json.dumps(excluded)],
        )
    session.run("acceptance.yml", accept_opts)
    _keep_record(opts, session, gate, reports, started, cluster)
    return _finish(session, gate, acceptance_line(reports, since=started, cluster=cluster))


def excluded_reasons(tracker, hosts: list[str]) -> dict[str, str]:
    """Why each host is left out of the acceptance: its first failure in this session's runs."""
    reasons: dict[str, str] = {}
    for f in tracker.failures:
        if f.host in hosts and f.host not in reasons:
            what = "unreachable" if f.unreachable else "failed"
            reasons[f.host] = f"{what} in the stage '{f.phase}' (task '{f.task}')"
    return {h: reasons.get(h, "failed an earlier stage of this run") for h in hosts}


def _hosts_text(hosts: list[str], shown: int = 5) -> str:
    more = len(hosts) - shown
    return ", ".join(hosts[:shown]) + (f" and {more} more" if more > 0 else "")


def _keep_record(opts, session: RunSession, gate: str | None, reports: str, started: float, cluster) -> None:
    """Record this run's acceptance when it passed on the whole inventory; else forget the last one."""
    totals = session.tracker.host_totals()
    clean = not any(t["failed"] or t["unreachable"] for t in totals.values()) and not any(session.rcs)
    report = reuse.newest_report(reports, cluster, started)
    gate_hosts, gate_problems = reuse.read_gate(gate)
    if clean and report and reuse.report_verdict(report) == "pass" and gate_hosts and not gate_problems:
        fp = reuse.fingerprint(opts.inventory, opts.brief, opts.extra_vars)
        reuse.save(opts.inventory, fp, gate_hosts, report)
    else:
        reuse.forget(opts.inventory)


def _finish(session: RunSession, gate: str | None, acceptance: str | None) -> int:
    code = session.finish()
    if gate:
        print(gate_table(gate))
    if acceptance:
        print(acceptance)
    return code


def _runner_for(playbook: str):
    def run(args) -> int:
        started = time.time()
        opts = _options(args)
        rc = run_playbook(playbook, opts)
        reports = os.path.join(ROOT, "reports")
        # Only this cluster's reports: another inventory's run may write its own meanwhile.
        cluster = brief_cluster_name(opts.inventory, opts.brief)
        if playbook == "verify.yml":
            print(gate_table(latest_gate_dir(reports, since=started, cluster=cluster)))
        if playbook == "acceptance.yml":
            line = acceptance_line(reports, since=started, cluster=cluster)
            if line:
                print(line)
        return rc

    return run


def brief_cluster_name(inventory: str, brief: str | None = None) -> str | None:
    """cluster.name of the run's brief (--brief, $GPUFLEET_BRIEF, else brief.yml beside the inventory)."""
    try:
        name = ((load_yaml_file(reuse.brief_path(inventory, brief)) or {}).get("cluster") or {}).get("name")
    except (InputError, AttributeError):
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
    path = reuse.newest_report(reports, cluster, since)
    if not path:
        return None
    data, error = try_load_json(path)
    verdict = str(data.get("verdict", "?")).upper() if not error and isinstance(data, dict) else "UNREADABLE"
    extra = (
        (
            collectives_summary(data)
            + storage_workload_summary(data)
            + dcgm_diag_summary(data)
            + link_errors_summary(data)
            + rdma_pairs_summary(data)
        )
        if isinstance(data, dict)
        else ""
    )
    left_out = not_accepted_text(data) if isinstance(data, dict) else ""
    warned = warnings_text(data) if isinstance(data, dict) else ""
    return (
        f"NCCL acceptance: {verdict}{left_out}; report {os.path.splitext(path)[0]}.md (scripts/gpufleet report){extra}"
        + (f"\n  {warned}" if warned else "")
    )


def warnings_text(report: dict, shown: int = 6) -> str:
    """``warnings (N): CODE: host, host; ...`` for a report with warnings, else ``""``: a verdict of
    PASS may carry an outlier or a degraded node, which the one-word verdict would hide."""
    hosts: dict[str, list[str]] = {}
    count = 0
    for v in report.get("violations") or []:
        if not isinstance(v, dict) or v.get("severity") != "warning":
            continue
        count += 1
        names = hosts.setdefault(str(v.get("code") or "?"), [])
        host = v.get("host")
        if host and host not in names:
            names.append(str(host))
    if not count:
        return ""
    parts = []
    for code in sorted(hosts):
        names = sorted(hosts[code])
        more = f" and {len(names) - shown} more" if len(names) > shown else ""
        parts.append(f"{code}: {', '.join(names[:shown])}{more}" if names else code)
    return f"warnings ({count}): {'; '.join(parts)} (the report says why)"


def not_accepted_text(report: dict, shown: int = 5) -> str:
    """`` (not accepted: gpu02: unreachable in ...; ...)`` for a report that names such nodes, else ``""``."""
    rows = [r for r in report.get("not_accepted") or [] if isinstance(r, dict) and r.get("host")]
    if not rows:
        return ""
    parts = [f"{r['host']}: {r.get('reason') or 'not measured'}" for r in rows[:shown]]
    if len(rows) > shown:
        parts.append(f"and {len(rows) - shown} more in the report")
    return f" (not accepted: {'; '.join(parts)})"


def collectives_summary(report: dict) -> str:
    """``; alltoall: FAIL (all-nodes alltoall h100); all_gather: PASS (4 runs)`` for a report with runs of the
    collectives beyond all_reduce (docs/nccl-acceptance.md), else ``""``."""
    runs = [
        e for e in report.get("runs") or [] if isinstance(e, dict) and e.get("collective") not in (None, "all_reduce")
    ]
    parts = []
    for name in dict.fromkeys(str(e["collective"]) for e in runs):
        mine = [e for e in runs if e["collective"] == name]
        failed = [str(e.get("label")) for e in mine if e.get("result") == "fail"]
        shown = ", ".join(failed[:4]) + (f" and {len(failed) - 4} more" if len(failed) > 4 else "")
        parts.append(f"{name}: FAIL ({shown})" if failed else f"{name}: PASS ({len(mine)} run(s))")
    return "".join(f"; {p}" for p in parts)


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


# --- GPU diagnostics in the summary (docs/dcgm-diagnostics.md) ---
def dcgm_diag_summary(report: dict, shown: int = 4) -> str:
    """``; GPU diagnostics (dcgmi diag -r 2): FAIL on gpu03 (GPU 3 memory) of 4 node(s)`` for a report whose
    single-node runs carry a dcgmi diag record, else ``""``."""
    records = [
        (r.get("host"), r["dcgm_diag"])
        for r in report.get("runs") or []
        if isinstance(r, dict) and r.get("scope") == "single-node" and isinstance(r.get("dcgm_diag"), dict)
    ]
    if not records:
        return ""
    levels = sorted({str(d.get("level")) for _, d in records})
    bad = []
    for host, d in records:
        if d.get("status") == "failed":
            named = ", ".join(
                f"{'node' if f.get('gpu') is None else 'GPU ' + str(f['gpu'])} {f.get('test')}"
                for f in d.get("failures") or []
            )
            bad.append(f"{host} ({named})")
        elif d.get("status") != "passed":
            bad.append(f"{host} (no result)")
    more = f" and {len(bad) - shown} more" if len(bad) > shown else ""
    verdict = f"FAIL on {'; '.join(bad[:shown])}{more} of" if bad else "PASS on"
    return f"; GPU diagnostics (dcgmi diag -r {'/'.join(levels)}): {verdict} {len(records)} node(s)"


# --- end GPU diagnostics ---


# --- link error counters in the summary (docs/nccl-acceptance.md, "Link error counters") ---
def link_errors_summary(report: dict, shown: int = 4) -> str:
    """``; link errors: PASS on N node(s)`` or ``FAIL (gpu02 mlx5_2:1 symbol_error +40; gpu05 not read)``
    for a report whose link error counters were read, else ``""``."""
    records = [
        r for r in report.get("link_errors") or [] if isinstance(r, dict) and r.get("status") != "not applicable"
    ]
    if not records:
        return ""
    bad = [f"{r.get('host')} {link_history(r)}" for r in records if r.get("grew") or r.get("status") != "measured"]
    if not bad:
        return f"; link errors: PASS on {len(records)} node(s)"
    more = f"; and {len(bad) - shown} more" if len(bad) > shown else ""
    return f"; link errors: FAIL ({'; '.join(bad[:shown])}{more})"


# --- end link error counters ---


# --- per-rail RDMA pairs in the summary (docs/nccl-acceptance.md, "Per-rail RDMA pairs") ---
def rdma_pairs_summary(report: dict, shown: int = 4) -> str:
    """``; RDMA pairs: PASS (48 rail runs, 3 rounds)`` or ``FAIL (port gpu03 mlx5_4 rail 4; ...)`` for a
    report whose pools ran them, else ``""``."""
    records = [r for r in report.get("rdma_pairs") or [] if isinstance(r, dict)]
    if not records:
        return ""
    runs = sum(len(r.get("pairs") or []) for r in records)
    rounds = sum(int(r.get("rounds") or 0) for r in records)
    named = []
    for r in records:
        for p in r.get("ports") or []:
            if p.get("verdict") in ("slow", "failed"):
                named.append(f"{p['verdict']} port {p.get('host')} {p.get('device')} rail {p.get('rail')}")
        for v in r.get("violations") or []:
            if v.get("code") in ("RDMA_LINK_SLOW", "RDMA_PAIR_FAILED") and not v.get("host"):
                ends = re.split(r" writes at |: ", str(v.get("message") or ""))[0]
                named.append(f"{'slow link' if v['code'] == 'RDMA_LINK_SLOW' else 'failed run'} {ends}")
    if not named:
        return f"; RDMA pairs: PASS ({runs} rail runs, {rounds} round(s))"
    more = f"; and {len(named) - shown} more" if len(named) > shown else ""
    return f"; RDMA pairs: FAIL ({'; '.join(named[:shown])}{more})"


# --- end per-rail RDMA pairs ---


def gate_table(gate_dir: str | None) -> str:
    """The hardware gate's per-node table from its JSON records."""
    if not gate_dir:
        return "no hardware gate records were written (check mode, or no GPU node in the inventory)"
    rows = []
    for path in sorted(glob.glob(os.path.join(gate_dir, "*.json"))):
        rec, error = try_load_json(path)
        if error or not isinstance(rec, dict):
            rows.append((os.path.basename(path), "unreadable", "", "", "", "", "", error or "not a JSON object"))
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
                str(summ.get("firmware") or "-"),
                " ".join(rec.get("codes") or []),
            )
        )
    head = ("host", "gate", "gpus", "driver", "nvlink", "rdma", "firmware", "codes")
    return "\n".join([f"Hardware gate: {gate_dir}", *columns(rows, head, indent="  ")])
