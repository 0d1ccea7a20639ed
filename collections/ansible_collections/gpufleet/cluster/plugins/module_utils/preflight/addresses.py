# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Addresses as integers: a network is parsed once, a host address is compared with two integers.

Host addresses are parsed with ``socket.inet_pton``; networks with netaddr (strictly: explicit prefix,
dotted quad, no host bits), so a 4,096-node inventory is checked in well under a second.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import show
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import codes

try:  # netaddr is a controller-side dependency (requirements.in); targets never import this module.
    import netaddr
except ImportError:  # pragma: no cover - the venv always has it
    netaddr = None


@dataclass(frozen=True)
class Net:
    """A parsed network: ``first``/``last`` are integers, so containment is two comparisons."""

    field: str
    text: str
    version: int
    first: int
    last: int
    prefixlen: int

    def contains(self, addr: tuple[int, int]) -> bool:
        return addr[0] == self.version and self.first <= addr[1] <= self.last

    @property
    def size(self) -> int:
        return self.last - self.first + 1

    def usable(self) -> int:
        """Addresses a host may take: IPv4 loses network and broadcast below /31."""
        if self.version == 4 and self.prefixlen < 31:
            return self.size - 2
        return self.size

    def reserved(self, addr: tuple[int, int]) -> bool:
        return self.version == 4 and self.prefixlen < 31 and addr[1] in (self.first, self.last)


def parse_ip(value: Any) -> tuple[int, int] | None:
    """``"10.0.0.1"`` → ``(4, 167772161)``; None when it is not a plain IPv4/IPv6 address."""
    if not isinstance(value, str) or len(value) > 45:
        return None
    try:
        return 4, int.from_bytes(socket.inet_pton(socket.AF_INET, value), "big")
    except (OSError, ValueError):  # ValueError: a NUL byte in the text
        pass
    try:
        return 6, int.from_bytes(socket.inet_pton(socket.AF_INET6, value), "big")
    except (OSError, ValueError):
        return None


def ip_text(addr: tuple[int, int]) -> str:
    fam, width = (socket.AF_INET, 4) if addr[0] == 4 else (socket.AF_INET6, 16)
    return socket.inet_ntop(fam, addr[1].to_bytes(width, "big"))


def parse_cidr(value: Any, field: str, out: list[dict]) -> Net | None:
    """Parse a CIDR with netaddr (strictly: dotted quad, explicit prefix, no host bits).

    Its problems (``NET_CIDR_INVALID``, ``NET_CIDR_HOST_BITS``) are appended to ``out``; the network is
    returned even with host bits set (as its network address), None when it cannot be parsed.
    """
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if "/" not in text:
            raise ValueError("no prefix length")
        net = netaddr.IPNetwork(text)  # netaddr >= 1.0 parses IPv4 with inet_pton semantics
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        out.append(codes.make("NET_CIDR_INVALID", field, found=show(value), error=exc))
        return None
    if net.ip != net.network:
        out.append(codes.make("NET_CIDR_HOST_BITS", field, network=net.cidr, found=show(value)))
    return Net(field, str(net.cidr), net.version, int(net.first), int(net.last), net.prefixlen)


__all__ = ["Net", "ip_text", "parse_cidr", "parse_ip"]


def vars_of(hostvars: Mapping[str, Any], host: str) -> Mapping[str, Any]:
    """A host's variables; an empty mapping when the inventory gives something else for it (the hosts
    phase reports the host's fields; no other phase may fail on it)."""
    found = hostvars.get(host)
    return found if isinstance(found, Mapping) else {}
