# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The preflight gate: the brief checked against an inventory, before any host is touched.

``check(brief, groups, hostvars)`` returns every violation at once. ``groups``
maps group name → host names (Ansible's ``groups``); ``hostvars`` maps host
name → its variables (only ``ansible_host``, ``bmc_ip``, ``storage_ip`` and
``fabric_ips`` are read). Nothing is templated or executed: values are data.

Speed: each CIDR is parsed once (netaddr), host addresses are parsed to
integers with ``socket.inet_pton`` and compared as integer ranges, so a
4,096-node inventory is checked in well under a second. The codes are listed
in docs/preflight-checks.md.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema as brief_schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import vendor_matrix
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.catalogue import (
    ACCELERATORS,
    Accelerator,
    Topology,
    default_single_node_floor_gbps,
    get_accelerator,
    get_topology,
    single_node_ceiling_gbps,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.compat import (
    cuda_min_driver,
    driver_branch,
    major_minor,
    nccl_cuda_majors,
    version_at_least,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import show
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import WARNING, violation
from ansible_collections.gpufleet.cluster.plugins.module_utils.storage import preflight as storage_checks

try:  # netaddr is a controller-side dependency (requirements.txt); targets never import this module.
    import netaddr
except ImportError:  # pragma: no cover - the venv always has it
    netaddr = None

HOST_VARS = ("ansible_host", "bmc_ip", "storage_ip", "fabric_ips")
_HOST_LABEL_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
# MTU ranges per network type: Ethernet (IPv6 minimum 1280, jumbo 9216), IPoIB datagram mode
# (IB MTU 4096 minus the 4-byte IPoIB header → 4092; 256 is the smallest IB MTU).
MTU_RANGES = {"ethernet": (1280, 9216), "roce": (1280, 9216), "infiniband": (256, 4092)}
# kube-controller-manager --node-cidr-mask-size default (IPv4) and the apiserver's largest service range.
K8S_NODE_CIDR_PREFIX_V4 = 24
K8S_SERVICE_MIN_PREFIX_V4 = 12
# Kubernetes minors gpufleet renders kubeadm configuration for (kubeadm.k8s.io/v1beta4 needs 1.31+),
# and the newest it was tested with (newer is a warning). The kubelet may be up to 3 minors older.
K8S_MIN_MINOR = (1, 31)
K8S_TESTED_MINOR = (1, 34)
K8S_KUBELET_SKEW = 3
# The CNI's smallest per-node block (Calico IPAM: /26 IPv4): the pod network must hold at least one.
K8S_CNI_BLOCK_V4 = {"calico": 26}
# Host variables that pin the Kubernetes packages per host (roles kubernetes_node / _control_plane).
K8S_HOST_PINS = ("kubernetes_node_version",)
# Every host variable the checks read (the preflight filter passes these, untemplated, and no
# others): the addresses, the per-host Kubernetes pin, the scratch devices and the consent to wipe
# them (storage_checks), and the acceptance launcher with its image as the first controller sees them.
READ_HOST_VARS = (
    *HOST_VARS,
    *K8S_HOST_PINS,
    "storage_scratch_devices",
    "storage_scratch_wipe",
    "acceptance_launcher",
    "acceptance_container_image",
    # Where a node stands (Slurm's topology.conf, Kubernetes' gpufleet.io/rack and gpufleet.io/leaf labels).
    "rack",
    "leaf_switch",
    # The cuda role's own pin of the toolkit package: a site that sets it installs a CUDA release
    # the role's table does not know (see _check_cuda_package).
    "cuda_package_version",
    "cuda_package_versions",
)
MAX_FABRIC_IPS_CHECKED = 64
_IMPLICIT_HOSTS = frozenset({"localhost"})


# --- addresses as integers -------------------------------------------------------------------------


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
    except OSError:
        pass
    try:
        return 6, int.from_bytes(socket.inet_pton(socket.AF_INET6, value), "big")
    except (OSError, ValueError):
        return None


def ip_text(addr: tuple[int, int]) -> str:
    fam, width = (socket.AF_INET, 4) if addr[0] == 4 else (socket.AF_INET6, 16)
    return socket.inet_ntop(fam, addr[1].to_bytes(width, "big"))


def parse_cidr(value: Any, field: str, out: list[dict]) -> Net | None:
    """Parse a CIDR with netaddr (strictly: dotted quad, explicit prefix, no host bits)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        if "/" not in text:
            raise ValueError("no prefix length")
        net = netaddr.IPNetwork(text)  # netaddr >= 1.0 parses IPv4 with inet_pton semantics
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        out.append(
            violation(
                "NET_CIDR_INVALID", field, f"expected a network such as 10.20.0.0/22, found {show(value)} ({exc})"
            )
        )
        return None
    if net.ip != net.network:
        out.append(
            violation(
                "NET_CIDR_HOST_BITS",
                field,
                f"expected the network address {net.cidr}, found {show(value)} (host bits set)",
            )
        )
    return Net(field, str(net.cidr), net.version, int(net.first), int(net.last), net.prefixlen)


# --- helpers ----------------------------------------------------------------------------------------


def _pool_label(pool: dict, i: int) -> str:
    return f"pools[{i}]" + (f" ({pool['name']})" if pool.get("name") else "")


def _hosts_of(groups: Mapping[str, Any], name: Any) -> list[str] | None:
    if not isinstance(name, str) or name not in groups:
        return None
    hosts = groups[name]
    if isinstance(hosts, list | tuple):
        return [h for h in hosts if isinstance(h, str)]
    return []


@dataclass
class Ctx:
    brief: dict
    groups: Mapping[str, Any]
    hostvars: Mapping[str, Any]
    out: list[dict]
    pools: list[tuple[int, dict, Accelerator | None, Topology | None, list[str]]]
    host_pool: dict[str, tuple[int, dict]]
    controllers: list[str]
    nets: dict[str, Net]
    rails: list[Net | None]
    k8s: bool


# --- the gate ---------------------------------------------------------------------------------------


def check(brief: Any, groups: Any, hostvars: Any) -> list[dict]:
    """Validate ``brief`` and check ``groups`` / ``hostvars`` against it. Returns every violation."""
    out: list[dict] = []
    if not isinstance(groups, Mapping):
        out.append(violation("INVENTORY_INVALID", "groups", f"expected a mapping of groups, found {show(groups)}"))
        groups = {}
    if not isinstance(hostvars, Mapping):
        out.append(
            violation("INVENTORY_INVALID", "hostvars", f"expected a mapping of host variables, found {show(hostvars)}")
        )
        hostvars = {}
    schema_out, clean = brief_schema.validate(brief)
    out.extend(schema_out)

    ctx = Ctx(clean, groups, hostvars, out, [], {}, [], {}, [], clean["cluster"].get("control_plane") == "kubernetes")
    _check_catalogue(ctx)
    _check_versions(ctx)
    _check_groups(ctx)
    _check_cuda_package(ctx)
    _check_networks(ctx)
    _check_fabric(ctx)
    _check_hosts(ctx)
    _check_acceptance(ctx)
    _check_launcher(ctx)
    _check_tenants(ctx)
    _check_kubernetes(ctx)
    out.extend(storage_checks.check(clean, groups, hostvars))  # storage, acceptance.storage/workload, cost
    return out


def _check_catalogue(ctx: Ctx) -> None:
    out = ctx.out
    seen_names: dict[str, int] = {}
    for i, pool in enumerate(ctx.brief["pools"]):
        if pool is None:
            continue
        name = pool.get("name")
        if name in seen_names:
            out.append(
                violation(
                    "POOL_DUPLICATE_NAME",
                    f"pools[{i}].name",
                    f"expected unique pool names, found {name!r} again (first at pools[{seen_names[name]}])",
                )
            )
        elif name:
            seen_names[name] = i
        acc = get_accelerator(pool.get("accelerator"))
        if acc is None and "accelerator" in pool:
            out.append(
                violation(
                    "CAT_UNKNOWN_ACCELERATOR",
                    f"pools[{i}].accelerator",
                    f"expected a catalogue key ({', '.join(ACCELERATORS)}), found {show(pool['accelerator'])}",
                )
            )
        topo = get_topology(pool.get("topology"))
        gpus = pool.get("gpus_per_node")
        if topo is not None and topo.gpus is not None and gpus is not None and gpus != topo.gpus:
            out.append(
                violation(
                    "CAT_TOPOLOGY_GPUS",
                    f"pools[{i}].gpus_per_node",
                    f"expected {topo.gpus} GPUs per node (topology {topo.name}), found gpus_per_node {gpus}",
                )
            )
        if acc is not None and topo is not None:
            if acc.form_factor not in topo.form_factors:
                out.append(
                    violation(
                        "CAT_TOPOLOGY_FORM_FACTOR",
                        f"pools[{i}].topology",
                        f"expected a {'/'.join(topo.form_factors)} accelerator for topology {topo.name}, "
                        f"found {acc.key} ({acc.form_factor})",
                    )
                )
            elif topo.name == "pcie-nvlink-bridge" and acc.nvlink_generation is None:
                out.append(
                    violation(
                        "CAT_TOPOLOGY_NVLINK",
                        f"pools[{i}].topology",
                        f"expected an NVLink accelerator for pcie-nvlink-bridge, found {acc.key} (no NVLink): use pcie",
                    )
                )
            if topo.name == "nvl72" and acc.key != "gb200-nvl72":
                out.append(
                    violation(
                        "CAT_TOPOLOGY_FORM_FACTOR",
                        f"pools[{i}].topology",
                        f"expected gb200-nvl72 for topology nvl72, found {acc.key}",
                    )
                )
        sharing = pool.get("sharing")
        cfg = pool.get("sharing_config") or {}
        if sharing == "mig":
            if acc is not None and not acc.mig:
                out.append(
                    violation(
                        "CAT_MIG_UNSUPPORTED",
                        f"pools[{i}].sharing",
                        f"expected a MIG-capable accelerator for sharing mig, found {acc.key} (no MIG)",
                    )
                )
            elif not cfg.get("mig_profile"):
                out.append(
                    violation(
                        "CAT_MIG_PROFILE_MISSING",
                        f"pools[{i}].sharing_config.mig_profile",
                        "expected sharing_config.mig_profile for sharing mig (e.g. "
                        f"{acc.mig_profiles[0] if acc else '1g.10gb'}), found none",
                    )
                )
            elif acc is not None and cfg["mig_profile"] not in acc.mig_profiles:
                out.append(
                    violation(
                        "CAT_MIG_PROFILE_UNKNOWN",
                        f"pools[{i}].sharing_config.mig_profile",
                        f"expected one of {acc.key}'s profiles ({', '.join(acc.mig_profiles)}), "
                        f"found {cfg['mig_profile']!r}",
                    )
                )
        elif cfg.get("mig_profile"):
            out.append(
                violation(
                    "CAT_SHARING_CONFIG_UNUSED",
                    f"pools[{i}].sharing_config.mig_profile",
                    f"expected mig_profile only with sharing mig, found sharing {sharing}",
                    severity=WARNING,
                )
            )
        if sharing == "time-slicing":
            replicas = cfg.get("replicas")
            if replicas is None or replicas < 2:
                out.append(
                    violation(
                        "CAT_TIMESLICING_REPLICAS",
                        f"pools[{i}].sharing_config.replicas",
                        f"expected sharing_config.replicas >= 2 for sharing time-slicing, found {show(replicas)}",
                    )
                )
        elif cfg.get("replicas") is not None:
            out.append(
                violation(
                    "CAT_SHARING_CONFIG_UNUSED",
                    f"pools[{i}].sharing_config.replicas",
                    f"expected replicas only with sharing time-slicing, found sharing {sharing}",
                    severity=WARNING,
                )
            )
        ctx.pools.append((i, pool, acc, topo, []))


def _check_versions(ctx: Ctx) -> None:
    out, sw = ctx.out, ctx.brief["software"]
    driver, cuda, nccl = sw.get("driver"), sw.get("cuda"), sw.get("nccl")
    if driver and cuda:
        minimum, exact = cuda_min_driver(cuda)
        if minimum is None:
            out.append(
                violation(
                    "VER_CUDA_UNKNOWN",
                    "software.cuda",
                    f"expected a CUDA release in NVIDIA's driver table (11.x-13.x), found {cuda!r}",
                    severity=WARNING,
                )
            )
        else:
            if not exact:
                out.append(
                    violation(
                        "VER_CUDA_UNKNOWN",
                        "software.cuda",
                        f"expected a CUDA release in gpufleet's copy of NVIDIA's Table 3, found {cuda}: checked "
                        "against the "
                        f"CUDA {major_minor(cuda)[0]}.x minor-compatibility floor {minimum} only",
                        severity=WARNING,
                    )
                )
            if not version_at_least(driver, minimum):
                out.append(
                    violation(
                        "VER_CUDA_DRIVER",
                        "software.driver",
                        f"expected driver >= {minimum} for CUDA {cuda}, found {driver}",
                    )
                )
    if cuda and nccl:
        majors = nccl_cuda_majors(nccl)
        mm = major_minor(cuda)
        if majors is None:
            out.append(
                violation(
                    "VER_NCCL_UNKNOWN",
                    "software.nccl",
                    f"expected an NCCL release gpufleet knows (>= 2.8), found {nccl!r}",
                    severity=WARNING,
                )
            )
        elif mm is not None and mm[0] not in majors:
            out.append(
                violation(
                    "VER_NCCL_CUDA",
                    "software.nccl",
                    f"expected an NCCL built for CUDA {mm[0]}.x (NCCL {nccl} is built for CUDA "
                    f"{' and '.join(map(str, majors))}.x), found CUDA {cuda}",
                )
            )
    if sw.get("rdma_stack") == "doca-ofed" and not sw.get("doca_ofed"):
        out.append(
            violation(
                "VER_DOCA_OFED_MISSING",
                "software.doca_ofed",
                "expected a doca_ofed version pin with rdma_stack doca-ofed, found none",
            )
        )
    branch = driver_branch(driver) if driver else None
    for i, pool, acc, _topo, _hosts in ctx.pools:
        if acc is None:
            continue
        if branch is not None and branch < acc.min_driver_branch:
            out.append(
                violation(
                    "VER_DRIVER_BRANCH",
                    "software.driver",
                    f"expected driver branch >= R{acc.min_driver_branch} for {_pool_label(pool, i)} {acc.key}, "
                    f"found {driver} (R{branch})",
                )
            )
        if cuda and version_at_least(cuda, acc.min_cuda) is False:
            out.append(
                violation(
                    "VER_CUDA_ACCELERATOR",
                    "software.cuda",
                    f"expected CUDA >= {acc.min_cuda} for {_pool_label(pool, i)} {acc.key}, found {cuda}",
                )
            )
        if acc.open_kernel_modules_required and sw.get("driver_flavor") == "proprietary":
            out.append(
                violation(
                    "VER_OPEN_MODULES_REQUIRED",
                    "software.driver_flavor",
                    f"expected driver_flavor open: {_pool_label(pool, i)} {acc.key} ({acc.architecture}) runs only "
                    "with the "
                    "open kernel modules; found proprietary",
                )
            )


def _cuda_package_pinned_by_site(vars_: Any, cuda: str) -> bool:
    """Whether a host's variables give the cuda role a package version for ``cuda`` themselves."""
    if not isinstance(vars_, Mapping):
        return False
    table = vars_.get("cuda_package_versions")
    return bool(vars_.get("cuda_package_version")) or (isinstance(table, Mapping) and bool(table.get(cuda)))


def _check_cuda_package(ctx: Ctx) -> None:
    """The brief's CUDA is a release the cuda role can install: its table (``cuda_package_versions``,
    the vendor matrix's CUDA rows) gives the exact cuda-toolkit package version of each CUDA minor
    it knows, and the role stops on any other before installing anything. Hosts whose inventory
    pins the package themselves (``cuda_package_version``, or their own ``cuda_package_versions``
    with this release) are fine."""
    cuda = ctx.brief["software"].get("cuda")
    if cuda is None or major_minor(cuda) is None:
        return  # missing or malformed: the brief schema reports it
    cuda = str(cuda)
    known = vendor_matrix.cuda_package_versions()
    if cuda in known:
        return
    gpu_hosts = [h for _i, _pool, _acc, _topo, hosts in ctx.pools for h in hosts]
    if gpu_hosts and all(_cuda_package_pinned_by_site(ctx.hostvars.get(h), cuda) for h in gpu_hosts):
        return
    ctx.out.append(
        violation(
            "VER_CUDA_PACKAGE_UNKNOWN",
            "software.cuda",
            f"expected a CUDA release the cuda role can install ({', '.join(sorted(known, key=major_minor))}: "
            f"cuda_package_versions), found {cuda}: add it to the vendor matrix's CUDA rows with its "
            "cuda-toolkit package version, or set cuda_package_version in the GPU hosts' group_vars",
        )
    )


def _check_groups(ctx: Ctx) -> None:
    out, groups = ctx.out, ctx.groups
    for n, (i, pool, acc, topo, _h) in enumerate(ctx.pools):
        if "group" not in pool:
            continue
        hosts = _hosts_of(groups, pool["group"])
        if hosts is None:
            out.append(
                violation(
                    "GROUP_MISSING",
                    f"pools[{i}].group",
                    f"expected inventory group {pool['group']!r} for {_pool_label(pool, i)}, found no such group",
                )
            )
            continue
        if not hosts:
            out.append(
                violation(
                    "GROUP_EMPTY",
                    f"pools[{i}].group",
                    f"expected at least one host in group {pool['group']!r}, found none",
                )
            )
        ctx.pools[n] = (i, pool, acc, topo, hosts)
        for h in hosts:
            prev = ctx.host_pool.get(h)
            if prev is not None and prev[0] != i:
                out.append(
                    violation(
                        "GROUP_HOST_IN_TWO_POOLS",
                        f"pools[{i}].group",
                        f"expected each host in one pool, found it in {_pool_label(prev[1], prev[0])} "
                        f"(group {prev[1]['group']!r}) and {_pool_label(pool, i)} (group {pool['group']!r})",
                        host=h,
                    )
                )
            elif prev is None:
                ctx.host_pool[h] = (i, pool)
    group = ctx.brief["controllers"].get("group")
    if group is None:
        return
    hosts = _hosts_of(groups, group)
    if hosts is None:
        out.append(
            violation(
                "GROUP_MISSING",
                "controllers.group",
                f"expected inventory group {group!r} for the controllers, found no such group",
            )
        )
        return
    ctx.controllers = hosts
    n = len(hosts)
    plane = ctx.brief["cluster"].get("control_plane")
    if plane == "slurm" and not 1 <= n <= 2:
        out.append(
            violation(
                "GROUP_CONTROLLERS_SIZE",
                "controllers.group",
                f"expected 1 Slurm controller (or 2: primary and backup), found {n} in group {group!r}",
            )
        )
    elif plane == "kubernetes" and not (n == 1 or (n >= 3 and n % 2 == 1)):
        out.append(
            violation(
                "GROUP_CONTROLLERS_SIZE",
                "controllers.group",
                f"expected 1 Kubernetes control-plane node or an odd number >= 3 (etcd quorum), "
                f"found {n} in group {group!r}",
            )
        )


def _net(ctx: Ctx, key: str, field: str, value: Any) -> Net | None:
    net = parse_cidr(value, field, ctx.out)
    if net is not None:
        ctx.nets[key] = net
    return net


def _check_networks(ctx: Ctx) -> None:
    out, nets = ctx.out, ctx.brief["networks"]
    all_nets: list[Net] = []
    for key in ("management", "bmc", "storage"):
        spec = nets.get(key)
        if not spec:
            continue
        net = _net(ctx, key, f"networks.{key}.cidr", spec.get("cidr"))
        if net is None:
            continue
        all_nets.append(net)
        _check_gateway(out, net, spec.get("gateway"), f"networks.{key}.gateway")
        _check_mtu(out, "ethernet", spec.get("mtu"), f"networks.{key}.mtu")
    fabric = nets.get("fabric") or {}
    for r, rail in enumerate(fabric.get("rails") or []):
        net = None
        if rail is not None:
            net = parse_cidr(rail.get("cidr"), f"networks.fabric.rails[{r}].cidr", out)
            if net is not None:
                all_nets.append(net)
                _check_gateway(out, net, rail.get("gateway"), f"networks.fabric.rails[{r}].gateway")
        ctx.rails.append(net)
    ftype = fabric.get("type")
    if ftype in MTU_RANGES:
        _check_mtu(out, ftype, fabric.get("mtu"), "networks.fabric.mtu")
    k8s = nets.get("kubernetes")
    if ctx.k8s and not k8s:
        out.append(
            violation(
                "NET_K8S_MISSING",
                "networks.kubernetes",
                "expected networks.kubernetes.pod_cidr and service_cidr for control_plane kubernetes, found none",
            )
        )
    elif k8s and not ctx.k8s:
        out.append(
            violation(
                "NET_K8S_UNUSED",
                "networks.kubernetes",
                f"expected pod/service CIDRs only with control_plane kubernetes, found "
                f"{ctx.brief['cluster'].get('control_plane')}",
                severity=WARNING,
            )
        )
    if k8s:
        for key in ("pod_cidr", "service_cidr"):
            net = _net(ctx, key, f"networks.kubernetes.{key}", k8s.get(key))
            if net is not None:
                all_nets.append(net)
        svc = ctx.nets.get("service_cidr")
        if svc is not None and svc.version == 4 and svc.prefixlen < K8S_SERVICE_MIN_PREFIX_V4:
            out.append(
                violation(
                    "NET_TOO_LARGE",
                    "networks.kubernetes.service_cidr",
                    f"expected a service range of /{K8S_SERVICE_MIN_PREFIX_V4} or smaller (kube-apiserver limit), "
                    f"found {svc.text}",
                )
            )
    # Overlaps: sort by start, compare each with the furthest-reaching earlier one: O(n log n).
    ordered = sorted(all_nets, key=lambda n: (n.version, n.first, -n.last))
    reach: Net | None = None
    for net in ordered:
        if reach is not None and reach.version == net.version and net.first <= reach.last:
            out.append(
                violation(
                    "NET_OVERLAP",
                    net.field,
                    f"expected networks that do not overlap, found {net.text} inside/overlapping "
                    f"{reach.text} ({reach.field})",
                )
            )
        if reach is None or reach.version != net.version or net.last > reach.last:
            reach = net


def _check_gateway(out: list[dict], net: Net, gateway: Any, field: str) -> None:
    if gateway is None:
        return
    addr = parse_ip(gateway)
    if addr is None:
        out.append(violation("NET_GATEWAY_INVALID", field, f"expected an IP address, found {show(gateway)}"))
    elif not net.contains(addr) or net.reserved(addr):
        out.append(
            violation("NET_GATEWAY_OUTSIDE", field, f"expected a host address inside {net.text}, found {gateway}")
        )


def _check_mtu(out: list[dict], kind: str, mtu: Any, field: str) -> None:
    if mtu is None:
        return
    lo, hi = MTU_RANGES[kind]
    if not lo <= mtu <= hi:
        out.append(violation("NET_MTU_RANGE", field, f"expected an MTU of {lo}-{hi} for {kind}, found {mtu}"))


def _check_fabric(ctx: Ctx) -> None:
    out, fabric = ctx.out, ctx.brief["networks"].get("fabric") or {}
    ftype = fabric.get("type")
    if ftype is None:
        return
    rails = fabric.get("rails") or []
    if ftype == "none":
        if rails:
            out.append(
                violation(
                    "FABRIC_NONE_WITH_RAILS",
                    "networks.fabric.rails",
                    f"expected no rails with fabric none, found {len(rails)}",
                    severity=WARNING,
                )
            )
    elif "link_speed_gbps" not in fabric:
        out.append(
            violation(
                "FABRIC_LINK_SPEED_MISSING",
                "networks.fabric.link_speed_gbps",
                f"expected link_speed_gbps for fabric {ftype} (acceptance derives its ceiling from it), found none",
            )
        )
    if fabric.get("roce") and ftype != "roce":
        out.append(
            violation(
                "FABRIC_ROCE_UNUSED",
                "networks.fabric.roce",
                f"expected RoCE QoS settings only with fabric roce, found fabric {ftype}",
                severity=WARNING,
            )
        )
    for i, pool, _acc, _topo, _hosts in ctx.pools:
        nics = pool.get("nics_per_node", 0)
        if pool.get("gpudirect_rdma") and ftype not in ("infiniband", "roce"):
            out.append(
                violation(
                    "FABRIC_GPUDIRECT_NEEDS_RDMA",
                    f"pools[{i}].gpudirect_rdma",
                    f"expected fabric infiniband or roce for GPUDirect RDMA, found {ftype}",
                )
            )
        if ftype == "none" and nics:
            out.append(
                violation(
                    "FABRIC_NONE_WITH_NICS",
                    f"pools[{i}].nics_per_node",
                    f"expected nics_per_node 0 with fabric none, found {nics}",
                )
            )
        elif ftype != "none" and len(rails) < nics:
            out.append(
                violation(
                    "FABRIC_RAILS_TOO_FEW",
                    "networks.fabric.rails",
                    f"{_pool_label(pool, i)} has {nics} NICs per node: expected at least {nics} rails, "
                    f"found {len(rails)}",
                )
            )


def _check_hosts(ctx: Ctx) -> None:
    out, hv = ctx.out, ctx.hostvars
    mgmt, bmc, storage = ctx.nets.get("management"), ctx.nets.get("bmc"), ctx.nets.get("storage")
    has_storage = bool(ctx.brief["networks"].get("storage"))
    fabric = ctx.brief["networks"].get("fabric") or {}
    ftype = fabric.get("type")
    plane = ctx.brief["cluster"].get("control_plane")
    nics_of = {h: p.get("nics_per_node", 0) for h, (_i, p) in ctx.host_pool.items()}
    cluster_hosts = list(dict.fromkeys([*ctx.controllers, *ctx.host_pool]))
    cluster_set = set(cluster_hosts)
    all_hosts = ctx.groups.get("all") if isinstance(ctx.groups.get("all"), list | tuple) else None
    if all_hosts is None:
        all_hosts = list(dict.fromkeys(h for hs in ctx.groups.values() if isinstance(hs, list | tuple) for h in hs))
    used: dict[tuple[int, int], tuple[str, str]] = {}
    counts = {"management": 0, "bmc": 0, "storage": 0}
    rail_counts = [0] * len(ctx.rails)
    for host in all_hosts:
        if not isinstance(host, str):
            continue
        in_cluster = host in cluster_set
        if not in_cluster and host not in _IMPLICIT_HOSTS:
            out.append(
                violation(
                    "HOST_UNASSIGNED",
                    "groups",
                    "expected every inventory host in a pool's group or the controllers group, "
                    "found it in neither (it is not configured by gpufleet)",
                    host=host,
                    severity=WARNING,
                )
            )
        if in_cluster and (not _HOST_LABEL_RE.match(host) or (plane == "kubernetes" and host != host.lower())):
            extra = " (lower case for Kubernetes)" if plane == "kubernetes" else ""
            out.append(
                violation(
                    "HOST_NAME_INVALID",
                    "inventory_hostname",
                    f"expected an RFC 1123 label{extra}: letters, digits and '-', 1-63 characters, "
                    f"not starting or ending with '-'; found {show(host)}",
                    host=host,
                )
            )
        vars_ = hv.get(host)
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
                    out.append(
                        violation(
                            "HOST_VAR_MISSING",
                            key,
                            f"expected {key} (an address in networks.{netname}), found none",
                            host=host,
                        )
                    )
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
                out.append(
                    violation(
                        "HOST_VAR_MISSING",
                        "fabric_ips",
                        f"expected fabric_ips: {nics} addresses, address i in rails[i]; found none",
                        host=host,
                    )
                )
            continue
        if not isinstance(fips, list | tuple):
            out.append(
                violation(
                    "HOST_VAR_WRONG_TYPE",
                    "fabric_ips",
                    f"expected a list of {nics} addresses, found {show(fips)}",
                    host=host,
                )
            )
            continue
        if wants_fabric and len(fips) != nics:
            out.append(
                violation(
                    "HOST_FABRIC_COUNT",
                    "fabric_ips",
                    f"expected {nics} addresses (nics_per_node), found {len(fips)}",
                    host=host,
                )
            )
        for r, value in enumerate(fips[:MAX_FABRIC_IPS_CHECKED]):
            rail = ctx.rails[r] if r < len(ctx.rails) else None
            field = f"fabric_ips[{r}]"
            addr = _host_addr(
                out, host, field, value, rail, f"fabric.rails[{r}]" if in_cluster and rail else None, in_cluster
            )
            if addr is not None:
                _mark_used(out, used, addr, host, field)
                if in_cluster and r < len(rail_counts):
                    rail_counts[r] += 1
    _check_sizes(ctx, cluster_hosts, counts, rail_counts)


def _host_addr(out, host, field, value, net: Net | None, netname: str | None, in_cluster: bool = True):
    addr = parse_ip(value)
    if addr is None:
        if not in_cluster:  # a host outside the cluster may use a DNS name: only IPs are tracked
            return None
        out.append(violation("HOST_ADDR_INVALID", field, f"expected an IP address, found {show(value)}", host=host))
        return None
    if net is not None and netname is not None:
        if not net.contains(addr):
            out.append(
                violation(
                    "HOST_ADDR_OUTSIDE_NET",
                    field,
                    f"expected an address in networks.{netname} {net.text}, found {value}",
                    host=host,
                )
            )
        elif net.reserved(addr):
            out.append(
                violation(
                    "HOST_ADDR_RESERVED",
                    field,
                    f"expected a host address of {net.text}, found its "
                    f"{'network' if addr[1] == net.first else 'broadcast'} address {value}",
                    host=host,
                )
            )
    return addr


def _mark_used(out, used, addr, host, field) -> None:
    prev = used.get(addr)
    if prev is None:
        used[addr] = (host, field)
        return
    out.append(
        violation(
            "HOST_ADDR_DUPLICATE",
            field,
            f"expected an address no other host or field uses, found {ip_text(addr)} "
            f"already used by {prev[0]} {prev[1]}",
            host=host,
        )
    )


def _check_sizes(ctx: Ctx, cluster_hosts: list[str], counts: dict[str, int], rail_counts: list[int]) -> None:
    out = ctx.out
    nets = ctx.brief["networks"]
    for key in ("management", "bmc", "storage"):
        net = ctx.nets.get(key)
        if net is None:
            continue
        need = counts[key] + (1 if (nets.get(key) or {}).get("gateway") else 0)
        if need > net.usable():
            out.append(
                violation(
                    "NET_TOO_SMALL",
                    f"networks.{key}.cidr",
                    f"expected room for {need} addresses, found {net.text} with {net.usable()} usable",
                )
            )
    for r, net in enumerate(ctx.rails):
        if net is not None and r < len(rail_counts) and rail_counts[r] > net.usable():
            out.append(
                violation(
                    "NET_TOO_SMALL",
                    f"networks.fabric.rails[{r}].cidr",
                    f"expected room for {rail_counts[r]} addresses, found {net.text} with {net.usable()} usable",
                )
            )
    pod = ctx.nets.get("pod_cidr")
    if ctx.k8s and pod is not None and pod.version == 4:
        nodes = len(cluster_hosts)
        blocks = 2 ** (K8S_NODE_CIDR_PREFIX_V4 - pod.prefixlen) if pod.prefixlen <= K8S_NODE_CIDR_PREFIX_V4 else 0
        if blocks < nodes:
            out.append(
                violation(
                    "NET_TOO_SMALL",
                    "networks.kubernetes.pod_cidr",
                    f"expected one /{K8S_NODE_CIDR_PREFIX_V4} per node ({nodes} nodes), found {pod.text} "
                    f"with room for {blocks}",
                )
            )


def _check_acceptance(ctx: Ctx) -> None:
    out, acc_cfg = ctx.out, ctx.brief["acceptance"]
    fabric = ctx.brief["networks"].get("fabric") or {}
    speed = fabric.get("link_speed_gbps")
    max_wrong = acc_cfg.get("max_wrong", 0)
    if max_wrong and not acc_cfg.get("max_wrong_waived"):
        out.append(
            violation(
                "ACCEPT_MAX_WRONG",
                "acceptance.max_wrong",
                f"expected 0 wrong values (set acceptance.max_wrong_waived: true to allow more), found {max_wrong}",
            )
        )
    elif max_wrong:
        out.append(
            violation(
                "ACCEPT_MAX_WRONG_WAIVED",
                "acceptance.max_wrong",
                f"expected 0 wrong values, found {max_wrong} tolerated by waiver",
                severity=WARNING,
            )
        )
    lo, hi = size_bytes(acc_cfg.get("min_bytes")), size_bytes(acc_cfg.get("max_bytes"))
    if lo is not None and hi is not None and lo > hi:
        out.append(
            violation(
                "ACCEPT_SIZE_RANGE",
                "acceptance.min_bytes",
                f"expected min_bytes <= max_bytes ({acc_cfg.get('max_bytes')}), found {acc_cfg.get('min_bytes')}",
            )
        )
    for i, pool, acc, topo, _hosts in ctx.pools:
        if acc is None:
            continue
        floors = pool_floors(ctx.brief, pool, acc, topo, i)
        single, s_field = floors["single_node_busbw_gbps"], floors["single_node_field"]
        gpus = pool.get("gpus_per_node", 0)
        ceiling = single_node_ceiling_gbps(acc, topo)
        if single is not None and gpus >= 2 and single > ceiling:
            out.append(
                violation(
                    "ACCEPT_SINGLE_NODE_ABOVE_LIMIT",
                    s_field,
                    f"expected a floor <= {ceiling:g} GB/s, the most {acc.key} reaches in one node "
                    f"({topo.name if topo else 'this topology'}, {_pool_label(pool, i)}); found {single:g}",
                )
            )
        multi, m_field = floors["multi_node_busbw_gbps"], floors["multi_node_field"]
        nics = pool.get("nics_per_node", 0)
        m_ceiling = multi_node_ceiling_gbps(nics, speed, acc, topo)
        if multi is not None and m_ceiling is not None and multi > m_ceiling:
            how = f"{nics} NICs x {speed:g} Gb/s / 8" if nics and speed else "no fabric NICs"
            out.append(
                violation(
                    "ACCEPT_MULTI_NODE_ABOVE_LIMIT",
                    m_field,
                    f"expected a floor <= {m_ceiling:g} GB/s, the most the fabric carries ({how}, "
                    f"{_pool_label(pool, i)}); found {multi:g}",
                )
            )


LAUNCHERS = {"srun": "slurm", "mpirun": None, "mpijob": "kubernetes"}


def _literal(value: Any) -> bool:
    """A value the inventory or -e gives as it is: not a template preflight cannot resolve."""
    return isinstance(value, str) and "{{" not in value and "{%" not in value


def _check_launcher(ctx: Ctx) -> None:
    """The acceptance launcher as the first controller (where acceptance launches the all-node runs)
    sees it in the inventory or -e: one of srun / mpirun / mpijob, srun only with Slurm and mpijob
    only with Kubernetes, and mpijob with the production image it runs. Unset leaves the role's
    default: srun on Slurm, mpijob on Kubernetes (the MPI Operator is installed there), mpirun
    otherwise; a template is not resolved here and is not checked.

    The image is acceptance_container_image where the inventory or -e sets it, else, on a
    Kubernetes brief (the role's default there), the brief's acceptance.workload.image: the field
    named when it is missing is the one to set (the host's variable when it is set but empty or
    the brief is not Kubernetes, else the brief's field, host-free)."""
    if not ctx.controllers:
        return
    host = ctx.controllers[0]
    hv = ctx.hostvars.get(host) or {}
    plane = ctx.brief["cluster"].get("control_plane")
    launcher = hv.get("acceptance_launcher")
    if launcher is None:
        launcher = "mpijob" if plane == "kubernetes" else None
    if launcher is None or not _literal(launcher):
        return
    if launcher not in LAUNCHERS:
        ctx.out.append(
            violation(
                "ACCEPT_LAUNCHER_INVALID",
                "acceptance_launcher",
                f"expected one of {', '.join(LAUNCHERS)}, found {launcher!r}",
                host=host,
            )
        )
        return
    needs = LAUNCHERS[launcher]
    fits = "mpirun or mpijob" if plane == "kubernetes" else "srun or mpirun"
    if needs is not None and plane != needs:
        ctx.out.append(
            violation(
                "ACCEPT_LAUNCHER_PLANE",
                "acceptance_launcher",
                f"expected a launcher the brief's control plane runs ({fits} for cluster.control_plane {plane}), "
                f"found {launcher} (needs {needs})",
                host=host,
            )
        )
    if launcher != "mpijob":
        return
    image = hv.get("acceptance_container_image")
    if image is not None or plane != "kubernetes":
        if image is None or (_literal(image) and not image.strip()):
            ctx.out.append(
                violation(
                    "ACCEPT_IMAGE_MISSING",
                    "acceptance_container_image",
                    "expected the production image the MPIJob runs (nccl-tests and Open MPI in it) for "
                    f"acceptance_launcher mpijob, found {'none' if image is None else 'an empty string'}",
                    host=host,
                )
            )
        return
    workload = (ctx.brief.get("acceptance") or {}).get("workload") or {}
    brief_image = workload.get("image") if isinstance(workload, dict) else None
    if not isinstance(brief_image, str) or not brief_image.strip():
        default = " (the default on cluster.control_plane kubernetes)" if hv.get("acceptance_launcher") is None else ""
        ctx.out.append(
            violation(
                "ACCEPT_IMAGE_MISSING",
                "acceptance.workload.image",
                "expected the production image the MPIJob runs (nccl-tests and Open MPI in it) for "
                f"acceptance_launcher mpijob{default}, in acceptance.workload.image or the first controller's "
                f"acceptance_container_image, found {'none' if brief_image is None else repr(brief_image)}; "
                "or set acceptance_launcher: mpirun",
            )
        )


def multi_node_ceiling_gbps(
    nics: int, speed: float | None, acc: Accelerator | None, topo: Topology | None
) -> float | None:
    """nics x link speed / 8 (GB/s); an NVL72 rack also spans nodes over NVLink (MNNVL)."""
    if not nics or not speed:
        return None
    ceiling = nics * speed / 8
    if topo is not None and topo.name == "nvl72" and acc is not None:
        ceiling = max(ceiling, acc.nvlink_busbw_gbps)
    return ceiling


def pool_floors(brief: dict, pool: dict, acc: Accelerator | None, topo: Topology | None, index: int = 0) -> dict:
    """Effective floors of a pool: the pool's acceptance, else the brief's, else derived.

    Derived single-node floor: the catalogue's expected figure for the topology. Derived multi-node
    floor: 85 % of nics x link speed / 8, never above the single-node floor; none without NICs.
    """
    fabric = (brief.get("networks") or {}).get("fabric") or {}
    own, top = pool.get("acceptance") or {}, brief.get("acceptance") or {}
    res: dict[str, Any] = {}
    for key in ("single_node_busbw_gbps", "multi_node_busbw_gbps"):
        short = key.split("_busbw")[0]
        if own.get(key) is not None:
            res[key], res[f"{short}_field"], res[f"{short}_source"] = (
                own[key],
                f"pools[{index}].acceptance.{key}",
                "pool",
            )
        elif top.get(key) is not None:
            res[key], res[f"{short}_field"], res[f"{short}_source"] = top[key], f"acceptance.{key}", "brief"
        else:
            res[key], res[f"{short}_field"], res[f"{short}_source"] = None, f"acceptance.{key}", "catalogue"
    if res["single_node_busbw_gbps"] is None and acc is not None and pool.get("gpus_per_node", 0) >= 2:
        res["single_node_busbw_gbps"] = default_single_node_floor_gbps(acc, topo)
    if res["multi_node_busbw_gbps"] is None and acc is not None:
        ceiling = multi_node_ceiling_gbps(pool.get("nics_per_node", 0), fabric.get("link_speed_gbps"), acc, topo)
        if ceiling is not None:
            derived = round(ceiling * 0.85, 1)
            if res["single_node_busbw_gbps"]:
                derived = min(derived, res["single_node_busbw_gbps"])
            res["multi_node_busbw_gbps"] = derived
    return res


_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def size_bytes(value: Any) -> int | None:
    """nccl-tests sizes: ``8G`` → 8 GiB (nccl-tests' K/M/G are powers of 1024)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        return None
    m = re.match(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?$", value.strip().upper())
    if not m:
        return None
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2)])


def _check_tenants(ctx: Ctx) -> None:
    out, tenants = ctx.out, ctx.brief["tenants"]
    if not tenants:
        return
    names = {p.get("name"): (hosts, p) for _i, p, _a, _t, hosts in ctx.pools if p.get("name")}
    seen: set[str] = set()
    total_quota = 0
    for t, tenant in enumerate(tenants):
        if tenant is None:
            continue
        name = tenant.get("name")
        if name in seen:
            out.append(
                violation(
                    "TENANT_DUPLICATE", f"tenants[{t}].name", f"expected unique tenant names, found {name!r} again"
                )
            )
        seen.add(name)
        for p in tenant.get("pools") or []:
            if p is not None and p not in names:
                out.append(
                    violation(
                        "TENANT_UNKNOWN_POOL",
                        f"tenants[{t}].pools",
                        f"expected a pool name ({', '.join(map(str, names)) or 'none defined'}), found {show(p)}",
                    )
                )
        total_quota += tenant.get("gpus", 0)
    cluster_gpus = sum(len(hosts) * pool.get("gpus_per_node", 0) for _i, pool, _a, _t, hosts in ctx.pools)
    if total_quota > cluster_gpus:
        out.append(
            violation(
                "TENANT_QUOTA_EXCEEDS",
                "tenants",
                f"expected quotas summing to at most the cluster's {cluster_gpus} GPUs, found {total_quota}",
                severity=WARNING,
            )
        )


def _minor_of(version: Any) -> tuple[int, int] | None:
    m = re.match(r"^v?(\d+)\.(\d+)(\.\d+)?", str(version or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def _check_kubernetes(ctx: Ctx) -> None:
    """What a kubeadm cluster needs of the brief: the version pins (and any per-host pin within the
    skew policy), a pod network the CNI can carve, one MIG strategy, tenant namespaces of their own."""
    if not ctx.k8s:
        return
    out, sw = ctx.out, ctx.brief["software"]
    version = sw.get("kubernetes")
    minor = _minor_of(version)
    if not version:
        out.append(
            violation(
                "K8S_VERSION_MISSING",
                "software.kubernetes",
                "expected a Kubernetes version pin (e.g. '1.33.4') for control_plane kubernetes, found none",
            )
        )
    elif minor is not None and minor < K8S_MIN_MINOR:
        out.append(
            violation(
                "K8S_VERSION_UNSUPPORTED",
                "software.kubernetes",
                f"expected Kubernetes >= {'.'.join(map(str, K8S_MIN_MINOR))} (kubeadm.k8s.io/v1beta4), found {version}",
            )
        )
    elif minor is not None and minor > K8S_TESTED_MINOR:
        out.append(
            violation(
                "K8S_VERSION_UNTESTED",
                "software.kubernetes",
                f"expected Kubernetes <= {'.'.join(map(str, K8S_TESTED_MINOR))} (the newest gpufleet was tested "
                f"with), found {version}",
                severity=WARNING,
            )
        )
    if not sw.get("gpu_operator"):
        out.append(
            violation(
                "K8S_GPU_OPERATOR_MISSING",
                "software.gpu_operator",
                "expected a GPU Operator chart version pin (e.g. '25.3.4') for control_plane kubernetes, found none",
            )
        )
    controllers = set(ctx.controllers)
    if minor is not None:
        for host in sorted(set(ctx.controllers) | set(ctx.host_pool)):
            vars_ = ctx.hostvars.get(host)
            if not isinstance(vars_, Mapping):
                continue
            for key in K8S_HOST_PINS:
                pin = vars_.get(key)
                if pin is None or not isinstance(pin, str | int | float):
                    continue
                pin_minor = _minor_of(pin)
                if pin_minor is None:
                    out.append(
                        violation(
                            "K8S_VERSION_SKEW",
                            key,
                            f"expected a version such as {version}, found {show(pin)}",
                            host=host,
                        )
                    )
                elif host in controllers and str(pin).lstrip("v") != str(version).lstrip("v"):
                    out.append(
                        violation(
                            "K8S_VERSION_SKEW",
                            key,
                            f"expected the control plane at software.kubernetes {version} (kubeadm, kubelet and the "
                            f"control-plane images move together), found {pin}",
                            host=host,
                        )
                    )
                elif pin_minor > minor or pin_minor[0] != minor[0] or minor[1] - pin_minor[1] > K8S_KUBELET_SKEW:
                    out.append(
                        violation(
                            "K8S_VERSION_SKEW",
                            key,
                            f"expected a kubelet between {minor[0]}.{max(minor[1] - K8S_KUBELET_SKEW, 0)} and "
                            f"software.kubernetes {version} (version skew policy), found {pin}",
                            host=host,
                        )
                    )
    pod = ctx.nets.get("pod_cidr")
    cni = (ctx.brief["networks"].get("kubernetes") or {}).get("cni", "calico")
    block = K8S_CNI_BLOCK_V4.get(cni)
    if pod is not None and pod.version == 4 and block is not None and pod.prefixlen > block:
        out.append(
            violation(
                "K8S_POD_CIDR_CNI",
                "networks.kubernetes.pod_cidr",
                f"expected a pod network of /{block} or larger ({cni} gives each node /{block} blocks), "
                f"found {pod.text}",
            )
        )
    strategies = {
        (pool.get("sharing_config") or {}).get("mig_strategy", "single")
        for _i, pool, _a, _t, _h in ctx.pools
        if pool.get("sharing") == "mig"
    }
    if len(strategies) > 1:
        out.append(
            violation(
                "K8S_MIG_STRATEGY_MIXED",
                "pools",
                "expected one MIG strategy across the MIG pools (the GPU Operator has one per cluster), found "
                f"{' and '.join(sorted(strategies))}: mixed is used for all",
                severity=WARNING,
            )
        )
    for t, tenant in enumerate(ctx.brief["tenants"]):
        name = (tenant or {}).get("name")
        if name and (name in K8S_RESERVED_NAMESPACES or name.startswith(("kube-", "calico-"))):
            out.append(
                violation(
                    "K8S_TENANT_NAMESPACE_RESERVED",
                    f"tenants[{t}].name",
                    f"expected a tenant name that is not a system namespace ({', '.join(K8S_RESERVED_NAMESPACES)}, "
                    f"kube-*, calico-*), found {name!r}",
                )
            )
    _check_k8s_topology_labels(ctx)
    _check_k8s_api_vip(ctx)


def _check_k8s_api_vip(ctx: Ctx) -> None:
    """With several control-plane nodes every node and kubeconfig reaches the API server at one
    stable address, networks.kubernetes.api_vip: a virtual IP in the management network that no
    host uses (the site's load balancer forwards it to port 6443 of each control-plane node)."""
    net = ctx.brief["networks"].get("kubernetes") or {}
    vip = net.get("api_vip") if isinstance(net, Mapping) else None
    field = "networks.kubernetes.api_vip"
    n = len(ctx.controllers or [])
    if vip is None:
        if n > 1:
            ctx.out.append(
                violation(
                    "K8S_API_VIP_MISSING",
                    field,
                    f"expected a virtual IP in networks.management for the API server of the {n} control-plane "
                    "nodes (kubeadm's controlPlaneEndpoint; one node's address stops the cluster with that node), "
                    "found none",
                )
            )
        return
    addr = parse_ip(vip)
    if addr is None:
        ctx.out.append(violation("K8S_API_VIP_INVALID", field, f"expected an IP address, found {show(vip)}"))
        return
    mgmt = ctx.nets.get("management")
    if mgmt is not None and (not mgmt.contains(addr) or mgmt.reserved(addr)):
        ctx.out.append(
            violation(
                "K8S_API_VIP_OUTSIDE",
                field,
                f"expected a host address in networks.management {mgmt.text}, found {vip}",
            )
        )
    gateway = parse_ip((ctx.brief["networks"].get("management") or {}).get("gateway"))
    users = [
        f"{host} ({key})"
        for host in sorted(ctx.hostvars)
        for key in ("ansible_host", "bmc_ip", "storage_ip")
        if parse_ip((ctx.hostvars.get(host) or {}).get(key)) == addr
    ] + (["networks.management.gateway"] if gateway == addr else [])
    if users:
        ctx.out.append(
            violation(
                "K8S_API_VIP_IN_USE",
                field,
                f"expected an address no host uses (the load balancer's own), found {vip} used by {', '.join(users)}",
            )
        )


# A Kubernetes label value: at most 63 characters, alphanumerics, '-', '_', '.', alphanumeric at both ends.
K8S_LABEL_VALUE_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _k8s_label_value_ok(text: str) -> bool:
    return len(text) <= 63 and bool(K8S_LABEL_VALUE_RE.match(text))


def _check_k8s_topology_labels(ctx: Ctx) -> None:
    """Each pool node's rack and leaf switch become its gpufleet.io/rack and gpufleet.io/leaf labels
    (Kueue's topology; the leaf is leaf-<rack> without a leaf_switch): both must be label values.
    A templated value is not resolved here and is not checked."""
    for _i, _pool, _a, _t, hosts in ctx.pools:
        for host in hosts:
            hv = ctx.hostvars.get(host) or {}
            raw = {var: hv.get(var) for var in ("rack", "leaf_switch")}
            if any(isinstance(v, str) and not _literal(v) for v in raw.values()):
                continue
            rack, leaf = ("" if v is None else str(v).strip() for v in raw.values())
            bad = []
            if rack and not _k8s_label_value_ok(rack):
                bad.append(("rack", "rack", repr(rack)))
            if leaf and not _k8s_label_value_ok(leaf):
                bad.append(("leaf_switch", "leaf", repr(leaf)))
            elif not leaf and rack and _k8s_label_value_ok(rack) and not _k8s_label_value_ok(f"leaf-{rack}"):
                bad.append(("rack", "leaf", f"{rack!r} (its leaf label 'leaf-{rack}', without a leaf_switch)"))
            for var, label, found in bad:
                ctx.out.append(
                    violation(
                        "K8S_TOPOLOGY_LABEL",
                        var,
                        f"expected a Kubernetes label value for the node's gpufleet.io/{label} label (at most 63 "
                        f"letters, digits, '-', '_' or '.', a letter or digit at both ends), found {found}",
                        host=host,
                    )
                )


K8S_RESERVED_NAMESPACES = ("default", "gpu-operator", "kueue-system", "tigera-operator", "calico-system", "gpufleet")


def effective_brief(brief: Any) -> dict:
    """The brief with defaults filled in, and each pool's effective acceptance floors under
    ``pools[i].acceptance`` (what the acceptance stage uses). Invalid values are dropped."""
    _out, clean = brief_schema.validate(brief)
    pools = []
    for i, pool in enumerate(clean["pools"]):
        if pool is None:
            continue
        acc, topo = get_accelerator(pool.get("accelerator")), get_topology(pool.get("topology"))
        floors = pool_floors(clean, pool, acc, topo, i)
        pool = dict(pool)
        pool["acceptance"] = {k: floors[k] for k in ("single_node_busbw_gbps", "multi_node_busbw_gbps")}
        pools.append(pool)
    clean = dict(clean)
    clean["pools"] = pools
    return clean


__all__ = [
    "HOST_VARS",
    "READ_HOST_VARS",
    "check",
    "effective_brief",
    "multi_node_ceiling_gbps",
    "parse_ip",
    "pool_floors",
    "size_bytes",
]
