# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phase: the GPU diagnostics gate (``acceptance.dcgm_diag``) against what installs DCGM.

The level itself (1 to 4) is the schema's to check. What the inventory can still get wrong: the
acceptance runs ``dcgmi diag`` on every node of a pool that asks for a level, and dcgmi comes with
DCGM, which the dcgm role installs on every GPU node (playbooks/gpu_stack.yml) from its
``dcgm_packages``. A node whose inventory empties that list gets no DCGM from gpufleet; unless the
site installs it by other means, its acceptance fails (DCGM_DIAG_RUN_FAILED). Warned, naming the
host and the variable, before any host is touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.dcgm_diag import DcgmDiagError, level_for
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.addresses import vars_of
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.groups import Pools


def check_dcgm_diag(brief: dict, hostvars: Mapping[str, Any], pools: Pools) -> list[dict]:
    out: list[dict] = []
    for member in pools.members:
        try:
            level = level_for(brief, member.pool.spec.get("name"))
        except DcgmDiagError:
            continue  # an invalid level: the schema reports it
        if level is None:
            continue
        for host in member.hosts:
            packages = vars_of(hostvars, host).get("dcgm_packages")
            if isinstance(packages, list) and not packages:
                out.append(
                    make(
                        "ACCEPT_DCGM_DIAG_NO_DCGM",
                        "dcgm_packages",
                        host=host,
                        pool=member.pool.label,
                        level=level,
                        found="an empty list",
                    )
                )
    return out


__all__ = ["check_dcgm_diag"]
