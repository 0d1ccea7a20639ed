"""JSON schemas for the objects kubernetes-validate does not carry: custom resources (Kueue,
Kubeflow MPIJob, Calico's operator) and kubeadm's configuration documents.

They are written from the upstream CRDs / API types for the fields gpufleet renders: the
required fields, types and enums are upstream's; every object level gpufleet writes is closed
(``additionalProperties: false``) so a misspelt or misplaced field fails. They are not the
full upstream schemas: fields gpufleet never writes are simply not listed.
Sources: Kueue v1beta1 (config/components/crd/bases/kueue.x-k8s.io_*.yaml and apis/kueue/v1beta1,
v0.14.8: Topology's levels 1-16, node label pattern, hostname only last; WorkloadPriorityClass's
value int32; ClusterQueue's preemption enums), MPI
Operator v2beta1 (deploy/v2beta1/mpi-operator.yaml), Tigera operator v1 (Installation, APIServer),
kubeadm.k8s.io/v1beta4 and kubelet.config.k8s.io/v1beta1 (Kubernetes 1.31+).
"""

from __future__ import annotations

import jsonschema

_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
_QTY = {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$"}]}
_STRMAP = {"type": "object", "additionalProperties": {"type": "string"}}


def _closed(props: dict, required: tuple = ()) -> dict:
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


_META = {
    "type": "object",
    "properties": {"name": _STR, "namespace": _STR, "labels": _STRMAP, "annotations": _STRMAP},
    "required": ["name"],
}
_TOLERATION = _closed(
    {
        "key": _STR,
        "operator": {"enum": ["Exists", "Equal"]},
        "value": _STR,
        "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
        "tolerationSeconds": _INT,
    }
)
_TAINT = _closed(
    {"key": _STR, "value": _STR, "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}},
    ("key", "effect"),
)


def _object(
    api: str,
    kind: str,
    spec: dict | None,
    spec_required: bool = True,
    extra: dict | None = None,
    required: tuple = (),
) -> dict:
    props = {"apiVersion": {"const": api}, "kind": {"const": kind}, "metadata": _META}
    if spec is not None:
        props["spec"] = spec
    props.update(extra or {})
    return _closed(
        props,
        ("apiVersion", "kind", "metadata") + (("spec",) if spec is not None and spec_required else ()) + required,
    )


_FLAVOR_QUOTAS = _closed(
    {
        "name": _STR,
        "resources": {
            "type": "array",
            "minItems": 1,
            "maxItems": 16,
            "items": _closed(
                {"name": _STR, "nominalQuota": _QTY, "borrowingLimit": _QTY, "lendingLimit": _QTY},
                ("name", "nominalQuota"),
            ),
        },
    },
    ("name", "resources"),
)
_INT32 = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
# A qualified label key (optional DNS prefix, then the name), Kueue's TopologyLevel.nodeLabel pattern.
_LABEL_KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 316,
    "pattern": (
        r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
    ),
}
_TOPOLOGY_LEVELS = {
    "type": "array",
    "minItems": 1,
    "maxItems": 16,
    "uniqueItems": True,
    "items": _closed({"nodeLabel": _LABEL_KEY}, ("nodeLabel",)),
}
_LABEL_SELECTOR = {
    "type": "object",
    "properties": {"matchLabels": _STRMAP, "matchExpressions": {"type": "array"}},
    "additionalProperties": False,
}

SCHEMAS = {
    ("kueue.x-k8s.io/v1beta1", "ResourceFlavor"): _object(
        "kueue.x-k8s.io/v1beta1",
        "ResourceFlavor",
        _closed(
            {
                "nodeLabels": _STRMAP,
                "nodeTaints": {"type": "array", "items": _TAINT},
                "tolerations": {"type": "array", "items": _TOLERATION},
                "topologyName": _STR,
            }
        ),
        spec_required=False,
    ),
    ("kueue.x-k8s.io/v1beta1", "ClusterQueue"): _object(
        "kueue.x-k8s.io/v1beta1",
        "ClusterQueue",
        _closed(
            {
                "cohort": _STR,
                "namespaceSelector": _LABEL_SELECTOR,
                "queueingStrategy": {"enum": ["StrictFIFO", "BestEffortFIFO"]},
                "preemption": _closed(
                    {
                        "reclaimWithinCohort": {"enum": ["Never", "LowerPriority", "Any"]},
                        "withinClusterQueue": {"enum": ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]},
                        "borrowWithinCohort": _closed(
                            {"policy": {"enum": ["Never", "LowerPriority"]}, "maxPriorityThreshold": _INT32}
                        ),
                    }
                ),
                "resourceGroups": {
                    "type": "array",
                    "maxItems": 16,
                    "items": _closed(
                        {
                            "coveredResources": {"type": "array", "minItems": 1, "maxItems": 16, "items": _STR},
                            "flavors": {"type": "array", "minItems": 1, "maxItems": 16, "items": _FLAVOR_QUOTAS},
                        },
                        ("coveredResources", "flavors"),
                    ),
                },
            }
        ),
    ),
    ("kueue.x-k8s.io/v1beta1", "Topology"): _object(
        "kueue.x-k8s.io/v1beta1", "Topology", _closed({"levels": _TOPOLOGY_LEVELS}, ("levels",))
    ),
    ("kueue.x-k8s.io/v1beta1", "WorkloadPriorityClass"): _object(
        "kueue.x-k8s.io/v1beta1",
        "WorkloadPriorityClass",
        None,
        extra={"value": _INT32, "description": _STR},
        required=("value",),
    ),
    ("kueue.x-k8s.io/v1beta1", "LocalQueue"): _object(
        "kueue.x-k8s.io/v1beta1", "LocalQueue", _closed({"clusterQueue": _STR}, ("clusterQueue",))
    ),
    ("operator.tigera.io/v1", "Installation"): _object(
        "operator.tigera.io/v1",
        "Installation",
        _closed(
            {
                "calicoNetwork": _closed(
                    {
                        "mtu": _INT,
                        "ipPools": {
                            "type": "array",
                            "items": _closed(
                                {
                                    "name": _STR,
                                    "cidr": _STR,
                                    "blockSize": _INT,
                                    "encapsulation": {
                                        "enum": ["IPIPCrossSubnet", "IPIP", "VXLAN", "VXLANCrossSubnet", "None"]
                                    },
                                    "natOutgoing": {"enum": ["Enabled", "Disabled"]},
                                    "nodeSelector": _STR,
                                },
                                ("cidr",),
                            ),
                        },
                    }
                )
            }
        ),
    ),
    ("operator.tigera.io/v1", "APIServer"): _object("operator.tigera.io/v1", "APIServer", _closed({}), False),
}

_CONTAINER = _closed(
    {
        "name": _STR,
        "image": _STR,
        "command": {"type": "array", "items": _STR},
        "args": {"type": "array", "items": _STR},
        "env": {"type": "array", "items": _closed({"name": _STR, "value": _STR}, ("name",))},
        "resources": _closed({"limits": {"type": "object", "additionalProperties": _QTY}}),
        "securityContext": {"type": "object"},
    },
    ("name", "image"),
)
_REPLICA = _closed(
    {
        "replicas": _INT,
        "template": _closed(
            {
                "spec": _closed(
                    {
                        "nodeSelector": _STRMAP,
                        "affinity": {"type": "object"},
                        "tolerations": {"type": "array", "items": _TOLERATION},
                        "containers": {"type": "array", "minItems": 1, "items": _CONTAINER},
                    },
                    ("containers",),
                )
            }
        ),
    },
    ("template",),
)
SCHEMAS[("kubeflow.org/v2beta1", "MPIJob")] = _object(
    "kubeflow.org/v2beta1",
    "MPIJob",
    _closed(
        {
            "slotsPerWorker": _INT,
            "mpiImplementation": {"enum": ["OpenMPI", "Intel", "MPICH"]},
            "runPolicy": _closed(
                {
                    "cleanPodPolicy": {"enum": ["None", "Running", "All"]},
                    "backoffLimit": _INT,
                    # int64; the operator's validation refuses a negative one (ValidateNonnegativeField)
                    "activeDeadlineSeconds": {"type": "integer", "minimum": 0},
                }
            ),
            "mpiReplicaSpecs": _closed({"Launcher": _REPLICA, "Worker": _REPLICA}, ("Launcher", "Worker")),
        },
        ("mpiReplicaSpecs",),
    ),
)

_ARGS = {"type": "array", "items": _closed({"name": _STR, "value": _STR}, ("name", "value"))}
_NODE_REG = _closed(
    {
        "name": _STR,
        "criSocket": {"type": "string", "pattern": "^unix://"},
        "taints": {"type": "array", "items": _TAINT},
        "kubeletExtraArgs": _ARGS,
    }
)
_ENDPOINT = _closed({"advertiseAddress": _STR, "bindPort": _INT})
KUBEADM = {
    ("kubeadm.k8s.io/v1beta4", "InitConfiguration"): _closed(
        {
            "apiVersion": {"const": "kubeadm.k8s.io/v1beta4"},
            "kind": {"const": "InitConfiguration"},
            "localAPIEndpoint": _ENDPOINT,
            "nodeRegistration": _NODE_REG,
            "certificateKey": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        },
        ("apiVersion", "kind"),
    ),
    ("kubeadm.k8s.io/v1beta4", "ClusterConfiguration"): _closed(
        {
            "apiVersion": {"const": "kubeadm.k8s.io/v1beta4"},
            "kind": {"const": "ClusterConfiguration"},
            "clusterName": _STR,
            "kubernetesVersion": {"type": "string", "pattern": r"^v\d+\.\d+\.\d+$"},
            "controlPlaneEndpoint": {"type": "string", "pattern": r"^[^:]+:\d+$"},
            "imageRepository": _STR,
            "networking": _closed({"podSubnet": _STR, "serviceSubnet": _STR, "dnsDomain": _STR}),
            "etcd": _closed({"local": _closed({"dataDir": _STR})}),
            "apiServer": _closed({"certSANs": {"type": "array", "items": _STR}}),
        },
        ("apiVersion", "kind"),
    ),
    ("kubeadm.k8s.io/v1beta4", "JoinConfiguration"): _closed(
        {
            "apiVersion": {"const": "kubeadm.k8s.io/v1beta4"},
            "kind": {"const": "JoinConfiguration"},
            "discovery": _closed(
                {
                    "bootstrapToken": _closed(
                        {
                            "apiServerEndpoint": _STR,
                            "token": _STR,
                            "caCertHashes": {"type": "array", "minItems": 1, "items": _STR},
                        },
                        ("token",),
                    )
                }
            ),
            "nodeRegistration": _NODE_REG,
            "controlPlane": _closed(
                {"localAPIEndpoint": _ENDPOINT, "certificateKey": {"type": "string", "pattern": "^[0-9a-f]{64}$"}}
            ),
        },
        ("apiVersion", "kind", "discovery"),
    ),
    ("kubelet.config.k8s.io/v1beta1", "KubeletConfiguration"): _closed(
        {
            "apiVersion": {"const": "kubelet.config.k8s.io/v1beta1"},
            "kind": {"const": "KubeletConfiguration"},
            "cgroupDriver": {"enum": ["systemd", "cgroupfs"]},
        },
        ("apiVersion", "kind"),
    ),
}


def _hostname_lowest(obj: dict) -> None:
    """Kueue's CEL rule on Topology.spec.levels: kubernetes.io/hostname only at the lowest level."""
    labels = [level.get("nodeLabel") for level in (obj.get("spec") or {}).get("levels") or []]
    if "kubernetes.io/hostname" in labels[:-1]:
        raise jsonschema.ValidationError(
            "the kubernetes.io/hostname label can only be used at the lowest level of topology"
        )


# Upstream's CEL validations (x-kubernetes-validations) JSON Schema cannot say, as functions.
RULES = {("kueue.x-k8s.io/v1beta1", "Topology"): _hostname_lowest}
