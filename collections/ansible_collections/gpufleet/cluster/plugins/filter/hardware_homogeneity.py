# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: hardware_homogeneity
short_description: Name the nodes of a pool whose hardware or versions differ from their peers
version_added: 0.1.0
author: gpufleet developers
description:
- Compares the C(gpufleet_hw) facts of the nodes of one pool with each other (GPU model, count and memory, NVLink,
  RDMA ports and rates, CPU, NUMA, memory within 1 %, NVMe count, driver, CUDA, NCCL, rdma-core / OFED, container
  toolkit, fabric manager, kernel).
- For each attribute the value most nodes share is the reference; every other node gets an C(HW_HETEROGENEOUS) error
  naming the attribute, its value and the peers'. Without a strict majority (two nodes that differ) each node gets
  a warning instead.
- The firmware (each GPU's VBIOS, each fabric NIC's firmware per NIC family, the BIOS) is compared the same way,
  each node standing for its majority version, as C(HW_FIRMWARE_MIXED) naming the node's devices, their version
  and the pool's majority; not when C(acceptance.firmware.homogeneous) (or the pool's) is false.
options:
  _input:
    description: Mapping of host name to that host's C(gpufleet_hw) fact.
    type: dict
    required: true
  pool:
    description: >-
      The pool (an entry of C(brief.pools)): its name (in messages), its C(acceptance.firmware), and its
      C(rdma_devices) / C(nics_per_node) (which NICs are the fabric's).
    type: dict
    required: false
  brief:
    description: >-
      The brief: its C(acceptance.firmware.homogeneous) and C(networks.fabric.type). Without it the firmware is
      compared (the default) over every RDMA device but bonds.
    type: dict
    required: false
"""

EXAMPLES = r"""
- name: Compare the nodes of the pool with each other
  ansible.builtin.set_fact:
    _hw_odd: "{{ _facts_by_host | gpufleet.cluster.hardware_homogeneity(gpufleet_pool, brief=gpufleet_brief) }}"
  vars:
    _hosts: "{{ groups[gpufleet_pool.group] | intersect(ansible_play_hosts) }}"
    _facts_by_host: "{{ dict(_hosts | zip(_hosts | map('extract', hostvars, ['ansible_facts', 'gpufleet_hw']))) }}"
  run_once: true
"""

RETURN = r"""
_value:
  description: C(HW_HETEROGENEOUS) and C(HW_FIRMWARE_MIXED) violations C({severity, code, host, field, message});
    empty when the pool is uniform.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.gate import check_pool_homogeneity


def hardware_homogeneity(facts_by_host: object, pool: object = None, brief: object = None) -> list[dict]:
    if not isinstance(facts_by_host, dict):
        raise AnsibleFilterError(
            f"hardware_homogeneity: input must map host -> gpufleet_hw, got {type(facts_by_host).__name__}"
        )
    if pool is not None and not isinstance(pool, dict):
        raise AnsibleFilterError("hardware_homogeneity: pool must be a pool dict")
    if brief is not None and not isinstance(brief, dict):
        raise AnsibleFilterError("hardware_homogeneity: brief must be the brief dict")
    return check_pool_homogeneity(facts_by_host, pool, brief)


class FilterModule:
    def filters(self) -> dict:
        return {"hardware_homogeneity": hardware_homogeneity}
