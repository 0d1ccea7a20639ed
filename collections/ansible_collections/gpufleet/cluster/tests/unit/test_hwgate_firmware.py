"""Firmware in the hardware gate: version formats and their order, the judge of one node and of a pool
(through the filters, over several hosts' facts), the record, the JUnit case, preflight, and the doubles."""

from __future__ import annotations

import copy
import json
import re

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.hardware_gate import hardware_gate
from ansible_collections.gpufleet.cluster.plugins.filter.hardware_gate_junit import hardware_gate_junit
from ansible_collections.gpufleet.cluster.plugins.filter.hardware_homogeneity import hardware_homogeneity
from ansible_collections.gpufleet.cluster.plugins.filter.hardware_record import hardware_record
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw import firmware
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw import gate as hwgate
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.facts import (
    build_facts,
    parse_dmi_string,
    parse_smi_q,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight import gate as preflight
from hw_helpers import (
    brief_and_pool,
    codes,
    facts_from_doubles,
    fixture,
    healthy_facts,
    healthy_raw,
    profile_path,
    run_double,
)
from preflight_helpers import site

# --- formats and order


@pytest.mark.parametrize(
    ("kind", "found", "minimum", "expected"),
    [
        # VBIOS: hexadecimal fields, compared as numbers ("0D" is 13, above "09").
        ("vbios", "96.00.99.00.01", "96.00.99.00.01", 0),
        ("vbios", "96.00.74.00.0D", "96.00.99.00.01", -1),
        ("vbios", "96.00.74.00.0D", "96.00.74.00.09", 1),
        ("vbios", "96.00.74.00.0d", "96.00.74.00.0D", 0),
        ("vbios", "96.00.A0.00.01", "96.00.99.00.01", 1),  # A0 (160) after 99 (153)
        ("vbios", "92.00.45.00.03", "96.00.99.00.01", None),  # A100's family is not H100's
        ("vbios", "96.00.99", "96.00.99.00.01", None),
        ("vbios", None, "96.00.99.00.01", None),
        # ConnectX: decimal fields, subminor numerically (1002 after 999), one family only.
        ("nic", "28.39.1002", "28.39.1002", 0),
        ("nic", "28.39.999", "28.39.1002", -1),
        ("nic", "28.41.1000", "28.39.1002", 1),
        ("nic", "28.43.2026", "28.39.1002", 1),
        ("nic", "22.39.1002", "28.39.1002", None),  # ConnectX-6 Dx against a ConnectX-7 minimum
        ("nic", "28.39", "28.39.0", 0),  # missing trailing fields are 0
        ("nic", "28.39.1002 (MT_0000000838)", "28.39.1002", None),
        # BIOS: ordered only as dotted decimals.
        ("bios", "2.19.1", "2.3.5", 1),
        ("bios", "2.3.5", "2.19.1", -1),
        ("bios", "1.4", "1.4.0", 0),
        ("bios", "U54 v2.16 (03/01/2024)", "2.16", None),
        ("bios", "2.19.1", "ESE122T-3.10", None),
    ],
)
def test_compare(kind, found, minimum, expected):
    assert firmware.compare(kind, found, minimum) == expected


def test_settings_pool_overrides_key_by_key():
    brief = {
        "acceptance": {"firmware": {"homogeneous": False, "min": {"vbios": "96.00.99.00.01", "nic": "28.39.1002"}}}
    }
    pool = {"name": "h100-b", "acceptance": {"firmware": {"min": {"nic": "28.41.1000"}}}}
    got = firmware.settings(brief, pool)
    assert got["homogeneous"] is False
    assert got["min"] == {"vbios": "96.00.99.00.01", "nic": "28.41.1000"}
    assert got["fields"] == {
        "vbios": "acceptance.firmware.min.vbios",
        "nic": "pools[h100-b].acceptance.firmware.min.nic",
    }
    assert firmware.settings({}, {})["homogeneous"] is True  # the default
    assert firmware.settings(brief, {"acceptance": {"firmware": {"homogeneous": True}}})["homogeneous"] is True


# --- gathering


def test_vbios_and_bios_are_gathered_in_their_real_formats():
    q, problems = parse_smi_q(fixture("smi_q_h100_healthy.txt"))
    assert problems == [] and {g["vbios_version"] for g in q["gpus"]} == {"96.00.99.00.01"}
    facts = build_facts(dict(healthy_raw(), dmi_bios_version="2.19.1\n", dmi_bios_vendor="Dell Inc.\n"))
    assert [g["vbios_version"] for g in facts["gpus"]] == ["96.00.99.00.01"] * 8
    assert facts["firmware"]["bios"] == {"version": "2.19.1", "vendor": "Dell Inc.", "date": None}
    assert {p["fw_ver"] for p in facts["rdma"]["ports"]} >= {"28.43.2026"}
    # dmidecode's comment lines are not the value; a table it cannot find gives none.
    assert parse_dmi_string("# SMBIOS entry point at 0x6f5fd000\n2.19.1\n") == "2.19.1"
    assert parse_dmi_string("# No SMBIOS nor DMI entry point found, sorry.\n") is None
    assert parse_dmi_string("\n") is None


# --- one node


def _vbios(facts, index, version):
    facts["gpus"][index]["vbios_version"] = version


def _fw(facts, device, version):
    for p in facts["rdma"]["ports"]:
        if p["device"] == device:
            p["fw_ver"] = version


def _facts_with_bios(version="2.4.1"):
    return build_facts(dict(healthy_raw(), dmi_bios_version=f"{version}\n"))


def _brief(firmware_cfg=None):
    brief, pool = brief_and_pool()
    if firmware_cfg is not None:
        brief["acceptance"] = {"firmware": firmware_cfg}
    return brief, pool


def test_healthy_node_passes_with_minimums_it_meets():
    brief, pool = _brief({"min": {"vbios": "96.00.99.00.01", "nic": "28.39.1002", "bios": "2.3"}})
    assert hwgate.check_node("gpu001", _facts_with_bios(), brief, pool) == []


def test_one_odd_gpu_is_mixed_inside_the_node_naming_every_device_and_the_majority():
    brief, pool = _brief()
    facts = _facts_with_bios()
    _vbios(facts, 5, "96.00.74.00.0D")
    (v,) = hwgate.check_node("gpu001", facts, brief, pool)
    assert (v["code"], v["severity"], v["field"]) == ("HW_FIRMWARE_MIXED", "error", "gpus[].vbios_version")
    assert v["message"].startswith(
        "VBIOS differs inside this node: GPU 0-4,6-7 96.00.99.00.01; GPU 5 96.00.74.00.0D; "
        "the majority is 96.00.99.00.01 (7 of 8)"
    )
    # homogeneous: false turns it off, for the brief or for the pool alone.
    assert hwgate.check_node("gpu001", facts, *_brief({"homogeneous": False})) == []
    pool_off = dict(pool, acceptance={"firmware": {"homogeneous": False}})
    assert hwgate.check_node("gpu001", facts, brief, pool_off) == []


def test_a_nic_of_another_family_is_not_mixed_with_the_rails():
    brief, pool = _brief()
    facts = _facts_with_bios()
    pool = dict(pool, rdma_devices=["mlx5_[0-7]", "mlx5_4"])
    _fw(facts, "mlx5_3", "28.39.1002")
    (v,) = hwgate.check_node("gpu001", facts, brief, pool)
    assert v["code"] == "HW_FIRMWARE_MIXED" and "mlx5_3 28.39.1002" in v["message"]
    assert "the majority is 28.43.2026 (7 of 8)" in v["message"]
    _fw(facts, "mlx5_3", "22.39.1002")  # a ConnectX-6 Dx among ConnectX-7s: its own family
    assert hwgate.check_node("gpu001", facts, brief, pool) == []
    # Without a compute fabric in the brief the gate judges no NIC, as its RDMA checks.
    _fw(facts, "mlx5_3", "28.39.1002")
    brief["networks"]["fabric"] = {"type": "none"}
    assert hwgate.check_node("gpu001", facts, brief, dict(pool, rdma_devices=None)) == []
    brief["acceptance"] = {"firmware": {"min": {"nic": "28.44.1000"}}}
    assert hwgate.check_node("gpu001", facts, brief, dict(pool, rdma_devices=None)) == []


def test_old_firmware_per_device_and_the_field_of_the_minimum():
    brief, pool = _brief({"homogeneous": False, "min": {"vbios": "96.00.99.00.01", "nic": "28.44.1000"}})
    facts = _facts_with_bios()
    _vbios(facts, 2, "96.00.74.00.0D")
    _vbios(facts, 3, "96.00.74.00.0D")
    got = hwgate.check_node("gpu001", facts, brief, pool)
    assert codes(got) == {"HW_FIRMWARE_OLD"}
    messages = sorted(v["message"] for v in got)
    assert messages[0].startswith(
        "NIC firmware of mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7 is 28.43.2026, older than "
        "the minimum 28.44.1000 (acceptance.firmware.min.nic)"
    )
    assert messages[1].startswith(
        "VBIOS of GPU 2-3 is 96.00.74.00.0D, older than the minimum 96.00.99.00.01 (acceptance.firmware.min.vbios)"
    )
    # A pool's own minimum is named as the pool's field.
    pool = dict(pool, acceptance={"firmware": {"min": {"nic": "28.40.1000"}}})
    got = hwgate.check_node("gpu001", facts, brief, pool)
    assert [v["field"] for v in got] == ["gpus[].vbios_version"]


def test_what_cannot_be_compared_with_a_minimum():
    brief, pool = _brief({"min": {"bios": "2.3", "nic": "22.39.1002", "vbios": "96.00.99.00.01"}})
    facts = build_facts(dict(healthy_raw(), dmi_bios_version="U54 v2.16 (03/01/2024)\n"))
    _vbios(facts, 0, None)
    got = {
        (v["code"], v["severity"], v["field"]): v["message"] for v in hwgate.check_node("gpu001", facts, brief, pool)
    }
    # A BIOS text the gate cannot order against the site's minimum fails: not a pass.
    assert got[("HW_FIRMWARE_OLD", "error", "firmware.bios.version")].startswith(
        "BIOS is 'U54 v2.16 (03/01/2024)', which cannot be compared with the minimum 2.3"
    )
    # NICs of another family than the minimum's are warned about, not judged.
    nic = got[("HW_FIRMWARE_OLD", "warning", "rdma.ports[].fw_ver")]
    assert "its family 28 is not the minimum's 22" in nic
    # A GPU whose VBIOS was not read while a minimum asks for it.
    assert got[("HW_FACTS_MISSING", "error", "gpus[].vbios_version")].startswith("VBIOS of GPU 0 not read")
    assert len(got) == 3


def test_facts_from_before_firmware_was_gathered():
    """Facts cached by an older gpu_facts (no firmware key, no vbios): no minimum, nothing to judge; a
    minimum makes each device's missing version HW_FACTS_MISSING, never a pass."""
    facts = healthy_facts()
    del facts["firmware"]
    for g in facts["gpus"]:
        del g["vbios_version"]
    assert hwgate.check_node("gpu001", facts, *_brief()) == []
    got = hwgate.check_node("gpu001", facts, *_brief({"min": {"vbios": "96.00.99.00.01", "bios": "2.1"}}))
    assert [(v["code"], v["field"]) for v in got] == [
        ("HW_FACTS_MISSING", "gpus[].vbios_version"),
        ("HW_FACTS_MISSING", "firmware.bios.version"),
    ]
    assert "GPU 0-7 not read" in got[0]["message"]


# --- a pool, through the filters over several hosts' facts


def _pool_facts(n=4):
    return {f"gpu00{i}": _facts_with_bios() for i in range(1, n + 1)}


def test_pool_names_the_odd_node_its_devices_and_the_majority():
    brief, pool = _brief()
    facts = _pool_facts()
    for i in range(8):
        _vbios(facts["gpu003"], i, "96.00.74.00.0D")
    facts["gpu004"]["firmware"]["bios"]["version"] = "2.3.0"
    got = hardware_homogeneity(facts, pool, brief=brief)
    assert [(v["host"], v["code"], v["severity"], v["field"]) for v in got] == [
        ("gpu003", "HW_FIRMWARE_MIXED", "error", "gpus[].vbios_version"),
        ("gpu004", "HW_FIRMWARE_MIXED", "error", "firmware.bios.version"),
    ]
    assert got[0]["message"].startswith(
        "VBIOS of GPU 0-7 is 96.00.74.00.0D here, 3 of 4 nodes in h100-train have 96.00.99.00.01 (the majority)"
    )
    assert got[1]["message"].startswith("BIOS is 2.3.0 here, 3 of 4 nodes in h100-train have 2.4.1")
    # Each node's own gate passes (each is uniform inside); the pool names them.
    assert [hardware_gate(facts[h], brief, pool, h) for h in facts] == [[], [], [], []]
    # homogeneous: false
    assert hardware_homogeneity(facts, pool, brief=_brief({"homogeneous": False})[0]) == []


def test_pool_leaves_a_node_with_one_odd_gpu_to_the_node_check():
    brief, pool = _brief()
    facts = _pool_facts()
    _vbios(facts["gpu002"], 5, "96.00.74.00.0D")
    assert hardware_homogeneity(facts, pool, brief=brief) == []
    assert codes(hardware_gate(facts["gpu002"], brief, pool, "gpu002")) == {"HW_FIRMWARE_MIXED"}


def test_two_nodes_that_differ_are_warned_both():
    brief, pool = _brief()
    facts = _pool_facts(2)
    for i in range(8):
        _fw(facts["gpu002"], f"mlx5_{i}", "28.41.1000")
    got = {v["host"]: v for v in hardware_homogeneity(facts, pool, brief=brief)}
    assert {h: v["severity"] for h, v in got.items()} == {"gpu001": "warning", "gpu002": "warning"}
    assert got["gpu001"]["message"] == (
        "NIC firmware of mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7 is 28.43.2026 here but "
        "28.41.1000 on gpu002 in h100-train; no version is shared by most nodes, so which one is odd cannot be told"
    )
    with pytest.raises(AnsibleFilterError, match="brief must be the brief dict"):
        hardware_homogeneity(facts, pool, brief="brief.yml")


def test_record_summary_and_junit_case():
    brief, pool = _brief()
    facts = _facts_with_bios()
    _vbios(facts, 5, "96.00.74.00.0D")
    found = hardware_gate(facts, brief, pool, "gpu009")
    rec = hardware_record(facts, "gpu009", found, pool)
    assert rec["status"] == "fail" and rec["codes"] == ["HW_FIRMWARE_MIXED"]
    assert rec["summary"]["firmware"] == "VBIOS 96.00.99.00.01 x7 / 96.00.74.00.0D x1, NIC 28.43.2026, BIOS 2.4.1"
    assert hardware_record(_facts_with_bios(), "gpu010", [], pool)["summary"]["firmware"] == (
        "VBIOS 96.00.99.00.01, NIC 28.43.2026, BIOS 2.4.1"
    )
    xml = hardware_gate_junit({"gpu009": found, "gpu010": []}, "lab")
    failed = re.search(
        r'<testcase classname="gpufleet\.hardware_gate\.gpu009" name="firmware \(VBIOS, NIC, BIOS\)">\s*'
        r'<failure message="HW_FIRMWARE_MIXED: VBIOS differs inside this node: GPU 0-4,6-7 96\.00\.99\.00\.01; '
        r"GPU 5 96\.00\.74\.00\.0D;",
        xml,
    )
    assert failed, xml
    assert '<testcase classname="gpufleet.hardware_gate.gpu010" name="firmware (VBIOS, NIC, BIOS)" />' in xml


def test_firmware_codes_are_documented():
    with open(firmware.__file__, encoding="utf-8") as fh:
        used = set(re.findall(r'"(HW_[A-Z_]+)"', fh.read()))
    assert used == {"HW_FIRMWARE_MIXED", "HW_FIRMWARE_OLD", "HW_FACTS_MISSING"} and used <= set(hwgate.CODES)


# --- preflight


def test_preflight_names_each_minimum_it_cannot_order():
    brief, groups, hostvars = site("slurm")
    brief.setdefault("acceptance", {})["firmware"] = {
        "homogeneous": True,
        "min": {"vbios": "96.0.99", "nic": "28.39.1002", "bios": "American Megatrends 5.27"},
    }
    brief["pools"][0]["acceptance"] = {"firmware": {"min": {"nic": "fw 28.41", "vbios": "96.00.99.00.01"}}}
    got = [v for v in preflight.check(brief, groups, hostvars) if v["code"] == "ACCEPT_FIRMWARE_MIN"]
    assert [(v["field"], v["severity"]) for v in got] == [
        ("acceptance.firmware.min.vbios", "error"),
        ("acceptance.firmware.min.bios", "error"),
        ("pools[0].acceptance.firmware.min.nic", "error"),
    ]
    assert got[0]["message"].startswith("expected five two-digit hexadecimal fields like '96.00.99.00.01'")
    assert got[0]["message"].endswith("found '96.0.99'")
    # Good minimums pass; a wrong type is the schema's, naming the field.
    brief["acceptance"]["firmware"]["min"] = {"vbios": "96.00.99.00.01", "bios": 2.1}
    brief["pools"][0]["acceptance"] = {"firmware": {"homogeneous": "yes"}}
    got = preflight.check(brief, groups, hostvars)
    assert [(v["code"], v["field"]) for v in got if "firmware" in v["field"]] == [
        ("SCHEMA_WRONG_TYPE", "pools[0].acceptance.firmware.homogeneous"),
        ("SCHEMA_WRONG_TYPE", "acceptance.firmware.min.bios"),
    ]


# --- the doubles


def test_doubles_print_each_gpus_vbios_and_the_bios_in_the_real_formats(tmp_path):
    path = profile_path("h100-firmware-odd")
    out = run_double("nvidia-smi", ["--query-gpu=index,vbios_version", "--format=csv,noheader"], path)
    assert out.returncode == 0 and out.stdout.splitlines()[5] == "5, 96.00.74.00.0D"
    assert out.stdout.splitlines()[4] == "4, 96.00.99.00.01"
    q = run_double("nvidia-smi", ["-q", "-i", "5"], path).stdout
    assert re.search(r"^    VBIOS Version {25}: 96\.00\.74\.00\.0D$", q, re.M)
    facts = facts_from_doubles("h100-firmware-odd", str(tmp_path / "sys"))
    assert facts["firmware"]["bios"]["version"] == "2.4.1"
    with open(tmp_path / "sys" / "class" / "dmi" / "id" / "bios_date", encoding="utf-8") as fh:
        assert re.fullmatch(r"\d\d/\d\d/\d{4}\n", fh.read())
    # The profile with its own BIOS, as a node whose BIOS was updated apart from its peers.
    with open(path, encoding="utf-8") as fh:
        other = json.load(fh)
    other["bios"] = {"version": "2.3.0"}
    with open(tmp_path / "p.json", "w", encoding="utf-8") as fh:
        json.dump(other, fh)
    assert run_double("gpufleet-double-sysfs", [str(tmp_path / "sys2")], str(tmp_path / "p.json")).returncode == 0
    with open(tmp_path / "sys2" / "class" / "dmi" / "id" / "bios_version", encoding="utf-8") as fh:
        assert fh.read() == "2.3.0\n"


def test_lab_pool_with_the_odd_profile(tmp_path):
    """The lab's doubles end to end: three healthy nodes and h100-firmware-odd, each node's gate and
    the pool's comparison; a minimum above the odd GPU's VBIOS adds HW_FIRMWARE_OLD on it."""
    brief, pool = _brief()
    profiles = {"lab-gpu01": "h100-hgx-healthy", "lab-gpu02": "h100-hgx-healthy"}
    profiles |= {"lab-gpu03": "h100-firmware-odd", "lab-gpu04": "h100-hgx-healthy"}
    facts = {h: facts_from_doubles(p, str(tmp_path / h)) for h, p in profiles.items()}
    per_node = {h: hwgate.check_node(h, f, brief, pool) for h, f in facts.items()}
    assert {h: sorted(codes(v)) for h, v in per_node.items()} == {
        "lab-gpu01": [],
        "lab-gpu02": [],
        "lab-gpu03": ["HW_FIRMWARE_MIXED"],
        "lab-gpu04": [],
    }
    assert "GPU 5 96.00.74.00.0D" in per_node["lab-gpu03"][0]["message"]
    assert hwgate.check_pool_homogeneity(facts, pool, brief) == []
    brief["acceptance"] = {"firmware": {"min": {"vbios": "96.00.99.00.01"}}}
    odd = hwgate.check_node("lab-gpu03", facts["lab-gpu03"], brief, pool)
    assert sorted(codes(odd)) == ["HW_FIRMWARE_MIXED", "HW_FIRMWARE_OLD"]
    assert hwgate.check_node("lab-gpu01", facts["lab-gpu01"], brief, pool) == []


def test_the_brief_section_default_and_copy_safety():
    brief, pool = _brief({"min": {"vbios": "96.00.99.00.01"}})
    snapshot = copy.deepcopy(brief)
    hwgate.check_node("gpu001", _facts_with_bios(), brief, pool)
    assert brief == snapshot
