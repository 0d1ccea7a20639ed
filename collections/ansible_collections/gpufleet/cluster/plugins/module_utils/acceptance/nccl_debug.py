# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Read the transport evidence out of NCCL_DEBUG=INFO logs.

Standard library only. One call reads one log (a file, or a job's whole
stdout: NCCL INFO lines interleaved with nccl-tests output and launcher noise)
and returns what NCCL says it did:

* ``nccl_version`` — ``NCCL INFO NCCL version 2.26.2+cuda12.8``;
* ``network`` — the net plugin chosen (``Using network IB`` / ``Socket`` /
  ``AWS Libfabric`` / ``NCCL RDMA Plugin v8``; newer NCCL: ``Assigned NET plugin X``);
* ``ib_devices`` — ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ...``;
  ``link_layers`` the set of their ``IB`` / ``RoCE`` link layers;
* ``transports`` — what the channels go through: ``P2P/CUMEM``, ``P2P/IPC``,
  ``SHM``, ``NET/IB/GDRDMA``, ``NET/IB``, ``NET/Socket``, ``CollNet``, ...;
* ``gdr`` — True when the network channels use GPUDirect RDMA, False when they
  do not, None when the log does not say (see :func:`gdr_from_evidence`);
* ``nvls`` — True when NVLink SHARP channels were set up, False when NCCL says
  0 NVLS channels, None when unknown;
* ``hosts`` — the hosts that printed the lines (``unknown`` for a line whose host was
  blanked or redacted, or printed none);
* ``socket_fallback`` — NCCL carried inter-node traffic over TCP sockets
  (``Using network Socket``, a channel ``via NET/Socket``, or ``NET/IB : No
  device found`` before a Socket network).

Nothing here raises on garbage.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.nccl_tests import strip_prefix

# host:pid:tid [cudaDev] NCCL INFO message, wherever it is in the line (after a timestamp, a
# launcher's tag); WARN lines name their source between the device and the level
# (``[0] misc/socket.cc:502 NCCL WARN``). A log collector may blank the host
# (``:22901:22901 [0] NCCL INFO``) or replace it (``NAME :70918:70928 [0] NCCL INFO``): the host
# is then ``unknown``.
_INFO = re.compile(
    r"(?:(?:^|\s)(?P<host>[^\s:\[\]]*):(?P<pid>\d+):\d+\s+)?(?:\[\d+\]\s+)?(?:[\w./-]+:\d+\s+)?"
    r"NCCL (?P<level>INFO|WARN)\s+(?P<msg>.*)$"
)
UNKNOWN_HOST = "unknown"
_VERSION = re.compile(r"NCCL version\s+(\d+\.\d+\.\d+)(\S*)")
_USING_NETWORK = re.compile(r"^Using network\s+(.+?)\s*$")
_ASSIGNED_NET = re.compile(r"^Assigned NET plugin\s+(.+?)\s+to comm\b")
_NET_IB_USING = re.compile(r"^NET/(?:IB|[\w .-]+?)\s*:\s*Using\s+(\[\d+\].*?)(?:;\s*OOB.*)?$")
_IB_DEVICE = re.compile(r"\[(\d+)\]([\w.\-]+:\d+)/(IB|RoCE)\b")
_SOCKET_USING = re.compile(r"^NET/Socket\s*:\s*Using\s+(.+)$")
_NO_IB = re.compile(r"^NET/IB\s*:\s*No device found", re.I)
_CHANNEL_VIA = re.compile(r"\bvia\s+(\S+(?:\s+\S+)*?)(?:\s+comm\s+0x[0-9a-f]+.*)?$")
_CONNECTED_RINGS = re.compile(r"Connected all (?:rings|trees).*\bGDR\s+([01])\b")
_GDR_HCA = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for HCA", re.I)
_NVLS_CHANNELS = re.compile(r"\b(\d+)\s+nvls channels\b")
_NVLS_CONNECTED = re.compile(r"Connected NVLS|NVLS comm 0x|nvls.*Connected", re.I)
_NNODES = re.compile(r"\bnNodes\s+(\d+)\b")
# A warning of a network transport names it first ("NET/IB : Got completion from peer ..."): the run
# went through that network, though it may have died before printing "Using network".
_WARN_NET = re.compile(r"^NET/(\w+)\s*:")
_NRANKS = re.compile(r"\bnranks\s+(\d+)\b", re.I)

SOCKET = "Socket"
IB = "IB"


def _strip(line: str) -> str:
    return strip_prefix(line).strip()


def _normalise_transport(via: str) -> str:
    """``NET/IB/0(4)/GDRDMA`` -> ``NET/IB/GDRDMA``; ``P2P/CUMEM/read`` -> ``P2P/CUMEM``; ``SHM/direct`` -> ``SHM``."""
    via = via.strip()
    if via.startswith("NET/"):
        parts = via.split("/")
        net = parts[1] if len(parts) > 1 else ""
        gdr = "/GDRDMA" if any(p.startswith("GDRDMA") for p in parts[2:]) else ""
        return f"NET/{net}{gdr}"
    if via.startswith("P2P/"):
        parts = via.split("/")
        kind = parts[1].split()[0] if len(parts) > 1 and parts[1] else ""
        if kind == "direct":  # "P2P/direct pointer"
            return "P2P/direct"
        return f"P2P/{kind}" if kind else "P2P"
    return via.split("/")[0].split()[0]


def gdr_from_evidence(net_channels: int, gdrdma_channels: int, ring_gdr: set, hca_gdr: set) -> bool | None:
    """GPUDirect RDMA in use, from the strongest evidence there is.

    1. Network channels: all ``.../GDRDMA`` -> True; any without -> False.
    2. Otherwise ``GPU Direct RDMA Enabled|Disabled for HCA`` lines.
    3. Otherwise the ``Connected all rings ... GDR 1|0`` flag (all 1 -> True).
       This flag is also 1 on single-node runs with no network at all, hence last.
    """
    if net_channels:
        return gdrdma_channels == net_channels
    if hca_gdr:
        return hca_gdr == {True}
    if ring_gdr:
        return ring_gdr == {True}
    return None


def parse_debug(text: str, file: str | None = None) -> dict | None:
    """Evidence from one NCCL_DEBUG=INFO log, or None when it holds no NCCL INFO line."""
    if not isinstance(text, str):
        return None
    info_lines = 0
    version = None
    networks: list[str] = []
    ib_devices: list[str] = []
    socket_devices: list[str] = []
    no_ib_device = False
    transports: dict[str, int] = {}
    net_channels = gdrdma_channels = 0
    ring_gdr: set[bool] = set()
    hca_gdr: set[bool] = set()
    nvls_channels: int | None = None
    nvls_connected = False
    hosts: set[str] = set()
    nnodes: int | None = None
    nranks: int | None = None
    warnings: list[str] = []
    warn_networks: list[str] = []
    for raw in text.splitlines():
        line = _strip(raw)
        if "NCCL " not in line:
            continue
        m = _INFO.search(line)
        if not m:
            # "NCCL version 2.26.2+cuda12.8" printed by NCCL_DEBUG=VERSION, no INFO tag
            vm = _VERSION.match(line)
            if vm and version is None:
                version = vm.group(1)
            continue
        info_lines += 1
        msg = m.group("msg").strip()
        hosts.add(m.group("host") or UNKNOWN_HOST)
        if m.group("level") == "WARN":
            if len(warnings) < 20:
                warnings.append(msg)
            wn = _WARN_NET.match(msg)
            if wn and wn.group(1) not in warn_networks:
                warn_networks.append(wn.group(1))
            continue
        vm = _VERSION.search(msg)
        if vm and msg.startswith("NCCL version"):
            version = version or vm.group(1)
            continue
        nm = _USING_NETWORK.match(msg) or _ASSIGNED_NET.match(msg)
        if nm:
            if nm.group(1) not in networks:
                networks.append(nm.group(1))
            continue
        if _NO_IB.match(msg):
            no_ib_device = True
            continue
        sm = _SOCKET_USING.match(msg)
        if sm:
            for dev in re.findall(r"\[\d+\]([^\s<]+)", sm.group(1)):
                if dev not in socket_devices:
                    socket_devices.append(dev)
            continue
        im = _NET_IB_USING.match(msg)
        if im and msg.startswith("NET/"):
            for _idx, dev, layer in _IB_DEVICE.findall(im.group(1)):
                name = f"{dev}/{layer}"
                if name not in ib_devices:
                    ib_devices.append(name)
            continue
        if msg.startswith("Channel ") and " via " in msg:
            cm = _CHANNEL_VIA.search(msg)
            if cm:
                transport = _normalise_transport(cm.group(1))
                transports[transport] = transports.get(transport, 0) + 1
                if transport.startswith("NET/"):
                    net_channels += 1
                    if transport.endswith("/GDRDMA"):
                        gdrdma_channels += 1
            continue
        rm = _CONNECTED_RINGS.search(msg)
        if rm:
            ring_gdr.add(rm.group(1) == "1")
            continue
        hm = _GDR_HCA.search(msg)
        if hm:
            hca_gdr.add(hm.group(1).lower() == "enabled")
            continue
        cm2 = _NVLS_CHANNELS.search(msg)
        if cm2:
            nvls_channels = max(nvls_channels or 0, int(cm2.group(1)))
        if _NVLS_CONNECTED.search(msg):
            nvls_connected = True
        nn = _NNODES.search(msg)
        if nn:
            nnodes = max(nnodes or 0, int(nn.group(1)))
        nr = _NRANKS.search(msg)
        # "ncclCommInitRank comm 0x.. rank 0 nranks 16 ..." and "comm 0x.. rank 10 nranks 16 ... Init COMPLETE".
        if nr and ("ncclCommInitRank" in msg or msg.startswith("comm 0x")):
            nranks = max(nranks or 0, int(nr.group(1)))
    if not info_lines:
        return None
    # "Using network" says it; failing that, the network a warning came from.
    network = networks[0] if networks else (warn_networks[0] if warn_networks else None)
    socket_fallback = (
        any(n == SOCKET for n in networks)
        or network == SOCKET
        or any(t.startswith("NET/Socket") for t in transports)
        or (no_ib_device and not ib_devices and network in (None, SOCKET))
    )
    if network is None and socket_fallback:
        network = SOCKET
    if nvls_connected:
        nvls = True
    elif nvls_channels is not None:
        nvls = nvls_channels > 0
    else:
        nvls = None
    return {
        "file": file,
        "nccl_version": version,
        "network": network,
        "networks": networks,
        "gdr": gdr_from_evidence(net_channels, gdrdma_channels, ring_gdr, hca_gdr),
        "socket_fallback": bool(socket_fallback),
        "ib_devices": ib_devices,
        "link_layers": sorted({d.rsplit("/", 1)[1] for d in ib_devices}),
        "socket_devices": socket_devices,
        "transports": dict(sorted(transports.items())),
        "nvls": nvls,
        "hosts": sorted(hosts),
        "nnodes": nnodes,
        "nranks": nranks,
        "warnings": warnings,
    }


def network_kind(debug: dict | None) -> str | None:
    """``ib`` (IB verbs, built in or an RDMA plugin over NET/IB devices), ``socket``, ``plugin`` or None."""
    if not debug:
        return None
    network = debug.get("network")
    if debug.get("socket_fallback") or network == SOCKET:
        return "socket"
    if network == IB:
        return "ib"
    if network is None:
        if any(t.startswith("NET/IB") for t in debug.get("transports") or {}):
            return "ib"
        return None
    # A plugin: HPC-X's "NCCL RDMA Plugin" / "IBext" drive the same IB verbs devices.
    if debug.get("ib_devices") or re.search(r"RDMA|IBext|\bIB\b", network):
        return "ib"
    return "plugin"
