"""Preflight warns, naming the variable, when a file a role downloads has no checksum; the table of
downloads (module_utils/preflight/downloads.py) follows the roles' defaults."""

from __future__ import annotations

import os
import re

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.downloads import ACCEPT_VAR, DOWNLOADS
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import READ_HOST_VARS, check
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import site

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, *[os.pardir] * 6))
SUM = "sha256:" + "ab" * 32
ENROOT = ("enroot_pyxis_enroot_checksum", "enroot_pyxis_enroot_caps_checksum", "enroot_pyxis_pyxis_checksum")


def _warnings(name, **values):
    brief, groups, hostvars = site(name)
    for hv in hostvars.values():
        hv.update(values)
    found = [v for v in check(brief, groups, hostvars) if v["code"] == "DOWNLOAD_NO_CHECKSUM"]
    assert all(v["severity"] == "warning" and v["host"] is None for v in found)
    return {v["field"]: v["message"] for v in found}


def test_enroot_and_pyxis_without_checksums_warn_once_per_variable():
    found = _warnings("slurm", enroot_pyxis_enabled=True)
    assert sorted(found) == sorted(ENROOT)
    message = found["enroot_pyxis_enroot_caps_checksum"]
    assert message.startswith("expected a checksum for the enroot+caps .deb package")
    assert "enroot_pyxis_enroot_caps_url" in message and "role enroot_pyxis" in message and ACCEPT_VAR in message
    assert re.search(r"unchecked on \d+ host\(s\) \(\S+, \S+, \S+ and \d+ more\)", message), message


def test_enroot_off_downloads_nothing():
    assert _warnings("slurm") == {}
    assert _warnings("slurm", enroot_pyxis_enabled="false") == {}


def test_checksums_set_in_the_inventory_silence_the_warnings():
    sums = dict.fromkeys(ENROOT, SUM)
    assert _warnings("slurm", enroot_pyxis_enabled=True, **sums) == {}


def test_an_empty_checksum_is_no_checksum():
    assert set(_warnings("slurm", enroot_pyxis_enabled=True, enroot_pyxis_enroot_checksum=" ")) == set(ENROOT)
    assert set(_warnings("slurm", nccl_tests_checksum="")) == {"nccl_tests_checksum"}


def test_enroot_caps_off_needs_no_caps_checksum():
    found = _warnings("slurm", enroot_pyxis_enabled=True, enroot_pyxis_enroot_caps=False)
    assert "enroot_pyxis_enroot_caps_checksum" not in found and "enroot_pyxis_enroot_checksum" in found


def test_a_switch_still_to_be_templated_counts_as_on():
    assert set(_warnings("slurm", enroot_pyxis_enabled="{{ site_containers }}")) == set(ENROOT)


def test_a_download_the_site_accepts_unchecked_is_not_warned_about():
    found = _warnings("slurm", enroot_pyxis_enabled=True, **{ACCEPT_VAR: ["enroot_pyxis_pyxis_checksum"]})
    assert sorted(found) == sorted(ENROOT[:2])


def test_kubernetes_manifests_without_checksums_warn():
    brief, groups, hostvars = site("k8s")
    for hv in hostvars.values():
        hv.pop("kubernetes_control_plane_calico_operator_checksum", None)
        hv.pop("kueue_manifest_checksum", None)
    found = {v["field"] for v in check(brief, groups, hostvars) if v["code"] == "DOWNLOAD_NO_CHECKSUM"}
    assert found == {"kubernetes_control_plane_calico_operator_checksum", "kueue_manifest_checksum"}


def test_the_filter_and_the_cli_pass_every_variable_the_check_reads():
    for d in DOWNLOADS:
        assert d.checksum_var in READ_HOST_VARS
        assert {name for name, _default in d.switches} <= set(READ_HOST_VARS)
    assert ACCEPT_VAR in READ_HOST_VARS


def _role_defaults():
    out = {}
    roles = os.path.join(ROOT, "roles")
    for role in sorted(os.listdir(roles)):
        path = os.path.join(roles, role, "defaults", "main.yml")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                out[role] = yaml.safe_load(fh) or {}
    return out


def test_the_table_lists_every_checksum_variable_of_the_roles_with_its_default():
    defaults = _role_defaults()
    in_roles = {(role, k): v for role, d in defaults.items() for k, v in d.items() if k.endswith("_checksum")}
    assert {(d.role, d.checksum_var) for d in DOWNLOADS} == set(in_roles)
    for d in DOWNLOADS:
        assert d.default == in_roles[(d.role, d.checksum_var)], d.checksum_var
        assert d.url_var in defaults[d.role], d.url_var
        for name, default in d.switches:
            assert defaults[d.role][name] is default, name


@pytest.mark.parametrize("d", DOWNLOADS, ids=[d.checksum_var for d in DOWNLOADS])
def test_every_download_is_in_the_security_doc(d):
    with open(os.path.join(ROOT, "docs", "security.md"), encoding="utf-8") as fh:
        text = fh.read()
    section = text.split("## Downloads", 1)[1].split("\n## ", 1)[0]
    assert f"`{d.checksum_var}`" in section and f"`{d.url_var}`" in section
