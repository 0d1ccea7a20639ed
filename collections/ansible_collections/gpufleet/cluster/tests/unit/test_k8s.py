"""The Kubernetes content derived from the brief (module_utils/k8s/objects.py), and every rendered object
validated offline: built-in kinds against the pinned Kubernetes version's schemas
(kubernetes-validate), custom resources and kubeadm documents against k8s_schemas.py."""

from __future__ import annotations

import copy
import json
import os

import jsonschema
import kubernetes_validate
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter import k8s as k8s_filter
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema as brief_schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.k8s import objects as k8s
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import gate as preflight
from k8s_schemas import KUBEADM, RULES, SCHEMAS
from preflight_helpers import DELETE, set_path, site

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 6))
TOKEN = "abcdef.0123456789abcdef"
CA_HASH = "sha256:" + "ab" * 32
CERT_KEY = "0f" * 32


def _load(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def h200():
    """The H200 RoCE example (inventories/example-h200-roce-k8s): brief and pool sizes."""
    brief, groups, _hv = site("k8s")
    return brief, k8s.pool_nodes(brief, groups)


def stack():
    """The Molecule gpu_stack scenario's brief (one node per pool)."""
    return _load("molecule/gpu_stack/vars/brief.yml"), {"stack-h100": 1, "stack-l40s": 1}


def lab_k8s():
    """The lab cluster as a Kubernetes brief: the lab's brief with the Kubernetes fields."""
    brief = _load("inventories/lab/brief.yml")
    brief["cluster"]["control_plane"] = "kubernetes"
    brief["software"].update({"kubernetes": "1.33.4", "gpu_operator": "25.3.4"})
    brief["networks"]["kubernetes"] = {"pod_cidr": "10.244.0.0/16", "service_cidr": "10.245.0.0/20"}
    return brief, {"h100-lab": 2}


BRIEFS = {"h200-roce-example": h200, "gpu_stack-scenario": stack, "lab-like": lab_k8s}


# --------------------------------------------------------------------------- validation helpers


def validate(obj: dict, version: str) -> None:
    """Raise when obj is not valid for Kubernetes ``version`` (strict: unknown fields fail)."""
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key in SCHEMAS:
        jsonschema.validate(obj, SCHEMAS[key])
        if key in RULES:
            RULES[key](obj)
    elif key in KUBEADM:
        jsonschema.validate(obj, KUBEADM[key])
    else:
        kubernetes_validate.validate(obj, version, strict=True)


def _all_objects(brief, nodes):
    version = k8s.k8s_version(brief)
    objs = [o for group in k8s.cluster_manifests(brief, nodes).values() for o in group]
    objs += k8s.kubeadm_init_config(brief, "cp01", "10.40.0.11", "cp01:6443", ["10.40.0.11"], CERT_KEY)
    objs.append(k8s.kubeadm_join_config("cp02", "cp01:6443", TOKEN, CA_HASH, "10.40.0.12", True, CERT_KEY))
    for pool in k8s.clean_brief(brief)["pools"]:
        taints = k8s.node_taints(brief, pool["name"])
        objs.append(k8s.kubeadm_join_config("gpu001", "cp01:6443", TOKEN, CA_HASH, "10.40.0.101", taints=taints))
        objs.append(
            k8s.mpijob(
                brief,
                pool["name"],
                max(nodes.get(pool["name"], 1), 1),
                "nvcr.io/nvidia/pytorch:25.01-py3",
                ["/opt/nccl-tests/bin/all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1"],
                env={"NCCL_DEBUG": "INFO"},
                active_deadline_s=720,
            )
        )
    return version, objs


@pytest.mark.parametrize("name", list(BRIEFS))
def test_every_rendered_object_is_valid_for_the_pinned_version(name):
    brief, nodes = BRIEFS[name]()
    assert preflight.check(brief, *site("k8s")[1:]) is not None  # the brief parses
    version, objs = _all_objects(brief, nodes)
    assert version == "1.33.4"
    kinds = {o["kind"] for o in objs}
    assert {
        "Namespace",
        "ResourceQuota",
        "LimitRange",
        "RoleBinding",
        "NetworkPolicy",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "Topology",
        "WorkloadPriorityClass",
        "PriorityClass",
        "Installation",
        "MPIJob",
        "InitConfiguration",
        "ClusterConfiguration",
        "JoinConfiguration",
        "KubeletConfiguration",
    } <= kinds
    for obj in objs:
        validate(obj, version)
    # The objects survive the YAML round trip the templates make.
    assert list(yaml.safe_load_all(yaml.safe_dump_all(objs))) == objs


def test_gpu_operator_config_map_is_valid_and_device_plugin_config_parses():
    brief, _nodes = h200()
    cm = k8s.device_plugin_config(brief)
    validate(cm, "1.33.4")
    assert set(cm["data"]) == {"default", "l40s-infer"}
    sliced = yaml.safe_load(cm["data"]["l40s-infer"])
    assert sliced["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert yaml.safe_load(cm["data"]["default"]) == {"version": "v1", "flags": {"migStrategy": "single"}}


@pytest.mark.parametrize(
    ("obj", "path", "value"),
    [
        ("ResourceQuota", "spec.hard", ["requests.cpu"]),
        ("NetworkPolicy", "spec.podSelector", "all"),
        ("RoleBinding", "roleRef.kind", None),
        ("Namespace", "spec.bogus", 1),
        ("ClusterQueue", "spec.resourceGroups.0.flavors.0.resources.0.nominalQuota", "lots"),
        ("ClusterQueue", "spec.cohortName", "x"),
        ("LocalQueue", "spec.clusterQueue", DELETE),
        ("ResourceFlavor", "spec.tolerations.0.operator", "Maybe"),
        ("ResourceFlavor", "spec.topology", "gpufleet"),
        ("ClusterQueue", "spec.preemption.borrowWithinCohort.policy", "Any"),
        ("ClusterQueue", "spec.preemption.borrowWithinCohort.maxPriorityThreshold", 2**31),
        ("Topology", "spec.levels", []),
        ("Topology", "spec.levels.0.nodeLabel", "gpufleet.io/leaf switch"),
        ("Topology", "spec.levels", [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "gpufleet.io/rack"}]),
        ("Topology", "spec.levels.1", {"nodeLabel": "gpufleet.io/leaf"}),
        ("Topology", "spec.levels.0.label", "x"),
        ("WorkloadPriorityClass", "value", DELETE),
        ("WorkloadPriorityClass", "value", "high"),
        ("WorkloadPriorityClass", "spec.value", 1),
        ("PriorityClass", "value", "100"),
        ("PriorityClass", "preemptionPolicy", 1),
        ("PriorityClass", "priority", 100),
        ("Installation", "spec.calicoNetwork.ipPools.0.encapsulation", "GRE"),
        ("MPIJob", "spec.mpiReplicaSpecs.Launcher", DELETE),
        ("MPIJob", "spec.slotsPerWorker", "8"),
        ("ClusterConfiguration", "networking.podCIDR", "10.0.0.0/8"),
        ("JoinConfiguration", "discovery.bootstrapToken.caCertHashes", []),
        ("InitConfiguration", "nodeRegistration.kubeletExtraArgs", {"node-ip": "1.2.3.4"}),
    ],
)
def test_validation_catches_a_broken_object(obj, path, value):
    """The validators can fail: each mutation of a valid object must be rejected."""
    brief, nodes = h200()
    version, objs = _all_objects(brief, nodes)
    target = copy.deepcopy(next(o for o in objs if o["kind"] == obj))
    validate(target, version)
    set_path(target, path, value)
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)):
        validate(target, version)


# --------------------------------------------------------------------------- labels and taints


def test_node_labels_carry_the_brief_words():
    brief, _ = h200()
    train = k8s.node_labels(brief, "h200-train")
    assert train == {
        "gpufleet.io/pool": "h200-train",
        "gpufleet.io/accelerator": "h200-sxm-141gb",
        "gpufleet.io/topology": "8gpu-sxm-nvlink",
        "gpufleet.io/fabric": "roce",
        "gpufleet.io/workload": "distributed-training",
        "gpufleet.io/sharing": "full-gpu",
        "nvidia.com/gpu.product": "NVIDIA-H200",
    }
    infer = k8s.node_labels(brief, "l40s-infer")
    assert infer["gpufleet.io/fabric"] == "none"  # no fabric NICs in this pool
    assert infer["gpufleet.io/sharing"] == "time-slicing"
    assert infer["nvidia.com/device-plugin.config"] == "l40s-infer"


def test_pool_labels_override_the_derived_ones():
    brief, _ = h200()
    brief["pools"][1]["labels"]["gpufleet.io/workload"] = "serving"
    assert k8s.node_labels(brief, "l40s-infer")["gpufleet.io/workload"] == "serving"


def test_gpu_taint_added_once():
    brief, _ = h200()
    # h200-train already taints nvidia.com/gpu=present:NoSchedule: not doubled.
    assert k8s.node_taints(brief, "h200-train") == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    assert k8s.node_taints(brief, "l40s-infer") == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    sb, _ = stack()
    spec = k8s.node_spec(sb, "stack-h100")
    assert spec["taints"] == [
        {"key": "gpufleet.io/reserved", "value": "training", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
    ]
    assert spec["tolerations"][0] == {
        "key": "gpufleet.io/reserved",
        "operator": "Equal",
        "value": "training",
        "effect": "NoSchedule",
    }
    assert [k8s.taint_text(t) for t in spec["taints"]] == [
        "gpufleet.io/reserved=training:NoSchedule",
        "nvidia.com/gpu=present:NoSchedule",
    ]


def test_taint_without_value_is_tolerated_by_exists():
    assert k8s.parse_taint("dedicated:NoExecute") == {"key": "dedicated", "effect": "NoExecute"}
    assert k8s.tolerations([{"key": "dedicated", "effect": "NoExecute"}]) == [
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}
    ]
    with pytest.raises(ValueError):
        k8s.parse_taint("dedicated:Sometimes")


def test_unknown_pool_is_named():
    brief, _ = h200()
    with pytest.raises(ValueError, match=r"no pool named 'nope'.*h200-train, l40s-infer"):
        k8s.node_labels(brief, "nope")


# --------------------------------------------------------------------------- kubeadm


def test_kubeadm_init_takes_the_brief_networks_and_version():
    brief, _ = h200()
    init, cluster, kubelet = k8s.kubeadm_init_config(
        brief, "cp01", "10.40.0.11", "k8s-api.example:6443", ["10.40.0.11", "10.40.0.12"], CERT_KEY
    )
    assert cluster["networking"] == {
        "podSubnet": "10.96.0.0/16",
        "serviceSubnet": "10.97.0.0/20",
        "dnsDomain": "cluster.local",
    }
    assert cluster["kubernetesVersion"] == "v1.33.4"
    assert cluster["controlPlaneEndpoint"] == "k8s-api.example:6443"
    assert cluster["clusterName"] == "ams-k8s"
    assert cluster["etcd"] == {"local": {"dataDir": "/var/lib/etcd"}}
    assert cluster["apiServer"]["certSANs"] == ["10.40.0.11", "10.40.0.12", "k8s-api.example"]
    assert init["certificateKey"] == CERT_KEY
    assert init["localAPIEndpoint"] == {"advertiseAddress": "10.40.0.11", "bindPort": 6443}
    assert init["nodeRegistration"]["kubeletExtraArgs"] == [{"name": "node-ip", "value": "10.40.0.11"}]
    assert kubelet["cgroupDriver"] == "systemd"
    single = k8s.kubeadm_init_config(brief, "cp01", "10.40.0.11", "10.40.0.11")
    assert "certificateKey" not in single[0]
    assert single[1]["controlPlaneEndpoint"] == "10.40.0.11:6443"


@pytest.mark.parametrize(
    ("path", "match"), [("software.kubernetes", "software.kubernetes"), ("networks.kubernetes", "pod_cidr")]
)
def test_kubeadm_init_needs_the_kubernetes_fields(path, match):
    brief, _ = h200()
    set_path(brief, path, DELETE)
    with pytest.raises(ValueError, match=match):
        k8s.kubeadm_init_config(brief, "cp01", "10.40.0.11", "10.40.0.11")


def test_kubeadm_join_worker_and_control_plane():
    worker = k8s.kubeadm_join_config(
        "gpu001",
        "cp01:6443",
        TOKEN,
        CA_HASH,
        "10.40.0.101",
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    )
    assert worker["discovery"]["bootstrapToken"] == {
        "apiServerEndpoint": "cp01:6443",
        "token": TOKEN,
        "caCertHashes": [CA_HASH],
    }
    assert "controlPlane" not in worker
    assert worker["nodeRegistration"]["taints"][0]["key"] == "nvidia.com/gpu"
    cp = k8s.kubeadm_join_config("cp02", "cp01:6443", TOKEN, CA_HASH, "10.40.0.12", True, CERT_KEY)
    assert cp["controlPlane"] == {
        "localAPIEndpoint": {"advertiseAddress": "10.40.0.12", "bindPort": 6443},
        "certificateKey": CERT_KEY,
    }
    assert cp["nodeRegistration"]["taints"] == [
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    ]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("n", "cp:6443", "not-a-token", CA_HASH), "bootstrap token"),
        (("n", "cp:6443", TOKEN, "md5:abc"), "CA hash"),
    ],
)
def test_kubeadm_join_rejects_bad_secrets_without_echoing_the_token(args, match):
    with pytest.raises(ValueError, match=match) as exc:
        k8s.kubeadm_join_config(*args)
    assert TOKEN not in str(exc.value)
    with pytest.raises(ValueError, match="certificate key"):
        k8s.kubeadm_join_config("n", "cp:6443", TOKEN, CA_HASH, control_plane=True)


# --------------------------------------------------------------------------- CNI


@pytest.mark.parametrize("name", list(BRIEFS))
def test_calico_pool_is_the_brief_pod_cidr(name):
    brief, _ = BRIEFS[name]()
    installation = k8s.calico_installation(brief)[0]
    pools = installation["spec"]["calicoNetwork"]["ipPools"]
    assert [p["cidr"] for p in pools] == [brief["networks"]["kubernetes"]["pod_cidr"]]
    assert pools[0]["blockSize"] == 26


# --------------------------------------------------------------------------- GPU Operator


def test_gpu_operator_values_keep_the_host_stack():
    brief, _ = h200()
    values = k8s.gpu_operator_values(brief)
    assert values["driver"] == {"enabled": False}
    assert values["toolkit"] == {"enabled": False}
    assert values["dcgmExporter"] == {"enabled": True}
    assert values["mig"] == {"strategy": "single"}
    assert values["migManager"] == {"enabled": False}
    assert values["devicePlugin"]["config"] == {"name": "gpufleet-device-plugin", "default": "default"}
    assert "gds" not in values


def test_gpu_operator_values_rdma_and_gds_when_it_manages_the_driver():
    brief, _ = h200()
    values = k8s.gpu_operator_values(brief, driver_enabled=True)
    assert values["driver"] == {"enabled": True, "rdma": {"enabled": True, "useHostMofed": True}}
    assert values["gds"] == {"enabled": True}
    brief["networks"]["fabric"]["type"] = "ethernet"
    assert "rdma" not in k8s.gpu_operator_values(brief, driver_enabled=True)["driver"]


def test_mig_pools_drive_the_strategy_and_the_mig_manager():
    brief, _ = h200()
    brief["pools"][0].update({"sharing": "mig", "sharing_config": {"mig_profile": "1g.18gb"}})
    values = k8s.gpu_operator_values(brief)
    assert values["mig"] == {"strategy": "single"}
    assert values["migManager"] == {"enabled": True, "config": {"default": "all-disabled"}}
    assert k8s.node_labels(brief, "h200-train")["nvidia.com/mig.config"] == "all-1g.18gb"
    assert k8s.shares_per_gpu(brief["pools"][0]) == 7
    assert k8s.pool_resource(brief["pools"][0]) == "nvidia.com/gpu"
    brief["pools"][0]["sharing_config"]["mig_strategy"] = "mixed"
    assert k8s.gpu_operator_values(brief)["mig"] == {"strategy": "mixed"}
    assert k8s.pool_resource(brief["pools"][0]) == "nvidia.com/mig-1g.18gb"


@pytest.mark.parametrize(
    ("profile", "n"), [("1g.18gb", 7), ("2g.35gb", 3), ("3g.71gb", 2), ("4g.71gb", 1), ("7g.141gb", 1)]
)
def test_mig_instances(profile, n):
    assert k8s.mig_instances(profile) == n


# --------------------------------------------------------------------------- quotas, Kueue, tenancy


def test_tenant_quotas_h200_example():
    brief, nodes = h200()
    assert nodes == {"h200-train": 4, "l40s-infer": 2}
    quotas = k8s.tenant_quotas(brief, nodes)
    # research: 24 of the 32 H200 (4 nodes x 8): 3/4 of 4 x 224 CPUs and 4 x 2048 GiB.
    assert quotas["research"] == {
        "h200-train": {"gpus": 24, "resource": "nvidia.com/gpu", "shares": 24, "cpu": 672, "memory_gib": 6144}
    }
    # serving: all 8 L40S, time-sliced 4 ways: 32 shares; no cpus in the brief: 16 per GPU.
    assert quotas["serving"] == {
        "l40s-infer": {"gpus": 8, "resource": "nvidia.com/gpu", "shares": 32, "cpu": 128, "memory_gib": 1024}
    }


def test_tenant_without_pools_is_split_by_capacity():
    brief, nodes = h200()
    brief["tenants"] = [{"name": "everyone", "gpus": 10}]
    quota = k8s.tenant_quotas(brief, nodes)["everyone"]
    # 32 H200 + 8 L40S: 10 GPUs split 8 / 2.
    assert {p: q["gpus"] for p, q in quota.items()} == {"h200-train": 8, "l40s-infer": 2}
    assert sum(q["gpus"] for q in quota.values()) == 10
    assert quota["l40s-infer"]["shares"] == 8


def test_kueue_objects():
    brief, nodes = h200()
    objs = k8s.kueue_objects(brief, nodes)
    flavors = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ResourceFlavor"}
    assert set(flavors) == {"h200-train", "l40s-infer"}
    assert flavors["h200-train"]["spec"]["nodeLabels"] == {"gpufleet.io/pool": "h200-train"}
    assert flavors["h200-train"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    cqs = {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "ClusterQueue"}
    assert set(cqs) == {"research", "serving"}
    assert {cq["cohort"] for cq in cqs.values()} == {"ams-k8s"}
    rg = cqs["research"]["resourceGroups"]
    assert rg == [
        {
            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
            "flavors": [
                {
                    "name": "h200-train",
                    "resources": [
                        {"name": "cpu", "nominalQuota": "672"},
                        {"name": "memory", "nominalQuota": "6144Gi"},
                        {"name": "nvidia.com/gpu", "nominalQuota": 24},
                    ],
                }
            ],
        }
    ]
    assert cqs["serving"]["resourceGroups"][0]["flavors"][0]["resources"][2] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": 32,
    }
    assert cqs["serving"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "serving"}}
    lqs = [(o["metadata"]["namespace"], o["spec"]["clusterQueue"]) for o in objs if o["kind"] == "LocalQueue"]
    assert lqs == [("research", "research"), ("serving", "serving")]


def test_kueue_priorities_preemption_and_topology():
    """A WorkloadPriorityClass per tenant (its priority, else the brief's default), preemption by
    priority inside the queue and the cohort, and the flavors on the leaf / rack / node Topology."""
    brief, nodes = h200()
    brief["tenants"][0]["priority"] = 1000
    objs = k8s.kueue_objects(brief, nodes)
    assert objs[0] == {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Topology",
        "metadata": {"name": "gpufleet"},
        "spec": {
            "levels": [
                {"nodeLabel": "gpufleet.io/leaf"},
                {"nodeLabel": "gpufleet.io/rack"},
                {"nodeLabel": "kubernetes.io/hostname"},
            ]
        },
    }
    flavors = [o for o in objs if o["kind"] == "ResourceFlavor"]
    assert [f["spec"]["topologyName"] for f in flavors] == ["gpufleet", "gpufleet"]
    wpcs = {o["metadata"]["name"]: o["value"] for o in objs if o["kind"] == "WorkloadPriorityClass"}
    assert wpcs == {"gpufleet-research": 1000, "gpufleet-serving": brief_schema.TENANT_PRIORITY_DEFAULT}
    for cq in (o for o in objs if o["kind"] == "ClusterQueue"):
        assert cq["spec"]["preemption"] == {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "LowerPriority"},
        }
    # Kueue creates a Topology's objects before the flavors that name it: it comes first.
    kinds = [o["kind"] for o in objs]
    assert kinds.index("Topology") < kinds.index("ResourceFlavor")
    plain = k8s.kueue_objects(brief, nodes, topology=False)
    assert "Topology" not in [o["kind"] for o in plain]
    assert all("topologyName" not in o["spec"] for o in plain if o["kind"] == "ResourceFlavor")


def test_tenant_priority_classes():
    brief, nodes = stack()
    brief["tenants"][1]["priority"] = 0
    objs = k8s.tenancy_objects(brief, nodes)
    pcs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "PriorityClass"}
    assert {n: pc["value"] for n, pc in pcs.items()} == {"gpufleet-research": 1000, "gpufleet-serving": 0}
    assert all(pc["globalDefault"] is False and pc["preemptionPolicy"] == "PreemptLowerPriority" for pc in pcs.values())


@pytest.mark.parametrize(
    ("rack", "leaf", "expected"),
    [
        ("b01", None, {"gpufleet.io/leaf": "leaf-b01", "gpufleet.io/rack": "b01"}),
        ("b01", "sw-a.1", {"gpufleet.io/leaf": "sw-a.1", "gpufleet.io/rack": "b01"}),
        (None, "sw-a", {"gpufleet.io/leaf": "sw-a", "gpufleet.io/rack": "unplaced"}),
        ("", "", {"gpufleet.io/leaf": "leaf-unplaced", "gpufleet.io/rack": "unplaced"}),
        (7, None, {"gpufleet.io/leaf": "leaf-7", "gpufleet.io/rack": "7"}),
    ],
)
def test_topology_labels_from_the_inventory(rack, leaf, expected):
    labels = k8s.topology_labels(rack, leaf)
    assert labels == expected
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": labels}}
    validate(node, "1.33.4")


def test_topology_labels_refuse_what_is_no_label_value():
    with pytest.raises(ValueError, match=r"found rack 'row 3', leaf_switch 'leaf-row 3'"):
        k8s.topology_labels("row 3")
    with pytest.raises(ValueError, match="leaf_switch '-sw'"):
        k8s.topology_labels("b01", "-sw")
    with pytest.raises(AnsibleFilterError, match="topology_labels: expected label values"):
        k8s_filter.FilterModule().filters()["k8s_topology_labels"]("b01", "x" * 64)


def test_kueue_mixed_mig_resources_share_one_resource_group():
    brief, nodes = h200()
    brief["pools"][0].update({"sharing": "mig", "sharing_config": {"mig_profile": "3g.71gb", "mig_strategy": "mixed"}})
    brief["tenants"] = [{"name": "everyone", "gpus": 40}]
    cq = next(o for o in k8s.kueue_objects(brief, nodes) if o["kind"] == "ClusterQueue")
    group = cq["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-3g.71gb"]
    by_flavor = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]} for f in group["flavors"]}
    assert by_flavor["h200-train"]["nvidia.com/mig-3g.71gb"] == 64  # 32 GPUs x 2 instances
    assert by_flavor["h200-train"]["nvidia.com/gpu"] == 0
    assert by_flavor["l40s-infer"]["nvidia.com/gpu"] == 32  # 8 GPUs x 4 replicas
    assert all(list(r) == group["coveredResources"] for r in by_flavor.values())


def test_tenancy_objects():
    brief, nodes = stack()
    objs = k8s.tenancy_objects(brief, nodes)
    by = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objs}
    assert ("Namespace", None, "research") in by and ("Namespace", None, "serving") in by
    assert by[("ResourceQuota", "research", "gpufleet-quota")]["spec"]["hard"] == {
        "requests.cpu": "128",
        "requests.memory": "1024Gi",
        "requests.nvidia.com/gpu": "8",
    }
    assert by[("ResourceQuota", "serving", "gpufleet-quota")]["spec"]["hard"]["requests.nvidia.com/gpu"] == "16"
    rb = by[("RoleBinding", "serving", "gpufleet-edit")]
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}
    assert rb["subjects"][0]["name"] == "serving-oncall"
    assert by[("RoleBinding", "research", "gpufleet-edit")]["subjects"][0]["name"] == "research"
    deny = by[("NetworkPolicy", "research", "gpufleet-default-deny")]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    dns = by[("NetworkPolicy", "research", "gpufleet-allow-dns")]["spec"]["egress"][0]
    assert {"protocol": "UDP", "port": 53} in dns["ports"]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    same = by[("NetworkPolicy", "research", "gpufleet-allow-same-namespace")]["spec"]
    assert same["ingress"] == [{"from": [{"podSelector": {}}]}]
    limits = by[("LimitRange", "research", "gpufleet-defaults")]["spec"]["limits"][0]
    assert limits["defaultRequest"] == {"cpu": "100m", "memory": "256Mi"}


def test_mpijob_spans_the_pool():
    brief, nodes = h200()
    job = k8s.mpijob(
        brief,
        "h200-train",
        nodes["h200-train"],
        "img:1",
        ["all_reduce_perf", "-g", "1"],
        env={"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5"},
        mpirun_args=["--bind-to", "none"],
        extra_resources={"rdma/rdma_shared_device_a": 1},
    )
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["args"] == [
        "-np",
        "32",
        "--bind-to",
        "none",
        "-x",
        "NCCL_DEBUG",
        "-x",
        "NCCL_IB_HCA",
        "all_reduce_perf",
        "-g",
        "1",
    ]
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 4
    assert job["spec"]["slotsPerWorker"] == 8
    pod = worker["template"]["spec"]
    assert pod["nodeSelector"] == {"gpufleet.io/pool": "h200-train"}
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 8, "rdma/rdma_shared_device_a": 1}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    one_rank_per_node = k8s.mpijob(brief, "h200-train", 4, "img:1", ["x"], gpus_per_task=8)
    assert one_rank_per_node["spec"]["slotsPerWorker"] == 1
    with pytest.raises(ValueError, match="must divide"):
        k8s.mpijob(brief, "h200-train", 4, "img:1", ["x"], gpus_per_task=3)
    pair = k8s.mpijob(brief, "h200-train", 2, "img:1", ["x"], hostnames=["h200-001", "h200-003"])
    terms = pair["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["h200-001", "h200-003"]}
    ]
    assert "affinity" not in job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    with pytest.raises(ValueError, match="expected 2 host names"):
        k8s.mpijob(brief, "h200-train", 2, "img:1", ["x"], hostnames=["h200-001"])
    # A deadline the cluster enforces, whoever is watching the job.
    timed = k8s.mpijob(brief, "h200-train", 4, "img:1", ["x"], active_deadline_s=420)
    assert timed["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 0, "activeDeadlineSeconds": 420}
    assert "activeDeadlineSeconds" not in job["spec"]["runPolicy"]
    with pytest.raises(ValueError, match="at least 1 s, found 0"):
        k8s.mpijob(brief, "h200-train", 4, "img:1", ["x"], active_deadline_s=0)


# --------------------------------------------------------------------------- filters and preflight


def test_filters_wrap_errors():
    filters = k8s_filter.FilterModule().filters()
    brief, _ = h200()
    assert filters["k8s_minor"]("1.33.4") == "1.33"
    assert filters["k8s_node_spec"](brief, "l40s-infer")["labels"]["gpufleet.io/pool"] == "l40s-infer"
    with pytest.raises(AnsibleFilterError, match="k8s_minor"):
        filters["k8s_minor"]("latest")
    with pytest.raises(AnsibleFilterError, match="no pool named"):
        filters["k8s_node_spec"](brief, "nope")
    assert json.dumps(filters["k8s_kueue"](brief, {"h200-train": 4, "l40s-infer": 2}))


def _k8s_codes(mutate):
    brief, groups, hostvars = site("k8s")
    mutate(brief, groups, hostvars)
    return {
        (v["code"], v["host"], v["field"])
        for v in preflight.check(brief, groups, hostvars)
        if v["code"].startswith("K8S_")
    }


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda b, g, h: set_path(b, "software.kubernetes", DELETE),
            {("K8S_VERSION_MISSING", None, "software.kubernetes")},
        ),
        (
            lambda b, g, h: set_path(b, "software.kubernetes", "1.29.8"),
            {("K8S_VERSION_UNSUPPORTED", None, "software.kubernetes")},
        ),
        (
            lambda b, g, h: set_path(b, "software.kubernetes", "1.36.0"),
            {("K8S_VERSION_UNTESTED", None, "software.kubernetes")},
        ),
        (
            lambda b, g, h: set_path(b, "software.gpu_operator", DELETE),
            {("K8S_GPU_OPERATOR_MISSING", None, "software.gpu_operator")},
        ),
        (
            lambda b, g, h: h["h200-001"].update(kubernetes_node_version="1.34.1"),
            {("K8S_VERSION_SKEW", "h200-001", "kubernetes_node_version")},
        ),
        (
            lambda b, g, h: h["h200-001"].update(kubernetes_node_version="1.29.0"),
            {("K8S_VERSION_SKEW", "h200-001", "kubernetes_node_version")},
        ),
        (
            lambda b, g, h: h["cp02"].update(kubernetes_node_version="1.33.3"),
            {("K8S_VERSION_SKEW", "cp02", "kubernetes_node_version")},
        ),
        (
            lambda b, g, h: set_path(b, "networks.kubernetes.pod_cidr", "10.96.0.0/27"),
            {("K8S_POD_CIDR_CNI", None, "networks.kubernetes.pod_cidr")},
        ),
        (
            lambda b, g, h: (
                b["pools"][0].update(sharing="mig", sharing_config={"mig_profile": "1g.18gb"}),
                b["pools"][1].update(
                    accelerator="h100-pcie-80gb",
                    sharing="mig",
                    sharing_config={"mig_profile": "1g.10gb", "mig_strategy": "mixed"},
                ),
            ),
            {("K8S_MIG_STRATEGY_MIXED", None, "pools")},
        ),
        (
            lambda b, g, h: set_path(b, "tenants.0.name", "kube-system"),
            {("K8S_TENANT_NAMESPACE_RESERVED", None, "tenants[0].name")},
        ),
        (
            lambda b, g, h: set_path(b, "tenants.1.name", "gpu-operator"),
            {("K8S_TENANT_NAMESPACE_RESERVED", None, "tenants[1].name")},
        ),
    ],
)
def test_preflight_kubernetes_checks(mutate, expected):
    assert _k8s_codes(mutate) == expected


def test_preflight_kubernetes_checks_pass_on_the_example_and_an_older_kubelet():
    assert _k8s_codes(lambda b, g, h: None) == set()
    assert _k8s_codes(lambda b, g, h: h["h200-001"].update(kubernetes_node_version="1.31.2")) == set()
    # A Slurm brief is not asked for Kubernetes pins.
    assert _k8s_codes(lambda b, g, h: set_path(b, "cluster.control_plane", "slurm")) == set()


def test_pod_cidr_overlapping_a_host_network_is_reported():
    brief, groups, hostvars = site("k8s")
    brief["networks"]["kubernetes"]["pod_cidr"] = "10.40.0.0/16"
    found = {(v["code"], v["field"]) for v in preflight.check(brief, groups, hostvars)}
    assert ("NET_OVERLAP", "networks.kubernetes.pod_cidr") in found or (
        "NET_OVERLAP",
        "networks.management.cidr",
    ) in found
