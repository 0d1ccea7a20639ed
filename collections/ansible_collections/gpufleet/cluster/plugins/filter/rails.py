# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: rail_plan
short_description: Map a node's fabric devices to the brief's rails and plan their addressing and routing
version_added: 0.1.0
author: gpufleet developers
description:
  - Takes the brief's C(networks.fabric) and returns one entry per rail, with the device that carries it
    (matched by interface name or PCI address), the host's address on it, the prefix, the rail's
    network and gateway, and the routing table and rule priority of its source routing.
  - Returns an empty list when the fabric is neither C(infiniband) nor C(roce).
  - Fails, listing every problem at once with the host and the field, when C(fabric_ips) does not
    give one address per rail inside the rail's network, when a rail has no device, or when two
    rails share a device.
  - Also available as C(rail_plan_violations), which returns the problems as gpufleet violations
    (C(severity), C(code), C(host), C(field), C(message)) instead of failing.
options:
  _input:
    description: The brief's C(networks.fabric) (C(type), C(rails)).
    type: dict
    required: true
  host:
    description: The host's inventory name (named in errors).
    type: str
    required: true
  fabric_ips:
    description: The host's addresses, one per rail, in rail order (inventory C(fabric_ips)).
    type: list
    elements: str
    required: true
  devices:
    description:
      - One device per rail, in rail order. Each is a dict with C(netdev) (interface name) or C(pci)
        (PCI address of the port) as the stable key, C(hca) (RDMA device, e.g. C(mlx5_0)) and optional
        C(port) (default 1).
    type: list
    elements: dict
    required: true
  devices_field:
    description: Name of the variable the devices came from (named in errors).
    type: str
    default: rdma_rail_devices
  table_base:
    description: Routing table of rail 0; rail i uses C(table_base + i).
    type: int
    default: 1000
  priority_base:
    description: Priority of rail 0's routing rule; rail i uses C(priority_base + i).
    type: int
    default: 1000
"""

EXAMPLES = r"""
- name: Plan this host's rails
  ansible.builtin.set_fact:
    rails: >-
      {{ gpufleet_brief.networks.fabric | gpufleet.cluster.rail_plan(inventory_hostname, fabric_ips,
         [{'netdev': 'ibp24s0', 'hca': 'mlx5_0'}, {'pci': '0000:2a:00.0', 'hca': 'mlx5_1'}]) }}

- name: Report every rail mapping problem instead of failing
  ansible.builtin.debug:
    msg: >-
      {{ gpufleet_brief.networks.fabric
         | gpufleet.cluster.rail_plan_violations(inventory_hostname, fabric_ips | default([]), rdma_rail_devices) }}
"""

RETURN = r"""
_value:
  description: One entry per rail (rail_plan), or the list of violations (rail_plan_violations).
  type: list
  elements: dict
  contains:
    rail: {description: Rail index., type: int}
    name: {description: Rail name (rail0, rail1...)., type: str}
    netdev: {description: Interface name, or null when matched by PCI address., type: str}
    pci: {description: PCI address (0000:18:00.0 form), or null when matched by name., type: str}
    hca: {description: RDMA device., type: str}
    port: {description: RDMA port., type: int}
    address: {description: The host's address on the rail., type: str}
    prefix: {description: Prefix length of the rail's network., type: int}
    cidr: {description: Address with prefix (10.250.20.11/24)., type: str}
    network: {description: The rail's network., type: str}
    gateway: {description: The rail's gateway from the brief, or null., type: str}
    table: {description: Routing table of the rail's source routing., type: int}
    priority: {description: Priority of the rail's routing rule., type: int}
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.net.rails import (
    RailPlanError,
    rail_plan_violations,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.net.rails import (
    rail_plan as _rail_plan,
)


def _check_fabric(fabric):
    if not isinstance(fabric, dict):
        raise AnsibleFilterError(
            f"gpufleet.cluster.rail_plan expects the brief's networks.fabric (a dict), got {type(fabric).__name__}"
        )


def rail_plan(
    fabric, host, fabric_ips, devices, devices_field="rdma_rail_devices", table_base=1000, priority_base=1000
):
    _check_fabric(fabric)
    try:
        return _rail_plan(str(host), fabric, fabric_ips, devices, devices_field, int(table_base), int(priority_base))
    except RailPlanError as exc:
        raise AnsibleFilterError(f"the rails of {host} cannot be configured:\n{exc}") from None


def violations(fabric, host, fabric_ips, devices, devices_field="rdma_rail_devices"):
    _check_fabric(fabric)
    return rail_plan_violations(str(host), fabric, fabric_ips, devices, devices_field)


class FilterModule:
    def filters(self):
        return {"rail_plan": rail_plan, "rail_plan_violations": violations}
