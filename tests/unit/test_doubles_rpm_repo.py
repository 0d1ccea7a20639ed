"""The test doubles' RHEL 9 repository carries only what NVIDIA ships for RHEL 9, as NVIDIA spells it.

molecule/resources/doubles/build-rpm-repo.sh builds stand-in RPMs for the Rocky Linux 9 test double
(scripts/testbed's rocky9-double image) in the layout of NVIDIA's cuda/repos/rhel9/x86_64/:
createrepo_c metadata and the driver's dnf module streams. matrix_packages.py --rhel9 gives it every
name from the vendor matrix's rhel9 rows and every version from its cited PUBLISHED_RHEL9 table. These
tests build the repository, read each RPM's header with rpm and the repository's module metadata, and
check: each name is one the matrix lists for rhel9, each [epoch:]version-release one a cited row gives,
the RPMs require nothing but each other (and /bin/sh, which the test double's rpm database records),
each module stream holds its branch's packages of its flavour only, and the roles' pins, rendered from
their variables for a Rocky 9 host, resolve to exactly one version each as dnf lists them.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import vendor_matrix as vm
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import pkg_resolve
from role_vars import ROOT, role_vars

DOUBLES = ROOT / "molecule" / "resources" / "doubles"
REPO_PATH = "cuda/repos/rhel9/x86_64"
# What the Rocky 9 test double's rpm database provides besides the repository's own packages.
HOST_PROVIDES = {"/bin/sh"}
ROCKY9 = {"distribution": "Rocky", "distribution_major_version": "9", "os_family": "RedHat"}
ROCKY9 |= {"distribution_version": "9.5", "architecture": "x86_64"}
LAB = yaml.safe_load((ROOT / "inventories/lab/brief.yml").read_text())


def _load_generator():
    spec = importlib.util.spec_from_file_location("matrix_packages", DOUBLES / "matrix_packages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mp = _load_generator()


def evr(epoch: str, version: str, release: str) -> str:
    """dnf's spelling: the epoch only when it is not 0 (3:570.133.20-1.el9, 12.8.1-1)."""
    return f"{epoch}:{version}-{release}" if epoch not in ("", "0", "(none)") else f"{version}-{release}"


@pytest.fixture(scope="module")
def built_repo(tmp_path_factory) -> Path:
    missing = [t for t in ("rpmbuild", "createrepo_c", "modifyrepo_c", "cc") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"cannot build the doubles' RHEL 9 repository here: {', '.join(missing)} missing")
    missing += [t for t in ("rpmsign", "rpmkeys", "gpg") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"cannot build the doubles' RHEL 9 repository here: {', '.join(missing)} missing")
    base = tmp_path_factory.mktemp("rpm-doubles")
    out = base / "repo"
    env = dict(os.environ, GPUFLEET_DOUBLES_GNUPG=str(base / "gnupg"))
    proc = subprocess.run(
        [str(DOUBLES / "build-rpm-repo.sh"), str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return out / REPO_PATH


@pytest.fixture(scope="module")
def headers(built_repo: Path) -> dict[str, dict[str, object]]:
    """Each RPM file -> name, EVR (dnf's spelling), arch, requires, conflicts, as rpm reads its header."""
    out: dict[str, dict[str, object]] = {}
    for rpm in sorted(built_repo.glob("*.rpm")):

        def query(fmt: str, rpm: Path = rpm) -> str:
            return subprocess.run(
                ["rpm", "-qp", "--nosignature", "--qf", fmt, str(rpm)], capture_output=True, text=True, check=True
            ).stdout

        name, epoch, version, release, arch = query("%{NAME}\t%{EPOCHNUM}\t%{VERSION}\t%{RELEASE}\t%{ARCH}").split("\t")
        requires = [r for r in query("[%{REQUIRENAME}\n]").splitlines() if r]
        conflicts = [c for c in query("[%{CONFLICTNAME}\n]").splitlines() if c]
        out[rpm.name] = {
            "name": name,
            "evr": evr(epoch, version, release),
            "arch": arch,
            "requires": requires,
            "conflicts": conflicts,
        }
    return out


NAME_KEYS = ("packages", "packages.open", "packages.proprietary", "persistenced_packages")


def rhel9_names(component: str, version: str) -> set[str]:
    """Every package name the matrix's rhel9 rows give a component at a release."""
    context = {"cuda": {"nccl": mp.NCCL_CUDA, "dcgm": mp.DCGM_CUDA}.get(component, version.rsplit(".", 1)[0])}
    names: set[str] = set()
    for row in vm.rows(component):
        if row.key in NAME_KEYS and row.matches("rhel9", "x86_64", version):
            value = vm.value(component, row.key, "rhel9", "x86_64", version, **context)
            names.update([value] if isinstance(value, str) else value)
    return names


def test_every_stand_in_is_a_rhel9_name_the_matrix_lists_at_a_cited_version():
    entries = mp.rhel9_packages()
    assert {e.component for e in entries} == {"driver", "fabricmanager", "cuda", "nccl", "dcgm"}
    for e in entries:
        assert e.name in rhel9_names(e.component, e.version), e
        key = (e.component, e.version, mp.NCCL_BUILDS[0][1]) if e.component == "nccl" else (e.component, e.version)
        cited = {p.version for k, p in mp.PUBLISHED_RHEL9.items() if k[:2] == key[:2]}
        assert e.package_version in cited, e
    for key, row in mp.PUBLISHED_RHEL9.items():
        assert row.source.startswith("https://"), key


def test_the_rhel9_names_are_not_the_debian_ones():
    """The RHEL fabric manager below 580 is nvidia-fabric-manager, the Debian one nvidia-fabricmanager-<branch>:
    a generator that took the Debian rows would build a repository the Red Hat branch finds nothing in."""
    names = {e.name for e in mp.rhel9_packages()}
    assert {"nvidia-fabric-manager", "kmod-nvidia-open-dkms", "libnccl", "libnccl-devel"} <= names
    assert names.isdisjoint({"nvidia-fabricmanager-570", "nvidia-kernel-open-dkms", "libnccl2", "libnccl-dev"})


def test_the_built_repository_holds_exactly_the_generated_stand_ins(headers):
    built = {(h["name"], h["evr"], h["arch"]) for h in headers.values()}
    assert built == {(e.name, e.package_version, e.arch) for e in mp.rhel9_packages()}
    # The driver's packages carry NVIDIA's epoch 3 and .el9 release; the DKMS module packages are noarch.
    driver = {h["name"]: h for h in headers.values() if h["evr"].startswith("3:")}
    assert {"nvidia-driver-cuda", "kmod-nvidia-open-dkms", "nvidia-persistenced"} <= set(driver)
    assert all(h["evr"].endswith(".el9") for h in driver.values())
    assert {h["arch"] for h in headers.values() if h["name"].startswith("kmod-nvidia-")} == {"noarch"}


def test_the_rpms_require_only_each_other(headers):
    """The test double's rpm database is all but empty: a Requires on anything else makes dnf refuse."""
    names = {h["name"] for h in headers.values()}
    for rpm, h in headers.items():
        unmet = [r for r in h["requires"] if not r.startswith("rpmlib(") and r not in names | HOST_PROVIDES]
        assert unmet == [], f"{rpm} requires {unmet}"
    kmods = {h["name"]: h["conflicts"] for h in headers.values() if h["name"].startswith("kmod-nvidia-")}
    assert kmods == {"kmod-nvidia-open-dkms": ["kmod-nvidia-latest-dkms"]} | {
        "kmod-nvidia-latest-dkms": ["kmod-nvidia-open-dkms"]
    }


def read_modules(repo: Path) -> list[dict]:
    """The modulemd documents of the repository's modules metadata (repomd.xml's type="modules")."""
    ns = {"r": "http://linux.duke.edu/metadata/repo"}
    repomd = ET.parse(repo / "repodata" / "repomd.xml").getroot()
    (data,) = [d for d in repomd.findall("r:data", ns) if d.get("type") == "modules"]
    href = data.find("r:location", ns).get("href")
    return list(yaml.safe_load_all(gzip.decompress((repo / href).read_bytes()).decode()))


def test_each_module_stream_holds_its_branch_and_flavour(built_repo: Path):
    docs = [d for d in read_modules(built_repo) if d]
    streams = {d["data"]["stream"]: d["data"]["artifacts"]["rpms"] for d in docs}
    branch = mp.DRIVER_VERSIONS[0].split(".")[0]
    open_stream = vm.value("driver", "dnf_module.open", "rhel9", version=mp.DRIVER_VERSIONS[0]).split(":")[1]
    dkms_stream = vm.value("driver", "dnf_module.proprietary", "rhel9", version=mp.DRIVER_VERSIONS[0]).split(":")[1]
    assert set(streams) == {open_stream, dkms_stream} == {f"{branch}-open", f"{branch}-dkms"}
    assert all(d["document"] == "modulemd" and d["data"]["name"] == "nvidia-driver" for d in docs)
    for stream, own, other in [
        (open_stream, "kmod-nvidia-open-dkms", "kmod-nvidia-latest-dkms"),
        (dkms_stream, "kmod-nvidia-latest-dkms", "kmod-nvidia-open-dkms"),
    ]:
        nevras = streams[stream]
        assert any(n.startswith(f"{own}-3:{mp.DRIVER_VERSIONS[0]}-") for n in nevras), nevras
        assert not any(n.startswith(f"{other}-") for n in nevras), nevras
        # Both releases of the branch, the user space and the fabric manager with them.
        assert {n.rsplit("-", 2)[0] for n in nevras} >= {
            "nvidia-driver-cuda",
            "nvidia-persistenced",
            "nvidia-fabric-manager",
        }


def role_pins() -> list[tuple[str, list[str], str, str]]:
    """(role, packages, upstream release, required text) of each GPU stack role's dnf install on a Rocky 9
    host with the lab's brief, from the role's own variables."""
    pool = {"gpufleet_pool": {"topology": "8gpu-sxm-nvlink"}}
    drv = role_vars("nvidia_driver", ROCKY9, LAB, pool)
    cuda = role_vars("cuda", ROCKY9, LAB)
    nccl = role_vars("nccl", ROCKY9, LAB)
    dcgm = role_vars("dcgm", ROCKY9, LAB)
    return [
        ("nvidia_driver", drv["_nvidia_driver_all_packages"], drv["nvidia_driver_version"], ""),
        ("cuda", cuda["cuda_packages"], cuda["cuda_package_version"], ""),
        ("nccl", nccl["nccl_packages"], nccl["nccl_version"], nccl["_nccl_version_contains"]),
        ("dcgm", dcgm["dcgm_packages"], dcgm["dcgm_version"], ""),
    ]


def test_every_roles_pin_resolves_to_exactly_one_rpm(headers):
    offered: dict[str, list[str]] = {}
    for h in headers.values():
        offered.setdefault(str(h["name"]), []).append(str(h["evr"]))
    resolved = {}
    for _role, names, release, contains in role_pins():
        assert names, _role
        for name in names:
            resolved[name] = pkg_resolve.pick(name, offered.get(name, []), release, contains)
    assert resolved["nvidia-driver-cuda"] == mp.PUBLISHED_RHEL9[("driver", mp.DRIVER_VERSIONS[0])].version
    assert resolved["nvidia-fabric-manager"] == mp.PUBLISHED_RHEL9[("fabricmanager", mp.DRIVER_VERSIONS[0])].version
    assert resolved["libnccl"] == mp.PUBLISHED_RHEL9[("nccl", mp.NCCL_VERSIONS[0], mp.NCCL_CUDA)].version
    assert resolved["datacenter-gpu-manager-4-core"] == mp.PUBLISHED_RHEL9[("dcgm", mp.DCGM_VERSIONS[0])].version
    # A version spelled by rule is not in it: the driver without its epoch and .el9, NCCL's -1 build.
    with pytest.raises(pkg_resolve.ResolveError):
        pkg_resolve.pick("libnccl", offered["libnccl"], f"{mp.NCCL_VERSIONS[0]}-1", f"+cuda{mp.NCCL_CUDA}")
    assert f"{mp.DRIVER_VERSIONS[0]}-1" not in offered["nvidia-driver-cuda"]


def test_every_rpm_is_signed_with_the_published_key(built_repo: Path, tmp_path: Path):
    """As NVIDIA's are: a host with gpgcheck on and the repository's key imported installs them, one with
    another key (or none) does not."""
    out = built_repo.parents[3]
    rpms = sorted(str(p) for p in built_repo.glob("*.rpm"))

    def checksig(dbpath: Path) -> str:
        return subprocess.run(
            ["rpmkeys", "--dbpath", str(dbpath), "--checksig", *rpms], capture_output=True, text=True, check=False
        ).stdout

    assert "NOT OK" in checksig(tmp_path / "empty-db")
    subprocess.run(
        ["rpmkeys", "--dbpath", str(tmp_path / "db"), "--import", str(out / "gpufleet-doubles.asc")], check=True
    )
    lines = checksig(tmp_path / "db").splitlines()
    assert len(lines) == len(rpms) and all(line.endswith("digests signatures OK") for line in lines), lines


def test_a_second_build_with_the_same_inputs_is_skipped(built_repo: Path):
    out = built_repo.parents[3]
    env = dict(os.environ, GPUFLEET_DOUBLES_GNUPG=str(out.parent / "gnupg"))
    again = subprocess.run(
        [str(DOUBLES / "build-rpm-repo.sh"), str(out)], capture_output=True, text=True, check=True, env=env
    )
    assert "up to date" in again.stdout
