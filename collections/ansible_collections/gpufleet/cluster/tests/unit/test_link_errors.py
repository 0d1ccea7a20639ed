"""Link error counters: the sysfs reader, the comparison before -> after, the node's verdict, the drain list,
the report section, the brief section and the test doubles (module_utils/acceptance/link_errors.py,
filter/link_errors.py, doubles/bin/gpufleet-double-sysfs and all_reduce_perf)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
from ansible_collections.gpufleet.cluster.plugins.filter.link_errors import link_errors_drain, link_errors_judge
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import link_errors as le
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import build_report, render_markdown
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw import gate as hwgate
from hw_helpers import BRIEF, DOUBLES_BIN, brief_and_pool, facts_from_doubles, profile_path

POOL = copy.deepcopy(BRIEF["pools"][0])
NICS = [f"mlx5_{i}" for i in range(8)]


def tree(root, values=None, *, layer="InfiniBand", devices=NICS, skip=()):
    """A sysfs tree of these devices (port 1), every counter 0 unless ``values`` ({dev: {counter: n}})
    says; ``skip``: (dev, counter) files left out."""
    for dev in devices:
        port = os.path.join(root, "class", "infiniband", dev, "ports", "1")
        os.makedirs(os.path.join(port, "counters"), exist_ok=True)
        for name, text in (("link_layer", layer), ("state", "4: ACTIVE")):
            with open(os.path.join(port, name), "w") as fh:
                fh.write(text + "\n")
        for c in le.COUNTERS:
            if (dev, c) in skip:
                continue
            with open(os.path.join(port, "counters", c), "w") as fh:
                fh.write(f"{((values or {}).get(dev) or {}).get(c, 0)}\n")
    return str(root)


def read(root):
    return {"changed": False, **le.read_ports(str(root))}


def verdict(before, after, brief=BRIEF, pool=POOL):
    return le.judge("gpu01", before, after, pool=pool, brief=brief)


def codes(out):
    return [(v["code"], v["severity"]) for v in out["violations"]]


# --- the comparison of one counter ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("counter", "before", "after", "threshold", "status", "growth"),
    [
        ("symbol_error", 5, 5, 10, "ok", 0),
        ("symbol_error", 5, 15, 10, "ok", 10),  # at the threshold: tolerated
        ("symbol_error", 5, 16, 10, "grew", 11),  # one past it
        ("link_downed", 0, 1, 0, "grew", 1),
        ("link_downed", 7, 2, 0, "grew", 2),  # reset, and at least 2 since
        ("symbol_error", 900, 3, 10, "reset", 3),  # reset, 3 since: within the threshold
        ("symbol_error", 65535, 65535, 10, "saturated", None),  # 16-bit, stuck at its maximum
        ("local_link_integrity_errors", 15, 15, 0, "saturated", None),  # 4-bit
        ("local_link_integrity_errors", 14, 15, 0, "grew", 1),
        ("port_xmit_discards", None, 4, 100, "missing", None),
        ("port_xmit_discards", 4, None, 100, "missing", None),
    ],
)
def test_compare_table(counter, before, after, threshold, status, growth):
    got = le.compare(counter, before, after, threshold)
    assert (got["status"], got["growth"]) == (status, growth)
    assert got["growth"] is None or got["growth"] >= 0  # never a negative growth


def test_widths_are_the_portcounters_fields():
    assert le.saturation("symbol_error") == 0xFFFF
    assert le.saturation("link_downed") == 0xFF
    assert le.saturation("excessive_buffer_overrun_errors") == 0xF
    assert le.saturation("some_64bit_counter") == (1 << 64) - 1


# --- reading sysfs --------------------------------------------------------------------------------


def test_reader_reads_every_port_and_names_what_it_cannot(tmp_path):
    tree(tmp_path, {"mlx5_1": {"symbol_error": 7}}, devices=["mlx5_0", "mlx5_1"], skip={("mlx5_0", "link_downed")})
    with open(tmp_path / "class/infiniband/mlx5_1/ports/1/counters/port_rcv_errors", "w") as fh:
        fh.write("N/A\n")
    got = le.read_ports(str(tmp_path))
    assert got["present"] is True
    by = {p["device"]: p for p in got["ports"]}
    assert by["mlx5_1"]["counters"]["symbol_error"] == 7 and by["mlx5_1"]["link_layer"] == "InfiniBand"
    assert by["mlx5_0"]["missing"] == {"link_downed": "missing"}
    assert by["mlx5_1"]["missing"]["port_rcv_errors"].startswith("not a number")


def test_reader_without_the_class_directory(tmp_path):
    assert le.read_ports(str(tmp_path)) == {"root": str(tmp_path / "class/infiniband"), "present": False, "ports": []}


# --- the node's verdict ---------------------------------------------------------------------------


def test_clean_node_passes(tmp_path):
    root = tree(tmp_path)
    out = verdict(read(root), read(root))
    assert out["violations"] == [] and out["record"]["status"] == "measured"
    assert len(out["record"]["ports"]) == 8 and out["record"]["grew"] == []


def test_growth_names_node_device_port_counter_and_threshold(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    tree(a, {"mlx5_2": {"symbol_error": 3}})
    tree(b, {"mlx5_2": {"symbol_error": 83, "link_downed": 2}})
    out = verdict(read(a), read(b))
    assert codes(out) == [("LINK_ERRORS_GREW", "error")] * 2
    messages = sorted(v["message"] for v in out["violations"])
    assert messages[0].startswith("mlx5_2 port 1 link_downed 0 -> 2 (+2) during the acceptance, tolerated +0")
    assert messages[1].startswith("mlx5_2 port 1 symbol_error 3 -> 83 (+80) during the acceptance, tolerated +10")
    assert {v["host"] for v in out["violations"]} == {"gpu01"}
    assert [(g["device"], g["counter"]) for g in out["record"]["grew"]] == [
        ("mlx5_2", "symbol_error"),
        ("mlx5_2", "link_downed"),
    ]


def test_threshold_edge_and_brief_override(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    tree(a)
    tree(b, {"mlx5_0": {"symbol_error": 10}})
    assert verdict(read(a), read(b))["violations"] == []  # +10 tolerated by default
    strict = copy.deepcopy(BRIEF)
    strict["acceptance"] = {"link_errors": {"max_growth": {"symbol_error": 9}}}
    out = verdict(read(a), read(b), brief=strict)
    assert codes(out) == [("LINK_ERRORS_GREW", "error")]
    assert out["violations"][0]["field"] == "acceptance.link_errors.max_growth.symbol_error"


def test_reset_is_reported_not_a_negative_growth(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    tree(a, {"mlx5_4": {"symbol_error": 500, "port_rcv_errors": 40}})
    tree(b, {"mlx5_4": {"symbol_error": 2, "port_rcv_errors": 0}})
    out = verdict(read(a), read(b))
    assert codes(out) == [("LINK_ERRORS_RESET", "warning")] * 2
    assert "went down 500 -> 2" in " ".join(v["message"] for v in out["violations"])
    rows = [r for p in out["record"]["ports"] for r in p["counters"] if r["status"] == "reset"]
    assert all(r["growth"] >= 0 for r in rows)


def test_reset_with_more_since_than_tolerated_is_a_growth(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    tree(a, {"mlx5_4": {"link_downed": 9}})
    tree(b, {"mlx5_4": {"link_downed": 3}})
    out = verdict(read(a), read(b))
    assert codes(out) == [("LINK_ERRORS_GREW", "error")]
    assert "reset during the acceptance: at least 3 since" in out["violations"][0]["message"]


def test_saturated_counter_is_named(tmp_path):
    a = tree(tmp_path, {"mlx5_6": {"excessive_buffer_overrun_errors": 15}})
    out = verdict(read(a), read(a))
    assert codes(out) == [("LINK_ERRORS_SATURATED", "warning")]
    assert "perfquery -R -C mlx5_6 -P 1" in out["violations"][0]["message"]


def test_missing_counter_file_warns_and_the_rest_is_judged(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    tree(a, skip={("mlx5_1", "port_rcv_remote_physical_errors")})
    tree(b, {"mlx5_1": {"link_downed": 1}}, skip={("mlx5_1", "port_rcv_remote_physical_errors")})
    out = verdict(read(a), read(b))
    assert sorted(codes(out)) == [("LINK_ERRORS_COUNTER_MISSING", "warning"), ("LINK_ERRORS_GREW", "error")]


def test_port_without_counters_is_not_read(tmp_path):
    a = tree(tmp_path, skip={("mlx5_3", c) for c in le.COUNTERS})
    out = verdict(read(a), read(a))
    assert codes(out) == [("LINK_ERRORS_NOT_READ", "error")]
    assert "mlx5_3 port 1 (no counter readable: missing)" in out["violations"][0]["message"]
    assert out["record"]["status"] == "not read"


def test_a_driver_without_pma_is_not_read(tmp_path):
    # iWARP drivers answer each counter file with "N/A (no PMA)".
    root = tree(tmp_path, devices=NICS)
    for c in le.COUNTERS:
        with open(tmp_path / "class/infiniband/mlx5_7/ports/1/counters" / c, "w") as fh:
            fh.write("N/A (no PMA)\n")
    out = verdict(read(root), read(root))
    assert codes(out) == [("LINK_ERRORS_NOT_READ", "error")]
    assert "mlx5_7 port 1 (no counter readable: not a number ('N/A (no PMA)'))" in out["violations"][0]["message"]


def test_expected_port_absent_and_port_gone_after(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    tree(a, devices=NICS[:7])
    tree(b, devices=NICS[:6])
    out = verdict(read(a), read(b))
    assert codes(out) == [("LINK_ERRORS_NOT_READ", "error")]
    msg = out["violations"][0]["message"]
    assert "mlx5_6 port 1 (gone after the NCCL runs)" in msg
    assert "1 of the 8 fabric port(s) the brief expects (pool.nics_per_node) not found" in msg


@pytest.mark.parametrize(
    ("before", "after", "said"),
    [
        (None, "ok", "before the NCCL runs: not read (the task did not run on this node)"),
        ({"failed": True, "msg": "boom"}, "ok", "before the NCCL runs: boom"),
        ("ok", {"unreachable": True, "msg": "ssh: no route"}, "after the NCCL runs: unreachable: ssh: no route"),
        ("ok", {"changed": False}, "after the NCCL runs: the result has no ports"),
    ],
)
def test_a_read_that_failed_is_never_a_pass(tmp_path, before, after, said):
    good = read(tree(tmp_path))
    out = verdict(good if before == "ok" else before, good if after == "ok" else after)
    assert codes(out) == [("LINK_ERRORS_NOT_READ", "error")]
    assert out["violations"][0]["message"].startswith(said)


def test_no_class_directory_is_not_read(tmp_path):
    empty = read(tmp_path)
    out = verdict(empty, empty)
    assert codes(out) == [("LINK_ERRORS_NOT_READ", "error")]


def test_roce_ports_are_judged_like_ib(tmp_path):
    brief = copy.deepcopy(BRIEF)
    brief["networks"]["fabric"]["type"] = "roce"
    a, b = tmp_path / "a", tmp_path / "b"
    tree(a, layer="Ethernet")
    tree(b, {"mlx5_5": {"port_rcv_errors": 1}}, layer="Ethernet")
    out = verdict(read(a), read(b), brief=brief)
    assert codes(out) == [("LINK_ERRORS_GREW", "error")]


def test_only_the_fabric_ports_are_judged(tmp_path):
    # A front-end bond (mlx5_bond_0) whose counters grew is not a fabric port.
    a, b = tmp_path / "a", tmp_path / "b"
    tree(a, devices=[*NICS, "mlx5_bond_0"])
    tree(b, {"mlx5_bond_0": {"link_downed": 3}}, devices=[*NICS, "mlx5_bond_0"])
    out = verdict(read(a), read(b))
    assert out["violations"] == [] and len(out["record"]["ports"]) == 8


def test_no_fabric_is_not_applicable(tmp_path):
    brief = copy.deepcopy(BRIEF)
    brief["networks"]["fabric"]["type"] = "none"
    out = verdict(None, None, brief=brief)
    assert out["violations"] == [] and out["record"]["status"] == "not applicable"


# --- the filter, the drain list and the report ------------------------------------------------------


def test_filter_and_drain_list(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    tree(a)
    tree(b, {"mlx5_2": {"symbol_error": 40, "link_downed": 1}})
    out = link_errors_judge(read(a), read(b), "gpu02", pool=POOL, brief=BRIEF)
    clean = link_errors_judge(read(a), read(a), "gpu01", pool=POOL, brief=BRIEF)
    records = [clean["record"], out["record"]]
    stamp = "20260101T000000Z"
    assert link_errors_drain([], records, stamp=stamp) == [
        {
            "host": "gpu02",
            "reason": "gpufleet acceptance: link errors: mlx5_2 port 1 symbol_error 0->40 (max +10) and 1 more "
            f"(report {stamp})",
        }
    ]
    # A node already listed keeps one entry, both reasons.
    merged = link_errors_drain(
        [{"host": "gpu02", "reason": f"gpufleet acceptance: single-node run failed (report {stamp})"}],
        records,
        stamp=stamp,
    )
    assert len(merged) == 1 and merged[0]["reason"].endswith(
        f"; link errors: {'mlx5_2'} port 1 symbol_error 0->40 (max +10) and 1 more (report {stamp})"
    )
    assert link_errors_drain([], records, stamp=stamp, enabled=False) == []


def test_report_section_and_verdict(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    tree(a)
    tree(b, {"mlx5_2": {"symbol_error": 40}})
    grew = le.judge("gpu02", read(a), read(b), pool=POOL, brief=BRIEF)
    unread = le.judge("gpu03", None, read(a), pool=POOL, brief=BRIEF)
    single = {"label": "single-node gpu02", "scope": "single-node", "host": "gpu02", "floor_gbps": 1, "run": None}
    report = build_report(
        "lab",
        runs=[single],
        violations=[*grew["violations"], *unread["violations"]],
        link_errors=[grew["record"], unread["record"]],
        timestamp="20260101T000000Z",
    )
    assert report["verdict"] == "fail"
    assert report["link_errors"][0]["grew"][0]["counter"] == "symbol_error"
    text = render_markdown(report)
    section = text.split("## Link error counters")[1]
    assert "| gpu02 | measured | 8 | mlx5_2:1 symbol_error 0->40 (max +10) |" in section
    assert "| gpu03 | not read: before the NCCL runs" in section


# --- the brief section ------------------------------------------------------------------------------


def test_brief_section_defaults_and_bad_values():
    growth = schema.LINK_ERRORS.fields["max_growth"].node.fields
    assert {k: f.default for k, f in growth.items()} == le.DEFAULT_MAX_GROWTH
    assert schema.ACCEPTANCE.fields["link_errors"].node is schema.LINK_ERRORS
    brief = copy.deepcopy(BRIEF)
    brief["acceptance"] = {
        "link_errors": {"enabled": "yes", "max_growth": {"symbol_error": -1, "link_flaps": 2}},
    }
    found, _ = schema.validate(brief)
    named = {v["field"] for v in found if v["field"].startswith("acceptance.link_errors")}
    assert named == {
        "acceptance.link_errors.enabled",
        "acceptance.link_errors.max_growth.symbol_error",
        "acceptance.link_errors.max_growth.link_flaps",
    }, found


# --- the doubles ------------------------------------------------------------------------------------


def run_double(name, *args, env=None):
    return subprocess.run(
        [sys.executable, os.path.join(DOUBLES_BIN, name), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_sysfs_double_writes_zero_counters_and_keeps_grown_ones(tmp_path):
    dest = tmp_path / "sysfs"
    profile = profile_path("h100-link-flapping")
    assert run_double("gpufleet-double-sysfs", "--profile", profile, str(dest)).stdout.strip() == "changed"
    got = le.read_ports(str(dest))
    assert len(got["ports"]) == 8
    assert all(p["counters"] == dict.fromkeys(le.COUNTERS, 0) and not p["missing"] for p in got["ports"])
    # all_reduce_perf on this node adds to the flapping port's counters, each run.
    env = {"GPUFLEET_HW_PROFILE": profile, "GPUFLEET_DOUBLE_SYSFS": str(dest)}
    for _ in range(2):
        proc = run_double("all_reduce_perf", "-b", "8", "-e", "1M", "-f", "2", "-g", "8", env=env)
        assert proc.returncode == 0, proc.stderr
    by = {p["device"]: p["counters"] for p in le.read_ports(str(dest))["ports"]}
    assert by["mlx5_2"]["symbol_error"] == 80 and by["mlx5_2"]["link_downed"] == 2
    assert by["mlx5_1"] == dict.fromkeys(le.COUNTERS, 0)
    # Writing the tree again (the profile unchanged) keeps what the counters reached: nothing changes.
    assert run_double("gpufleet-double-sysfs", "--profile", profile, str(dest)).stdout.strip() == "ok"
    assert le.read_ports(str(dest))["ports"][2]["counters"]["symbol_error"] == 80


def test_healthy_profile_never_grows(tmp_path):
    dest = tmp_path / "sysfs"
    profile = profile_path("h100-hgx-healthy")
    run_double("gpufleet-double-sysfs", "--profile", profile, str(dest))
    before = read(dest)
    env = {"GPUFLEET_HW_PROFILE": profile, "GPUFLEET_DOUBLE_SYSFS": str(dest)}
    assert run_double("all_reduce_perf", "-b", "8", "-e", "1M", "-f", "2", "-g", "8", env=env).returncode == 0
    assert verdict(before, read(dest))["violations"] == []


def test_flapping_profile_documents_its_fault():
    with open(profile_path("h100-link-flapping")) as fh:
        data = json.load(fh)
    assert data["fault"]["code"] == "LINK_ERRORS_GREW"
    assert {f["counter"] for f in data["link_errors"]["flapping"]} == {"symbol_error", "link_downed"}


def test_the_hardware_gate_passes_the_flapping_profile(tmp_path):
    # Its port is ACTIVE at full rate: only the counters read around the NCCL runs name it.
    brief, pool = brief_and_pool()
    facts = facts_from_doubles("h100-link-flapping", str(tmp_path))
    assert facts["problems"] == []
    assert hwgate.check_node("lab-gpu02", facts, brief, pool) == []
