# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: nccl_collectives
short_description: The collectives beyond all_reduce (all_gather, alltoall) a pool gates, and their run records
version_added: 0.1.0
author: gpufleet developers
description:
  - Two filters over one Python core (C(module_utils/acceptance/collectives.py)); see docs/nccl-acceptance.md.
  - C(nccl_collective_specs) - one spec per collective (C(all_gather), C(alltoall)) that the brief gives a floor
    for, under C(acceptance.collectives) or the pool's C(pools[].acceptance.collectives) (the pool's wins,
    floor by floor).
  - Each is the pool's all_reduce spec with the collective's floors, plus C(collective), C(binary) (its path on the
    nodes), C(run_single) and C(run_multi) (a floor is set for that scope) and the brief fields of its floors.
  - Empty when the brief gives no such floor (the gate is off; the catalogue has no published figure).
  - C(nccl_collective_records) - the records of the collectives' runs (a command loop's C(results) over those
    specs, skipped ones left out), parsed and judged as all_reduce's are (the same failure rules), each with
    C(collective); its violations name the collective in C(collective), C(field) and the message. Arguments
    C(specs), C(scope) (C(single-node) or C(multi-node)), C(host), C(nodes), C(pool).
  - >-
    C(nccl_collectives_summary) - a node's collective run records (C(nccl_collective_records)'s) in a few words,
    each collective passed or failed with its busbw, floor and error codes
    (C(all_gather passed (412.3 GB/s, floor 380); alltoall failed (250.1 GB/s, floor 300): NCCL_BUSBW_BELOW_FLOOR));
    none without any. The remediate role keeps it beside a node's re-acceptance result.
options:
  _input:
    description: The topology brief.
    type: dict
    required: true
  spec:
    description: The pool's all_reduce spec (P(gpufleet.cluster.nccl_acceptance_spec#filter)).
    type: dict
    required: true
  binaries:
    description: The path of each collective's nccl-tests binary, by collective (C(all_gather), C(alltoall)).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Set the collectives this node runs
  ansible.builtin.set_fact:
    _collectives: >-
      {{ gpufleet_brief | gpufleet.cluster.nccl_collective_specs(_spec,
           binaries={'all_gather': '/opt/nccl-tests/bin/all_gather_perf',
                     'alltoall': '/opt/nccl-tests/bin/alltoall_perf'}) }}
"""

RETURN = r"""
_value:
  description: One spec per gated collective.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import collectives, collectives_history
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import SpecError


def nccl_collective_specs(brief, spec, binaries=None):
    if not isinstance(brief, dict):
        raise AnsibleFilterError(f"nccl_collective_specs: input must be the brief, got {type(brief).__name__}")
    if not isinstance(spec, dict):
        raise AnsibleFilterError(f"nccl_collective_specs: spec must be nccl_acceptance_spec's result, got {spec!r:.80}")
    if binaries is not None and not isinstance(binaries, dict):
        raise AnsibleFilterError("nccl_collective_specs: binaries must be a dict of collective: path")
    try:
        return collectives.collective_specs(brief, spec, binaries)
    except SpecError as exc:
        raise AnsibleFilterError(f"nccl_collective_specs: {exc}") from exc


def nccl_collective_records(results, specs, scope, host=None, nodes=None, pool=None):
    if not isinstance(results, (list, tuple)) or not isinstance(specs, (list, tuple)):
        raise AnsibleFilterError("nccl_collective_records: input and specs must be lists")
    try:
        return collectives.records(list(results), list(specs), scope, host=host, nodes=nodes, pool=pool)
    except SpecError as exc:
        raise AnsibleFilterError(f"nccl_collective_records: {exc}") from exc


def nccl_collectives_summary(records):
    if records is not None and not isinstance(records, (list, tuple)):
        raise AnsibleFilterError(
            f"nccl_collectives_summary: input must be nccl_collective_records' list, got {type(records).__name__}"
        )
    return collectives_history.summary(list(records or []))


class FilterModule:
    def filters(self):
        return {
            "nccl_collective_specs": nccl_collective_specs,
            "nccl_collective_records": nccl_collective_records,
            "nccl_collectives_summary": nccl_collectives_summary,
        }
