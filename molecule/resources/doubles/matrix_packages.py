#!/usr/bin/env python3
"""The stand-in packages' names from the vendor matrix, and their version strings from cited listings.

build-repo.sh builds the test doubles' apt repositories; it reads every NVIDIA package name and
version string it gives a stand-in from here. The names come from module_utils/brief/vendor_matrix.py
(what NVIDIA ships for the OS the test hosts run: Debian 12 and 13, x86_64, whose packages are named
alike; and, for the Ubuntu test doubles' hosts, Ubuntu 22.04 and 24.04, whose driver and fabric
manager packages carry Ubuntu's names). As NVIDIA's, the repository is one tree per OS
(cuda/repos/<distro>/x86_64/, the <distro> element from the matrix), each holding what NVIDIA
publishes for that OS: a component the matrix marks as not published there (DCGM and its exporter
on debian13) is absent from that tree. The version strings do not come from a rule: each is copied
from a listing, a file name or a public pin of NVIDIA's (PUBLISHED, one source per row), so the
doubles' repository carries the vendor's irregularities (in the Ubuntu layout, a driver revision
that follows the release, not the branch, and a fabric manager's revision differing from the
driver's; in the Debian layout, Debian's plain -1; one release built for several CUDA minors; a
re-spun build; a build number in place of a revision; a release of the next driver branch whose
packages are renamed: the fabric manager without its branch from 580, Ubuntu's branch-named driver
packages under the new branch) and a role that spells a version or a name by rule instead of asking
the repository and the matrix installs nothing here.

    matrix_packages.py              print bash assignments for build-repo.sh to eval
    matrix_packages.py --rhel9      print the RHEL 9 stand-ins, one per line, for build-rpm-repo.sh
    matrix_packages.py --published  print the stand-ins' driver releases and the cited version strings
                                    as JSON, for the scenarios' checks (driver_releases: the branch
                                    the scenarios pin; next_branch_releases: the next branch's;
                                    published: "<component>/<release>[/<CUDA minor>][/<layout>]" ->
                                    version; trees: <distro> -> the package names its tree offers;
                                    names: "<driver|driver-deps|fabricmanager>/<release>/<layout>"
                                    -> names)
    import matrix_packages          packages() for the unit test that checks the built repository

The versions below are the test bed's choice (the lab's pins first, then a newer release that
must never be picked up).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import vendor_matrix as vm  # noqa: E402

# The OSes the doubles' hosts run; the first is the one asked, the others must agree with it.
OSES = ("debian12", "debian13")
# The OSes the Ubuntu test doubles' hosts report (their trees: ubuntu2204/, ubuntu2404/).
UBUNTU_OSES = ("ubuntu2204", "ubuntu2404")
ARCH = "x86_64"

DRIVER_VERSIONS = ("570.133.20", "570.148.08")
# A release of the next driver branch: from 580 NVIDIA's fabric manager and NSCQ packages drop the
# branch from their names (vendor matrix, fabricmanager rows), and Ubuntu's driver packages carry the
# new branch in theirs, so a host moving to it must install other names and let the old ones go.
NEXT_BRANCH_VERSIONS = ("580.65.06",)
ALL_DRIVER_VERSIONS = DRIVER_VERSIONS + NEXT_BRANCH_VERSIONS
CUDA_VERSIONS = ("12.8.0", "12.8.1")  # cuda-toolkit-12-8 releases (12.8.1 is the 12.8 pin)
CUDA_OTHER = "12.9.1"  # a second toolkit, for the alternatives test
NCCL_CUDA = "12.8"  # the CUDA minor of the lab's pin
# NCCL builds as (release, CUDA minor): the pinned release for the pin's CUDA, the same release for
# another CUDA minor (a role must pick by +cuda<minor>), and a newer release.
NCCL_BUILDS = (("2.26.2", NCCL_CUDA), ("2.26.2", "12.4"), ("2.26.5", "12.9"))
NCCL_VERSIONS = tuple(dict.fromkeys(release for release, _cuda in NCCL_BUILDS))
DCGM_VERSIONS = ("4.2.3", "4.4.0")
DCGM_CUDA = "12.8"
DCGM_EXPORTER_VERSIONS = ("4.1.3", "4.8.4.3955")  # 4.1.3 is paired with DCGM 4.2.3
TOOLKIT_VERSIONS = ("1.17.5", "1.17.8")
DOCA_VERSIONS = ("2.10.0", "2.9.1")  # 2.10.0 is the lab's pin

_CUDA_UBU2404 = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"
_CUDA_DEB12 = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
_NCCL_DOWNLOAD = "https://developer.nvidia.com/nccl/nccl-download"
_NCCL_LEGACY = "https://developer.nvidia.com/nccl/nccl-legacy-downloads"
# A public Debian live-image build that installs NVIDIA's driver from repos/debian12/x86_64/ and pins it.
_NEURALDRIVE_ARCHIVES = (
    "https://github.com/Rightbracket/NeuralDrive/blob/main/docs/dev-guide/src/build/archive-sources.md"
)
# The repository layouts the doubles build (Debian's for the debian12/13 trees, Ubuntu's for the
# ubuntu2204/2404 trees); rows whose version string differs between them carry the layout as their
# last key element.
LAYOUTS = ("debian", "ubuntu")


def layout(os_: str) -> str:
    """The repository layout a matrix OS key is served from."""
    return "ubuntu" if os_.startswith("ubuntu") else "debian"


class Published(NamedTuple):
    """A package version string as NVIDIA publishes it, and where it was read."""

    version: str
    source: str
    note: str = ""


# (component, upstream release[, CUDA minor]) -> the package version the stand-in carries.
PUBLISHED: dict[tuple[str, ...], Published] = {
    # The driver and the fabric manager, per repository layout (the last key element): NVIDIA's Debian
    # repositories (debian12, debian13) give every driver package the Debian revision -1; its Ubuntu
    # ones a revision that follows the release, not the branch. The Debian tree (cuda/) carries the
    # former, the Ubuntu trees the latter, so that a role spelling an Ubuntu revision by
    # rule installs nothing on the Ubuntu test doubles' hosts.
    ("driver", "570.133.20", "debian"): Published(
        "570.133.20-1",
        _NEURALDRIVE_ARCHIVES,
        "a bookworm image pins NVIDIA's debian12 repository's driver packages (nvidia-driver-cuda, "
        "nvidia-kernel-dkms) at 570.133.20-1",
    ),
    ("driver", "570.148.08", "debian"): Published(
        "570.148.08-1",
        _NEURALDRIVE_ARCHIVES,
        "the same page names 570.148.08 as the next 570 release of NVIDIA's debian12 repository; its -1 not "
        "read as such: the revision every driver package there carries (debian12 libnvidia-encode1_550.54.15-1, "
        "https://github.com/keylase/nvidia-patch/pull/773)",
    ),
    # NVIDIA's Ubuntu 24.04 repository lists 570.133.20-0ubuntu1 and then 570.148.08-1ubuntu1 (vendor
    # matrix, driver package rows).
    ("driver", "570.133.20", "ubuntu"): Published(
        "570.133.20-0ubuntu1", _CUDA_UBU2404, "pinned publicly as nvidia-driver-570-open=570.133.20-0ubuntu1"
    ),
    ("driver", "570.148.08", "ubuntu"): Published(
        "570.148.08-1ubuntu1", _CUDA_UBU2404, "pinned publicly as nvidia-open-570=570.148.08-1ubuntu1"
    ),
    # The next branch (580): Debian's driver keeps its names and its -1; its fabric manager is
    # nvidia-fabricmanager from 580 on, where 570's was nvidia-fabricmanager-570.
    ("driver", "580.65.06", "debian"): Published(
        "580.65.06-1",
        _CUDA_DEB12,
        "the -1 every driver package of NVIDIA's Debian repositories carries (vendor matrix, driver rows: "
        "nvidia-driver-cuda=580.126.20-1 on debian12); 580.65.06's own driver listing not read here",
    ),
    ("fabricmanager", "580.65.06", "debian"): Published(
        "580.65.06-1", _CUDA_DEB12, "nvidia-fabricmanager_580.65.06-1 (the listing the matrix row quotes)"
    ),
    # Ubuntu's 580.65.06 is -0ubuntu1 (580.126.09 and later 580s are -1ubuntu1); its fabric manager is
    # nvidia-fabricmanager 580.65.06-1, which apt names when asked for nvidia-fabricmanager-580
    # ("a virtual package provided by nvidia-fabricmanager 580.65.06-1").
    ("driver", "580.65.06", "ubuntu"): Published(
        "580.65.06-0ubuntu1",
        _CUDA_UBU2404,
        "public pins nvidia-utils-580=580.65.06-0ubuntu1; listing cuda-drivers-580_580.65.06-0ubuntu1",
    ),
    ("fabricmanager", "580.65.06", "ubuntu"): Published(
        "580.65.06-1",
        "https://github.com/NVIDIA/gpu-driver-container/pull/451",
        "apt: nvidia-fabricmanager-580 is a virtual package provided by nvidia-fabricmanager 580.65.06-1",
    ),
    # The fabric manager's revision is -1 in both layouts: on Ubuntu it differs from the driver's
    # (public install scripts pin nvidia-fabricmanager-570=570.133.20-1 and libnvidia-nscq-570=570.133.20-1
    # beside the driver's -0ubuntu1 packages from NVIDIA's Ubuntu repository).
    ("fabricmanager", "570.133.20", "debian"): Published(
        "570.133.20-1", _CUDA_DEB12, "nvidia-fabricmanager-570_570.133.20-1"
    ),
    ("fabricmanager", "570.148.08", "debian"): Published(
        "570.148.08-1", _CUDA_DEB12, "nvidia-fabricmanager-570_570.148.08-1"
    ),
    ("fabricmanager", "570.133.20", "ubuntu"): Published(
        "570.133.20-1", _CUDA_UBU2404, "nvidia-fabricmanager-570=570.133.20-1 beside driver 570.133.20-0ubuntu1"
    ),
    ("fabricmanager", "570.148.08", "ubuntu"): Published(
        "570.148.08-1", _CUDA_UBU2404, "nvidia-fabricmanager-570_570.148.08-1"
    ),
    ("cuda", "12.8.0"): Published("12.8.0-1", _CUDA_DEB12, "cuda-toolkit-12-8_12.8.0-1 (public install scripts)"),
    ("cuda", "12.8.1"): Published("12.8.1-1", _CUDA_DEB12, "cuda-toolkit-12-8=12.8.1-1 (public install scripts)"),
    ("cuda", "12.9.1"): Published("12.9.1-1", _CUDA_DEB12, "cuda-toolkit-12-9=12.9.1-1 (public install scripts)"),
    # GPUDirect Storage carries a version of its own, not the toolkit's: Amazon's GPU AMI release notes list
    # nvidia-gds-12-8 12.8.0-1 and later 12.8.2-1 beside toolkit 12.8.1.
    ("gds", "12.8.0"): Published(
        "12.8.0-1", "https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html"
    ),
    ("gds", "12.8.1"): Published(
        "12.8.2-1", "https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html"
    ),
    ("gds", "12.9.1"): Published("12.9.1-1", _CUDA_DEB12, "not read: the stand-in of the second toolkit's GDS"),
    # NCCL is built once per CUDA minor. NVIDIA re-spins such builds as -2 (NVSHMEM 2.9.0-2+cuda12.1,
    # https://developer.download.nvidia.com/compute/redist/nvshmem/2.9.0/builds/cuda12.1/txz/ubuntu22_04/x64/);
    # the stand-in of the lab's pin is such a re-spin, so a role spelling <release>-1+cuda<minor> fails.
    ("nccl", "2.26.2", "12.8"): Published(
        "2.26.2-2+cuda12.8", _NCCL_DOWNLOAD, "re-spin of libnccl2=2.26.2-1+cuda12.8 (the download page's pin)"
    ),
    ("nccl", "2.26.2", "12.4"): Published("2.26.2-1+cuda12.4", _NCCL_LEGACY, "nccl_2.26.2-1+cuda12.4_x86_64"),
    ("nccl", "2.26.5", "12.9"): Published("2.26.5-1+cuda12.9", _NCCL_DOWNLOAD, "libnccl2=2.26.5-1+cuda12.9"),
    # DCGM's packages carry epoch 1 (public pins datacenter-gpu-manager-4-core=1:4.4.0-1).
    ("dcgm", "4.2.3"): Published("1:4.2.3-1", _CUDA_DEB12, "the shape of the 4.4.0 pin; 4.2.3's own not read"),
    ("dcgm", "4.4.0"): Published("1:4.4.0-1", _CUDA_DEB12, "datacenter-gpu-manager-4-core=1:4.4.0-1"),
    # The exporter's later releases put a build number in the version (4.8.4.3955-1).
    ("dcgm-exporter", "4.1.3"): Published(
        "4.1.3-1",
        "https://developer.download.nvidia.com/compute/cuda/repos/rhel8/x86_64/datacenter-gpu-manager-exporter-4.1.3-1.x86_64.rpm",
    ),
    ("dcgm-exporter", "4.8.4.3955"): Published(
        "4.8.4.3955-1", "https://developer.download.nvidia.com/compute/cuda/repos/rhel8/x86_64/"
    ),
    ("container-toolkit", "1.17.5"): Published(
        "1.17.5-1", "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/", "public pins =1.17.5-1"
    ),
    ("container-toolkit", "1.17.8"): Published(
        "1.17.8-1",
        "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html",
        "NVIDIA_CONTAINER_TOOLKIT_VERSION=1.17.8-1",
    ),
    # DOCA's packages carry the release's build number, not a revision (doca-host bundles
    # doca-host_<release>-<build>-<ofed>-<distro>_amd64.deb under https://www.mellanox.com/downloads/DOCA/).
    ("doca-ofed", "2.10.0"): Published(
        "2.10.0-093000", "https://www.mellanox.com/downloads/DOCA/DOCA_v2.10.0/host/", "doca-host_2.10.0-093000-25.01"
    ),
    ("doca-ofed", "2.9.1"): Published(
        "2.9.1-018000", "https://www.mellanox.com/downloads/DOCA/DOCA_v2.9.1/host/", "doca-host_2.9.1-018000-24.10"
    ),
}


# The same releases as NVIDIA's RHEL 9 repository spells them (rhel9/x86_64/): the driver's packages carry
# epoch 3 and an .el9 release, the kernel-module packages are noarch (DKMS sources), the other components
# carry a plain -1 revision and DCGM epoch 1, NCCL its +cuda<minor> build; one source per row, as above.
_RHEL9_KMOD = "https://github.com/NVIDIA/yum-packaging-precompiled-kmod/issues/68"
_RHEL9_DKMS = "https://github.com/stackhpc/ansible-slurm-appliance/pull/703"
_RHEL9_NCCL = "https://github.com/opendatahub-io/notebooks/pull/4089"
_CUDA_RHEL8 = "https://developer.download.nvidia.com/compute/cuda/repos/rhel8/x86_64/"
_GDC_RHEL9 = "https://github.com/NVIDIA/gpu-driver-container/blob/main/rhel9/install.sh"
PUBLISHED_RHEL9: dict[tuple[str, ...], Published] = {
    ("driver", "570.133.20"): Published(
        "3:570.133.20-1.el9", _RHEL9_KMOD, "the shape dnf repoquery lists: nvidia-driver-3:595.45.04-1.el9.x86_64"
    ),
    ("driver", "570.148.08"): Published(
        "3:570.148.08-1.el9", _RHEL9_KMOD, "the shape dnf repoquery lists: nvidia-driver-3:595.58.03-1.el9.x86_64"
    ),
    ("fabricmanager", "570.133.20"): Published("570.133.20-1", _GDC_RHEL9, "nvidia-fabric-manager-${DRIVER_VERSION}-1"),
    ("fabricmanager", "570.148.08"): Published("570.148.08-1", _GDC_RHEL9, "nvidia-fabric-manager-${DRIVER_VERSION}-1"),
    ("cuda", "12.8.0"): Published("12.8.0-1", _CUDA_RHEL8, "the shape of cuda-toolkit-12-8-12.8.0-1.x86_64.rpm"),
    ("cuda", "12.8.1"): Published("12.8.1-1", _CUDA_RHEL8, "the shape of cuda-toolkit-12-8-12.8.1-1.x86_64.rpm"),
    ("cuda", "12.9.1"): Published("12.9.1-1", _CUDA_RHEL8, "the shape of cuda-toolkit-12-9-12.9.1-1.x86_64.rpm"),
    ("nccl", "2.26.2", "12.8"): Published(
        "2.26.2-2+cuda12.8", _RHEL9_NCCL, "re-spin of the shape libnccl-2.29.2-1+cuda13.0 (rhel9/x86_64 index)"
    ),
    ("nccl", "2.26.2", "12.4"): Published("2.26.2-1+cuda12.4", _RHEL9_NCCL, "libnccl-<release>-1+cuda<minor>"),
    ("nccl", "2.26.5", "12.9"): Published("2.26.5-1+cuda12.9", _RHEL9_NCCL, "libnccl-<release>-1+cuda<minor>"),
    ("dcgm", "4.2.3"): Published("1:4.2.3-1", _CUDA_RHEL8, "the Debian pin's epoch 1; the RHEL listing's own not read"),
    ("dcgm", "4.4.0"): Published("1:4.4.0-1", _CUDA_RHEL8, "the Debian pin's epoch 1; the RHEL listing's own not read"),
}


def published(*key: str) -> str:
    """The cited version string of a stand-in; an error when the table has none (never a rule)."""
    if key not in PUBLISHED:
        raise SystemExit(f"matrix_packages: no cited version for {key}: add a PUBLISHED row with its source")
    return PUBLISHED[key].version


class Package(NamedTuple):
    """One stand-in: the matrix component it belongs to, its upstream version, name and package version."""

    component: str
    version: str
    name: str
    package_version: str


def _same_on_every_os(component: str, key: str, version: str | None = None, oses=OSES, **context: str):
    """The matrix's answer for the doubles' OSes; an error when they differ (one repository serves all)."""
    answers = {os_: vm.value(component, key, os_, ARCH, version, **context) for os_ in oses}
    first = answers[oses[0]]
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
        "version": published("driver", version, "debian"),
        "driver": open_[0],
        "kmod_open": open_[1],
        "kmod_proprietary": proprietary[1],
        "libcuda": libcuda,
        "smi": smi,
        "persistenced": persistenced,
        "fabricmanager": fabricmanager,
        "fabricmanager_version": published("fabricmanager", version, "debian"),
    }


def ubuntu_driver(version: str) -> dict[str, object]:
    """Names of one driver release's stand-ins in NVIDIA's Ubuntu layout: branch-named driver and DKMS
    packages per flavour, the libraries and nvidia-smi they pull in, nvidia-persistenced (a package of
    its own), the fabric manager and NSCQ; versions from the same cited rows (the driver's revision
    is Ubuntu's, the fabric manager's -1 as NVIDIA's Ubuntu install script pins it)."""
    open_ = _same_on_every_os("driver", "packages.open", version, oses=UBUNTU_OSES)
    proprietary = _same_on_every_os("driver", "packages.proprietary", version, oses=UBUNTU_OSES)
    if len(open_) != 2 or len(proprietary) != 2:
        raise SystemExit(f"matrix_packages: ubuntu driver {version}: expected [driver, dkms], got {open_}")
    libcompute, utils = _same_on_every_os("driver", "dependencies", version, oses=UBUNTU_OSES)
    (persistenced,) = _same_on_every_os("driver", "persistenced_packages", version, oses=UBUNTU_OSES)
    fabricmanager, nscq = _same_on_every_os("fabricmanager", "packages", version, oses=UBUNTU_OSES)
    return {
        "version": published("driver", version, "ubuntu"),
        "driver_open": open_[0],
        "dkms_open": open_[1],
        "driver_proprietary": proprietary[0],
        "dkms_proprietary": proprietary[1],
        "libcompute": libcompute,
        "utils": utils,
        "persistenced": persistenced,
        "fabricmanager": fabricmanager,
        "nscq": nscq,
        "fabricmanager_version": published("fabricmanager", version, "ubuntu"),
    }


_UBUNTU_FM_KEYS = ("fabricmanager", "nscq")


def ubuntu_packages() -> list[Package]:
    """The stand-ins of the Ubuntu layout (the ubuntu2204/2404 trees): the driver and fabric manager in Ubuntu's
    names, and the CUDA repository's other packages (toolkit, GDS, NCCL, DCGM, exporter), whose names
    NVIDIA's Ubuntu repository shares with its Debian one."""
    out: list[Package] = []
    for v in ALL_DRIVER_VERSIONS:
        d = ubuntu_driver(v)
        for key in ("driver_open", "dkms_open", "driver_proprietary", "dkms_proprietary", "libcompute", "utils"):
            out.append(Package("driver", v, str(d[key]), str(d["version"])))
        out.append(Package("driver", v, str(d["persistenced"]), str(d["version"])))
        out += [Package("fabricmanager", v, str(d[k]), str(d["fabricmanager_version"])) for k in _UBUNTU_FM_KEYS]
    shared = {"cuda", "nccl", "dcgm", "dcgm-exporter"}
    out += [p for p in packages() if p.component in shared]
    return out


# The CUDA repository's trees the doubles build, one per OS as NVIDIA's (cuda/repos/<distro>/x86_64/).
TREES = OSES + UBUNTU_OSES
# The components of the CUDA repository's trees (DOCA and the container toolkit have repositories
# of their own).
CUDA_REPO_COMPONENTS = ("driver", "fabricmanager", "cuda", "nccl", "dcgm", "dcgm-exporter")


def published_on(component: str, os_: str) -> bool:
    """False where the matrix marks the component as not published for the OS at all (a row with no
    version range: DCGM and its exporter on debian13). A row limited to a version range (a driver branch
    missing from an OS's repository) is not played here: the scenarios' hosts run the lab's pins."""
    row = vm.find(component, "published", os_, ARCH)
    return row is None or row.value is not False or row.minimum is not None or row.below is not None


def tree_packages(os_: str) -> list[Package]:
    """The stand-ins the CUDA repository's tree for one OS offers: its layout's packages, less the
    components NVIDIA does not publish for that OS."""
    pool = ubuntu_packages() if layout(os_) == "ubuntu" else packages()
    return [p for p in pool if p.component in CUDA_REPO_COMPONENTS and published_on(p.component, os_)]


def deb_file(p: Package) -> str:
    """The .deb file name build-repo.sh gives a stand-in (dpkg-deb's, without the epoch)."""
    return f"{p.name}_{p.package_version.split(':', 1)[-1]}_amd64.deb"


def cuda(version: str) -> dict[str, object]:
    minor = ".".join(version.split(".")[:2])
    (toolkit,) = _same_on_every_os("cuda", "packages", cuda=minor)
    (gds,) = _same_on_every_os("cuda", "gds_packages", cuda=minor)
    return {
        "version": published("cuda", version),
        "toolkit": toolkit,
        "gds": gds,
        "gds_version": published("gds", version),
    }


def packages() -> list[Package]:
    """Every NVIDIA stand-in the doubles' repositories carry (DOCA's once per release)."""
    out: list[Package] = []
    for v in ALL_DRIVER_VERSIONS:
        d = driver(v)
        for key in ("driver", "kmod_open", "kmod_proprietary", "libcuda", "smi", "persistenced"):
            out.append(Package("driver", v, str(d[key]), str(d["version"])))
        out.append(Package("fabricmanager", v, str(d["fabricmanager"]), str(d["fabricmanager_version"])))
    for v in (*CUDA_VERSIONS, CUDA_OTHER):
        c = cuda(v)
        out += [
            Package("cuda", v, str(c["toolkit"]), str(c["version"])),
            Package("cuda", v, str(c["gds"]), str(c["gds_version"])),
        ]
    nccl_names = _same_on_every_os("nccl", "packages")
    for v, cuda_minor in NCCL_BUILDS:
        pv = published("nccl", v, cuda_minor)
        out += [Package("nccl", v, name, pv) for name in nccl_names]
    for v in DCGM_VERSIONS:
        pv = published("dcgm", v)
        out += [Package("dcgm", v, name, pv) for name in _same_on_every_os("dcgm", "packages", v, cuda=DCGM_CUDA)]
    for v in DCGM_EXPORTER_VERSIONS:
        pv = published("dcgm-exporter", v)
        out.append(Package("dcgm-exporter", v, _same_on_every_os("dcgm-exporter", "package", v), pv))
    for v in TOOLKIT_VERSIONS:
        pv = published("container-toolkit", v)
        out += [Package("container-toolkit", v, n, pv) for n in _same_on_every_os("container-toolkit", "packages", v)]
    for v in DOCA_VERSIONS:
        pv = published("doca-ofed", v)
        names = _same_on_every_os("doca-ofed", "packages", v) + _same_on_every_os("doca-ofed", "userspace_packages", v)
        out += [Package("doca-ofed", v, n, pv) for n in names]
    return out


class RpmPackage(NamedTuple):
    """One RHEL 9 stand-in: its payload kind (what build-rpm-repo.sh puts in it), name, version, arch."""

    kind: str
    component: str
    version: str
    name: str
    package_version: str
    arch: str


def _rhel9(component: str, key: str, version: str | None = None, **context: str):
    return vm.value(component, key, "rhel9", ARCH, version, **context)


def _published_rhel9(*key: str) -> str:
    if key not in PUBLISHED_RHEL9:
        raise SystemExit(f"matrix_packages: no cited RHEL 9 version for {key}: add a PUBLISHED_RHEL9 row")
    return PUBLISHED_RHEL9[key].version


def rhel9_packages() -> list[RpmPackage]:
    """Every stand-in of the RHEL 9 repository (build-rpm-repo.sh): names from the matrix's rhel9 rows."""
    out: list[RpmPackage] = []
    for v in DRIVER_VERSIONS:
        pv = _published_rhel9("driver", v)
        user, kopen = _rhel9("driver", "packages.open", v)
        user2, kprop = _rhel9("driver", "packages.proprietary", v)
        if user != user2:
            raise SystemExit(f"matrix_packages: rhel9 driver {v}: user space differs between flavours")
        (persistenced,) = _rhel9("driver", "persistenced_packages", v)
        out += [
            RpmPackage("driver", "driver", v, user, pv, ARCH),
            # The DKMS module packages carry sources only: noarch, as NVIDIA's.
            RpmPackage("kmod_open", "driver", v, kopen, pv, "noarch"),
            RpmPackage("kmod_proprietary", "driver", v, kprop, pv, "noarch"),
            RpmPackage("persistenced", "driver", v, persistenced, pv, ARCH),
        ]
        fm, nscq = _rhel9("fabricmanager", "packages", v)
        fmv = _published_rhel9("fabricmanager", v)
        out += [
            RpmPackage("fabricmanager", "fabricmanager", v, fm, fmv, ARCH),
            RpmPackage("nscq", "fabricmanager", v, nscq, fmv, ARCH),
        ]
    for v in (*CUDA_VERSIONS, CUDA_OTHER):
        minor = ".".join(v.split(".")[:2])
        (toolkit,) = _rhel9("cuda", "packages", cuda=minor)
        out.append(RpmPackage("cuda", "cuda", v, toolkit, _published_rhel9("cuda", v), ARCH))
    lib, dev = _rhel9("nccl", "packages")
    for v, cuda_minor in NCCL_BUILDS:
        pv = _published_rhel9("nccl", v, cuda_minor)
        out += [RpmPackage("nccl_lib", "nccl", v, lib, pv, ARCH), RpmPackage("nccl_dev", "nccl", v, dev, pv, ARCH)]
    for v in DCGM_VERSIONS:
        core, cuda_pkg = _rhel9("dcgm", "packages", v, cuda=DCGM_CUDA)
        pv = _published_rhel9("dcgm", v)
        out += [
            RpmPackage("dcgm_core", "dcgm", v, core, pv, ARCH),
            RpmPackage("dcgm_cuda", "dcgm", v, cuda_pkg, pv, ARCH),
        ]
    return out


def _rhel9_table() -> str:
    """One line per RHEL 9 stand-in for build-rpm-repo.sh: kind, release, name, [epoch:]version-release, arch,
    and the driver packages' dnf module streams (open and proprietary) of their branch."""
    lines = []
    for p in rhel9_packages():
        streams = "-"
        if p.component in ("driver", "fabricmanager"):
            streams = ",".join(
                _rhel9("driver", f"dnf_module.{flavor}", p.version).split(":", 1)[1]
                for flavor in ("open", "proprietary")
            )
        lines.append("\t".join((p.kind, p.version, p.name, p.package_version, p.arch, streams)))
    return "\n".join(lines) + "\n"


def _bash() -> str:
    """Assignments build-repo.sh evals: lists of versions, and per version the names and package versions."""
    lines = [
        "# From molecule/resources/doubles/matrix_packages.py (names: vendor matrix, "
        + "/".join(OSES)
        + f" {ARCH}; versions: its cited PUBLISHED table): do not edit",
    ]

    def assoc(name: str, mapping: dict[str, object]) -> None:
        body = " ".join(f"[{shlex.quote(k)}]={shlex.quote(str(v))}" for k, v in mapping.items())
        lines.append(f"declare -A {name}=({body})")

    def array(name: str, values) -> None:
        lines.append(f"{name}=({' '.join(shlex.quote(v) for v in values)})")

    array("driver_versions", ALL_DRIVER_VERSIONS)
    for key in driver(DRIVER_VERSIONS[0]):
        assoc(f"drv_{key}", {v: driver(v)[key] for v in ALL_DRIVER_VERSIONS})
    array("cuda_versions", CUDA_VERSIONS)
    lines.append(f"cuda_other={shlex.quote(CUDA_OTHER)}")
    for key in ("version", "toolkit", "gds", "gds_version"):
        assoc(f"cuda_{key}", {v: cuda(v)[key] for v in (*CUDA_VERSIONS, CUDA_OTHER)})
    # One entry per build: "<release>+cuda<minor>" -> its package version.
    builds = {f"{v}+cuda{c}": published("nccl", v, c) for v, c in NCCL_BUILDS}
    array("nccl_builds", builds)
    lib, dev = _same_on_every_os("nccl", "packages")
    lines += [f"nccl_lib={shlex.quote(lib)}", f"nccl_dev={shlex.quote(dev)}"]
    assoc("nccl_version", builds)
    array("dcgm_versions", DCGM_VERSIONS)
    core, cuda_pkg = _same_on_every_os("dcgm", "packages", DCGM_VERSIONS[0], cuda=DCGM_CUDA)
    lines += [f"dcgm_core={shlex.quote(core)}", f"dcgm_cuda={shlex.quote(cuda_pkg)}"]
    assoc("dcgm_version", {v: published("dcgm", v) for v in DCGM_VERSIONS})
    array("dcgm_exporter_versions", DCGM_EXPORTER_VERSIONS)
    lines.append(f"dcgm_exporter_pkg={shlex.quote(_same_on_every_os('dcgm-exporter', 'package'))}")
    assoc(
        "dcgm_exporter_version",
        {v: published("dcgm-exporter", v) for v in DCGM_EXPORTER_VERSIONS},
    )
    array("toolkit_versions", TOOLKIT_VERSIONS)
    toolkit, base, tools, lib1 = _same_on_every_os("container-toolkit", "packages")
    lines += [
        f"ctk_toolkit={shlex.quote(toolkit)}",
        f"ctk_base={shlex.quote(base)}",
        f"ctk_tools={shlex.quote(tools)}",
        f"ctk_lib={shlex.quote(lib1)}",
    ]
    assoc("toolkit_version", {v: published("container-toolkit", v) for v in TOOLKIT_VERSIONS})
    array("doca_versions", DOCA_VERSIONS)
    (doca,) = _same_on_every_os("doca-ofed", "packages")
    (doca_user,) = _same_on_every_os("doca-ofed", "userspace_packages")
    lines += [f"doca_pkg={shlex.quote(doca)}", f"doca_userspace_pkg={shlex.quote(doca_user)}"]
    assoc("doca_version", {v: published("doca-ofed", v) for v in DOCA_VERSIONS})
    # The Ubuntu repository's driver and fabric manager stand-ins (ubu_<key>[<release>]).
    for key in ubuntu_driver(DRIVER_VERSIONS[0]):
        assoc(f"ubu_{key}", {v: ubuntu_driver(v)[key] for v in ALL_DRIVER_VERSIONS})
    # DOCA's per-distro path element, for each OS the doubles serve (the Ubuntu doubles' hosts too).
    assoc(
        "doca_distro",
        {os_: vm.value("doca-ofed", "distro", os_, ARCH, DOCA_VERSIONS[0]) for os_ in OSES + UBUNTU_OSES},
    )
    # DOCA's packages are named alike on Ubuntu: the same stand-ins serve its repositories.
    for key in ("packages", "userspace_packages"):
        _same_on_every_os("doca-ofed", key, DOCA_VERSIONS[0], oses=OSES + UBUNTU_OSES)
    # The CUDA repository's trees: per OS, its layout (the pool its .debs are built into) and the
    # files of the stand-ins it offers.
    assoc("cuda_tree_layout", {os_: layout(os_) for os_ in TREES})
    assoc("cuda_tree_files", {os_: " ".join(deb_file(p) for p in tree_packages(os_)) for os_ in TREES})
    return "\n".join(lines) + "\n"


def _published_json() -> str:
    """The driver releases built (the pinned one first) and every cited version string, for the
    scenarios' checks, which compare what a host installed with what the repository carries."""
    table = {"/".join(key): row.version for key, row in PUBLISHED.items()}
    trees = {os_: sorted({p.name for p in tree_packages(os_)}) for os_ in TREES}
    # Per release and layout, the package names (the matrix's): the driver's that the driver role
    # installs and holds (driver, kernel modules, nvidia-persistenced), the ones they pull in
    # (driver-deps: libcuda and nvidia-smi's packages), and the fabric manager's.
    names: dict[str, list[str]] = {}
    for v in ALL_DRIVER_VERSIONS:
        d, u = driver(v), ubuntu_driver(v)
        names[f"driver/{v}/debian"] = [str(d[k]) for k in ("driver", "kmod_open", "persistenced")]
        names[f"driver-deps/{v}/debian"] = [str(d[k]) for k in ("libcuda", "smi")]
        names[f"fabricmanager/{v}/debian"] = [str(d["fabricmanager"])]
        names[f"driver/{v}/ubuntu"] = [str(u[k]) for k in ("driver_open", "dkms_open", "persistenced")]
        names[f"driver-deps/{v}/ubuntu"] = [str(u[k]) for k in ("libcompute", "utils")]
        names[f"fabricmanager/{v}/ubuntu"] = [str(u[k]) for k in _UBUNTU_FM_KEYS]
    return json.dumps(
        {
            "driver_releases": list(DRIVER_VERSIONS),
            "next_branch_releases": list(NEXT_BRANCH_VERSIONS),
            "layouts": list(LAYOUTS),
            "published": table,
            "trees": trees,
            "names": names,
        }
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--rhel9"]:
        sys.stdout.write(_rhel9_table())
    elif sys.argv[1:] == ["--published"]:
        sys.stdout.write(_published_json() + "\n")
    else:
        sys.stdout.write(_bash())
