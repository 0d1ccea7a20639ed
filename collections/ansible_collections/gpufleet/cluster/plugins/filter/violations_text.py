# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: violations_text
short_description: Format gpufleet violations for a terminal or a failed assert
version_added: 0.1.0
author: gpufleet developers
description:
  - One line per violation, errors first, then by host and field, followed by a summary line
    (C(N errors, M warnings)).
  - Control characters in host names and messages are escaped, so hostile input cannot drive the terminal.
options:
  _input:
    description: A list of violations as returned by C(gpufleet.cluster.preflight) and the other gates.
    type: list
    elements: dict
    required: true
  summary:
    description: Append the summary line.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Fail with every violation listed
  ansible.builtin.fail:
    msg: "{{ _violations | gpufleet.cluster.violations_text }}"
"""

RETURN = r"""
_value:
  description: The formatted text.
  type: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.report import format_report


def violations_text(violations, summary=True):
    if not isinstance(violations, list):
        raise AnsibleFilterError("gpufleet.cluster.violations_text expects a list of violations")
    for v in violations:
        if not isinstance(v, dict) or not {"severity", "code", "field", "message"} <= set(v):
            raise AnsibleFilterError(f"gpufleet.cluster.violations_text: not a violation: {str(v)[:80]}")
    return format_report(violations, summary=bool(summary))


class FilterModule:
    def filters(self):
        return {"violations_text": violations_text}
