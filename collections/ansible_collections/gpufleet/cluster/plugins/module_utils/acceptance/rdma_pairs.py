# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Per-rail RDMA bandwidth between node pairs, from perftest's ib_write_bw (github.com/linux-rdma/perftest).

An all_reduce floor across a pool says that the pool is slow, and the NCCL bisect needs rounds to
find the node. ib_write_bw between rail-aligned NICs of two nodes measures each port directly: rail
``r`` of node A writes to rail ``r`` of node B, every rail of the pair at once (one server per rail,
each on its own TCP port, ``-p``), every pair of a round at once. Pure planning and judging: no I/O.

* :func:`schedule` pairs the nodes in rounds of disjoint pairs. ``all``: the circle method
  (round-robin): every pair of an N-node pool exactly once in N-1 rounds (N odd: one node sits out
  each round, N rounds). ``rail``: only neighbours (node i with node i+1, and the last with the
  first from three nodes on, so that every node has two partners), in two rounds (three when N is
  odd): a quick check.
* :func:`node_rails` reads a node's rails from its gathered facts (``gpufleet_hw``): the fabric's
  RDMA ports in device order, each with the GPU it is PIX/PXB to in ``nvidia-smi topo -m`` (the
  GPU ``--use_cuda`` puts the buffer on, for GPUDirect RDMA).
* :func:`plan` gives each round's server and client side per node: device, IB port, TCP port, GPU.
* :func:`parse` reads ib_write_bw's result table.
* :func:`judge` narrows what is below the floor to a port (the rail is slow with every partner:
  ``RDMA_PORT_SLOW``) or a link (slow with one partner only: ``RDMA_LINK_SLOW``), as the NCCL bisect
  narrows a slow pool to nodes; a run without a result table is ``RDMA_PAIR_FAILED``, never a pass.

Rail r listens on TCP port 18515 + r (perftest's default port and the ports above it): the firewall
role opens ``firewall_perftest_ports`` between the cluster's members for that exchange.

What ib_write_bw prints (perftest's source, src/perftest_parameters.h: ``RESULT_LINE``,
``RESULT_FMT`` / ``RESULT_FMT_G`` and ``REPORT_FMT``; the figures are computed in
``print_report_bw`` of src/perftest_parameters.c), after the settings and the QP addresses::

    ---------------------------------------------------------------------------------------
     #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
     1048576    23710            0.00               390.41             0.046540
    ---------------------------------------------------------------------------------------

``--report_gbits`` gives Gb/s (10^9 bits per second); without it the columns say ``MB/sec``, and
perftest's MB is 2^20 bytes (``format_factor`` 0x100000), so 1 MB/sec = 8 x 1048576 / 10^9
Gb/s. A run of ``-D`` seconds (duration mode) prints the peak as 0.00: the figure judged is the
average. The tool may print a line between the header and the figures (e.g. ``Conflicting CPU
frequency values detected``); it is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import DRAIN_REASON_PREFIX
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, violation

FIELD = "acceptance.rdma_pairs"
MODES = ("all", "rail")
# perftest's own duration (DEF_DURATION, 5 s); 1 MiB messages reach line rate on NDR (perftest's
# default, 64 KiB, does too on most links, but less surely through a switch).
DEFAULTS = {
    "mode": None,
    "min_fraction": None,
    "min_gbps": None,
    "size": "1M",
    "duration": 5,
    "iters": None,
}
# Without a floor in the brief: 90 % of the port's line rate. Published ib_write_bw runs reach
# 97-99 % of it with large messages (e.g. 394 Gb/s on NDR 400).
DEFAULT_FRACTION = 0.9
BASE_TCP_PORT = 18515  # perftest's DEF_PORT; rail r's server listens on BASE_TCP_PORT + r
MB_TO_GBIT = 8 * 1048576 / 1e9
NEAR_TOKENS = ("PIX", "PXB")
_LAYER_FOR_FABRIC = {"infiniband": "InfiniBand", "roce": "Ethernet"}

_HEADER = re.compile(r"^\s*#bytes\s+#iterations\s+BW peak\[(Gb|MB)/sec\]\s+BW average\[(Gb|MB)/sec\]\s+MsgRate\[Mpps\]")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s*$")
# The brief's sizes (schema.Size): 1M, 1MiB, 1.5G, 65536, 64 KB; binary multiples, as nccl-tests reads them.
_SIZE = re.compile(r"^ *(\d+(?:\.\d+)?) *(?:([KMGT])i?B?|B)? *$", re.I)


class RdmaPairsError(ValueError):
    """ib_write_bw's output holds no complete result."""


def settings(brief: Mapping | None) -> dict:
    """The brief's ``acceptance.rdma_pairs`` with its defaults; ``mode`` None: the gate is off."""
    given = ((brief or {}).get("acceptance") or {}).get("rdma_pairs") or {}
    if not isinstance(given, Mapping):
        raise RdmaPairsError(f"{FIELD}: expected a mapping, found {type(given).__name__} {given!r}")
    return {**DEFAULTS, **{k: v for k, v in given.items() if v is not None}}


def size_bytes(size) -> int:
    """``1M`` -> 1048576 (ib_write_bw's -s takes bytes)."""
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    m = _SIZE.match(str(size).strip())
    if not m:
        raise RdmaPairsError(f"{FIELD}.size: expected bytes or a size such as 1M, found {size!r}")
    unit = (m.group(2) or "").upper()
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[unit])


def floor_gbit(rule: Mapping, link_speed_gbps) -> dict:
    """The per-port floor in Gb/s (ib_write_bw's unit with --report_gbits) and how it was set.

    ``min_gbps`` is in GB/s like every acceptance floor of the brief: x 8 gives Gb/s. ``min_fraction``
    is of the fabric's ``link_speed_gbps`` (Gb/s). Neither given: DEFAULT_FRACTION of the line rate.
    """
    if rule.get("min_gbps") is not None:
        gbps = float(rule["min_gbps"])
        return {"gbit_s": gbps * 8, "how": f"{FIELD}.min_gbps {gbps:g} GB/s x 8 = {gbps * 8:g} Gb/s"}
    fraction = float(rule["min_fraction"]) if rule.get("min_fraction") is not None else DEFAULT_FRACTION
    if not link_speed_gbps:
        return {"gbit_s": None, "how": "no networks.fabric.link_speed_gbps in the brief: no floor"}
    gbit = fraction * float(link_speed_gbps)
    return {
        "gbit_s": round(gbit, 3),
        "how": f"{fraction:g} x networks.fabric.link_speed_gbps {float(link_speed_gbps):g} Gb/s = {gbit:g} Gb/s",
    }


# --- schedule ------------------------------------------------------------------------------------


def schedule(nodes: Sequence[str], mode: str = "all") -> list[list[tuple[str, str]]]:
    """Rounds of disjoint pairs. ``all``: every pair once (circle method); ``rail``: neighbours."""
    nodes = list(dict.fromkeys(nodes))
    if mode not in MODES:
        raise RdmaPairsError(f"{FIELD}.mode: expected one of {', '.join(MODES)}, found {mode!r}")
    if len(nodes) < 2:
        return []
    if mode == "rail":
        edges = [(nodes[i], nodes[i + 1]) for i in range(len(nodes) - 1)]
        if len(nodes) >= 3:
            edges.append((nodes[-1], nodes[0]))
        rounds: list[list[tuple[str, str]]] = []
        for a, b in edges:
            for rnd in rounds:
                if not any(x in pair for pair in rnd for x in (a, b)):
                    rnd.append((a, b))
                    break
            else:
                rounds.append([(a, b)])
        return rounds
    ring: list[str | None] = list(nodes)
    if len(ring) % 2:
        ring.append(None)  # the bye: its partner sits the round out
    n = len(ring)
    out = []
    for _ in range(n - 1):
        pairs = [(ring[i], ring[n - 1 - i]) for i in range(n // 2)]
        out.append([(a, b) for a, b in pairs if a is not None and b is not None])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return out


# --- rails of a node -----------------------------------------------------------------------------


def _natural(name: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name))]


def node_rails(hw: Mapping | None, brief: Mapping | None, pool: Mapping | None) -> list[dict]:
    """``[{rail, device, port, gpu, rate_gbps, state}]``: the fabric's RDMA ports of a node, rail i the
    i-th in device order (mlx5_0 before mlx5_10), ``gpu`` the index it is PIX/PXB to (None: none)."""
    hw = hw if isinstance(hw, Mapping) else {}
    pool = pool if isinstance(pool, Mapping) else {}
    fabric = ((brief or {}).get("networks") or {}).get("fabric") or {}
    layer = _LAYER_FOR_FABRIC.get(str(fabric.get("type") or "").lower())
    ports = [p for p in ((hw.get("rdma") or {}).get("ports") or []) if isinstance(p, Mapping)]
    names = pool.get("rdma_devices")
    if names:
        import fnmatch

        ports = [p for p in ports if any(fnmatch.fnmatchcase(str(p.get("device")), n) for n in names)]
    else:
        ports = [p for p in ports if "bond" not in str(p.get("device"))]
        matching = [p for p in ports if p.get("link_layer") == layer]
        if layer and len(matching) == int(pool.get("nics_per_node") or 0):
            ports = matching
    ports = sorted(ports, key=lambda p: (_natural(p.get("device")), int(p.get("port") or 1)))
    topo = hw.get("topology") or {}
    column = {n.get("name"): k for k, n in enumerate(topo.get("nics") or []) if isinstance(n, Mapping)}
    matrix = topo.get("gpu_nic") or []
    out = []
    for rail, p in enumerate(ports):
        k = column.get(p.get("device"))
        gpu = None
        if k is not None:
            near = [g for g, row in enumerate(matrix) if k < len(row) and row[k] in NEAR_TOKENS]
            gpu = near[0] if near else None
        out.append(
            {
                "rail": rail,
                "device": p.get("device"),
                "port": int(p.get("port") or 1),
                "gpu": gpu,
                "rate_gbps": p.get("rate_gbps"),
                "state": p.get("state"),
            }
        )
    return out


# --- plan ----------------------------------------------------------------------------------------


def plan(
    rounds: Sequence[Sequence[Sequence[str]]],
    rails: Mapping[str, Sequence[Mapping]],
    addresses: Mapping[str, str] | None = None,
    *,
    base_port: int = BASE_TCP_PORT,
    gpudirect: bool = False,
    spread: bool = False,
    port_count: int | None = None,
) -> list[dict]:
    """Each round: ``{round, pairs: [{server, client, ports: [...]}], skipped: [...]}``.

    The first node of a pair is the server (ib_write_bw without an address: it waits), the second
    the client (it writes to the server's address). Rail r's server listens on TCP port base_port + r
    (a node is in one pair per round); ``spread`` gives every rail of the round its own port from
    base_port up instead, for nodes that share one address (a test bed on one machine); those ports
    are never reused by a later round. A rail
    only one of the two nodes has is listed in ``skipped`` (the hardware gate names the missing
    port); a pair where either node has no rail at all is skipped whole.

    ``port_count``: the TCP ports open from base_port up (the firewall role's firewall_perftest_ports,
    128). Each node runs its own agenda of rounds (modules/rdma_pairs_run.py), so two partners may be
    a round or more apart: a client of round k must not meet its partner's server of an earlier round,
    still waiting for that round's client on the same port. With ``port_count``, consecutive rounds
    listen in consecutive banks of ports (round k on base_port + ((k - 1) mod banks) x stride + r,
    stride the pool's rail count, banks = port_count // stride: 16 banks for 8 rails), so that only
    partners a whole multiple of the banks apart could meet on a port.
    """
    addresses = addresses or {}
    stride = 1 + max((int(r["rail"]) for rs in rails.values() for r in rs or []), default=0)
    banks = max(1, int(port_count) // stride) if port_count else 1
    out = []
    tcp = base_port
    for index, rnd in enumerate(rounds, start=1):
        pairs, skipped = [], []
        bank = base_port + ((index - 1) % banks) * stride
        for server, client in rnd:
            mine = {int(r["rail"]): r for r in rails.get(server) or []}
            theirs = {int(r["rail"]): r for r in rails.get(client) or []}
            ports = []
            for rail in sorted(set(mine) | set(theirs)):
                if rail not in mine or rail not in theirs:
                    lacking = server if rail not in mine else client
                    skipped.append(
                        {"server": server, "client": client, "rail": rail, "why": f"{lacking} has no rail {rail}"}
                    )
                    continue
                s, c = mine[rail], theirs[rail]
                tcp += 1
                ports.append(
                    {
                        "rail": rail,
                        "tcp_port": (tcp - 1) if spread else bank + rail,
                        "server_device": s["device"],
                        "server_ib_port": s.get("port", 1),
                        "server_gpu": s.get("gpu") if gpudirect else None,
                        "client_device": c["device"],
                        "client_ib_port": c.get("port", 1),
                        "client_gpu": c.get("gpu") if gpudirect else None,
                    }
                )
            if ports:
                pairs.append(
                    {"server": server, "client": client, "address": addresses.get(server) or server, "ports": ports}
                )
        out.append({"round": index, "pairs": pairs, "skipped": skipped})
    return out


def agendas(rounds: Sequence[Mapping]) -> dict[str, list[dict]]:
    """``{node: [{round, side, partner, server, client, address, ports}]}``: each node's rounds of the
    plan in order, its side in each (a round where it has no pair, its bye, is left out); the client's
    ``address`` is its server's. Each node runs its agenda itself (modules/rdma_pairs_run.py)."""
    out: dict[str, list[dict]] = {}
    for rnd in rounds:
        for pair in rnd.get("pairs") or []:
            for side, node, partner in (
                ("server", pair["server"], pair["client"]),
                ("client", pair["client"], pair["server"]),
            ):
                entry = {
                    "round": rnd["round"],
                    "side": side,
                    "partner": partner,
                    "server": pair["server"],
                    "client": pair["client"],
                    "ports": pair["ports"],
                }
                if side == "client":
                    entry["address"] = pair.get("address") or pair["server"]
                out.setdefault(node, []).append(entry)
    for entries in out.values():
        entries.sort(key=lambda e: e["round"])
    return out


def argv(binary: str, side: str, port: Mapping, rule: Mapping, address: str | None = None) -> list[str]:
    """ib_write_bw's command line for one side of one rail."""
    dev = port[f"{side}_device"]
    cmd = [binary, "-d", str(dev), "-i", str(port[f"{side}_ib_port"]), "-p", str(port["tcp_port"])]
    cmd += ["-s", str(size_bytes(rule.get("size") or DEFAULTS["size"])), "--report_gbits", "-F"]
    if rule.get("iters"):
        cmd += ["-n", str(int(rule["iters"]))]
    else:
        cmd += ["-D", str(int(rule.get("duration") or DEFAULTS["duration"]))]
    gpu = port.get(f"{side}_gpu")
    if gpu is not None:
        cmd.append(f"--use_cuda={int(gpu)}")
    if side == "client":
        cmd.append(str(address))
    return cmd


# --- parse ---------------------------------------------------------------------------------------


def parse(output: str) -> dict:
    """ib_write_bw's result table -> ``{bytes, iterations, peak_gbit, average_gbit, msg_rate_mpps, unit}``.

    Figures in MB/sec (no --report_gbits) are converted to Gb/s (x 8 x 2^20 / 10^9). No header, or
    no figures after it: :class:`RdmaPairsError` naming what is missing.
    """
    lines = (output or "").splitlines()
    if not any(ln.strip() for ln in lines):
        raise RdmaPairsError("no output")
    start = next((i for i, ln in enumerate(lines) if _HEADER.match(ln)), None)
    if start is None:
        tail = " | ".join(ln.strip() for ln in lines[-3:] if ln.strip())
        raise RdmaPairsError(f"no result table (#bytes ... BW average ...): the run did not finish ({tail})")
    unit = _HEADER.match(lines[start]).group(2)
    rows = []
    for ln in lines[start + 1 :]:
        if set(ln.strip()) == {"-"}:
            break
        m = _ROW.match(ln)
        if m:
            rows.append(m)
    if not rows:
        raise RdmaPairsError("a result header without figures: the output is cut short")
    m = rows[-1]  # the largest message (with -a, one row per size); one row otherwise
    factor = 1.0 if unit == "Gb" else MB_TO_GBIT
    return {
        "bytes": int(m.group(1)),
        "iterations": int(m.group(2)),
        "peak_gbit": round(float(m.group(3)) * factor, 2),
        "average_gbit": round(float(m.group(4)) * factor, 2),
        "msg_rate_mpps": float(m.group(5)),
        "unit": f"{unit}/sec",
    }


def measure(result: Mapping) -> dict:
    """One rail of one pair as run (``rc``, ``stdout``, ``stderr``, ``timed_out`` of the client, the
    server's ``server_rc`` / ``server_timed_out``): its figures or why it failed."""
    row = {
        k: result.get(k) for k in ("round", "rail", "server", "client", "server_device", "client_device", "tcp_port")
    }
    try:
        if result.get("timed_out"):
            raise RdmaPairsError(f"the client did not finish within {result.get('timeout', '?')} s")
        if result.get("rc") not in (0, None):
            tail = " | ".join(
                ln.strip()
                for ln in f"{result.get('stdout') or ''}\n{result.get('stderr') or ''}".strip().splitlines()[-3:]
            )
            raise RdmaPairsError(f"the client exited with status {result.get('rc')}: {tail or 'no output'}")
        if result.get("rc") is None:
            raise RdmaPairsError(str(result.get("reason") or "the client did not run"))
        figures = parse(str(result.get("stdout") or ""))
    except RdmaPairsError as exc:
        row.update(status="failed", reason=str(exc))
        return row
    row.update(status="measured", **figures)
    if result.get("server_timed_out") or result.get("server_rc") not in (0, None):
        row["server_note"] = (
            "the server did not finish in time"
            if result.get("server_timed_out")
            else f"server exit {result.get('server_rc')}"
        )
    return row


# --- judge ---------------------------------------------------------------------------------------


def _end(node: str, device: str | None, rail) -> str:
    return f"{node} {device} (rail {rail})"


def judge(results: Iterable[Mapping], floor: float | None, *, how: str = "", pool: str | None = None) -> dict:
    """``{pairs, ports, violations}`` from every rail of every pair of a pool's schedule.

    A (node, rail) below ``floor`` (Gb/s) with every partner, two partners or more, is the port:
    ``RDMA_PORT_SLOW`` for that node. A pair's rail below the floor that neither end's port explains
    is the link between them: ``RDMA_LINK_SLOW`` naming both ends (with one partner only, as in a
    two-node pool, a slow port and a slow link cannot be told apart: the link names both). A rail
    whose run failed with every partner (two or more) is that node's port (``RDMA_PAIR_FAILED``
    for the node); any other failed run is ``RDMA_PAIR_FAILED`` naming both ends.
    """
    rows = [measure(r) for r in results]
    where = f" in pool {pool}" if pool else ""
    by_port: dict[tuple[str, int], list[dict]] = {}
    device_of: dict[tuple[str, int], str] = {}
    for row in rows:
        for side, dev in (("server", "server_device"), ("client", "client_device")):
            key = (row[side], int(row["rail"]))
            by_port.setdefault(key, []).append(row)
            device_of[key] = row.get(dev)

    def below(row: dict) -> bool:
        return row["status"] == "measured" and floor is not None and row["average_gbit"] < floor

    ports = []
    slow_ports, dead_ports = set(), set()
    for key, seen in sorted(by_port.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        partners = len(seen)
        measured = [r for r in seen if r["status"] == "measured"]
        failed = [r for r in seen if r["status"] == "failed"]
        slow = [r for r in measured if below(r)]
        verdict = "ok"
        if partners >= 2 and failed and len(failed) == partners:
            verdict = "failed"
            dead_ports.add(key)
        elif partners >= 2 and slow and len(slow) + len(failed) == partners:
            verdict = "slow"
            slow_ports.add(key)
        elif slow or failed:
            verdict = "suspect"
        ports.append(
            {
                "host": key[0],
                "rail": key[1],
                "device": device_of[key],
                "partners": partners,
                "min_gbit": min((r["average_gbit"] for r in measured), default=None),
                # The port's own figure: its best partner (a slow port is slow with all of them).
                "best_gbit": max((r["average_gbit"] for r in measured), default=None),
                "slow_with": sorted(r["client"] if r["server"] == key[0] else r["server"] for r in slow),
                "failed_with": sorted(r["client"] if r["server"] == key[0] else r["server"] for r in failed),
                "verdict": verdict,
            }
        )
    found: list[dict] = []
    for key in sorted(slow_ports):
        node, rail = key
        seen = [r for r in by_port[key] if r["status"] == "measured"]
        figures = sorted(r["average_gbit"] for r in seen)
        shown = f"{figures[0]:.2f}" if len(figures) == 1 else f"{figures[0]:.2f}-{figures[-1]:.2f}"
        found.append(
            violation(
                "RDMA_PORT_SLOW",
                FIELD,
                f"{_end(node, device_of[key], rail)}{where} measures {shown} Gb/s with each of its "
                f"{len(by_port[key])} partners (ib_write_bw), expected at least {floor:g} Gb/s ({how}): the port, "
                "not one link. Check its cable and transceiver, ibstat and the port's error counters (perfquery)",
                host=node,
            )
        )
    for key in sorted(dead_ports):
        node, rail = key
        reason = by_port[key][0].get("reason")
        found.append(
            violation(
                "RDMA_PAIR_FAILED",
                FIELD,
                f"{_end(node, device_of[key], rail)}{where}: ib_write_bw failed with each of its {len(by_port[key])} "
                f"partners ({reason}); the port does not carry RDMA traffic. Check ibstat, the subnet manager "
                "and the port's cable",
                host=node,
            )
        )
    for row in rows:
        a, b = (row["server"], int(row["rail"])), (row["client"], int(row["rail"]))
        if row["status"] == "failed" and a not in dead_ports and b not in dead_ports:
            found.append(
                violation(
                    "RDMA_PAIR_FAILED",
                    FIELD,
                    f"{_end(row['server'], row.get('server_device'), row['rail'])} <- "
                    f"{_end(row['client'], row.get('client_device'), row['rail'])}{where}: {row['reason']}. "
                    "A run without its result table is not a pass; see the output in the report",
                    severity=ERROR,
                )
            )
        elif below(row) and a not in slow_ports and b not in slow_ports:
            found.append(
                violation(
                    "RDMA_LINK_SLOW",
                    FIELD,
                    f"{_end(row['client'], row.get('client_device'), row['rail'])} -> "
                    f"{_end(row['server'], row.get('server_device'), row['rail'])}{where} writes at "
                    f"{row['average_gbit']:.2f} Gb/s, expected at least {floor:g} Gb/s ({how}); both ports are at "
                    "the floor with their other partners (or have no other): the link between them (cables, "
                    "the switch ports on the path)",
                    severity=ERROR,
                )
            )
    return {"floor_gbit": floor, "floor_how": how, "pairs": rows, "ports": ports, "violations": found}


def not_run(plan: Mapping) -> list[dict]:
    """``RDMA_PAIR_FAILED`` for what the brief asked and nothing measured: a node without a rail its
    partners have (one per node and rail), or a pool whose pairs had no rail at all."""
    rounds = plan.get("rounds") or []
    where = f" in pool {plan.get('pool')}" if plan.get("pool") else ""
    lacking: dict[tuple[str, int], list[str]] = {}
    for rnd in rounds:
        for s in rnd.get("skipped") or []:
            node = s["why"].split(" has no rail ")[0]
            partner = s["client"] if node == s["server"] else s["server"]
            lacking.setdefault((node, int(s["rail"])), []).append(partner)
    out = [
        violation(
            "RDMA_PAIR_FAILED",
            FIELD,
            f"{node}{where} has no rail {rail} (no fabric RDMA port for it was gathered), which "
            f"{', '.join(sorted(set(partners)))} have: rail {rail} was not measured. The hardware gate names the "
            "missing port (HW_RDMA_PORT_COUNT, ibstat)",
            host=node,
        )
        for (node, rail), partners in sorted(lacking.items())
    ]
    planned = sum(len(p.get("ports") or []) for rnd in rounds for p in rnd.get("pairs") or [])
    if plan.get("enabled") and rounds and not planned and not out:
        out.append(
            violation(
                "RDMA_PAIR_FAILED",
                FIELD,
                f"no rail{where} could be paired: no node recorded a fabric RDMA port (gpu_facts' rdma.ports), so "
                "ib_write_bw measured nothing. Check the brief's fabric and the nodes' RDMA devices (ibstat)",
            )
        )
    return out


def drain_reasons(records: Iterable[Mapping] | None) -> dict[str, list[str]]:
    """``{host: [reason]}``: the nodes the pools' RDMA records blame for a port (slow or failed with
    every partner), each reason short enough for Slurm's ``Reason=``
    (``rdma port slow mlx5_4 rail 4, 196.1 < 360 Gb/s``)."""
    out: dict[str, list[str]] = {}
    for record in records or []:
        floor = (record or {}).get("floor_gbit")
        for port in (record or {}).get("ports") or []:
            if port.get("verdict") == "slow":
                text = f"rdma port slow {port.get('device')} rail {port.get('rail')}, {float(port['min_gbit']):.1f}"
                text += f" < {float(floor):g} Gb/s" if floor is not None else " Gb/s"
            elif port.get("verdict") == "failed":
                text = f"rdma port failed {port.get('device')} rail {port.get('rail')} with every partner"
            else:
                continue
            out.setdefault(port["host"], []).append(text)
    return out


def with_drain(to_drain: Iterable[Mapping], records: Iterable[Mapping] | None, stamp: str | None = None) -> list[dict]:
    """The drain list (``[{host, reason}]``, each reason ``gpufleet acceptance: ... (report STAMP)``)
    with the RDMA ports' reasons added: to a node already listed, or as a new entry."""
    extra = drain_reasons(records)
    out = []
    for item in to_drain or []:
        item = dict(item)
        more = extra.pop(item.get("host"), [])
        if more:
            head, sep, tail = str(item.get("reason") or "").partition(" (report ")
            item["reason"] = f"{head}; {'; '.join(more)}{sep}{tail}"
        out.append(item)
    for host, reasons in extra.items():
        text = f"{DRAIN_REASON_PREFIX}: {'; '.join(reasons)}"
        if stamp:
            text += f" (report {stamp})"
        out.append({"host": host, "reason": text})
    return out
