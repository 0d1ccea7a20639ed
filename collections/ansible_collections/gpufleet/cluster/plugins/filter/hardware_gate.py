# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: hardware_gate
short_description: Check a node's hardware facts against its pool in the topology brief
version_added: 0.1.0
author: gpufleet developers
description:
  - Compares C(gpufleet_hw) (from M(gpufleet.cluster.gpu_facts)) with the pool the node belongs to, its
    accelerator and topology in the catalogue, and the brief's software pins.
  - GPU count, model and memory; NVLink between every GPU pair and the fabric manager where the topology
    says so; RDMA port count, state, rate and link layer; NIC-to-GPU affinity on rail-optimised pools;
    CPU, memory, NUMA and NVMe; driver, CUDA, NCCL, container toolkit and OFED / rdma-core versions;
    the firmware (GPU VBIOS, fabric NIC firmware, BIOS) against C(acceptance.firmware.min) and, when
    C(acceptance.firmware.homogeneous), the same on every device of a kind inside the node.
  - Returns the list of violations C({severity, code, host, field, message}); empty means the node passes.
    See docs/hardware-gate.md for every code.
options:
  _input:
    description: The node's C(gpufleet_hw) fact.
    type: dict
    required: true
  brief:
    description: The topology brief (as loaded from C(brief.yml)).
    type: dict
    required: true
  pool:
    description: The node's pool, as an entry of C(brief.pools) or its C(name).
    type: raw
    required: true
  host:
    description: The host name the violations are reported under.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Check this node's hardware against the brief
  ansible.builtin.set_fact:
    _hw_violations: >-
      {{ ansible_facts.gpufleet_hw | gpufleet.cluster.hardware_gate(_brief, _pool, inventory_hostname) }}
  vars:
    _brief: "{{ gpufleet_brief }}"
    _pool: "{{ gpufleet_pool }}"

- name: Fail this node (only this one) when it violates the brief
  ansible.builtin.assert:
    that: _hw_violations | selectattr('severity', 'equalto', 'error') | list | length == 0
    fail_msg: "{{ _hw_violations | map(attribute='message') | list }}"
"""

RETURN = r"""
_value:
  description: Violations, each C({severity, code, host, field, message}); C(severity) is C(error) or C(warning).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.gate import check_node


def _pool(brief: object, pool: object) -> dict:
    if isinstance(pool, dict):
        return pool
    if isinstance(pool, str) and isinstance(brief, dict):
        for entry in brief.get("pools") or []:
            if isinstance(entry, dict) and entry.get("name") == pool:
                return entry
        raise AnsibleFilterError(f"hardware_gate: no pool named {pool!r} in the brief")
    raise AnsibleFilterError(f"hardware_gate: pool must be a pool dict or its name, got {type(pool).__name__}")


def hardware_gate(facts: object, brief: object, pool: object, host: str) -> list[dict]:
    if not isinstance(brief, dict):
        raise AnsibleFilterError(f"hardware_gate: brief must be a dict, got {type(brief).__name__}")
    if facts is not None and not isinstance(facts, dict):
        raise AnsibleFilterError(f"hardware_gate: input must be the gpufleet_hw dict, got {type(facts).__name__}")
    return check_node(str(host), facts, brief, _pool(brief, pool))


class FilterModule:
    def filters(self) -> dict:
        return {
            "hardware_gate": hardware_gate,
        }
