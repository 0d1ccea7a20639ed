"""The hardware gate's JUnit XML (hardware_gate_junit filter): parsed back, one case per node per check."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.hardware_gate import hardware_gate
from ansible_collections.gpufleet.cluster.plugins.filter.hardware_gate_junit import hardware_gate_junit
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw import gate as hwgate
from hw_helpers import brief_and_pool, healthy_facts


def parse(xml_text: str) -> dict:
    root = ET.fromstring(xml_text)
    out = {}
    for suite in root.findall("testsuite"):
        for tc in suite.findall("testcase"):
            failure = tc.find("failure")
            out[(suite.get("name"), tc.get("name"))] = None if failure is None else failure.text
    return out


def test_every_code_belongs_to_one_check():
    listed = [code for codes in hwgate.CHECKS.values() for code in codes]
    assert sorted(listed) == sorted(hwgate.CODES)


def test_a_node_with_fewer_gpus_fails_that_check_only():
    brief, pool = brief_and_pool()
    good = hardware_gate(healthy_facts(), brief, pool, "gpu001")
    facts = copy.deepcopy(healthy_facts())
    facts["gpus"] = facts["gpus"][:-1]
    bad = hardware_gate(facts, brief, pool, "gpu002")
    assert good == [] and any(v["code"] == "HW_GPU_COUNT" for v in bad)
    cases = parse(hardware_gate_junit({"gpu001": good, "gpu002": bad}, "lab", unreachable=["gpu003"]))
    assert {name for host, name in cases if host == "gpu001"} == set(hwgate.CHECKS)
    assert all(cases[("gpu001", name)] is None for name in hwgate.CHECKS)
    assert "HW_GPU_COUNT" in cases[("gpu002", "GPUs")]
    failed = {name for (host, name), text in cases.items() if host == "gpu002" and text}
    # Each failed check is one that a violation of the node names.
    assert failed == {_check_of(v["code"]) for v in bad if v["severity"] == "error"}
    assert "not judged" in cases[("gpu003", "facts gathered")]
    root = ET.fromstring(hardware_gate_junit({"gpu001": good, "gpu002": bad}, "lab", unreachable=["gpu003"]))
    assert root.get("failures") == str(len(failed) + 1)


def _check_of(code: str) -> str:
    return next(name for name, codes in hwgate.CHECKS.items() if code in codes)


def test_warnings_are_output_not_failures():
    warning = {"severity": "warning", "code": "HW_VERSION_KERNEL", "host": "gpu001", "field": "f", "message": "m"}
    root = ET.fromstring(hardware_gate_junit({"gpu001": [warning]}, "lab"))
    tc = root.find("testsuite/testcase[@name='versions']")
    assert tc.find("failure") is None
    assert tc.find("system-out").text == "warning HW_VERSION_KERNEL: m"


def test_unknown_code_gets_its_own_case():
    odd = {"severity": "error", "code": "HW_SOMETHING_NEW", "host": "gpu001", "field": "f", "message": "m"}
    assert parse(hardware_gate_junit({"gpu001": [odd]}, "lab"))[("gpu001", "HW_SOMETHING_NEW")] == "HW_SOMETHING_NEW: m"


@pytest.mark.parametrize("bad", [[], "x", {"gpu001": "x"}])
def test_misuse(bad):
    with pytest.raises(AnsibleFilterError):
        hardware_gate_junit(bad, "lab")


def test_checks_not_made_are_skipped_not_passed():
    brief, pool = brief_and_pool()
    assert hwgate.not_applicable(brief, pool) == {}
    small = dict(pool, topology="pcie", nics_per_node=0)
    no_fabric = dict(brief, networks={"fabric": {"type": "none"}})
    assert set(hwgate.not_applicable(no_fabric, small)) == {"NVLink", "fabric manager", "RDMA ports", "NIC affinity"}
    root = ET.fromstring(hardware_gate_junit({"gpu001": []}, "lab", brief=no_fabric, pools={"gpu001": small}))
    skipped = {tc.get("name") for tc in root.iter("testcase") if tc.find("skipped") is not None}
    assert skipped == {"NVLink", "fabric manager", "RDMA ports", "NIC affinity"}
    assert root.get("skipped") == "4" and root.get("failures") == "0"
