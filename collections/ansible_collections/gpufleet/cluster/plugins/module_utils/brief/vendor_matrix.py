# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""What NVIDIA really ships, per OS, architecture, component and version range.

One row is one fact: the repository URL of the CUDA repository on Ubuntu 24.04,
the package names of the fabric manager from driver branch 580, the path
element DOCA uses for arm64, ... Each row names its source (the vendor page or
the repository file that shows it) and the date it was checked; a fact that
could not be confirmed from a source says so (``confirmed=False`` and why).

The roles' defaults and per-OS vars are checked against these rows by unit
tests (tests/unit/test_vendor_matrix.py), and docs/vendor-matrix.md is written
from them (scripts/gen_vendor_matrix_doc). Pure data and small lookups, no I/O.

Values are templates with ``{placeholders}`` filled by :func:`value`:
``{version}`` the component's exact version, ``{branch}`` the driver branch,
``{cuda}`` / ``{cuda_major}`` / ``{cuda_dash}`` the CUDA release ("12.8" / 12 /
"12-8"), ``{doca}`` the DOCA release, ``{os_minor}`` the OS minor release
(RHEL 9.6 → 6), ``{repo_arch}`` / ``{doca_arch}`` the component's name for the
architecture.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.compat import parse_version

# The dates sources were read: CHECKED for the matrix's first reading (every row's default),
# CHECKED_AGAIN and CHECKED_PAIRS for rows added or re-read later (their Source says which).
CHECKED = "2026-12-02"
CHECKED_AGAIN = "2026-12-03"
CHECKED_PAIRS = "2026-12-04"
CHECKED_PUBLISHED = "2026-12-06"
CHECK_DATES: tuple[str, ...] = (CHECKED, CHECKED_AGAIN, CHECKED_PAIRS, CHECKED_PUBLISHED)

OSES: tuple[str, ...] = ("debian12", "debian13", "ubuntu2204", "ubuntu2404", "rhel9")
ARCHES: tuple[str, ...] = ("x86_64", "aarch64")
OS_FAMILY: dict[str, str] = {
    "debian12": "Debian",
    "debian13": "Debian",
    "ubuntu2204": "Debian",
    "ubuntu2404": "Debian",
    "rhel9": "RedHat",
}
# What Ansible's facts say for each OS key (distribution, major, full version) and architecture.
OS_FACTS: dict[str, dict[str, str]] = {
    "debian12": {"distribution": "Debian", "distribution_major_version": "12", "distribution_version": "12.11"},
    "debian13": {"distribution": "Debian", "distribution_major_version": "13", "distribution_version": "13.1"},
    "ubuntu2204": {"distribution": "Ubuntu", "distribution_major_version": "22", "distribution_version": "22.04"},
    "ubuntu2404": {"distribution": "Ubuntu", "distribution_major_version": "24", "distribution_version": "24.04"},
    "rhel9": {"distribution": "Rocky", "distribution_major_version": "9", "distribution_version": "9.6"},
}

COMPONENTS: tuple[str, ...] = (
    "cuda-repo",
    "driver",
    "fabricmanager",
    "imex",
    "cuda",
    "nccl",
    "dcgm",
    "container-toolkit",
    "doca-ofed",
    "dcgm-exporter",
    "gpu-operator",
    "pmix",
)

# The versions gpufleet knows of each pinned component: the lab's and the examples' pins, the
# lowest driver branch an accelerator of the catalogue needs (module_utils/brief/catalogue.py), and
# the branches where NVIDIA's packaging changed (580, 590). Tests walk every one of them.
KNOWN_VERSIONS: dict[str, tuple[str, ...]] = {
    "driver": (
        "535.261.03",
        "550.163.01",
        "560.35.05",
        "570.133.20",
        "570.148.08",
        "575.57.08",
        "580.95.05",
        "580.126.09",
        "580.159.04",
        "580.173.10",
        "590.48.01",
        "595.91.07",
    ),
    "cuda": ("12.4", "12.6", "12.8", "12.9", "13.0"),
    "nccl": ("2.26.2", "2.27.7", "2.29.2", "2.30.4"),
    "dcgm": ("4.2.3", "4.4.0"),
    "container-toolkit": ("1.17.5", "1.17.8", "1.18.0"),
    "doca-ofed": ("2.9.1", "2.10.0", "3.1.0", "3.2.0"),
    "gpu-operator": ("24.9.2", "25.3.0", "25.3.4"),
    "dcgm-exporter": ("4.1.3", "4.5.0"),
}


@dataclass(frozen=True)
class Source:
    """Where a fact comes from, when it was checked, and whether a source confirmed it."""

    url: str
    confirmed: bool = True
    note: str = ""
    checked: str = CHECKED


@dataclass(frozen=True)
class Row:
    component: str
    key: str
    value: Any
    source: Source
    oses: tuple[str, ...] = OSES
    arches: tuple[str, ...] = ARCHES
    # Version range of the component, [minimum, below): None leaves that side open.
    minimum: str | None = None
    below: str | None = None
    doc: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def matches(self, os: str, arch: str, version: str | None) -> bool:
        if os not in self.oses or arch not in self.arches:
            return False
        if version is None or (self.minimum is None and self.below is None):
            return True
        v = parse_version(version)
        if v is None:
            return False
        if self.minimum is not None and v < parse_version(self.minimum):
            return False
        return not (self.below is not None and v >= parse_version(self.below))

    def range_text(self) -> str:
        if self.minimum and self.below:
            return f">= {self.minimum}, < {self.below}"
        if self.minimum:
            return f">= {self.minimum}"
        if self.below:
            return f"< {self.below}"
        return "all"


# ---- sources ----------------------------------------------------------------------------------
_DRV_GUIDE = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/"
_DRV_RECENT = _DRV_GUIDE + "recent-updates.html"
_DRV_KMOD = _DRV_GUIDE + "kernel-modules.html"
_DRV_LOCK = _DRV_GUIDE + "version-locking.html"
_GDC = "https://github.com/NVIDIA/gpu-driver-container/blob/06a208ca9747c82b1ba99b76ecdcf2469b0a0207/"
_GDC_580 = "https://github.com/NVIDIA/gpu-driver-container/commit/78fa4ac0e7c3c01c40ad5061bd4969f1454145d2"
_GDC_590 = "https://github.com/NVIDIA/gpu-driver-container/commit/feb891d6dc64caf8c6789b401469d3f89d1d3be2"
_CUDA_KEY = "https://developer.nvidia.com/blog/updating-the-cuda-linux-gpg-repository-key/"
_NCCL_GUIDE = "https://docs.nvidia.com/deeplearning/nccl/install-guide/index.html"
_CTK = "https://github.com/NVIDIA/nvidia-container-toolkit/blob/v1.18.0/"
_CTK_GUIDE = "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"
_DOCA_GUIDE = "https://docs.nvidia.com/doca/sdk/doca-host+installation+and+upgrade/index.html"
_DOCA_RHEL9 = "https://github.com/stackhpc/stackhpc-release-train/commit/b348e74592a58cbdea38e900cc04ca8c6babddda"
_GPUOP = "https://github.com/NVIDIA/gpu-operator/commit/68d6fc034add0e48ce6094116e0eba5b92246e6b"
_IMEX = "https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/deployment.html"
_MNNVL = "https://docs.nvidia.com/multi-node-nvlink-systems/mnnvl-user-guide/mnnvl-user-guide.pdf"
_DCGM_EXP = "https://github.com/NVIDIA/dcgm-exporter/releases/tag/4.4.0-4.5.0"
_DCGM_EXP_PKG = (
    "https://github.com/NVIDIA/dcgm-exporter/blob/7ad58324b4447b64dc3dedf946b889b648b7f476/hack/package/test.sh"
)
_DCGM_EXP_UNIT = (
    "https://github.com/NVIDIA/dcgm-exporter/blob/09d74b9bd423843e8238e5dc6ce359b220a5c373/"
    "packaging/config-files/systemd/nvidia-dcgm-exporter.service"
)
_DCGM_EXP_RPM = (
    "https://developer.download.nvidia.com/compute/cuda/repos/rhel8/x86_64/"
    "datacenter-gpu-manager-exporter-4.1.3-1.x86_64.rpm"
)
_CUDA_1302 = "https://docs.nvidia.com/cuda/archive/13.0.2/cuda-toolkit-release-notes/index.html"
_GDS_GUIDE = "https://docs.nvidia.com/gpudirect-storage/troubleshooting-guide/installing-gpudirect-storage.html"
_DOCA_PROFILES = "https://docs.nvidia.com/doca/sdk/nvidia+doca+profiles"
_ROLE = "gpufleet roles (no vendor source found here)"
_CRM = "https://github.com/NVIDIA/cuda-repo-management/issues/"
_DEB13_REPO = "https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64/"
_DEB_PINS = (
    "public install scripts pin them from NVIDIA's Debian repositories (cuda-keyring): "
    "nvidia-driver-cuda=595.91.07-1, nvidia-kernel-open-dkms=595.91.07-1, libcuda1=595.91.07-1 (debian13); "
    "nvidia-driver-cuda=580.126.20-1, nvidia-kernel-dkms=580.126.20-1 (debian12)"
)
_UBU2404_SBSA_LISTING = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/sbsa/"
_DOCA_SUPPORT_321 = "https://docs.nvidia.com/doca/archive/3-2-1/general-support/index.html"
_DOCA_DEB_290 = "https://linux.mellanox.com/public/repo/doca/2.9.0/debian12.5/x86_64/"
_NCCL_2281 = "https://github.com/NVIDIA/nccl/issues/2281"
_DRV_620 = _DRV_GUIDE + "620/pdf/Driver_Installation_Guide.pdf"


_DEB = ("debian12", "debian13")
_UBU = ("ubuntu2204", "ubuntu2404")
_APT = _DEB + _UBU
_RHEL = ("rhel9",)
_X86 = ("x86_64",)
_ARM = ("aarch64",)


ROWS: tuple[Row, ...] = (
    # ---- NVIDIA's CUDA repository (driver, CUDA, NCCL, DCGM, fabric manager, IMEX) ----
    Row(
        "cuda-repo",
        "distro",
        "debian12",
        Source("https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/Packages"),
        oses=("debian12",),
        doc="<distro> path element",
    ),
    Row(
        "cuda-repo",
        "distro",
        "debian13",
        Source("https://developer.download.nvidia.com/compute/cuda/repos/debian13/x86_64/cuda-keyring_1.1-1_all.deb"),
        oses=("debian13",),
    ),
    Row("cuda-repo", "distro", "ubuntu2204", Source(_GDC + "ubuntu22.04/install.sh"), oses=("ubuntu2204",)),
    Row("cuda-repo", "distro", "ubuntu2404", Source(_GDC + "ubuntu24.04/install.sh"), oses=("ubuntu2404",)),
    Row("cuda-repo", "distro", "rhel9", Source(_CUDA_KEY), oses=_RHEL),
    Row("cuda-repo", "arch", "x86_64", Source(_GDC + "ubuntu24.04/install.sh"), arches=_X86, doc="<arch> path element"),
    Row(
        "cuda-repo",
        "arch",
        "sbsa",
        Source(_GDC + "ubuntu24.04/install.sh", note="OS_ARCH=${TARGETARCH/arm64/sbsa}"),
        arches=_ARM,
    ),
    Row(
        "cuda-repo",
        "url",
        "https://developer.download.nvidia.com/compute/cuda/repos/{distro}/{repo_arch}/",
        Source(_GDC + "ubuntu24.04/install.sh"),
    ),
    Row(
        "cuda-repo",
        "key_file",
        "3bf863cc.pub",
        Source(_CUDA_KEY),
        oses=("debian12", *_UBU),
        doc="signing key, in the repository",
    ),
    Row(
        "cuda-repo",
        "key_file",
        "8793F200.pub",
        Source(
            _CRM + "39",
            note="NVIDIA staff: only the new Debian 13 repository is signed with the new key (fingerprint "
            "02182E60104FCDC26EAE1B8597A5D4CB8793F200, ending 8793F200; also issues 30 and 34), since trixie's apt "
            "(sqv) rejects 3bf863cc's SHA1 binding from 2026-02-01; the file name debian13/x86_64/8793F200.pub as "
            "several public install scripts fetch it (NVIDIA's own listing not read here)",
            checked=CHECKED_PUBLISHED,
        ),
        oses=("debian13",),
    ),
    Row("cuda-repo", "key_file", "D42D0685.pub", Source(_CUDA_KEY), oses=_RHEL),
    Row(
        "cuda-repo",
        "published",
        False,
        Source(
            _CRM + "39",
            False,
            "a user there (2026-02-02) uses the Ubuntu 24.04 repository 'since there's no aarch64 for Debian 13' and "
            "NVIDIA staff did not contradict it; not re-read since, and not checked by preflight (the brief names "
            "no CPU architecture)",
            checked=CHECKED_PUBLISHED,
        ),
        oses=("debian13",),
        arches=_ARM,
        doc="whether NVIDIA publishes the CUDA repository for the OS and architecture",
    ),
    # ---- driver ----
    Row(
        "driver",
        "packages.open",
        ["nvidia-driver-cuda", "nvidia-kernel-open-dkms"],
        Source(_DEB13_REPO, note="the compute-only driver; " + _DEB_PINS, checked=CHECKED_PUBLISHED),
        oses=_DEB,
    ),
    Row(
        "driver",
        "packages.proprietary",
        ["nvidia-driver-cuda", "nvidia-kernel-dkms"],
        Source(_DEB13_REPO, note="the compute-only driver; " + _DEB_PINS, checked=CHECKED_PUBLISHED),
        oses=_DEB,
    ),
    Row(
        "driver",
        "packages.open",
        ["nvidia-driver-{branch}-open", "nvidia-dkms-{branch}-open"],
        Source(_DRV_RECENT, note="table 'Ubuntu 590 package renames': nvidia-dkms-580-open before 590"),
        oses=_UBU,
        below="590",
    ),
    Row(
        "driver",
        "packages.proprietary",
        ["nvidia-driver-{branch}", "nvidia-dkms-{branch}"],
        Source(_DRV_RECENT, note="table 'Ubuntu 590 package renames': nvidia-dkms-580 before 590"),
        oses=_UBU,
        below="590",
    ),
    Row(
        "driver",
        "packages.open",
        ["nvidia-driver-open", "nvidia-dkms-open"],
        Source(
            _DRV_RECENT,
            note="from 590 the branch is removed from the names (nvidia-dkms-580-open -> nvidia-dkms-open); "
            "the meta package 'nvidia-open' pulls the same",
        ),
        oses=_UBU,
        minimum="590",
    ),
    Row(
        "driver",
        "packages.proprietary",
        ["nvidia-driver", "nvidia-dkms"],
        Source(_DRV_RECENT, note="from 590: nvidia-dkms-580 -> nvidia-dkms"),
        oses=_UBU,
        minimum="590",
    ),
    Row(
        "driver",
        "packages.open",
        ["nvidia-driver-cuda", "kmod-nvidia-open-dkms"],
        Source(_DRV_LOCK, note="dnf versionlock example lists kmod-nvidia-open-dkms and nvidia-driver-cuda"),
        oses=_RHEL,
    ),
    Row(
        "driver",
        "packages.proprietary",
        ["nvidia-driver-cuda", "kmod-nvidia-latest-dkms"],
        Source(_DRV_LOCK, note="dnf versionlock example lists kmod-nvidia-latest-dkms"),
        oses=_RHEL,
    ),
    Row(
        "driver",
        "branch_lock_package",
        "nvidia-driver-pinning-{branch}",
        Source(
            _DRV_RECENT,
            note="'Version locking packages for Ubuntu / Debian'; gpufleet pins the exact version with its own "
            "apt preferences file instead, which also keeps the branch",
        ),
        oses=_APT,
        minimum="580",
    ),
    Row(
        "driver",
        "dnf_module.open",
        "nvidia-driver:{branch}-open",
        Source(_DRV_KMOD, note="Table 5: dnf module enable nvidia-driver:580-open (RHEL 8/9)"),
        oses=_RHEL,
    ),
    Row(
        "driver",
        "dnf_module.proprietary",
        "nvidia-driver:{branch}-dkms",
        Source(_GDC_580, note="rhel9/install.sh: dnf module enable -y nvidia-driver:${DRIVER_BRANCH}-dkms"),
        oses=_RHEL,
    ),
    Row(
        "driver",
        "published",
        False,
        Source(
            _CRM + "38",
            False,
            "NVIDIA's debian13 repository carried the 590 branch and later only: the 580 branch was missing from "
            "February 2026 (issues 38 and 40, NVIDIA staff moved the request there); issue 38 was still open at its "
            "last comment read (2026-08-04), so whether 580 has since been added is not known here",
            checked=CHECKED_PUBLISHED,
        ),
        oses=("debian13",),
        below="590",
        doc="whether NVIDIA's repository for the OS carries the driver branch",
    ),
    Row(
        "driver",
        "published.proprietary",
        False,
        Source(
            _DRV_620,
            note="Driver Installation Guide, Release 620, Recent Updates: 'Proprietary Kernel Modules Removed'",
            checked=CHECKED_PUBLISHED,
        ),
        minimum="620",
        doc="whether the proprietary kernel modules are published for the driver",
    ),
    Row(
        "driver",
        "persistenced_packages",
        ["nvidia-persistenced"],
        Source(
            _ROLE,
            False,
            "public install scripts pin nvidia-persistenced=<version>-1 beside the driver on Debian (575.57.08-1), "
            "but from which repository was not shown; NVIDIA's Debian and RHEL listings for it were searched "
            "for (nvidia-persistenced_<version>) and not found here",
            checked=CHECKED_PUBLISHED,
        ),
        oses=_DEB + _RHEL,
    ),
    Row(
        "driver",
        "persistenced_packages",
        ["nvidia-persistenced"],
        Source(
            "https://docs.nvidia.com/deploy/driver-persistence/index.html#persistence-daemon",
            note="NVIDIA's Ubuntu repository ships nvidia-persistenced as a package of its own at the driver's version "
            "(public install scripts pin nvidia-persistenced=570.148.08-1ubuntu1 beside nvidia-open-570); left "
            "unpinned, a newer one pulls a newer libnvidia-cfg1 onto a pinned driver",
            checked=CHECKED_PUBLISHED,
        ),
        oses=_UBU,
    ),
    Row(
        "driver",
        "dependencies",
        ["libcuda1", "nvidia-smi"],
        Source(
            _DEB13_REPO,
            note="libcuda1 and nvidia-smi at the driver's <version>-1 from NVIDIA's Debian repositories as public "
            "install scripts pin them (libcuda1=595.91.07-1, nvidia-smi=<version>-1)",
            checked=CHECKED_PUBLISHED,
        ),
        oses=_DEB,
        doc="packages the driver packages pull in (the test doubles build them)",
    ),
    Row(
        "driver",
        "dependencies",
        ["libnvidia-compute-{branch}", "nvidia-utils-{branch}"],
        Source(
            "https://packages.ubuntu.com/noble/nvidia-utils-570",
            note="Ubuntu's driver packaging, which NVIDIA's Ubuntu repository follows below 590: libcuda and NVML in "
            "libnvidia-compute-<branch>, nvidia-smi in nvidia-utils-<branch> (public install scripts list "
            "nvidia-utils-550 and libnvidia-compute-550 beside nvidia-dkms-550)",
            checked=CHECKED_PUBLISHED,
        ),
        oses=_UBU,
        below="590",
    ),
    Row(
        "driver",
        "unit.persistenced",
        "nvidia-persistenced",
        Source(
            "https://docs.nvidia.com/deploy/driver-persistence/index.html#persistence-daemon",
            False,
            "public install scripts run 'systemctl enable --now nvidia-persistenced' after installing NVIDIA's "
            "Debian 13 packages; the unit file itself was not read here",
            checked=CHECKED_PUBLISHED,
        ),
    ),
    # ---- fabric manager and NSCQ (NVSwitch systems) ----
    Row(
        "fabricmanager",
        "packages",
        ["nvidia-fabricmanager-{branch}"],
        Source(
            "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/",
            note="the listing as a public install script quotes it: nvidia-fabricmanager-570_570.172.08-1, "
            "nvidia-fabricmanager-575_575.57.08-1",
            checked=CHECKED_PUBLISHED,
        ),
        oses=_DEB,
        below="580",
    ),
    Row(
        "fabricmanager",
        "packages",
        ["nvidia-fabricmanager"],
        Source(
            "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/",
            note="the same listing: from 580 nvidia-fabricmanager_580.65.06-1 (no branch in the name, as on Ubuntu "
            "and RHEL); NVIDIA's driver container hit the same rename (gpu-driver-container pull 451)",
            checked=CHECKED_PUBLISHED,
        ),
        oses=_DEB,
        minimum="580",
    ),
    Row(
        "fabricmanager",
        "packages",
        ["nvidia-fabricmanager-{branch}", "libnvidia-nscq-{branch}"],
        Source(_GDC_580, note="ubuntu24.04/install.sh: nvidia-fabricmanager-${DRIVER_BRANCH}=${DRIVER_VERSION}-1"),
        oses=_UBU,
        below="580",
    ),
    Row(
        "fabricmanager",
        "packages",
        ["nvidia-fabricmanager", "libnvidia-nscq"],
        Source(_GDC_580, note="ubuntu24.04/install.sh: from 580 nvidia-fabricmanager=${DRIVER_VERSION}-1"),
        oses=_UBU,
        minimum="580",
    ),
    Row(
        "fabricmanager",
        "packages",
        ["nvidia-fabric-manager", "libnvidia-nscq-{branch}"],
        Source(_GDC_580, note="rhel9/install.sh: nvidia-fabric-manager-${DRIVER_VERSION}-1 below 580"),
        oses=_RHEL,
        below="580",
    ),
    Row(
        "fabricmanager",
        "packages",
        ["nvidia-fabricmanager", "libnvidia-nscq"],
        Source(_GDC_580, note="rhel9/install.sh: nvidia-fabricmanager-${DRIVER_VERSION}-1 from 580"),
        oses=_RHEL,
        minimum="580",
    ),
    Row("fabricmanager", "unit", "nvidia-fabricmanager", Source(_GDC + "ubuntu24.04/nvidia-driver")),
    Row(
        "fabricmanager",
        "config",
        "/usr/share/nvidia/nvswitch/fabricmanager.cfg",
        Source(_GDC + "ubuntu24.04/nvidia-driver"),
    ),
    # ---- IMEX (multi-node NVLink: GB200 NVL72) ----
    Row(
        "imex",
        "packages",
        [],
        Source(
            _ROLE,
            False,
            "no source for NVIDIA's Debian IMEX packages found here (searched the code corpus for "
            "repos/debian12/x86_64/nvidia-imex and nvidia-imex=<version> pins; none): none installed",
            checked=CHECKED_PUBLISHED,
        ),
        oses=_DEB,
    ),
    Row("imex", "packages", [], Source(_GDC_580, note="IMEX packages exist from 550"), oses=_UBU + _RHEL, below="550"),
    Row(
        "imex",
        "packages",
        ["nvidia-imex-{branch}"],
        Source(_GDC_580, note="nvidia-imex-${DRIVER_BRANCH} for 550 <= branch < 580"),
        oses=_UBU + _RHEL,
        minimum="550",
        below="580",
    ),
    Row(
        "imex",
        "packages",
        ["nvidia-imex"],
        Source(_GDC_580, note="nvidia-imex from 580"),
        oses=_UBU + _RHEL,
        minimum="580",
    ),
    Row(
        "imex",
        "required_by",
        ["nvl72"],
        Source(_MNNVL, note="the IMEX service must run on every compute tray of an NVLink domain"),
    ),
    Row("imex", "unit", "nvidia-imex", Source(_IMEX)),
    Row(
        "imex",
        "nodes_config",
        "/etc/nvidia-imex/nodes_config.cfg",
        Source(_IMEX, note="IMEX_NODE_CONFIG_FILE: one IP address per line, every node of the NVLink domain"),
    ),
    # ---- CUDA toolkit ----
    Row(
        "cuda",
        "packages",
        ["cuda-toolkit-{cuda_dash}"],
        Source("https://docs.nvidia.com/cuda/cuda-installation-guide-linux/"),
    ),
    Row(
        "cuda", "home", "/usr/local/cuda-{cuda}", Source("https://docs.nvidia.com/cuda/cuda-installation-guide-linux/")
    ),
    Row(
        "cuda",
        "package_versions",
        {"12.4": "12.4.1"},
        Source(
            "https://docs.nvidia.com/cuda/archive/",
            False,
            "the last update of 12.4 (12.4.1) from the release-notes archive; its package (cuda-toolkit-12-4 at "
            "12.4.1 and the repository's revision) was searched for and not found here",
            checked=CHECKED_PUBLISHED,
        ),
        doc="cuda-toolkit-<major>-<minor> release per CUDA minor (its last update; the package revision is "
        "the repository's, resolved on the host)",
    ),
    Row(
        "cuda",
        "package_versions",
        {"12.6": "12.6.3", "12.8": "12.8.1", "12.9": "12.9.1"},
        Source(
            "https://docs.nvidia.com/cuda/archive/",
            note="the last update of each minor; public install scripts pin cuda-toolkit-12-6=12.6.3-1, "
            "cuda-toolkit-12-8=12.8.1-1 and cuda-toolkit-12-9=12.9.1-1 from NVIDIA's Ubuntu repositories",
            checked=CHECKED_PUBLISHED,
        ),
    ),
    Row(
        "cuda",
        "package_versions",
        {"13.0": "13.0.2"},
        Source(
            _CUDA_1302,
            note="13.0 Update 2; cuda-toolkit-13-0=13.0.2-1 is pinned as such by public install scripts",
        ),
    ),
    Row(
        "cuda",
        "gds_packages",
        ["nvidia-gds-{cuda_dash}"],
        Source(
            _GDS_GUIDE,
            note="GPUDirect Storage from NVIDIA's CUDA repository, one package per CUDA minor: public install "
            "scripts apt-get install nvidia-gds-12-8; Amazon's GPU AMI release notes list nvidia-gds-12-8-12.8.0-1 "
            "and later nvidia-gds-12-8-12.8.2-1 (its version is GDS's own, not the toolkit's)",
            checked=CHECKED_PUBLISHED,
        ),
        doc="GPUDirect Storage (brings nvidia-fs and the cuFile tools)",
    ),
    # ---- NCCL ----
    Row("nccl", "packages", ["libnccl2", "libnccl-dev"], Source(_NCCL_GUIDE), oses=_APT),
    Row(
        "nccl",
        "packages",
        ["libnccl", "libnccl-devel"],
        Source(_NCCL_GUIDE, note="RHEL: yum install libnccl-<v>-1+cuda<c> libnccl-devel-<v>-1+cuda<c>"),
        oses=_RHEL,
    ),
    Row(
        "nccl",
        "built_for_cuda",
        ["12.8"],
        Source(
            _NCCL_GUIDE,
            False,
            "only the pair public install scripts pin from NVIDIA's Ubuntu repository (libnccl2=2.26.2-1+cuda12.8) "
            "was read; the repository's full listing of 2.26.2 was not",
            checked=CHECKED_PUBLISHED,
        ),
        minimum="2.26.2",
        below="2.26.3",
        doc="the CUDA minors NVIDIA built an NCCL release for (its +cuda<major.minor> packages)",
    ),
    Row(
        "nccl",
        "built_for_cuda",
        ["13.0"],
        Source(
            _NCCL_GUIDE,
            False,
            "only the pair public install scripts pin from NVIDIA's Ubuntu repository (libnccl2=2.27.7-1+cuda13.0) "
            "was read; the repository's full listing of 2.27.7 was not",
            checked=CHECKED_PUBLISHED,
        ),
        minimum="2.27.7",
        below="2.27.8",
    ),
    Row(
        "nccl",
        "built_for_cuda",
        ["13.1"],
        Source(
            _NCCL_2281,
            False,
            "libnccl2=2.29.2-1+cuda13.1 as public install scripts pin it; a public check of NVIDIA's RHEL 9 "
            "listings (x86_64 and sbsa) found no 2.29.2+cuda13.0; the full listing was not read",
            checked=CHECKED_PUBLISHED,
        ),
        minimum="2.29.2",
        below="2.29.3",
    ),
    Row(
        "nccl",
        "built_for_cuda",
        ["12.9", "13.2"],
        Source(
            _NCCL_2281,
            note="NVIDIA's RHEL 9 x86_64 listing as the issue quotes it: libnccl 2.30.3 and 2.30.4 for cuda12.9 and "
            "cuda13.2 only (none for 13.0)",
            checked=CHECKED_PUBLISHED,
        ),
        minimum="2.30.3",
        below="2.30.5",
    ),
    Row(
        "nccl",
        "built_for_cuda",
        ["12.9", "13.3"],
        Source(
            _NCCL_2281,
            note="the same listing: libnccl 2.30.7 for cuda12.9 and cuda13.3 only",
            checked=CHECKED_PUBLISHED,
        ),
        minimum="2.30.7",
        below="2.30.8",
    ),
    # ---- DCGM ----
    Row(
        "dcgm",
        "packages",
        ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda{cuda_major}"],
        Source("https://docs.nvidia.com/datacenter/dcgm/latest/installation.html"),
    ),
    Row(
        "dcgm",
        "default_version",
        {"12": "4.2.3", "13": "4.4.0"},
        Source(_DCGM_EXP, note="DCGM 4.4 is the first with CUDA 13 (datacenter-gpu-manager-4-cuda13)"),
        doc="DCGM release per CUDA major",
    ),
    Row(
        "dcgm",
        "published",
        False,
        Source(
            _CRM + "41",
            note="NVIDIA staff: DCGM is published in the amzn2023, azl3, debian12, rhel8, rhel9, rhel10, sles15, "
            "ubuntu2204 and ubuntu2404 CUDA repositories, not debian13",
            checked=CHECKED_PUBLISHED,
        ),
        oses=("debian13",),
        doc="whether NVIDIA's repository for the OS carries the component",
    ),
    Row("dcgm", "unit", "nvidia-dcgm", Source("https://docs.nvidia.com/datacenter/dcgm/latest/installation.html")),
    Row("dcgm", "hostengine_port", 5555, Source("https://docs.nvidia.com/datacenter/dcgm/latest/installation.html")),
    # ---- NVIDIA container toolkit ----
    Row(
        "container-toolkit",
        "repo_url",
        "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
        Source(_CTK_GUIDE),
        oses=_APT,
    ),
    Row(
        "container-toolkit",
        "repo_url",
        "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch",
        Source(_CTK_GUIDE, note="the .repo file at stable/rpm/libnvidia-container.repo"),
        oses=_RHEL,
    ),
    Row("container-toolkit", "key_url", "https://nvidia.github.io/libnvidia-container/gpgkey", Source(_CTK_GUIDE)),
    Row(
        "container-toolkit",
        "packages",
        [
            "nvidia-container-toolkit",
            "nvidia-container-toolkit-base",
            "libnvidia-container-tools",
            "libnvidia-container1",
        ],
        Source(_CTK_GUIDE),
    ),
    Row(
        "container-toolkit",
        "containerd_dry_run",
        "config",
        Source(_CTK + "cmd/nvidia-ctk/runtime/configure/configure.go", note="one document: the whole config.toml"),
        below="1.18.0",
        doc="what `nvidia-ctk runtime configure --runtime=containerd --dry-run` prints",
    ),
    Row(
        "container-toolkit",
        "containerd_dry_run",
        "drop-in+top-level",
        Source(
            _CTK + "pkg/config/engine/containerd/config_drop_in.go",
            note="two documents on stdout: the drop-in (/etc/containerd/config.d/99-nvidia.toml), then the "
            "top-level config with imports = ['/etc/containerd/config.d/*.toml']",
        ),
        minimum="1.18.0",
    ),
    Row(
        "container-toolkit",
        "containerd_drop_in",
        "/etc/containerd/config.d/99-nvidia.toml",
        Source(_CTK + "cmd/nvidia-ctk/runtime/configure/configure.go"),
        minimum="1.18.0",
    ),
    # ---- DOCA-OFED ----
    Row(
        "doca-ofed",
        "repo_url",
        "https://linux.mellanox.com/public/repo/doca/{doca}/{doca_distro}/{doca_arch}/",
        Source(_DOCA_GUIDE),
    ),
    Row(
        "doca-ofed",
        "key_url",
        "https://linux.mellanox.com/public/repo/doca/GPG-KEY-Mellanox.pub",
        Source(_DOCA_GUIDE, note="each repository directory carries the same GPG-KEY-Mellanox.pub"),
    ),
    Row("doca-ofed", "arch", "x86_64", Source(_DOCA_GUIDE), arches=_X86),
    Row(
        "doca-ofed",
        "arch",
        "arm64-sbsa",
        Source(
            "https://linux.mellanox.com/public/repo/doca/3.2.1/rhel10/arm64-sbsa/",
            note="host repositories for Arm servers are arm64-sbsa (not aarch64; dpu-arm64 is BlueField's)",
        ),
        arches=_ARM,
    ),
    Row(
        "doca-ofed",
        "distro",
        "debian{doca_debian_release}",
        Source(_DOCA_DEB_290, note="before 3.2 DOCA's Debian repositories are per point release (debian12.5)"),
        oses=_DEB,
        below="3.2",
    ),
    Row(
        "doca-ofed",
        "distro",
        "debian{os_major}",
        Source(
            _DOCA_SUPPORT_321,
            note="from DOCA 3.2 the host drivers are built by DKMS and DOCA-Host is published per major OS release "
            "only, no longer per minor release",
            checked=CHECKED_PUBLISHED,
        ),
        oses=_DEB,
        minimum="3.2",
    ),
    Row(
        "doca-ofed",
        "debian_release",
        "12.5",
        Source(
            _DOCA_DEB_290,
            False,
            "read for DOCA 2.9.0 only (a public install script taking the URL from NVIDIA's DOCA downloads page); "
            "the point release of the other releases before 3.2 was not read here: set rdma_doca_debian_release "
            "when NVIDIA's listing says otherwise",
            checked=CHECKED_PUBLISHED,
        ),
        oses=("debian12",),
        below="3.2",
        doc="the Debian point release DOCA publishes a repository for (before 3.2)",
    ),
    Row(
        "doca-ofed",
        "debian_release",
        "{os_major}",
        Source(
            _ROLE,
            False,
            "no DOCA repository for Debian 13 before 3.2 was found here (searched the code and issue corpora for "
            "doca/<release>/debian13); the major release is used",
            checked=CHECKED_PUBLISHED,
        ),
        oses=("debian13",),
        below="3.2",
    ),
    Row(
        "doca-ofed",
        "distro",
        "ubuntu{os_version}",
        Source("https://linux.mellanox.com/public/repo/doca/3.2.1/ubuntu24.04/x86_64/"),
        oses=_UBU,
    ),
    Row(
        "doca-ofed",
        "distro",
        "rhel{os_major}.{os_minor}",
        Source(_DOCA_RHEL9, note="e.g. doca/2.9.3/rhel9.6/x86_64/ before 3.2"),
        oses=_RHEL,
        below="3.2",
    ),
    Row(
        "doca-ofed",
        "distro",
        "rhel{os_major}",
        Source(_DOCA_RHEL9, note="doca/3.2.0/rhel9/x86_64/: one path for every RHEL 9 minor from 3.2"),
        oses=_RHEL,
        minimum="3.2",
    ),
    Row("doca-ofed", "packages", ["doca-ofed"], Source(_DOCA_GUIDE)),
    Row(
        "doca-ofed",
        "userspace_packages",
        ["doca-ofed-userspace"],
        Source(
            _DOCA_PROFILES,
            note="user space only (drivers from the image); not among the profiles that page lists, but public "
            "install scripts apt-get install doca-ofed-userspace from linux.mellanox.com/public/repo/doca/<release>/"
            "ubuntu24.04/ (3.1.0, 2.10.0)",
            checked=CHECKED_PUBLISHED,
        ),
    ),
    # ---- DCGM exporter ----
    Row(
        "dcgm-exporter",
        "package",
        "datacenter-gpu-manager-exporter",
        Source(
            _DCGM_EXP_PKG,
            note="PACKAGE_NAME datacenter-gpu-manager-exporter, built as .deb (tested on Ubuntu 22.04/24.04) and "
            ".rpm (tested on UBI 8/9), installed from NVIDIA's CUDA repository",
            checked=CHECKED_AGAIN,
        ),
    ),
    Row(
        "dcgm-exporter",
        "default_version",
        {"4.2.3": "4.1.3", "4.4.0": "4.5.0"},
        Source(
            _DCGM_EXP,
            note="DCGM-Exporter 4.4.0-4.5.0 is built for DCGM 4.4 and CUDA 13; 4.2.3-4.1.3 is the pair NVIDIA's GPU "
            "Operator moved to for DCGM 4.2.3 (https://github.com/NVIDIA/gpu-operator/pull/1475); the release tag "
            "is <dcgm>-<exporter>. The 4.5.0 package's version string (4.5.0-1 by the rule below) was not read "
            "from NVIDIA's repository",
            checked=CHECKED_PAIRS,
        ),
        doc="exporter release NVIDIA pairs with each DCGM release",
    ),
    Row(
        "dcgm-exporter",
        "repository",
        "cuda",
        Source(
            _DCGM_EXP_RPM,
            note="in NVIDIA's CUDA repository beside DCGM (here rhel8; rhel9 not listed here, the same package "
            "name is installed by dnf from it in public RHEL 9 image builds)",
            checked=CHECKED_AGAIN,
        ),
        oses=_RHEL,
        doc="the repository that carries the package",
    ),
    Row(
        "dcgm-exporter",
        "repository",
        "cuda",
        Source(
            "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"
            "datacenter-gpu-manager-exporter_4.8.2-1_amd64.deb",
            note="the file name and its sha256 (6913787e...) as a public download script records them (the file "
            "was not fetched here)",
            checked=CHECKED_AGAIN,
        ),
        oses=_UBU,
    ),
    Row(
        "dcgm-exporter",
        "repository",
        "cuda",
        Source(
            _DCGM_EXP_PKG,
            False,
            "as on Ubuntu (NVIDIA builds one .deb); NVIDIA's Debian repository listing was not found here "
            "(searched the issue corpus for the exporter in debian12/debian13): on debian13 the repository "
            "carries no DCGM at all (see the published row)",
            checked=CHECKED_PUBLISHED,
        ),
        oses=_DEB,
    ),
    Row(
        "dcgm-exporter",
        "published",
        False,
        Source(
            _CRM + "41",
            False,
            "the exporter ships in NVIDIA's CUDA repository beside DCGM, which is not published for debian13; the "
            "exporter's own debian13 listing was not read here",
            checked=CHECKED_PUBLISHED,
        ),
        oses=("debian13",),
    ),
    Row(
        "dcgm-exporter",
        "unit",
        "nvidia-dcgm-exporter",
        Source(
            _DCGM_EXP_UNIT,
            note="staged at /lib/systemd/system/nvidia-dcgm-exporter.service in both packages",
            checked=CHECKED_AGAIN,
        ),
    ),
    Row(
        "dcgm-exporter",
        "binary",
        "/usr/bin/dcgm-exporter",
        Source(
            _DCGM_EXP_UNIT,
            note="ExecStart=/usr/bin/dcgm-exporter -f /etc/dcgm-exporter/default-counters.csv",
            checked=CHECKED_AGAIN,
        ),
    ),
    Row(
        "dcgm-exporter",
        "image",
        "nvcr.io/nvidia/k8s/dcgm-exporter:{dcgm}-{version}-ubuntu22.04",
        Source("https://github.com/NVIDIA/dcgm-exporter/releases", note="e.g. 4.2.3-4.1.3-ubuntu22.04"),
    ),
    Row("dcgm-exporter", "port", 9400, Source("https://github.com/NVIDIA/dcgm-exporter/releases")),
    # ---- GPU Operator chart ----
    Row("gpu-operator", "chart_repo", "https://helm.ngc.nvidia.com/nvidia", Source(_GPUOP)),
    Row("gpu-operator", "chart", "gpu-operator", Source(_GPUOP)),
    Row(
        "gpu-operator",
        "values.operator.defaultRuntime",
        "containerd",
        Source(_GPUOP, note="removed from the chart in v25.3.0"),
        below="25.3.0",
    ),
    Row(
        "gpu-operator",
        "values.operator.defaultRuntime",
        None,
        Source(_GPUOP, note="'Remove defaultRuntime field from ClusterPolicy template' (before v25.3.0)"),
        minimum="25.3.0",
    ),
    # ---- PMIx for Slurm's mpi/pmix (distribution packages) ----
    Row(
        "pmix",
        "runtime_package",
        "libpmix2",
        Source("https://packages.debian.org/bookworm/libpmix2"),
        oses=("debian12",),
    ),
    Row(
        "pmix",
        "runtime_package",
        "libpmix2",
        Source(
            "https://packages.debian.org/trixie/libpmix2t64",
            False,
            "trixie ships libpmix2t64 (64-bit time_t rename); apt resolves libpmix2 to it: not changed "
            "on Debian (reported)",
        ),
        oses=("debian13",),
    ),
    Row(
        "pmix",
        "runtime_package",
        "libpmix2",
        Source("https://packages.ubuntu.com/jammy/libpmix2"),
        oses=("ubuntu2204",),
    ),
    Row(
        "pmix",
        "runtime_package",
        "libpmix2t64",
        Source("https://packages.ubuntu.com/noble/libpmix2t64", note="64-bit time_t transition"),
        oses=("ubuntu2404",),
    ),
    Row(
        "pmix",
        "runtime_package",
        "pmix",
        Source(
            _ROLE,
            False,
            "the Slurm roles run on Debian and Ubuntu only, so no RHEL package was looked for; the name is the "
            "roles' placeholder",
            checked=CHECKED_PUBLISHED,
        ),
        oses=_RHEL,
    ),
)


def rows(component: str | None = None) -> list[Row]:
    return [r for r in ROWS if component is None or r.component == component]


def find(component: str, key: str, os: str, arch: str = "x86_64", version: str | None = None) -> Row | None:
    """The row of ``component``/``key`` for this OS, architecture and version; None when there is none."""
    for row in ROWS:
        if row.component == component and row.key == key and row.matches(os, arch, version):
            return row
    return None


def os_key(distribution: str, major: str | int) -> str | None:
    """Ansible's distribution facts → an OS key (``Ubuntu``, 24 → ``ubuntu2404``); None when unsupported."""
    dist = str(distribution).lower()
    if dist in ("redhat", "rocky", "almalinux", "centos", "rhel") and str(major) == "9":
        return "rhel9"
    key = {"debian": f"debian{major}", "ubuntu": f"ubuntu{major}04"}.get(dist)
    return key if key in OSES else None


# The brief's ``cluster.os`` values → the matrix's OS keys.
BRIEF_OS: dict[str, str] = {
    "debian-12": "debian12",
    "debian-13": "debian13",
    "ubuntu-22.04": "ubuntu2204",
    "ubuntu-24.04": "ubuntu2404",
    "rocky-9": "rhel9",
}


def _placeholders(os: str, arch: str, version: str | None, context: dict[str, Any]) -> dict[str, Any]:
    facts = OS_FACTS[os]
    major_minor = facts["distribution_version"].split(".")
    values: dict[str, Any] = {
        "version": version or "",
        "branch": (version or "").split(".")[0],
        "os_major": facts["distribution_major_version"],
        "os_minor": major_minor[1] if len(major_minor) > 1 else "0",
        "os_version": facts["distribution_version"],
    }
    repo = find("cuda-repo", "distro", os, arch)
    values["distro"] = repo.value if repo else ""
    arch_row = find("cuda-repo", "arch", os, arch)
    values["repo_arch"] = arch_row.value if arch_row else arch
    doca_arch = find("doca-ofed", "arch", os, arch)
    values["doca_arch"] = doca_arch.value if doca_arch else arch
    values.update(context)
    if "cuda" in values:
        values.setdefault("cuda_major", str(values["cuda"]).split(".")[0])
        values.setdefault("cuda_dash", str(values["cuda"]).replace(".", "-"))
    if "doca_debian_release" not in values:
        # The Debian point release of DOCA's repository, for the DOCA release asked (the context's, or
        # the version itself when the question is about DOCA).
        doca = values.get("doca") or version
        release = find("doca-ofed", "debian_release", os, arch, str(doca)) if doca else None
        values["doca_debian_release"] = _fill(release.value, values) if release else values["os_major"]
    if "doca" in values and "doca_distro" not in values:
        distro = find("doca-ofed", "distro", os, arch, str(values["doca"]))
        values["doca_distro"] = _fill(distro.value, values) if distro else ""
    return values


def _fill(template: Any, values: dict[str, Any]) -> Any:
    if isinstance(template, str):
        return template.format(**values)
    if isinstance(template, list):
        return [_fill(t, values) for t in template]
    if isinstance(template, dict):
        return {k: _fill(v, values) for k, v in template.items()}
    return template


def value(component: str, key: str, os: str, arch: str = "x86_64", version: str | None = None, **context: Any) -> Any:
    """The fact with its placeholders filled, e.g.
    ``value("fabricmanager", "packages", "ubuntu2404", version="570.133.20")``
    → ``["nvidia-fabricmanager-570", "libnvidia-nscq-570"]``. KeyError when no row matches."""
    row = find(component, key, os, arch, version)
    if row is None:
        raise KeyError(f"vendor matrix: no {component} {key} for {os}/{arch} version {version}")
    return _fill(row.value, _placeholders(os, arch, version, context))


def cuda_package_versions() -> dict[str, str]:
    """Every CUDA minor the matrix knows → the cuda-toolkit-<major>-<minor> release (its last update)."""
    out: dict[str, str] = {}
    for row in rows("cuda"):
        if row.key == "package_versions":
            out.update(row.value)
    return out


def gpu_operator_default_runtime(chart_version: object) -> str | None:
    """The chart's ``operator.defaultRuntime`` for this GPU Operator chart version: "containerd" before
    v25.3.0, None from v25.3.0 (the field was removed) or when the version is not pinned."""
    if parse_version(chart_version) is None:
        return None
    return value("gpu-operator", "values.operator.defaultRuntime", OSES[0], version=str(chart_version).lstrip("v"))


def unconfirmed() -> list[Row]:
    """Rows no source confirmed: the list of what is still to check against NVIDIA."""
    return [r for r in ROWS if not r.source.confirmed]


__all__ = [
    "ARCHES",
    "BRIEF_OS",
    "CHECKED",
    "CHECKED_AGAIN",
    "CHECK_DATES",
    "COMPONENTS",
    "KNOWN_VERSIONS",
    "OSES",
    "OS_FACTS",
    "OS_FAMILY",
    "ROWS",
    "Row",
    "Source",
    "cuda_package_versions",
    "find",
    "gpu_operator_default_runtime",
    "os_key",
    "rows",
    "unconfirmed",
    "value",
]
