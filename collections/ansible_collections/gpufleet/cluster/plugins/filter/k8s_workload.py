# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: k8s_workload_job
short_description: The workload acceptance on a Kubernetes brief - its Job, Kueue's admission, its pods, the verdict
version_added: 0.1.0
author: gpufleet developers
description:
  - C(k8s_workload_tenant) - the tenant whose Kueue LocalQueue runs the workload (the first one that may use the
    workload's pool, or the one named); C({name, namespace, queue}).
  - C(k8s_workload_job) - the workload as a batch/v1 Indexed Job of one pod with C(restartPolicy Never), a
    C(backoffLimit) and a C(podFailurePolicy), queued with the label C(kueue.x-k8s.io/queue-name), the production
    image running the brief's command, its checkpoint directory mounted at the same path; with C(active_deadline_s),
    the Job's C(activeDeadlineSeconds).
  - C(k8s_workload_admission) - Kueue's Workload object of the Job (C(kubectl get workloads -o json)) - admitted,
    the ClusterQueue, the flavors, and the queue wait (the admission condition's time less the Workload's creation).
  - C(k8s_workload_pods) - the Job's pods, oldest first (name, node, phase, completion index).
  - C(k8s_workload_labels) - the GPU, network, storage, queue and cost labels of the result.
  - C(k8s_workload_evaluate) - the two pods' outputs against the brief (the Slurm path's fields and violations),
    the queue wait, and whether the deleted pod was replaced by a new one.
options:
  _input:
    description: The brief (C(k8s_workload_tenant), C(k8s_workload_job), C(k8s_workload_labels)), the Workload list
      (C(k8s_workload_admission)), the pod list (C(k8s_workload_pods)), the first pod's record
      (C(k8s_workload_evaluate)).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Render the Job
  ansible.builtin.set_fact:
    _job: "{{ gpufleet_brief | gpufleet.cluster.k8s_workload_job(_spec, 'gpufleet-workload-x', 'research', '/c/run') }}"
"""

RETURN = r"""
_value:
  description: The tenant, the Job, the admission, the pods, the labels or the evaluation (a dict with C(violations)).
  type: raw
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import workload_k8s as _kw


def _call(filter_name, fn, /, *args, **kw):
    try:
        return fn(*args, **kw)
    except (_kw.K8sWorkloadError, KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"{filter_name}: {exc}") from None


def k8s_workload_tenant(brief, pool, tenant=""):
    return _call("k8s_workload_tenant", _kw.tenant_for_pool, brief, str(pool or ""), str(tenant or ""))


def k8s_workload_job(
    brief,
    spec,
    name,
    namespace,
    checkpoint_dir,
    image="",
    queue=_kw.DEFAULT_QUEUE,
    node="",
    backoff_limit=1,
    window_s=None,
    extra_resources=None,
    active_deadline_s=None,
):
    if not isinstance(spec, dict):
        raise AnsibleFilterError("k8s_workload_job expects the workload_spec (a dict)")
    return _call(
        "k8s_workload_job",
        _kw.job,
        brief,
        spec,
        name=str(name),
        namespace=str(namespace),
        checkpoint_dir=str(checkpoint_dir),
        image=str(image or ""),
        queue=str(queue or _kw.DEFAULT_QUEUE),
        node=str(node or ""),
        backoff_limit=int(backoff_limit),
        window_s=None if window_s is None else float(window_s),
        extra_resources=extra_resources or {},
        active_deadline_s=None if active_deadline_s is None else int(active_deadline_s),
    )


def k8s_workload_admission(workloads, job_name):
    return _call("k8s_workload_admission", _kw.admission, workloads, str(job_name))


def k8s_workload_pods(pods, job_name):
    return _call("k8s_workload_pods", _kw.job_pods, pods, str(job_name))


def k8s_workload_labels(brief, spec, tenant, node=""):
    return _call("k8s_workload_labels", _kw.labels, brief, spec, tenant, str(node or ""))


def k8s_workload_evaluate(first, second, spec, admission, pods, job_status=None):
    if not all(isinstance(x, dict) for x in (first, second, spec, admission)) or not isinstance(pods, list):
        raise AnsibleFilterError(
            "k8s_workload_evaluate expects the first pod, the second pod, the spec, the admission (dicts) and the pods"
        )
    return _kw.evaluate(first, second, spec, admission, pods, job_status if isinstance(job_status, dict) else None)


class FilterModule:
    def filters(self):
        return {
            "k8s_workload_tenant": k8s_workload_tenant,
            "k8s_workload_job": k8s_workload_job,
            "k8s_workload_admission": k8s_workload_admission,
            "k8s_workload_pods": k8s_workload_pods,
            "k8s_workload_labels": k8s_workload_labels,
            "k8s_workload_evaluate": k8s_workload_evaluate,
        }
