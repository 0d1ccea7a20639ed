# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phase: the tenants against the pools: unique names, known pools, quotas within the GPUs there are.

``check_tenants(brief, pools)`` needs the groups phase's ``Pools`` (each pool's hosts count the GPUs).
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import show
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.groups import Pools


def check_tenants(brief: dict, pools: Pools) -> list[dict]:
    tenants = brief["tenants"]
    if not tenants:
        return []
    out: list[dict] = []
    names = dict.fromkeys(m.pool.spec["name"] for m in pools.members if m.pool.spec.get("name"))
    known = ", ".join(map(str, names))
    seen: set[str] = set()
    total_quota = 0
    for t, tenant in enumerate(tenants):
        if tenant is None:
            continue
        name = tenant.get("name")
        if name in seen:
            out.append(make("TENANT_DUPLICATE", f"tenants[{t}].name", name=name))
        seen.add(name)
        for p in tenant.get("pools") or []:
            if p is not None and p not in names:
                out.append(
                    make("TENANT_UNKNOWN_POOL", f"tenants[{t}].pools", pools=known or "none defined", found=show(p))
                )
        total_quota += tenant.get("gpus", 0)
    cluster_gpus = sum(len(m.hosts) * m.pool.spec.get("gpus_per_node", 0) for m in pools.members)
    if total_quota > cluster_gpus:
        out.append(make("TENANT_QUOTA_EXCEEDS", "tenants", gpus=cluster_gpus, quota=total_quota))
    return out


__all__ = ["check_tenants"]
