# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Phases: the software pins against NVIDIA's compatibility tables and each pool's accelerator, and
the brief's CUDA against the releases the cuda role can install.

``check_versions(brief, pools)`` needs the catalogue's pools (their accelerators);
``check_cuda_package(brief, hostvars, gpu_hosts)`` needs the GPU hosts (the groups phase's result),
since a site may pin the toolkit package in their inventory; ``check_published(brief)`` holds the
brief's OS and pins against what the vendor matrix says NVIDIA publishes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import vendor_matrix
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.compat import (
    cuda_min_driver,
    driver_branch,
    major_minor,
    nccl_cuda_majors,
    version_at_least,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.catalogue import Pool
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.codes import make


def check_versions(brief: dict, pools: Iterable[Pool]) -> list[dict]:
    out: list[dict] = []
    sw = brief["software"]
    driver, cuda, nccl = sw.get("driver"), sw.get("cuda"), sw.get("nccl")
    if driver and cuda:
        minimum, exact = cuda_min_driver(cuda)
        if minimum is None:
            out.append(make("VER_CUDA_UNKNOWN", "software.cuda", variant="unknown", cuda=cuda))
        else:
            if not exact:
                out.append(
                    make(
                        "VER_CUDA_UNKNOWN",
                        "software.cuda",
                        variant="minor",
                        cuda=cuda,
                        major=major_minor(cuda)[0],
                        minimum=minimum,
                    )
                )
            if not version_at_least(driver, minimum):
                out.append(make("VER_CUDA_DRIVER", "software.driver", minimum=minimum, cuda=cuda, driver=driver))
    if cuda and nccl:
        majors = nccl_cuda_majors(nccl)
        mm = major_minor(cuda)
        if majors is None:
            out.append(make("VER_NCCL_UNKNOWN", "software.nccl", nccl=nccl))
        elif mm is not None and mm[0] not in majors:
            out.append(
                make(
                    "VER_NCCL_CUDA",
                    "software.nccl",
                    major=mm[0],
                    nccl=nccl,
                    majors=" and ".join(map(str, majors)),
                    cuda=cuda,
                )
            )
    if sw.get("rdma_stack") == "doca-ofed" and not sw.get("doca_ofed"):
        out.append(make("VER_DOCA_OFED_MISSING", "software.doca_ofed"))
    branch = driver_branch(driver) if driver else None
    for pool in pools:
        acc = pool.acc
        if acc is None:
            continue
        if branch is not None and branch < acc.min_driver_branch:
            out.append(
                make(
                    "VER_DRIVER_BRANCH",
                    "software.driver",
                    minimum=acc.min_driver_branch,
                    pool=pool.label,
                    acc=acc.key,
                    driver=driver,
                    branch=branch,
                )
            )
        if cuda and version_at_least(cuda, acc.min_cuda) is False:
            out.append(
                make(
                    "VER_CUDA_ACCELERATOR",
                    "software.cuda",
                    minimum=acc.min_cuda,
                    pool=pool.label,
                    acc=acc.key,
                    cuda=cuda,
                )
            )
        if acc.open_kernel_modules_required and sw.get("driver_flavor") == "proprietary":
            out.append(
                make(
                    "VER_OPEN_MODULES_REQUIRED",
                    "software.driver_flavor",
                    pool=pool.label,
                    acc=acc.key,
                    architecture=acc.architecture,
                )
            )
    return out


# What each ``published`` row of the vendor matrix is about: the component's brief field (None: the
# component is installed on every GPU host whatever the brief pins), and how a message names it.
_PUBLISHED: tuple[tuple[str, str, str | None, str], ...] = (
    ("driver", "published", "software.driver", "a driver branch"),
    ("driver", "published.proprietary", "software.driver_flavor", "kernel modules"),
    ("dcgm", "published", None, "DCGM (installed on every GPU host)"),
    ("dcgm-exporter", "published", None, "dcgm-exporter (installed on every GPU host of a Slurm cluster)"),
)


def _source_values(row: vendor_matrix.Row) -> dict[str, str]:
    return {"fact": row.source.note or row.doc, "source": row.source.url, "checked": row.source.checked}


def check_published(brief: dict) -> list[dict]:
    """The brief installs nothing the vendor matrix says NVIDIA does not publish for its OS and versions:
    an error where a source confirms it, a warning where the matrix's row is unconfirmed."""
    out: list[dict] = []
    sw = brief["software"]
    os_name = brief["cluster"].get("os")
    os_key = vendor_matrix.BRIEF_OS.get(str(os_name))
    if os_key is None:
        return out  # missing or not a choice: the brief schema reports it
    driver = sw.get("driver")
    for component, key, field, what in _PUBLISHED:
        if key == "published.proprietary" and sw.get("driver_flavor") != "proprietary":
            continue
        # On Kubernetes the GPU Operator runs its own exporter: the host package is not installed.
        if component == "dcgm-exporter" and brief["cluster"].get("control_plane") != "slurm":
            continue
        version = str(driver) if component == "driver" and driver else None
        if component == "driver" and version is None:
            continue
        row = vendor_matrix.find(component, key, os_key, version=version)
        if row is None or row.value is not False:
            continue
        if field == "software.driver":
            found = f"driver {driver} (R{driver_branch(driver)}) on {os_name}"
        elif field == "software.driver_flavor":
            found = f"proprietary with driver {driver}"
        else:
            found = f"cluster.os {os_name}"
        values = {"what": what, "found": found, **_source_values(row)}
        field = field or "cluster.os"
        if row.source.confirmed:
            out.append(make("VER_NOT_PUBLISHED", field, **values))
        else:
            out.append(make("VER_NOT_PUBLISHED_UNCONFIRMED", field, **values))
    out.extend(_check_nccl_build(sw))
    return out


def _check_nccl_build(sw: Mapping[str, Any]) -> list[dict]:
    """NVIDIA builds each NCCL release for a few CUDA minors only (its ``+cuda<major.minor>`` packages)."""
    nccl, cuda = sw.get("nccl"), sw.get("cuda")
    mm = major_minor(cuda) if cuda else None
    if not nccl or mm is None:
        return []
    majors = nccl_cuda_majors(nccl)
    if majors is None or mm[0] not in majors:
        return []  # VER_NCCL_UNKNOWN / VER_NCCL_CUDA already say it
    cuda = f"{mm[0]}.{mm[1]}"
    row = vendor_matrix.find("nccl", "built_for_cuda", vendor_matrix.OSES[0], version=str(nccl))
    if row is None:
        return [make("VER_NCCL_CUDA_UNCONFIRMED", "software.nccl", variant="unknown", nccl=nccl, cuda=cuda)]
    if cuda in row.value:
        return []
    values = {"nccl": nccl, "cuda": cuda, "built": ", ".join(row.value), **_source_values(row)}
    if row.source.confirmed:
        return [make("VER_NCCL_CUDA_NOT_BUILT", "software.nccl", **values)]
    values["note"] = values.pop("fact")
    return [make("VER_NCCL_CUDA_UNCONFIRMED", "software.nccl", variant="partial", **values)]


def _cuda_package_pinned_by_site(vars_: Any, cuda: str) -> bool:
    """Whether a host's variables give the cuda role a package version for ``cuda`` themselves."""
    if not isinstance(vars_, Mapping):
        return False
    table = vars_.get("cuda_package_versions")
    return bool(vars_.get("cuda_package_version")) or (isinstance(table, Mapping) and bool(table.get(cuda)))


def check_cuda_package(brief: dict, hostvars: Mapping[str, Any], gpu_hosts: Iterable[str]) -> list[dict]:
    """The brief's CUDA is a release the cuda role can install: its table (``cuda_package_versions``,
    the vendor matrix's CUDA rows) gives the exact cuda-toolkit package version of each CUDA minor
    it knows, and the role stops on any other before installing anything. Hosts whose inventory
    pins the package themselves (``cuda_package_version``, or their own ``cuda_package_versions``
    with this release) are fine."""
    cuda = brief["software"].get("cuda")
    if cuda is None or major_minor(cuda) is None:
        return []  # missing or malformed: the brief schema reports it
    cuda = str(cuda)
    known = vendor_matrix.cuda_package_versions()
    if cuda in known:
        return []
    gpu_hosts = list(gpu_hosts)
    if gpu_hosts and all(_cuda_package_pinned_by_site(hostvars.get(h), cuda) for h in gpu_hosts):
        return []
    return [
        make(
            "VER_CUDA_PACKAGE_UNKNOWN",
            "software.cuda",
            known=", ".join(sorted(known, key=major_minor)),
            cuda=cuda,
        )
    ]


__all__ = ["check_cuda_package", "check_published", "check_versions"]
