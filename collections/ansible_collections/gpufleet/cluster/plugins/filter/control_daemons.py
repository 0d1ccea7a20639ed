# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: control_daemons
short_description: Which scheduler daemons are down, from systemctl is-active on each host
version_added: 0.1.0
author: gpufleet developers
description:
  - Two filters over module_utils/ops/daemons.py, used by the acceptance role (Slurm) before the multi-node runs,
    before a bisect and before the drain.
  - C(control_daemon_targets) lists what to ask where - the controller with its units, then each node with the
    nodes' units - as C({host, units, role}) items for a loop of C(systemctl is-active) delegated to each host.
  - C(control_daemons_down) judges that loop's results - every unit whose state is not C(active) (or C(reloading))
    is down, with one C(ACCEPTANCE_CONTROL_DAEMON_DOWN) error naming the daemon (C(munge) is C(munged)), the host
    and its state; a host that was unreachable gives no verdict.
options:
  _input:
    description:
      - C(control_daemon_targets) the controller's inventory name.
      - C(control_daemons_down) the loop's C(results), each with its C(item) from C(control_daemon_targets).
    type: raw
    required: true
  controller_units:
    description: C(control_daemon_targets) - the systemd units that must run on the controller.
    type: list
    elements: str
  nodes:
    description: C(control_daemon_targets) - the GPU nodes to ask.
    type: list
    elements: str
  node_units:
    description: C(control_daemon_targets) - the systemd units that must run on each node.
    type: list
    elements: str
  stage:
    description:
      - C(control_daemons_down) - when the check ran, C(multi-node), C(bisect) or C(drain) (the message says what was
        skipped).
    type: str
    choices: [multi-node, bisect, drain]
  seen:
    description: C(control_daemons_down) - what earlier checks of the run found down (no second violation for it).
    type: list
    elements: dict
    default: []
  label:
    description: C(control_daemons_down) - what the stage concerns, e.g. C(pool h100), for the message.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Ask systemd whether the Slurm daemons run
  ansible.builtin.command:
    argv: "{{ ['systemctl', 'is-active'] + item.units }}"
  loop: >-
    {{ inventory_hostname | gpufleet.cluster.control_daemon_targets(['slurmctld', 'munge'], _nodes,
         ['munge', 'slurmd']) }}
  delegate_to: "{{ item.host }}"
  register: __daemons
  changed_when: false
  failed_when: false
  check_mode: false

- name: Judge them
  ansible.builtin.set_fact:
    _check: "{{ __daemons.results | gpufleet.cluster.control_daemons_down('multi-node') }}"
"""

RETURN = r"""
_value:
  description:
    - C(control_daemon_targets) - C([{host, units, role}]), role C(controller) or C(node).
    - C(control_daemons_down) - C({down, violations}); C(down) every daemon down now, each C({host, unit, daemon,
      state, stage}); C(violations) one error per daemon not already in I(seen).
  type: raw
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import daemons


def control_daemon_targets(controller, controller_units=None, nodes=None, node_units=None):
    if not isinstance(controller, str):
        raise AnsibleFilterError(
            f"control_daemon_targets: input must be the controller's name, got {type(controller).__name__}"
        )
    try:
        return daemons.targets(controller, controller_units or [], nodes or [], node_units or [])
    except daemons.DaemonCheckError as exc:
        raise AnsibleFilterError(f"control_daemon_targets: {exc}") from None


def control_daemons_down(results, stage, seen=None, label=""):
    if isinstance(results, dict) and "results" in results:
        results = results["results"]
    if not isinstance(results, (list, tuple)):
        raise AnsibleFilterError(f"control_daemons_down: input must be a loop's results, got {type(results).__name__}")
    try:
        return daemons.check(results, stage, seen or [], label=label or "")
    except daemons.DaemonCheckError as exc:
        raise AnsibleFilterError(f"control_daemons_down: {exc}") from None


class FilterModule:
    def filters(self):
        return {"control_daemon_targets": control_daemon_targets, "control_daemons_down": control_daemons_down}
