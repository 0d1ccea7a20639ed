# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: nccl_bisect_violations
short_description: What a finished bisect found, as violations
version_added: 0.1.0
author: gpufleet developers
description:
  - C(NCCL_SLOW_NODE) for each slow node (the ones to drain), C(NCCL_SLOW_LINK) for each slow link or group,
    and the warning C(NCCL_BISECT_INCONCLUSIVE) when nothing was named.
options:
  _input:
    description: A finished plan from P(gpufleet.cluster.nccl_bisect_plan#filter).
    type: dict
    required: true
  floor:
    description: The multi-node floor (GB/s).
    type: float
    required: true
"""

EXAMPLES = r"""
- name: Name what the bisect found
  ansible.builtin.set_fact:
    _violations: "{{ _plan | gpufleet.cluster.nccl_bisect_violations(_spec.multi_node_busbw_gbps) }}"
"""

RETURN = r"""
_value:
  description: Violations, each C({severity, code, host, field, message}).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.nccl import bisect_violations


def nccl_bisect_violations(plan, floor):
    if not isinstance(plan, dict):
        raise AnsibleFilterError(f"nccl_bisect_violations: input must be a bisect plan, got {type(plan).__name__}")
    try:
        return bisect_violations(plan, float(floor))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"nccl_bisect_violations: floor must be a number (GB/s), got {floor!r}") from exc


class FilterModule:
    def filters(self):
        return {"nccl_bisect_violations": nccl_bisect_violations}
