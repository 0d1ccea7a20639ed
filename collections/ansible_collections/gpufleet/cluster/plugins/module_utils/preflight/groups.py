# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phase: the brief's pools and controllers against the inventory's groups.

``check_groups(brief, groups, pools)`` takes the catalogue's pools and returns its violations and a
``Pools``: each pool's hosts, the pool each host belongs to (its first, when it is in two) and the
controllers. The versions, hosts, acceptance, tenants and Kubernetes phases read it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.catalogue import Pool
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make


@dataclass(frozen=True)
class PoolHosts:
    pool: Pool
    hosts: tuple[str, ...]


@dataclass(frozen=True)
class Pools:
    """The inventory's side of the pools: ``members`` in brief order (hosts empty when the group is
    missing), ``host_pool`` host → its pool in inventory order, ``controllers`` the controllers' hosts."""

    members: tuple[PoolHosts, ...]
    host_pool: Mapping[str, Pool]
    controllers: tuple[str, ...]

    @property
    def gpu_hosts(self) -> list[str]:
        return [h for m in self.members for h in m.hosts]

    def cluster_hosts(self) -> list[str]:
        """Controllers, then pool hosts, each once."""
        return list(dict.fromkeys([*self.controllers, *self.host_pool]))


def hosts_of(groups: Mapping[str, Any], name: Any) -> list[str] | None:
    """A group's host names; None when there is no such group, [] when it holds no list."""
    if not isinstance(name, str) or name not in groups:
        return None
    hosts = groups[name]
    if isinstance(hosts, list | tuple):
        return [h for h in hosts if isinstance(h, str)]
    return []


def check_groups(brief: dict, groups: Mapping[str, Any], pools: Iterable[Pool]) -> tuple[list[dict], Pools]:
    out: list[dict] = []
    members: list[PoolHosts] = []
    host_pool: dict[str, Pool] = {}
    for pool in pools:
        spec, i = pool.spec, pool.index
        hosts = _pool_hosts(out, groups, pool) if "group" in spec else None
        members.append(PoolHosts(pool, tuple(hosts or ())))
        for h in hosts or ():
            prev = host_pool.get(h)
            if prev is not None and prev.index != i:
                out.append(
                    make(
                        "GROUP_HOST_IN_TWO_POOLS",
                        f"pools[{i}].group",
                        host=h,
                        first=prev.label,
                        first_group=prev.spec["group"],
                        second=pool.label,
                        second_group=spec["group"],
                    )
                )
            elif prev is None:
                host_pool[h] = pool
    controllers = _controllers(out, brief, groups)
    return out, Pools(tuple(members), host_pool, tuple(controllers))


def _pool_hosts(out: list[dict], groups: Mapping[str, Any], pool: Pool) -> list[str] | None:
    group = pool.spec["group"]
    hosts = hosts_of(groups, group)
    field = f"pools[{pool.index}].group"
    if hosts is None:
        out.append(make("GROUP_MISSING", field, group=group, owner=pool.label))
    elif not hosts:
        out.append(make("GROUP_EMPTY", field, group=group))
    return hosts


def _controllers(out: list[dict], brief: dict, groups: Mapping[str, Any]) -> list[str]:
    group = brief["controllers"].get("group")
    if group is None:
        return []
    hosts = hosts_of(groups, group)
    if hosts is None:
        out.append(make("GROUP_MISSING", "controllers.group", group=group, owner="the controllers"))
        return []
    n = len(hosts)
    plane = brief["cluster"].get("control_plane")
    if plane == "slurm" and not 1 <= n <= 2:
        out.append(make("GROUP_CONTROLLERS_SIZE", "controllers.group", variant="slurm", n=n, group=group))
    elif plane == "kubernetes" and not (n == 1 or (n >= 3 and n % 2 == 1)):
        out.append(make("GROUP_CONTROLLERS_SIZE", "controllers.group", variant="kubernetes", n=n, group=group))
    return hosts


__all__ = ["PoolHosts", "Pools", "check_groups", "hosts_of"]
