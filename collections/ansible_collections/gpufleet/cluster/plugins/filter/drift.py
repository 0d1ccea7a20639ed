# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: drift
short_description: Compare the GPU stack each node runs with the brief's pins, its pool and its package holds
version_added: 0.1.0
author: gpufleet developers
description:
  - A family of four filters over one Python core (C(module_utils/ops/drift.py)); see docs/drift.md.
  - C(drift_check) takes one record per host, C({pool, facts, holds}) where C(facts) is the host's
    C(gpufleet_hw) (from M(gpufleet.cluster.gpu_facts)) or C(None) when the host could not be read, and
    C(holds) the names C(apt-mark showhold) / C(dnf versionlock list) print, or C(None) when unknown.
    Each node is compared with the brief's C(software) pins (driver exactly, for the installed driver
    packages, the loaded kernel module, the driver nvidia-smi reports and the fabric manager; driver_flavor;
    cuda, nccl, dcgm, container_toolkit, doca_ofed, rdma_core and kernel when pinned), then every component
    with the value a strict majority of its pool's readable nodes hold (unpinned ones such as the kernel
    or OFED), then every installed package the roles hold (C(hold_patterns)) that is not held.
  - With C(acceptance) (host to the date its acceptance is valid until, or C(None)), each node's mark is
    compared with C(today) and the report lists C(acceptance_expired) and C(acceptance_missing) nodes (a
    finding; no node's drift status changes). C(accepted_until_marks) reads those dates from
    C(scontrol show node -o) (text; the nodes' C(Extra) field, C(accepted_until=YYYY-MM-DD)) or from
    C(kubectl get nodes -o json) (parsed; the label C(gpufleet.io/accepted-until)).
  - C(drift_markdown) renders that report as Markdown; C(remediation_markdown) renders the report
    C(playbooks/remediate.yml) builds (C(kind) remediation).
options:
  _input:
    description:
      - C(drift_check) the records, a dict host to C({pool, facts, holds}).
      - C(drift_markdown) a report from C(drift_check); C(remediation_markdown) a remediation report.
    type: dict
    required: true
  brief:
    description: C(drift_check) only. The topology brief (as loaded from C(brief.yml)).
    type: dict
  hold_patterns:
    description:
      - C(drift_check) only. Package globs (fnmatch) that must be held when installed.
      - Default the packages gpufleet's roles hold (nvidia_driver, cuda, nccl, dcgm, container_runtime);
        pass your own list when a role's C(*_hold) is off.
    type: list
    elements: str
  pools:
    description:
      - C(drift_check) only. Host to pool name, for the hosts whose record is C(None) (not read) or has no
        C(pool), so that the report still names their pool.
    type: dict
  acceptance:
    description:
      - C(drift_check) only. Host to the date (C(YYYY-MM-DD)) its acceptance is valid until, C(None) for a node
        with no mark; omitted - no acceptance finding.
    type: dict
  today:
    description: C(drift_check) only. The date marks are compared with (C(YYYY-MM-DD)); default today (UTC).
    type: str
"""

EXAMPLES = r"""
- name: Compare the GPU nodes with the brief (gpu02 could not be read)
  ansible.builtin.set_fact:
    _drift: >-
      {{ {'gpu01': {'pool': 'h100-train', 'facts': hostvars['gpu01'].ansible_facts.gpufleet_hw,
                    'holds': hostvars['gpu01'].__held.stdout_lines},
          'gpu02': {'pool': 'h100-train', 'facts': None, 'holds': None}}
         | gpufleet.cluster.drift_check(gpufleet_brief) }}
  run_once: true

- name: Only these packages must be held (a role's *_hold is off)
  ansible.builtin.set_fact:
    _drift: >-
      {{ _records | gpufleet.cluster.drift_check(gpufleet_brief, hold_patterns=['libnccl2', 'nvidia-driver-cuda']) }}

- name: Fail when a node drifted or could not be read
  ansible.builtin.assert:
    that: (_drift.drifted + _drift.unknown) | length == 0
    fail_msg: "{{ _drift.nodes.values() | map(attribute='drift') | flatten | map(attribute='message') | list }}"

- name: Write the Markdown report beside the JSON
  ansible.builtin.copy:
    content: "{{ _drift | gpufleet.cluster.drift_markdown }}"
    dest: "{{ _report_dir }}/drift.md"
    mode: "0644"
  delegate_to: localhost

- name: Render the remediation report
  ansible.builtin.copy:
    content: "{{ _remediation | gpufleet.cluster.remediation_markdown }}"
    dest: "{{ _report_dir }}/remediation.md"
    mode: "0644"
  delegate_to: localhost
"""

RETURN = r"""
_value:
  description:
    - C(drift_check) a dict C({kind, schema, cluster, pins, hold_patterns, nodes, drifted, unknown, clean,
      reboot, counts}); C(nodes) maps each host to C({pool, status, drift, versions, reboot, message}),
      C(status) clean, drifted or unknown; each C(drift) item is C({component, expected, found, basis,
      message}) with C(basis) pin, pool or hold (hold items also name the C(package)); C(reboot) is true
      when the loaded kernel module (or, when that is unknown, the installed driver packages) is not the
      pinned driver. C(drifted), C(unknown), C(clean) and C(reboot) list hosts in natural order.
    - C(drift_check) with C(acceptance) also C(acceptance_expired) and C(acceptance_missing) (hosts), and each
      node's C(acceptance), C({valid_until, status}) with C(status) valid, expired or none.
    - C(accepted_until_marks) a dict node to date or C(None).
    - C(drift_markdown) and C(remediation_markdown) a Markdown string.
  type: raw
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.history import k8s_marks, slurm_marks
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops.drift import (
    drift_check,
    drift_markdown,
    remediation_markdown,
)


def _drift_check(
    records: object,
    brief: object,
    hold_patterns: object = None,
    pools: object = None,
    acceptance: object = None,
    today: object = None,
) -> dict:
    try:
        return drift_check(records, brief, hold_patterns, pools, acceptance=acceptance, today=today)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"gpufleet.cluster.drift_check: {exc}") from exc


def _drift_markdown(report: object) -> str:
    try:
        return drift_markdown(report)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"gpufleet.cluster.drift_markdown: {exc}") from exc


def _remediation_markdown(report: object) -> str:
    try:
        return remediation_markdown(report)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"gpufleet.cluster.remediation_markdown: {exc}") from exc


def _accepted_until_marks(value: object) -> dict:
    if isinstance(value, str):
        return slurm_marks(value)
    if isinstance(value, dict):
        return k8s_marks(value)
    raise AnsibleFilterError(
        "gpufleet.cluster.accepted_until_marks: expected scontrol show node -o output (text) or kubectl get nodes "
        f"-o json (a dict), got {type(value).__name__}"
    )


class FilterModule:
    def filters(self) -> dict:
        return {
            "drift_check": _drift_check,
            "drift_markdown": _drift_markdown,
            "remediation_markdown": _remediation_markdown,
            "accepted_until_marks": _accepted_until_marks,
        }
