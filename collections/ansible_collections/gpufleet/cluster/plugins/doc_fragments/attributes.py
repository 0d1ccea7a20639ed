# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""What every gpufleet module shares in its documented attributes, and its author.

A module extends ``ansible.builtin.action_common_attributes`` (the attributes' descriptions) and this
fragment (what is true of all of ours), and adds only its own ``check_mode`` details:

    extends_documentation_fragment:
      - ansible.builtin.action_common_attributes
      - gpufleet.cluster.attributes
    attributes:
      check_mode:
        details: In check mode nothing is written.

Ansible merges a fragment's ``attributes`` key by key under the module's own, so a module that
differs (``diff_mode`` supported, say) states that attribute itself and its word wins.
"""

from __future__ import annotations


class ModuleDocFragment:
    # Every module supports check mode (AnsibleModule(supports_check_mode=True)), none reports a
    # diff, and all run on any POSIX target.
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
author:
  - gpufleet developers
"""
