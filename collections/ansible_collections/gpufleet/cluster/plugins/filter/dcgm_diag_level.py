# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: dcgm_diag_level
short_description: The DCGM diagnostic level the brief asks of a pool (or none)
version_added: 0.1.0
author: gpufleet developers
description:
  - The pool's C(pools[].acceptance.dcgm_diag.level), else the brief's C(acceptance.dcgm_diag.level); none when
    neither sets one (the gate is off). module_utils/acceptance/dcgm_diag.py.
options:
  _input:
    description: The topology brief.
    type: dict
    required: true
  pool:
    description: The pool's name.
    type: str
"""

EXAMPLES = r"""
- name: The pool's level
  ansible.builtin.set_fact:
    _level: "{{ gpufleet_brief | gpufleet.cluster.dcgm_diag_level(gpufleet_pool.name) }}"
"""

RETURN = r"""
_value:
  description: 1, 2, 3 or 4, or none.
  type: int
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.dcgm_diag import (
    DcgmDiagError,
    level_for,
    summary,
)


def dcgm_diag_level(brief, pool=None):
    if not isinstance(brief, dict):
        raise AnsibleFilterError(f"dcgm_diag_level: input must be the brief, got {type(brief).__name__}")
    try:
        return level_for(brief, pool)
    except DcgmDiagError as exc:
        raise AnsibleFilterError(f"dcgm_diag_level: {exc}") from exc


def dcgm_diag_summary(record):
    """A node's dcgm_diag record in a few words (``-r 2 failed: GPU 3 memory``), none without one."""
    return summary(record)


class FilterModule:
    def filters(self):
        return {"dcgm_diag_level": dcgm_diag_level, "dcgm_diag_summary": dcgm_diag_summary}
