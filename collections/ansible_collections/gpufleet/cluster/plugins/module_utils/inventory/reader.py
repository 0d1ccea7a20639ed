# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Read a YAML inventory the way Ansible does, without Ansible (controller only).

For the CLI's ``preflight``, which must not run Ansible and must be fast on
thousands of hosts: PyYAML's C loader, then Ansible's YAML-inventory semantics:

- ``all`` / ``children`` / ``hosts`` / ``vars``, in the order they are written, host
  ranges (``gpu[001:016]``), a string where a mapping is expected (``hosts: gpu01``);
- ``groups[g]`` holds the hosts of ``g`` and of all its descendants, as Ansible's
  ``groups`` does; every host is in ``all``, hosts in no other group in ``ungrouped``;
- variable precedence (hash_behaviour=replace, Ansible's default VARIABLE_PRECEDENCE):
  inventory-file vars of ``all`` < inventory-file vars of other groups (by depth below
  ``all``, then ``ansible_group_priority``, then name) < ``group_vars/all`` <
  ``group_vars/<group>`` (same order) < inventory-file host vars < ``host_vars/<host>``;
- ``group_vars/<g>`` is the first of ``<g>`` (a file, or a directory read recursively in
  sorted order), ``<g>.yml``, ``<g>.yaml``, ``<g>.json``, as Ansible's host_group_vars
  plugin finds it; same for host_vars.

Values are data, never templated: ``{{ ... }}`` stays a string. Vault-encrypted
files and ``!vault`` values cannot be read here: they are skipped and reported.
What this reader does not reproduce (``host:port`` keys) raises :class:`NotReadDirectly`,
so that the caller hands the file to Ansible's own inventory instead.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import stat
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import (
    BoundedConstructorMixin,
    InputError,
    check_directory,
    file_kind,
    load_yaml_bytes,
    read_regular_file,
    short_repr,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import WARNING, violation

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
VAULT_PLACEHOLDER = "<vault-encrypted>"
# Ansible's order: a name without extension first (a file, or a directory), then YAML_FILENAME_EXTENSIONS.
_VAR_EXTS = ("", ".yml", ".yaml", ".json")
# Matched whole, newlines included (DOTALL), as Ansible splits the name: "gpu[1:2]\n" is gpu1\n and
# gpu2\n, which the host-name check then reports, never gpu1 and gpu2.
_RANGE_RE = re.compile(r"(.*?)\[([^\[\]:]*):([^\[\]:]*)(?::([^\[\]:]*))?\](.*)", re.DOTALL)
# A host key with a colon outside [...]: a port (gpu01:2222) or an IPv6 address (so is "[::1]:22").
_PORT_RE = re.compile(r":(?![^\[]*\])")
# Hosts one range pattern may stand for (all its brackets together), and one inventory file in all.
MAX_RANGE = 1_000_000
MAX_HOSTS = 1_000_000


def vault_skipped(host: str) -> dict:
    """The warning for a host whose !vault values were not decrypted (whichever reader ran)."""
    return violation(
        "INPUT_VAULT_SKIPPED",
        "hostvars",
        "expected plain values, found !vault values: they are not decrypted here",
        host=host,
        severity=WARNING,
    )


class InventoryError(InputError):
    """Input that cannot be read: the message names the file (and line when known)."""


class NotReadDirectly(Exception):
    """The file is a valid inventory only Ansible's own parser reads exactly (the message says why)."""


class _GpufleetLoader(BoundedConstructorMixin, _Loader):  # type: ignore[misc, valid-type]
    """PyYAML's safe loader with the bounds of module_utils/common/bounded.py (depth, aliases,
    duplicate keys, integer length) and Ansible's !vault and !unsafe tags."""


def _vault(loader, node):
    return VAULT_PLACEHOLDER


def _unsafe(loader, node):
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)


_GpufleetLoader.add_constructor("!vault", _vault)
_GpufleetLoader.add_constructor("!unsafe", _unsafe)


def load_yaml_file(path: str) -> Any:
    """Parse one YAML file; :class:`InventoryError` names the file and line on any failure.

    The file must be a regular file of at most MAX_FILE_BYTES (bounded.py), read without blocking.
    """
    try:
        data = read_regular_file(path, "a YAML file")
    except InputError as exc:
        raise InventoryError(str(exc)) from None
    return load_yaml_text(data, path)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building large acyclic data.

    Parsing an inventory allocates millions of small dicts, lists and strings and frees none of
    them, so the collector runs many times and each full pass walks everything built so far:
    its cost grows faster than the file. Nothing built here holds a reference cycle, so pausing
    it changes no result; it is turned back on (if it was on) as soon as the block ends.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def load_yaml_text(data: bytes | str, path: str) -> Any:
    try:
        with _gc_paused():
            return load_yaml_bytes(data, path, _GpufleetLoader)
    except InputError as exc:
        raise InventoryError(str(exc)) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        raise InventoryError(f"{where}: YAML syntax error: {exc.problem or exc}") from None
    except (yaml.YAMLError, RecursionError, MemoryError, UnicodeDecodeError, ValueError) as exc:
        raise InventoryError(f"{path}: cannot parse: {type(exc).__name__}: {str(exc)[:200]}") from None


class RangeTooLarge(ValueError):
    """A host range that stands for more hosts than the reader makes."""


def expand_hostname_range(pattern: str, limit: int = MAX_RANGE) -> list[str]:
    """``gpu[01:03]`` → gpu01, gpu02, gpu03: Ansible's numeric and alphabetic ranges, with step.

    As Ansible: an empty start is 0, a zero-padded start needs an end of the same width, and a
    letter range runs over a-z then A-Z. Stricter than Ansible: an end before the start is an
    error here, where Ansible silently adds no host, and a pattern that stands for more than
    ``limit`` hosts (its brackets multiplied: ``n[0:999]x[0:999]`` is a million) is an error,
    found before any host is made.
    """
    total = 1
    rest = pattern
    while True:
        items = _range_items(rest)
        if items is None:
            break
        total *= len(items[1])
        if total > limit:
            raise RangeTooLarge(f"range {short_repr(pattern)} stands for more than {limit} hosts")
        rest = items[2]
    return _expand(pattern)


def _expand(pattern: str) -> list[str]:
    parts = _range_items(pattern)
    if parts is None:
        return [pattern]
    head, items, tail = parts
    out: list[str] = []
    for item in items:
        out.extend(_expand(f"{head}{item}{tail}"))
    return out


def _range_items(pattern: str) -> tuple[str, list[str] | _Padded, str] | None:
    """(head, the first bracket's items, tail), or None when the pattern has no range left."""
    m = _RANGE_RE.fullmatch(pattern)
    if not m:
        return None
    head, beg, end, step, tail = m.groups()
    beg = beg or "0"
    shown = short_repr(pattern)
    step_n = _range_number(step) if step else 1
    if step_n is None or step_n < 1:
        raise ValueError(f"bad range step in {shown}: expected a positive integer")
    if not end:
        raise ValueError(f"bad range in {shown}: no end value")
    width = len(beg) if beg[0] == "0" and len(beg) > 1 else 0
    if width and len(end) != width:
        raise ValueError(f"bad range in {shown}: zero-padded start and end of different widths")
    if beg in string.ascii_letters and end in string.ascii_letters:
        lo, hi = string.ascii_letters.index(beg), string.ascii_letters.index(end)
        if hi < lo:
            raise ValueError(f"bad range in {shown}: the end comes before the start")
        return head, list(string.ascii_letters[lo : hi + 1 : step_n]), tail
    lo, hi = _range_number(beg), _range_number(end)
    if lo is None or hi is None:
        raise ValueError(f"bad range in {shown}: expected numbers of at most 18 digits or single letters")
    if hi < lo:
        raise ValueError(f"bad range in {shown}: the end comes before the start")
    return head, _Padded(range(lo, hi + 1, step_n), width), tail


def _range_number(text: str) -> int | None:
    """A range bound or step: ASCII digits (at most 18, never a number Python cannot print), or None."""
    text = text.strip()
    if not text or len(text) > 18 or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


class _Padded:
    """The items of a numeric range as strings zero-padded to ``width``, made as they are read."""

    def __init__(self, numbers: range, width: int):
        self.numbers, self.width = numbers, width

    def __len__(self) -> int:
        return len(self.numbers)

    def __iter__(self) -> Iterator[str]:
        return (str(n).zfill(self.width) for n in self.numbers)


@dataclass
class _Group:
    name: str
    vars: dict = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    # The same names as ``hosts``, for constant-time membership tests (``hosts`` keeps the order).
    host_set: set[str] = field(default_factory=set)
    children: list[str] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)
    priority: int = 1  # ansible_group_priority


@dataclass
class Inventory:
    groups: dict[str, list[str]]
    hostvars: dict[str, dict]
    notes: list[dict] = field(default_factory=list)  # warnings about what could not be read


class _Builder:
    def __init__(self, source: str):
        self.source = source
        self.groups: dict[str, _Group] = {"all": _Group("all"), "ungrouped": _Group("ungrouped")}
        self.host_order: list[str] = []
        self.host_seen: set[str] = set()
        self.host_vars: dict[str, dict] = {}
        self.expanded = 0  # hosts made from range patterns so far

    def group(self, name: str) -> _Group:
        g = self.groups.get(name)
        if g is None:
            g = self.groups[name] = _Group(name)
        return g

    def parse_group(self, name: Any, data: Any, depth: int = 0) -> None:
        if not isinstance(name, str):
            raise InventoryError(f"{self.source}: group name must be a string, found {short_repr(name)}")
        if depth > 100:
            raise InventoryError(f"{self.source}: groups nested more than 100 deep at {short_repr(name)}")
        group = self.group(name)
        if data is None:
            return
        if not isinstance(data, dict):
            raise InventoryError(
                f"{self.source}: group {short_repr(name)} must be a mapping, found {type(data).__name__}"
            )
        for key in data:
            if key not in ("vars", "children", "hosts"):
                raise InventoryError(
                    f"{self.source}: group {short_repr(name)}: unexpected key {short_repr(key)} "
                    "(only vars, children and hosts are valid)"
                )
        # In the order written, as Ansible does: it decides which inline value of a host listed
        # twice wins, and the order of hosts in their groups.
        for key, section in data.items():
            if isinstance(section, str):
                section = {section: None}  # `hosts: gpu01` is `hosts: {gpu01: }`, as in Ansible
            if section is None:
                continue
            if not isinstance(section, dict):
                raise InventoryError(f"{self.source}: {key} of group {short_repr(name)} must be a mapping")
            if key == "vars":
                self.set_group_vars(group, section)
            elif key == "hosts":
                self.parse_hosts(group, section)
            else:
                for child, cdata in section.items():
                    self.parse_group(child, cdata, depth + 1)
                    c = self.groups[child]
                    if child == name or self._is_ancestor(child, name):
                        raise InventoryError(f"{self.source}: group {short_repr(child)} cannot be a child of itself")
                    if child not in group.children:
                        group.children.append(child)
                    if name not in c.parents:
                        c.parents.append(name)

    def set_group_vars(self, group: _Group, gvars: dict) -> None:
        for key, value in gvars.items():
            if key == "ansible_group_priority":
                # Not a variable: Ansible orders groups of the same depth by it (default 1).
                # An integer, or what int() reads as one (Ansible's own conversion): a float must be finite.
                try:
                    group.priority = int(value)
                    if abs(group.priority) > 2**63:
                        raise ValueError(value)
                except (TypeError, ValueError, OverflowError):
                    raise InventoryError(
                        f"{self.source}: ansible_group_priority of group {short_repr(group.name)} must be an integer, "
                        f"found {short_repr(value)}"
                    ) from None
            else:
                group.vars[key] = value

    def parse_hosts(self, group: _Group, hosts: dict) -> None:
        for pattern, hvars in hosts.items():
            if not isinstance(pattern, str | int):
                raise InventoryError(f"{self.source}: host name in group {short_repr(group.name)} must be a string")
            if isinstance(pattern, str) and (pattern.startswith("[") or _PORT_RE.search(pattern)):
                raise NotReadDirectly(f"host {short_repr(pattern)} has a port or an IPv6 address")
            try:
                names = expand_hostname_range(str(pattern), limit=MAX_HOSTS - self.expanded)
            except RangeTooLarge as exc:
                raise InventoryError(
                    f"{self.source}: group {short_repr(group.name)}: {exc}, expected at most {MAX_HOSTS} hosts "
                    "from ranges in the whole inventory"
                ) from None
            except ValueError as exc:
                raise InventoryError(f"{self.source}: group {short_repr(group.name)}: {exc}") from None
            self.expanded += len(names)
            if hvars is not None and not isinstance(hvars, dict):
                raise InventoryError(f"{self.source}: vars of host {short_repr(str(pattern))} must be a mapping")
            for host in names:
                self.add_host(host, group)
                if hvars:
                    self.host_vars.setdefault(host, {}).update(hvars)

    def _is_ancestor(self, candidate: str, of: str) -> bool:
        todo, seen = [of], set()
        while todo:
            g = todo.pop()
            if g in seen:
                continue
            seen.add(g)
            for p in self.groups[g].parents:
                if p == candidate:
                    return True
                todo.append(p)
        return False

    def add_host(self, host: str, group: _Group) -> None:
        if host not in self.host_seen:
            self.host_seen.add(host)
            self.host_order.append(host)
        if host not in group.host_set:
            group.host_set.add(host)
            group.hosts.append(host)


def _topological(groups: dict[str, _Group]) -> list[str]:
    """Every group after all its parents (the builder refuses cycles), without recursion: a chain of
    thousands of groups is as deep as Python's stack is not."""
    pending = {name: len(g.parents) for name, g in groups.items()}
    ready = [name for name, n in pending.items() if n == 0]
    order: list[str] = []
    while ready:
        name = ready.pop()
        order.append(name)
        for c in groups[name].children:
            pending[c] -= 1
            if pending[c] == 0:
                ready.append(c)
    # A group left over would be on a cycle; none is, but it is not lost either.
    order.extend(name for name, n in pending.items() if n > 0)
    return order


def _depths(groups: dict[str, _Group], order: list[str]) -> dict[str, int]:
    # Ansible's depth: the longest path down from all; groups written at the top level are
    # children of all, as are those listed under all's children.
    depth: dict[str, int] = dict.fromkeys(groups, 1)
    depth["all"] = 0
    for name in order:
        d = depth[name]
        for c in groups[name].children:
            if c != "all" and depth[c] < d + 1:
                depth[c] = d + 1
    return depth


def _stat(path: str) -> os.stat_result | None:
    """The entry's stat (links followed), None when it does not exist; InventoryError when it cannot
    be looked at (a dangling link, a directory above it without search permission)."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise InventoryError(
                f"{path}: a link to nothing ({os.readlink(path)}), expected a variables file"
            ) from None
        return None
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _var_files(base: str, name: str, listing: set[str] | None = None) -> list[str]:
    """Files Ansible's host_group_vars plugin reads for ``name`` under ``base``.

    The first of ``name``, ``name.yml``, ``name.yaml``, ``name.json`` that exists, and only that
    one: a file, or a directory whose files are read in sorted order, recursing into
    subdirectories where they sort. ``listing``: the entries of ``base`` when the caller has them.
    What cannot be read is an error naming it, never skipped.
    """
    for ext in _VAR_EXTS:
        if listing is not None and name + ext not in listing:
            continue
        p = os.path.join(base, name + ext)
        st = _stat(p)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            return _dir_var_files(p)
        if not stat.S_ISREG(st.st_mode):
            raise InventoryError(f"{p}: is {file_kind(st.st_mode)}, expected a variables file (a regular file)")
        return [p]
    return []


def _dir_var_files(path: str, depth: int = 0) -> list[str]:
    if depth > 20:
        raise InventoryError(f"{path}: variables directories nested more than 20 deep (a link to a parent?)")
    try:
        entries = check_directory(path, "a variables directory")
    except InputError as exc:
        raise InventoryError(str(exc)) from None
    files = []
    for entry in entries:
        if entry.startswith(".") or entry.endswith("~"):
            continue
        ext = os.path.splitext(entry)[1]
        full = os.path.join(path, entry)
        st = _stat(full)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            if not ext:
                files.extend(_dir_var_files(full, depth + 1))
        elif ext in _VAR_EXTS:
            if not stat.S_ISREG(st.st_mode):
                raise InventoryError(f"{full}: is {file_kind(st.st_mode)}, expected a variables file (a regular file)")
            files.append(full)
    return files


def _listing(path: str) -> set[str] | None:
    """The entries of group_vars/ or host_vars/: None when there is none; InventoryError when it is
    there but cannot be listed (it is never skipped: its variables would be silently missing)."""
    st = _stat(path)
    if st is None:
        return None
    if not stat.S_ISDIR(st.st_mode):
        raise InventoryError(f"{path}: is {file_kind(st.st_mode)}, expected a directory of variables files")
    try:
        return set(check_directory(path, "a directory of variables files"))
    except InputError as exc:
        raise InventoryError(str(exc)) from None


def _load_var_files(
    base: str, name: str, notes: list[dict], host: str | None = None, listing: set[str] | None = None
) -> dict:
    merged: dict = {}
    for path in _var_files(base, name, listing):
        try:
            data = read_regular_file(path, "a variables file (YAML)")
        except InputError as exc:
            raise InventoryError(str(exc)) from None
        if data.startswith(b"$ANSIBLE_VAULT"):
            notes.append(
                violation(
                    "INPUT_VAULT_SKIPPED",
                    os.path.basename(path),
                    f"expected plain YAML, found a vault-encrypted file {path}: skipped (the playbook "
                    "form of preflight can read it)",
                    host=host,
                    severity=WARNING,
                )
            )
            continue
        data = load_yaml_text(data, path)
        if data is None:
            continue
        if not isinstance(data, dict):
            raise InventoryError(f"{path}: expected a mapping of variables, found {type(data).__name__}")
        merged.update(data)
    return merged


_UNREAD = object()


def load_inventory(path: str, data: Any = _UNREAD) -> Inventory:
    """Load a YAML inventory file, with group_vars/ and host_vars/ beside it.

    ``data``: the file's content when the caller has parsed it already (see :func:`load_yaml_file`).
    Raises :class:`InventoryError` for what Ansible cannot read either, :class:`NotReadDirectly`
    for what Ansible reads but this reader does not reproduce.
    """
    if data is _UNREAD:
        data = load_yaml_file(path)
    with _gc_paused():
        return _build_inventory(path, data)


def _build_inventory(path: str, data: Any) -> Inventory:
    b = _Builder(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InventoryError(f"{path}: expected a YAML inventory (a mapping of groups), found {type(data).__name__}")
    if data.get("plugin"):
        raise NotReadDirectly(f"a config of the inventory plugin {short_repr(data['plugin'], 80)}")
    for name, gdata in data.items():
        b.parse_group(name, gdata)
    groups = b.groups
    # Hosts directly in all, or in no group but all → ungrouped (as Ansible does).
    in_group = {h for name, g in groups.items() if name not in ("all", "ungrouped") for h in g.hosts}
    ungrouped = groups["ungrouped"]
    for h in b.host_order:
        if h not in in_group and h not in ungrouped.host_set:
            ungrouped.host_set.add(h)
            ungrouped.hosts.append(h)
    groups["all"].hosts = list(b.host_order)

    topo = _topological(groups)
    depth = _depths(groups, topo)
    order = sorted((g for g in groups if g != "all"), key=lambda g: (depth[g], groups[g].priority, g))

    # Descendant host lists (Ansible's groups[g] includes hosts of child groups), children first.
    resolved: dict[str, list[str]] = {}
    for name in reversed(topo):
        seen = dict.fromkeys(groups[name].hosts)
        for c in groups[name].children:
            seen.update(dict.fromkeys(resolved.get(c, ())))
        resolved[name] = list(seen)

    out_groups = {"all": list(b.host_order)}
    for g in order:
        out_groups[g] = resolved[g]

    # Group membership per host, as an ordered list following `order`.
    memberships: dict[str, list[str]] = {h: [] for h in b.host_order}
    for g in order:
        for h in out_groups[g]:
            memberships[h].append(g)

    base = os.path.dirname(os.path.abspath(path))
    notes: list[dict] = []
    gv_dir, hv_dir = os.path.join(base, "group_vars"), os.path.join(base, "host_vars")
    gv_listing = _listing(gv_dir)
    file_gvars = (
        {g: _load_var_files(gv_dir, g, notes, listing=gv_listing) for g in ["all", *order]}
        if gv_listing is not None
        else {}
    )

    # Hosts sharing the same groups share the merged group layer: compute it once per group set.
    layer_cache: dict[tuple[str, ...], dict] = {}
    hostvars: dict[str, dict] = {}
    # One listing of host_vars/ instead of several stat calls per host.
    hv_listing = _listing(hv_dir) or set()
    hv_names = {os.path.splitext(e)[0] if os.path.splitext(e)[1] in _VAR_EXTS else e for e in hv_listing}
    for h in b.host_order:
        key = tuple(memberships[h])
        layer = layer_cache.get(key)
        if layer is None:
            # Ansible's default VARIABLE_PRECEDENCE: all_inventory, groups_inventory,
            # all_plugins_inventory (group_vars/all), groups_plugins_inventory.
            layer = dict(groups["all"].vars)
            for g in key:
                layer.update(groups[g].vars)
            layer.update(file_gvars.get("all", {}))
            for g in key:
                layer.update(file_gvars.get(g, {}))
            layer_cache[key] = layer
        hv = dict(layer)
        hv.update(b.host_vars.get(h, {}))
        if h in hv_names:
            hv.update(_load_var_files(hv_dir, h, notes, host=h, listing=hv_listing))
        hostvars[h] = hv
    for h, hv in hostvars.items():
        if any(v == VAULT_PLACEHOLDER for v in hv.values()):
            notes.append(vault_skipped(h))
    return Inventory(out_groups, hostvars, notes)


__all__ = [
    "VAULT_PLACEHOLDER",
    "Inventory",
    "InventoryError",
    "NotReadDirectly",
    "expand_hostname_range",
    "load_inventory",
    "load_yaml_file",
    "load_yaml_text",
]
