# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: hardware_gate_junit
short_description: The hardware gate's run as JUnit XML
version_added: 0.1.0
author: gpufleet developers
description:
  - Renders the gate's verdict on every node as a JUnit XML document for CI systems (Jenkins, GitLab, GitHub) -
    one test suite per node, one test case per check (GPUs, NVLink, fabric manager, RDMA ports, NIC affinity,
    CPU / memory / NUMA / NVMe, versions, GPU errors, firmware, homogeneity with the pool's peers), a failure per check
    with its error violations' messages, warnings in the case's output.
  - A node of I(unreachable) without violations is one failed case - the gate never judged it.
  - With I(brief) and I(pools), a check the gate does not make for a node's pool (NVLink without an all-NVLink
    topology, the fabric manager without NVSwitch, RDMA ports and NIC affinity without an RDMA fabric) is a
    skipped case, never a pass.
options:
  _input:
    description: "Each judged node's violations, C({host: [violation, ...]})."
    type: dict
    required: true
  cluster:
    description: The cluster's name (the brief's C(cluster.name)).
    type: str
    required: true
  unreachable:
    description: Nodes of the play the gate could not judge (unreachable, or failed before it).
    type: list
    elements: str
    required: false
  timestamp:
    description: The gate run's timestamp.
    type: str
    required: false
  brief:
    description: The brief; with I(pools), the checks the gate does not make on a node are skipped cases, not passes.
    type: dict
    required: false
  pools:
    description: "Each judged node's pool, C({host: pool}) (an entry of C(brief.pools))."
    type: dict
    required: false
"""

EXAMPLES = r"""
- name: Write the gate's JUnit XML
  ansible.builtin.copy:
    content: "{{ _results | gpufleet.cluster.hardware_gate_junit('lab', unreachable=_lost) }}"
    dest: "{{ reports_dir }}/junit.xml"
    mode: "0644"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
_value:
  description: The JUnit XML document.
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.gate import junit, not_applicable


def hardware_gate_junit(results, cluster, unreachable=None, timestamp=None, brief=None, pools=None) -> str:
    if not isinstance(results, dict):
        raise AnsibleFilterError(
            f"hardware_gate_junit: input must map each host to its violations, got {type(results).__name__}"
        )
    for host, found in results.items():
        if found is not None and not isinstance(found, list):
            raise AnsibleFilterError(f"hardware_gate_junit: the violations of {host} must be a list")
    if pools is not None and not isinstance(pools, dict):
        raise AnsibleFilterError("hardware_gate_junit: pools must map each host to its pool")
    skipped = None
    if pools is not None:
        brief = brief if isinstance(brief, dict) else {}
        skipped = {str(h): not_applicable(brief, p if isinstance(p, dict) else {}) for h, p in pools.items()}
    return junit(
        {str(h): list(v or []) for h, v in results.items()},
        str(cluster),
        [str(h) for h in unreachable or []],
        None if timestamp is None else str(timestamp),
        skipped,
    )


class FilterModule:
    def filters(self) -> dict:
        return {"hardware_gate_junit": hardware_gate_junit}
