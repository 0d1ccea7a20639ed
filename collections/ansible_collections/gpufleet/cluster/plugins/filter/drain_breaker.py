# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: drain_breaker
short_description: Whether one run may drain these nodes (the drain circuit breaker)
version_added: 0.1.0
author: gpufleet developers
description:
  - One run may leave at most I(share) of a pool's nodes out of service (rounded up, so one node of a two-node pool
    at 25 %), never the last node of a pool still in service. Nodes already drained, down or cordoned count against
    the share. When any pool would go past that, the breaker trips and the run must drain none of the nodes, unless
    I(force).
  - Used by the acceptance role before it drains or cordons the nodes it found bad and by the remediate role before
    it drains the drifted nodes. See module_utils/ops/drain_breaker.py and docs/acceptance-role.md.
  - Also provides C(slurm_out_of_service) (sinfo C(%N|%t) lines to node names) and C(k8s_out_of_service)
    (C(kubectl get nodes -o json) items to the names of cordoned or not Ready nodes).
options:
  _input:
    description:
      - The nodes to drain, as names or as C({host, reason}) records (what
        P(gpufleet.cluster.nccl_drain_list#filter) returns).
    type: list
    elements: raw
    required: true
  pools:
    description: Pool name to every node of the pool (the inventory's group, whatever the run's limit).
    type: dict
    required: true
  out_of_service:
    description: Nodes out of service before the run (drained, down, not responding, cordoned).
    type: list
    elements: str
    default: []
  share:
    description: The share of a pool one run may leave out of service, from 0 to 1.
    type: float
    default: 0.25
  force:
    description: Drain even when the breaker trips (a warning is recorded instead of an error).
    type: bool
    default: false
  field:
    description: The variable the violation names (the role's share variable).
    type: str
    default: drain_max_share
  source:
    description: Who drains - C(acceptance) or C(remediation); picks the hint of the likely fault.
    type: str
    choices: [acceptance, remediation]
    default: acceptance
  force_hint:
    description: How the operator forces, as the message says it (e.g. C(--force (acceptance_drain_force=true))).
    type: str
    default: force
"""

EXAMPLES = r"""
- name: Judge the drain
  ansible.builtin.set_fact:
    _breaker: >-
      {{ _to_drain | gpufleet.cluster.drain_breaker({'h100': groups['gpu_h100']},
           out_of_service=__sinfo.stdout_lines | gpufleet.cluster.slurm_out_of_service,
           share=0.25, force=false, field='acceptance_drain_max_share') }}

- name: Drain only when the breaker allows it
  ansible.builtin.command:
    argv: [scontrol, update, "NodeName={{ item.host }}", State=DRAIN, "Reason={{ item.reason }}"]
  loop: "{{ _to_drain if _breaker.allowed else [] }}"
  changed_when: true
"""

RETURN = r"""
_value:
  description: The decision.
  type: dict
  contains:
    tripped: {description: Some pool would go past its limit or lose its last node in service., type: bool}
    allowed: {description: The drains may go ahead (not tripped, or forced)., type: bool}
    forced: {description: Tripped, and force overrode it., type: bool}
    share: {description: The share judged against., type: float}
    to_drain: {description: The node names to drain., type: list, elements: str}
    pools:
      description:
        - Per pool with a node to drain - C(pool), C(size), C(limit), C(out_of_service) (before the run), C(to_drain),
          C(new) (not out yet), C(out_after), C(in_service_after), C(over_share), C(last_node), C(tripped).
      type: list
      elements: dict
    violations:
      description: One C(DRAIN_BREAKER_TRIPPED) error when tripped, one C(DRAIN_BREAKER_FORCED) warning when forced.
      type: list
      elements: dict
    message: {description: The operator's message when tripped or forced, else null., type: str}
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import drain_breaker as breaker


def _host_names(value) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise AnsibleFilterError(f"drain_breaker: input must be a list of nodes to drain, got {type(value).__name__}")
    names = []
    for item in value:
        if isinstance(item, dict):
            if not item.get("host"):
                raise AnsibleFilterError(f"drain_breaker: a record to drain has no host: {item!r}")
            names.append(str(item["host"]))
        else:
            names.append(str(item))
    return names


def drain_breaker(
    to_drain,
    pools,
    out_of_service=None,
    share=breaker.DEFAULT_SHARE,
    force=False,
    field="drain_max_share",
    source="acceptance",
    force_hint="force",
):
    try:
        share = float(share)
    except (TypeError, ValueError):
        raise AnsibleFilterError(f"drain_breaker: share must be a number from 0 to 1, got {share!r}") from None
    try:
        decision = breaker.judge(pools, _host_names(to_drain), out_of_service or [], share=share, force=bool(force))
    except breaker.BreakerError as exc:
        raise AnsibleFilterError(f"drain_breaker: {exc}") from None
    found = breaker.violations(decision, field=field, source=source, force_hint=force_hint)
    decision["violations"] = found
    decision["message"] = found[0]["message"] if found else None
    return decision


def slurm_out_of_service(lines):
    if isinstance(lines, str):
        lines = lines.splitlines()
    if not isinstance(lines, (list, tuple)):
        raise AnsibleFilterError(f"slurm_out_of_service: input must be sinfo's lines, got {type(lines).__name__}")
    return breaker.slurm_out_of_service(lines)


def k8s_out_of_service(items):
    if isinstance(items, dict):
        items = items.get("items") or []
    if not isinstance(items, (list, tuple)):
        raise AnsibleFilterError(f"k8s_out_of_service: input must be kubectl's node items, got {type(items).__name__}")
    return breaker.k8s_out_of_service(items)


class FilterModule:
    def filters(self):
        return {
            "drain_breaker": drain_breaker,
            "slurm_out_of_service": slurm_out_of_service,
            "k8s_out_of_service": k8s_out_of_service,
        }
