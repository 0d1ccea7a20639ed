# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: dnf_nevra
short_description: Package name -> exact version, as the specs dnf and dnf versionlock take
version_added: 0.1.0
author: gpufleet developers
description:
  - Turns a dict of package name to C([epoch:]version-release) (the gpufleet.cluster.dnf_resolve filter's
    answer) into C(name-[epoch:]version-release) specs, one of the forms dnf's package specifications
    accept (dnf(8), Specifying Packages).
options:
  _input:
    description: Package name -> exact version.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Lock the resolved versions
  community.general.dnf_versionlock:
    name: "{{ {'libnccl': '2.27.7-1+cuda12.9'} | gpufleet.cluster.dnf_nevra }}"
    state: present
"""

RETURN = r"""
_value:
  description: The specs, C(libnccl-2.27.7-1+cuda12.9), C(nvidia-driver-cuda-3:580.82.07-1.el9).
  type: list
  elements: str
"""


def dnf_nevra(resolved):
    return [f"{name}-{version}" for name, version in dict(resolved).items()]


class FilterModule:
    def filters(self):
        return {"dnf_nevra": dnf_nevra}
