# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Prometheus scrape targets and per-pool expectations from the topology brief and the inventory.

:func:`scrape_configs` turns the brief's pools and controllers plus the inventory into Prometheus
``scrape_configs``: one job per exporter, one static target per host, each labelled with the
node's ``cluster``, ``node``, ``pool``, ``rack``, ``accelerator`` and ``tenant`` so every series
(GPU metrics included) can be grouped by them. :func:`pool_expectations` gives what the alert rules
compare against (GPUs per node, fabric port speed). Problems are collected and raised together
(:class:`ScrapeConfigError`), each naming the host or exporter and the field. Pure functions: no I/O.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import format_text, violation

SHARED_TENANT = "shared"
_JOB_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]*$")
_LABEL_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_HOST_SCOPES = ("all", "gpu", "controllers")


class ScrapeConfigError(ValueError):
    """The scrape configuration cannot be built; ``violations`` holds every reason."""

    def __init__(self, violations: list[dict]):
        self.violations = violations
        super().__init__(format_text(violations))


def _get(mapping: Any, key: str, default: Any = None) -> Any:
    try:
        value = mapping.get(key, default) if isinstance(mapping, Mapping) else mapping[key]
    except (KeyError, TypeError, IndexError):
        return default
    return default if value is None else value


def pool_of_hosts(brief: Mapping, groups: Mapping) -> dict[str, Mapping]:
    """Host name -> the brief's pool it belongs to (first pool wins; preflight rejects overlaps)."""
    out: dict[str, Mapping] = {}
    for pool in _get(brief, "pools", []) or []:
        if not isinstance(pool, Mapping):
            continue
        for host in _get(groups, pool.get("group", ""), []) or []:
            out.setdefault(str(host), pool)
    return out


def pool_tenant(brief: Mapping, pool_name: str) -> str | None:
    """The tenant that owns a pool: the only tenant whose quota covers it, ``shared`` when several do.

    A tenant without ``pools`` covers every pool. None when the brief has no tenant for the pool.
    """
    names = []
    for tenant in _get(brief, "tenants", []) or []:
        if not isinstance(tenant, Mapping) or not tenant.get("name"):
            continue
        pools = tenant.get("pools")
        if not pools or pool_name in pools:
            names.append(str(tenant["name"]))
    if not names:
        return None
    return names[0] if len(names) == 1 else SHARED_TENANT


def _address(host: str, hv: Mapping, address_var: str) -> str:
    addr = str(_get(hv, address_var, host))
    try:
        if isinstance(ipaddress.ip_address(addr), ipaddress.IPv6Address):
            return f"[{addr}]"
    except ValueError:
        pass
    return addr


def _scope_hosts(scope: str, brief: Mapping, groups: Mapping, pools: Mapping[str, Mapping]) -> list[str]:
    if scope == "all":
        return [str(h) for h in _get(groups, "all", []) or []]
    if scope == "gpu":
        return list(pools)
    if scope == "controllers":
        return [str(h) for h in _get(groups, _get(_get(brief, "controllers", {}), "group", ""), []) or []]
    return [str(h) for h in _get(groups, scope, []) or []]


def node_labels(
    host: str,
    brief: Mapping,
    pools: Mapping[str, Mapping],
    hostvars: Mapping,
    *,
    rack_var: str = "rack",
    tenant_var: str = "gpufleet_tenant",
) -> dict[str, str]:
    """The labels every series of a host carries. Absent values are left out (Prometheus drops empty labels)."""
    hv = _get(hostvars, host, {}) or {}
    labels = {
        "cluster": str(_get(_get(brief, "cluster", {}), "name", "")),
        "node": str(_get(hv, "inventory_hostname_short", host.split(".")[0])),
    }
    pool = pools.get(host)
    if pool:
        labels["pool"] = str(pool.get("name", ""))
        labels["accelerator"] = str(pool.get("accelerator", ""))
        tenant = pool_tenant(brief, labels["pool"])
        if tenant:
            labels["tenant"] = tenant
    rack = _get(hv, rack_var)
    if rack not in (None, ""):
        labels["rack"] = str(rack)
    tenant = _get(hv, tenant_var)
    if tenant not in (None, ""):
        labels["tenant"] = str(tenant)
    return {k: v for k, v in labels.items() if v != ""}


def scrape_configs(
    brief: Mapping,
    groups: Mapping,
    hostvars: Mapping,
    exporters: list[Mapping],
    *,
    address_var: str = "ansible_host",
    rack_var: str = "rack",
    tenant_var: str = "gpufleet_tenant",
) -> list[dict]:
    """Prometheus ``scrape_configs`` for every exporter on every host it runs on.

    ``exporters``: ``{job, port, hosts, path?, port_var?, scheme?, interval?}``; ``hosts`` is ``all``,
    ``gpu`` (every pool's nodes), ``controllers`` (the brief's controllers group) or an inventory group;
    ``port_var`` names a host variable that overrides the port for that host. The target's
    ``instance`` label is the inventory host name; the address comes from ``address_var``.
    Raises :class:`ScrapeConfigError` listing every problem.
    """
    problems: list[dict] = []
    pools = pool_of_hosts(brief, groups)
    out: list[dict] = []
    seen_jobs: set[str] = set()
    if not isinstance(exporters, list) or not exporters:
        raise ScrapeConfigError(
            [
                violation(
                    "PROM_EXPORTERS", "exporters", "expected a non-empty list of exporters, found " + repr(exporters)
                )
            ]
        )
    for i, exp in enumerate(exporters):
        field = f"exporters[{i}]"
        if not isinstance(exp, Mapping):
            problems.append(violation("PROM_EXPORTER", field, f"expected a mapping, found {exp!r}"))
            continue
        job = str(exp.get("job", ""))
        if not _JOB_RE.fullmatch(job):
            problems.append(violation("PROM_EXPORTER_JOB", f"{field}.job", f"expected a job name, found {job!r}"))
            continue
        if job in seen_jobs:
            problems.append(violation("PROM_EXPORTER_JOB", f"{field}.job", f"job {job!r} is defined twice"))
            continue
        seen_jobs.add(job)
        scope = str(exp.get("hosts", "all"))
        if scope not in _HOST_SCOPES and scope not in groups:
            problems.append(
                violation(
                    "PROM_EXPORTER_HOSTS",
                    f"{field}.hosts",
                    f"expected one of {', '.join(_HOST_SCOPES)} or an inventory group, found {scope!r}",
                )
            )
            continue
        statics = []
        for host in _scope_hosts(scope, brief, groups, pools):
            hv = _get(hostvars, host, {}) or {}
            port = _get(hv, exp["port_var"], exp.get("port")) if exp.get("port_var") else exp.get("port")
            try:
                port = int(port)
                if not 0 < port < 65536:
                    raise ValueError
            except (TypeError, ValueError):
                problems.append(
                    violation(
                        "PROM_EXPORTER_PORT",
                        exp.get("port_var") or f"{field}.port",
                        f"job {job}: expected a TCP port (1-65535), found {port!r}",
                        host=host,
                    )
                )
                continue
            labels = {
                "instance": host,
                **node_labels(host, brief, pools, hostvars, rack_var=rack_var, tenant_var=tenant_var),
            }
            statics.append({"targets": [f"{_address(host, hv, address_var)}:{port}"], "labels": labels})
        cfg: dict[str, Any] = {"job_name": job, "static_configs": statics}
        if exp.get("path"):
            cfg["metrics_path"] = str(exp["path"])
        if exp.get("scheme"):
            cfg["scheme"] = str(exp["scheme"])
        if exp.get("interval"):
            cfg["scrape_interval"] = str(exp["interval"])
        out.append(cfg)
    if problems:
        raise ScrapeConfigError(problems)
    return out


def pool_expectations(brief: Mapping) -> list[dict]:
    """Per pool: ``{pool, gpus_per_node, rdma_rate_gbps, rdma_ports, rdma_devices}`` for the alert rules.

    ``rdma_rate_gbps`` is the pool's ``nic_speed_gbps``, else the fabric's ``link_speed_gbps``; 0 when
    the pool has no fabric NIC. ``rdma_devices`` the pool's device globs (empty: every device).
    """
    fabric = _get(_get(brief, "networks", {}), "fabric", {}) or {}
    out = []
    for pool in _get(brief, "pools", []) or []:
        if not isinstance(pool, Mapping) or not pool.get("name"):
            continue
        nics = int(pool.get("nics_per_node") or 0)
        has_fabric = nics > 0 and fabric.get("type") in ("infiniband", "roce", "ethernet")
        rate = pool.get("nic_speed_gbps") or fabric.get("link_speed_gbps") or 0
        out.append(
            {
                "pool": str(pool["name"]),
                "gpus_per_node": int(pool.get("gpus_per_node") or 0),
                "rdma_ports": nics if has_fabric else 0,
                "rdma_rate_gbps": int(rate) if has_fabric else 0,
                "rdma_devices": [str(d) for d in pool.get("rdma_devices") or []],
            }
        )
    return out


def device_selected(name: str, globs: list[str]) -> bool:
    """True when an RDMA device matches one of the pool's ``rdma_devices`` globs (no globs: every device)."""
    return not globs or any(fnmatch.fnmatchcase(name, g) for g in globs)


def check_label_name(name: str) -> bool:
    return bool(_LABEL_RE.fullmatch(name))


__all__ = [
    "SHARED_TENANT",
    "ScrapeConfigError",
    "device_selected",
    "node_labels",
    "pool_expectations",
    "pool_of_hosts",
    "pool_tenant",
    "scrape_configs",
]
