# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: prometheus_scrape_configs
short_description: Prometheus scrape configuration and alert expectations from the brief and the inventory
version_added: 0.1.0
author: gpufleet developers
description:
  - C(prometheus_scrape_configs) returns Prometheus C(scrape_configs), one job per exporter, one static
    target per host the exporter runs on. Each target's C(instance) is the inventory host name and its labels
    are the node's C(cluster), C(node), C(pool), C(accelerator), C(tenant) and C(rack) (a label without a
    value is left out). The tenant is the host variable C(gpufleet_tenant), else the only tenant of the brief
    whose quota covers the pool (C(shared) when several do).
  - Fails, listing every problem at once with the host and the field, on an exporter without a valid job
    name, an unknown host scope or group, a job defined twice, or a port that is not a TCP port.
  - C(prometheus_pool_expectations) returns, per pool of the brief, what the alert rules compare with
    (C(gpus_per_node), C(rdma_ports), C(rdma_rate_gbps), C(rdma_devices)).
options:
  _input:
    description: The brief (C(gpufleet_brief)).
    type: dict
    required: true
  groups:
    description: The inventory's C(groups).
    type: dict
    required: true
  hostvars:
    description: The inventory's C(hostvars).
    type: dict
    required: true
  exporters:
    description:
      - One entry per exporter, C({job, port, hosts, path, port_var, scheme, interval}). C(hosts) is C(all),
        C(gpu) (every pool's nodes), C(controllers) (the brief's controllers group) or an inventory group;
        C(port_var) names a host variable that overrides C(port) on that host.
    type: list
    elements: dict
    required: true
  address_var:
    description: Host variable holding the address Prometheus scrapes.
    type: str
    default: ansible_host
  rack_var:
    description: Host variable holding the rack.
    type: str
    default: rack
  tenant_var:
    description: Host variable naming the node's tenant (overrides the brief).
    type: str
    default: gpufleet_tenant
"""

EXAMPLES = r"""
- name: Scrape configuration of every node exporter and DCGM exporter
  ansible.builtin.set_fact:
    scrape: >-
      {{ gpufleet_brief | gpufleet.cluster.prometheus_scrape_configs(groups, hostvars,
           [{'job': 'node', 'port': 9100, 'hosts': 'all'}, {'job': 'dcgm', 'port': 9400, 'hosts': 'gpu'}]) }}

- name: What the alert rules expect of each pool
  ansible.builtin.debug:
    msg: "{{ gpufleet_brief | gpufleet.cluster.prometheus_pool_expectations }}"
"""

RETURN = r"""
_value:
  description:
    - "C(prometheus_scrape_configs) a list of C({job_name, static_configs, metrics_path?, scheme?, scrape_interval?})
      where each static config is C({targets: [address:port], labels: {instance, cluster, node, pool, ...}})."
    - "C(prometheus_pool_expectations) a list of C({pool, gpus_per_node, rdma_ports, rdma_rate_gbps, rdma_devices})."
  type: list
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import observability as core


def _scrape_configs(
    brief, groups, hostvars, exporters, address_var="ansible_host", rack_var="rack", tenant_var="gpufleet_tenant"
):
    if not isinstance(brief, Mapping):
        raise AnsibleFilterError("gpufleet.cluster.prometheus_scrape_configs expects the brief (a dict) as input")
    try:
        return core.scrape_configs(
            brief, groups, hostvars, exporters, address_var=address_var, rack_var=rack_var, tenant_var=tenant_var
        )
    except core.ScrapeConfigError as exc:
        raise AnsibleFilterError(f"gpufleet.cluster.prometheus_scrape_configs:\n{exc}") from exc


def _pool_expectations(brief):
    if not isinstance(brief, Mapping):
        raise AnsibleFilterError("gpufleet.cluster.prometheus_pool_expectations expects the brief (a dict) as input")
    return core.pool_expectations(brief)


class FilterModule:
    def filters(self):
        return {
            "prometheus_scrape_configs": _scrape_configs,
            "prometheus_pool_expectations": _pool_expectations,
        }
