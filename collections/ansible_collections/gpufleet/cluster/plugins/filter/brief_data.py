# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: brief_data
short_description: Parse the topology brief's YAML text as data that Ansible never templates
version_added: 0.1.0
author: gpufleet developers
description:
  - Parses the text of C(brief.yml) with the same YAML reader as C(scripts/gpufleet preflight) and
    returns plain data.
  - >-
    Nothing in the result is trusted as a template. A brief string such as
    C({{ lookup('pipe', 'id') }}) reaches every role and file as that literal text and is never
    evaluated, since ansible-core templates only strings trusted as templates, which data read by a
    lookup and parsed here is not. C(ansible.builtin.include_vars) would trust every string of the file.
options:
  _input:
    description: The brief's text, e.g. from C(lookup('ansible.builtin.file', brief_file)).
    type: str
    required: true
  path:
    description: The brief's path, named in error messages.
    type: str
    default: brief.yml
"""

EXAMPLES = r"""
- name: Read the topology brief
  ansible.builtin.set_fact:
    gpufleet_brief: "{{ lookup('ansible.builtin.file', brief_file) | gpufleet.cluster.brief_data(brief_file) }}"
"""

RETURN = r"""
_value:
  description: The brief as a mapping (or whatever the YAML holds; the preflight gate checks its shape).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import InventoryError, load_yaml_text


def brief_data(text, path="brief.yml"):
    if not isinstance(text, str):
        raise AnsibleFilterError(f"gpufleet.cluster.brief_data expects the brief's text, found {type(text).__name__}")
    try:
        # str.__str__ drops ansible-core's tags from the text; the parser builds new, untagged values.
        return load_yaml_text(str.__str__(text), str(path))
    except InventoryError as exc:
        raise AnsibleFilterError(f"cannot read the topology brief: {exc}") from None


class FilterModule:
    def filters(self):
        return {"brief_data": brief_data}
