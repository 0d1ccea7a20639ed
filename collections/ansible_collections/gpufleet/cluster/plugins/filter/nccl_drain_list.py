# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: nccl_drain_list
short_description: The nodes NCCL acceptance drains, each with its reason
version_added: 0.1.0
author: gpufleet developers
description:
  - The slow nodes each finished bisect plan named and, with I(failed_single), the nodes whose single-node run
    failed its gate. A node found twice gets both reasons.
  - Each reason starts with C(gpufleet acceptance:) and ends with the report's timestamp, e.g.
    C(gpufleet acceptance - slow node, 89.5 GB/s with gpu01 < 360 GB/s floor (report 20250101T120000Z))
    (with C(-) written as C(:)).
options:
  _input:
    description: The finished bisect plans, each with its pool's multi-node C(floor) (GB/s).
    type: list
    elements: dict
    required: true
  singles:
    description: The single-node run records (C(host), C(busbw), C(floor_gbps), C(violations)).
    type: list
    elements: dict
    default: []
  stamp:
    description: The report's timestamp.
    type: str
  failed_single:
    description: Drain nodes whose single-node run failed too.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Drain what acceptance found
  ansible.builtin.command:
    argv: [scontrol, update, "NodeName={{ item.host }}", State=DRAIN, "Reason={{ item.reason }}"]
  loop: "{{ _plans | gpufleet.cluster.nccl_drain_list(_singles, stamp=_stamp) }}"
  changed_when: true
"""

RETURN = r"""
_value:
  description: One C({host, reason}) per node to drain.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import drain_list


def nccl_drain_list(plans, singles=None, stamp=None, failed_single=True):
    if not isinstance(plans, (list, tuple)):
        raise AnsibleFilterError(f"nccl_drain_list: input must be a list of bisect plans, got {type(plans).__name__}")
    if singles is not None and not isinstance(singles, (list, tuple)):
        raise AnsibleFilterError(f"nccl_drain_list: singles must be a list of records, got {type(singles).__name__}")
    return drain_list(plans, singles or [], stamp=stamp, failed_single=bool(failed_single))


class FilterModule:
    def filters(self):
        return {"nccl_drain_list": nccl_drain_list}
