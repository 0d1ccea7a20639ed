# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: nccl_evaluate
short_description: Judge a parsed nccl-tests log against a pool's acceptance gate
version_added: 0.1.0
author: gpufleet developers
description:
  - Applies the gate rules of docs/nccl-acceptance.md to one log parsed by P(gpufleet.cluster.nccl_parse#filter)
    for one scope, with the floors of P(gpufleet.cluster.nccl_acceptance_spec#filter).
  - C(single-node) - the single-node floor at the largest message size, C(#wrong) = 0, the GPU count.
  - C(multi-node) - the multi-node floor, C(#wrong) = 0, every node holding ranks, and the transport the brief
    declares (IB verbs on an C(infiniband) / C(roce) fabric, GDRDMA when the pool has C(gpudirect_rdma); a Socket
    fall-back fails).
  - C(loopback) - one node with NCCL's network path forced (NIC loopback), the multi-node floor and the transport gate.
  - C(bisect) - a group of the bisect, the multi-node floor and C(#wrong) only.
  - Returns the violations C({severity, code, host, field, message}); empty means the log passes.
options:
  _input:
    description: The parsed log.
    type: dict
    required: true
  spec:
    description: The pool's acceptance spec.
    type: dict
    required: true
  scope:
    description: What the run was.
    type: str
    choices: [single-node, multi-node, loopback, bisect]
    required: true
  host:
    description: The node a single-node or loopback run belongs to.
    type: str
  label:
    description: The run's label, quoted in the messages.
    type: str
  nodes:
    description: The nodes of a multi-node run (each must hold C(gpus_per_node) ranks).
    type: list
    elements: str
  rc:
    description: The launcher's exit status; with I(output), it completes the message of a run without a table.
    type: int
  output:
    description: The launcher's output (its last error line is quoted when no table was printed).
    type: str
"""

EXAMPLES = r"""
- name: Judge this node's single-node run
  ansible.builtin.set_fact:
    _violations: >-
      {{ _parsed | gpufleet.cluster.nccl_evaluate(_spec, 'single-node', host=inventory_hostname,
                                                  label='single-node ' ~ inventory_hostname) }}
"""

RETURN = r"""
_value:
  description: Violations, each C({severity, code, host, field, message}); C(severity) is C(error) or C(warning).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import SpecError, evaluate_log


def nccl_evaluate(parsed, spec, scope, host=None, label=None, nodes=None, rc=None, output=None):
    if not isinstance(parsed, dict):
        raise AnsibleFilterError(f"nccl_evaluate: input must be nccl_parse's result, got {type(parsed).__name__}")
    if not isinstance(spec, dict):
        raise AnsibleFilterError(
            f"nccl_evaluate: spec must be nccl_acceptance_spec's result, got {type(spec).__name__}"
        )
    if nodes is not None and not isinstance(nodes, (list, tuple)):
        raise AnsibleFilterError(f"nccl_evaluate: nodes must be a list of host names, got {type(nodes).__name__}")
    try:
        return evaluate_log(parsed, spec, scope, host=host, label=label, nodes=nodes, rc=rc, output=output)
    except SpecError as exc:
        raise AnsibleFilterError(f"nccl_evaluate: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"nccl_evaluate": nccl_evaluate}
