# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: preflight
short_description: Check an inventory against the topology brief, before any host is touched
version_added: 0.1.0
author: gpufleet developers
description:
  - Validates the brief (schema, accelerator catalogue, CUDA/driver/NCCL compatibility, networks,
    fabric, acceptance floors, tenants) and checks the inventory against it (pool and controller
    groups, host names, required addresses, each address in its network, no address used twice).
  - Returns every violation at once; an empty list means the inventory passes.
  - Reads only the host variables the checks use (C(ansible_host), C(bmc_ip), C(storage_ip),
    C(fabric_ips), C(kubernetes_node_version), C(storage_scratch_devices), C(storage_scratch_wipe),
    C(acceptance_launcher), C(acceptance_container_image), C(rack), C(leaf_switch), the CUDA package pins,
    the downloads' checksum variables and their roles' switches, C(preflight_unchecked_downloads)),
    untemplated (C(hostvars.raw_get)), so a value holding Jinja syntax is reported as a bad value or left
    to the role, never run.
  - The same core runs in C(scripts/gpufleet preflight); docs/preflight-checks.md lists the codes.
options:
  _input:
    description: The brief, as loaded from brief.yml.
    type: dict
    required: true
  groups:
    description: Ansible's C(groups) (group name to host names).
    type: dict
    required: true
  hostvars:
    description: Ansible's C(hostvars), or a dictionary of host name to variables.
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Check the inventory against the brief
  ansible.builtin.set_fact:
    _violations: "{{ _brief | gpufleet.cluster.preflight(groups, hostvars) }}"
  vars:
    _brief: "{{ lookup('ansible.builtin.file', brief_file) | from_yaml }}"
  run_once: true
  delegate_to: localhost

- name: Fail with every error at once
  ansible.builtin.assert:
    that: _violations | selectattr('severity', 'equalto', 'error') | list | length == 0
    fail_msg: "{{ _violations | gpufleet.cluster.violations_text }}"
"""

RETURN = r"""
_value:
  description: The violations, errors first when formatted; empty when the inventory passes.
  type: list
  elements: dict
  contains:
    severity: {description: C(error) or C(warning)., type: str}
    code: {description: Stable code such as C(NET_OVERLAP)., type: str}
    host: {description: Inventory host, or null for brief-wide problems., type: str}
    field: {description: Path of the field in the brief or the host variable., type: str}
    message: {description: What was expected and what was found., type: str}
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import READ_HOST_VARS, check


def _plain(value, depth=0):
    """Tagged/lazy Ansible containers → plain Python, keeping only data types."""
    if depth > 20:
        return None
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {_plain(k, depth + 1): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, depth + 1) for v in value]
    return str(value)


def _host_vars(hostvars, hosts):
    raw_get = getattr(hostvars, "raw_get", None)
    out = {}
    for host in hosts:
        try:
            data = raw_get(host) if raw_get else hostvars.get(host)
        except Exception:
            data = None
        data = getattr(data, "_vars", data)  # HostVarsVars: read the raw values, never template
        if not isinstance(data, Mapping):
            out[host] = {}
            continue
        out[host] = {k: _plain(data[k]) for k in READ_HOST_VARS if k in data}
    return out


def preflight(brief, groups, hostvars):
    if not isinstance(groups, Mapping):
        raise AnsibleFilterError("gpufleet.cluster.preflight expects Ansible's groups (a dict) as its first argument")
    if not isinstance(hostvars, Mapping) and not hasattr(hostvars, "raw_get"):
        raise AnsibleFilterError(
            "gpufleet.cluster.preflight expects Ansible's hostvars (a dict) as its second argument"
        )
    plain_groups = {str(g): [str(h) for h in (hs or [])] for g, hs in groups.items()}
    hosts = dict.fromkeys(h for hs in plain_groups.values() for h in hs)
    return check(_plain(brief), plain_groups, _host_vars(hostvars, hosts))


class FilterModule:
    def filters(self):
        return {"preflight": preflight}
