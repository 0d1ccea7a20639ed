# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""A host firewall (nftables) rendered from the inventory, and read back from ``nft -j``.

The firewall is one table, ``inet gpufleet``, replaced as a whole each time it is loaded
(``table``; ``delete table``; ``table { ... }``), so other tables (Kubernetes, container
networks) are left alone. Its shape:

- ``input`` (policy drop): loopback, established/related, ICMP; the management ports from
  the management sources (``mgmt4``/``mgmt6`` sets); the cluster ports from the cluster's
  members (``members4``/``members6``); on the fabric interfaces, everything from the rails'
  networks (``fabric4``/``fabric6``) when the fabric is trusted.
- ``forward`` (policy from the spec): nothing routed from a fabric interface to another
  interface, nor into one.
- ``output``: accept, or, when egress is restricted, loopback, established, the cluster,
  the management sources, the fabric and the allow-list only.

:func:`firewall_violations` lists every problem of a spec at once (empty = valid);
:func:`firewall_plan` normalises a spec (or raises :class:`FirewallSpecError` listing them);
:func:`firewall_nft` renders the plan as an nftables script; :func:`firewall_expected` gives
the summary of the table that script loads, and :func:`nft_table_summary` the same summary of
a table read back with ``nft -j list table inet gpufleet``: after a load, the two are equal.
Pure functions: no I/O.
"""

from __future__ import annotations

import ipaddress
import json
import re
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import format_text, violation

TABLE = "gpufleet"
PROTOS = ("tcp", "udp")
POLICIES = ("accept", "drop")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$")
_IFNAME_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}\*?$")
_PORT_RE = re.compile(r"^([0-9]{1,5})(?:-([0-9]{1,5}))?$")
SPEC_KEYS = (
    "host",
    "management_sources",
    "management_ports",
    "members",
    "member_ports",
    "fabric_interfaces",
    "fabric_sources",
    "fabric_trusted",
    "forward_policy",
    "egress_restrict",
    "egress_allow",
)


class FirewallSpecError(ValueError):
    """The spec cannot be rendered; ``violations`` holds every reason."""

    def __init__(self, violations: list[dict]):
        self.violations = violations
        super().__init__(format_text(violations))


def _port(value: Any) -> tuple[int, int] | None:
    """22 or "60001-63000" -> (low, high); None when invalid."""
    if isinstance(value, bool):
        return None
    m = _PORT_RE.fullmatch(str(value).strip())
    if not m:
        return None
    low = int(m.group(1))
    high = int(m.group(2)) if m.group(2) else low
    if not 1 <= low <= high <= 65535:
        return None
    return low, high


def _port_text(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _networks(host: str, field: str, values: Any, out: list[dict]) -> list:
    nets = []
    if not isinstance(values, list):
        out.append(
            violation(
                "FIREWALL_SOURCES_INVALID", field, f"expected a list of addresses or CIDRs, found {values!r}", host
            )
        )
        return nets
    for i, value in enumerate(values):
        try:
            nets.append(ipaddress.ip_network(str(value).strip(), strict=False))
        except ValueError:
            out.append(
                violation(
                    "FIREWALL_ADDRESS_INVALID",
                    f"{field}[{i}]",
                    f"expected an IP address or CIDR (10.0.0.0/24), found {value!r}",
                    host,
                )
            )
    return nets


def _collapse(nets: list, version: int) -> list[str]:
    """Sorted, unique, without networks inside another listed one (nft refuses overlaps).

    Neighbours are not merged, so a host address stays readable as itself."""
    same = sorted({n for n in nets if n.version == version})
    kept = [n for n in same if not any(o != n and n.subnet_of(o) for o in same)]
    return [str(n) for n in kept]


def _ports(host: str, field: str, entries: Any, out: list[dict], need_dest: bool = False) -> list[dict]:
    ports: list[dict] = []
    if not isinstance(entries, list):
        out.append(
            violation(
                "FIREWALL_PORTS_INVALID", field, f"expected a list of {{name, port, proto}}, found {entries!r}", host
            )
        )
        return ports
    for i, entry in enumerate(entries):
        where = f"{field}[{i}]"
        if not isinstance(entry, dict):
            out.append(
                violation(
                    "FIREWALL_PORT_INVALID", where, f"expected a mapping {{name, port, proto}}, found {entry!r}", host
                )
            )
            continue
        name = str(entry.get("name", ""))
        if not _NAME_RE.fullmatch(name):
            out.append(
                violation(
                    "FIREWALL_PORT_INVALID",
                    f"{where}.name",
                    f"expected a short name ([A-Za-z0-9_.-]), found {name!r}",
                    host,
                )
            )
        proto = entry.get("proto", "tcp")
        if proto not in PROTOS:
            out.append(
                violation(
                    "FIREWALL_PORT_INVALID", f"{where}.proto", f"expected one of {list(PROTOS)}, found {proto!r}", host
                )
            )
        rng = None
        if entry.get("port") is None and need_dest:
            rng = (0, 0)  # any port
        else:
            rng = _port(entry.get("port"))
            if rng is None:
                out.append(
                    violation(
                        "FIREWALL_PORT_INVALID",
                        f"{where}.port",
                        f"expected a port 1-65535 or a range low-high (60001-63000), found {entry.get('port')!r}",
                        host,
                    )
                )
        dest: list = []
        if need_dest:
            dest = _networks(host, f"{where}.dest", entry.get("dest", []), out)
            if not dest and isinstance(entry.get("dest", []), list):
                out.append(
                    violation("FIREWALL_EGRESS_INVALID", f"{where}.dest", "expected at least one address or CIDR", host)
                )
        if rng is not None and proto in PROTOS and _NAME_RE.fullmatch(name):
            item = {"name": name, "proto": proto, "port": "" if rng == (0, 0) else _port_text(*rng)}
            if need_dest:
                item["dest4"] = _collapse(dest, 4)
                item["dest6"] = _collapse(dest, 6)
            ports.append(item)
    return ports


def _parsed_networks(cidrs: Any) -> list:
    """The networks of ``cidrs`` that parse (the firewall's checks report the others)."""
    nets = []
    for c in cidrs or []:
        try:
            nets.append(ipaddress.ip_network(str(c), strict=False))
        except ValueError:
            continue
    return nets


def _interface_addresses(interfaces: Any) -> list[tuple[str, str]]:
    """(interface, IPv4 address) pairs of ``ip -j -4 address show`` output or of gathered ``ansible_facts``.

    ``ip`` lists every address of an interface; the facts give its primary IPv4 address and the
    secondaries (``ipv4_secondaries``).
    """
    pairs: list[tuple[str, str]] = []
    if isinstance(interfaces, list):
        for link in interfaces:
            if not isinstance(link, dict) or not link.get("ifname"):
                continue
            for info in link.get("addr_info") or []:
                if isinstance(info, dict) and info.get("family") == "inet" and info.get("local"):
                    pairs.append((str(link["ifname"]), str(info["local"])))
        return pairs
    if isinstance(interfaces, dict):
        for name in interfaces.get("interfaces") or []:
            info = interfaces.get(str(name).replace("-", "_").replace(".", "_")) or {}
            if not isinstance(info, dict):
                continue
            for entry in [info.get("ipv4") or {}, *(info.get("ipv4_secondaries") or [])]:
                if isinstance(entry, dict) and entry.get("address"):
                    pairs.append((str(name), str(entry["address"])))
    return pairs


def interfaces_in_networks(interfaces: Any, cidrs: Any) -> list[str]:
    """The interfaces with an IPv4 address in one of ``cidrs``, sorted, each once.

    ``interfaces`` is the parsed JSON of ``ip -j -4 address show`` (a list of links), or gathered
    ``ansible_facts`` (a dict). One pass in Python: the same walk in Jinja with a network test per
    interface costs seconds per host.
    """
    if not cidrs:
        return []
    nets = _parsed_networks(cidrs)
    found = set()
    for name, address in _interface_addresses(interfaces):
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            continue
        if any(ip.version == n.version and ip in n for n in nets):
            found.add(name)
    return sorted(found)


def address_in_networks(address: Any, cidrs: Any) -> bool:
    """Whether ``address`` (an IP address) lies in one of ``cidrs``; False for anything not an address.

    Malformed CIDRs are skipped (the firewall's checks report them).
    """
    try:
        ip = ipaddress.ip_address(str(address).strip())
    except ValueError:
        return False
    return any(ip.version == n.version and ip in n for n in _parsed_networks(cidrs))


def firewall_violations(spec: Any) -> list[dict]:
    """Every problem of a firewall spec, at once; empty when it can be rendered."""
    out: list[dict] = []
    _plan(spec, out)
    return out


def firewall_plan(spec: Any) -> dict:
    """The spec, checked and normalised (addresses collapsed per family, ports as text)."""
    out: list[dict] = []
    plan = _plan(spec, out)
    if out:
        raise FirewallSpecError(out)
    return plan


def _plan(spec: Any, out: list[dict]) -> dict:
    if not isinstance(spec, dict):
        out.append(violation("FIREWALL_SPEC_INVALID", "spec", f"expected a mapping, found {type(spec).__name__}"))
        return {}
    host = str(spec.get("host") or "") or None
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        out.append(
            violation(
                "FIREWALL_SPEC_INVALID", "spec", f"unknown keys {unknown}; expected some of {list(SPEC_KEYS)}", host
            )
        )
    mgmt = _networks(host, "firewall_management_sources", spec.get("management_sources", []), out)
    if spec.get("management_sources", []) == []:
        out.append(
            violation(
                "FIREWALL_NO_MANAGEMENT",
                "firewall_management_sources",
                "expected at least one source (the management network): without one, SSH is closed to all",
                host,
            )
        )
    members = _networks(host, "firewall_members", spec.get("members", []), out)
    fabric = _networks(host, "firewall_fabric_sources", spec.get("fabric_sources", []), out)
    mports = _ports(host, "firewall_management_ports", spec.get("management_ports", []), out)
    cports = _ports(host, "firewall_member_ports", spec.get("member_ports", []), out)
    egress = _ports(host, "firewall_egress_allow", spec.get("egress_allow", []), out, need_dest=True)
    ifaces = spec.get("fabric_interfaces", [])
    if not isinstance(ifaces, list) or not all(isinstance(i, str) and _IFNAME_RE.fullmatch(i) for i in ifaces):
        out.append(
            violation(
                "FIREWALL_INTERFACE_INVALID",
                "firewall_fabric_interfaces",
                f"expected a list of interface names (at most 15 characters, optional trailing *), found {ifaces!r}",
                host,
            )
        )
        ifaces = []
    policy = spec.get("forward_policy", "drop")
    if policy not in POLICIES:
        out.append(
            violation(
                "FIREWALL_POLICY_INVALID",
                "firewall_forward_policy",
                f"expected one of {list(POLICIES)}, found {policy!r}",
                host,
            )
        )
    for key in ("fabric_trusted", "egress_restrict"):
        if not isinstance(spec.get(key, False), bool):
            out.append(
                violation(
                    "FIREWALL_SPEC_INVALID", f"firewall_{key}", f"expected true or false, found {spec.get(key)!r}", host
                )
            )
    seen: dict[tuple, str] = {}
    for field, entries in (("firewall_management_ports", mports), ("firewall_member_ports", cports)):
        for entry in entries:
            key = (field, entry["name"], entry["proto"])
            if key in seen:
                out.append(
                    violation(
                        "FIREWALL_PORT_DUPLICATE",
                        field,
                        f"the name {entry['name']!r} ({entry['proto']}) is used twice",
                        host,
                    )
                )
            seen[key] = entry["port"]
    return {
        "host": host,
        "mgmt4": _collapse(mgmt, 4),
        "mgmt6": _collapse(mgmt, 6),
        "members4": _collapse(members, 4),
        "members6": _collapse(members, 6),
        # Without a fabric interface the rails' networks are not used.
        "fabric4": _collapse(fabric, 4) if ifaces else [],
        "fabric6": _collapse(fabric, 6) if ifaces else [],
        "management_ports": mports,
        "member_ports": cports,
        "fabric_interfaces": sorted(set(ifaces)),
        "fabric_trusted": bool(spec.get("fabric_trusted", True)) and bool(ifaces),
        "forward_policy": policy if policy in POLICIES else "drop",
        "egress_restrict": bool(spec.get("egress_restrict", False)),
        "egress_allow": egress,
    }


# ------------------------------------------------------------------ rendering
_SETS = ("mgmt4", "mgmt6", "members4", "members6", "fabric4", "fabric6")


def _set_family(name: str) -> tuple[str, str]:
    return ("ip", "ipv4_addr") if name.endswith("4") else ("ip6", "ipv6_addr")


def _rules(plan: dict) -> list[dict]:
    """Every rule of the table, in order, as structured records (the summary's rules)."""
    rules: list[dict] = []

    def add(chain, comment, verdict="accept", **match):
        rule = {"chain": chain, "comment": comment, "verdict": verdict}
        rule.update({k: v for k, v in match.items() if v not in (None, "", [])})
        rules.append(rule)

    ifaces = plan["fabric_interfaces"]
    add("input", "loopback", iifname=["lo"])
    add("input", "established", ct_state=["established", "related"])
    add("input", "invalid", verdict="drop", ct_state=["invalid"])
    add("input", "icmp", l4proto="icmp")
    add("input", "icmpv6", l4proto="ipv6-icmp")
    for set_prefix, ports, label in (
        ("mgmt", plan["management_ports"], "management"),
        ("members", plan["member_ports"], "cluster"),
    ):
        for entry in ports:
            for fam in ("4", "6"):
                name = set_prefix + fam
                if plan[name]:
                    add(
                        "input",
                        f"{label} {entry['name']}",
                        saddr=f"@{name}",
                        proto=entry["proto"],
                        dport=entry["port"],
                    )
    if plan["fabric_trusted"]:
        for fam in ("4", "6"):
            if plan["fabric" + fam]:
                add("input", "fabric", iifname=ifaces, saddr=f"@fabric{fam}")
    if ifaces:
        add("forward", "fabric not routed out", verdict="drop", iifname=ifaces, oifname_not=ifaces)
        add("forward", "nothing routed into the fabric", verdict="drop", oifname=ifaces, iifname_not=ifaces)
    if plan["egress_restrict"]:
        add("output", "loopback", oifname=["lo"])
        add("output", "established", ct_state=["established", "related"])
        add("output", "icmp", l4proto="icmp")
        add("output", "icmpv6", l4proto="ipv6-icmp")
        for name, label in (("members", "cluster"), ("mgmt", "management")):
            for fam in ("4", "6"):
                if plan[name + fam]:
                    add("output", label, daddr=f"@{name}{fam}")
        if ifaces:
            add("output", "fabric", oifname=ifaces)
        for entry in plan["egress_allow"]:
            for fam in ("4", "6"):
                if entry["dest" + fam]:
                    add(
                        "output",
                        f"egress {entry['name']}",
                        daddr=list(entry["dest" + fam]),
                        family=("ip" if fam == "4" else "ip6"),
                        proto=entry["proto"],
                        dport=entry["port"],
                    )
    return rules


def _names(values: list[str]) -> str:
    quoted = ", ".join(f'"{v}"' for v in values)
    return f"{{ {quoted} }}"


def _rule_text(rule: dict) -> str:
    parts = []
    if "iifname" in rule:
        parts.append(f"iifname {_names(rule['iifname'])}")
    if "iifname_not" in rule:
        parts.append(f"iifname != {_names(rule['iifname_not'])}")
    if "oifname" in rule:
        parts.append(f"oifname {_names(rule['oifname'])}")
    if "oifname_not" in rule:
        parts.append(f"oifname != {_names(rule['oifname_not'])}")
    if "ct_state" in rule:
        parts.append("ct state " + ",".join(rule["ct_state"]))
    for key in ("saddr", "daddr"):
        if key in rule:
            value = rule[key]
            if isinstance(value, str):
                fam = _set_family(value[1:])[0]
                parts.append(f"{fam} {key} {value}")
            else:
                parts.append(f"{rule.get('family', 'ip')} {key} {{ {', '.join(value)} }}")
    if "l4proto" in rule:
        parts.append(f"meta l4proto {rule['l4proto']}")
    if "proto" in rule:
        parts.append(f"{rule['proto']} dport {rule['dport']}" if rule.get("dport") else f"meta l4proto {rule['proto']}")
    parts.append(rule["verdict"])
    parts.append(f'comment "{rule["comment"]}"')
    return " ".join(parts)


def firewall_nft(spec: Any, header: str = "") -> str:
    """The nftables script that (re)loads table inet gpufleet, alone."""
    plan = firewall_plan(spec)
    rules = _rules(plan)
    lines = ["#!/usr/sbin/nft -f"]
    lines += [line.rstrip() for line in header.splitlines()]
    lines += [
        f"# Host firewall of {plan['host'] or 'this host'}, rendered from the inventory (gpufleet firewall_nft).",
        f"# Only table inet {TABLE} is replaced: other tables (Kubernetes, container networks) are kept.",
        f"table inet {TABLE}",
        f"delete table inet {TABLE}",
        "",
        f"table inet {TABLE} {{",
    ]
    for name in _SETS:
        if not plan[name]:
            continue
        _, stype = _set_family(name)
        lines += [
            f"  set {name} {{",
            f"    type {stype}",
            "    flags interval",
            f"    elements = {{ {', '.join(plan[name])} }}",
            "  }",
            "",
        ]
    policies = _policies(plan)
    for chain in ("input", "forward", "output"):
        lines.append(f"  chain {chain} {{")
        lines.append(f"    type filter hook {chain} priority filter; policy {policies[chain]};")
        lines += [f"    {_rule_text(r)}" for r in rules if r["chain"] == chain]
        lines += ["  }", ""]
    lines[-1] = "}"
    return "\n".join(lines) + "\n"


def _policies(plan: dict) -> dict:
    return {
        "input": "drop",
        "forward": plan["forward_policy"],
        "output": "drop" if plan["egress_restrict"] else "accept",
    }


def _summary_rule(rule: dict) -> dict:
    out = {k: v for k, v in rule.items() if k != "family"}
    for key in ("saddr", "daddr"):
        if isinstance(out.get(key), list):
            out[key] = sorted(_normal_net(v) for v in out[key])
    for key in ("iifname", "oifname", "iifname_not", "oifname_not", "ct_state"):
        if key in out:
            out[key] = sorted(out[key])
    return out


def firewall_expected(spec: Any) -> dict:
    """What ``nft -j list table inet gpufleet`` must show once firewall_nft(spec) is loaded."""
    plan = firewall_plan(spec)
    return {
        "policies": _policies(plan),
        "sets": {name: [_normal_net(v) for v in plan[name]] for name in _SETS if plan[name]},
        "rules": [_summary_rule(r) for r in _rules(plan)],
    }


# ------------------------------------------------------------------ reading nft -j back
def _normal_net(value: str) -> str:
    net = ipaddress.ip_network(value, strict=False)
    return str(net)


def _element(value: Any) -> str:
    if isinstance(value, str):
        return _normal_net(value)
    if isinstance(value, dict) and "prefix" in value:
        return _normal_net(f"{value['prefix']['addr']}/{value['prefix']['len']}")
    if isinstance(value, dict) and "range" in value:
        low, high = value["range"]
        nets = ipaddress.summarize_address_range(ipaddress.ip_address(low), ipaddress.ip_address(high))
        return ",".join(str(n) for n in nets)
    if isinstance(value, dict) and "elem" in value:
        return _element(value["elem"]["val"])
    raise ValueError(f"unexpected set element {value!r}")


def _elements(values: Any) -> list[str]:
    if not isinstance(values, list):
        values = [values]
    out: list[str] = []
    for v in values:
        out.extend(_element(v).split(","))
    return out


def _strings(right: Any) -> list[str]:
    if isinstance(right, dict) and "set" in right:
        return sorted(str(v) for v in right["set"])
    if isinstance(right, list):
        return sorted(str(v) for v in right)
    return [str(right)]


def _port_value(right: Any) -> str:
    if isinstance(right, dict) and "range" in right:
        return _port_text(int(right["range"][0]), int(right["range"][1]))
    return str(right)


def _parse_rule(rule: dict) -> dict:
    out: dict[str, Any] = {"chain": rule.get("chain"), "comment": rule.get("comment", "")}
    for expr in rule.get("expr", []):
        if "match" in expr:
            m = expr["match"]
            left, right, op = m.get("left", {}), m.get("right"), m.get("op", "==")
            neg = op == "!="
            if "meta" in left:
                key = left["meta"].get("key")
                if key in ("iifname", "oifname"):
                    out[key + ("_not" if neg else "")] = _strings(right)
                elif key == "l4proto":
                    out["l4proto"] = str(right)
            elif "ct" in left and left["ct"].get("key") == "state":
                out["ct_state"] = sorted(right if isinstance(right, list) else [right])
            elif "payload" in left:
                field = left["payload"].get("field")
                proto = left["payload"].get("protocol")
                if field in ("saddr", "daddr"):
                    if isinstance(right, str) and right.startswith("@"):
                        out[field] = right
                    else:
                        items = right["set"] if isinstance(right, dict) and "set" in right else right
                        out[field] = sorted(_elements(items))
                elif field == "dport":
                    out["proto"] = proto
                    out["dport"] = _port_value(right)
        elif "accept" in expr:
            out["verdict"] = "accept"
        elif "drop" in expr:
            out["verdict"] = "drop"
        elif "reject" in expr:
            out["verdict"] = "reject"
    if "l4proto" in out and out["l4proto"] in PROTOS and "proto" not in out:
        out["proto"] = out.pop("l4proto")
    return out


def nft_table_summary(nft_json: Any, table: str = TABLE) -> dict:
    """The policies, sets and rules of one inet table from ``nft -j list table inet <table>`` output."""
    data = json.loads(nft_json) if isinstance(nft_json, (str, bytes)) else nft_json
    if not isinstance(data, dict) or not isinstance(data.get("nftables"), list):
        raise ValueError("expected the JSON of `nft -j list table ...` (an object with an 'nftables' list)")
    policies: dict[str, str] = {}
    sets: dict[str, list[str]] = {}
    rules: list[dict] = []
    for item in data["nftables"]:
        if "chain" in item:
            c = item["chain"]
            if c.get("table") == table and c.get("family") == "inet" and "hook" in c:
                policies[c["name"]] = c.get("policy", "accept")
        elif "set" in item:
            s = item["set"]
            if s.get("table") == table and s.get("family") == "inet":
                sets[s["name"]] = _elements(s.get("elem", [])) if "elem" in s else []
        elif "rule" in item:
            r = item["rule"]
            if r.get("table") == table and r.get("family") == "inet":
                rules.append(_parse_rule(r))
    return {"policies": policies, "sets": {k: v for k, v in sets.items() if v}, "rules": rules}
