# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phases: the brief's networks (CIDRs, gateways, MTUs, overlaps, the Kubernetes ranges) and its
fabric against the pools.

``check_networks(brief)`` reads only the brief and returns its violations and the parsed
``Networks`` (the hosts and Kubernetes phases place addresses in them); ``check_fabric(brief,
pools)`` needs the catalogue's pools (their NICs and GPUDirect).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import show
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.addresses import Net, parse_cidr, parse_ip
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.catalogue import Pool
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make

# MTU ranges per network type: Ethernet (IPv6 minimum 1280, jumbo 9216), IPoIB datagram mode
# (IB MTU 4096 minus the 4-byte IPoIB header → 4092; 256 is the smallest IB MTU).
MTU_RANGES = {"ethernet": (1280, 9216), "roce": (1280, 9216), "infiniband": (256, 4092)}
# The apiserver's largest service range (IPv4).
K8S_SERVICE_MIN_PREFIX_V4 = 12


@dataclass(frozen=True)
class Networks:
    """The brief's networks that parsed: ``nets`` by key (management, bmc, storage, pod_cidr,
    service_cidr), ``rails`` one per fabric rail (None where the rail's CIDR did not parse)."""

    nets: Mapping[str, Net]
    rails: tuple[Net | None, ...]

    def get(self, key: str) -> Net | None:
        return self.nets.get(key)


def check_networks(brief: dict) -> tuple[list[dict], Networks]:
    out: list[dict] = []
    nets = brief["networks"]
    parsed: dict[str, Net] = {}
    rails: list[Net | None] = []
    k8s_plane = brief["cluster"].get("control_plane") == "kubernetes"
    all_nets: list[Net] = []
    for key in ("management", "bmc", "storage"):
        spec = nets.get(key)
        if not spec:
            continue
        net = parse_cidr(spec.get("cidr"), f"networks.{key}.cidr", out)
        if net is None:
            continue
        parsed[key] = net
        all_nets.append(net)
        out.extend(_gateway(net, spec.get("gateway"), f"networks.{key}.gateway"))
        out.extend(_mtu("ethernet", spec.get("mtu"), f"networks.{key}.mtu"))
    fabric = nets.get("fabric") or {}
    for r, rail in enumerate(fabric.get("rails") or []):
        net = None
        if rail is not None:
            net = parse_cidr(rail.get("cidr"), f"networks.fabric.rails[{r}].cidr", out)
            if net is not None:
                all_nets.append(net)
                out.extend(_gateway(net, rail.get("gateway"), f"networks.fabric.rails[{r}].gateway"))
        rails.append(net)
    ftype = fabric.get("type")
    if ftype in MTU_RANGES:
        out.extend(_mtu(ftype, fabric.get("mtu"), "networks.fabric.mtu"))
    k8s = nets.get("kubernetes")
    if k8s_plane and not k8s:
        out.append(make("NET_K8S_MISSING", "networks.kubernetes"))
    elif k8s and not k8s_plane:
        out.append(make("NET_K8S_UNUSED", "networks.kubernetes", plane=brief["cluster"].get("control_plane")))
    if k8s:
        for key in ("pod_cidr", "service_cidr"):
            net = parse_cidr(k8s.get(key), f"networks.kubernetes.{key}", out)
            if net is not None:
                parsed[key] = net
                all_nets.append(net)
        svc = parsed.get("service_cidr")
        if svc is not None and svc.version == 4 and svc.prefixlen < K8S_SERVICE_MIN_PREFIX_V4:
            out.append(
                make("NET_TOO_LARGE", "networks.kubernetes.service_cidr", limit=K8S_SERVICE_MIN_PREFIX_V4, net=svc.text)
            )
    out.extend(_overlaps(all_nets))
    return out, Networks(parsed, tuple(rails))


def _overlaps(all_nets: list[Net]) -> list[dict]:
    """Sort by start, compare each with the furthest-reaching earlier one: O(n log n)."""
    out = []
    ordered = sorted(all_nets, key=lambda n: (n.version, n.first, -n.last))
    reach: Net | None = None
    for net in ordered:
        if reach is not None and reach.version == net.version and net.first <= reach.last:
            out.append(make("NET_OVERLAP", net.field, net=net.text, other=reach.text, other_field=reach.field))
        if reach is None or reach.version != net.version or net.last > reach.last:
            reach = net
    return out


def _gateway(net: Net, gateway: Any, field: str) -> list[dict]:
    if gateway is None:
        return []
    addr = parse_ip(gateway)
    if addr is None:
        return [make("NET_GATEWAY_INVALID", field, found=show(gateway))]
    if not net.contains(addr) or net.reserved(addr):
        return [make("NET_GATEWAY_OUTSIDE", field, net=net.text, gateway=gateway)]
    return []


def _mtu(kind: str, mtu: Any, field: str) -> list[dict]:
    if mtu is None:
        return []
    lo, hi = MTU_RANGES[kind]
    if not lo <= mtu <= hi:
        return [make("NET_MTU_RANGE", field, lo=lo, hi=hi, kind=kind, mtu=mtu)]
    return []


def check_fabric(brief: dict, pools: Iterable[Pool]) -> list[dict]:
    out: list[dict] = []
    fabric = brief["networks"].get("fabric") or {}
    ftype = fabric.get("type")
    if ftype is None:
        return out
    rails = fabric.get("rails") or []
    if ftype == "none":
        if rails:
            out.append(make("FABRIC_NONE_WITH_RAILS", "networks.fabric.rails", rails=len(rails)))
    elif "link_speed_gbps" not in fabric:
        out.append(make("FABRIC_LINK_SPEED_MISSING", "networks.fabric.link_speed_gbps", fabric=ftype))
    if fabric.get("roce") and ftype != "roce":
        out.append(make("FABRIC_ROCE_UNUSED", "networks.fabric.roce", fabric=ftype))
    for pool in pools:
        i, spec = pool.index, pool.spec
        nics = spec.get("nics_per_node", 0)
        if spec.get("gpudirect_rdma") and ftype not in ("infiniband", "roce"):
            out.append(make("FABRIC_GPUDIRECT_NEEDS_RDMA", f"pools[{i}].gpudirect_rdma", fabric=ftype))
        if ftype == "none" and nics:
            out.append(make("FABRIC_NONE_WITH_NICS", f"pools[{i}].nics_per_node", nics=nics))
        elif ftype != "none" and len(rails) < nics:
            out.append(
                make("FABRIC_RAILS_TOO_FEW", "networks.fabric.rails", pool=pool.label, nics=nics, rails=len(rails))
            )
    return out


__all__ = ["MTU_RANGES", "Networks", "check_fabric", "check_networks"]
