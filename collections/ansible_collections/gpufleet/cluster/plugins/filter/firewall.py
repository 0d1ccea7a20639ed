# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: firewall
short_description: Render a host's nftables firewall from the inventory, and read a loaded one back
version_added: 0.1.0
author: gpufleet developers
description:
  - A family of filters over one Python core (C(module_utils/net/firewall.py)), pure and without I/O.
  - C(firewall_nft) renders the nftables script that replaces table C(inet gpufleet) alone (other tables,
    e.g. Kubernetes' or a container network's, are kept). Input policy drop; management ports from the
    management sources; cluster ports from the cluster's members; everything from the rails' networks on
    the fabric interfaces; nothing forwarded out of or into the fabric; optional egress allow-list.
  - C(interfaces_in_networks) takes the parsed JSON of C(ip -j -4 address show) (or gathered C(ansible_facts)) and a
    list of CIDRs and returns the interfaces with an IPv4 address in one of them (the fabric interfaces of a host).
  - C(address_in_networks) takes an address and a list of CIDRs and says whether the address lies in one
    of them (false for anything that is not an address).
  - C(firewall_violations) lists every problem of a spec at once (host, field, expected and found), in
    gpufleet's violation shape; C(firewall_nft) fails with all of them.
  - C(firewall_expected) is the summary (chain policies, sets, rules) of the table the script loads;
    C(nft_table_summary) is the same summary of C(nft -j list table inet gpufleet) output, so a loaded
    table can be compared with the inventory.
options:
  _input:
    description:
      - For C(firewall_nft), C(firewall_expected) and C(firewall_violations), the spec, a dict with
        C(host), C(management_sources) (addresses / CIDRs), C(management_ports) and C(member_ports)
        (lists of C({name, port, proto}), C(port) a number or a range C(low-high), C(proto) tcp or udp),
        C(members) (the cluster's addresses), C(fabric_interfaces), C(fabric_sources) (the rails' CIDRs),
        C(fabric_trusted) (bool), C(forward_policy) (accept or drop), C(egress_restrict) (bool) and
        C(egress_allow) (list of C({name, dest, port, proto}); no C(port) allows every port).
      - For C(nft_table_summary), the JSON text (or parsed JSON) of C(nft -j list table inet gpufleet).
    type: raw
    required: true
  header:
    description: Comment lines put at the top of the script (C(firewall_nft) only), e.g. C(ansible_managed).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Render this host's firewall
  ansible.builtin.copy:
    content: "{{ spec | gpufleet.cluster.firewall_nft(ansible_managed | comment) }}"
    dest: /etc/nftables.conf
    validate: nft -c -f %s
  vars:
    spec:
      host: "{{ inventory_hostname }}"
      management_sources: [10.250.10.0/24]
      management_ports: [{name: ssh, port: 22}, {name: node_exporter, port: 9100}]
      members: [10.250.10.10, 10.250.10.11]
      member_ports: [{name: slurmd, port: 6818}, {name: srun, port: 60001-63000}]
      fabric_interfaces: [ibp24s0]
      fabric_sources: [10.250.20.0/24]

- name: Compare the loaded table with the inventory
  ansible.builtin.assert:
    that: (loaded.stdout | gpufleet.cluster.nft_table_summary) == (spec | gpufleet.cluster.firewall_expected)
"""

RETURN = r"""
_value:
  description:
    - C(firewall_nft), the nftables script (text).
    - C(firewall_violations), the list of violations (C(severity), C(code), C(host), C(field), C(message)).
    - C(firewall_expected) and C(nft_table_summary), a dict with C(policies) (chain to policy), C(sets)
      (set name to its elements as CIDRs) and C(rules) (one dict per rule, in order, with C(chain),
      C(comment), C(verdict) and the matches C(iifname), C(oifname), C(iifname_not), C(oifname_not),
      C(ct_state), C(saddr), C(daddr), C(l4proto), C(proto), C(dport) that the rule has).
  type: raw
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.net import firewall as _fw


def _host(spec):
    return spec.get("host") if isinstance(spec, dict) else None


def firewall_nft(spec, header=""):
    try:
        return _fw.firewall_nft(spec, str(header or ""))
    except _fw.FirewallSpecError as exc:
        raise AnsibleFilterError(f"the firewall of {_host(spec)} cannot be rendered:\n{exc}") from None


def firewall_expected(spec):
    try:
        return _fw.firewall_expected(spec)
    except _fw.FirewallSpecError as exc:
        raise AnsibleFilterError(f"the firewall of {_host(spec)} cannot be rendered:\n{exc}") from None


def firewall_violations(spec):
    return _fw.firewall_violations(spec)


def nft_table_summary(nft_json, table=_fw.TABLE):
    try:
        return _fw.nft_table_summary(nft_json, str(table))
    except (ValueError, KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"gpufleet.cluster.nft_table_summary cannot read its input: {exc}") from None


class FilterModule:
    def filters(self):
        return {
            "firewall_nft": firewall_nft,
            "firewall_expected": firewall_expected,
            "firewall_violations": firewall_violations,
            "nft_table_summary": nft_table_summary,
            "interfaces_in_networks": _fw.interfaces_in_networks,
            "address_in_networks": _fw.address_in_networks,
        }
