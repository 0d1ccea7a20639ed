"""``gpufleet inventory generate``: hosts.yml from a rack sheet and the brief's networks, then preflight.

Exit codes: 0 written and preflight passed (warnings allowed); 1 written but preflight found errors;
2 unreadable input or a sheet that cannot be turned into an inventory (nothing written).
The allocation rules are in ``module_utils/inventory/generator.py``; docs/cli.md lists the sheet's columns.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema as brief_schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.atomic import write_atomic
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import InputError, read_regular_file
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.report import format_report
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import has_errors, sort_key
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.generator import (
    SHEET_COLUMNS,
    generate,
    parse_bases,
    parse_sheet,
    render_hosts_yml,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import (
    InventoryError,
    load_inventory,
    load_yaml_text,
)

from .cmd_preflight import run_preflight
from .common import EXIT_FAILED, EXIT_INPUT, EXIT_OK, CliError
from .table import columns

MAX_SHEET_BYTES = 64 * 1024 * 1024


def register(sub) -> None:
    p = sub.add_parser(
        "inventory",
        help="inventory tools: generate hosts.yml from a rack sheet",
        description="Inventory tools.",
    )
    isub = p.add_subparsers(dest="inventory_command", metavar="SUBCOMMAND")
    isub.required = True
    sheet_columns = "\n".join(columns(SHEET_COLUMNS.items(), indent="  "))
    gen = isub.add_parser(
        "generate",
        help="write hosts.yml from a rack sheet (CSV) and the brief's networks, then run preflight on it",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"rack sheet columns (header row required; other columns are refused):\n{sheet_columns}",
        description=_wrap(
            "Allocate management, BMC, storage and per-rail fabric addresses for every row of a rack sheet from "
            "the brief's networks, write DIR/hosts.yml (and DIR/brief.yml when DIR has none), then run preflight "
            "on DIR. Deterministic: the same sheet and brief give the same file, whatever the row order. A host "
            "already in DIR/hosts.yml keeps its addresses; a host's slot is base(group) + its index (default: the "
            "last number in its name: gpu017 -> .117 on every network). Every sheet problem is reported at once "
            "with its line number. Exit 0: written, preflight passed; 1: written, preflight errors; "
            "2: unreadable input or sheet problems (nothing written)."
        ),
    )
    gen.add_argument("--brief", required=True, metavar="FILE", help="the topology brief (its networks and groups)")
    gen.add_argument(
        "--racks",
        required=True,
        metavar="CSV",
        help="the rack sheet: CSV with a header row; hostname and group required, empty address cells allocated",
    )
    gen.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="DIR",
        help="inventory directory to write hosts.yml into (created if missing; an existing hosts.yml is kept as "
        "the source of addresses already given)",
    )
    gen.add_argument(
        "--base",
        action="append",
        default=[],
        metavar="GROUP=N",
        help="slot base for a group: host-part = N + index (default 9 for the controllers group, "
        "100, 200, ... for the brief's pools in order); repeatable",
    )
    gen.add_argument(
        "--dry-run", action="store_true", help="print the hosts.yml that would be written; write nothing, no preflight"
    )
    gen.set_defaults(func=run_generate)


def _wrap(text: str) -> str:
    return textwrap.fill(text, width=100)


def _read_text(path: str, what: str) -> str:
    try:
        data = read_regular_file(path, what, MAX_SHEET_BYTES)
    except InputError as exc:
        raise CliError(str(exc)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}), expected {what}") from None


def _load_existing(hosts_file: str) -> dict:
    if not os.path.lexists(hosts_file):
        return {}
    try:
        return load_inventory(hosts_file).hostvars
    except InventoryError as exc:
        raise CliError(f"{exc} (the existing inventory is read to keep its addresses: fix or remove it)") from None


def run_generate(args) -> int:

    try:
        bases = parse_bases(args.base)
    except ValueError as exc:
        raise CliError(f"--base: {exc}") from None
    brief_text = _read_text(args.brief, "a topology brief (YAML)")
    try:
        brief = load_yaml_text(brief_text, args.brief)
    except InventoryError as exc:
        raise CliError(str(exc)) from None
    if not isinstance(brief, dict):
        raise CliError(f"{args.brief}: expected a topology brief (a YAML mapping), found {type(brief).__name__}")
    _schema, clean = brief_schema.validate(brief)  # preflight reports the schema problems after writing
    rows, problems = parse_sheet(_read_text(args.racks, "a rack sheet (CSV)"))
    out_dir = args.output
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise CliError(f"{out_dir}: exists and is not a directory, expected an inventory directory")
    hosts_file = os.path.join(out_dir, "hosts.yml")
    existing = _load_existing(hosts_file)
    if problems:
        gen = None
    else:
        gen = generate(clean, rows, existing=existing, bases=bases)
        problems = gen.problems
    if problems:
        source = os.path.basename(args.racks)
        for p in problems:
            print(f"gpufleet: error: {p.text(source)}", file=sys.stderr)
        print(
            f"gpufleet: {len(problems)} problem{'s' if len(problems) != 1 else ''} in {args.racks} / {args.brief}: "
            "nothing written",
            file=sys.stderr,
        )
        return EXIT_INPUT
    assert gen is not None
    text = render_hosts_yml(gen, (os.path.basename(args.racks), os.path.basename(args.brief)))
    for note in gen.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.dry_run:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        os.makedirs(out_dir, exist_ok=True)
        write_atomic(hosts_file, text)
        brief_copy = os.path.join(out_dir, "brief.yml")
        if not os.path.exists(brief_copy):
            write_atomic(brief_copy, brief_text)
            print(f"wrote {brief_copy} (a copy of {args.brief})")
        elif (
            os.path.realpath(brief_copy) != os.path.realpath(args.brief)
            and _read_text(brief_copy, "a topology brief (YAML)") != brief_text
        ):
            print(
                f"warning: {brief_copy} differs from {args.brief}: kept it; preflight below checks against "
                f"{args.brief}",
                file=sys.stderr,
            )
    except OSError as exc:
        raise CliError(f"{out_dir}: cannot write ({exc.strerror or exc})") from None
    c = gen.counts
    new_hosts = sorted(set(gen.hostvars) - set(existing))
    print(
        f"wrote {hosts_file}: {gen.hosts} hosts in {len(gen.groups)} groups ({len(new_hosts)} new); addresses: "
        f"{c['sheet']} from the sheet, {c['kept']} kept, {c['slot']} by slot, {c['free']} from free space"
    )
    removed = sorted(set(existing) - set(gen.hostvars))
    if removed:
        more = " ..." if len(removed) > 20 else ""
        print(f"removed {len(removed)} hosts not in the sheet: {', '.join(removed[:20])}{more}")
    return _preflight(out_dir, args.brief)


def _preflight(out_dir: str, brief: str) -> int:
    violations, timing = run_preflight(out_dir, brief)
    violations = sorted(violations, key=sort_key)
    ok = not has_errors(violations)
    if violations:
        print(format_report(violations, summary=False))
    print(
        f"preflight {'passed' if ok else 'FAILED'}: {timing['hosts']} hosts, "
        f"{format_report(violations, summary=True).splitlines()[-1]}"
    )
    return EXIT_OK if ok else EXIT_FAILED
