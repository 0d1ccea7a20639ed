"""``gpufleet preflight``: the brief against the inventory, with no SSH and no playbook.

Exit codes: 0 no errors (warnings allowed), 1 errors, 2 unreadable input.
The checks are those of ``playbooks/preflight.yml`` (same Python core).
"""

from __future__ import annotations

import json
import os
import sys
import time

from .common import EXIT_FAILED, EXIT_OK, CliError

INVENTORY_NAMES = ("hosts.yml", "hosts.yaml")
BRIEF_NAME = "brief.yml"


def register(sub) -> None:
    p = sub.add_parser(
        "preflight",
        help="check an inventory against its topology brief (no SSH, no playbook)",
        description=(
            "Check an inventory against its topology brief before any host is touched: schema, accelerator "
            "catalogue, CUDA/driver/NCCL pins, groups, host addresses, networks, fabric, acceptance floors, "
            "tenants. Every problem is reported at once. Exit 0: no errors; 1: errors; 2: unreadable input."
        ),
    )
    p.add_argument(
        "-i",
        "--inventory",
        required=True,
        metavar="PATH",
        help="inventory directory holding hosts.yml and brief.yml, or a YAML inventory file",
    )
    p.add_argument("--brief", metavar="FILE", help="the brief (required when PATH is a file; default PATH/brief.yml)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--timing", action="store_true", help="print load and validation times on stderr")
    p.set_defaults(func=run)


def resolve_paths(inventory: str, brief: str | None) -> tuple[str, str]:
    """(inventory file, brief file) from the CLI's arguments; CliError(code 2) when missing."""
    if os.path.isdir(inventory):
        hosts = next(
            (os.path.join(inventory, n) for n in INVENTORY_NAMES if os.path.isfile(os.path.join(inventory, n))), None
        )
        if hosts is None:
            raise CliError(f"{inventory}: no {' or '.join(INVENTORY_NAMES)} in this inventory directory")
        brief = brief or os.path.join(inventory, BRIEF_NAME)
    elif os.path.isfile(inventory):
        hosts = inventory
        if not brief:
            raise CliError(f"{inventory} is an inventory file: --brief FILE is required")
    else:
        raise CliError(f"{inventory}: no such inventory file or directory")
    if not os.path.isfile(brief):
        raise CliError(f"{brief}: no such brief file")
    return hosts, brief


def run_preflight(inventory: str, brief: str | None) -> tuple[list[dict], dict]:
    """Load and check; returns (violations, timings in seconds). Raises CliError on unreadable input."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory_yaml import (
        InventoryError,
        load_inventory,
        load_yaml_file,
    )
    from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import check

    hosts_file, brief_file = resolve_paths(inventory, brief)
    t0 = time.perf_counter()
    try:
        brief_data = load_yaml_file(brief_file)
        inv = load_inventory(hosts_file)
    except InventoryError as exc:
        raise CliError(str(exc)) from None
    t1 = time.perf_counter()
    violations = inv.notes + check(brief_data, inv.groups, inv.hostvars)
    t2 = time.perf_counter()
    return violations, {"load_s": t1 - t0, "validate_s": t2 - t1, "hosts": len(inv.groups.get("all", []))}


def run(args) -> int:
    from ansible_collections.gpufleet.cluster.plugins.module_utils.report import format_report
    from ansible_collections.gpufleet.cluster.plugins.module_utils.violation import has_errors, sort_key

    violations, timing = run_preflight(args.inventory, args.brief)
    violations = sorted(violations, key=sort_key)
    ok = not has_errors(violations)
    if args.format == "json":
        json.dump({"ok": ok, "violations": violations}, sys.stdout, indent=2, ensure_ascii=True)
        sys.stdout.write("\n")
    else:
        if violations:
            print(format_report(violations, summary=False))
        print(
            f"preflight {'passed' if ok else 'FAILED'}: {timing['hosts']} hosts, "
            f"{format_report(violations, summary=True).splitlines()[-1]}"
        )
    if args.timing:
        print(
            f"load {timing['load_s'] * 1000:.0f} ms, validation {timing['validate_s'] * 1000:.0f} ms", file=sys.stderr
        )
    return EXIT_OK if ok else EXIT_FAILED
