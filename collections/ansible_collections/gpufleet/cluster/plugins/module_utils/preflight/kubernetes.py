# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phase: what a kubeadm cluster needs of the brief and the inventory (``control_plane: kubernetes`` only).

``check_kubernetes(brief, hostvars, pools, networks)`` needs the groups phase's ``Pools`` (control-plane
and pool hosts: their version pins and topology labels) and the networks phase's ``Networks`` (the
pod network, and the management network the API server's virtual IP lies in).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import show
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.acceptance import literal
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.addresses import parse_ip, vars_of
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.groups import Pools
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.networks import Networks

# Kubernetes minors gpufleet renders kubeadm configuration for (kubeadm.k8s.io/v1beta4 needs 1.31+),
# and the newest it was tested with (newer is a warning). The kubelet may be up to 3 minors older.
K8S_MIN_MINOR = (1, 31)
K8S_TESTED_MINOR = (1, 34)
K8S_KUBELET_SKEW = 3
# The CNI's smallest per-node block (Calico IPAM: /26 IPv4): the pod network must hold at least one.
K8S_CNI_BLOCK_V4 = {"calico": 26}
# Host variables that pin the Kubernetes packages per host (roles kubernetes_node / _control_plane).
K8S_HOST_PINS = ("kubernetes_node_version",)
K8S_RESERVED_NAMESPACES = ("default", "gpu-operator", "kueue-system", "tigera-operator", "calico-system", "gpufleet")
# A Kubernetes label value: at most 63 characters, alphanumerics, '-', '_', '.', alphanumeric at both ends.
K8S_LABEL_VALUE_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _minor_of(version: Any) -> tuple[int, int] | None:
    m = re.match(r"^v?(\d+)\.(\d+)(\.\d+)?", str(version or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def check_kubernetes(brief: dict, hostvars: Mapping[str, Any], pools: Pools, networks: Networks) -> list[dict]:
    """The version pins (and any per-host pin within the skew policy), a pod network the CNI can
    carve, one MIG strategy, tenant namespaces of their own, label values for the nodes' topology,
    and the API server's virtual IP with several control-plane nodes."""
    if brief["cluster"].get("control_plane") != "kubernetes":
        return []
    out: list[dict] = []
    sw = brief["software"]
    version = sw.get("kubernetes")
    minor = _minor_of(version)
    if not version:
        out.append(make("K8S_VERSION_MISSING", "software.kubernetes"))
    elif minor is not None and minor < K8S_MIN_MINOR:
        out.append(
            make("K8S_VERSION_UNSUPPORTED", "software.kubernetes", minimum=_dotted(K8S_MIN_MINOR), version=version)
        )
    elif minor is not None and minor > K8S_TESTED_MINOR:
        out.append(
            make("K8S_VERSION_UNTESTED", "software.kubernetes", tested=_dotted(K8S_TESTED_MINOR), version=version)
        )
    if not sw.get("gpu_operator"):
        out.append(make("K8S_GPU_OPERATOR_MISSING", "software.gpu_operator"))
    if minor is not None:
        out.extend(_host_pins(hostvars, pools, version, minor))
    pod = networks.get("pod_cidr")
    cni = (brief["networks"].get("kubernetes") or {}).get("cni", "calico")
    block = K8S_CNI_BLOCK_V4.get(cni)
    if pod is not None and pod.version == 4 and block is not None and pod.prefixlen > block:
        out.append(make("K8S_POD_CIDR_CNI", "networks.kubernetes.pod_cidr", block=block, cni=cni, net=pod.text))
    strategies = {
        (m.pool.spec.get("sharing_config") or {}).get("mig_strategy", "single")
        for m in pools.members
        if m.pool.spec.get("sharing") == "mig"
    }
    if len(strategies) > 1:
        out.append(make("K8S_MIG_STRATEGY_MIXED", "pools", strategies=" and ".join(sorted(strategies))))
    for t, tenant in enumerate(brief["tenants"]):
        name = (tenant or {}).get("name")
        if name and (name in K8S_RESERVED_NAMESPACES or name.startswith(("kube-", "calico-"))):
            out.append(
                make(
                    "K8S_TENANT_NAMESPACE_RESERVED",
                    f"tenants[{t}].name",
                    reserved=", ".join(K8S_RESERVED_NAMESPACES),
                    name=name,
                )
            )
    out.extend(_topology_labels(hostvars, pools))
    out.extend(_api_vip(brief, hostvars, pools.controllers, networks))
    return out


def _dotted(minor: tuple[int, int]) -> str:
    return ".".join(map(str, minor))


def _host_pins(hostvars: Mapping[str, Any], pools: Pools, version: Any, minor: tuple[int, int]) -> list[dict]:
    """Each host's own Kubernetes pin: exactly the brief's on the control plane, within the kubelet skew elsewhere."""
    out = []
    controllers = set(pools.controllers)
    for host in sorted(controllers | set(pools.host_pool)):
        vars_ = hostvars.get(host)
        if not isinstance(vars_, Mapping):
            continue
        for key in K8S_HOST_PINS:
            pin = vars_.get(key)
            if pin is None or not isinstance(pin, str | int | float):
                continue
            pin_minor = _minor_of(pin)
            if pin_minor is None:
                out.append(
                    make("K8S_VERSION_SKEW", key, host=host, variant="malformed", version=version, found=show(pin))
                )
            elif host in controllers and str(pin).lstrip("v") != str(version).lstrip("v"):
                out.append(make("K8S_VERSION_SKEW", key, host=host, variant="control_plane", version=version, pin=pin))
            elif pin_minor > minor or pin_minor[0] != minor[0] or minor[1] - pin_minor[1] > K8S_KUBELET_SKEW:
                oldest = f"{minor[0]}.{max(minor[1] - K8S_KUBELET_SKEW, 0)}"
                out.append(
                    make("K8S_VERSION_SKEW", key, host=host, variant="kubelet", oldest=oldest, version=version, pin=pin)
                )
    return out


def _api_vip(brief: dict, hostvars: Mapping[str, Any], controllers: tuple[str, ...], networks: Networks) -> list[dict]:
    """With several control-plane nodes every node and kubeconfig reaches the API server at one
    stable address, networks.kubernetes.api_vip: a virtual IP in the management network that no
    host uses (the site's load balancer forwards it to port 6443 of each control-plane node)."""
    net = brief["networks"].get("kubernetes") or {}
    vip = net.get("api_vip") if isinstance(net, Mapping) else None
    field = "networks.kubernetes.api_vip"
    n = len(controllers)
    if vip is None:
        return [make("K8S_API_VIP_MISSING", field, n=n)] if n > 1 else []
    addr = parse_ip(vip)
    if addr is None:
        return [make("K8S_API_VIP_INVALID", field, found=show(vip))]
    out = []
    mgmt = networks.get("management")
    if mgmt is not None and (not mgmt.contains(addr) or mgmt.reserved(addr)):
        out.append(make("K8S_API_VIP_OUTSIDE", field, net=mgmt.text, vip=vip))
    gateway = parse_ip((brief["networks"].get("management") or {}).get("gateway"))
    users = [
        f"{host} ({key})"
        for host in sorted(hostvars)
        for key in ("ansible_host", "bmc_ip", "storage_ip")
        if parse_ip(vars_of(hostvars, host).get(key)) == addr
    ] + (["networks.management.gateway"] if gateway == addr else [])
    if users:
        out.append(make("K8S_API_VIP_IN_USE", field, vip=vip, users=", ".join(users)))
    return out


def _label_value_ok(text: str) -> bool:
    return len(text) <= 63 and bool(K8S_LABEL_VALUE_RE.fullmatch(text))


def _topology_labels(hostvars: Mapping[str, Any], pools: Pools) -> list[dict]:
    """Each pool node's rack and leaf switch become its gpufleet.io/rack and gpufleet.io/leaf labels
    (Kueue's topology; the leaf is leaf-<rack> without a leaf_switch): both must be label values.
    A templated value is not resolved here and is not checked."""
    out = []
    for member in pools.members:
        for host in member.hosts:
            hv = vars_of(hostvars, host)
            raw = {var: hv.get(var) for var in ("rack", "leaf_switch")}
            if any(isinstance(v, str) and not literal(v) for v in raw.values()):
                continue
            rack, leaf = ("" if v is None else str(v).strip() for v in raw.values())
            bad = []
            if rack and not _label_value_ok(rack):
                bad.append(("rack", "rack", repr(rack)))
            if leaf and not _label_value_ok(leaf):
                bad.append(("leaf_switch", "leaf", repr(leaf)))
            elif not leaf and rack and _label_value_ok(rack) and not _label_value_ok(f"leaf-{rack}"):
                bad.append(("rack", "leaf", f"{rack!r} (its leaf label 'leaf-{rack}', without a leaf_switch)"))
            for var, label, found in bad:
                out.append(make("K8S_TOPOLOGY_LABEL", var, host=host, label=label, found=found))
    return out


__all__ = [
    "K8S_CNI_BLOCK_V4",
    "K8S_HOST_PINS",
    "K8S_KUBELET_SKEW",
    "K8S_LABEL_VALUE_RE",
    "K8S_MIN_MINOR",
    "K8S_RESERVED_NAMESPACES",
    "K8S_TESTED_MINOR",
    "check_kubernetes",
]
