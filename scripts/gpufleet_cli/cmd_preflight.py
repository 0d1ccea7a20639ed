"""``gpufleet preflight``: the brief against the inventory, with no SSH and no playbook.

Exit codes: 0 no errors (warnings allowed), 1 errors, 2 unreadable input.
The checks are those of ``playbooks/preflight.yml`` (same Python core).

The inventory is whatever ``-i`` names in Ansible: a YAML or INI file, an inventory script, an
inventory plugin's config (constructed, ...), a comma-separated host list, or a directory of
several of them with group_vars/ and host_vars/. A plain YAML inventory, alone or alone in its
directory, is read directly (module_utils/inventory/reader.py: milliseconds for thousands of
hosts). Everything else is read by Ansible's own inventory (InventoryManager and
VariableManager, as ``ansible-inventory --list`` and the playbooks read it), in a child Python
(``gpufleet_cli/inventory_child.py``) so that its configuration (ANSIBLE_CONFIG, default: the
repository's ansible.cfg) and its plugin loader stay out of this process. Both give the checks
Ansible's ``groups`` and each host's variables, untemplated.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import (
    InputError,
    check_directory,
    check_regular_file,
    file_kind,
    short_repr,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.report import format_report
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import has_errors, sort_key
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import (
    VAULT_PLACEHOLDER,
    Inventory,
    InventoryError,
    NotReadDirectly,
    load_inventory,
    load_yaml_file,
    vault_skipped,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import READ_HOST_VARS, check

from . import pywarnings
from .common import EXIT_FAILED, EXIT_OK, ROOT, CliError

INVENTORY_NAMES = ("hosts.yml", "hosts.yaml")
BRIEF_NAME = "brief.yml"
_YAML_EXTS = (".yml", ".yaml")
# Directory entries Ansible never takes for inventory sources: hidden files, the vars directories,
# its default INVENTORY_IGNORE_EXTS, and the brief (this repository's ansible.cfg [inventory] ignore_patterns).
_IGNORED_ENTRY = re.compile(
    r"^\.|^host_vars$|^group_vars$|^vars_plugins$|brief\.ya?ml$"
    r"|(\.pyc|\.pyo|\.swp|\.bak|~|\.rpm|\.md|\.txt|\.rst|\.orig|\.cfg|\.retry)$"
)
_PLUGIN_KEY = re.compile(rb"^[\"']?plugin[\"']?\s*:\s*(\S+)", re.M)
# How long an inventory script or plugin may take before the CLI gives up on it (--inventory-timeout,
# or GPUFLEET_INVENTORY_TIMEOUT in the environment).
ANSIBLE_TIMEOUT_S = 300
TIMEOUT_ENV = "GPUFLEET_INVENTORY_TIMEOUT"


def register(sub) -> None:
    p = sub.add_parser(
        "preflight",
        help="check an inventory against its topology brief (no SSH, no playbook)",
        description=(
            "Check an inventory against its topology brief before any host is touched: schema, accelerator "
            "catalogue, CUDA/driver/NCCL pins, groups, host addresses, networks, fabric, acceptance floors, "
            "tenants. Every problem is reported at once. Exit 0: no errors; 1: errors; 2: unreadable input. "
            "The inventory is anything ansible-playbook -i reads: a plain YAML inventory is read directly, "
            "any other form (INI, scripts, plugin configs, several sources) by Ansible's own inventory."
        ),
    )
    p.add_argument(
        "-i",
        "--inventory",
        required=True,
        metavar="PATH",
        help=(
            "inventory directory holding brief.yml and the inventory (hosts.yml, hosts.ini, scripts, plugin "
            "configs, group_vars/, host_vars/), or an inventory file, script or host list"
        ),
    )
    p.add_argument(
        "--brief", metavar="FILE", help="the brief (required when PATH is not a directory; default PATH/brief.yml)"
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--timing", action="store_true", help="print load and validation times on stderr")
    add_timeout_option(p)
    p.set_defaults(func=run)


def add_timeout_option(p) -> None:
    p.add_argument(
        "--inventory-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help=(
            "how long Ansible's inventory (a script, a plugin) may take to read a source that is not read "
            f"directly (default: ${TIMEOUT_ENV}, else {ANSIBLE_TIMEOUT_S})"
        ),
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"expected a number of seconds between 0 and 86400, found {text!r:.40}")
    return value


def inventory_timeout(given: float | None = None) -> float:
    """The timeout for Ansible's inventory: ``given`` (the option), else $GPUFLEET_INVENTORY_TIMEOUT, else 300 s."""
    if given is not None:
        return given
    env = os.environ.get(TIMEOUT_ENV, "").strip()
    if not env:
        return ANSIBLE_TIMEOUT_S
    try:
        return _seconds(env)
    except argparse.ArgumentTypeError as exc:
        raise CliError(f"${TIMEOUT_ENV}: {exc}") from None


# --- what -i names ----------------------------------------------------------------------------------


@dataclass
class InventorySource:
    """An inventory as ``-i`` names it, and how preflight reads it."""

    path: str  # as given
    form: str  # what it is, for the reader: "YAML: hosts.yml", "INI: hosts.ini", "script: inv.py", ...
    direct: str | None = None  # the YAML file read directly; None: Ansible's own inventory reads `path`
    data: Any = None  # that file's parsed content


def _entry_form(path: str) -> str:
    """The form of one inventory source, from its name, mode and first lines (no Ansible)."""
    name = os.path.basename(path)
    if os.path.isdir(path):
        return f"directory: {name}"
    _check_source_file(path)
    ext = os.path.splitext(name)[1].lower()
    if ext in _YAML_EXTS or ext == ".json":
        try:
            # Never blocks: the file was found regular above, and O_NONBLOCK covers a swap since.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                m = _PLUGIN_KEY.search(fh.read(65536))
        except OSError:
            m = None
        if m:
            plugin = m.group(1).decode(errors="replace").strip("\"'")
            return f"plugin config ({plugin}): {name}"
        return f"{'JSON' if ext == '.json' else 'YAML'}: {name}"
    if os.access(path, os.X_OK):
        return f"script: {name}"
    return f"INI: {name}"


def _check_source_file(path: str) -> None:
    """CliError(2) when an inventory source is not a regular file (a FIFO would hang its reader)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise CliError(f"{path}: a link to nothing, expected an inventory source") from None
        raise CliError(f"{path}: no such inventory file") from None
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CliError(f"{path}: is {file_kind(st.st_mode)}, expected an inventory file (a regular file)")


# Directories Ansible reads variables files from, beside an inventory source.
_VARS_DIRS = ("group_vars", "host_vars")
_MAX_SCAN_ENTRIES = 100_000


def check_inventory_tree(path: str) -> None:
    """Before Ansible's inventory reads a directory: CliError(2) naming the first entry that is not a
    regular file or directory (a FIFO, a device, a socket), or that cannot be listed or looked at.
    Ansible would block on a FIFO, read /dev/zero until memory runs out, or skip what it cannot read."""
    roots = [path] if os.path.isdir(path) else []
    base = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    roots += [os.path.join(base, d) for d in _VARS_DIRS if os.path.lexists(os.path.join(base, d))]
    seen = 0
    todo = list(roots)
    while todo:
        d = todo.pop()
        try:
            entries = os.listdir(d)
        except OSError as exc:
            raise CliError(f"{d}: cannot list this inventory directory: {exc.strerror or exc}") from None
        for e in entries:
            if e.startswith("."):
                continue
            full = os.path.join(d, e)
            seen += 1
            if seen > _MAX_SCAN_ENTRIES:
                raise CliError(f"{path}: more than {_MAX_SCAN_ENTRIES} files, expected an inventory directory")
            try:
                st = os.stat(full)
            except OSError as exc:
                raise CliError(f"{full}: cannot read: {exc.strerror or exc}") from None
            if stat.S_ISDIR(st.st_mode):
                # The inventory directory's own subdirectories are other sources; vars directories recurse.
                if d != path or e in _VARS_DIRS:
                    if len(os.path.relpath(full, base).split(os.sep)) > 20:
                        raise CliError(f"{full}: nested more than 20 deep (a link to a parent?)")
                    todo.append(full)
            elif not stat.S_ISREG(st.st_mode):
                raise CliError(f"{full}: is {file_kind(st.st_mode)}, expected a regular file")
            elif not os.access(full, os.R_OK):
                raise CliError(f"{full}: cannot read: permission denied")


def check_vars_files(path: str) -> None:
    """Before Ansible's inventory reads them: every YAML or JSON file under the group_vars/ and host_vars/
    beside ``path`` parsed with the direct reader's bounds (size, aliases, depth, duplicate keys, integer
    length), so that a broken one is named with its line (Ansible names neither) and an alias bomb never
    reaches Ansible. Vault-encrypted files are left to Ansible."""
    base = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    for d in _VARS_DIRS:
        for top, dirs, names in os.walk(os.path.join(base, d)):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for name in sorted(names):
                full = os.path.join(top, name)
                if name.startswith(".") or os.path.splitext(name)[1] not in ("", ".yml", ".yaml", ".json"):
                    continue
                try:
                    with open(full, "rb", opener=_nonblocking) as fh:
                        if fh.read(14) == b"$ANSIBLE_VAULT":
                            continue
                    load_yaml_file(full)
                except OSError as exc:
                    raise CliError(f"{full}: cannot read: {exc.strerror or exc}") from None
                except InputError as exc:
                    raise CliError(str(exc)) from None


def _nonblocking(path, flags):
    return os.open(path, flags | os.O_NONBLOCK)


def _yaml_source(path: str, shown: str) -> InventorySource:
    """A .yml/.yaml source: read directly unless it is an inventory plugin's config."""
    data = load_yaml_file(path)  # a syntax error is an error here, as it is for Ansible's yaml plugin
    if isinstance(data, dict) and data.get("plugin"):
        return InventorySource(shown, f"plugin config ({short_repr(data['plugin'], 80)}): {os.path.basename(path)}")
    return InventorySource(shown, f"YAML: {os.path.basename(path)}", direct=path, data=data)


def resolve_source(inventory: str, brief: str | None) -> tuple[InventorySource, str]:
    """(inventory source, brief file) from the CLI's arguments; CliError(code 2) when missing.

    The brief is PATH/brief.yml for a directory; any other form needs ``--brief``.
    """
    try:
        if os.path.isdir(inventory):
            entries = [e for e in check_directory(inventory, "an inventory directory") if not _IGNORED_ENTRY.search(e)]
            if not entries:
                raise CliError(
                    f"{inventory}: no {' or '.join(INVENTORY_NAMES)} or other inventory source in this directory"
                )
            full = [os.path.join(inventory, e) for e in entries]
            check_inventory_tree(inventory)
            if len(full) == 1 and os.path.isfile(full[0]) and full[0].lower().endswith(_YAML_EXTS):
                src = _yaml_source(full[0], inventory)
            elif len(full) == 1:
                src = InventorySource(inventory, _entry_form(full[0]))
            else:
                src = InventorySource(inventory, "directory: " + ", ".join(_entry_form(f) for f in full))
            brief = brief or os.path.join(inventory, BRIEF_NAME)
        elif os.path.lexists(inventory):
            _check_source_file(inventory)
            check_inventory_tree(inventory)
            if inventory.lower().endswith(_YAML_EXTS):
                src = _yaml_source(inventory, inventory)
            else:
                src = InventorySource(inventory, _entry_form(inventory))
            if not brief:
                raise CliError(f"{inventory} is an inventory file: --brief FILE is required")
        elif "," in inventory:
            src = InventorySource(inventory, "host list")
            if not brief:
                raise CliError(f"{inventory} is a host list: --brief FILE is required")
        else:
            raise CliError(f"{inventory}: no such inventory file or directory")
    except InputError as exc:
        raise CliError(str(exc)) from None
    if not os.path.lexists(brief):
        raise CliError(f"{brief}: no such brief file")
    try:
        check_regular_file(brief, "a topology brief (YAML)")
    except InputError as exc:
        raise CliError(str(exc)) from None
    return src, brief


def resolve_paths(inventory: str, brief: str | None) -> tuple[str, str]:
    """(inventory, brief file): the YAML file read directly when there is one, else PATH as given."""
    src, brief_file = resolve_source(inventory, brief)
    return src.direct or src.path, brief_file


# --- reading it -------------------------------------------------------------------------------------


def load_source(src: InventorySource, timeout: float | None = None):
    """The inventory (groups, host variables, notes) and how it was read ("read directly (...)").

    ``timeout``: for Ansible's inventory, when it reads the source (see :func:`inventory_timeout`)."""
    form = src.form
    if src.direct:
        try:
            return load_inventory(src.direct, data=src.data), f"read directly ({form})"
        except InventoryError as exc:
            raise CliError(str(exc)) from None
        except NotReadDirectly as exc:
            form = f"{form}, {exc}"
    return load_with_ansible(src.path, form, timeout), f"read by Ansible's inventory ({form})"


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("ANSIBLE_CONFIG", os.path.join(ROOT, "ansible.cfg"))
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    # Every source Ansible cannot parse stops the read: the child reports it (Ansible's own default
    # is a warning and an inventory without that source's hosts and variables).
    env["ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED"] = "1"
    # A key written twice in a YAML file is an error, as the direct reader makes it (Ansible's default
    # is a warning, and the second value silently wins).
    env["ANSIBLE_DUPLICATE_YAML_DICT_KEY"] = "error"
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(ROOT, "scripts"), os.path.join(ROOT, "collections"), env.get("PYTHONPATH", "")]
    ).rstrip(os.pathsep)
    return pywarnings.child_env(env)


def ansible_read(sources: list[str], keys: list[str] | None = None, timeout: float | None = None) -> list[dict]:
    """Read each source with Ansible's own inventory, in a child Python; one result per source.

    A result is ``{"source", "groups", "hostvars", "vault_hosts"}``, or ``{"source", "error"}``.
    ``keys``: keep only these host variables (None: all of them, less Ansible's internal ones).
    ``timeout``: seconds (None: :func:`inventory_timeout`); past it the child and whatever it started
    (an inventory script) are killed and CliError(2) says which option sets it.
    """
    timeout = inventory_timeout(timeout)
    argv = [sys.executable, "-m", "gpufleet_cli.inventory_child"]
    argv += [
        "--keys",
        ",".join(keys) if keys is not None else "*",
        "--vault-placeholder",
        VAULT_PLACEHOLDER,
        *[os.path.abspath(s) if "," not in s else s for s in sources],
    ]
    # A session of its own: on timeout the whole group goes, the inventory script Ansible started
    # included (it would otherwise hold the output pipes open, and this process with them).
    proc = subprocess.Popen(
        argv,
        env=_child_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise CliError(
            f"{', '.join(sources)}: Ansible's inventory did not finish in {timeout:g} s (an inventory script or "
            f"plugin that hangs?); allow longer with --inventory-timeout SECONDS or ${TIMEOUT_ENV}"
        ) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    try:
        results = json.loads(stdout)
    except ValueError:
        tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
        raise CliError(
            f"{', '.join(sources)}: Ansible's inventory stopped (exit {proc.returncode}): {tail[0][:300]}"
        ) from None
    if stderr.strip():
        # Ansible's warnings (deprecations, skipped keys), as ansible-playbook would print them.
        sys.stderr.write(stderr if stderr.endswith("\n") else stderr + "\n")
    return results


def load_with_ansible(path: str, form: str, timeout: float | None = None):
    """An :class:`Inventory` from Ansible's own inventory; CliError names the file, form and Ansible's message."""
    if "," not in path:
        check_vars_files(path)
    (result,) = ansible_read([path], keys=list(READ_HOST_VARS), timeout=timeout)
    if "error" in result:
        # Inside a directory, the source that failed (named under PATH as given), with its own form.
        failed, hint = path, ""
        inside = os.path.relpath(result.get("file") or path, os.path.abspath(path))
        if os.path.isdir(path) and inside != "." and not inside.startswith(".."):
            failed = os.path.join(path, inside)
            if form.startswith("directory: "):
                hint = (
                    f"; Ansible reads every file in {path} as an inventory source: if this one is not one, "
                    "move it out or add it to [inventory] ignore_patterns in ansible.cfg"
                )
            form = _entry_form(failed)
        raise CliError(f"{failed}: Ansible's inventory cannot read it ({form}): {result['error']}{hint}")
    notes = [vault_skipped(h) for h in result["vault_hosts"]]
    return Inventory(result["groups"], result["hostvars"], notes)


# --- the command ------------------------------------------------------------------------------------


def run_preflight(inventory: str, brief: str | None, timeout: float | None = None) -> tuple[list[dict], dict]:
    """Load and check; returns (violations, timings and how the inventory was read). CliError on unreadable input.

    ``timeout``: for Ansible's inventory, when it reads the source (see :func:`inventory_timeout`)."""
    t0 = time.perf_counter()
    src, brief_file = resolve_source(inventory, brief)
    try:
        brief_data = load_yaml_file(brief_file)
    except InventoryError as exc:
        raise CliError(str(exc)) from None
    inv, read = load_source(src, timeout)
    t1 = time.perf_counter()
    violations = inv.notes + check(brief_data, inv.groups, inv.hostvars)
    t2 = time.perf_counter()
    return violations, {
        "load_s": t1 - t0,
        "validate_s": t2 - t1,
        "hosts": len(inv.groups.get("all", [])),
        "read": read,
    }


def run(args) -> int:
    violations, timing = run_preflight(args.inventory, args.brief, args.inventory_timeout)
    violations = sorted(violations, key=sort_key)
    ok = not has_errors(violations)
    if args.format == "json":
        print(f"inventory: {timing['read']}", file=sys.stderr)
        json.dump({"ok": ok, "violations": violations}, sys.stdout, indent=2, ensure_ascii=True)
        sys.stdout.write("\n")
    else:
        print(f"inventory: {timing['read']}")
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
