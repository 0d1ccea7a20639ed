# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""RDMA ports from sysfs (``<root>/class/infiniband/<dev>/ports/<n>/...``) or ``ibstat`` (stdlib only).

One record per port, the same shape from both sources::

    {device, port, state, phys_state, rate_gbps, rate, link_layer, ca_type, fw_ver, node_guid,
     numa_node, netdevs}

``state`` is normalised to the sysfs names (``DOWN``, ``INIT``, ``ARMED``, ``ACTIVE``), ``phys_state``
to sysfs' (``LinkUp``, ``Disabled``, ``Polling``, ...), ``link_layer`` to ``InfiniBand`` / ``Ethernet``.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.parsing import clean, lines_of, to_int, to_number

PORT_STATES = ("NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER")
PHYS_STATES = {
    "sleep": "Sleep",
    "polling": "Polling",
    "disabled": "Disabled",
    "portconfigurationtraining": "PortConfigurationTraining",
    "linkup": "LinkUp",
    "linkerrorrecovery": "LinkErrorRecovery",
    "phytest": "Phy Test",
}
_PORT_FILES = ("state", "phys_state", "rate", "link_layer")


def normalise_state(value: str | None) -> str | None:
    """``4: ACTIVE`` (sysfs) or ``Active`` (ibstat) -> ``ACTIVE``."""
    text = clean(value)
    if text is None:
        return None
    text = text.split(":", 1)[1] if ":" in text else text
    return text.strip().upper().replace(" ", "_") or None


def normalise_phys_state(value: str | None) -> str | None:
    """``5: LinkUp`` (sysfs) or ``LinkUp`` (ibstat) -> ``LinkUp``."""
    text = clean(value)
    if text is None:
        return None
    text = text.split(":", 1)[1].strip() if ":" in text else text
    return PHYS_STATES.get(text.replace(" ", "").lower(), text)


def normalise_link_layer(value: str | None) -> str | None:
    text = clean(value)
    if text is None:
        return None
    low = text.lower()
    if low == "infiniband":
        return "InfiniBand"
    if low == "ethernet":
        return "Ethernet"
    return text


def parse_rate(value: str | None) -> int | float | None:
    """``400 Gb/sec (4X NDR)`` (sysfs) or ``400`` (ibstat) -> 400; ``2.5 Gb/sec (1X SDR)`` -> 2.5."""
    return to_number(value)


def parse_rdma_port(
    device: str, port: int, files: dict[str, str | None], extra: dict | None = None
) -> tuple[dict, list[str]]:
    """One port record from the contents of its sysfs files (``state``, ``phys_state``, ``rate``, ``link_layer``)."""
    problems: list[str] = []
    extra = extra or {}
    record = {
        "device": device,
        "port": port,
        "state": normalise_state(files.get("state")),
        "phys_state": normalise_phys_state(files.get("phys_state")),
        "rate_gbps": parse_rate(files.get("rate")),
        "rate": clean(files.get("rate")),
        "link_layer": normalise_link_layer(files.get("link_layer")),
        "ca_type": clean(extra.get("ca_type")),
        "fw_ver": clean(extra.get("fw_ver")),
        "node_guid": clean(extra.get("node_guid")),
        "numa_node": extra.get("numa_node"),
        "netdevs": list(extra.get("netdevs") or []),
    }
    for name in _PORT_FILES:
        if files.get(name) is None:
            problems.append(f"{device} port {port}: no {name}")
    if record["state"] is not None and record["state"] not in PORT_STATES:
        problems.append(f"{device} port {port}: unknown state {files.get('state')!r}")
    return record, problems


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _sort_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def read_rdma_sysfs(sysfs_root: str = "/sys") -> tuple[list[dict] | None, list[str]]:
    """Every port under ``<sysfs_root>/class/infiniband``; None when that directory does not exist.

    An empty list means the directory exists but holds no device (rdma-core loaded, no HCA).
    """
    base = os.path.join(sysfs_root, "class", "infiniband")
    if not os.path.isdir(base):
        return None, []
    ports: list[dict] = []
    problems: list[str] = []
    try:
        devices = sorted(os.listdir(base), key=_sort_key)
    except OSError as exc:
        return None, [f"{base}: {exc}"]
    for device in devices:
        dev_dir = os.path.join(base, device)
        numa = to_int(_read(os.path.join(dev_dir, "device", "numa_node")))
        try:
            netdevs = sorted(os.listdir(os.path.join(dev_dir, "device", "net")))
        except OSError:
            netdevs = []
        extra = {
            "ca_type": _read(os.path.join(dev_dir, "hca_type")),
            "fw_ver": _read(os.path.join(dev_dir, "fw_ver")),
            "node_guid": _read(os.path.join(dev_dir, "node_guid")),
            "numa_node": numa if numa is not None and numa >= 0 else None,
            "netdevs": netdevs,
        }
        ports_dir = os.path.join(dev_dir, "ports")
        try:
            port_names = sorted((p for p in os.listdir(ports_dir) if p.isdigit()), key=int)
        except OSError:
            problems.append(f"{device}: no ports directory")
            continue
        for port in port_names:
            files = {name: _read(os.path.join(ports_dir, port, name)) for name in _PORT_FILES}
            record, port_problems = parse_rdma_port(device, int(port), files, extra)
            ports.append(record)
            problems.extend(port_problems)
    return ports, problems


_CA_RE = re.compile(r"^CA '([^']+)'")
_PORT_RE = re.compile(r"^Port (\d+):\s*$")
_IBSTAT_KEYS = {
    "CA type": "ca_type",
    "Firmware version": "fw_ver",
    "Node GUID": "node_guid",
}


def parse_ibstat(text: str | None) -> tuple[list[dict], list[str]]:
    """``ibstat`` (all CAs) -> port records; ``Rate: 400`` is in Gb/s, ``State: Active`` -> ``ACTIVE``."""
    problems: list[str] = []
    ports: list[dict] = []
    ca: str | None = None
    ca_info: dict = {}
    port: int | None = None
    files: dict[str, str | None] = {}

    def flush() -> None:
        if ca is not None and port is not None:
            record, port_problems = parse_rdma_port(ca, port, files, ca_info)
            ports.append(record)
            problems.extend(port_problems)

    for line in lines_of(text):
        stripped = line.strip()
        if not stripped:
            continue
        m = _CA_RE.match(stripped)
        if m:
            flush()
            ca, ca_info, port, files = m.group(1), {}, None, {}
            continue
        m = _PORT_RE.match(stripped)
        if m and ca is not None:
            flush()
            port, files = int(m.group(1)), {}
            continue
        key, sep, value = stripped.partition(":")
        if not sep or ca is None:
            continue
        key, value = key.strip(), value.strip()
        if port is None:
            if key in _IBSTAT_KEYS:
                ca_info[_IBSTAT_KEYS[key]] = value
        elif key == "State":
            files["state"] = value
        elif key == "Physical state":
            files["phys_state"] = value
        elif key == "Rate":
            files["rate"] = value
        elif key == "Link layer":
            files["link_layer"] = value
    flush()
    if text and text.strip() and not ports:
        problems.append("ibstat: no CA with a port found")
    return ports, problems
