# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The preflight gate: the brief checked against an inventory, before any host is touched.

``check(brief, groups, hostvars)`` returns every violation at once. ``groups`` maps group name →
host names (Ansible's ``groups``); ``hostvars`` maps host name → its variables (only those in
``READ_HOST_VARS`` are read). Nothing is templated or executed: values are data.

The phases live in this package, one module per concern, each a function of what it reads that
returns its violations (and, for three of them, a result later phases take): see ``check``. The
codes, their severities and wordings are the table in ``codes.py`` (docs/preflight-checks.md's Codes
section is generated from it).

This module also keeps the names other code imports from ``preflight.gate`` (``Net``,
``parse_ip``, ``pool_floors``, ``multi_node_ceiling_gbps``, ``size_bytes``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema as brief_schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.catalogue import get_accelerator, get_topology
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import show
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.acceptance import (
    LAUNCHERS,
    check_acceptance,
    check_launcher,
    check_rdma_pairs_scale,
    multi_node_ceiling_gbps,
    pool_floors,
    size_bytes,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.addresses import (
    Net,
    ip_text,
    parse_cidr,
    parse_ip,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.catalogue import Pool, check_catalogue
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.collectives import check_collectives
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.dcgm_diag import check_dcgm_diag
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.downloads import (
    READ_VARS as DOWNLOAD_VARS,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.downloads import (
    check_downloads,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.firmware import check_firmware
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.groups import Pools, check_groups
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.hosts import (
    K8S_NODE_CIDR_PREFIX_V4,
    MAX_FABRIC_IPS_CHECKED,
    check_hosts,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.kubernetes import (
    K8S_CNI_BLOCK_V4,
    K8S_HOST_PINS,
    K8S_KUBELET_SKEW,
    K8S_MIN_MINOR,
    K8S_RESERVED_NAMESPACES,
    K8S_TESTED_MINOR,
    check_kubernetes,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.networks import (
    K8S_SERVICE_MIN_PREFIX_V4,
    MTU_RANGES,
    Networks,
    check_fabric,
    check_networks,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.slurm_topology import check_slurm_topology
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.tenants import check_tenants
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.versions import (
    check_cuda_package,
    check_published,
    check_versions,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.storage import preflight as storage_checks

HOST_VARS = ("ansible_host", "bmc_ip", "storage_ip", "fabric_ips")
# Every host variable the checks read (the preflight filter passes these, untemplated, and no
# others): the addresses, the per-host Kubernetes pin, the scratch devices and the consent to wipe
# them (storage_checks), and the acceptance launcher with its image as the first controller sees them.
READ_HOST_VARS = (
    *HOST_VARS,
    *K8S_HOST_PINS,
    "storage_scratch_devices",
    "storage_scratch_wipe",
    "acceptance_launcher",
    "acceptance_container_image",
    # The dcgm role's packages: empty, no dcgmi for the GPU diagnostics (dcgm_diag.check_dcgm_diag).
    "dcgm_packages",
    # Where a node stands (Slurm's topology.conf, Kubernetes' gpufleet.io/rack and gpufleet.io/leaf labels).
    "rack",
    "leaf_switch",
    # The cuda role's own pin of the toolkit package: a site that sets it installs a CUDA release
    # the role's table does not know (see versions.check_cuda_package).
    "cuda_package_version",
    "cuda_package_versions",
    # The downloads' checksums, the switches of the roles that download, and the ones a site accepts
    # unchecked (downloads.check_downloads).
    *DOWNLOAD_VARS,
)


def check(brief: Any, groups: Any, hostvars: Any) -> list[dict]:
    """Validate ``brief`` and check ``groups`` / ``hostvars`` against it. Returns every violation.

    The order is what each phase reads: the schema first (every phase takes its clean brief); the
    catalogue resolves the pools (accelerator, topology) that versions, fabric and acceptance
    read; the groups phase gives each pool its hosts and finds the controllers (``Pools``), which
    the CUDA package, hosts, launcher, tenants and Kubernetes phases need; the networks phase parses
    the CIDRs (``Networks``) the hosts and Kubernetes phases place addresses in. The violations are
    listed in that order, each phase's together; the storage, storage acceptance and cost checks
    read only the clean brief and the inventory, and come last but for the downloads' checksums.
    """
    out: list[dict] = []
    if not isinstance(groups, Mapping):
        out.append(make("INVENTORY_INVALID", "groups", what="groups", found=show(groups)))
        groups = {}
    if not isinstance(hostvars, Mapping):
        out.append(make("INVENTORY_INVALID", "hostvars", what="host variables", found=show(hostvars)))
        hostvars = {}
    schema_out, clean = brief_schema.validate(brief)
    out.extend(schema_out)

    found, catalogue = check_catalogue(clean)
    out.extend(found)
    out.extend(check_versions(clean, catalogue))
    out.extend(check_published(clean))
    found, pools = check_groups(clean, groups, catalogue)
    out.extend(found)
    out.extend(check_cuda_package(clean, hostvars, pools.gpu_hosts))
    found, networks = check_networks(clean)
    out.extend(found)
    out.extend(check_fabric(clean, catalogue))
    out.extend(check_hosts(clean, groups, hostvars, pools, networks))
    out.extend(check_acceptance(clean, catalogue))
    out.extend(check_rdma_pairs_scale(clean, pools.members))  # all mode whose rounds take too long
    out.extend(check_firmware(clean))
    out.extend(check_collectives(clean, catalogue))  # acceptance.collectives (all_gather, alltoall)
    out.extend(check_launcher(clean, hostvars, pools.controllers))
    out.extend(check_dcgm_diag(clean, hostvars, pools))
    out.extend(check_slurm_topology(clean, groups, hostvars))  # topology/block for NVL72 pools
    out.extend(check_tenants(clean, pools))
    out.extend(check_kubernetes(clean, hostvars, pools, networks))
    out.extend(storage_checks.check(clean, groups, hostvars))  # storage, acceptance.storage/workload, cost
    out.extend(check_downloads(clean, hostvars, pools))
    return out


def effective_brief(brief: Any) -> dict:
    """The brief with defaults filled in, and each pool's effective acceptance floors under
    ``pools[i].acceptance`` (what the acceptance stage uses). Invalid values are dropped."""
    _out, clean = brief_schema.validate(brief)
    pools = []
    for i, pool in enumerate(clean["pools"]):
        if pool is None:
            continue
        acc, topo = get_accelerator(pool.get("accelerator")), get_topology(pool.get("topology"))
        floors = pool_floors(clean, pool, acc, topo, i)
        pool = dict(pool)
        pool["acceptance"] = {k: floors[k] for k in ("single_node_busbw_gbps", "multi_node_busbw_gbps")}
        pools.append(pool)
    clean = dict(clean)
    clean["pools"] = pools
    return clean


__all__ = [
    "HOST_VARS",
    "K8S_CNI_BLOCK_V4",
    "K8S_HOST_PINS",
    "K8S_KUBELET_SKEW",
    "K8S_MIN_MINOR",
    "K8S_NODE_CIDR_PREFIX_V4",
    "K8S_RESERVED_NAMESPACES",
    "K8S_SERVICE_MIN_PREFIX_V4",
    "K8S_TESTED_MINOR",
    "LAUNCHERS",
    "MAX_FABRIC_IPS_CHECKED",
    "MTU_RANGES",
    "READ_HOST_VARS",
    "Net",
    "Networks",
    "Pool",
    "Pools",
    "check",
    "effective_brief",
    "ip_text",
    "multi_node_ceiling_gbps",
    "parse_cidr",
    "parse_ip",
    "pool_floors",
    "size_bytes",
]
