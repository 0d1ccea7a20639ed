"""The test doubles' package repositories carry only what the vendor matrix says NVIDIA ships.

molecule/resources/doubles/build-repo.sh builds stand-in .debs for the lab and the gpu_stack
scenario (Debian 12 and 13 hosts); matrix_packages.py gives it every NVIDIA package name and
version string from module_utils/brief/vendor_matrix.py. These tests build the repositories, read
their Packages indexes as apt does, and check each stand-in against the matrix rows for Debian
12 and 13: a name the matrix does not list for that OS and component (a Ubuntu or RHEL name, a
name from memory) or a version spelled otherwise than the matrix says fails here.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import vendor_matrix as vm
from role_vars import ROOT

DOUBLES = ROOT / "molecule" / "resources" / "doubles"
# The repositories standing in for NVIDIA's (the Kubernetes one stands in for pkgs.k8s.io).
NVIDIA_REPOS = ("cuda", "libnvidia-container", "doca/*/*/x86_64")
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
    """The CUDA release a component's names and versions are filled with, as the doubles build them."""
    if component == "cuda":
        return {"cuda": ".".join(version.split(".")[:2])}
    if component == "nccl":
        return {"cuda": mp.NCCL_CUDA}
    if component == "dcgm":
        return {"cuda": mp.DCGM_CUDA}
    return {}


def matrix_problems(entries, os: str) -> list[str]:
    """Each stand-in (component, upstream version, name, package version) the matrix does not list
    for ``os``: the name must be among the names a matching row of that component gives, and the
    package version what the component's ``package_version`` row spells for that version."""
    problems = []
    for component, version, name, package_version in entries:
        names: set[str] = set()
        for row in vm.rows(component):
            if row.key in NAME_KEYS and row.matches(os, "x86_64", version):
                value = vm.value(component, row.key, os, "x86_64", version, **context(component, version))
                names.update([value] if isinstance(value, str) else value)
        if name not in names:
            problems.append(f"{os}: {name} is not a {component} package the matrix lists ({sorted(names)})")
        try:
            wanted = vm.value(component, "package_version", os, "x86_64", version, **context(component, version))
        except KeyError:
            wanted = None
        if package_version != wanted:
            problems.append(f"{os}: {name} {package_version}: the matrix spells {component} {version} as {wanted}")
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
        (("nccl", "2.26.2", "libnccl", "2.26.2-1+cuda12.8"), "not a nccl package"),
        (("fabricmanager", "570.133.20", "nvidia-fabricmanager-570", "570.133.20-0ubuntu1"), "spells"),
        # NVIDIA's Debian repository drops the branch from the fabric manager's name from 580 on.
        (("fabricmanager", "580.95.05", "nvidia-fabricmanager-580", "580.95.05-1"), "not a fabricmanager package"),
        (("fabricmanager", "580.95.05", "nvidia-fabricmanager", "580.95.05-1"), None),
        (("fabricmanager", "575.57.08", "nvidia-fabricmanager-575", "575.57.08-1"), None),
        (("driver", "570.133.20", "nvidia-driver-570-open", "570.133.20-1"), "not a driver package"),
        (("dcgm", "4.2.3", "datacenter-gpu-manager-4-core", "4.2.3-1"), "spells"),
        (("dcgm-exporter", "4.1.3", "dcgm-exporter", "4.1.3-1"), "not a dcgm-exporter package"),
        (("container-toolkit", "1.17.8", "nvidia-container-toolkit", "1.17.8-1"), None),
    ],
)
def test_the_check_names_a_stand_in_the_vendor_does_not_ship(entry, why):
    problems = matrix_problems([entry], "debian12")
    if why is None:
        assert problems == []
    else:
        assert len(problems) == 1 and why in problems[0], problems


def test_the_generator_script_prints_what_build_repo_evals():
    """The bash assignments carry the generator's names and versions (one spot-check per component)."""
    out = subprocess.run(
        ["python3", str(DOUBLES / "matrix_packages.py")], capture_output=True, text=True, check=True
    ).stdout
    pinned = mp.DRIVER_VERSIONS[0]
    fabricmanager = f"${{drv_fabricmanager[{pinned}]}}=${{drv_fabricmanager_version[{pinned}]}}"
    script = out + f'printf "%s\\n" "{fabricmanager}" "$nccl_lib" "$dcgm_core"'
    lines = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()
    assert lines == [
        f"{vm.value('fabricmanager', 'packages', 'debian12', version=pinned)[0]}="
        f"{vm.value('fabricmanager', 'package_version', 'debian12', version=pinned)}",
        vm.value("nccl", "packages", "debian12")[0],
        vm.value("dcgm", "packages", "debian12", version=mp.DCGM_VERSIONS[0], cuda=mp.DCGM_CUDA)[0],
    ]


# ---- the built repositories ------------------------------------------------------------------------


def test_the_built_repositories_hold_exactly_the_generated_stand_ins(built_repo: Path):
    """Nothing in NVIDIA's stand-in repositories was named by hand: every package is one of the generator's."""
    built: set[tuple[str, str]] = set()
    indexes = [index for pattern in NVIDIA_REPOS for index in built_repo.glob(f"{pattern}/Packages")]
    assert len(indexes) == 2 + 2 * len(mp.DOCA_VERSIONS), indexes
    for index in indexes:
        built |= read_packages(index)
    assert built == {(p.name, p.package_version) for p in mp.packages()}


@pytest.mark.parametrize("os", mp.OSES)
def test_the_doca_repositories_sit_where_the_matrix_puts_them(built_repo: Path, os: str):
    for doca in mp.DOCA_VERSIONS:
        url = vm.value("doca-ofed", "repo_url", os, "x86_64", doca, doca=doca)
        path = url.split("/public/repo/", 1)[1]
        assert (built_repo / path / "Packages").is_file(), path
