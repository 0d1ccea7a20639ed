# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: nccl_run_records
short_description: Parse and judge launcher results into the acceptance report's run records
version_added: 0.1.0
author: gpufleet developers
description:
  - One record per result, in order - C(label), C(scope), C(pool), C(nodes), C(round), C(floor_gbps),
    C(limit_gbps), C(run) (the parsed table), C(busbw), C(debug) (the NCCL_DEBUG evidence), C(rc), C(output),
    C(violations) - as P(gpufleet.cluster.nccl_parse#filter) and P(gpufleet.cluster.nccl_evaluate#filter) give
    them for each output.
  - For the results of P(gpufleet.cluster.nccl_run_batch#module) (a bisect round, the NIC loopback runs) and of
    a single command task (the all-node run).
options:
  _input:
    description: The results, each C({rc, stdout, stderr}).
    type: list
    elements: dict
    required: true
  spec:
    description: The pool's acceptance spec (P(gpufleet.cluster.nccl_acceptance_spec#filter)).
    type: dict
    required: true
  scope:
    description:
      - How each output is judged - C(multi-node) (the all-node run), C(bisect) (a bisect group) or C(loopback)
        (one node with NCCL's network path forced; the record also names its C(host)).
    type: str
    choices: [multi-node, bisect, loopback]
    required: true
  groups:
    description: The nodes of each run, in the order of the results.
    type: list
    elements: list
    required: true
  labels:
    description: The label of each run, in the order of the results.
    type: list
    elements: str
    required: true
  pool:
    description: The pool's name.
    type: str
  round:
    description: The bisect round (C(0) for the all-node run, C(loopback) for the loopback runs).
    type: raw
"""

EXAMPLES = r"""
- name: Judge the groups of a bisect round
  ansible.builtin.set_fact:
    _records: >-
      {{ __round.results | gpufleet.cluster.nccl_run_records(_spec, 'bisect', groups=_plan.next,
           labels=_plan.next | map('join', '+') | map('regex_replace', '^', 'bisect ') | list,
           pool=_pool.name, round=_round) }}
"""

RETURN = r"""
_value:
  description: The run records, one per result.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import SpecError, run_records


def nccl_run_records(results, spec, scope, groups=None, labels=None, pool=None, round=None):
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError(f"nccl_run_records: input must be a list of results, got {type(results).__name__}")
    if not isinstance(spec, dict):
        raise AnsibleFilterError(f"nccl_run_records: spec must be nccl_acceptance_spec's result, got {spec!r:.80}")
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, (list, tuple)) for g in groups):
        raise AnsibleFilterError("nccl_run_records: groups must be a list of node lists")
    if not isinstance(labels, (list, tuple)):
        raise AnsibleFilterError("nccl_run_records: labels must be a list of strings")
    try:
        return run_records(
            list(results), spec, scope, groups=list(groups), labels=[str(x) for x in labels], pool=pool, round_no=round
        )
    except SpecError as exc:
        raise AnsibleFilterError(f"nccl_run_records: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"nccl_run_records": nccl_run_records}
