# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: xid_drain_reasons
short_description: The XIDs whose action in NVIDIA's catalogue is one of the given ones, with their drain-reason words
version_added: 0.1.0
author: gpufleet developers
description:
  - Reads gpufleet's XID catalogue (module_utils/ops/xid_catalogue.py, docs/xid-catalogue.md), NVIDIA's XIDs mapped to
    an action (none, drain, reset_gpu, reboot, replace) and a one-line meaning.
  - >-
    Returns XID code -> C(<meaning>; action: <action>), the words the Slurm node health check puts in its drain
    reason (C(gpufleet health: XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0)).
options:
  _input:
    description: The actions whose XIDs drain the node.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The XIDs that drain a node
  ansible.builtin.set_fact:
    slurm_node_health_xids: "{{ ['drain', 'reset_gpu', 'reboot', 'replace'] | gpufleet.cluster.xid_drain_reasons }}"
"""

RETURN = r"""
_value:
  description: XID code -> the words of its drain reason.
  type: dict
  sample: {79: "GPU has fallen off the bus; action: reboot", 48: "double-bit ECC error; action: reset_gpu"}
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import xid_catalogue


def xid_drain_reasons(actions):
    try:
        return xid_catalogue.drain_reasons(actions)
    except xid_catalogue.CatalogueError as exc:
        raise AnsibleFilterError(f"xid_drain_reasons: {exc}") from None


class FilterModule:
    def filters(self):
        return {"xid_drain_reasons": xid_drain_reasons}
