# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: dcgm_diag_judge
short_description: One node's GPU diagnostics (dcgmi diag -r N -j) and their violations
version_added: 0.1.0
author: gpufleet developers
description:
  - Reads the JSON of NVIDIA DCGM's C(dcgmi diag -r <level> -j) (DCGM 3 and DCGM 4 layouts) and returns the
    node's diagnostic record (every test, its result per GPU, the warning text) and its violations
    (module_utils/acceptance/dcgm_diag.py; docs/dcgm-diagnostics.md).
  - A failed test is C(DCGM_DIAG_FAILED) naming the GPU index and the test. No dcgmi, a timeout, an exit
    without JSON, a runtime error or output that does not parse is C(DCGM_DIAG_RUN_FAILED), never a pass.
options:
  _input:
    description: The registered result of the dcgmi command (C(rc), C(stdout), C(stderr)); skipped or empty
      when the binary is absent.
    type: dict
    required: true
  host:
    description: The inventory name.
    type: str
    required: true
  level:
    description: The diagnostic level run (1 to 4).
    type: int
    required: true
  path:
    description: The dcgmi binary's path.
    type: str
    required: true
  present:
    description: Whether an executable file is at I(path).
    type: bool
    required: true
  timeout_s:
    description: The seconds the run was given (named when it timed out).
    type: int
"""

EXAMPLES = r"""
- name: Judge the diagnostics
  ansible.builtin.set_fact:
    _dcgm: "{{ __dcgmi | gpufleet.cluster.dcgm_diag_judge(inventory_hostname, level=2, path='/usr/bin/dcgmi',
      present=true) }}"
"""

RETURN = r"""
_value:
  description: C({record, violations}).
  type: dict
  contains:
    record:
      description: C(status) (passed, failed, error), C(level), C(path), and when the run gave JSON C(layout)
        (dcgm3 or dcgm4), C(version), C(gpus), C(tests), C(counts), C(failures), C(warnings).
      type: dict
    violations: {description: DCGM_DIAG_FAILED / DCGM_DIAG_WARNING / DCGM_DIAG_RUN_FAILED., type: list}
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.dcgm_diag import DcgmDiagError, judge


def dcgm_diag_judge(result, host, level, path, present, timeout_s=None):
    if result is not None and not isinstance(result, dict):
        raise AnsibleFilterError(f"dcgm_diag_judge: input must be the registered command result, got {result!r}")
    result = result or {}
    ran = bool(present) and not result.get("skipped") and "rc" in result
    try:
        return judge(
            str(host),
            level=int(level),
            path=str(path),
            present=bool(present) and ran,
            rc=result.get("rc") if ran else None,
            stdout=str(result.get("stdout") or ""),
            stderr=str(result.get("stderr") or ""),
            timeout_s=int(timeout_s) if timeout_s not in (None, "") else None,
        )
    except (DcgmDiagError, ValueError) as exc:
        raise AnsibleFilterError(f"dcgm_diag_judge: {host}: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"dcgm_diag_judge": dcgm_diag_judge}
