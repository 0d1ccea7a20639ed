"""Preflight: the brief's CUDA is a release the cuda role's table can install.

The cuda role installs cuda-toolkit-<major>-<minor> at the exact version its table
(cuda_package_versions, the vendor matrix's CUDA rows) gives for the brief's CUDA minor, and its
first assert stops on any other, after hosts were already touched. Preflight says it first:
VER_CUDA_PACKAGE_UNKNOWN on software.cuda, naming the known releases and the one found, unless
the inventory pins the package for every GPU host itself.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import vendor_matrix
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import check
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import site

CODE = "VER_CUDA_PACKAGE_UNKNOWN"
KNOWN = sorted(vendor_matrix.cuda_package_versions())


def run(cuda, pin=None, hosts=None):
    """check() of the slurm fixture with software.cuda = cuda; ``pin`` set on ``hosts`` (all GPU hosts by default)."""
    brief, groups, hostvars = site("slurm")
    brief["software"]["cuda"] = cuda
    gpu_hosts = [h for pool in brief["pools"] for h in groups[pool["group"]]]
    for host in gpu_hosts if hosts is None else hosts:
        hostvars[host].update(pin or {})
    return [v for v in check(brief, groups, hostvars) if v["code"] == CODE], gpu_hosts


@pytest.mark.parametrize("cuda", KNOWN)
def test_a_release_the_role_knows_passes(cuda):
    hits, _ = run(cuda)
    assert hits == []


@pytest.mark.parametrize("cuda", ["12.5", "13.1", "11.8"])
def test_a_release_the_role_does_not_know_is_an_error_naming_field_expected_and_found(cuda):
    assert cuda not in KNOWN
    hits, _ = run(cuda)
    assert len(hits) == 1, hits
    (v,) = hits
    assert (v["severity"], v["host"], v["field"]) == ("error", None, "software.cuda")
    assert v["message"].startswith("expected a CUDA release the cuda role can install")
    for known in KNOWN:
        assert known in v["message"]
    assert f"found {cuda}:" in v["message"]


def test_a_yaml_number_is_read_as_the_release_it_spells():
    """`cuda: 13.0` unquoted is the float 13.0: still the release "13.0" the role knows."""
    assert "13.0" in KNOWN
    hits, _ = run(13.0)
    assert hits == []


@pytest.mark.parametrize(
    "pin",
    [{"cuda_package_version": "12.5.1-1"}, {"cuda_package_versions": {"12.5": "12.5.1-1"}}],
    ids=["cuda_package_version", "cuda_package_versions"],
)
def test_a_site_that_pins_the_package_on_every_gpu_host_passes(pin):
    hits, _ = run("12.5", pin)
    assert hits == []


def test_a_pin_on_some_gpu_hosts_only_is_still_an_error():
    _, gpu_hosts = run("12.8")
    assert len(gpu_hosts) > 1
    hits, _ = run("12.5", {"cuda_package_version": "12.5.1-1"}, hosts=gpu_hosts[:1])
    assert len(hits) == 1


def test_a_table_of_the_site_without_this_release_is_still_an_error():
    hits, _ = run("12.5", {"cuda_package_versions": {"12.4": "12.4.1-1"}})
    assert len(hits) == 1
