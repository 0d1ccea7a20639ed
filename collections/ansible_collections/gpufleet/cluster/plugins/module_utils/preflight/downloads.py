# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phase: files the roles download from the internet (get_url) and whether each is checked.

``DOWNLOADS`` lists every download that has a checksum variable, with the role's default for it;
``check_downloads(brief, hostvars, pools)`` warns, once per variable, when a download the cluster will
make (its control plane, the role's switches as the inventory sets them) has no checksum on some host
that makes it. A site that accepts an unchecked download names its checksum variable in the host
variable ``preflight_unchecked_downloads``. docs/security.md lists every download and how it is verified.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.groups import Pools

ACCEPT_VAR = "preflight_unchecked_downloads"
# Where a role downloads: every pool host, every controller, or the first controller only.
GPU_NODES, CONTROLLERS, FIRST_CONTROLLER, CLUSTER = "gpu nodes", "controllers", "first controller", "cluster"
_FALSE = {"false", "no", "off", "0", "n", "f", ""}


@dataclass(frozen=True)
class Download:
    checksum_var: str
    url_var: str
    role: str
    what: str
    # The role's default checksum: "" downloads unchecked unless the inventory sets one.
    default: str
    control_plane: str | None
    hosts: str
    # Role variables (with the role's default) that must all be true for the role to download it.
    switches: tuple[tuple[str, bool], ...] = ()


DOWNLOADS: tuple[Download, ...] = (
    Download(
        "enroot_pyxis_enroot_checksum",
        "enroot_pyxis_enroot_url",
        "enroot_pyxis",
        "enroot's .deb package",
        "",
        "slurm",
        GPU_NODES,
        (("enroot_pyxis_enabled", False), ("enroot_pyxis_compute", True)),
    ),
    Download(
        "enroot_pyxis_enroot_caps_checksum",
        "enroot_pyxis_enroot_caps_url",
        "enroot_pyxis",
        "the enroot+caps .deb package (installs file capabilities)",
        "",
        "slurm",
        GPU_NODES,
        (("enroot_pyxis_enabled", False), ("enroot_pyxis_compute", True), ("enroot_pyxis_enroot_caps", True)),
    ),
    Download(
        "enroot_pyxis_pyxis_checksum",
        "enroot_pyxis_pyxis_url",
        "enroot_pyxis",
        "pyxis's source tarball (built as root into Slurm's plugin directory)",
        "",
        "slurm",
        CLUSTER,
        (("enroot_pyxis_enabled", False),),
    ),
    Download(
        "nccl_tests_checksum",
        "nccl_tests_url",
        "nccl",
        "nccl-tests' source tarball",
        "sha256:ec373552e216c0df03414718bd588585a1719971b20a5939a2f9488c8ce767eb",
        None,
        GPU_NODES,
    ),
    Download(
        "gpu_operator_helm_checksum",
        "gpu_operator_helm_url",
        "gpu_operator",
        "the helm binary's tarball",
        "sha256:{{ gpu_operator_helm_url }}.sha256sum",
        "kubernetes",
        FIRST_CONTROLLER,
    ),
    Download(
        "kubernetes_control_plane_calico_operator_checksum",
        "kubernetes_control_plane_calico_operator_url",
        "kubernetes_control_plane",
        "Calico's tigera-operator manifest (applied to the cluster)",
        "",
        "kubernetes",
        CONTROLLERS,
    ),
    Download(
        "kueue_manifest_checksum",
        "kueue_manifest_url",
        "kueue",
        "Kueue's release manifests (applied to the cluster)",
        "",
        "kubernetes",
        FIRST_CONTROLLER,
    ),
    Download(
        "mpi_operator_manifest_checksum",
        "mpi_operator_manifest_url",
        "mpi_operator",
        "the MPI Operator's manifest (applied to the cluster)",
        "sha256:b38def13a94abe60b2a4b3485239d77f64892b8fbd202e9e435a6031b7500a8f",
        "kubernetes",
        FIRST_CONTROLLER,
    ),
)

# The host variables this phase reads (the preflight filter and the CLI pass only those named in
# gate.READ_HOST_VARS).
READ_VARS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [ACCEPT_VAR] + [d.checksum_var for d in DOWNLOADS] + [name for d in DOWNLOADS for name, _default in d.switches]
    )
)


def _true(value: Any, default: bool) -> bool:
    """A switch as a role would read it (``| bool``); a value still to be templated counts as on."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() not in _FALSE


def _hosts(kind: str, pools: Pools) -> list[str]:
    if kind == GPU_NODES:
        return pools.gpu_hosts
    if kind == CONTROLLERS:
        return list(pools.controllers)
    if kind == FIRST_CONTROLLER:
        return list(pools.controllers[:1])
    return pools.cluster_hosts()


def check_downloads(brief: dict, hostvars: Mapping[str, Any], pools: Pools) -> list[dict]:
    out: list[dict] = []
    plane = (brief.get("cluster") or {}).get("control_plane")
    for d in DOWNLOADS:
        if d.control_plane is not None and d.control_plane != plane:
            continue
        unchecked = []
        for host in _hosts(d.hosts, pools):
            hv = hostvars.get(host)
            hv = hv if isinstance(hv, Mapping) else {}
            if not all(_true(hv.get(name), default) for name, default in d.switches):
                continue
            accepted = hv.get(ACCEPT_VAR)
            if isinstance(accepted, list | tuple) and d.checksum_var in accepted:
                continue
            checksum = hv.get(d.checksum_var, d.default)
            if not (isinstance(checksum, str) and checksum.strip()):
                unchecked.append(host)
        if unchecked:
            shown = ", ".join(unchecked[:3]) + (f" and {len(unchecked) - 3} more" if len(unchecked) > 3 else "")
            out.append(
                make(
                    "DOWNLOAD_NO_CHECKSUM",
                    d.checksum_var,
                    what=d.what,
                    url=d.url_var,
                    role=d.role,
                    count=len(unchecked),
                    hosts=shown,
                    accept=ACCEPT_VAR,
                )
            )
    return out


__all__ = ["ACCEPT_VAR", "DOWNLOADS", "READ_VARS", "Download", "check_downloads"]
