# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: link_errors_judge
short_description: One node's link error counters, before against after the NCCL runs, and their violations
version_added: 0.1.0
author: gpufleet developers
description:
  - Compares the two reads of the C(gpufleet.cluster.link_counters) module on one node (before the first NCCL
    run, after the last) port by port and counter by counter against the brief's
    C(acceptance.link_errors.max_growth) (module_utils/acceptance/link_errors.py; docs/nccl-acceptance.md,
    "Link error counters").
  - Returns the node's record and its violations; C(LINK_ERRORS_GREW) names device, port, counter,
    before -> after and the threshold; a read that failed or a fabric port without counters is
    C(LINK_ERRORS_NOT_READ). A counter that went down (reset) is never a negative growth.
  - The filter C(link_errors_drain) adds the nodes whose counters grew to the acceptance's drain list.
options:
  _input:
    description: The registered result of the read before the NCCL runs.
    type: dict
    required: true
  after:
    description: The registered result of the read after the NCCL runs.
    type: dict
    required: true
  host:
    description: The inventory name.
    type: str
    required: true
  pool:
    description: The node's pool of the brief (C(nics_per_node), C(rdma_devices)).
    type: dict
  brief:
    description: The topology brief (C(networks.fabric), C(acceptance.link_errors)).
    type: dict
"""

EXAMPLES = r"""
- name: Judge the counters
  ansible.builtin.set_fact:
    _link: "{{ __before | gpufleet.cluster.link_errors_judge(__after, inventory_hostname, pool=gpufleet_pool,
      brief=gpufleet_brief) }}"
"""

RETURN = r"""
_value:
  description: C({record, violations}).
  type: dict
  contains:
    record:
      description: C(host), C(status) (measured, not read, not applicable), C(reason), C(ports) (each with its
        counters' C(before), C(after), C(growth), C(threshold), C(status)), C(grew), C(thresholds).
      type: dict
    violations:
      description: LINK_ERRORS_GREW / LINK_ERRORS_NOT_READ / LINK_ERRORS_RESET / LINK_ERRORS_SATURATED /
        LINK_ERRORS_COUNTER_MISSING.
      type: list
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.link_errors import (
    LinkErrorsError,
    drain_entries,
    judge,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import drain_reason


def link_errors_judge(before, after, host, pool=None, brief=None):
    try:
        return judge(str(host), before, after, pool=pool or {}, brief=brief or {})
    except LinkErrorsError as exc:
        raise AnsibleFilterError(f"link_errors_judge: {host}: {exc}") from exc


def link_errors_drain(to_drain, records, stamp=None, enabled=True):
    """The acceptance's drain list (``[{host, reason}]``) with the nodes whose link counters grew: a
    node already listed gets the link errors added to its reason, another is added."""
    if not isinstance(to_drain, (list, tuple)):
        raise AnsibleFilterError(f"link_errors_drain: input must be the drain list, got {type(to_drain).__name__}")
    out = [dict(d) for d in to_drain]
    if not enabled:
        return out
    for entry in drain_entries(records or [], stamp=stamp):
        same = next((d for d in out if d.get("host") == entry["host"]), None)
        if same is None:
            out.append({"host": entry["host"], "reason": drain_reason(entry["host"], entry["why"], stamp=stamp)})
        else:
            head, sep, tail = same["reason"].partition(f" (report {stamp})") if stamp else (same["reason"], "", "")
            same["reason"] = f"{head}; {entry['why']}{sep}{tail}"
    return out


class FilterModule:
    def filters(self):
        return {"link_errors_judge": link_errors_judge, "link_errors_drain": link_errors_drain}
