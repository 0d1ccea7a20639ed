# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: nccl_node_record
short_description: What the NCCL acceptance report records of one node
version_added: 0.1.0
author: gpufleet developers
description:
  - From the node's C(gpufleet_hw) fact (M(gpufleet.cluster.gpu_facts)) - host name, GPU model, count and UUIDs, and
    the versions the report prints beside the brief's pins (GPUs, driver, CUDA, NCCL, OFED or inbox rdma-core,
    container toolkit, the container image of the runs, kernel).
options:
  _input:
    description: The node's C(gpufleet_hw) fact (an empty dict records the host with unknown versions).
    type: dict
    required: true
  host:
    description: The inventory name.
    type: str
    required: true
  hostname:
    description: The node's own host name (default I(host)).
    type: str
  pool:
    description: The node's pool name.
    type: str
  container_image:
    description: The container image the runs used, if any.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Record this node
  ansible.builtin.set_fact:
    _record: "{{ ansible_facts.gpufleet_hw
                 | gpufleet.cluster.nccl_node_record(inventory_hostname, hostname=ansible_facts.nodename)
                 }}"
"""

RETURN = r"""
_value:
  description: The record.
  type: dict
  contains:
    host: {description: Inventory name., type: str}
    hostname: {description: The node's host name., type: str}
    pool: {description: Pool name., type: str}
    gpu_model: {description: GPU name(s) as nvidia-smi prints them., type: str}
    gpu_count: {description: GPUs found., type: int}
    gpu_uuids: {description: GPU UUIDs., type: list, elements: str}
    versions: {description: gpus, driver, cuda, nccl, ofed, container_toolkit, container_image, kernel., type: dict}
    sources: {description: How each tool answered (from gpufleet_hw)., type: dict}
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import node_record


def nccl_node_record(hw, host, hostname=None, pool=None, container_image=""):
    if hw is not None and not isinstance(hw, dict):
        raise AnsibleFilterError(f"nccl_node_record: input must be the gpufleet_hw dict, got {type(hw).__name__}")
    return node_record(hw or {}, str(host), hostname=hostname, pool=pool, container_image=container_image or "")


class FilterModule:
    def filters(self):
        return {"nccl_node_record": nccl_node_record}
