# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: dnf_resolve
short_description: The exact version of each package that dnf lists for its upstream release
version_added: 0.1.0
author: gpufleet developers
description:
  - Reads what C(dnf --showduplicates list --available <names>) printed on the host and returns, per package,
    the one version offered whose upstream part is the pin (any release, epoch kept, as in
    C(3:580.82.07-1.el9)) and whose text carries the required part (C(+cuda12.9) for NCCL).
  - Fails when a package has no matching version, or several, naming each package and the versions the
    repositories do offer, followed by O(hint) (the role variable or brief field to fix).
options:
  _input:
    description: The probe's stdout.
    type: str
    required: true
  pins:
    description: Package name -> upstream release (C(2.27.7)).
    type: dict
    required: true
  contains:
    description: Text every resolved version must carry (a string for all packages, or a dict per package).
    type: raw
    default: ""
  hint:
    description: Appended to the error.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: List the NCCL versions the repositories offer
  ansible.builtin.command:
    argv: [dnf, --showduplicates, list, --available, libnccl, libnccl-devel]
  register: __nccl_offered
  changed_when: false
  check_mode: false

- name: Install NCCL at the version resolved for the pin
  ansible.builtin.dnf:
    name: "{{ _resolved | gpufleet.cluster.dnf_nevra }}"
  vars:
    _resolved: "{{ __nccl_offered.stdout | gpufleet.cluster.dnf_resolve({'libnccl': '2.27.7'}, '+cuda12.9') }}"
"""

RETURN = r"""
_value:
  description: Package name -> exact version (C([epoch:]version-release)) as dnf lists it.
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.pkg_resolve import parse_dnf_list, resolve_all


def dnf_resolve(stdout, pins, contains="", hint=""):
    if not isinstance(pins, dict):
        raise AnsibleFilterError(f"dnf_resolve: pins must be a dict of package -> upstream release, got {pins!r}")
    names = [str(n) for n in pins]
    required = dict(contains) if isinstance(contains, dict) else dict.fromkeys(names, str(contains or ""))
    resolved, errors = resolve_all(
        parse_dnf_list(str(stdout or "")), {str(k): str(v) for k, v in pins.items()}, required
    )
    if errors:
        raise AnsibleFilterError(
            "dnf_resolve: the configured repositories offer no single version for the pin: "
            + "; ".join(errors)
            + (f". {hint}" if hint else "")
        )
    return resolved


class FilterModule:
    def filters(self):
        return {"dnf_resolve": dnf_resolve}
