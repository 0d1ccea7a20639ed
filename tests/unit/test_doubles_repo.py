"""The test doubles' package repositories carry only what NVIDIA ships, as NVIDIA spells it.

molecule/resources/doubles/build-repo.sh builds stand-in .debs for the lab and the gpu_stack
scenario (Debian 12 and 13 hosts); matrix_packages.py gives it every NVIDIA package name from
module_utils/brief/vendor_matrix.py and every version string from its PUBLISHED table, one cited
listing per row. These tests build the repositories, read their Packages indexes as apt does, and
check each stand-in: a name the matrix does not list for that OS and component (a Ubuntu or RHEL
name, a name from memory) or a version no cited row gives fails here. And the roles' pins, rendered
from their variables, resolve against that repository to exactly one version each: a role that
spelled a revision by rule (-1+cuda<minor>, Ubuntu's -0ubuntu1) would find nothing, as the repository's
strings are the vendor's irregular ones. The Ubuntu test doubles' hosts get trees of their own
(ubuntu2204/, ubuntu2404/, NVIDIA's Ubuntu layout): the same checks against the matrix's Ubuntu rows, and
the driver's versions from the Ubuntu rows of the table (Debian's trees carry Debian's -1). The CUDA
repository is one tree per OS (cuda/repos/<distro>/x86_64/), each offering what NVIDIA publishes there
(no DCGM in debian13/), and it carries a release of the next driver branch whose packages are renamed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import vendor_matrix as vm
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import pkg_resolve
from role_vars import ROOT, role_vars

DOUBLES = ROOT / "molecule" / "resources" / "doubles"
# The repositories standing in for NVIDIA's (the Kubernetes one stands in for pkgs.k8s.io).
NVIDIA_REPOS = ("cuda/repos/*/x86_64", "libnvidia-container", "doca/*/*/x86_64")
# Matrix keys whose values are package names (a name or a list of names).
NAME_KEYS = ("packages", "packages.open", "packages.proprietary", "persistenced_packages", "dependencies")
NAME_KEYS += ("gds_packages", "userspace_packages", "package")


def _load_generator():
    spec = importlib.util.spec_from_file_location("matrix_packages", DOUBLES / "matrix_packages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mp = _load_generator()


def context(component: str, version: str) -> dict[str, str]:
    """The CUDA release a component's names are filled with, as the doubles build them."""
    if component == "cuda":
        return {"cuda": ".".join(version.split(".")[:2])}
    if component == "nccl":
        return {"cuda": mp.NCCL_CUDA}
    if component == "dcgm":
        return {"cuda": mp.DCGM_CUDA}
    return {}


def cited(component: str, version: str, name: str, os: str) -> set[str]:
    """The package versions the PUBLISHED rows give a stand-in of this component and release on ``os``
    (a row keyed with a repository layout holds for that layout's OSes only)."""
    kind = "gds" if component == "cuda" and name.startswith("nvidia-gds-") else component
    rows = [(key, p) for key, p in mp.PUBLISHED.items() if key[0] == kind and key[1] == version]
    return {p.version for key, p in rows if key[-1] not in mp.LAYOUTS or key[-1] == mp.layout(os)}


def matrix_problems(entries, os: str) -> list[str]:
    """Each stand-in (component, upstream version, name, package version) not as NVIDIA ships it for
    ``os``: the name must be among the names a matching matrix row of that component gives, and the
    package version one a cited PUBLISHED row gives for that release."""
    problems = []
    for component, version, name, package_version in entries:
        names: set[str] = set()
        for row in vm.rows(component):
            if row.key in NAME_KEYS and row.matches(os, "x86_64", version):
                value = vm.value(component, row.key, os, "x86_64", version, **context(component, version))
                names.update([value] if isinstance(value, str) else value)
        if name not in names:
            problems.append(f"{os}: {name} is not a {component} package the matrix lists ({sorted(names)})")
        wanted = cited(component, version, name, os)
        if package_version not in wanted:
            problems.append(
                f"{os}: {name} {package_version}: no cited listing spells {component} {version} so {wanted}"
            )
    return problems


def read_packages(index: Path) -> set[tuple[str, str]]:
    """(Package, Version) of every stanza of an apt Packages index."""
    out = set()
    for stanza in index.read_text().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line[0].isspace())
        if "Package" in fields:
            out.add((fields["Package"], fields["Version"]))
    return out


@pytest.fixture(scope="module")
def built_repo(tmp_path_factory) -> Path:
    missing = [t for t in ("dpkg-deb", "apt-ftparchive", "gpg", "cc") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"cannot build the doubles' repository here: {', '.join(missing)} missing")
    base = tmp_path_factory.mktemp("doubles")
    env = dict(os.environ, GPUFLEET_DOUBLES_GNUPG=str(base / "gnupg"))
    proc = subprocess.run(
        [str(DOUBLES / "build-repo.sh"), str(base / "repo")], capture_output=True, text=True, env=env, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return base / "repo"


# ---- the generator's list against the matrix ------------------------------------------------------


@pytest.mark.parametrize("os", mp.OSES)
def test_every_stand_in_is_a_name_and_version_the_matrix_lists(os):
    entries = mp.packages()
    assert {e.component for e in entries} >= {"driver", "fabricmanager", "cuda", "nccl", "dcgm", "dcgm-exporter"}
    assert matrix_problems(entries, os) == []


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        (("nccl", "2.26.2", "libnccl", "2.26.2-2+cuda12.8"), "not a nccl package"),
        # A version spelled by rule rather than read from a listing.
        (("nccl", "2.26.2", "libnccl2", "2.26.2-1+cuda12.8"), "no cited listing"),
        (("fabricmanager", "570.133.20", "nvidia-fabricmanager-570", "570.133.20-0ubuntu1"), "no cited listing"),
        # NVIDIA's Debian repository gives the driver Debian's -1, never Ubuntu's revision.
        (("driver", "570.133.20", "nvidia-driver-cuda", "570.133.20-0ubuntu1"), "no cited listing"),
        (("driver", "570.148.08", "nvidia-driver-cuda", "570.148.08-1ubuntu1"), "no cited listing"),
        (("driver", "570.133.20", "nvidia-driver-cuda", "570.133.20-1"), None),
        (("doca-ofed", "2.10.0", "doca-ofed", "2.10.0-1"), "no cited listing"),
        # NVIDIA's Debian repository drops the branch from the fabric manager's name from 580 on.
        (("fabricmanager", "580.95.05", "nvidia-fabricmanager-580", "580.95.05-1"), "not a fabricmanager package"),
        (("fabricmanager", "570.148.08", "nvidia-fabricmanager-570", "570.148.08-1"), None),
        (("driver", "570.133.20", "nvidia-driver-570-open", "570.133.20-0ubuntu1"), "not a driver package"),
        (("dcgm", "4.2.3", "datacenter-gpu-manager-4-core", "4.2.3-1"), "no cited listing"),
        (("dcgm-exporter", "4.1.3", "dcgm-exporter", "4.1.3-1"), "not a dcgm-exporter package"),
        (("container-toolkit", "1.17.8", "nvidia-container-toolkit", "1.17.8-1"), None),
    ],
)
def test_the_check_names_a_stand_in_the_vendor_does_not_ship(entry, why):
    problems = matrix_problems([entry], "debian12")
    if why is None:
        assert problems == []
    else:
        assert problems and why in problems[0], problems


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        # A revision computed by rule (Debian's -1, or the suffix of another release) on Ubuntu.
        (("driver", "570.133.20", "nvidia-driver-570-open", "570.133.20-1"), "no cited listing"),
        (("driver", "570.133.20", "nvidia-driver-570-open", "570.133.20-1ubuntu1"), "no cited listing"),
        (("driver", "570.148.08", "nvidia-driver-570-open", "570.148.08-0ubuntu1"), "no cited listing"),
        (("driver", "570.133.20", "nvidia-driver-570-open", "570.133.20-0ubuntu1"), None),
        (("fabricmanager", "570.133.20", "libnvidia-nscq-570", "570.133.20-1"), None),
    ],
)
def test_the_check_names_an_ubuntu_revision_the_vendor_does_not_publish(entry, why):
    problems = matrix_problems([entry], "ubuntu2404")
    if why is None:
        assert problems == []
    else:
        assert problems and why in problems[0], problems


def test_the_generator_script_prints_what_build_repo_evals():
    """The bash assignments carry the generator's names and versions (one spot-check per component)."""
    out = subprocess.run(
        ["python3", str(DOUBLES / "matrix_packages.py")], capture_output=True, text=True, check=True
    ).stdout
    pinned = mp.DRIVER_VERSIONS[0]
    fabricmanager = f"${{drv_fabricmanager[{pinned}]}}=${{drv_fabricmanager_version[{pinned}]}}"
    build = f"{mp.NCCL_VERSIONS[0]}+cuda{mp.NCCL_CUDA}"
    script = out + f'printf "%s\\n" "{fabricmanager}" "$nccl_lib=${{nccl_version[{build}]}}" "$dcgm_core"'
    lines = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert lines == [
        f"{vm.value('fabricmanager', 'packages', 'debian12', version=pinned)[0]}="
        f"{mp.PUBLISHED[('fabricmanager', pinned, 'debian')].version}",
        f"{vm.value('nccl', 'packages', 'debian12')[0]}="
        f"{mp.PUBLISHED[('nccl', mp.NCCL_VERSIONS[0], mp.NCCL_CUDA)].version}",
        vm.value("dcgm", "packages", "debian12", version=mp.DCGM_VERSIONS[0], cuda=mp.DCGM_CUDA)[0],
    ]


def test_every_cited_version_names_its_source():
    for key, row in mp.PUBLISHED.items():
        assert row.source.startswith("https://"), key
        assert row.version.startswith(key[1]) or row.version.startswith(f"1:{key[1]}") or key[0] == "gds", key


def test_the_stand_ins_carry_the_vendors_irregularities():
    """What no rule gives: on Ubuntu the driver's revision changes between releases and the fabric
    manager's differs from the driver's (a role spelling <release>-0ubuntu1, or Debian's -1, finds
    neither driver); the pinned NCCL is a re-spin (-2) beside a build for another CUDA minor, DOCA carries
    a build number. NVIDIA's Debian repository gives its driver packages Debian's plain -1, and so does
    the Debian tree."""
    offered: dict[str, set[str]] = {}
    for p in mp.packages():
        offered.setdefault(p.name, set()).add(p.package_version)
    ubuntu: dict[str, set[str]] = {}
    for p in mp.ubuntu_packages():
        ubuntu.setdefault(p.name, set()).add(p.package_version)
    driver = mp.DRIVER_VERSIONS[0]
    assert {v.split("-", 1)[1] for v in ubuntu["nvidia-driver-570-open"]} == {"0ubuntu1", "1ubuntu1"}
    assert ubuntu["nvidia-fabricmanager-570"].isdisjoint(ubuntu["nvidia-driver-570-open"])
    assert f"{driver}-1" not in ubuntu["nvidia-driver-570-open"]
    for name in ("nvidia-driver-cuda", "libcuda1", "nvidia-smi", "nvidia-persistenced"):
        assert offered[name] == {f"{v}-1" for v in mp.ALL_DRIVER_VERSIONS}, name
    assert offered["nvidia-fabricmanager-570"] == {f"{v}-1" for v in mp.DRIVER_VERSIONS}
    nccl = mp.NCCL_VERSIONS[0]
    assert f"{nccl}-1+cuda{mp.NCCL_CUDA}" not in offered["libnccl2"]
    assert len([v for v in offered["libnccl2"] if v.startswith(f"{nccl}-")]) == 2  # two CUDA builds
    assert all(not v.endswith("-1") for v in offered["doca-ofed"])


LAB = yaml.safe_load((ROOT / "inventories/lab/brief.yml").read_text())
DEB12 = {"distribution": "Debian", "distribution_major_version": "12", "os_family": "Debian"}
DEB12 |= {"distribution_version": "12", "architecture": "x86_64"}


UBU2404 = {"distribution": "Ubuntu", "distribution_major_version": "24", "os_family": "Debian"}
UBU2404 |= {"distribution_version": "24.04", "distribution_release": "noble", "architecture": "x86_64"}


def role_pins(facts: dict[str, str] = DEB12) -> list[tuple[str, list[str], str, str]]:
    """(role, packages, upstream release, required text) of each GPU stack role's install on the lab's
    Debian 12 host (or a host of ``facts``), from the role's own variables (defaults and vars rendered
    as Ansible would)."""
    pool = {"gpufleet_pool": {"topology": "8gpu-sxm-nvlink"}}
    drv = role_vars("nvidia_driver", facts, LAB, pool)
    cuda = role_vars("cuda", facts, LAB)
    nccl = role_vars("nccl", facts, LAB)
    dcgm = role_vars("dcgm", facts, LAB)
    exporter = role_vars("dcgm_exporter", facts, LAB)
    ctk = role_vars("container_runtime", facts, LAB)
    for r, var in [
        (drv, "nvidia_driver_package_version"),
        (cuda, "_cuda_exact_version"),
        (nccl, "nccl_package_version"),
    ]:
        assert r[var] == "", f"{var} spells a version: {r[var]}"
    return [
        ("nvidia_driver", drv["_nvidia_driver_all_packages"], drv["nvidia_driver_version"], ""),
        ("cuda", cuda["cuda_packages"], cuda["cuda_package_version"], ""),
        ("nccl", nccl["nccl_packages"], nccl["nccl_version"], nccl["_nccl_version_contains"]),
        ("dcgm", dcgm["dcgm_packages"], dcgm["dcgm_version"], ""),
        ("dcgm_exporter", [exporter["dcgm_exporter_package"]], exporter["dcgm_exporter_version"], ""),
        ("container_runtime", ctk["container_runtime_toolkit_packages"], ctk["container_runtime_toolkit_version"], ""),
    ]


def test_every_roles_pin_resolves_to_exactly_one_stand_in():
    offered: dict[str, list[str]] = {}
    for p in mp.packages():
        offered.setdefault(p.name, []).append(p.package_version)
    resolved = {}
    for _role, names, release, contains in role_pins():
        for name in names:
            resolved[name] = pkg_resolve.pick(name, offered.get(name, []), release, contains)
    # The irregular ones: no rule gives these, the repository does.
    assert resolved["nvidia-driver-cuda"] == mp.PUBLISHED[("driver", mp.DRIVER_VERSIONS[0], "debian")].version
    fabricmanager = mp.PUBLISHED[("fabricmanager", mp.DRIVER_VERSIONS[0], "debian")].version
    assert resolved["nvidia-fabricmanager-570"] == fabricmanager
    assert resolved["libnccl2"] == mp.PUBLISHED[("nccl", mp.NCCL_VERSIONS[0], mp.NCCL_CUDA)].version
    assert resolved["datacenter-gpu-manager-4-core"] == mp.PUBLISHED[("dcgm", mp.DCGM_VERSIONS[0])].version


# ---- the Ubuntu trees (cuda/repos/ubuntu2204/, cuda/repos/ubuntu2404/) ------------------------------


@pytest.mark.parametrize("os", mp.UBUNTU_OSES)
def test_every_ubuntu_stand_in_is_a_name_and_version_the_matrix_lists(os):
    entries = mp.ubuntu_packages()
    names = {e.name for e in entries}
    # Ubuntu's names below 590: branch-named driver and DKMS packages, NSCQ with the fabric manager.
    assert {"nvidia-driver-570-open", "nvidia-dkms-570-open", "nvidia-persistenced", "libnvidia-nscq-570"} <= names
    assert matrix_problems(entries, os) == []


def test_no_debian_driver_name_in_the_ubuntu_repository_nor_the_reverse():
    ubuntu = {e.name for e in mp.ubuntu_packages() if e.component in ("driver", "fabricmanager")}
    debian = {e.name for e in mp.packages() if e.component in ("driver", "fabricmanager")}
    assert ubuntu & debian == {"nvidia-persistenced", "nvidia-fabricmanager-570", "nvidia-fabricmanager"}
    assert matrix_problems([("driver", "570.133.20", "nvidia-driver-cuda", "570.133.20-0ubuntu1")], "ubuntu2404")
    assert matrix_problems([("driver", "570.133.20", "libcuda1", "570.133.20-0ubuntu1")], "ubuntu2204")
    # Each tree's revisions are its layout's own: Debian's -1 is no Ubuntu driver's version.
    assert matrix_problems([("driver", "570.133.20", "nvidia-utils-570", "570.133.20-1")], "ubuntu2204")


def test_every_roles_pin_resolves_to_exactly_one_stand_in_on_ubuntu():
    """The roles' Ubuntu branch, rendered for a 24.04 host, against the Ubuntu repository's stand-ins."""
    offered: dict[str, list[str]] = {}
    for p in mp.ubuntu_packages():
        offered.setdefault(p.name, []).append(p.package_version)
    resolved = {}
    for role, names, release, contains in role_pins(UBU2404):
        if role == "container_runtime":
            continue  # the container toolkit's own repository (libnvidia-container/), shared with Debian
        for name in names:
            resolved[name] = pkg_resolve.pick(name, offered.get(name, []), release, contains)
    driver = mp.PUBLISHED[("driver", mp.DRIVER_VERSIONS[0], "ubuntu")].version
    fabricmanager = mp.PUBLISHED[("fabricmanager", mp.DRIVER_VERSIONS[0], "ubuntu")].version
    assert driver != fabricmanager
    assert {n: resolved[n] for n in ("nvidia-driver-570-open", "nvidia-dkms-570-open", "nvidia-persistenced")} == {
        "nvidia-driver-570-open": driver,
        "nvidia-dkms-570-open": driver,
        "nvidia-persistenced": driver,
    }
    assert resolved["nvidia-fabricmanager-570"] == resolved["libnvidia-nscq-570"] == fabricmanager
    assert resolved["libnccl2"] == mp.PUBLISHED[("nccl", mp.NCCL_VERSIONS[0], mp.NCCL_CUDA)].version


# ---- the built repositories ------------------------------------------------------------------------


def cuda_tree(built_repo: Path, os: str) -> Path:
    """The CUDA repository's tree for an OS, where the matrix's URL puts it (repos/<distro>/<arch>/)."""
    url = vm.value("cuda-repo", "url", os, "x86_64")
    return built_repo / "cuda" / url.split("/compute/cuda/", 1)[1]


@pytest.mark.parametrize("os", mp.TREES)
def test_each_os_tree_holds_exactly_its_generated_stand_ins(built_repo: Path, os: str):
    tree = cuda_tree(built_repo, os)
    assert read_packages(tree / "Packages") == {(p.name, p.package_version) for p in mp.tree_packages(os)}
    assert (tree / "InRelease").is_file()


def test_the_ubuntu_trees_hold_the_ubuntu_layout(built_repo: Path):
    for os_ in mp.UBUNTU_OSES:
        assert read_packages(cuda_tree(built_repo, os_) / "Packages") == {
            (p.name, p.package_version) for p in mp.ubuntu_packages()
        }


def test_the_built_repositories_hold_exactly_the_generated_stand_ins(built_repo: Path):
    """Nothing in NVIDIA's stand-in repositories was named by hand: every package is one of the generator's."""
    built: set[tuple[str, str]] = set()
    indexes = [index for pattern in NVIDIA_REPOS for index in built_repo.glob(f"{pattern}/Packages")]
    assert len(indexes) == len(mp.TREES) + 1 + len(mp.OSES + mp.UBUNTU_OSES) * len(mp.DOCA_VERSIONS), indexes
    for index in indexes:
        built |= read_packages(index)
    assert built == {(p.name, p.package_version) for p in mp.packages() + mp.ubuntu_packages()}


# ---- a repository without a component: DCGM is not published for debian13 ---------------------------

DCGM_NAMES = ("datacenter-gpu-manager-4-core", "datacenter-gpu-manager-exporter")


def test_the_debian13_tree_offers_no_dcgm_and_debian12_does(built_repo: Path):
    """NVIDIA publishes DCGM and its exporter for debian12, not debian13 (cuda-repo-management#41, the
    matrix's dcgm/published row): the doubles' debian13 tree must not offer them, or a role asking for
    DCGM there would pass here and fail on a real Debian 13 host."""
    deb13 = {name for name, _v in read_packages(cuda_tree(built_repo, "debian13") / "Packages")}
    deb12 = {name for name, _v in read_packages(cuda_tree(built_repo, "debian12") / "Packages")}
    assert not any(name.startswith("datacenter-gpu-manager") for name in deb13), sorted(deb13)
    assert set(DCGM_NAMES) <= deb12
    # The rest of the CUDA repository is there on debian13: the driver, the toolkit, NCCL.
    assert {"nvidia-driver-cuda", "cuda-toolkit-12-8", "libnccl2"} <= deb13


def test_the_tree_lists_follow_the_matrixs_published_rows(monkeypatch):
    """A component the matrix marks as published on debian13 would be in its tree: the list is the
    matrix's answer, not a hand-kept exclusion."""
    assert not mp.published_on("dcgm", "debian13") and not mp.published_on("dcgm-exporter", "debian13")
    assert mp.published_on("dcgm", "debian12") and mp.published_on("dcgm", "ubuntu2404")
    names = {p.name for p in mp.tree_packages("debian13")}
    assert not names & set(DCGM_NAMES)
    monkeypatch.setattr(mp, "published_on", lambda component, os_: True)
    assert set(DCGM_NAMES) <= {p.name for p in mp.tree_packages("debian13")}


# ---- package renames across driver branches ---------------------------------------------------------


def test_the_next_branch_is_a_release_the_matrix_names_differently():
    (nxt,) = mp.NEXT_BRANCH_VERSIONS
    old = mp.DRIVER_VERSIONS[0]
    for os_ in mp.OSES + mp.UBUNTU_OSES:
        assert vm.value("fabricmanager", "packages", os_, "x86_64", nxt)[0] == "nvidia-fabricmanager"
        assert vm.value("fabricmanager", "packages", os_, "x86_64", old)[0] == "nvidia-fabricmanager-570"


@pytest.mark.parametrize("os", mp.TREES)
def test_the_renamed_fabric_manager_is_built_under_its_new_name_only(built_repo: Path, os: str):
    """From 580 the fabric manager (and on Ubuntu NSCQ) has no branch in its name: the next branch's
    release is offered as nvidia-fabricmanager, never as nvidia-fabricmanager-580, and the old name
    is offered at the old branch's releases only."""
    (nxt,) = mp.NEXT_BRANCH_VERSIONS
    built = read_packages(cuda_tree(built_repo, os) / "Packages")
    at_next = {name for name, v in built if v.split(":")[-1].startswith(nxt + "-")}
    assert "nvidia-fabricmanager" in at_next
    assert (
        not {n for n in at_next if n.endswith("-580")}
        - {"nvidia-driver-580-open", "nvidia-dkms-580-open"}
        - {
            "nvidia-driver-580",
            "nvidia-dkms-580",
            "libnvidia-compute-580",
            "nvidia-utils-580",
        }
    )
    assert {v for name, v in built if name == "nvidia-fabricmanager-570"} == {
        mp.PUBLISHED[("fabricmanager", v, mp.layout(os))].version for v in mp.DRIVER_VERSIONS
    }
    assert {v for name, v in built if name == "nvidia-fabricmanager"} == {
        mp.PUBLISHED[("fabricmanager", nxt, mp.layout(os))].version
    }
    if mp.layout(os) == "ubuntu":
        assert "libnvidia-nscq" in at_next and "libnvidia-nscq-580" not in at_next
        # Ubuntu's driver packages carry the new branch in their names.
        assert {"nvidia-driver-580-open", "nvidia-dkms-580-open", "nvidia-utils-580"} <= at_next


@pytest.mark.parametrize("os", mp.OSES + mp.UBUNTU_OSES)
def test_the_doca_repositories_sit_where_the_matrix_puts_them(built_repo: Path, os: str):
    for doca in mp.DOCA_VERSIONS:
        url = vm.value("doca-ofed", "repo_url", os, "x86_64", doca, doca=doca)
        path = url.split("/public/repo/", 1)[1]
        assert (built_repo / path / "Packages").is_file(), path
