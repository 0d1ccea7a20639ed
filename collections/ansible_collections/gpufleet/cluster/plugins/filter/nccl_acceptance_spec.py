# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: nccl_acceptance_spec
short_description: The NCCL acceptance gate of one pool of the topology brief
version_added: 0.1.0
author: gpufleet developers
description:
  - The effective floors of a pool (C(pools[].acceptance) over C(acceptance) over the catalogue's defaults, as
    preflight derives them), the physical limits (NVLink per GPU on one node; NICs x link speed / 8 across nodes),
    the message sizes, the wrong-value tolerance, the fabric and GPUDirect RDMA, GPUs and NICs per node.
options:
  _input:
    description: The topology brief.
    type: dict
    required: true
  pool:
    description: The pool, as an entry of C(brief.pools) or its C(name).
    type: raw
    required: true
  min_bytes:
    description: Smallest message of the runs (nccl-tests C(-b)); default the brief's C(acceptance.min_bytes), else 8.
    type: raw
  max_bytes:
    description: >-
      Largest message of the runs (C(-e)); default the brief's C(acceptance.max_bytes), else 8G. A smaller value is
      run, and reported as the warning C(NCCL_SIZE_TOO_SMALL).
    type: raw
"""

EXAMPLES = r"""
- name: The gate of this host's pool
  ansible.builtin.set_fact:
    _spec: "{{ gpufleet_brief | gpufleet.cluster.nccl_acceptance_spec(gpufleet_pool.name) }}"
"""

RETURN = r"""
_value:
  description: The pool's gate.
  type: dict
  contains:
    pool: {description: Pool name., type: str}
    group: {description: The pool's inventory group., type: str}
    gpus_per_node: {description: GPUs per node (nccl-tests -g / tasks per node)., type: int}
    nics_per_node: {description: Fabric NICs per node., type: int}
    single_node_busbw_gbps: {description: Single-node floor (GB/s) or null., type: float}
    multi_node_busbw_gbps: {description: Multi-node floor (GB/s) or null., type: float}
    single_node_limit_gbps: {description: Single-node physical limit (GB/s) or null., type: float}
    multi_node_limit_gbps: {description: Multi-node physical limit (GB/s) or null., type: float}
    min_bytes: {description: nccl-tests -b., type: str}
    max_bytes: {description: nccl-tests -e., type: str}
    required_max_bytes: {description: The brief's message size (a run stopping below it is warned)., type: str}
    max_wrong: {description: Tolerated wrong values (0)., type: int}
    fabric: {description: infiniband, roce, ethernet or none., type: str}
    gpudirect_rdma: {description: Whether network channels must be GDRDMA., type: bool}
    management_cidr: {description: The management network (mpirun's TCP interfaces)., type: str}
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import SpecError, acceptance_spec


def nccl_acceptance_spec(brief, pool, min_bytes=None, max_bytes=None):
    if not isinstance(pool, (dict, str)):
        raise AnsibleFilterError(
            f"nccl_acceptance_spec: pool must be a pool dict or its name, got {type(pool).__name__}"
        )
    try:
        return acceptance_spec(brief, pool, min_bytes=min_bytes, max_bytes=max_bytes)
    except SpecError as exc:
        raise AnsibleFilterError(f"nccl_acceptance_spec: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"nccl_acceptance_spec": nccl_acceptance_spec}
