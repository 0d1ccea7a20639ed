#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: missing_packages
short_description: Which of these packages are not installed (at their version), in one fast dpkg query
version_added: 0.1.0
description:
  - Reads the package database once (C(dpkg-query) on Debian/Ubuntu, C(rpm -q) on RHEL) and returns the
    requested packages that are not installed, or not at the requested version. Roles call it before their
    package task and skip that task when nothing is missing - opening the apt cache costs seconds per host
    on every run, a query costs a fraction of one.
  - A name is C(name) or C(name=version) (Debian; C(version*) matches a prefix) / C(name-version) is not
    parsed on RHEL (the whole string must be an installed package's name or name-version-release).
  - Never changes anything; safe in check mode. A virtual or unknown name counts as missing (the package
    task then decides), so the answer errs on the side of installing.
  - Its action plugin answers in the controller, without a call to the host, when the collection's strategy
    hands it the host's package list read earlier in the same run (O(snapshot)), with the same result.
options:
  names:
    description: Package names, optionally with C(=version) (Debian).
    type: list
    elements: str
    required: true
  snapshot:
    description:
      - Also return every installed package (RV(snapshot)), read in the same query. The collection's
        strategies ask for it on a host's first package question of a run and answer the next ones in the
        controller from it until a task reports a change on that host; a playbook has no need to set it.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.attributes
"""

EXAMPLES = r"""
- name: Find the base packages that are missing
  gpufleet.cluster.missing_packages:
    names: "{{ common_packages }}"
  register: __common_missing

- name: Install the base packages
  ansible.builtin.apt:
    name: "{{ __common_missing.missing }}"
  when: __common_missing.missing | length > 0
"""

RETURN = r"""
missing:
  description: The requested names (as given) that are not installed or not at their version.
  type: list
  elements: str
  returned: always
installed:
  description: Installed version of each requested package name found (name -> version).
  type: dict
  returned: always
manager:
  description: C(dpkg), C(rpm), or C(none) (no known package database; every name is reported missing).
  type: str
  returned: always
snapshot:
  description: Every installed package, as C(manager) and C(installed) (name -> version).
  type: dict
  returned: when O(snapshot) is true and the package database was read
"""

import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.packages import (
    ARGUMENT_SPEC,
    missing_of,
    parse_dpkg,
    parse_rpm,
    split_spec,
    wanted,
)

__all__ = ["main", "missing_of", "parse_dpkg", "parse_rpm", "split_spec"]

DPKG = ["dpkg-query", "-W", "-f=${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"]
RPM_FORMAT = "%{NAME}\\t%{VERSION}-%{RELEASE}\\n"


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    specs = wanted(module.params["names"])
    every = module.params["snapshot"]
    names = sorted({split_spec(s)[0] for s in specs})
    if not specs and not every:
        module.exit_json(changed=False, missing=[], installed={}, manager="none")
    env = {"LC_ALL": "C"}
    if shutil.which("dpkg-query"):
        # dpkg-query exits 1 when a name is unknown, and still prints the known ones.
        rc, out, _err = module.run_command([*DPKG, *([] if every else names)], environ_update=env)
        manager, installed = "dpkg", parse_dpkg(out)
    elif shutil.which("rpm"):
        query = ["rpm", "-qa", "--qf", RPM_FORMAT] if every else ["rpm", "-q", "--qf", RPM_FORMAT, *names]
        rc, out, _err = module.run_command(query, environ_update=env)
        manager, installed = "rpm", parse_rpm(out)
    else:
        module.exit_json(changed=False, missing=specs, installed={}, manager="none")
    result = {
        "changed": False,
        "missing": missing_of(specs, installed),
        "installed": {name: installed[name] for name in names if name in installed},
        "manager": manager,
    }
    # A listing of every package exits 0; anything else is no list to answer later questions from.
    if every and rc == 0:
        result["snapshot"] = {"manager": manager, "installed": installed}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
