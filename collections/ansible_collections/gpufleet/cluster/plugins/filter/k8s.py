# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: k8s
short_description: Kubernetes objects and values derived from the topology brief
version_added: 0.2.0
author: gpufleet developers
description:
  - A family of filters over one Python core (C(module_utils/k8s/objects.py)); each returns plain data the Kubernetes
    roles dump into manifests (YAML) or Helm values.
  - C(k8s_pool_nodes) counts each pool's inventory hosts (C(groups)).
  - C(k8s_node_spec) gives a pool node's C(labels) (gpufleet.io/pool, accelerator, topology, fabric, workload,
    sharing, the GPU Operator's selectors, the pool's own labels), C(taints) (the pool's and
    nvidia.com/gpu=present:NoSchedule) and matching C(tolerations).
  - C(k8s_taint_text) turns a taint dict into kubectl's C(key=value:Effect).
  - C(k8s_kubeadm_init) and C(k8s_kubeadm_join) give the kubeadm.k8s.io/v1beta4 documents of C(kubeadm init)
    and C(kubeadm join) (the join's token and the certificate key are secrets; render them under no_log).
  - C(k8s_cni) gives Calico's operator.tigera.io/v1 Installation with the brief's pod CIDR.
  - C(k8s_gpu_operator_values) the GPU Operator chart's values; C(k8s_device_plugin_config) its time-slicing
    ConfigMap (none when no pool time-slices).
  - C(k8s_kueue) the Topology, ResourceFlavors, WorkloadPriorityClasses, ClusterQueues and LocalQueues;
    C(k8s_tenancy) each tenant's PriorityClass, Namespace, ResourceQuota, LimitRange, RoleBinding and
    NetworkPolicies; C(k8s_tenant_quotas) the quota arithmetic.
  - C(k8s_topology_labels) a node's gpufleet.io/leaf and gpufleet.io/rack labels from its C(rack) (the input)
    and C(leaf_switch) inventory variables.
  - C(k8s_mpijob) the all-node NCCL acceptance run of one pool as a kubeflow.org/v2beta1 MPIJob.
  - C(k8s_minor) C(1.33.4) to C(1.33).
  - C(k8s_upgrade_plan) the rolling upgrade to a version (the input, the brief's software.kubernetes) from what
    C(kubectl version -o json) and C(kubectl get nodes -o json) report, that is which nodes change and in which
    order, or every reason it cannot start (C(module_utils/k8s/upgrade.py)).
  - C(k8s_etcd_unhealthy) the members C(etcdctl endpoint health --cluster -w json) (the input) does not report
    healthy, one string per member naming its endpoint and error; one when the output is not a member list.
options:
  _input:
    description: The brief (C(gpufleet_brief)), except for C(k8s_taint_text) (a taint), C(k8s_minor) and
      C(k8s_upgrade_plan) (a version) and C(k8s_topology_labels) (the node's rack).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Labels and taints of this host's pool
  ansible.builtin.set_fact:
    node: "{{ gpufleet_brief | gpufleet.cluster.k8s_node_spec(gpufleet_pool.name) }}"

- name: Values of the GPU Operator chart
  ansible.builtin.copy:
    content: "{{ gpufleet_brief | gpufleet.cluster.k8s_gpu_operator_values | to_nice_yaml }}"
    dest: /etc/gpufleet/gpu-operator-values.yaml
    mode: "0644"

- name: Kueue objects
  ansible.builtin.debug:
    msg: "{{ gpufleet_brief | gpufleet.cluster.k8s_kueue(gpufleet_brief | gpufleet.cluster.k8s_pool_nodes(groups)) }}"
"""

RETURN = r"""
_value:
  description:
    - C(k8s_pool_nodes) a dict pool name to host count; C(k8s_node_spec) a dict C({labels, taints, tolerations});
      C(k8s_taint_text) and C(k8s_minor) strings; C(k8s_topology_labels) a dict of labels; C(k8s_kubeadm_init),
      C(k8s_cni), C(k8s_kueue), C(k8s_tenancy)
      lists of Kubernetes objects (dicts); C(k8s_kubeadm_join), C(k8s_gpu_operator_values), C(k8s_mpijob) dicts;
      C(k8s_device_plugin_config) a ConfigMap dict or None; C(k8s_tenant_quotas) a dict tenant to pool to
      C({gpus, resource, shares, cpu, memory_gib}); C(k8s_upgrade_plan) a dict C({target, cluster, apply, nodes,
      order, errors}).
  type: raw
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.k8s import objects as core
from ansible_collections.gpufleet.cluster.plugins.module_utils.k8s import upgrade


def _wrap(fn):
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ValueError, KeyError, TypeError) as exc:
            raise AnsibleFilterError(f"{fn.__name__}: {exc}") from exc

    run.__name__ = fn.__name__
    return run


def _join(node_name, endpoint, token, ca_cert_hash, **kw):
    return core.kubeadm_join_config(node_name, endpoint, token, ca_cert_hash, **kw)


class FilterModule:
    def filters(self):
        return {
            "k8s_pool_nodes": _wrap(core.pool_nodes),
            "k8s_node_spec": _wrap(core.node_spec),
            "k8s_taint_text": _wrap(core.taint_text),
            "k8s_minor": _wrap(core.k8s_minor),
            "k8s_kubeadm_init": _wrap(core.kubeadm_init_config),
            "k8s_kubeadm_join": _wrap(_join),
            "k8s_cni": _wrap(core.calico_installation),
            "k8s_gpu_operator_values": _wrap(core.gpu_operator_values),
            "k8s_device_plugin_config": _wrap(core.device_plugin_config),
            "k8s_kueue": _wrap(core.kueue_objects),
            "k8s_tenancy": _wrap(core.tenancy_objects),
            "k8s_tenant_quotas": _wrap(core.tenant_quotas),
            "k8s_topology_labels": _wrap(core.topology_labels),
            "k8s_etcd_unhealthy": _wrap(core.etcd_unhealthy),
            "k8s_mpijob": _wrap(core.mpijob),
            "k8s_upgrade_plan": _wrap(upgrade.plan),
        }
