#!/usr/bin/env python3
"""The stand-in packages' names and version strings, taken from the vendor matrix.

build-repo.sh builds the test doubles' apt repositories; it reads every NVIDIA package name
and version string it gives a stand-in from here, so a double can only carry what
module_utils/brief/vendor_matrix.py says NVIDIA ships for the OS the test hosts run (Debian 12 and
13, x86_64: one repository serves both, so both must answer the same).

    matrix_packages.py            print bash assignments for build-repo.sh to eval
    import matrix_packages        packages() for the unit test that checks the built repository

The versions below are the test bed's choice (the lab's pins first, then a newer release that
must never be picked up); how each is spelled as a package comes from the matrix.
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import vendor_matrix as vm  # noqa: E402

# The OSes the doubles' hosts run; the first is the one asked, the others must agree with it.
OSES = ("debian12", "debian13")
ARCH = "x86_64"

DRIVER_VERSIONS = ("570.133.20", "570.148.08")
CUDA_VERSIONS = ("12.8.0", "12.8.1")  # cuda-toolkit-12-8 releases (12.8.1 is the 12.8 pin)
CUDA_OTHER = "12.9.1"  # a second toolkit, for the alternatives test
NCCL_VERSIONS = ("2.26.2", "2.26.5")
NCCL_CUDA = "12.8"
DCGM_VERSIONS = ("4.2.3", "4.3.1")
DCGM_CUDA = "12.8"
DCGM_EXPORTER_VERSIONS = ("4.1.3", "4.4.0")  # 4.1.3 is paired with DCGM 4.2.3
TOOLKIT_VERSIONS = ("1.17.5", "1.17.8")
DOCA_VERSIONS = ("2.10.0", "2.9.1")  # 2.10.0 is the lab's pin


class Package(NamedTuple):
    """One stand-in: the matrix component it belongs to, its upstream version, name and package version."""

    component: str
    version: str
    name: str
    package_version: str


def _same_on_every_os(component: str, key: str, version: str | None = None, **context: str):
    """The matrix's answer for the doubles' OSes; an error when they differ (one repository serves all)."""
    answers = {os_: vm.value(component, key, os_, ARCH, version, **context) for os_ in OSES}
    first = answers[OSES[0]]
    if any(a != first for a in answers.values()):
        raise SystemExit(f"matrix_packages: {component} {key} {version} differs between {answers}")
    return first


def driver(version: str) -> dict[str, object]:
    """Names of one driver release's stand-ins (open and proprietary kernel modules both)."""
    open_ = _same_on_every_os("driver", "packages.open", version)
    proprietary = _same_on_every_os("driver", "packages.proprietary", version)
    # The first of each list is the user-space driver, the same in both flavours.
    if open_[0] != proprietary[0] or len(open_) != 2 or len(proprietary) != 2:
        raise SystemExit(f"matrix_packages: driver {version}: expected [driver, kernel module], got {open_}")
    libcuda, smi = _same_on_every_os("driver", "dependencies", version)
    (persistenced,) = _same_on_every_os("driver", "persistenced_packages", version)
    (fabricmanager,) = _same_on_every_os("fabricmanager", "packages", version)
    return {
        "version": _same_on_every_os("driver", "package_version", version),
        "driver": open_[0],
        "kmod_open": open_[1],
        "kmod_proprietary": proprietary[1],
        "libcuda": libcuda,
        "smi": smi,
        "persistenced": persistenced,
        "fabricmanager": fabricmanager,
        "fabricmanager_version": _same_on_every_os("fabricmanager", "package_version", version),
    }


def cuda(version: str) -> dict[str, object]:
    minor = ".".join(version.split(".")[:2])
    (toolkit,) = _same_on_every_os("cuda", "packages", cuda=minor)
    (gds,) = _same_on_every_os("cuda", "gds_packages", cuda=minor)
    return {"version": _same_on_every_os("cuda", "package_version", version), "toolkit": toolkit, "gds": gds}


def packages() -> list[Package]:
    """Every NVIDIA stand-in the doubles' repositories carry (DOCA's once per release)."""
    out: list[Package] = []
    for v in DRIVER_VERSIONS:
        d = driver(v)
        for key in ("driver", "kmod_open", "kmod_proprietary", "libcuda", "smi", "persistenced"):
            out.append(Package("driver", v, str(d[key]), str(d["version"])))
        out.append(Package("fabricmanager", v, str(d["fabricmanager"]), str(d["fabricmanager_version"])))
    for v in (*CUDA_VERSIONS, CUDA_OTHER):
        c = cuda(v)
        out += [
            Package("cuda", v, str(c["toolkit"]), str(c["version"])),
            Package("cuda", v, str(c["gds"]), str(c["version"])),
        ]
    nccl_names = _same_on_every_os("nccl", "packages")
    for v in NCCL_VERSIONS:
        pv = _same_on_every_os("nccl", "package_version", v, cuda=NCCL_CUDA)
        out += [Package("nccl", v, name, pv) for name in nccl_names]
    for v in DCGM_VERSIONS:
        pv = _same_on_every_os("dcgm", "package_version", v)
        out += [Package("dcgm", v, name, pv) for name in _same_on_every_os("dcgm", "packages", v, cuda=DCGM_CUDA)]
    for v in DCGM_EXPORTER_VERSIONS:
        pv = _same_on_every_os("dcgm-exporter", "package_version", v)
        out.append(Package("dcgm-exporter", v, _same_on_every_os("dcgm-exporter", "package", v), pv))
    for v in TOOLKIT_VERSIONS:
        pv = _same_on_every_os("container-toolkit", "package_version", v)
        out += [Package("container-toolkit", v, n, pv) for n in _same_on_every_os("container-toolkit", "packages", v)]
    for v in DOCA_VERSIONS:
        pv = _same_on_every_os("doca-ofed", "package_version", v)
        names = _same_on_every_os("doca-ofed", "packages", v) + _same_on_every_os("doca-ofed", "userspace_packages", v)
        out += [Package("doca-ofed", v, n, pv) for n in names]
    return out


def _bash() -> str:
    """Assignments build-repo.sh evals: lists of versions, and per version the names and package versions."""
    lines = [
        "# From molecule/resources/doubles/matrix_packages.py (vendor matrix, "
        + "/".join(OSES)
        + f" {ARCH}): do not edit",
    ]

    def assoc(name: str, mapping: dict[str, object]) -> None:
        body = " ".join(f"[{shlex.quote(k)}]={shlex.quote(str(v))}" for k, v in mapping.items())
        lines.append(f"declare -A {name}=({body})")

    def array(name: str, values) -> None:
        lines.append(f"{name}=({' '.join(shlex.quote(v) for v in values)})")

    array("driver_versions", DRIVER_VERSIONS)
    for key in driver(DRIVER_VERSIONS[0]):
        assoc(f"drv_{key}", {v: driver(v)[key] for v in DRIVER_VERSIONS})
    array("cuda_versions", CUDA_VERSIONS)
    lines.append(f"cuda_other={shlex.quote(CUDA_OTHER)}")
    for key in ("version", "toolkit", "gds"):
        assoc(f"cuda_{key}", {v: cuda(v)[key] for v in (*CUDA_VERSIONS, CUDA_OTHER)})
    array("nccl_versions", NCCL_VERSIONS)
    lib, dev = _same_on_every_os("nccl", "packages")
    lines += [f"nccl_lib={shlex.quote(lib)}", f"nccl_dev={shlex.quote(dev)}"]
    assoc("nccl_version", {v: _same_on_every_os("nccl", "package_version", v, cuda=NCCL_CUDA) for v in NCCL_VERSIONS})
    array("dcgm_versions", DCGM_VERSIONS)
    core, cuda_pkg = _same_on_every_os("dcgm", "packages", DCGM_VERSIONS[0], cuda=DCGM_CUDA)
    lines += [f"dcgm_core={shlex.quote(core)}", f"dcgm_cuda={shlex.quote(cuda_pkg)}"]
    assoc("dcgm_version", {v: _same_on_every_os("dcgm", "package_version", v) for v in DCGM_VERSIONS})
    array("dcgm_exporter_versions", DCGM_EXPORTER_VERSIONS)
    lines.append(f"dcgm_exporter_pkg={shlex.quote(_same_on_every_os('dcgm-exporter', 'package'))}")
    assoc(
        "dcgm_exporter_version",
        {v: _same_on_every_os("dcgm-exporter", "package_version", v) for v in DCGM_EXPORTER_VERSIONS},
    )
    array("toolkit_versions", TOOLKIT_VERSIONS)
    toolkit, base, tools, lib1 = _same_on_every_os("container-toolkit", "packages")
    lines += [
        f"ctk_toolkit={shlex.quote(toolkit)}",
        f"ctk_base={shlex.quote(base)}",
        f"ctk_tools={shlex.quote(tools)}",
        f"ctk_lib={shlex.quote(lib1)}",
    ]
    assoc(
        "toolkit_version", {v: _same_on_every_os("container-toolkit", "package_version", v) for v in TOOLKIT_VERSIONS}
    )
    array("doca_versions", DOCA_VERSIONS)
    (doca,) = _same_on_every_os("doca-ofed", "packages")
    (doca_user,) = _same_on_every_os("doca-ofed", "userspace_packages")
    lines += [f"doca_pkg={shlex.quote(doca)}", f"doca_userspace_pkg={shlex.quote(doca_user)}"]
    assoc("doca_version", {v: _same_on_every_os("doca-ofed", "package_version", v) for v in DOCA_VERSIONS})
    # DOCA's per-distro path element, for each OS the doubles serve.
    assoc(
        "doca_distro",
        {os_: vm.value("doca-ofed", "distro", os_, ARCH, DOCA_VERSIONS[0]) for os_ in OSES},
    )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(_bash())
