"""``gpufleet report cost``: sizing and effective unit cost from the jobs that ran and the brief's ``cost:``.

A subcommand of ``gpufleet report`` (``cmd_report`` adds it with :func:`register_report`). Inputs:

- the jobs: on a Slurm brief, Slurm accounting: ``--sacct FILE`` (``sacct --parsable2`` output with its
  header; ``-`` for stdin), or sacct run on the first Slurm controller of ``-i INVENTORY`` through Ansible
  (ad hoc, read-only); on a Kubernetes brief, Kueue's Workloads: ``--workloads FILE`` (``kubectl get
  workloads.kueue.x-k8s.io -A -o json``), or that command run on the first control-plane node;
- the brief (``-i INVENTORY``'s brief.yml or ``--brief``): its ``cost:`` section and, with the
  inventory, the cluster's GPU count (pools' GPUs per node x hosts); ``--gpus`` overrides it. The
  inventory is read as ``gpufleet preflight`` reads it: anything ``-i`` takes in Ansible (a directory,
  a YAML or INI file, an inventory script or plugin config, with ``--brief`` when PATH is not a
  directory), a plain YAML file directly and every other form through Ansible's own inventory;
- the latest acceptance report under ``--dir`` (or ``--acceptance FILE``): its verdict is shown.

Exit codes: 0 the report was printed (whatever the cluster's cost); 2 unreadable or missing input.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import validate
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import (
    InputError,
    read_regular_file,
    read_stream,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import format_text
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import InventoryError, load_yaml_file
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import cost

from . import pywarnings
from .cmd_preflight import load_source, resolve_source
from .common import EXIT_OK, ROOT, CliError
from .reports import add_dir_option, find_reports, load_json

# kubectl's kubeconfig on the first control-plane node (kubeadm's admin.conf).
KUBECONFIG = "/etc/kubernetes/admin.conf"


def register_report(reports) -> None:
    """``gpufleet report cost``, on ``report``'s subcommands."""
    g = reports.add_parser(
        "cost",
        help="the cluster's unit cost from the brief's cost: section and the jobs that ran (sacct, Kueue)",
        description=(
            "Sizing and effective unit cost: the brief's cost: section (monthly costs, the unit of accepted work, "
            "the baseline), the cluster's GPUs and the jobs that ran: Slurm accounting (--sacct FILE, or sacct run "
            "on the first controller of -i INVENTORY) or, on a Kubernetes brief, Kueue's Workloads (--workloads "
            "FILE, or kubectl run on the first control-plane node), with the latest acceptance report's verdict. "
            "See docs/cost.md. "
            "Exit 0: the report was printed; 2: unreadable or missing input."
        ),
    )
    jobs = g.add_mutually_exclusive_group()
    jobs.add_argument("--sacct", metavar="FILE", help="sacct --parsable2 output (with header; - for stdin)")
    jobs.add_argument(
        "--workloads",
        metavar="FILE",
        help="kubectl get workloads.kueue.x-k8s.io -A -o json (a Kubernetes brief; - for stdin)",
    )
    add_brief_arguments(g, "its brief.yml gives the cost: section, its pools' hosts the GPU count")
    g.add_argument("--gpus", type=int, metavar="N", help="the cluster's GPUs (default: from the brief's pools)")
    g.add_argument("--since", metavar="TIME", help="window start, sacct syntax (default: 30 days ago)")
    g.add_argument("--until", metavar="TIME", help="window end, sacct syntax (default: now)")
    g.add_argument("--acceptance", metavar="FILE", help="acceptance.json (default: the latest under --dir)")
    g.add_argument("--png", metavar="FILE", help="also draw where the money goes (needs matplotlib)")
    g.add_argument("--format", choices=("markdown", "json"), default="markdown", help="output (default: markdown)")
    add_dir_option(g, inherited=True)
    g.set_defaults(func=run)


def add_brief_arguments(p, what: str) -> None:
    """``-i INVENTORY`` and ``--brief FILE``, as :func:`load_brief` reads them; ``what``: what the command
    takes from them."""
    p.add_argument(
        "-i",
        "--inventory",
        metavar="PATH",
        help=f"inventory as for preflight: a directory holding brief.yml, or an inventory file, script or plugin "
        f"config (then --brief); {what}",
    )
    p.add_argument("--brief", metavar="FILE", help="the brief (default: the inventory's brief.yml)")


def _time(text: str | None, what: str) -> datetime | None:
    if not text:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d"):
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    raise CliError(f"{what}: expected a time such as 2026-03-01 or 2026-03-01T08:00:00, found {text!r}")


def load_brief(args) -> tuple[dict, dict | None]:
    """(brief, inventory or None). The inventory is read by preflight's loader (every ``-i`` form)."""
    inv = None
    brief_file = args.brief
    try:
        if args.inventory:
            src, brief_file = resolve_source(args.inventory, args.brief)
            inv, read = load_source(src)
            print(f"inventory: {read}", file=sys.stderr)
        if not brief_file:
            raise CliError("report cost: give -i INVENTORY or --brief FILE (the brief's cost: section is needed)")
        if not os.path.isfile(brief_file):
            raise CliError(f"{brief_file}: no such brief file")
        return load_yaml_file(brief_file), inv
    except InventoryError as exc:
        raise CliError(str(exc)) from None


def cost_section(brief: dict) -> dict:
    violations, clean = validate(brief)
    ours = [v for v in violations if (v.get("field") or "").startswith("cost")]
    if ours:
        raise CliError("the brief's cost section is not valid:\n" + format_text(ours))
    if not clean.get("cost"):
        raise CliError(
            "the brief has no cost: section: add monthly costs, the unit of accepted work and the baseline "
            "(docs/cost.md)"
        )
    return clean


def cluster_gpus(clean: dict, inv, override: int | None) -> int:
    if override is not None:
        if override <= 0:
            raise CliError(f"--gpus: expected a positive number of GPUs, found {override}")
        return override
    if inv is None:
        raise CliError("the cluster's GPU count is needed: give -i INVENTORY (pools x hosts) or --gpus N")
    total = 0
    for pool in clean.get("pools") or []:
        if pool and pool.get("group") in inv.groups:
            total += int(pool.get("gpus_per_node") or 0) * len(inv.groups[pool["group"]])
    if total <= 0:
        raise CliError("no GPUs in the inventory's pool groups: give --gpus N")
    return total


def on_controller(inventory: str, clean: dict, inv, cmd: str, what: str, instead: str) -> str:
    """Run ``cmd`` on the first host of the brief's controllers group (read-only, ad hoc) and return its stdout."""
    group = (clean.get("controllers") or {}).get("group")
    hosts = inv.groups.get(group) or [] if inv is not None else []
    if not hosts:
        raise CliError(f"no controller in group {group!r} of {inventory} to run {what} on: give {instead}")
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=os.environ.get("ANSIBLE_CONFIG", os.path.join(ROOT, "ansible.cfg")),
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
    )
    pywarnings.child_env(env)
    exe = os.path.join(os.path.dirname(sys.executable), "ansible")
    argv = [exe if os.path.exists(exe) else "ansible", hosts[0], "-i", inventory, "-m", "ansible.builtin.command"]
    argv += ["-a", cmd]
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CliError(f"could not run {what} on {hosts[0]} through ansible: {exc}") from None
    try:
        result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"][hosts[0]]
    except (ValueError, KeyError, IndexError, TypeError):
        raise CliError(
            f"{what} on {hosts[0]}: no result from ansible (rc {proc.returncode}): {proc.stderr.strip()[-400:]}"
        ) from None
    if result.get("rc", 1) != 0 or result.get("unreachable"):
        raise CliError(f"{what} on {hosts[0]} failed: {(result.get('stderr') or result.get('msg') or '')[-400:]}")
    return result.get("stdout", "")


def sacct_via_ansible(inventory: str, clean: dict, inv, since: str, until: str) -> str:
    """sacct on the first Slurm controller, over the window."""
    cmd = f"sacct --allusers --allocations --parsable2 --starttime {since} --endtime {until} -o {cost.SACCT_FIELDS}"
    return on_controller(inventory, clean, inv, cmd, "sacct", "--sacct FILE")


def workloads_via_ansible(inventory: str, clean: dict, inv) -> str:
    """Kueue's Workloads, read with kubectl on the first control-plane node."""
    cmd = f"kubectl --kubeconfig {KUBECONFIG} get workloads.kueue.x-k8s.io --all-namespaces -o json"
    return on_controller(inventory, clean, inv, cmd, "kubectl get workloads", "--workloads FILE")


def _read(path: str) -> str:
    what = "sacct output or kubectl JSON"
    try:
        if path == "-":
            data = read_stream(getattr(sys.stdin, "buffer", sys.stdin), what)
        else:
            data = read_regular_file(path, what)
        return data.decode("utf-8")
    except InputError as exc:
        raise CliError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}), expected {what}") from None


def latest_acceptance(args) -> dict | None:
    if args.acceptance:
        return load_json(args.acceptance)
    found = find_reports(args.dir, "acceptance")
    return load_json(os.path.join(found[-1].path, "acceptance.json")) if found else None


def run(args) -> int:
    brief, inv = load_brief(args)
    clean = cost_section(brief)
    gpus = cluster_gpus(clean, inv, args.gpus)
    start, end = _time(args.since, "--since"), _time(args.until, "--until")
    kubernetes = (clean.get("cluster") or {}).get("control_plane") == "kubernetes"
    if not (args.sacct or args.workloads or args.inventory):
        raise CliError(
            "report cost: give --sacct FILE (Slurm), --workloads FILE (Kubernetes) or -i INVENTORY (to read them "
            "on the controller)"
        )
    if not (args.sacct or args.workloads):
        now = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
        start = start or now - timedelta(days=30)
        end = end or now
    try:
        if args.workloads or (kubernetes and not args.sacct):
            text = _read(args.workloads) if args.workloads else workloads_via_ansible(args.inventory, clean, inv)
            try:
                doc = json.loads(text)
            except ValueError as exc:
                raise cost.CostError(
                    f"expected kubectl get workloads.kueue.x-k8s.io -A -o json, found no JSON ({exc})"
                ) from None
            jobs, source = cost.parse_kueue_workloads(doc), "Kueue Workloads"
        else:
            text = (
                _read(args.sacct)
                if args.sacct
                else sacct_via_ansible(args.inventory, clean, inv, start.isoformat(), end.isoformat())
            )
            jobs, source = cost.parse_sacct(text), "Slurm accounting"
        rep = cost.unit_cost(cost.usage(jobs, gpus, start, end, source=source), clean["cost"], latest_acceptance(args))
    except cost.CostError as exc:
        raise CliError(f"report cost: {exc}") from None
    if args.format == "json":
        json.dump(rep, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(cost.render_markdown(rep))
    if args.png:
        try:
            print(f"plot: {cost.plot_money(rep, args.png)}", file=sys.stderr)
        except ImportError:
            raise CliError("--png needs matplotlib (make venv installs it)") from None
    return EXIT_OK
