# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The Kubernetes side of the brief, as data: every object the Kubernetes roles apply.

Pure functions from the (raw) brief to dicts: kubeadm configuration, node labels and
taints per pool, the CNI's pod network, the GPU Operator's Helm values and its
device-plugin configuration, Kueue's ResourceFlavors / ClusterQueues / LocalQueues, the
tenants' namespaces with their quota, limits, RBAC and network policies, and the
acceptance MPIJob. The roles' templates only dump what these return, so the content is
unit-tested here and validated offline against the pinned Kubernetes version's schemas
(tests/unit/test_k8s.py). docs/kubernetes.md describes the objects.

Secrets (bootstrap tokens, the certificate key) are parameters, never defaults, and
never logged by these functions.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema as brief_schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import vendor_matrix

GPU_RESOURCE = "nvidia.com/gpu"
LABEL_PREFIX = "gpufleet.io/"
CRI_SOCKET = "unix:///run/containerd/containerd.sock"
KUBEADM_API = "kubeadm.k8s.io/v1beta4"
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
GPU_TAINT = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}
# A MIG-capable GPU has 7 compute slices: a <g>g profile gives 7 // g instances.
MIG_SLICES = 7
# Namespaces a tenant may not take: the system's and those the Kubernetes roles install into.
RESERVED_NAMESPACES = ("default", "gpu-operator", "kueue-system", "tigera-operator", "calico-system", "gpufleet")
RESERVED_NAMESPACE_PREFIXES = ("kube-", "calico-")
DEVICE_PLUGIN_CONFIGMAP = "gpufleet-device-plugin"
DEVICE_PLUGIN_DEFAULT = "default"
DEVICE_PLUGIN_LABEL = "nvidia.com/device-plugin.config"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
KUEUE_API = "kueue.x-k8s.io/v1beta1"
# Topology-aware scheduling (Kueue's Topology, kueue.x-k8s.io/v1beta1 from Kueue v0.14, beta and on
# by default there): levels from the broadest to the node. A leaf switch serves one or more racks;
# kubernetes.io/hostname is the lowest level, as Kueue requires for node taints to be respected.
TOPOLOGY_NAME = "gpufleet"
LEAF_LABEL = "gpufleet.io/leaf"
RACK_LABEL = "gpufleet.io/rack"
HOSTNAME_LABEL = "kubernetes.io/hostname"
TOPOLOGY_LEVELS = (LEAF_LABEL, RACK_LABEL, HOSTNAME_LABEL)
# A node without a rack in the inventory (the leaf is leaf-<rack>, as in Slurm's topology.conf).
UNPLACED = "unplaced"
# Each tenant's PriorityClass and Kueue WorkloadPriorityClass, gpufleet-<tenant>; its value is the
# tenant's priority (the brief's default, brief_schema.TENANT_PRIORITY_DEFAULT, when not given).
PRIORITY_CLASS_PREFIX = "gpufleet-"
_LABEL_VALUE_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
# Calico's IPAM block: every node takes at least one /26 of the pod network.
CALICO_BLOCK_SIZE_V4 = 26
_TAINT_RE = re.compile(r"^(?P<key>[^=:\s]+)(=(?P<value>[^=:\s]*))?:(?P<effect>NoSchedule|PreferNoSchedule|NoExecute)$")


# --- the brief ------------------------------------------------------------------------------------


def clean_brief(brief: Any) -> dict:
    """The brief as the schema reads it (defaults filled in, invalid values dropped)."""
    _out, clean = brief_schema.validate(brief)
    clean["pools"] = [p for p in clean["pools"] if p]
    clean["tenants"] = [t for t in clean["tenants"] if t]
    return clean


def k8s_version(brief: dict) -> str:
    """``software.kubernetes`` without a leading v: ``1.33.4``."""
    version = str((brief.get("software") or {}).get("kubernetes") or "")
    return version[1:] if version.startswith("v") else version


def k8s_minor(version: str) -> str:
    """``1.33.4`` → ``1.33`` (the pkgs.k8s.io repository's channel)."""
    parts = str(version).lstrip("v").split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ValueError(f"expected a Kubernetes version such as 1.33.4, found {version!r}")
    return f"{parts[0]}.{parts[1]}"


def pool_nodes(brief: Any, groups: dict) -> dict[str, int]:
    """Number of inventory hosts of each pool: ``{pool name: count}``."""
    clean = clean_brief(brief)
    return {p["name"]: len(groups.get(p.get("group"), []) or []) for p in clean["pools"] if p.get("name")}


def _pool(clean: dict, name: str) -> dict:
    for pool in clean["pools"]:
        if pool.get("name") == name:
            return pool
    raise ValueError(f"no pool named {name!r} in the brief (pools: {', '.join(p['name'] for p in clean['pools'])})")


# --- what a pool's GPUs look like to Kubernetes ---------------------------------------------------


def mig_instances(profile: str) -> int:
    """MIG instances per GPU of a profile: ``1g.18gb`` → 7, ``3g.71gb`` → 2, ``7g.141gb`` → 1."""
    match = re.match(r"^(\d+)g\.", profile or "")
    if not match or not 1 <= int(match.group(1)) <= MIG_SLICES:
        raise ValueError(f"expected a MIG profile such as 1g.18gb, found {profile!r}")
    return MIG_SLICES // int(match.group(1))


def pool_resource(pool: dict) -> str:
    """The extended resource a pool's nodes advertise: nvidia.com/gpu, or nvidia.com/mig-<profile>
    under the mixed MIG strategy."""
    cfg = pool.get("sharing_config") or {}
    if pool.get("sharing") == "mig" and cfg.get("mig_strategy") == "mixed" and cfg.get("mig_profile"):
        return f"nvidia.com/mig-{cfg['mig_profile']}"
    return GPU_RESOURCE


def shares_per_gpu(pool: dict) -> int:
    """Schedulable units per physical GPU: time-slicing replicas, MIG instances, else 1."""
    cfg = pool.get("sharing_config") or {}
    if pool.get("sharing") == "time-slicing" and cfg.get("replicas"):
        return int(cfg["replicas"])
    if pool.get("sharing") == "mig" and cfg.get("mig_profile"):
        return mig_instances(cfg["mig_profile"])
    return 1


def parse_taint(text: str) -> dict:
    """``key[=value]:Effect`` → ``{key, value?, effect}``."""
    match = _TAINT_RE.fullmatch(text or "")
    if not match:
        raise ValueError(f"expected a taint key[=value]:NoSchedule|PreferNoSchedule|NoExecute, found {text!r}")
    taint = {"key": match.group("key")}
    if match.group("value"):
        taint["value"] = match.group("value")
    taint["effect"] = match.group("effect")
    return taint


def node_labels(brief: Any, pool_name: str) -> dict[str, str]:
    """A pool node's labels: the brief's words under gpufleet.io/, the GPU Operator's selectors, and
    the pool's own ``labels`` (which win)."""
    clean = clean_brief(brief)
    pool = _pool(clean, pool_name)
    fabric = (clean["networks"].get("fabric") or {}).get("type", "none")
    labels = {
        f"{LABEL_PREFIX}pool": pool["name"],
        f"{LABEL_PREFIX}accelerator": pool.get("accelerator", ""),
        f"{LABEL_PREFIX}topology": pool.get("topology", ""),
        f"{LABEL_PREFIX}fabric": fabric if pool.get("nics_per_node", 0) else "none",
        f"{LABEL_PREFIX}workload": pool.get("workload", ""),
        f"{LABEL_PREFIX}sharing": pool.get("sharing", ""),
    }
    cfg = pool.get("sharing_config") or {}
    if pool.get("sharing") == "time-slicing":
        labels[DEVICE_PLUGIN_LABEL] = pool["name"]
    if pool.get("sharing") == "mig" and cfg.get("mig_profile"):
        labels[MIG_CONFIG_LABEL] = f"all-{cfg['mig_profile']}"
    labels.update(pool.get("labels") or {})
    return labels


def node_taints(brief: Any, pool_name: str) -> list[dict]:
    """A pool node's taints: the pool's ``taints``, and nvidia.com/gpu=present:NoSchedule unless the
    pool already taints nvidia.com/gpu with NoSchedule."""
    pool = _pool(clean_brief(brief), pool_name)
    taints = [parse_taint(t) for t in pool.get("taints") or [] if t]
    if not any(t["key"] == GPU_TAINT["key"] and t["effect"] == GPU_TAINT["effect"] for t in taints):
        taints.append(dict(GPU_TAINT))
    return taints


def tolerations(taints: list[dict]) -> list[dict]:
    """Tolerations that match exactly the given taints."""
    out = []
    for taint in taints:
        tol = {"key": taint["key"], "operator": "Equal" if "value" in taint else "Exists", "effect": taint["effect"]}
        if "value" in taint:
            tol["value"] = taint["value"]
        out.append(tol)
    return out


def node_spec(brief: Any, pool_name: str) -> dict:
    """``{labels, taints, tolerations}`` of a pool's nodes."""
    taints = node_taints(brief, pool_name)
    return {"labels": node_labels(brief, pool_name), "taints": taints, "tolerations": tolerations(taints)}


def topology_labels(rack: Any = None, leaf_switch: Any = None) -> dict[str, str]:
    """``gpufleet.io/leaf`` and ``gpufleet.io/rack`` of a node from its inventory variables ``rack``
    and ``leaf_switch``: the leaf is its leaf switch, else ``leaf-<rack>`` (Slurm's topology.conf
    rule); a node with neither is in rack ``unplaced`` under ``leaf-unplaced``, so every node
    carries both levels (Kueue's topology-aware scheduling only counts nodes that have them)."""
    rack_v = "" if rack is None else str(rack).strip()
    leaf_v = "" if leaf_switch is None else str(leaf_switch).strip()
    rack_v = rack_v or UNPLACED
    leaf_v = leaf_v or f"leaf-{rack_v}"
    bad = [
        f"{var} {value!r}"
        for var, value in (("rack", rack_v), ("leaf_switch", leaf_v))
        if len(value) > 63 or not _LABEL_VALUE_RE.fullmatch(value)
    ]
    if bad:
        raise ValueError(
            "expected label values (at most 63 letters, digits, '-', '_' or '.', starting and ending with a "
            f"letter or digit), found {', '.join(bad)}"
        )
    return {LEAF_LABEL: leaf_v, RACK_LABEL: rack_v}


def kueue_topology() -> dict:
    """Kueue's Topology of the cluster: leaf switch, rack, node."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": TOPOLOGY_NAME},
        "spec": {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS]},
    }


def tenant_priority(tenant: dict) -> int:
    """The tenant's priority: its ``priority``, else the brief's default."""
    value = tenant.get("priority")
    return brief_schema.TENANT_PRIORITY_DEFAULT if value is None else int(value)


def taint_text(taint: dict) -> str:
    """``{key, value, effect}`` → ``key=value:Effect`` (kubectl taint syntax)."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint['effect']}"


# --- kubeadm --------------------------------------------------------------------------------------


def _kubelet_args(node_ip: str | None) -> list[dict]:
    return [{"name": "node-ip", "value": node_ip}] if node_ip else []


def kubeadm_init_config(
    brief: Any,
    node_name: str,
    advertise_address: str,
    endpoint: str,
    cert_sans: list[str] | None = None,
    certificate_key: str | None = None,
    bind_port: int = 6443,
    cgroup_driver: str = "systemd",
    image_repository: str | None = None,
) -> list[dict]:
    """The documents of ``kubeadm init --config``: InitConfiguration, ClusterConfiguration (stacked
    etcd, the brief's pod and service CIDRs, the shared control-plane endpoint) and the kubelet's
    KubeletConfiguration. ``certificate_key`` (a secret) is set for a multi-node control plane."""
    clean = clean_brief(brief)
    net = clean["networks"].get("kubernetes") or {}
    version = k8s_version(clean)
    if not version:
        raise ValueError("expected software.kubernetes in the brief, found none")
    if not net.get("pod_cidr") or not net.get("service_cidr"):
        raise ValueError("expected networks.kubernetes.pod_cidr and service_cidr in the brief, found none")
    host, _, port = endpoint.rpartition(":") if ":" in endpoint else (endpoint, "", "")
    init: dict[str, Any] = {
        "apiVersion": KUBEADM_API,
        "kind": "InitConfiguration",
        "localAPIEndpoint": {"advertiseAddress": advertise_address, "bindPort": bind_port},
        "nodeRegistration": {
            "name": node_name,
            "criSocket": CRI_SOCKET,
            "taints": [dict(CONTROL_PLANE_TAINT)],
            "kubeletExtraArgs": _kubelet_args(advertise_address),
        },
    }
    if certificate_key:
        init["certificateKey"] = certificate_key
    cluster: dict[str, Any] = {
        "apiVersion": KUBEADM_API,
        "kind": "ClusterConfiguration",
        "clusterName": clean["cluster"].get("name", "kubernetes"),
        "kubernetesVersion": f"v{version}",
        "controlPlaneEndpoint": f"{host or endpoint}:{port or bind_port}",
        "networking": {
            "podSubnet": net["pod_cidr"],
            "serviceSubnet": net["service_cidr"],
            "dnsDomain": "cluster.local",
        },
        "etcd": {"local": {"dataDir": "/var/lib/etcd"}},
        "apiServer": {"certSANs": sorted({host or endpoint, *(cert_sans or [])})},
    }
    if image_repository:
        cluster["imageRepository"] = image_repository
    kubelet = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": cgroup_driver,
    }
    return [init, cluster, kubelet]


def etcd_unhealthy(text: str) -> list[str]:
    """The members ``etcdctl endpoint health --cluster -w json`` does not report healthy, as
    ``<endpoint>: <error>``; every member when the output is no such list (nothing to trust)."""
    try:
        members = json.loads(text)
    except (TypeError, ValueError):
        return [f"etcdctl printed no member list: {str(text)[:200]!r}"]
    if not isinstance(members, list) or not members:
        return [f"etcdctl printed no member list: {str(text)[:200]!r}"]
    return [
        f"{m.get('endpoint', '?')}: {m.get('error') or 'unhealthy'}"
        for m in members
        if not (isinstance(m, dict) and m.get("health") is True)
    ]


def kubeadm_join_config(
    node_name: str,
    endpoint: str,
    token: str,
    ca_cert_hash: str,
    advertise_address: str | None = None,
    control_plane: bool = False,
    certificate_key: str | None = None,
    taints: list[dict] | None = None,
    bind_port: int = 6443,
) -> dict:
    """``kubeadm join --config``: token discovery pinned to the CA's hash; a control-plane node
    also gets its local API endpoint and the certificate key; a worker its pool's taints at
    registration (so nothing lands on it before the labels and taints are reconciled)."""
    if not re.fullmatch(r"[a-z0-9]{6}\.[a-z0-9]{16}", token or ""):
        raise ValueError("expected a bootstrap token of the form [a-z0-9]{6}.[a-z0-9]{16}")
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", ca_cert_hash or ""):
        raise ValueError(f"expected a CA hash sha256:<64 hex digits>, found {ca_cert_hash!r}")
    join: dict[str, Any] = {
        "apiVersion": KUBEADM_API,
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {"apiServerEndpoint": endpoint, "token": token, "caCertHashes": [ca_cert_hash]},
        },
        "nodeRegistration": {
            "name": node_name,
            "criSocket": CRI_SOCKET,
            "taints": [dict(CONTROL_PLANE_TAINT)] if control_plane else list(taints or []),
            "kubeletExtraArgs": _kubelet_args(advertise_address),
        },
    }
    if control_plane:
        if not certificate_key:
            raise ValueError("a control-plane join needs the certificate key")
        join["controlPlane"] = {
            "localAPIEndpoint": {"advertiseAddress": advertise_address, "bindPort": bind_port},
            "certificateKey": certificate_key,
        }
    return join


# --- the pod network (Calico through the Tigera operator) ----------------------------------------


def calico_installation(brief: Any, mtu: int | None = None, encapsulation: str = "VXLANCrossSubnet") -> list[dict]:
    """Calico's ``Installation`` (operator.tigera.io/v1) with one IP pool: the brief's pod CIDR."""
    clean = clean_brief(brief)
    pod_cidr = (clean["networks"].get("kubernetes") or {}).get("pod_cidr")
    if not pod_cidr:
        raise ValueError("expected networks.kubernetes.pod_cidr in the brief, found none")
    v6 = ":" in pod_cidr
    pool = {
        "name": "gpufleet-pods",
        "cidr": pod_cidr,
        "blockSize": 122 if v6 else CALICO_BLOCK_SIZE_V4,
        "encapsulation": "None" if v6 else encapsulation,
        "natOutgoing": "Enabled",
        "nodeSelector": "all()",
    }
    network: dict[str, Any] = {"ipPools": [pool]}
    if mtu:
        network["mtu"] = mtu
    return [
        {
            "apiVersion": "operator.tigera.io/v1",
            "kind": "Installation",
            "metadata": {"name": "default"},
            "spec": {"calicoNetwork": network},
        },
        {"apiVersion": "operator.tigera.io/v1", "kind": "APIServer", "metadata": {"name": "default"}, "spec": {}},
    ]


# --- GPU Operator ---------------------------------------------------------------------------------


def mig_strategy(brief: Any) -> str:
    """The cluster's MIG strategy: the MIG pools' (mixed when any says mixed), single otherwise."""
    pools = [p for p in clean_brief(brief)["pools"] if p.get("sharing") == "mig"]
    strategies = {(p.get("sharing_config") or {}).get("mig_strategy", "single") for p in pools}
    return "mixed" if "mixed" in strategies else "single"


def device_plugin_config(brief: Any, namespace: str = "gpu-operator") -> dict | None:
    """The device plugin's ConfigMap: a ``default`` entry and one per time-slicing pool (selected by
    the node label nvidia.com/device-plugin.config=<pool>). None when no pool time-slices."""
    clean = clean_brief(brief)
    strategy = mig_strategy(clean)
    sliced = [p for p in clean["pools"] if p.get("sharing") == "time-slicing"]
    if not sliced:
        return None
    data = {DEVICE_PLUGIN_DEFAULT: _dump({"version": "v1", "flags": {"migStrategy": strategy}})}
    for pool in sliced:
        cfg = {
            "version": "v1",
            "flags": {"migStrategy": strategy},
            "sharing": {
                "timeSlicing": {
                    "renameByDefault": False,
                    "failRequestsGreaterThanOne": True,
                    "resources": [{"name": GPU_RESOURCE, "replicas": shares_per_gpu(pool)}],
                }
            },
        }
        data[pool["name"]] = _dump(cfg)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": DEVICE_PLUGIN_CONFIGMAP,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpufleet"},
        },
        "data": data,
    }


def _dump(data: Any) -> str:
    """A small, stable YAML rendering of plain data (the device plugin reads YAML or JSON)."""
    import json

    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def gpu_operator_values(brief: Any, driver_enabled: bool = False, toolkit_enabled: bool = False) -> dict:
    """Helm values of the GPU Operator chart from the brief.

    The host driver and container toolkit are gpufleet's (``driver.enabled`` / ``toolkit.enabled``
    false); the DCGM exporter is on; the MIG strategy comes from the MIG pools and the MIG manager
    runs when a pool uses MIG (nodes select their layout with nvidia.com/mig.config); time-slicing
    pools get the device plugin configuration of ``device_plugin_config``. GPUDirect RDMA and GDS
    are the driver container's (``driver.rdma``, ``gds``) only when the operator manages the driver;
    with the host driver the gpudirect role loads nvidia-peermem and nvidia-fs on the host.
    """
    clean = clean_brief(brief)
    pools = clean["pools"]
    fabric = (clean["networks"].get("fabric") or {}).get("type", "none")
    rdma_pools = [p for p in pools if p.get("gpudirect_rdma")]
    values: dict[str, Any] = {
        "driver": {"enabled": driver_enabled},
        "toolkit": {"enabled": toolkit_enabled},
        "dcgmExporter": {"enabled": True},
        "devicePlugin": {"enabled": True},
        "mig": {"strategy": mig_strategy(clean)},
        "migManager": {"enabled": any(p.get("sharing") == "mig" for p in pools)},
        "nfd": {"enabled": True},
        "gfd": {"enabled": True},
    }
    if driver_enabled and rdma_pools and fabric in ("infiniband", "roce"):
        values["driver"]["rdma"] = {
            "enabled": True,
            "useHostMofed": clean["software"].get("rdma_stack") == "doca-ofed",
        }
        if any(p.get("gds") for p in pools):
            values["gds"] = {"enabled": True}
    # operator.defaultRuntime exists only in charts before v25.3.0 (the vendor matrix); a newer or
    # unpinned chart gets none.
    runtime = vendor_matrix.gpu_operator_default_runtime(clean["software"].get("gpu_operator"))
    if runtime:
        values["operator"] = {"defaultRuntime": runtime}
    if values["migManager"]["enabled"]:
        values["migManager"]["config"] = {"default": "all-disabled"}
    if any(p.get("sharing") == "time-slicing" for p in pools):
        values["devicePlugin"]["config"] = {"name": DEVICE_PLUGIN_CONFIGMAP, "default": DEVICE_PLUGIN_DEFAULT}
    return values


# --- tenants: quotas, Kueue, namespaces -----------------------------------------------------------


def tenant_namespace(tenant: dict) -> str:
    return tenant["name"]


def _split(total: int, weights: list[int]) -> list[int]:
    """Split ``total`` in proportion to ``weights`` (largest remainder; sums to total)."""
    if not weights or sum(weights) <= 0:
        return [0] * len(weights)
    raw = [total * w / sum(weights) for w in weights]
    out = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def tenant_quotas(
    brief: Any, nodes: dict[str, int] | None = None, cpu_per_gpu: int = 16, memory_gib_per_gpu: int = 128
) -> dict[str, dict[str, dict]]:
    """Each tenant's quota per pool: ``{tenant: {pool: {gpus, resource, shares, cpu, memory_gib}}}``.

    A tenant's ``gpus`` are split over its pools (all pools by default) in proportion to the pools'
    GPUs (``nodes`` from the inventory; one node each when unknown). ``shares`` counts the pool's
    schedulable units (GPUs x time-slicing replicas or MIG instances). CPU and memory are the same
    fraction of the pool's ``cpus`` / ``memory_gib`` when the brief gives them, else per GPU.
    """
    clean = clean_brief(brief)
    nodes = nodes or {}
    by_name = {p["name"]: p for p in clean["pools"] if p.get("name")}
    out: dict[str, dict[str, dict]] = {}
    for tenant in clean["tenants"]:
        names = [n for n in (tenant.get("pools") or list(by_name)) if n in by_name]
        gpus_of = [by_name[n].get("gpus_per_node", 0) * max(nodes.get(n, 1), 1) for n in names]
        split = _split(int(tenant.get("gpus", 0)), gpus_of)
        quota = {}
        for name, gpus, capacity in zip(names, split, gpus_of, strict=True):
            pool = by_name[name]
            frac = gpus / capacity if capacity else 0
            count = max(nodes.get(name, 1), 1)
            cpu = int(pool["cpus"] * count * frac) if pool.get("cpus") else gpus * cpu_per_gpu
            mem = int(pool["memory_gib"] * count * frac) if pool.get("memory_gib") else gpus * memory_gib_per_gpu
            quota[name] = {
                "gpus": gpus,
                "resource": pool_resource(pool),
                "shares": gpus * shares_per_gpu(pool),
                "cpu": cpu,
                "memory_gib": mem,
            }
        out[tenant["name"]] = quota
    return out


def kueue_objects(
    brief: Any,
    nodes: dict[str, int] | None = None,
    cpu_per_gpu: int = 16,
    memory_gib_per_gpu: int = 128,
    topology: bool = True,
) -> list[dict]:
    """With ``topology``, the Topology (leaf switch, rack, node); ResourceFlavors (one per pool: its
    node label, tolerations of its taints and, with ``topology``, the Topology's name, so that
    Kueue places a job's pods by leaf and rack); a WorkloadPriorityClass per tenant
    (``gpufleet-<tenant>``, the tenant's priority); a ClusterQueue per tenant in one cohort (the
    cluster's name; borrowing unlimited inside it) with the tenant's quota per flavor and
    preemption by priority (lower-priority workloads of the queue, any workload borrowing the
    queue's quota elsewhere in the cohort, and lower-priority ones of the cohort while this queue
    borrows); and a LocalQueue ``default`` in each tenant's namespace."""
    clean = clean_brief(brief)
    cohort = clean["cluster"].get("name", "gpufleet")
    objs: list[dict] = [kueue_topology()] if topology else []
    for pool in clean["pools"]:
        spec = {
            "nodeLabels": {f"{LABEL_PREFIX}pool": pool["name"]},
            "tolerations": tolerations(node_taints(clean, pool["name"])),
        }
        if topology:
            spec["topologyName"] = TOPOLOGY_NAME
        objs.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "ResourceFlavor",
                "metadata": {"name": pool["name"], "labels": {f"{LABEL_PREFIX}pool": pool["name"]}},
                "spec": spec,
            }
        )
    for tenant in clean["tenants"]:
        objs.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "WorkloadPriorityClass",
                "metadata": {
                    "name": f"{PRIORITY_CLASS_PREFIX}{tenant['name']}",
                    "labels": {f"{LABEL_PREFIX}tenant": tenant["name"]},
                },
                "value": tenant_priority(tenant),
                "description": f"Workloads of tenant {tenant['name']} (gpufleet, from the brief)",
            }
        )
    quotas = tenant_quotas(clean, nodes, cpu_per_gpu, memory_gib_per_gpu)
    for tenant in clean["tenants"]:
        quota = quotas[tenant["name"]]
        gpu_names = sorted({q["resource"] for q in quota.values()})
        covered = ["cpu", "memory", *gpu_names]
        flavors = []
        for pool_name, q in quota.items():
            amounts = {"cpu": str(q["cpu"]), "memory": f"{q['memory_gib']}Gi"}
            amounts.update({r: q["shares"] if r == q["resource"] else 0 for r in gpu_names})
            flavors.append({"name": pool_name, "resources": [{"name": r, "nominalQuota": amounts[r]} for r in covered]})
        spec: dict[str, Any] = {
            "cohort": cohort,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": tenant_namespace(tenant)}},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {
                "withinClusterQueue": "LowerPriority",
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority"},
            },
            "resourceGroups": [{"coveredResources": covered, "flavors": flavors}] if flavors else [],
        }
        objs.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "ClusterQueue",
                "metadata": {"name": tenant["name"], "labels": {f"{LABEL_PREFIX}tenant": tenant["name"]}},
                "spec": spec,
            }
        )
        objs.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "LocalQueue",
                "metadata": {"name": "default", "namespace": tenant_namespace(tenant)},
                "spec": {"clusterQueue": tenant["name"]},
            }
        )
    return objs


def tenancy_objects(
    brief: Any,
    nodes: dict[str, int] | None = None,
    cpu_per_gpu: int = 16,
    memory_gib_per_gpu: int = 128,
    default_request: dict | None = None,
    default_limit: dict | None = None,
    role: str = "edit",
) -> list[dict]:
    """Per tenant: a PriorityClass ``gpufleet-<tenant>`` (the tenant's priority, for its pods'
    ``priorityClassName``; Kueue reads it too when a job names no WorkloadPriorityClass),
    Namespace, ResourceQuota (GPU shares, CPU, memory requests), LimitRange (container defaults,
    so every pod counts against the quota), a RoleBinding of the ClusterRole ``role`` to the
    tenant's group, and NetworkPolicies: default deny, intra-namespace allowed, DNS to
    kube-system allowed."""
    clean = clean_brief(brief)
    quotas = tenant_quotas(clean, nodes, cpu_per_gpu, memory_gib_per_gpu)
    default_request = default_request or {"cpu": "100m", "memory": "256Mi"}
    default_limit = default_limit or {"cpu": "1", "memory": "1Gi"}
    objs: list[dict] = []
    for tenant in clean["tenants"]:
        name, ns = tenant["name"], tenant_namespace(tenant)
        quota = quotas[name]
        labels = {f"{LABEL_PREFIX}tenant": name, "app.kubernetes.io/managed-by": "gpufleet"}
        hard = {
            "requests.cpu": str(sum(q["cpu"] for q in quota.values())),
            "requests.memory": f"{sum(q['memory_gib'] for q in quota.values())}Gi",
        }
        for resource in sorted({q["resource"] for q in quota.values()}):
            hard[f"requests.{resource}"] = str(sum(q["shares"] for q in quota.values() if q["resource"] == resource))
        if not quota:
            hard[f"requests.{GPU_RESOURCE}"] = "0"
        meta = {"namespace": ns, "labels": labels}
        objs += [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": f"{PRIORITY_CLASS_PREFIX}{name}", "labels": labels},
                "value": tenant_priority(tenant),
                "globalDefault": False,
                "preemptionPolicy": "PreemptLowerPriority",
                "description": f"Pods of tenant {name} (gpufleet, from the brief)",
            },
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}},
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "gpufleet-quota", **meta},
                "spec": {"hard": hard},
            },
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": "gpufleet-defaults", **meta},
                "spec": {
                    "limits": [{"type": "Container", "defaultRequest": default_request, "default": default_limit}]
                },
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": f"gpufleet-{role}", **meta},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": tenant.get("group") or name}
                ],
            },
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {"name": "gpufleet-default-deny", **meta},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
            },
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {"name": "gpufleet-allow-same-namespace", **meta},
                "spec": {
                    "podSelector": {},
                    "policyTypes": ["Ingress", "Egress"],
                    "ingress": [{"from": [{"podSelector": {}}]}],
                    "egress": [{"to": [{"podSelector": {}}]}],
                },
            },
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {"name": "gpufleet-allow-dns", **meta},
                "spec": {
                    "podSelector": {},
                    "policyTypes": ["Egress"],
                    "egress": [
                        {
                            "to": [
                                {
                                    "namespaceSelector": {
                                        "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
                                    },
                                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                                }
                            ],
                            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                        }
                    ],
                },
            },
        ]
    return objs


# --- acceptance as an MPIJob ----------------------------------------------------------------------


def mpijob(
    brief: Any,
    pool_name: str,
    nodes: int,
    image: str,
    test_argv: list[str],
    name: str | None = None,
    namespace: str = "gpufleet",
    env: dict | None = None,
    mpirun_args: list[str] | None = None,
    extra_resources: dict | None = None,
    gpus_per_task: int = 1,
    hostnames: list[str] | None = None,
    active_deadline_s: int | None = None,
) -> dict:
    """The all-node NCCL run of a pool as a kubeflow.org/v2beta1 MPIJob: one worker per node
    (the pool's node selector and tolerations, all its GPUs), a launcher running ``mpirun`` with
    one rank per ``gpus_per_task`` GPUs and ``test_argv`` (all_reduce_perf and its arguments).
    ``hostnames`` pins the workers to those nodes (a bisect group); ``nodes`` must equal their number.
    ``active_deadline_s``: the cluster fails the job that long after its creation and frees its
    GPUs (``runPolicy.activeDeadlineSeconds``, the launcher Job's deadline), whoever is watching it."""
    clean = clean_brief(brief)
    pool = _pool(clean, pool_name)
    gpus = int(pool.get("gpus_per_node", 1))
    if nodes < 1:
        raise ValueError(f"expected at least one node in pool {pool_name}, found {nodes}")
    if gpus_per_task < 1 or gpus % gpus_per_task:
        raise ValueError(f"gpus_per_task {gpus_per_task} must divide the pool's {gpus} GPUs per node")
    slots = gpus // gpus_per_task
    spec = node_spec(clean, pool_name)
    env = env or {}
    env_list = [{"name": k, "value": str(v)} for k, v in sorted(env.items())]
    x_args = [a for k in sorted(env) for a in ("-x", k)]
    launcher_args = ["-np", str(nodes * slots), *(mpirun_args or []), *x_args, *test_argv]
    resources = {pool_resource(pool): gpus, **(extra_resources or {})}
    if hostnames is not None and len(hostnames) != nodes:
        raise ValueError(f"expected {nodes} host names for {nodes} workers, found {len(hostnames)}")
    if active_deadline_s is not None and int(active_deadline_s) < 1:
        raise ValueError(f"expected an active deadline of at least 1 s, found {active_deadline_s}")
    run_policy: dict[str, Any] = {"cleanPodPolicy": "Running", "backoffLimit": 0}
    if active_deadline_s is not None:
        run_policy["activeDeadlineSeconds"] = int(active_deadline_s)
    worker_pod: dict[str, Any] = {
        "nodeSelector": {f"{LABEL_PREFIX}pool": pool_name},
        "tolerations": spec["tolerations"],
        "containers": [
            {
                "name": "worker",
                "image": image,
                "env": env_list,
                "resources": {"limits": resources},
                "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
            }
        ],
    }
    if hostnames:
        worker_pod["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": list(hostnames)}
                            ]
                        }
                    ]
                }
            }
        }
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": name or f"gpufleet-nccl-{pool_name}",
            "namespace": namespace,
            "labels": {f"{LABEL_PREFIX}pool": pool_name, f"{LABEL_PREFIX}purpose": "acceptance"},
        },
        "spec": {
            "slotsPerWorker": slots,
            "mpiImplementation": "OpenMPI",
            "runPolicy": run_policy,
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "tolerations": spec["tolerations"],
                            "containers": [
                                {
                                    "name": "launcher",
                                    "image": image,
                                    "command": ["mpirun"],
                                    "args": launcher_args,
                                    "env": env_list,
                                }
                            ],
                        }
                    },
                },
                "Worker": {"replicas": nodes, "template": {"spec": worker_pod}},
            },
        },
    }


def cluster_manifests(brief: Any, nodes: dict[str, int] | None = None, **kw: Any) -> dict[str, list[dict]]:
    """Every object the Kubernetes roles apply for a brief, by role (for the offline schema tests)."""
    clean = clean_brief(brief)
    plugin = device_plugin_config(clean)
    return {
        "cni": calico_installation(clean),
        "gpu_operator": [plugin] if plugin else [],
        "kueue": kueue_objects(clean, nodes, **kw),
        "tenancy": tenancy_objects(clean, nodes, **kw),
    }


__all__ = [
    "GPU_RESOURCE",
    "RESERVED_NAMESPACES",
    "calico_installation",
    "cluster_manifests",
    "device_plugin_config",
    "etcd_unhealthy",
    "gpu_operator_values",
    "k8s_minor",
    "k8s_version",
    "kubeadm_init_config",
    "kubeadm_join_config",
    "kueue_objects",
    "kueue_topology",
    "mig_instances",
    "mpijob",
    "node_labels",
    "node_spec",
    "node_taints",
    "pool_nodes",
    "pool_resource",
    "shares_per_gpu",
    "tenancy_objects",
    "tenant_priority",
    "tenant_quotas",
    "topology_labels",
]
