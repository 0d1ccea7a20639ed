#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: link_counters
short_description: Read the error counters of every RDMA port of a node
version_added: 0.1.0
description:
  - Reads C(<sysfs_root>/class/infiniband/<device>/ports/<port>/counters/<counter>) for every device and
    port (the kernel's sysfs ABI, Documentation/ABI/stable/sysfs-class-infiniband), with each port's
    C(link_layer) and C(state), in one call.
  - The acceptance reads them before its first NCCL run and after its last; the
    C(gpufleet.cluster.link_errors_judge) filter compares the two reads
    (module_utils/acceptance/link_errors.py; docs/nccl-acceptance.md, "Link error counters").
  - Read-only. A counter file that is missing or unreadable is listed in the port's C(missing) with why;
    the module fails only on bad options.
  - C(sysfs_root) is an option so a test double's tree can be read; the module never behaves differently for it.
options:
  sysfs_root:
    description: Root of sysfs; C(class/infiniband) is read below it.
    type: path
    default: /sys
  counters:
    description: The counter files read in each port's C(counters/) directory.
    type: list
    elements: str
    default: [symbol_error, link_error_recovery, link_downed, port_rcv_errors, port_rcv_remote_physical_errors,
      local_link_integrity_errors, excessive_buffer_overrun_errors, port_xmit_discards]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.attributes
attributes:
  check_mode:
    details: The module only reads; it reads the same in check mode.
"""

EXAMPLES = r"""
- name: Read the RDMA ports' error counters
  gpufleet.cluster.link_counters:
  register: __counters
"""

RETURN = r"""
root:
  description: The directory read (C(<sysfs_root>/class/infiniband)).
  type: str
  returned: always
present:
  description: Whether that directory exists (no RDMA driver loaded when false).
  type: bool
  returned: always
ports:
  description: >-
    One entry per device and port: C(device), C(port), C(link_layer), C(state), C(counters) (counter name ->
    integer) and C(missing) (counter name -> why it was not read).
  type: list
  elements: dict
  returned: always
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.link_errors import COUNTERS, read_ports

_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "sysfs_root": {"type": "path", "default": "/sys"},
            "counters": {"type": "list", "elements": "str", "default": list(COUNTERS)},
        },
        supports_check_mode=True,
    )
    bad = [c for c in module.params["counters"] if not _NAME.match(c)]
    if bad:
        module.fail_json(msg=f"counters: not counter file names: {', '.join(map(repr, bad))}")
    result = read_ports(module.params["sysfs_root"], tuple(module.params["counters"]))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
