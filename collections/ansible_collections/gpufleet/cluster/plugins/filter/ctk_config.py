# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: ctk_dry_run_split
short_description: Split what nvidia-ctk runtime configure --dry-run printed into containerd's files
version_added: 0.1.0
author: gpufleet developers
description:
  - Up to NVIDIA container toolkit 1.17 the dry run prints one TOML document, the whole containerd
    config.toml; it is returned as C(top_level), unchanged, with an empty C(drop_in).
  - From 1.18 it prints the drop-in (C(/etc/containerd/config.d/99-nvidia.toml)) and then the
    top-level config.toml that imports it; they are returned as C(drop_in) and C(top_level).
  - Fails when the text is neither.
options:
  _input:
    description: The dry run's stdout.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Install containerd's configuration
  ansible.builtin.copy:
    dest: /etc/containerd/config.toml
    content: "{{ (rendered.stdout | gpufleet.cluster.ctk_dry_run_split).top_level }}\n"
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The documents.
  type: dict
  contains:
    top_level: {description: containerd's config.toml., type: str}
    drop_in: {description: The NVIDIA drop-in (empty before toolkit 1.18)., type: str}
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.container.ctk_config import split_dry_run


def ctk_dry_run_split(stdout):
    try:
        return split_dry_run(stdout)
    except ValueError as exc:
        raise AnsibleFilterError(f"ctk_dry_run_split: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"ctk_dry_run_split": ctk_dry_run_split}
