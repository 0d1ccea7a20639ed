# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Map a node's fabric devices to the brief's rails and plan each rail's addressing and routing.

Rail ``i`` of every node lives in ``networks.fabric.rails[i]`` (the brief). A host gives one
address per rail (``fabric_ips[i]``, inventory) and one device per rail (``devices[i]``, host or
group vars), each identified by a stable key: the network interface name (``netdev``) or the
PCI address of the port (``pci``), plus the RDMA device (``hca``, e.g. ``mlx5_0``) and its port.

:func:`rail_plan_violations` returns every problem at once (empty = valid), in gpufleet's
violation shape; :func:`rail_plan` returns the plan or raises :class:`RailPlanError` listing them.
Pure functions: no I/O.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import format_text, violation

RDMA_FABRICS = ("infiniband", "roce")
DEVICE_KEYS = ("netdev", "pci", "hca", "port")
_PCI_RE = re.compile(r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_NETDEV_RE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
_HCA_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class RailPlanError(ValueError):
    """The rail plan cannot be built; ``violations`` holds every reason."""

    def __init__(self, violations: list[dict]):
        self.violations = violations
        super().__init__(format_text(violations))


def normalize_pci(address: str) -> str:
    """``18:00.0`` -> ``0000:18:00.0``; lower case, as sysfs names devices."""
    address = address.strip().lower()
    return address if address.count(":") == 2 else f"0000:{address}"


def _device_problems(host: str, field: str, index: int, dev: Any) -> tuple[dict | None, list[dict]]:
    out: list[dict] = []
    where = f"{field}[{index}]"
    if not isinstance(dev, dict):
        return None, [
            violation(
                "RAIL_DEVICE_INVALID",
                where,
                f"expected a mapping such as {{netdev: ibp24s0, hca: mlx5_0}}, found {dev!r}",
                host,
            )
        ]
    unknown = sorted(set(dev) - set(DEVICE_KEYS))
    if unknown:
        out.append(
            violation(
                "RAIL_DEVICE_INVALID", where, f"unknown keys {unknown}; expected some of {list(DEVICE_KEYS)}", host
            )
        )
    netdev, pci, hca, port = dev.get("netdev"), dev.get("pci"), dev.get("hca"), dev.get("port", 1)
    if netdev is None and pci is None:
        out.append(
            violation(
                "RAIL_DEVICE_NO_KEY",
                where,
                "expected a stable key for rail "
                f"{index}: netdev (interface name, e.g. ibp24s0) or pci (e.g. 0000:18:00.0), found neither",
                host,
            )
        )
    if netdev is not None and not (isinstance(netdev, str) and _NETDEV_RE.fullmatch(netdev)):
        out.append(
            violation(
                "RAIL_DEVICE_INVALID",
                f"{where}.netdev",
                f"expected an interface name (1-15 characters, no spaces or '/'), found {netdev!r}",
                host,
            )
        )
    if pci is not None and not (isinstance(pci, str) and _PCI_RE.fullmatch(pci)):
        out.append(
            violation(
                "RAIL_DEVICE_INVALID",
                f"{where}.pci",
                f"expected a PCI address such as 0000:18:00.0, found {pci!r}",
                host,
            )
        )
    if not (isinstance(hca, str) and _HCA_RE.fullmatch(hca)):
        out.append(
            violation(
                "RAIL_DEVICE_INVALID",
                f"{where}.hca",
                f"expected the RDMA device of rail {index} (e.g. mlx5_0), found {hca!r}",
                host,
            )
        )
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 255:
        out.append(
            violation(
                "RAIL_DEVICE_INVALID", f"{where}.port", f"expected an RDMA port number >= 1, found {port!r}", host
            )
        )
    if out:
        return None, out
    return {
        "netdev": netdev,
        "pci": normalize_pci(pci) if pci is not None else None,
        "hca": hca,
        "port": port,
    }, []


def rail_plan_violations(
    host: str,
    fabric: dict,
    fabric_ips: Any,
    devices: Any,
    devices_field: str = "rdma_rail_devices",
) -> list[dict]:
    """Every problem with this host's rails (empty list = the plan can be built)."""
    return _build(host, fabric, fabric_ips, devices, devices_field, 1000, 1000)[1]


def rail_plan(
    host: str,
    fabric: dict,
    fabric_ips: Any,
    devices: Any,
    devices_field: str = "rdma_rail_devices",
    table_base: int = 1000,
    priority_base: int = 1000,
) -> list[dict]:
    """One entry per rail: device, address, prefix, network, gateway, routing table and rule priority.

    Raises RailPlanError (every problem at once) when the mapping is wrong.
    """
    plan, problems = _build(host, fabric, fabric_ips, devices, devices_field, table_base, priority_base)
    if problems:
        raise RailPlanError(problems)
    return plan


def _build(
    host: str,
    fabric: dict,
    fabric_ips: Any,
    devices: Any,
    devices_field: str,
    table_base: int,
    priority_base: int,
) -> tuple[list[dict], list[dict]]:
    fabric = fabric or {}
    if fabric.get("type") not in RDMA_FABRICS:
        return [], []
    rails = fabric.get("rails") or []
    out: list[dict] = []
    ips = fabric_ips if fabric_ips is not None else []
    if not isinstance(ips, list):
        return [], [violation("RAIL_IPS_INVALID", "fabric_ips", f"expected a list of addresses, found {ips!r}", host)]
    if not isinstance(devices, list):
        return [], [
            violation(
                "RAIL_DEVICES_INVALID", devices_field, f"expected a list, one device per rail, found {devices!r}", host
            )
        ]
    if len(ips) != len(rails):
        out.append(
            violation(
                "RAIL_IPS_COUNT",
                "fabric_ips",
                f"expected {len(rails)} addresses (one per rail of networks.fabric.rails), found {len(ips)}",
                host,
            )
        )
    if len(devices) > len(rails):
        out.append(
            violation(
                "RAIL_DEVICES_COUNT",
                devices_field,
                f"expected {len(rails)} devices (one per rail), found {len(devices)}: "
                f"entries {list(range(len(rails), len(devices)))} have no rail",
                host,
            )
        )
    seen: dict[tuple[str, str], int] = {}
    plan: list[dict] = []
    for i, rail in enumerate(rails):
        entry: dict[str, Any] = {"rail": i, "name": f"rail{i}"}
        if i >= len(devices):
            out.append(
                violation(
                    "RAIL_NO_DEVICE",
                    f"{devices_field}[{i}]",
                    f"rail {i} ({rail.get('cidr')}) has no device: add its netdev or pci and hca",
                    host,
                )
            )
            dev = None
        else:
            dev, problems = _device_problems(host, devices_field, i, devices[i])
            out.extend(problems)
        if dev is not None:
            for key in ("netdev", "pci", "hca"):
                value = dev[key]
                if value is None:
                    continue
                first = seen.setdefault((key, value), i)
                if first != i:
                    out.append(
                        violation(
                            "RAIL_DEVICE_SHARED",
                            f"{devices_field}[{i}].{key}",
                            f"rails {first} and {i} both use {key} {value}: each rail needs its own device",
                            host,
                        )
                    )
            entry.update(dev)
        try:
            net = ipaddress.ip_network(str(rail.get("cidr")), strict=True)
        except ValueError:
            out.append(
                violation(
                    "RAIL_CIDR_INVALID",
                    f"networks.fabric.rails[{i}].cidr",
                    f"expected a network, found {rail.get('cidr')!r}",
                    host,
                )
            )
            continue
        entry.update({"network": str(net), "prefix": net.prefixlen, "gateway": rail.get("gateway")})
        entry.update({"table": table_base + i, "priority": priority_base + i})
        if i < len(ips):
            try:
                addr = ipaddress.ip_address(str(ips[i]))
            except ValueError:
                out.append(
                    violation("RAIL_IP_INVALID", f"fabric_ips[{i}]", f"expected an IP address, found {ips[i]!r}", host)
                )
                continue
            if addr not in net:
                out.append(
                    violation(
                        "RAIL_IP_OUTSIDE",
                        f"fabric_ips[{i}]",
                        f"expected an address inside rail {i}'s {net}, found {addr}",
                        host,
                    )
                )
            elif net.prefixlen < net.max_prefixlen - 1 and addr in (net.network_address, net.broadcast_address):
                out.append(
                    violation(
                        "RAIL_IP_RESERVED",
                        f"fabric_ips[{i}]",
                        f"{addr} is the network or broadcast address of {net}: pick a host address",
                        host,
                    )
                )
            entry.update({"address": str(addr), "cidr": f"{addr}/{net.prefixlen}"})
        plan.append(entry)
    return (plan if not out else []), out
