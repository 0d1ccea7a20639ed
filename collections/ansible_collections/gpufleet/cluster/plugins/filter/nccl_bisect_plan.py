# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: nccl_bisect_plan
short_description: The next step of the bisect that names a slow node or link
version_added: 0.1.0
author: gpufleet developers
description:
  - Stateless. Give it every result so far (C({nodes, busbw, failed}); C(busbw) null when the run printed no
    table, C(failed) true when it did not end cleanly - either is a failed group, whatever the busbw) and it says
    which node groups to run next (C(next), disjoint), or that it is C(done) and what it found - C(slow_nodes)
    (to drain), C(slow_links), C(slow_groups), or C(inconclusive). Call it again with the new results until C(done).
  - Screening by disjoint pairs (or halves), then every suspect with a node that passed. Two nodes alone cannot
    tell a node from the link between them; C(known_good) (nodes proven good some other way, e.g. by a NIC
    loopback run) settles it. See docs/nccl-acceptance.md.
options:
  _input:
    description:
      - The results so far, each C({nodes, busbw}) and optionally C(failed) (other keys, such as C(round), are kept
        in C(tests)).
    type: list
    elements: dict
    required: true
  nodes:
    description: Every node of the pool, in order.
    type: list
    elements: str
    required: true
  floor:
    description: The multi-node floor (GB/s).
    type: float
    required: true
  strategy:
    description: C(pairs) (one screening round) or C(halves) (fewer, larger jobs).
    type: str
    choices: [pairs, halves]
    default: pairs
  known_good:
    description: Nodes known to be good (they need not be in I(nodes)).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Plan the next bisect round
  ansible.builtin.set_fact:
    _plan: "{{ _results | gpufleet.cluster.nccl_bisect_plan(_nodes, _spec.multi_node_busbw_gbps) }}"

- name: Name what the bisect found
  ansible.builtin.set_fact:
    _violations: "{{ _plan | gpufleet.cluster.nccl_bisect_violations(_spec.multi_node_busbw_gbps) }}"
  when: _plan.done
"""

RETURN = r"""
_value:
  description: The plan.
  type: dict
  contains:
    done: {description: Whether the bisect is over., type: bool}
    next: {description: Disjoint node groups to run next., type: list, elements: list}
    slow_nodes: {description: Nodes slow with two different good nodes (to drain)., type: list, elements: str}
    slow_links: {description: Pairs slow together, each fine with others., type: list, elements: list}
    slow_groups: {description: Groups of good nodes slow together (switch, uplinks)., type: list, elements: list}
    good_nodes: {description: Nodes of a group that met the floor, or known good., type: list, elements: str}
    inconclusive: {description: Done without naming anything., type: bool}
    reason: {description: What the bisect concluded, in words., type: str}
    tests_run: {description: Distinct groups tested., type: int}
    tests: {description: The results given, in order., type: list, elements: dict}
    known_good: {description: The known-good nodes given., type: list, elements: str}
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import bisect_step


def nccl_bisect_plan(results, nodes, floor, strategy="pairs", known_good=None):
    if not isinstance(results, (list, tuple)) or not all(isinstance(r, dict) for r in results):
        raise AnsibleFilterError("nccl_bisect_plan: input must be a list of {nodes, busbw} results")
    if not isinstance(nodes, (list, tuple)):
        raise AnsibleFilterError(f"nccl_bisect_plan: nodes must be a list of host names, got {type(nodes).__name__}")
    try:
        floor = float(floor)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"nccl_bisect_plan: floor must be a number (GB/s), got {floor!r}") from exc
    try:
        return bisect_step(results, nodes, floor, strategy=strategy, known_good=known_good or ())
    except ValueError as exc:
        raise AnsibleFilterError(f"nccl_bisect_plan: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"nccl_bisect_plan": nccl_bisect_plan}
