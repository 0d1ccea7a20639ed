# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Generate an inventory (hosts.yml) from a rack sheet and the brief's networks (controller only).

Used by ``gpufleet inventory generate``. Everything here is pure: text and dicts in, dicts and text
out; the CLI reads and writes the files.

The rack sheet is CSV with a header row; :data:`SHEET_COLUMNS` lists the columns (only
``hostname`` and ``group`` are required; an empty address cell means "allocate one").

Addresses are allocated per network (management → ``ansible_host``, BMC → ``bmc_ip``, storage →
``storage_ip``, fabric rail *i* → ``fabric_ips[i]``), deterministically and independently of the
order of the rows:

1. an address written in the sheet is used as is (checked: inside the network, not reserved,
   not used twice);
2. otherwise a host that the previous hosts.yml already holds keeps its address there
   (``existing``): regenerating never renumbers a host;
3. otherwise the host's *slot* is tried: ``base(group) + key``, where ``key`` is the ``index``
   column or the last number in the host name (gpu017 → 17) and ``base`` is 9 for the
   controllers group (ctl01 → .10) and 100 * (n + 1) for the pool pools[n] (gpu017 → .117),
   overridable per group. The slot is the same offset in every network, so gpu017 is .117 on
   management, BMC, storage and every rail when the networks are large enough;
4. what is left (no key, slot taken or outside the network) takes the highest free address,
   counting down from the top of the network, away from the slots, so a row added later
   with a key rarely finds its slot taken.

Hosts are ordered by group (controllers, then pools in brief order) and by host name with numbers
compared as numbers, so the same sheet and brief always give byte-identical YAML.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

try:  # netaddr is a controller-side dependency (requirements.in).
    import netaddr
except ImportError:  # pragma: no cover - the venv always has it
    netaddr = None

# column -> what it holds (docs/cli.md repeats this table)
SHEET_COLUMNS: dict[str, str] = {
    "hostname": "inventory host name (required, unique, an RFC 1123 label)",
    "group": "inventory group: the brief's controllers.group or one of its pools[].group (required)",
    "rack": "rack name, written as host variable rack",
    "leaf_switch": "leaf / top-of-rack switch, written as host variable leaf_switch",
    "index": "the host's slot key (integer >= 0); default: the last number in the host name",
    "mgmt_ip": "management address (ansible_host); empty: allocated from networks.management",
    "mgmt_mac": "management NIC MAC address, written as host variable mgmt_mac (for DHCP / PXE)",
    "bmc_ip": "BMC address (bmc_ip); empty: allocated from networks.bmc",
    "bmc_mac": "BMC MAC address, written as host variable bmc_mac",
    "storage_ip": "storage address (storage_ip); empty: allocated from networks.storage when the brief has one",
    "serial": "chassis serial number, written as host variable serial",
}
REQUIRED_COLUMNS = ("hostname", "group")
CONTROLLER_BASE = 9
POOL_BASE_STEP = 100
MAX_ROWS = 100_000
# Host variables in the order they are written (fabric_ips last: it is the long line).
_VAR_ORDER = ("ansible_host", "bmc_ip", "storage_ip", "rack", "leaf_switch", "mgmt_mac", "bmc_mac", "serial")
_PLAIN_VARS = ("rack", "leaf_switch", "serial")
_HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_LAST_NUMBER_RE = re.compile(r"([0-9]+)(?!.*[0-9])")


@dataclass(frozen=True)
class Problem:
    """Something that stops the generation. ``line`` is the sheet's line (header = 1), None when brief-wide."""

    line: int | None
    column: str
    message: str

    def text(self, source: str = "racks") -> str:
        where = f"{source}:{self.line}" if self.line is not None else "brief"
        return f"{where}: {self.column}: {self.message}"


@dataclass(frozen=True)
class Row:
    line: int
    values: dict[str, str]

    @property
    def hostname(self) -> str:
        return self.values.get("hostname", "")

    @property
    def group(self) -> str:
        return self.values.get("group", "")

    def get(self, column: str) -> str:
        return self.values.get(column, "")


@dataclass(frozen=True)
class Network:
    """One network addresses are taken from; offsets are relative to the network address."""

    name: str  # "management", "bmc", "storage", "fabric.rails[0]"
    var: str  # the host variable: ansible_host, bmc_ip, storage_ip, fabric_ips[0]
    cidr: str
    first: int
    size: int
    version: int
    reserved: frozenset[int]  # offsets never given to a host: network, broadcast, gateway

    @property
    def lo(self) -> int:
        return 1 if self.version == 4 and self.size > 2 else 0

    @property
    def hi(self) -> int:
        return self.size - 2 if self.version == 4 and self.size > 2 else self.size - 1

    def offset_of(self, text: str) -> int | None:
        """Offset of ``text`` in this network; None when it is not an address of it."""
        try:
            addr = netaddr.IPAddress(text)
        except (netaddr.AddrFormatError, ValueError, TypeError):
            return None
        if addr.version != self.version or not self.first <= int(addr) < self.first + self.size:
            return None
        return int(addr) - self.first

    def usable(self, offset: int) -> bool:
        return self.lo <= offset <= self.hi and offset not in self.reserved

    def address(self, offset: int) -> str:
        return str(netaddr.IPAddress(self.first + offset, self.version))


@dataclass
class Generated:
    groups: list[tuple[str, list[str]]] = field(default_factory=list)  # group -> hosts, in output order
    hostvars: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"sheet": 0, "kept": 0, "slot": 0, "free": 0})

    @property
    def hosts(self) -> int:
        return len(self.hostvars)


# --- the sheet -----------------------------------------------------------------------------------


def parse_sheet(text: str) -> tuple[list[Row], list[Problem]]:
    """Rows of the rack sheet. Blank lines and lines starting with ``#`` are skipped."""
    problems: list[Problem] = []
    text = text.removeprefix("\ufeff")
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1)]
    data = [(n, line) for n, line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not data:
        return [], [Problem(None, "(header)", f"expected a CSV header row ({','.join(SHEET_COLUMNS)}), found none")]
    try:
        parsed = [(n, next(csv.reader([line]))) for n, line in data[: MAX_ROWS + 1]]
    except csv.Error as exc:
        return [], [Problem(None, "(csv)", f"cannot parse the sheet as CSV: {exc}")]
    header_line, header = parsed[0]
    columns = [c.strip().lower() for c in header]
    for c in REQUIRED_COLUMNS:
        if c not in columns:
            problems.append(Problem(header_line, c, f"expected a {c!r} column, found columns {','.join(columns)}"))
    for c in columns:
        if c not in SHEET_COLUMNS:
            problems.append(
                Problem(header_line, c or "(empty)", f"unknown column: expected some of {', '.join(SHEET_COLUMNS)}")
            )
    dups = sorted({c for c in columns if columns.count(c) > 1})
    for c in dups:
        problems.append(Problem(header_line, c, "column given twice"))
    if len(data) > MAX_ROWS + 1:
        problems.append(Problem(None, "(rows)", f"expected at most {MAX_ROWS} rows, found {len(data) - 1}"))
    if problems:
        return [], problems
    rows: list[Row] = []
    for n, cells in parsed[1:]:
        if len(cells) > len(columns) and any(c.strip() for c in cells[len(columns) :]):
            problems.append(Problem(n, "(row)", f"expected {len(columns)} cells, found {len(cells)}"))
            continue
        values = {col: (cells[i].strip() if i < len(cells) else "") for i, col in enumerate(columns)}
        rows.append(Row(n, values))
    return rows, problems


# --- the brief's networks --------------------------------------------------------------------------


def _network(name: str, var: str, spec: Any, problems: list[Problem]) -> Network | None:
    if not isinstance(spec, Mapping) or spec.get("cidr") is None:
        return None
    cidr = spec.get("cidr")
    try:
        if not isinstance(cidr, str) or "/" not in cidr:
            raise ValueError("no prefix length")
        net = netaddr.IPNetwork(cidr.strip())
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        problems.append(Problem(None, f"networks.{name}.cidr", f"expected a network such as 10.20.0.0/22 ({exc})"))
        return None
    first = int(net.network)
    reserved: set[int] = set()
    if net.version == 4 and net.size > 2:
        reserved |= {0, net.size - 1}
    gateway = spec.get("gateway")
    if isinstance(gateway, str):
        try:
            g = int(netaddr.IPAddress(gateway))
            if first <= g < first + net.size:
                reserved.add(g - first)
        except (netaddr.AddrFormatError, ValueError, TypeError, IndexError):
            pass  # preflight reports a bad gateway
    return Network(name, var, str(net.cidr), first, int(net.size), net.version, frozenset(reserved))


def brief_networks(brief: Mapping) -> tuple[dict[str, Network], list[Network], list[Problem]]:
    """(management/bmc/storage networks by name, fabric rails, problems) from a clean brief."""
    problems: list[Problem] = []
    nets = brief.get("networks") or {}
    singles: dict[str, Network] = {}
    for name, var in (("management", "ansible_host"), ("bmc", "bmc_ip"), ("storage", "storage_ip")):
        n = _network(name, var, nets.get(name), problems)
        if n is not None:
            singles[name] = n
    if "management" not in singles and not any(p.column.startswith("networks.management") for p in problems):
        problems.append(Problem(None, "networks.management.cidr", "expected the management network, found none"))
    fabric = nets.get("fabric") or {}
    rails: list[Network] = []
    if fabric.get("type") not in (None, "none"):
        for r, spec in enumerate(fabric.get("rails") or []):
            n = _network(f"fabric.rails[{r}]", f"fabric_ips[{r}]", spec, problems)
            if n is None:
                break  # rails after a missing one cannot be numbered; preflight says why
            rails.append(n)
    return singles, rails, problems


# --- allocation ------------------------------------------------------------------------------------


def natural_key(name: str) -> tuple:
    """gpu2 before gpu10: runs of ASCII digits compared as numbers (by length without leading zeros,
    then digit by digit: no int(), whatever their length)."""
    return tuple(
        (0, len(p.lstrip("0")), p.lstrip("0"), p) if p.isdigit() else (1, 0, "", p)
        for p in re.split(r"([0-9]+)", name)
        if p
    )


# An index (the sheet's column, or a host name's last number) of more digits than this is no slot.
MAX_INDEX_DIGITS = 9


def is_index(text: str) -> bool:
    """Whether a sheet cell is an index: ASCII digits only (``str.isdigit`` is true for "²"), at most 9."""
    return bool(text) and len(text) <= MAX_INDEX_DIGITS and text.isascii() and text.isdigit()


def host_key(row: Row) -> int | None:
    """The ``index`` column, else the last number in the host name, else None."""
    index = row.get("index")
    if index:
        return int(index) if is_index(index) else None
    m = _LAST_NUMBER_RE.search(row.hostname)
    return int(m.group(1)) if m and is_index(m.group(1)) else None


@dataclass
class _Request:
    host: str
    line: int
    slot: int | None
    explicit: str | None
    existing: str | None


def allocate(network: Network, requests: list[_Request], counts: dict[str, int]) -> tuple[dict[str, str], list, list]:
    """Addresses for ``requests`` (already in output order): {host: address}, problems, notes."""
    problems: list[Problem] = []
    notes: list[str] = []
    taken: dict[int, str] = {}
    got: dict[str, int] = {}
    explicit_line: dict[int, int] = {}
    column = {"ansible_host": "mgmt_ip"}.get(network.var, network.var)
    for req in requests:  # 1. written in the sheet
        if req.explicit is None:
            continue
        off = network.offset_of(req.explicit)
        if off is None:
            problems.append(
                Problem(
                    req.line,
                    column,
                    f"expected an address in networks.{network.name} {network.cidr}, found {req.explicit!r}",
                )
            )
            got[req.host] = -1
        elif not network.usable(off):
            problems.append(
                Problem(
                    req.line,
                    column,
                    f"{req.explicit} is a reserved address of {network.cidr} (network, broadcast or gateway)",
                )
            )
            got[req.host] = -1
        elif off in taken:
            problems.append(
                Problem(req.line, column, f"{req.explicit} is also given to {taken[off]} on line {explicit_line[off]}")
            )
            got[req.host] = -1
        else:
            taken[off], got[req.host], explicit_line[off] = req.host, off, req.line
            counts["sheet"] += 1
    for req in requests:  # 2. kept from the previous hosts.yml
        if req.host in got or req.existing is None:
            continue
        off = network.offset_of(req.existing)
        if off is not None and network.usable(off) and off not in taken:
            taken[off], got[req.host] = req.host, off
            counts["kept"] += 1
        else:
            why = (
                "taken by " + taken[off]
                if off is not None and off in taken
                else f"not a host address of {network.cidr}"
            )
            notes.append(f"{req.host}: {network.var} {req.existing} from the previous hosts.yml is {why}: re-allocated")
    for req in requests:  # 3. the slot
        if req.host in got or req.slot is None:
            continue
        if network.usable(req.slot) and req.slot not in taken:
            taken[req.slot], got[req.host] = req.host, req.slot
            counts["slot"] += 1
    cursor = network.hi
    for req in requests:  # 4. the highest free address
        if req.host in got:
            continue
        while cursor >= network.lo and (cursor in taken or not network.usable(cursor)):
            cursor -= 1
        if cursor < network.lo:
            problems.append(
                Problem(
                    req.line,
                    column,
                    f"networks.{network.name} {network.cidr} is full: no address left for "
                    f"{req.host} ({len(taken)} taken)",
                )
            )
            got[req.host] = -1
            continue
        if req.slot is not None:
            owner = taken.get(req.slot)
            where = f"taken by {owner}" if owner else f"outside {network.cidr}"
            notes.append(
                f"{req.host}: slot {req.slot} of networks.{network.name} is {where}: {network.var} "
                f"{network.address(cursor)} instead"
            )
        taken[cursor], got[req.host] = req.host, cursor
        counts["free"] += 1
        cursor -= 1
    return {h: network.address(o) for h, o in got.items() if o >= 0}, problems, notes


def parse_bases(items: list[str] | tuple[str, ...]) -> dict[str, int]:
    """``["gpu_h200=500"]`` → ``{"gpu_h200": 500}``; ValueError names the bad item."""
    out: dict[str, int] = {}
    for item in items:
        group, sep, value = item.partition("=")
        if not sep or not group.strip() or not is_index(value.strip()):
            raise ValueError(
                f"expected GROUP=N (N an integer >= 0 of at most {MAX_INDEX_DIGITS} digits), found {item[:60]!r}"
            )
        out[group.strip()] = int(value)
    return out


def _check_rows(rows: list[Row], group_order: list[str]) -> list[Problem]:
    problems: list[Problem] = []
    first_line: dict[str, int] = {}
    macs: dict[tuple[str, str], int] = {}
    for row in rows:
        name = row.hostname
        if not name:
            problems.append(Problem(row.line, "hostname", "expected a host name, found an empty cell"))
        elif not _HOST_RE.fullmatch(name):
            problems.append(
                Problem(row.line, "hostname", f"expected an RFC 1123 label (letters, digits, '-'), found {name!r}")
            )
        elif name.lower() in first_line:
            problems.append(
                Problem(
                    row.line, "hostname", f"duplicate host name {name!r} (first on line {first_line[name.lower()]})"
                )
            )
        else:
            first_line[name.lower()] = row.line
        if not row.group:
            problems.append(Problem(row.line, "group", "expected a group, found an empty cell"))
        elif row.group not in group_order:
            problems.append(
                Problem(
                    row.line,
                    "group",
                    f"group {row.group!r} is not in the brief: expected one of {', '.join(group_order) or '(none)'}",
                )
            )
        index = row.get("index")
        if index and not is_index(index):
            problems.append(
                Problem(
                    row.line,
                    "index",
                    f"expected an integer >= 0 of at most {MAX_INDEX_DIGITS} digits, found {index[:40]!r}"
                    + ("..." if len(index) > 40 else ""),
                )
            )
        for col in ("mgmt_mac", "bmc_mac"):
            mac = row.get(col)
            if not mac:
                continue
            # netaddr takes "10.20.4.101" for a number and fails to print it (IndexError).
            try:
                norm = str(netaddr.EUI(mac, dialect=netaddr.mac_unix_expanded))
            except (netaddr.AddrFormatError, ValueError, TypeError, IndexError):
                problems.append(
                    Problem(row.line, col, f"expected a MAC address such as 3c:fd:fe:00:00:01, found {mac!r}")
                )
                continue
            if (col, norm) in macs:
                problems.append(Problem(row.line, col, f"duplicate MAC {norm} (first on line {macs[(col, norm)]})"))
            else:
                macs[(col, norm)] = row.line
    return problems


def _group_order(brief: Mapping) -> tuple[list[str], dict[str, int], dict[str, dict]]:
    """Groups in output order, their default bases, and each pool group's pool."""
    order: list[str] = []
    bases: dict[str, int] = {}
    pools: dict[str, dict] = {}
    ctl = (brief.get("controllers") or {}).get("group")
    if isinstance(ctl, str):
        order.append(ctl)
        bases[ctl] = CONTROLLER_BASE
    for n, pool in enumerate(brief.get("pools") or []):
        group = pool.get("group") if isinstance(pool, Mapping) else None
        if isinstance(group, str) and group not in bases:
            order.append(group)
            bases[group] = POOL_BASE_STEP * (n + 1)
            pools[group] = pool
    return order, bases, pools


def _existing_value(existing: Mapping[str, Mapping], host: str, var: str) -> str | None:
    hv = existing.get(host)
    if not isinstance(hv, Mapping):
        return None
    if var.startswith("fabric_ips["):
        fips = hv.get("fabric_ips")
        r = int(var[len("fabric_ips[") : -1])
        value = fips[r] if isinstance(fips, list | tuple) and r < len(fips) else None
    else:
        value = hv.get(var)
    return value if isinstance(value, str) else None


def generate(
    brief: Mapping,
    rows: list[Row],
    existing: Mapping[str, Mapping] | None = None,
    bases: Mapping[str, int] | None = None,
) -> Generated:
    """The inventory for ``rows`` under ``brief`` (a clean brief: ``brief_schema.validate``'s second value).

    ``existing``: host → variables of the previous hosts.yml (addresses kept); ``bases``: slot base per
    group, overriding the defaults. Nothing is returned but problems when there are any.
    """
    existing = existing or {}
    result = Generated()
    singles, rails, problems = brief_networks(brief)
    order, default_bases, pools = _group_order(brief)
    for group in bases or {}:
        if group not in default_bases:
            problems.append(
                Problem(None, "--base", f"group {group!r} is not in the brief: expected one of {', '.join(order)}")
            )
    base_of = {**default_bases, **(bases or {})}
    row_problems = _check_rows(rows, order)
    problems += row_problems
    # Rows with a problem are left out of the allocation, which still runs so that every problem
    # (a full network included) is reported at once.
    bad = {p.line for p in row_problems}
    rank = {g: i for i, g in enumerate(order)}
    ordered = sorted((r for r in rows if r.line not in bad), key=lambda r: (rank[r.group], natural_key(r.hostname)))
    fabric = (brief.get("networks") or {}).get("fabric") or {}
    nics_of = {
        g: (int(p.get("nics_per_node") or 0) if fabric.get("type") not in (None, "none") else 0)
        for g, p in pools.items()
    }
    sheet_col = {"management": "mgmt_ip", "bmc": "bmc_ip", "storage": "storage_ip"}
    assigned: dict[str, dict[str, str]] = {r.hostname: {} for r in ordered}
    for network in [*singles.values(), *rails]:
        reqs: list[_Request] = []
        for row in ordered:
            if network.var.startswith("fabric_ips["):
                r = int(network.var[len("fabric_ips[") : -1])
                if r >= nics_of.get(row.group, 0):
                    continue
            key = host_key(row)
            reqs.append(
                _Request(
                    host=row.hostname,
                    line=row.line,
                    slot=None if key is None else base_of[row.group] + key,
                    explicit=(row.get(sheet_col[network.name]) or None) if network.name in sheet_col else None,
                    existing=_existing_value(existing, row.hostname, network.var),
                )
            )
        got, probs, notes = allocate(network, reqs, result.counts)
        problems += probs
        result.notes += notes
        for host, addr in got.items():
            assigned[host][network.var] = addr
    # Addresses written in the sheet for networks the brief does not have are kept as they are.
    var_of = {"management": "ansible_host", "bmc": "bmc_ip", "storage": "storage_ip"}
    for row in ordered:
        for name, col in sheet_col.items():
            if name not in singles and row.get(col):
                assigned[row.hostname][var_of[name]] = row.get(col)
    if problems:
        result.problems = sorted(problems, key=lambda p: (p.line or 0, p.column))
        return result

    for group in order:
        members = [r for r in ordered if r.group == group]
        if members:
            result.groups.append((group, [r.hostname for r in members]))
    for row in ordered:
        a = assigned[row.hostname]
        hv: dict[str, Any] = {}
        for var in _VAR_ORDER:
            if var in a:
                hv[var] = a[var]
            elif var in _PLAIN_VARS and row.get(var):
                hv[var] = row.get(var)
            elif var in ("mgmt_mac", "bmc_mac") and row.get(var):
                hv[var] = str(netaddr.EUI(row.get(var), dialect=netaddr.mac_unix_expanded))
        fips = [a[f"fabric_ips[{r}]"] for r in range(len(rails)) if f"fabric_ips[{r}]" in a]
        if fips:
            hv["fabric_ips"] = fips
        result.hostvars[row.hostname] = hv
    return result


# --- YAML --------------------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    """A YAML scalar that reads back as the same string (quoted only when it must be)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, allow_unicode=False)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def render_hosts_yml(gen: Generated, sources: tuple[str, str] = ("racks.csv", "brief.yml")) -> str:
    """hosts.yml in the shape of the shared example (fabric_ips as a flow list). Deterministic."""
    lines = [
        f"# Generated by `gpufleet inventory generate` from {sources[0]} and {sources[1]}.",
        "# Edit the rack sheet and generate again rather than this file: hosts already here keep",
        "# their addresses. Host-specific variables belong in host_vars/<host>.yml.",
        "all:",
        "  children:",
    ]
    for group, hosts in gen.groups:
        lines += [f"    {_scalar(group)}:", "      hosts:"]
        for host in hosts:
            lines.append(f"        {_scalar(host)}:")
            for var, value in gen.hostvars[host].items():
                if isinstance(value, list):
                    lines.append(f"          {var}: [{', '.join(_scalar(v) for v in value)}]")
                else:
                    lines.append(f"          {var}: {_scalar(value)}")
    return "\n".join(lines) + "\n"


__all__ = [
    "REQUIRED_COLUMNS",
    "SHEET_COLUMNS",
    "Generated",
    "Network",
    "Problem",
    "Row",
    "allocate",
    "brief_networks",
    "generate",
    "host_key",
    "natural_key",
    "parse_bases",
    "parse_sheet",
    "render_hosts_yml",
]
