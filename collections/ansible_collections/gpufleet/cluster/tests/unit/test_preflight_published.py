"""Preflight refuses what NVIDIA does not publish for the brief's OS and versions.

The vendor matrix's ``published`` rows say what NVIDIA's repositories lack (DCGM for debian13, the
driver branches debian13's repository did not carry, the proprietary kernel modules from driver 620)
and its ``built_for_cuda`` rows the CUDA minors each NCCL release was built for. A row a source
confirms is an error; an unconfirmed one a warning. Each names the field, the fact and its source.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import vendor_matrix as vm
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import check
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.versions import check_published
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import site

CODES = {"VER_NOT_PUBLISHED", "VER_NOT_PUBLISHED_UNCONFIRMED", "VER_NCCL_CUDA_NOT_BUILT", "VER_NCCL_CUDA_UNCONFIRMED"}


def brief(os="ubuntu-24.04", control_plane="slurm", **software):
    sw = {"driver": "580.95.05", "driver_flavor": "open", "cuda": "13.0", "nccl": "2.27.7"}
    sw.update(software)
    return {"cluster": {"os": os, "control_plane": control_plane}, "software": sw}


def codes(found):
    return sorted((v["code"], v["severity"], v["field"]) for v in found)


def test_every_os_the_brief_accepts_has_a_matrix_key():
    assert set(vm.BRIEF_OS) == set(schema.OS_CHOICES)
    assert set(vm.BRIEF_OS.values()) <= set(vm.OSES)


def test_a_published_stack_is_clean():
    assert check_published(brief()) == []
    assert check_published(brief(os="debian-12", driver="570.133.20", cuda="12.8", nccl="2.26.2")) == []


def test_dcgm_on_debian13_is_an_error_naming_the_os_the_fact_and_its_source():
    found = check_published(brief(os="debian-13", driver="590.48.01"))
    assert codes(found) == [
        ("VER_NOT_PUBLISHED", "error", "cluster.os"),
        ("VER_NOT_PUBLISHED_UNCONFIRMED", "warning", "cluster.os"),
    ]
    dcgm = next(v for v in found if v["code"] == "VER_NOT_PUBLISHED")
    assert dcgm["message"].startswith("expected DCGM (installed on every GPU host) NVIDIA publishes")
    assert "found cluster.os debian-13" in dcgm["message"]
    assert "debian12, rhel8" in dcgm["message"]
    assert "https://github.com/NVIDIA/cuda-repo-management/issues/41" in dcgm["message"]
    assert "dcgm-exporter" in next(v for v in found if v["code"] == "VER_NOT_PUBLISHED_UNCONFIRMED")["message"]
    # On Kubernetes the GPU Operator brings its own exporter: only DCGM is refused.
    found = check_published(brief(os="debian-13", control_plane="kubernetes", driver="590.48.01"))
    assert codes(found) == [("VER_NOT_PUBLISHED", "error", "cluster.os")]


def test_a_driver_branch_debian13_lacked_is_a_warning_while_unconfirmed():
    found = [v for v in check_published(brief(os="debian-13")) if v["field"] == "software.driver"]
    assert len(found) == 1, found
    (v,) = found
    assert (v["code"], v["severity"]) == ("VER_NOT_PUBLISHED_UNCONFIRMED", "warning")
    assert "found driver 580.95.05 (R580) on debian-13" in v["message"]
    assert "cuda-repo-management/issues/38" in v["message"]
    # From 590 the debian13 repository carries the branch.
    assert [
        v for v in check_published(brief(os="debian-13", driver="590.48.01")) if v["field"] == "software.driver"
    ] == []


@pytest.mark.parametrize(("driver", "refused"), [("595.91.07", False), ("620.10.01", True)])
def test_proprietary_modules_from_620_are_an_error(driver, refused):
    found = [
        v
        for v in check_published(brief(driver=driver, driver_flavor="proprietary"))
        if v["field"] == "software.driver_flavor"
    ]
    assert bool(found) == refused
    if refused:
        (v,) = found
        assert (v["code"], v["severity"]) == ("VER_NOT_PUBLISHED", "error")
        assert "Proprietary Kernel Modules Removed" in v["message"]
        assert "found proprietary with driver 620.10.01" in v["message"]
    # The open modules stay published.
    assert [v for v in check_published(brief(driver=driver)) if v["field"] == "software.driver_flavor"] == []


def test_an_nccl_cuda_pair_nvidia_did_not_build_is_an_error():
    (v,) = check_published(brief(driver="580.126.09", nccl="2.30.4", cuda="13.0"))
    assert (v["code"], v["severity"], v["field"]) == ("VER_NCCL_CUDA_NOT_BUILT", "error", "software.nccl")
    assert "(12.9, 13.2), found CUDA 13.0" in v["message"]
    assert "https://github.com/NVIDIA/nccl/issues/2281" in v["message"]
    assert check_published(brief(driver="580.126.09", nccl="2.30.4", cuda="12.9")) == []


def test_an_unconfirmed_nccl_cuda_pair_is_a_warning():
    (v,) = check_published(brief(nccl="2.29.2", cuda="13.0"))
    assert (v["code"], v["severity"], v["field"]) == ("VER_NCCL_CUDA_UNCONFIRMED", "warning", "software.nccl")
    assert "NCCL 2.29.2 is known to be built for (13.1), found CUDA 13.0" in v["message"]
    (v,) = check_published(brief(nccl="2.28.3", cuda="13.0"))
    assert v["code"] == "VER_NCCL_CUDA_UNCONFIRMED"
    assert "found NCCL 2.28.3" in v["message"]


def test_a_cuda_major_mismatch_is_reported_once():
    """NCCL 2.26.2 is built for CUDA 12 only: VER_NCCL_CUDA says so, the pair check adds nothing."""
    assert check_published(brief(nccl="2.26.2", cuda="13.0")) == []


def test_the_gate_reports_them_and_the_fixture_site_stays_clean():
    b, groups, hostvars = site("slurm")
    assert [v for v in check(b, groups, hostvars) if v["code"] in CODES] == []
    b["cluster"]["os"] = "debian-13"
    hits = [v for v in check(b, groups, hostvars) if v["code"] in CODES]
    assert {v["code"] for v in hits} == {"VER_NOT_PUBLISHED", "VER_NOT_PUBLISHED_UNCONFIRMED"}


@pytest.mark.parametrize("os", ["ubuntu-24.04", "debian-12"])
@pytest.mark.parametrize("driver", ["550.163.01", "570.133.20", "580.126.09"])
def test_no_driver_release_is_warned_for_its_package_revision(os, driver):
    """The driver role resolves the package revision from the repository on the host (it follows the
    release, not the branch): preflight has no revision of its own to doubt."""
    found = check_published(brief(os=os, driver=driver, cuda="12.8", nccl="2.26.2"))
    assert [v for v in found if v["field"] == "software.driver"] == []
