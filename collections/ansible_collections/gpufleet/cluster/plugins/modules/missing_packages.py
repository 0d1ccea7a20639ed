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
options:
  names:
    description: Package names, optionally with C(=version) (Debian).
    type: list
    elements: str
    required: true
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
"""

import shutil

from ansible.module_utils.basic import AnsibleModule


def split_spec(spec: str) -> tuple[str, str | None]:
    """``nvidia-smi=570.133.20-1`` -> (``nvidia-smi``, ``570.133.20-1``); a bare name has no version."""
    name, sep, version = spec.partition("=")
    return name.strip(), (version.strip() if sep else None)


def parse_dpkg(text: str) -> dict[str, str]:
    """``dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'`` -> installed name -> version.

    Only fully installed packages count (status ``ii``/``hi``: wanted install or hold, installed); a package
    that is half-configured or only has its configuration files left is missing.
    """
    installed: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        name, version, status = parts[0].split(":")[0], parts[1], parts[2].strip()
        if len(status) >= 2 and status[1] == "i" and status[0] in "ih":
            installed[name] = version
    return installed


def missing_of(specs: list[str], installed: dict[str, str]) -> list[str]:
    """The specs not satisfied by ``installed`` (exact version, or a prefix with a trailing ``*``)."""
    out = []
    for spec in specs:
        name, version = split_spec(spec)
        have = installed.get(name)
        if have is None:
            out.append(spec)
        elif version is not None:
            ok = have.startswith(version[:-1]) if version.endswith("*") else have == version
            if not ok:
                out.append(spec)
    return out


def main() -> None:
    module = AnsibleModule(
        argument_spec={"names": {"type": "list", "elements": "str", "required": True}},
        supports_check_mode=True,
    )
    specs = [s for s in module.params["names"] if s and s.strip()]
    if not specs:
        module.exit_json(changed=False, missing=[], installed={}, manager="none")
    names = sorted({split_spec(s)[0] for s in specs})
    if shutil.which("dpkg-query"):
        # dpkg-query exits 1 when a name is unknown, and still prints the known ones.
        _rc, out, _err = module.run_command(
            ["dpkg-query", "-W", "-f=${Package}\\t${Version}\\t${db:Status-Abbrev}\\n", *names],
            environ_update={"LC_ALL": "C"},
        )
        installed = parse_dpkg(out)
        module.exit_json(changed=False, missing=missing_of(specs, installed), installed=installed, manager="dpkg")
    if shutil.which("rpm"):
        _rc, out, _err = module.run_command(
            ["rpm", "-q", "--qf", "%{NAME}\\t%{VERSION}-%{RELEASE}\\n", *names], environ_update={"LC_ALL": "C"}
        )
        installed = {}
        for line in out.splitlines():
            name, sep, version = line.partition("\t")
            if sep:
                installed[name] = version
        module.exit_json(changed=False, missing=missing_of(specs, installed), installed=installed, manager="rpm")
    module.exit_json(changed=False, missing=specs, installed={}, manager="none")


if __name__ == "__main__":
    main()
