"""The roles' defaults and per-OS vars install what the vendor matrix says NVIDIA ships.

For every OS and architecture of module_utils/brief/vendor_matrix.py and every version it knows, the
roles' variables (defaults/main.yml + vars/, rendered as Ansible would, see role_vars.py) give
the matrix's package names, version strings and repository URLs. The lab's path (Debian 12,
x86_64, the lab brief's pins) is also pinned literally: it must not move.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import compat
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import vendor_matrix as vm
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.catalogue import ACCELERATORS, TOPOLOGIES
from ansible_collections.gpufleet.cluster.plugins.module_utils.k8s import objects as k8s
from role_vars import ROOT, role_vars

KNOWN = vm.KNOWN_VERSIONS
OS_ARCH = list(itertools.product(vm.OSES, vm.ARCHES))


def facts(os: str, arch: str) -> dict:
    return dict(vm.OS_FACTS[os], os_family=vm.OS_FAMILY[os], architecture=arch)


def brief(**software) -> dict:
    base = {"driver": "570.133.20", "driver_flavor": "open", "cuda": "12.8", "nccl": "2.26.2"}
    base.update(software)
    return {"software": base, "cluster": {"name": "t"}}


# ---- the matrix itself --------------------------------------------------------------------------


def test_every_row_cites_a_source_and_the_date_checked():
    for row in vm.ROWS:
        assert row.component in vm.COMPONENTS, row
        assert row.source.url, row
        assert row.source.checked in vm.CHECK_DATES, row
        assert row.source.confirmed or row.source.note, f"unconfirmed without a reason: {row}"


def test_each_fact_has_one_row_per_os_arch_and_version():
    """No two rows answer the same question differently (overlapping OS, arch and version ranges)."""
    versions = dict(KNOWN)
    versions["fabricmanager"] = versions["imex"] = versions["driver"]
    for (component, key), group in itertools.groupby(
        sorted(vm.ROWS, key=lambda r: (r.component, r.key)), key=lambda r: (r.component, r.key)
    ):
        group = list(group)
        if component == "cuda" and key == "package_versions":
            continue  # one table split by source
        for os, arch, version in itertools.product(vm.OSES, vm.ARCHES, versions.get(component, (None,))):
            hits = [r for r in group if r.matches(os, arch, version)]
            assert len(hits) <= 1, (component, key, os, arch, version, hits)


def test_known_driver_versions_cover_the_catalogue_branches():
    branches = {compat.driver_branch(v) for v in KNOWN["driver"]}
    assert {a.min_driver_branch for a in ACCELERATORS.values()} - {450, 460, 525} <= branches


def test_os_key_from_ansible_facts():
    assert vm.os_key("Debian", "12") == "debian12"
    assert vm.os_key("Ubuntu", "24") == "ubuntu2404"
    assert vm.os_key("Rocky", 9) == "rhel9"
    assert vm.os_key("Ubuntu", "20") is None


# ---- nvidia_driver: driver, fabric manager, NSCQ, IMEX ------------------------------------------


@pytest.mark.parametrize(("os", "arch"), OS_ARCH)
@pytest.mark.parametrize("driver", KNOWN["driver"])
@pytest.mark.parametrize("flavor", ["open", "proprietary"])
def test_nvidia_driver_role_matches_the_matrix(os, arch, driver, flavor):
    pool = {"topology": "nvl72", "group": "gpu"}
    r = role_vars("nvidia_driver", facts(os, arch), brief(driver=driver, driver_flavor=flavor), {"gpufleet_pool": pool})
    v = {"os": os, "arch": arch, "version": driver}
    assert r["nvidia_driver_repo_url"] == vm.value("cuda-repo", "url", **v)
    assert r["nvidia_driver_repo_key_url"] == vm.value("cuda-repo", "url", **v) + vm.value("cuda-repo", "key_file", **v)
    # No revision is spelled: the host resolves the release against the repository.
    assert r["nvidia_driver_package_version"] == "" and r["_nvidia_driver_exact"] == {}
    assert r["_nvidia_driver_apt_pin"] == f"{driver}-*" and r["_nvidia_driver_other_pins"] == []
    assert r["nvidia_driver_packages"] == vm.value("driver", f"packages.{flavor}", **v)
    assert r["_nvidia_driver_os"]["persistenced_packages"] == vm.value("driver", "persistenced_packages", **v)
    assert r["nvidia_driver_fabricmanager_packages"] == vm.value("fabricmanager", "packages", **v)
    assert r["nvidia_driver_fabricmanager_package_version"] == ""
    assert r["nvidia_driver_imex_packages"] == vm.value("imex", "packages", **v)
    if os == "rhel9":
        assert r["_nvidia_driver_os"]["dnf_module"] == vm.value("driver", f"dnf_module.{flavor}", **v)
    # Every pinned package: the driver's (with nvidia-persistenced), the fabric manager's and IMEX's.
    assert r["_nvidia_driver_all_packages"] == (
        r["nvidia_driver_packages"]
        + r["_nvidia_driver_os"]["persistenced_packages"]
        + r["nvidia_driver_fabricmanager_packages"]
        + r["nvidia_driver_imex_packages"]
    )


def test_imex_is_on_for_multi_node_nvlink_pools_only():
    required = vm.value("imex", "required_by", "ubuntu2404")
    assert set(required) <= set(TOPOLOGIES)
    for topology in TOPOLOGIES:
        r = role_vars(
            "nvidia_driver", facts("ubuntu2404", "aarch64"), brief(), {"gpufleet_pool": {"topology": topology}}
        )
        assert r["nvidia_driver_imex"] == (topology in required), topology
    r = role_vars("nvidia_driver", facts("ubuntu2404", "aarch64"), brief(), {"gpufleet_pool": {"topology": "nvl72"}})
    assert r["nvidia_driver_imex_nodes_config"] == vm.value("imex", "nodes_config", "ubuntu2404")


def test_imex_lists_the_pools_nodes_of_this_hosts_rack():
    # Four GB200 trays of one pool in two NVL72 racks: each rack is an NVLink domain of its own.
    hosts = ["gb01", "gb02", "gb03", "gb04"]
    addresses = {h: f"10.0.0.{i + 1}" for i, h in enumerate(hosts)}
    common = {
        "gpufleet_pool": {"topology": "nvl72", "group": "gb200"},
        "groups": {"all": [*hosts, "ctl01"], "gb200": hosts},
        "inventory_hostname": "gb03",
        "gpufleet_addresses": {**addresses, "ctl01": "10.0.0.9"},
    }

    def imex_nodes(**extra):
        return role_vars("nvidia_driver", facts("ubuntu2404", "aarch64"), brief(), {**common, **extra})[
            "nvidia_driver_imex_nodes"
        ]

    racks = {"gb01": "r1", "gb02": "r1", "gb03": "r2", "gb04": "r2", "ctl01": "r2"}
    assert imex_nodes(gpufleet_racks=racks) == ["10.0.0.3", "10.0.0.4"]
    # No rack named: the whole pool is one domain.
    assert imex_nodes(gpufleet_racks=dict.fromkeys(racks, "")) == list(addresses.values())
    # Without the brief role's maps: from the pool's hosts' own variables.
    del common["gpufleet_addresses"]
    hostvars = {h: {"ansible_host": addresses[h], "rack": racks[h]} for h in hosts}
    assert imex_nodes(hostvars=hostvars) == ["10.0.0.3", "10.0.0.4"]


def test_the_lab_driver_path_does_not_move():
    """Debian 12 x86_64 with the lab's pins: the names the lab's stand-in repository serves, at the release
    the host resolves (no revision spelled here)."""
    lab = yaml.safe_load((ROOT / "inventories/lab/brief.yml").read_text())
    r = role_vars("nvidia_driver", facts("debian12", "x86_64"), lab, {"gpufleet_pool": {"topology": "8gpu-sxm-nvlink"}})
    assert r["nvidia_driver_repo_url"] == "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
    assert r["nvidia_driver_repo_key_url"].endswith("/debian12/x86_64/3bf863cc.pub")
    assert r["_nvidia_driver_all_packages"] == [
        "nvidia-driver-cuda",
        "nvidia-kernel-open-dkms",
        "nvidia-persistenced",
        "nvidia-fabricmanager-570",
    ]
    assert r["_nvidia_driver_apt_pin"] == "570.133.20-*"
    assert r["_nvidia_driver_other_pins"] == []  # apt preferences: the one stanza
    assert r["nvidia_driver_imex"] is False


# ---- cuda, nccl, dcgm -------------------------------------------------------------------------------


def test_cuda_role_knows_exactly_the_matrix_cuda_releases():
    r = role_vars("cuda", facts("debian12", "x86_64"), brief())
    assert r["cuda_package_versions"] == vm.cuda_package_versions()
    assert set(vm.cuda_package_versions()) == set(KNOWN["cuda"])


@pytest.mark.parametrize(("os", "arch"), OS_ARCH)
@pytest.mark.parametrize("cuda", KNOWN["cuda"])
def test_cuda_role_matches_the_matrix(os, arch, cuda):
    r = role_vars("cuda", facts(os, arch), brief(cuda=cuda))
    assert r["cuda_packages"] == vm.value("cuda", "packages", os, arch, cuda=cuda)
    assert r["cuda_home"] == vm.value("cuda", "home", os, arch, cuda=cuda)
    assert r["cuda_package_version"] == vm.cuda_package_versions()[cuda]


@pytest.mark.parametrize(("os", "arch"), OS_ARCH)
@pytest.mark.parametrize("nccl", KNOWN["nccl"])
@pytest.mark.parametrize("cuda", KNOWN["cuda"])
def test_nccl_role_matches_the_matrix(os, arch, nccl, cuda):
    r = role_vars("nccl", facts(os, arch), brief(nccl=nccl, cuda=cuda))
    assert r["nccl_packages"] == vm.value("nccl", "packages", os, arch)
    assert r["nccl_package_version"] == "" and r["_nccl_version_contains"] == f"+cuda{cuda}"


@pytest.mark.parametrize(("os", "arch"), OS_ARCH)
@pytest.mark.parametrize("cuda", KNOWN["cuda"])
def test_dcgm_role_matches_the_matrix(os, arch, cuda):
    r = role_vars("dcgm", facts(os, arch), brief(cuda=cuda))
    major = cuda.split(".")[0]
    version = vm.value("dcgm", "default_version", os, arch)[major]
    assert r["dcgm_version"] == version
    assert r["dcgm_package_version"] == ""
    assert r["dcgm_packages"] == vm.value("dcgm", "packages", os, arch, version, cuda=cuda)
    assert r["dcgm_service"] == vm.value("dcgm", "unit", os, arch)
    assert r["dcgm_hostengine_port"] == vm.value("dcgm", "hostengine_port", os, arch)


@pytest.mark.parametrize(("os", "arch"), OS_ARCH)
@pytest.mark.parametrize("exporter", KNOWN["dcgm-exporter"])
def test_dcgm_exporter_role_matches_the_matrix(os, arch, exporter):
    r = role_vars("dcgm_exporter", facts(os, arch), brief(), {"dcgm_exporter_version": exporter})
    package = vm.value("dcgm-exporter", "package", os, arch, exporter)
    assert r["dcgm_exporter_package"] == package
    assert r["dcgm_exporter_package_version"] == ""
    # dnf's spec before the host resolved the release: the release at any revision.
    assert r["_dcgm_exporter_install_spec"] == f"{package}-{exporter}-*"
    assert r["dcgm_exporter_service"] == vm.value("dcgm-exporter", "unit", os, arch)
    assert r["dcgm_exporter_binary"] == vm.value("dcgm-exporter", "binary", os, arch)
    assert r["dcgm_exporter_port"] == vm.value("dcgm-exporter", "port", os, arch)


@pytest.mark.parametrize(("os", "arch"), OS_ARCH)
@pytest.mark.parametrize("cuda", KNOWN["cuda"])
def test_dcgm_exporter_pairs_with_the_dcgm_role_release(os, arch, cuda):
    """The exporter NVIDIA builds for the DCGM release the dcgm role installs for this CUDA."""
    dcgm = role_vars("dcgm", facts(os, arch), brief(cuda=cuda))["dcgm_version"]
    r = role_vars("dcgm_exporter", facts(os, arch), brief(cuda=cuda))
    assert r["dcgm_exporter_dcgm_version"].strip() == dcgm
    assert r["dcgm_exporter_version"] == vm.value("dcgm-exporter", "default_version", os, arch)[dcgm]
    assert r["dcgm_exporter_version"] in KNOWN["dcgm-exporter"]


def test_dcgm_exporter_follows_an_inventory_dcgm_release_and_refuses_to_guess():
    os, arch = OS_ARCH[0]
    # The inventory's dcgm_version (visible to both roles) wins over the CUDA rule.
    r = role_vars("dcgm_exporter", facts(os, arch), brief(cuda="12.8"), {"dcgm_version": "4.4.0"})
    assert r["dcgm_exporter_version"] == "4.5.0"
    # A DCGM release without a known pair leaves the exporter empty, which the role's check refuses.
    r = role_vars("dcgm_exporter", facts(os, arch), brief(cuda="12.8"), {"dcgm_version": "4.3.1"})
    assert r["dcgm_exporter_version"] == ""
    # An exporter release set by hand is kept.
    r = role_vars("dcgm_exporter", facts(os, arch), brief(cuda="13.0"), {"dcgm_exporter_version": "4.1.3"})
    assert r["dcgm_exporter_version"] == "4.1.3"


@pytest.mark.parametrize("family", sorted(set(vm.OS_FAMILY.values())))
def test_dcgm_exporter_installs_and_locks_the_pinned_package_on_every_os_family(family):
    """Each OS family of the matrix has an install path that installs the pinned spec and holds it."""
    tasks = yaml.safe_load((ROOT / "roles/dcgm_exporter/tasks" / f"setup-{family}.yml").read_text())
    if family == "Debian":
        # One gpufleet.cluster.pinned_packages task installs the package at the pin and holds it.
        installs = [t["gpufleet.cluster.pinned_packages"] for t in tasks if "gpufleet.cluster.pinned_packages" in t]
        assert [(t["name"], t["upstream_version"], t["hold"]) for t in installs] == [
            (
                ["{{ dcgm_exporter_package }}"],
                "{{ omit if dcgm_exporter_package_version else dcgm_exporter_version }}",
                "{{ dcgm_exporter_hold }}",
            )
        ]
        return
    manager = {"RedHat": "ansible.builtin.dnf"}[family]
    installs = [t for t in tasks if manager in t]
    assert [t[manager]["name"] for t in installs] == ["{{ _dcgm_exporter_install_spec }}"]
    hold = {"RedHat": "community.general.dnf_versionlock"}[family]
    assert [t for t in tasks if hold in t and "dcgm_exporter_hold" in t["when"]], f"{family}: nothing holds it"


def test_the_exporter_package_ships_in_the_repository_the_driver_role_adds():
    for os in vm.OSES:
        assert vm.value("dcgm-exporter", "repository", os) == "cuda", os


# ---- container toolkit, DOCA-OFED, PMIx -------------------------------------------------------------


@pytest.mark.parametrize(("os", "arch"), OS_ARCH)
@pytest.mark.parametrize("toolkit", KNOWN["container-toolkit"])
def test_container_runtime_role_matches_the_matrix(os, arch, toolkit):
    r = role_vars("container_runtime", facts(os, arch), {"software": {"container_toolkit": toolkit}})
    assert r["container_runtime_toolkit_repo_url"] == vm.value("container-toolkit", "repo_url", os, arch)
    assert r["container_runtime_toolkit_repo_key_url"] == vm.value("container-toolkit", "key_url", os, arch)
    assert r["container_runtime_toolkit_packages"] == vm.value("container-toolkit", "packages", os, arch)
    assert r["container_runtime_toolkit_package_version"] == ""
    if vm.value("container-toolkit", "containerd_dry_run", os, arch, toolkit) == "drop-in+top-level":
        assert r["container_runtime_containerd_drop_in"] == vm.value(
            "container-toolkit", "containerd_drop_in", os, arch, toolkit
        )


@pytest.mark.parametrize(("os", "arch"), OS_ARCH)
@pytest.mark.parametrize("doca", KNOWN["doca-ofed"])
def test_rdma_doca_repository_matches_the_matrix(os, arch, doca):
    r = role_vars("rdma", facts(os, arch), {"software": {"rdma_stack": "doca-ofed", "doca_ofed": doca}})
    assert r["rdma_doca_repo_url"].strip() == vm.value("doca-ofed", "repo_url", os, arch, doca, doca=doca)
    assert r["rdma_doca_repo_key_url"] == vm.value("doca-ofed", "key_url", os, arch, doca)
    assert r["rdma_doca_packages"] == vm.value("doca-ofed", "packages", os, arch, doca)


def test_doca_paths_named_by_nvidia():
    r = role_vars("rdma", facts("rhel9", "aarch64"), {"software": {"doca_ofed": "3.1.0"}})
    assert r["rdma_doca_repo_url"].strip() == "https://linux.mellanox.com/public/repo/doca/3.1.0/rhel9.6/arm64-sbsa/"
    r = role_vars("rdma", facts("rhel9", "x86_64"), {"software": {"doca_ofed": "3.2.0"}})
    assert r["rdma_doca_repo_url"].strip() == "https://linux.mellanox.com/public/repo/doca/3.2.0/rhel9/x86_64/"


@pytest.mark.parametrize("os", [o for o in vm.OSES if vm.OS_FAMILY[o] == "Debian"])
@pytest.mark.parametrize("role", ["slurm_node", "slurm_controller"])
def test_slurm_pmix_package_matches_the_matrix(os, role):
    r = role_vars(role, facts(os, "x86_64"), {"cluster": {"name": "t"}, "controllers": {"group": "ctl"}})
    assert vm.value("pmix", "runtime_package", os) in r[f"{role}_packages"]


# ---- GPU Operator chart values -----------------------------------------------------------------------


@pytest.mark.parametrize("chart", [*KNOWN["gpu-operator"], None])
def test_gpu_operator_default_runtime_only_where_the_chart_has_it(chart):
    example = yaml.safe_load((ROOT / "inventories/example-h200-roce-k8s/brief.yml").read_text())
    example["software"]["gpu_operator"] = chart
    if chart is None:
        del example["software"]["gpu_operator"]
    values = k8s.gpu_operator_values(example)
    expected = (
        vm.value("gpu-operator", "values.operator.defaultRuntime", "ubuntu2404", version=chart) if chart else None
    )
    assert values.get("operator", {}).get("defaultRuntime") == expected


# ---- the example briefs can converge -----------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(ROOT.glob("inventories/*/brief.yml")), ids=lambda p: p.parent.name)
def test_example_briefs_pin_what_the_roles_can_install(path: Path):
    b = yaml.safe_load(path.read_text())
    sw = b["software"]
    cuda = str(sw["cuda"])
    assert cuda in vm.cuda_package_versions(), f"{path}: CUDA {cuda} unknown to the cuda role"
    major = int(cuda.split(".")[0])
    assert major in compat.nccl_cuda_majors(sw["nccl"]), f"{path}: NCCL {sw['nccl']} not built for CUDA {major}"
    assert str(major) in vm.value("dcgm", "default_version", "debian12")
    assert compat.cuda_driver_ok(cuda, sw["driver"]), f"{path}: driver {sw['driver']} too old for CUDA {cuda}"


# ---- the generated document -------------------------------------------------------------------------


def test_vendor_matrix_doc_is_up_to_date():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_vendor_matrix_doc"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


# ---- facts NVIDIA publishes that a rule got wrong (each fails on the value the rule gave) ---------


def test_debian13_repository_is_signed_with_its_own_key():
    r = role_vars("nvidia_driver", facts("debian13", "x86_64"), brief())
    assert r["nvidia_driver_repo_key_url"].endswith("/debian13/x86_64/8793F200.pub")
    r = role_vars("nvidia_driver", facts("debian12", "x86_64"), brief())
    assert r["nvidia_driver_repo_key_url"].endswith("/debian12/x86_64/3bf863cc.pub")


@pytest.mark.parametrize("os", vm.OSES)
@pytest.mark.parametrize("driver", ["570.133.20", "580.95.05", "580.126.09", "590.48.01", "595.91.07"])
def test_the_driver_role_spells_no_revision_suffix(os, driver):
    """The revision follows the release, not the branch (Ubuntu: 580.95.05-0ubuntu1 beside
    580.126.09-1ubuntu1, the vendor matrix's driver rows), so the role asks the repository for it: it
    passes the upstream release, and an exact version only where the inventory sets one."""
    r = role_vars("nvidia_driver", facts(os, "x86_64"), brief(driver=driver))
    assert r["_nvidia_driver_exact"] == {}
    assert r["_nvidia_driver_apt_pin"] == f"{driver}-*"
    r = role_vars(
        "nvidia_driver",
        facts(os, "x86_64"),
        brief(driver=driver),
        {
            "nvidia_driver_package_version": f"{driver}-0ubuntu1",
            "nvidia_driver_fabricmanager_package_version": f"{driver}-1",
        },
    )
    assert set(r["_nvidia_driver_exact"].values()) == {f"{driver}-0ubuntu1"} | (
        {f"{driver}-1"} if r["_nvidia_driver_fm_packages"] else set()
    )


def test_the_driver_install_task_passes_the_release_not_a_version():
    tasks = yaml.safe_load((ROOT / "roles/nvidia_driver/tasks/setup-Debian.yml").read_text())
    (install,) = [t["gpufleet.cluster.pinned_packages"] for t in tasks if "gpufleet.cluster.pinned_packages" in t]
    assert install["upstream_version"] == "{{ nvidia_driver_version }}"
    assert install["versions"] == "{{ _nvidia_driver_exact }}" and "version" not in install


@pytest.mark.parametrize(
    ("driver", "name"), [("575.57.08", "nvidia-fabricmanager-575"), ("580.95.05", "nvidia-fabricmanager")]
)
def test_debian_fabric_manager_drops_the_branch_from_580(driver, name):
    r = role_vars("nvidia_driver", facts("debian12", "x86_64"), brief(driver=driver))
    assert r["nvidia_driver_fabricmanager_packages"] == [name]


def test_ubuntu_pins_and_holds_nvidia_persistenced_with_the_driver():
    r = role_vars("nvidia_driver", facts("ubuntu2404", "x86_64"), brief(driver="580.126.09"))
    assert "nvidia-persistenced" in r["_nvidia_driver_all_packages"]


@pytest.mark.parametrize(
    ("os", "doca", "path"),
    [
        ("debian12", "2.9.0", "2.9.0/debian12.5/x86_64/"),
        ("debian12", "3.2.0", "3.2.0/debian12/x86_64/"),
        ("debian13", "3.2.0", "3.2.0/debian13/x86_64/"),
    ],
)
def test_doca_on_debian_is_published_under_the_point_release_before_3_2(os, doca, path):
    r = role_vars("rdma", facts(os, "x86_64"), {"software": {"rdma_stack": "doca-ofed", "doca_ofed": doca}})
    assert r["rdma_doca_repo_url"].strip() == "https://linux.mellanox.com/public/repo/doca/" + path


def test_doca_debian_point_release_is_a_variable():
    r = role_vars(
        "rdma",
        facts("debian12", "x86_64"),
        {"software": {"rdma_stack": "doca-ofed", "doca_ofed": "2.10.0"}},
        {"rdma_doca_debian_release": "12.9"},
    )
    assert r["rdma_doca_repo_url"].strip() == "https://linux.mellanox.com/public/repo/doca/2.10.0/debian12.9/x86_64/"
