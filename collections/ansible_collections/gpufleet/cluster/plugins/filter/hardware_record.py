# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: hardware_record
short_description: The per-node JSON record of the hardware gate
version_added: 0.1.0
author: gpufleet developers
description:
  - Builds the record written per node under the reports directory and read by C(scripts/gpufleet) for
    its table.
  - C(status) is C(fail) when an error-severity violation names the host (or no host), else C(pass).
options:
  _input:
    description: The node's C(gpufleet_hw) fact.
    type: dict
    required: true
  host:
    description: The host name.
    type: str
    required: true
  violations:
    description: This node's violations (from hardware_gate, plus its share of hardware_homogeneity's).
    type: list
    elements: dict
    required: false
  pool:
    description: The node's pool (an entry of C(brief.pools)).
    type: dict
    required: false
"""

EXAMPLES = r"""
- name: Write this node's hardware record
  ansible.builtin.copy:
    content: "{{ _record | to_nice_json }}"
    dest: "{{ reports_dir }}/hardware/{{ inventory_hostname }}.json"
    mode: "0644"
  delegate_to: localhost
  vars:
    _record: >-
      {{ ansible_facts.gpufleet_hw
         | gpufleet.cluster.hardware_record(inventory_hostname, _hw_violations, gpufleet_pool) }}
"""

RETURN = r"""
_value:
  description: >-
    C({host, pool, status, summary, codes, violations, facts}); C(summary) holds gpus, nvlink, fabric, rdma,
    rates_gbps, driver, cuda, nccl, kernel and firmware (VBIOS, NIC firmware, BIOS) as short strings for a
    table; C(codes) the error codes.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.gate import node_record


def hardware_record(facts: object, host: str, violations: object = None, pool: object = None) -> dict:
    if violations is not None and not isinstance(violations, list):
        raise AnsibleFilterError("hardware_record: violations must be a list")
    return node_record(
        str(host),
        facts if isinstance(facts, dict) else None,
        violations or [],
        pool if isinstance(pool, dict) else None,
    )


class FilterModule:
    def filters(self) -> dict:
        return {"hardware_record": hardware_record}
