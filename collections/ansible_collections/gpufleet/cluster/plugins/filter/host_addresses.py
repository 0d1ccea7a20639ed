# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: host_addresses
short_description: The addresses of a list of hosts, from a map of host name to address
version_added: 0.1.0
author: gpufleet developers
description:
  - Returns, for each host of the input list in its order, its address in the map (C(gpufleet_addresses),
    which the brief role builds once for a play), or C(missing) when the map has none (no entry, or an
    empty or null address).
  - One call for the whole list. The same lookup written as C(hosts | map('extract', addresses)) calls a
    filter once per host, and on a site of a thousand hosts, where every host lists every other, those
    calls cost the controller more than a tenth of a second per host and task.
options:
  _input:
    description: Host names.
    type: list
    elements: str
    required: true
  addresses:
    description: Host name to address (an address may be empty or null).
    type: dict
    required: true
  missing:
    description: What a host without an address gets; C(name) gives the host's own name.
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: The firewall's members
  ansible.builtin.set_fact:
    members: "{{ groups['gpu_h100'] | gpufleet.cluster.host_addresses(gpufleet_addresses) }}"

- name: The IMEX domain's nodes, a node without an address by its name
  ansible.builtin.set_fact:
    imex_nodes: "{{ groups['gpu_gb200'] | gpufleet.cluster.host_addresses(gpufleet_addresses, missing='name') }}"
"""

RETURN = r"""
_value:
  description: One address per input host, in the input's order.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


def host_addresses(hosts, addresses, missing=""):
    if isinstance(hosts, (str, bytes)) or not hasattr(hosts, "__iter__"):
        raise AnsibleFilterError(
            f"gpufleet.cluster.host_addresses expects a list of host names, got {type(hosts).__name__}"
        )
    if not hasattr(addresses, "get"):
        raise AnsibleFilterError(
            f"gpufleet.cluster.host_addresses expects a map of host name to address, got {type(addresses).__name__}"
        )
    table = dict(addresses)
    out = []
    for host in hosts:
        address = table.get(host)
        if address in (None, ""):
            address = host if missing == "name" else missing
        out.append(str(address))
    return out


class FilterModule:
    def filters(self):
        return {"host_addresses": host_addresses}
