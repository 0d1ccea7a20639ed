#!/usr/bin/python3
# Managed by gpufleet (role telemetry): local changes are overwritten.
"""RDMA port state, rate and error counters for node_exporter's textfile collector.

    gpufleet-rdma-metrics [--sysfs-root /sys] [--devices 'mlx5_*' ...] --output FILE.prom

Reads <root>/class/infiniband/<device>/ports/<port>/{state,phys_state,rate,link_layer} and the
port's counters/ directory (link_downed, symbol_error, port_rcv_errors,
excessive_buffer_overrun_errors, ...) and writes, atomically (temporary file + rename):

    gpufleet_rdma_port_up{device,port}            1 when the port is ACTIVE and LinkUp
    gpufleet_rdma_port_state{device,port}         IB port state number (1 DOWN ... 4 ACTIVE)
    gpufleet_rdma_port_rate_gbps{device,port}     link rate in Gb/s
    gpufleet_rdma_port_info{device,port,state,phys_state,link_layer,netdev} 1
    gpufleet_rdma_port_counter_total{device,port,counter}   each error counter the port has
    gpufleet_textfile_last_run_timestamp_seconds{collector="rdma"}

A port without a counters/ directory (some drivers, test trees) gets no counter samples.
Python 3 stdlib only.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import sys
import time

# The shared module is installed beside this program (role telemetry).
from gpufleet_textfile import Exposition, write_atomic

COUNTERS = (
    "link_downed",
    "link_error_recovery",
    "symbol_error",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_rcv_constraint_errors",
    "port_xmit_constraint_errors",
    "VL15_dropped",
)
_STATE_RE = re.compile(r"^\s*(\d+)\s*:\s*(\S+)")
_RATE_RE = re.compile(r"^\s*([0-9.]+)\s*Gb/sec")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return None


def parse_state(text: str | None) -> tuple[int, str]:
    """'4: ACTIVE' -> (4, 'ACTIVE'); unreadable -> (0, 'UNKNOWN')."""
    m = _STATE_RE.match(text or "")
    return (int(m.group(1)), m.group(2)) if m else (0, "UNKNOWN")


def parse_rate(text: str | None) -> float:
    """'400 Gb/sec (4X NDR)' -> 400.0; unreadable -> 0."""
    m = _RATE_RE.match(text or "")
    return float(m.group(1)) if m else 0.0


def read_ports(root: str, globs: list[str] | None = None) -> list[dict]:
    """Every port of every (selected) RDMA device under ``root``/class/infiniband, sorted."""
    base = os.path.join(root, "class", "infiniband")
    try:
        devices = sorted(os.listdir(base))
    except OSError:
        return []
    ports = []
    for dev in devices:
        if globs and not any(fnmatch.fnmatchcase(dev, g) for g in globs):
            continue
        pdir = os.path.join(base, dev, "ports")
        try:
            numbers = sorted(os.listdir(pdir), key=lambda p: int(p) if p.isdigit() else 0)
        except OSError:
            continue
        try:
            netdevs = sorted(os.listdir(os.path.join(base, dev, "device", "net")))
        except OSError:
            netdevs = []
        for num in numbers:
            p = os.path.join(pdir, num)
            state_id, state = parse_state(_read(os.path.join(p, "state")))
            phys_id, phys = parse_state(_read(os.path.join(p, "phys_state")))
            counters = {}
            for name in COUNTERS:
                value = _read(os.path.join(p, "counters", name))
                if value is not None and value.isdigit():
                    counters[name] = int(value)
            ports.append(
                {
                    "device": dev,
                    "port": num,
                    "state_id": state_id,
                    "state": state,
                    "phys_state_id": phys_id,
                    "phys_state": phys,
                    "rate_gbps": parse_rate(_read(os.path.join(p, "rate"))),
                    "link_layer": _read(os.path.join(p, "link_layer")) or "",
                    "netdev": netdevs[0] if netdevs else "",
                    "counters": counters,
                }
            )
    return ports


def render(ports: list[dict], now: float) -> str:
    """The textfile, in Prometheus' text format."""
    out = Exposition()
    family = out.family

    def key(p):
        return [("device", p["device"]), ("port", p["port"])]

    family(
        "gpufleet_rdma_port_up",
        "gauge",
        "1 when the RDMA port is ACTIVE and its physical link is LinkUp.",
        [(key(p), 1 if p["state"] == "ACTIVE" and p["phys_state"] == "LinkUp" else 0) for p in ports],
    )
    family(
        "gpufleet_rdma_port_state",
        "gauge",
        "RDMA port logical state (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 0 unreadable).",
        [(key(p), p["state_id"]) for p in ports],
    )
    family(
        "gpufleet_rdma_port_rate_gbps",
        "gauge",
        "RDMA port link rate in Gb/s (sysfs rate).",
        [(key(p), p["rate_gbps"]) for p in ports],
    )
    family(
        "gpufleet_rdma_port_info",
        "gauge",
        "RDMA port states, link layer and network interface.",
        [
            (
                [
                    *key(p),
                    ("state", p["state"]),
                    ("phys_state", p["phys_state"]),
                    ("link_layer", p["link_layer"]),
                    ("netdev", p["netdev"]),
                ],
                1,
            )
            for p in ports
        ],
    )
    family(
        "gpufleet_rdma_port_counter_total",
        "counter",
        "RDMA port error counters (sysfs ports/N/counters), by counter name.",
        [([*key(p), ("counter", name)], value) for p in ports for name, value in sorted(p["counters"].items())],
    )
    out.last_run("rdma", now)
    return out.text()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpufleet-rdma-metrics", description=__doc__.split("\n")[0])
    ap.add_argument("--sysfs-root", default="/sys")
    ap.add_argument("--devices", nargs="*", default=[], help="device name globs (default: every device)")
    ap.add_argument("--output", required=True, help="the .prom file in node_exporter's textfile directory")
    args = ap.parse_args(argv)
    ports = read_ports(args.sysfs_root, args.devices)
    write_atomic(args.output, render(ports, time.time()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
