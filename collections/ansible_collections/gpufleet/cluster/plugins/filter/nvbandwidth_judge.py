# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: nvbandwidth_judge
short_description: One node's GPU-to-GPU copy figures (nvbandwidth) and their violations
version_added: 0.1.0
author: gpufleet developers
description:
  - Reads the output of NVIDIA's nvbandwidth (JSON with C(-j), else its text matrix) for one testcase and
    returns the node's p2p record (every pair in GB/s, the weakest pair, the sum) and its violations
    (module_utils/acceptance/p2p.py; docs/nccl-acceptance.md, "GPU-to-GPU copies").
  - Where the binary is absent the record says C(not gathered) with the path, and nothing fails unless the
    brief's C(acceptance.p2p.required) (then C(P2P_NOT_GATHERED)). Malformed or partial output is
    C(P2P_RUN_FAILED) naming what is missing, never a figure of 0.
options:
  _input:
    description: The registered result of the nvbandwidth command (C(rc), C(stdout), C(stderr)); skipped or empty
      when the binary is absent.
    type: dict
    required: true
  host:
    description: The inventory name.
    type: str
    required: true
  path:
    description: The nvbandwidth binary's path.
    type: str
    required: true
  present:
    description: Whether an executable file is at I(path).
    type: bool
    required: true
  testcase:
    description: The testcase run.
    type: str
    default: device_to_device_memcpy_read_ce
  brief:
    description: The topology brief (its C(acceptance.p2p) block).
    type: dict
"""

EXAMPLES = r"""
- name: Judge the copies
  ansible.builtin.set_fact:
    _p2p: "{{ __nvbandwidth | gpufleet.cluster.nvbandwidth_judge(inventory_hostname, path=nvb, present=true) }}"
"""

RETURN = r"""
_value:
  description: C({record, violations}).
  type: dict
  contains:
    record:
      description: C(status) (measured, not gathered, waived, failed), C(path), C(testcase), and when measured
        C(gpus), C(pairs), C(unmeasured), C(min_gbps), C(min_pair), C(max_gbps), C(sum_gbps).
      type: dict
    violations: {description: P2P_NOT_GATHERED / P2P_RUN_FAILED / P2P_NO_PEER_ACCESS / P2P_BELOW_FLOOR., type: list}
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.p2p import TESTCASE, P2PError, judge


def nvbandwidth_judge(result, host, path, present, testcase=TESTCASE, brief=None):
    if result is not None and not isinstance(result, dict):
        raise AnsibleFilterError(f"nvbandwidth_judge: input must be the registered command result, got {result!r}")
    result = result or {}
    ran = bool(present) and not result.get("skipped") and "rc" in result
    try:
        return judge(
            str(host),
            path=str(path),
            present=bool(present),
            rc=result.get("rc") if ran else None,
            stdout=str(result.get("stdout") or ""),
            stderr=str(result.get("stderr") or ""),
            testcase=str(testcase or TESTCASE),
            brief=brief or {},
        )
    except P2PError as exc:
        raise AnsibleFilterError(f"nvbandwidth_judge: {host}: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"nvbandwidth_judge": nvbandwidth_judge}
