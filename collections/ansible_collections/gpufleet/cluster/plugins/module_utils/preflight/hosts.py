# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phase: every inventory host's name and addresses, and whether the networks hold them all.

``check_hosts(brief, groups, hostvars, pools, networks)`` needs the groups phase's ``Pools`` (which
hosts are in the cluster, each one's NICs) and the networks phase's ``Networks`` (where each address
must lie). Duplicate addresses are looked for across every inventory host, in or out of the cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import show
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.addresses import Net, ip_text, parse_ip
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.groups import Pools
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.networks import Networks

_HOST_LABEL_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
# kube-controller-manager --node-cidr-mask-size default (IPv4): each node takes one such block of the pod network.
K8S_NODE_CIDR_PREFIX_V4 = 24
MAX_FABRIC_IPS_CHECKED = 64
_IMPLICIT_HOSTS = frozenset({"localhost"})


def check_hosts(
    brief: dict, groups: Mapping[str, Any], hostvars: Mapping[str, Any], pools: Pools, networks: Networks
) -> list[dict]:
    out: list[dict] = []
    mgmt, bmc, storage = networks.get("management"), networks.get("bmc"), networks.get("storage")
    has_storage = bool(brief["networks"].get("storage"))
    ftype = (brief["networks"].get("fabric") or {}).get("type")
    plane = brief["cluster"].get("control_plane")
    nics_of = {h: p.spec.get("nics_per_node", 0) for h, p in pools.host_pool.items()}
    cluster_hosts = pools.cluster_hosts()
    cluster_set = set(cluster_hosts)
    all_hosts = groups.get("all") if isinstance(groups.get("all"), list | tuple) else None
    if all_hosts is None:
        all_hosts = list(dict.fromkeys(h for hs in groups.values() if isinstance(hs, list | tuple) for h in hs))
    rails = networks.rails
    used: dict[tuple[int, int], tuple[str, str]] = {}
    counts = {"management": 0, "bmc": 0, "storage": 0}
    rail_counts = [0] * len(rails)
    for host in all_hosts:
        if not isinstance(host, str):
            continue
        in_cluster = host in cluster_set
        if not in_cluster and host not in _IMPLICIT_HOSTS:
            out.append(make("HOST_UNASSIGNED", "groups", host=host))
        if in_cluster and (not _HOST_LABEL_RE.fullmatch(host) or (plane == "kubernetes" and host != host.lower())):
            extra = " (lower case for Kubernetes)" if plane == "kubernetes" else ""
            out.append(make("HOST_NAME_INVALID", "inventory_hostname", host=host, extra=extra, found=show(host)))
        vars_ = hostvars.get(host)
        if not isinstance(vars_, Mapping):
            vars_ = {}
        nics = nics_of.get(host, 0)
        singles = [
            ("ansible_host", mgmt, True, "management"),
            ("bmc_ip", bmc, True, "bmc"),
            ("storage_ip", storage, has_storage, "storage"),
        ]
        for key, net, required, netname in singles:
            value = vars_.get(key)
            if value is None:
                if in_cluster and required:
                    out.append(make("HOST_VAR_MISSING", key, host=host, variant="address", key=key, net=netname))
                continue
            if key == "storage_ip" and not has_storage:
                continue
            addr = _host_addr(out, host, key, value, net, netname if in_cluster else None, in_cluster)
            if addr is not None:
                _mark_used(out, used, addr, host, key)
                if in_cluster:
                    counts[netname] += 1
        fips = vars_.get("fabric_ips")
        wants_fabric = in_cluster and ftype not in (None, "none") and nics > 0
        if fips is None:
            if wants_fabric:
                out.append(make("HOST_VAR_MISSING", "fabric_ips", host=host, variant="fabric", nics=nics))
            continue
        if not isinstance(fips, list | tuple):
            out.append(make("HOST_VAR_WRONG_TYPE", "fabric_ips", host=host, nics=nics, found=show(fips)))
            continue
        if wants_fabric and len(fips) != nics:
            out.append(make("HOST_FABRIC_COUNT", "fabric_ips", host=host, nics=nics, found=len(fips)))
        for r, value in enumerate(fips[:MAX_FABRIC_IPS_CHECKED]):
            rail = rails[r] if r < len(rails) else None
            field = f"fabric_ips[{r}]"
            addr = _host_addr(
                out, host, field, value, rail, f"fabric.rails[{r}]" if in_cluster and rail else None, in_cluster
            )
            if addr is not None:
                _mark_used(out, used, addr, host, field)
                if in_cluster and r < len(rail_counts):
                    rail_counts[r] += 1
    out.extend(_sizes(brief, networks, len(cluster_hosts), counts, rail_counts))
    return out


def _host_addr(out, host, field, value, net: Net | None, netname: str | None, in_cluster: bool = True):
    addr = parse_ip(value)
    if addr is None:
        if not in_cluster:  # a host outside the cluster may use a DNS name: only IPs are tracked
            return None
        out.append(make("HOST_ADDR_INVALID", field, host=host, found=show(value)))
        return None
    if net is not None and netname is not None:
        if not net.contains(addr):
            out.append(make("HOST_ADDR_OUTSIDE_NET", field, host=host, netname=netname, net=net.text, value=value))
        elif net.reserved(addr):
            which = "network" if addr[1] == net.first else "broadcast"
            out.append(make("HOST_ADDR_RESERVED", field, host=host, net=net.text, which=which, value=value))
    return addr


def _mark_used(out, used, addr, host, field) -> None:
    prev = used.get(addr)
    if prev is None:
        used[addr] = (host, field)
        return
    out.append(
        make("HOST_ADDR_DUPLICATE", field, host=host, addr=ip_text(addr), other_host=prev[0], other_field=prev[1])
    )


def _sizes(brief: dict, networks: Networks, nodes: int, counts: dict[str, int], rail_counts: list[int]) -> list[dict]:
    """Each network holds its hosts (and its gateway); the pod network one node block per cluster host."""
    out = []
    nets = brief["networks"]
    for key in ("management", "bmc", "storage"):
        net = networks.get(key)
        if net is None:
            continue
        need = counts[key] + (1 if (nets.get(key) or {}).get("gateway") else 0)
        if need > net.usable():
            out.append(
                make(
                    "NET_TOO_SMALL",
                    f"networks.{key}.cidr",
                    variant="addresses",
                    need=need,
                    net=net.text,
                    usable=net.usable(),
                )
            )
    for r, net in enumerate(networks.rails):
        if net is not None and r < len(rail_counts) and rail_counts[r] > net.usable():
            out.append(
                make(
                    "NET_TOO_SMALL",
                    f"networks.fabric.rails[{r}].cidr",
                    variant="addresses",
                    need=rail_counts[r],
                    net=net.text,
                    usable=net.usable(),
                )
            )
    pod = networks.get("pod_cidr")
    if brief["cluster"].get("control_plane") == "kubernetes" and pod is not None and pod.version == 4:
        blocks = 2 ** (K8S_NODE_CIDR_PREFIX_V4 - pod.prefixlen) if pod.prefixlen <= K8S_NODE_CIDR_PREFIX_V4 else 0
        if blocks < nodes:
            out.append(
                make(
                    "NET_TOO_SMALL",
                    "networks.kubernetes.pod_cidr",
                    variant="pods",
                    prefix=K8S_NODE_CIDR_PREFIX_V4,
                    nodes=nodes,
                    net=pod.text,
                    blocks=blocks,
                )
            )
    return out


__all__ = ["K8S_NODE_CIDR_PREFIX_V4", "MAX_FABRIC_IPS_CHECKED", "check_hosts"]
