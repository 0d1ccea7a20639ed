# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: slurm
short_description: Build Slurm configuration from the topology brief and the inventory
version_added: 0.1.0
author: gpufleet developers
description:
  - A family of filters over one Python core (C(module_utils/slurm/conf.py)). Each is pure and fast enough
    for thousands of nodes.
  - C(hostlist) compresses host names into Slurm's hostlist syntax (C(gpu[001-512])); C(hostlist_expand)
    does the reverse.
  - C(slurm_gres_type) derives a short GRES type from an accelerator catalogue key (C(h100-sxm-80gb) to
    C(h100)), with optional overrides.
  - C(slurm_node_shapes) builds one record per pool node (CPUs, sockets, cores, threads and RealMemory from
    gathered facts, or from the brief's C(cpus), C(sockets), C(memory_gib) when the host has no facts; the
    GRES from the pool's accelerator and GPU count; features from the pool, its labels and the rack).
  - C(slurm_nodes) turns those records into C(NodeName) lines where identical nodes share one range.
  - C(slurm_partitions) gives one C(PartitionName) line per pool plus a default partition.
  - C(slurm_topology) gives C(topology.conf) lines - topology/tree from racks and leaf switches, or, with
    I(pools) (the brief's) where a pool's topology is an NVLink domain (C(nvl72)), topology/block - one
    C(BlockName) per rack and C(BlockSizes) of one domain's nodes (C(module_utils/slurm/blocks.py));
    C(slurm_topology_plugin) says which (C(block) or C(tree)) from the brief's pools.
  - C(slurm_conf) reads a slurm.conf; C(slurm_node_attrs) and C(slurm_node_gres) read one node's attributes
    and GRES from it;
    C(slurm_reconfigure_plan) compares two slurm.conf texts and says what each daemon must do;
    C(slurm_slurmd_action) picks one node's action from a plan.
options:
  _input:
    description: See each filter in EXAMPLES.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Compress host names
  ansible.builtin.debug:
    msg: "{{ ['gpu001', 'gpu002', 'gpu003', 'gpu010'] | gpufleet.cluster.hostlist }}"  # gpu[001-003,010]

- name: Short GRES type of an accelerator
  ansible.builtin.debug:
    msg: "{{ 'h100-sxm-80gb' | gpufleet.cluster.slurm_gres_type }}"  # h100

- name: NodeName lines for every pool of the brief
  ansible.builtin.debug:
    msg: >-
      {{ gpufleet_brief.pools | gpufleet.cluster.slurm_node_shapes(groups, hostvars)
         | gpufleet.cluster.slurm_nodes }}

- name: What a new slurm.conf asks of the daemons
  ansible.builtin.debug:
    msg: "{{ old_text | gpufleet.cluster.slurm_reconfigure_plan(new_text, '22.05.8') }}"
"""

RETURN = r"""
_value:
  description:
    - C(hostlist) a string; C(hostlist_expand) a list of names; C(slurm_gres_type) a string.
    - C(slurm_node_shapes) a list of dicts with C(NodeName) and Slurm node attributes, plus C(pool),
      C(rack) and C(switch) (used by C(slurm_partitions) and C(slurm_topology), not written as attributes).
    - C(slurm_nodes), C(slurm_partitions), C(slurm_topology) lists of configuration lines;
      C(slurm_topology_plugin) C(block) or C(tree).
    - C(slurm_conf) a dict C({params, nodes, partitions}); C(slurm_node_attrs) a dict; C(slurm_node_gres) a list of
      C({name, type, count}).
    - C(slurm_reconfigure_plan) a dict C({slurmctld, slurmd, restart_nodes, added, removed, reasons}) whose
      actions are C(start), C(restart), C(reconfigure) or C(none); C(slurm_slurmd_action) one such action.
  type: raw
"""

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.slurm import blocks
from ansible_collections.gpufleet.cluster.plugins.module_utils.slurm import conf as core

_PRIVATE = ("pool", "rack", "switch")


def _hostlist(names):
    if isinstance(names, str):
        names = [names]
    try:
        return core.hostlist_compress(list(names))
    except TypeError as exc:
        raise AnsibleFilterError(f"gpufleet.cluster.hostlist expects a list of host names: {exc}") from exc


def _hostlist_expand(expr):
    try:
        return core.hostlist_expand(expr)
    except ValueError as exc:
        raise AnsibleFilterError(f"gpufleet.cluster.hostlist_expand: {exc}") from exc


def _gres_type(accelerator, overrides=None):
    return core.gres_type(accelerator, overrides or {})


def _get(mapping, key, default=None):
    try:
        value = mapping.get(key, default) if isinstance(mapping, Mapping) else mapping[key]
    except (KeyError, TypeError):
        return default
    return default if value is None else value


def _node_shapes(
    pools,
    groups,
    hostvars,
    gres_types=None,
    memory_reserve_mb=1024,
    brief_memory_fraction=0.95,
    rack_var="rack",
    switch_var="leaf_switch",
    use_facts=True,
):
    if not isinstance(pools, list):
        raise AnsibleFilterError("gpufleet.cluster.slurm_node_shapes expects the brief's pools (a list)")
    shapes = []
    seen = {}
    for pool in pools:
        if not isinstance(pool, Mapping) or "group" not in pool or "name" not in pool:
            raise AnsibleFilterError(
                f"gpufleet.cluster.slurm_node_shapes: a pool needs a name and a group, got {pool!r}"
            )
        gtype = core.gres_type(pool.get("accelerator"), gres_types or {})
        for host in _get(groups, pool["group"], []) or []:
            hv = _get(hostvars, host, {}) or {}
            name = str(_get(hv, "inventory_hostname_short", str(host).split(".")[0]))
            if name in seen:
                raise AnsibleFilterError(
                    f"gpufleet.cluster.slurm_node_shapes: {host} is in pools {seen[name]} and {pool['name']}; "
                    "a node belongs to one pool"
                )
            seen[name] = pool["name"]
            facts = _get(hv, "ansible_facts", {}) if use_facts else {}
            rack = _get(hv, rack_var)
            node = core.node_shape(
                name,
                pool,
                facts,
                gres_type_name=gtype,
                rack=str(rack) if rack else None,
                memory_reserve_mb=int(memory_reserve_mb),
                brief_memory_fraction=float(brief_memory_fraction),
            )
            node.update({"pool": pool["name"], "rack": rack, "switch": _get(hv, switch_var)})
            shapes.append(node)
    return shapes


def _nodes(shapes):
    try:
        return core.node_lines([{k: v for k, v in s.items() if k not in _PRIVATE} for s in shapes])
    except (ValueError, AttributeError) as exc:
        raise AnsibleFilterError(f"gpufleet.cluster.slurm_nodes: {exc}") from exc


def _partitions(shapes, pools, default_name="all", options=None, pool_options=None):
    members = {}
    for s in shapes:
        members.setdefault(s.get("pool"), []).append(s["NodeName"])
    return core.partition_lines(
        core.partitions_from_pools(pools, members, default_name, options or {}, pool_options or {})
    )


def _topology(shapes, top_switch="top", pools=None):
    if pools is not None and not isinstance(pools, list):
        raise AnsibleFilterError("gpufleet.cluster.slurm_topology: pools must be the brief's pools (a list)")
    if pools and blocks.topology_plugin(pools) == "block":
        nodes = [{"name": s["NodeName"], "rack": s.get("rack")} for s in shapes]
        return blocks.block_lines(nodes, blocks.block_sizes(pools))
    return core.topology_lines(
        [{"name": s["NodeName"], "rack": s.get("rack"), "switch": s.get("switch")} for s in shapes],
        top_switch=top_switch,
    )


def _topology_plugin(pools):
    if not isinstance(pools, list):
        raise AnsibleFilterError("gpufleet.cluster.slurm_topology_plugin expects the brief's pools (a list)")
    return blocks.topology_plugin(pools)


def _conf(text):
    return core.parse_slurm_conf(text or "")


def _node_attrs(text, name):
    return core.node_attrs(text or "", str(name))


def _node_gres(text, name):
    return core.node_gres(text or "", str(name))


def _plan(old_text, new_text, version="22.05"):
    return core.reconfigure_plan(old_text or "", new_text or "", str(version or "22.05"))


def _slurmd_action(plan, node):
    if not isinstance(plan, Mapping):
        raise AnsibleFilterError("gpufleet.cluster.slurm_slurmd_action expects a plan from slurm_reconfigure_plan")
    return core.slurmd_action(plan, str(node))


class FilterModule:
    def filters(self):
        return {
            "hostlist": _hostlist,
            "hostlist_expand": _hostlist_expand,
            "slurm_gres_type": _gres_type,
            "slurm_node_shapes": _node_shapes,
            "slurm_nodes": _nodes,
            "slurm_partitions": _partitions,
            "slurm_topology": _topology,
            "slurm_topology_plugin": _topology_plugin,
            "slurm_conf": _conf,
            "slurm_node_attrs": _node_attrs,
            "slurm_node_gres": _node_gres,
            "slurm_reconfigure_plan": _plan,
            "slurm_slurmd_action": _slurmd_action,
        }
