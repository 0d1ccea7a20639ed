# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Workload acceptance on a Kubernetes brief: the training Job, Kueue's admission, its pods, the verdict.

The brief's ``acceptance.workload`` (read by :func:`workload.workload_spec`) runs as a batch/v1 Job
through the tenant's Kueue LocalQueue: an Indexed Job of one pod (``completions: 1``) whose pod
template has ``restartPolicy: Never``, so that a deleted pod counts as one failed pod and the Job
controller makes a new one (new name, same ``batch.kubernetes.io/job-completion-index``) as long as
the failures stay within ``backoffLimit``. A ``podFailurePolicy`` rule ignores pods the cluster
itself disrupted (``DisruptionTarget``: preemption, eviction, a drained node), so those never use up
the backoff limit. The pod runs the production image with the brief's command, its checkpoint
directory mounted at the same path (a hostPath: a shared mount of the brief, or the node's own
disk, in which case the Job is pinned to one node so that the new pod finds the checkpoints).

* :func:`tenant_for_pool` - the tenant (and so the namespace and LocalQueue) that runs the workload.
* :func:`job` - the Job.
* :func:`admission` - Kueue's Workload object of the Job: the queue wait (``QuotaReserved`` /
  ``Admitted`` time minus the Workload's creation; the API's times have one-second resolution).
* :func:`job_pods` - the Job's pods, oldest first: name, node, phase, completion index.
* :func:`labels` - the GPU, network, storage, queue and cost labels the result carries.
* :func:`evaluate` - the two pods' outputs through :func:`workload.evaluate` (same fields and
  violations as on Slurm), plus the queue wait and the pods.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import workload as _wl
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import violation
from ansible_collections.gpufleet.cluster.plugins.module_utils.k8s import objects as k8s

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
DEFAULT_QUEUE = "default"
CONTAINER = "workload"
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class K8sWorkloadError(ValueError):
    """The workload cannot run on this Kubernetes brief as given (the filters turn it into AnsibleFilterError)."""


def tenant_for_pool(brief: Any, pool_name: str, tenant: str = "") -> dict:
    """The tenant whose queue runs the workload: ``tenant`` when given, else the first tenant of the
    brief that may use ``pool_name`` (its ``pools``, or every pool when it lists none).
    -> ``{name, namespace, queue}``."""
    clean = k8s.clean_brief(brief)
    tenants = [t for t in clean["tenants"] if isinstance(t, Mapping) and t.get("name")]
    if tenant:
        found = [t for t in tenants if t["name"] == tenant]
        if not found:
            raise K8sWorkloadError(
                f"acceptance_workload_k8s_tenant: expected one of the brief's tenants "
                f"{[t['name'] for t in tenants]}, found {tenant!r}"
            )
    else:
        found = [t for t in tenants if not t.get("pools") or pool_name in t["pools"]]
        if not found:
            raise K8sWorkloadError(
                f"acceptance.workload.partition: expected a tenant of the brief whose pools include "
                f"{pool_name!r} (the Job is queued through that tenant's Kueue LocalQueue), found "
                f"{[(t['name'], t.get('pools')) for t in tenants] or 'no tenants'}"
            )
    chosen = found[0]
    return {"name": chosen["name"], "namespace": k8s.tenant_namespace(chosen), "queue": DEFAULT_QUEUE}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def job(
    brief: Any,
    spec: Mapping,
    *,
    name: str,
    namespace: str,
    checkpoint_dir: str,
    image: str = "",
    queue: str = DEFAULT_QUEUE,
    node: str = "",
    backoff_limit: int = 1,
    window_s: float | None = None,
    extra_resources: Mapping | None = None,
    active_deadline_s: int | None = None,
) -> dict:
    """The workload as a batch/v1 Job queued through Kueue (``kueue.x-k8s.io/queue-name``).

    ``spec`` is :func:`workload.workload_spec`'s; its ``partition`` is the pool. The image is the
    brief's ``image``, else ``image`` (acceptance_container_image). ``node`` pins the pod to one node
    (a checkpoint directory on the node's own disk). ``window_s``: each pod trains that long and ends
    (``$GPUFLEET_WINDOW_S``), so the replacement pod completes the Job. ``backoffLimit`` allows the
    one pod the acceptance deletes. ``active_deadline_s``: the Job controller fails the Job and stops
    its pod that long after Kueue started it (``activeDeadlineSeconds``; its timer does not run while
    the Job is suspended), whoever is watching it."""
    if not _NAME_RE.fullmatch(name or "") or len(name) > 63:
        raise K8sWorkloadError(f"Job name: expected a DNS label of at most 63 characters, found {name!r}")
    if active_deadline_s is not None and int(active_deadline_s) < 1:
        raise K8sWorkloadError(f"Job active deadline: expected at least 1 s, found {active_deadline_s}")
    image = spec.get("image") or image
    if not image:
        raise K8sWorkloadError(
            "acceptance.workload.image: expected the production image (a Kubernetes Job runs a container "
            "image; or set acceptance_container_image), found none"
        )
    clean = k8s.clean_brief(brief)
    pool_name = spec.get("partition") or ""
    pool = k8s._pool(clean, pool_name)
    gpus = int(spec.get("gpus") or pool.get("gpus_per_node", 1))
    pool_spec = k8s.node_spec(clean, pool_name)
    env = {"GPUFLEET_CHECKPOINT_DIR": checkpoint_dir}
    for key, var in (("dataset", "GPUFLEET_DATASET"), ("weights", "GPUFLEET_WEIGHTS")):
        if spec.get(key):
            env[var] = str(spec[key])
    if window_s is not None:
        env["GPUFLEET_WINDOW_S"] = f"{float(window_s):g}"
    # Each mount at the same path as on the host: the command finds what it finds on Slurm.
    paths = [checkpoint_dir] + [str(spec[k]) for k in ("dataset", "weights") if spec.get(k)]
    mounts, volumes = [], []
    for i, path in enumerate(paths):
        vol = ("checkpoint", "dataset", "weights")[i] if i < 3 else f"data-{i}"
        readonly = i > 0
        # The checkpoint directory is made when missing; the dataset and weights must be there.
        host_path = {"path": path, "type": "DirectoryOrCreate"} if i == 0 else {"path": path}
        volumes.append({"name": vol, "hostPath": host_path})
        mounts.append({"name": vol, "mountPath": path, **({"readOnly": True} if readonly else {})})
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": {f"{k8s.LABEL_PREFIX}pool": pool_name},
        "tolerations": pool_spec["tolerations"],
        "containers": [
            {
                "name": CONTAINER,
                "image": image,
                # The checkpoint directory exists before the workload starts (a fresh one per run).
                "command": ["/bin/sh", "-c", f"mkdir -p {_quote(checkpoint_dir)} && exec {spec['command']}"],
                "env": [{"name": key, "value": value} for key, value in env.items()],
                "resources": {"limits": {k8s.pool_resource(pool): gpus, **dict(extra_resources or {})}},
                "volumeMounts": mounts,
            }
        ],
        "volumes": volumes,
    }
    if node:
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
                    ]
                }
            }
        }
    labels = {
        QUEUE_LABEL: queue,
        f"{k8s.LABEL_PREFIX}pool": pool_name,
        f"{k8s.LABEL_PREFIX}purpose": "acceptance-workload",
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            # Kueue unsuspends it once the ClusterQueue has quota for it (its webhook would suspend it anyway).
            "suspend": True,
            "completionMode": "Indexed",
            "completions": 1,
            "parallelism": 1,
            "backoffLimit": int(backoff_limit),
            **({"activeDeadlineSeconds": int(active_deadline_s)} if active_deadline_s is not None else {}),
            # A pod the cluster disrupted (preempted, evicted, drained) is replaced without using up the limit.
            "podFailurePolicy": {
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
            },
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},
        },
    }


def _time(text: Any) -> float | None:
    """An API time (RFC 3339, ``2026-12-03T09:40:00Z``) -> Unix seconds; None when absent or bad."""
    if not text:
        return None
    try:
        return _dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _items(obj: Any) -> list[dict]:
    if (isinstance(obj, Mapping) and obj.get("kind") == "List") or (isinstance(obj, Mapping) and "items" in obj):
        return [i for i in obj.get("items") or [] if isinstance(i, Mapping)]
    if isinstance(obj, Sequence) and not isinstance(obj, str):
        return [i for i in obj if isinstance(i, Mapping)]
    return [obj] if isinstance(obj, Mapping) and obj else []


def admission(workloads: Any, job_name: str) -> dict:
    """Kueue's Workload of the Job ``job_name`` (owner reference kind Job) from ``kubectl get workloads
    -o json`` -> ``{name, found, created, admitted_at, queue_wait_s, admitted, cluster_queue, flavors,
    reason, message}``. The admission time is the ``Admitted`` condition's, else ``QuotaReserved``'s."""
    mine = [
        w
        for w in _items(workloads)
        if any(
            (ref.get("kind"), ref.get("name")) == ("Job", job_name)
            for ref in (w.get("metadata") or {}).get("ownerReferences") or []
        )
    ]
    out: dict[str, Any] = {
        "found": bool(mine),
        "name": None,
        "created": None,
        "admitted_at": None,
        "queue_wait_s": None,
        "admitted": False,
        "cluster_queue": None,
        "flavors": {},
        "reason": None,
        "message": None,
    }
    if not mine:
        return out
    wl = mine[0]
    conds = {c.get("type"): c for c in (wl.get("status") or {}).get("conditions") or [] if isinstance(c, Mapping)}
    admitted = conds.get("Admitted") if (conds.get("Admitted") or {}).get("status") == "True" else None
    reserved = conds.get("QuotaReserved") if (conds.get("QuotaReserved") or {}).get("status") == "True" else None
    cond = admitted or reserved
    created = _time((wl.get("metadata") or {}).get("creationTimestamp"))
    at = _time((cond or {}).get("lastTransitionTime"))
    adm = (wl.get("status") or {}).get("admission") or {}
    flavors: dict = {}
    for ps in adm.get("podSetAssignments") or []:
        flavors.update(ps.get("flavors") or {})
    pending = conds.get("QuotaReserved") or conds.get("Admitted") or {}
    out.update(
        name=(wl.get("metadata") or {}).get("name"),
        created=created,
        admitted_at=at,
        queue_wait_s=(at - created) if (at is not None and created is not None) else None,
        admitted=admitted is not None,
        cluster_queue=adm.get("clusterQueue"),
        flavors=flavors,
        reason=(cond or pending).get("reason"),
        message=(cond or pending).get("message"),
    )
    return out


def job_pods(pods: Any, job_name: str) -> list[dict]:
    """The Job's pods (label ``batch.kubernetes.io/job-name``), oldest first -> ``[{name, node, phase,
    index, created, deleting, uid}]``."""
    out = []
    for pod in _items(pods):
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(JOB_NAME_LABEL, labels.get("job-name")) != job_name:
            continue
        out.append(
            {
                "name": meta.get("name"),
                "uid": meta.get("uid"),
                "node": (pod.get("spec") or {}).get("nodeName") or "",
                "phase": (pod.get("status") or {}).get("phase") or "",
                "index": labels.get(INDEX_LABEL, (meta.get("annotations") or {}).get(INDEX_LABEL)),
                "created": meta.get("creationTimestamp"),
                "deleting": bool(meta.get("deletionTimestamp")),
            }
        )
    return sorted(out, key=lambda p: (_time(p["created"]) or 0, p["name"] or ""))


def _complete(status: Mapping) -> bool:
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in status.get("conditions") or [] if c)


def labels(brief: Any, spec: Mapping, tenant: Mapping, node: str = "") -> dict:
    """What the workload result is labelled with: GPU (accelerator, GPUs, pool, node), network (the
    fabric and its speed), storage (where the checkpoints live), queue (namespace, LocalQueue) and
    cost (the tenant the GPU-hours are billed to, the brief's currency and unit)."""
    clean = k8s.clean_brief(brief)
    pool = k8s._pool(clean, spec.get("partition") or "")
    fabric = clean["networks"].get("fabric") or {}
    cost = (brief or {}).get("cost") or {} if isinstance(brief, Mapping) else {}
    return {
        "gpu": {
            "accelerator": pool.get("accelerator", ""),
            "gpus": int(spec.get("gpus") or pool.get("gpus_per_node", 1)),
            "pool": pool.get("name", ""),
            "node": node,
        },
        "network": {
            "fabric": fabric.get("type", "none") if pool.get("nics_per_node", 0) else "none",
            "link_speed_gbps": fabric.get("link_speed_gbps"),
        },
        "storage": {
            "checkpoint_dir": spec.get("checkpoint_dir", ""),
            "shared": bool(spec.get("shared")),
        },
        "queue": {
            "namespace": tenant.get("namespace", ""),
            "local_queue": tenant.get("queue", ""),
            "tenant": tenant.get("name", ""),
        },
        "cost": {
            "tenant": tenant.get("name", ""),
            "currency": cost.get("currency", "USD") if cost else None,
            "unit": ((cost.get("unit") or {}).get("name")) if cost else None,
        },
    }


def evaluate(
    first: Mapping,
    second: Mapping,
    spec: Mapping,
    admitted: Mapping,
    pods: Sequence[Mapping],
    job_status: Mapping | None = None,
) -> dict:
    """The two pods against the brief (:func:`workload.evaluate`: throughput, resumed step, restore
    time from the deletion of the first pod to the new pod's first step), plus the queue wait and
    the controller's part: the first pod really gone and a new pod, another name, in its place,
    that completed the Job (``job_status``: the Job's ``status``; None: not read)."""
    out = dict(_wl.evaluate(first, second, spec))
    violations = list(out["violations"])
    field = "acceptance.workload"
    if not admitted.get("admitted") and not first.get("error"):
        violations.append(
            violation(
                "WORKLOAD_NOT_ADMITTED",
                f"{field}.partition",
                f"expected Kueue to admit the Job (Workload {admitted.get('name')}), found "
                f"{admitted.get('reason') or 'no Workload'}: {admitted.get('message') or '-'}",
            )
        )
    names = [p.get("name") for p in pods]
    one, two = first.get("pod"), second.get("pod")
    if not first.get("error") and not second.get("error") and out.get("resumed_step"):
        if not two or two == one or (one in names and not any(p.get("deleting") for p in pods if p["name"] == one)):
            violations.append(
                violation(
                    "WORKLOAD_NOT_RESUMED",
                    f"{field}.checkpoint_dir",
                    f"expected the Job controller to replace the deleted pod {one} by a new pod, found pods {names}",
                )
            )
        elif job_status is not None and not _complete(job_status):
            true_conditions = [c.get("type") for c in job_status.get("conditions") or [] if c.get("status") == "True"]
            violations.append(
                violation(
                    "WORKLOAD_JOB_NOT_COMPLETE",
                    f"{field}.window_minutes",
                    f"expected the Job to complete once it had trained for its window ($GPUFLEET_WINDOW_S "
                    f"{spec.get('window_s')} s in all, across the restart), found conditions "
                    f"{true_conditions or 'none'}"
                    f", {job_status.get('succeeded', 0)} pod(s) succeeded, {job_status.get('failed', 0)} failed",
                    host=second.get("node"),
                )
            )
    out["violations"] = violations
    out["verdict"] = "fail" if any(v["severity"] == "error" for v in violations) else "pass"
    out["queue_wait_s"] = admitted.get("queue_wait_s")
    out["admission"] = dict(admitted)
    out["pods"] = [dict(p) for p in pods]
    out["deleted_pod"] = one
    out["replacement_pod"] = two
    out["job_complete"] = None if job_status is None else _complete(job_status)
    return out


__all__ = [
    "DEFAULT_QUEUE",
    "INDEX_LABEL",
    "JOB_NAME_LABEL",
    "QUEUE_LABEL",
    "K8sWorkloadError",
    "admission",
    "evaluate",
    "job",
    "job_pods",
    "labels",
    "tenant_for_pool",
]
