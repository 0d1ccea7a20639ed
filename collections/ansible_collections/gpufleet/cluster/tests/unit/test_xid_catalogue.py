"""The XID catalogue (module_utils/ops/xid_catalogue.py): its rows, the kernel-log parser and the violations.

The kernel log (fixtures/hw/kernel_log_h100_xids.txt) is in `journalctl -k -b -o short-iso-precise` form:
an application's Xid 13, a contained error in a MIG instance (NVIDIA's own example line from its memory
error management guide), a GPU falling off the bus (79, then the 154 and 45 that follow from it) and a
double-bit ECC error logged twice.
"""

from __future__ import annotations

import re

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import xid_catalogue as xc
from hw_helpers import fixture

LOG = fixture("kernel_log_h100_xids.txt")


# ------------------------------------------------------------------ the table


def test_every_row_is_well_formed_and_cited():
    for key, e in xc.CATALOGUE.items():
        assert key == e.key
        assert e.action in xc.ACTIONS, e
        assert e.source in xc.SOURCES, e
        assert xc.SOURCES[e.source].startswith("https://"), e
        assert e.meaning and "\n" not in e.meaning and "|" not in e.meaning, e
        assert e.confirmed or e.note, f"{key}: an unconfirmed row must say why"
        assert e.nvidia, e


@pytest.mark.parametrize(
    ("code", "action"),
    [
        # NVIDIA's immediate action RESTART_BM: the node reboots.
        (79, "reboot"),
        # RESET_GPU and the ECC / NVLink workflows.
        (48, "reset_gpu"),
        (74, "reset_gpu"),
        (95, "reset_gpu"),
        (119, "reset_gpu"),
        (144, "reset_gpu"),
        # RESTART_APP / IGNORE: the node stays in service.
        (13, "none"),
        (31, "none"),
        (43, "none"),
        (45, "none"),
        (63, "none"),
        (92, "none"),
        (94, "none"),
        (154, "none"),
        # UNEXPECTED_ERR_REPORT_ISSUE: drained for a look.
        (61, "drain"),
    ],
)
def test_nvidias_buckets_become_actions(code, action):
    assert xc.entry(code).action == action


def test_buckets_map_consistently():
    """One bucket, one action: a row that disagrees with the others of its bucket is a typo."""
    by_bucket: dict[str, set] = {}
    for e in xc.xids():
        by_bucket.setdefault(e.nvidia, set()).add(e.action)
    assert {b: a for b, a in by_bucket.items() if len(a) > 1} == {}
    assert by_bucket["RESET_GPU"] == {"reset_gpu"} and by_bucket["RESTART_BM"] == {"reboot"}
    assert by_bucket["RESTART_APP"] == {"none"} and by_bucket["IGNORE"] == {"none"}


def test_drain_reasons_are_the_xids_of_the_actions_asked():
    reasons = xc.drain_reasons(["reboot"])
    assert reasons == {
        79: "GPU has fallen off the bus; action: reboot",
        160: "GPU memory marked for repair; action: reboot",
    }
    assert 13 not in xc.drain_reasons(list(xc.ACTIONS[1:]))
    assert 13 in xc.drain_reasons(list(xc.ACTIONS))


@pytest.mark.parametrize("bad", [["restart"], "everything", 3, {"reboot": 1}])
def test_drain_reasons_name_what_is_wrong(bad):
    with pytest.raises(xc.CatalogueError, match=re.escape("expected")):
        xc.drain_reasons(bad if bad != "everything" else [bad])


# ------------------------------------------------------------------ the kernel log


def test_the_kernel_log_is_parsed_line_by_line():
    events = xc.parse_kernel_log(LOG)
    assert [(e["code"], e["pci"]) for e in events] == [
        (13, "0000:2a:00.0"),
        (13, "0000:2a:00.0"),
        (94, "0000:01:00.0"),
        (79, "0000:1b:00.0"),
        (154, "0000:1b:00.0"),
        (45, "0000:1b:00.0"),
        (48, "0000:3a:00.0"),
        (48, "0000:3a:00.0"),
    ]
    mig = events[2]
    assert mig["gpu_instance"] == 5 and mig["action"] == "none"
    assert mig["text"] == "pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No"
    off = events[3]
    assert off["stamp"] == "2026-03-03T02:11:40.118251+00:00"
    assert (off["meaning"], off["action"], off["name"]) == (
        "GPU has fallen off the bus",
        "reboot",
        "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
    )


def test_xid_154_takes_the_drivers_recovery_action():
    recovery = xc.parse_kernel_log(LOG)[4]
    assert recovery["action"] == "reboot"
    assert recovery["meaning"] == "recovery action changed to Node Reboot Required"
    reset = xc.parse_kernel_log(
        "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
    )
    assert reset[0]["action"] == "reset_gpu"
    # A recovery action never lowers a row's own action.
    assert (
        xc.classify(79, text="GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)")["action"]
        == "reboot"
    )


@pytest.mark.parametrize(
    ("line", "code", "pci"),
    [
        # dmesg without a timestamp prefix of journalctl, no pid (older drivers).
        ("[ 5107.644336] NVRM: Xid (PCI:0000:03:00): 79, GPU has fallen off the bus.", 79, "0000:03:00.0"),
        # Very old drivers: no "PCI:".
        ("[  269.517039] NVRM: Xid (0000:01:00): 62, 0c9a(2e40) 00000000 00000000", 62, "0000:01:00.0"),
        # Upper-case hex is folded.
        ("kernel: NVRM: Xid (PCI:0000:DB:00): 119, pid=1, name=x, Timeout after 6s of waiting", 119, "0000:db:00.0"),
    ],
)
def test_other_kernel_log_forms(line, code, pci):
    (event,) = xc.parse_kernel_log(line)
    assert (event["code"], event["pci"]) == (code, pci)


@pytest.mark.parametrize(
    "text",
    [None, "", "NVRM: GPU 0000:1b:00.0: GPU has fallen off the bus.", "NVRM: Xid (garbage): x", "\x00\xff"],
)
def test_no_xid_no_event(text):
    assert xc.parse_kernel_log(text) == []


def test_an_unknown_xid_drains_for_a_look():
    (event,) = xc.parse_kernel_log("NVRM: Xid (PCI:0000:18:00): 999, pid=1, something new")
    assert (event["known"], event["action"], event["name"]) == (False, "drain", None)


# ------------------------------------------------------------------ nvidia-smi -q events and violations


def test_gpu_events_from_remap_and_ecc_state():
    gpus = [
        {
            "bus_id": "00000000:19:00.0",
            "row_remap": {"pending": True, "failure": False},
            "ecc": {"volatile_uncorrectable": 1},
        },
        {
            "bus_id": "00000000:3B:00.0",
            "row_remap": {"pending": False, "failure": True},
            "ecc": {"volatile_uncorrectable": 0},
        },
        {
            "bus_id": "00000000:4C:00.0",
            "row_remap": {"pending": None, "failure": None},
            "ecc": {"volatile_uncorrectable": None},
        },
        "not a gpu",
    ]
    assert [(e["event"], e["pci"], e["action"]) for e in xc.gpu_events(gpus)] == [
        ("row_remap_pending", "00000000:19:00.0", "reset_gpu"),
        ("ecc_uncorrectable", "00000000:19:00.0", "reset_gpu"),
        ("row_remap_failure", "00000000:3b:00.0", "replace"),
    ]


def test_violations_name_the_xid_its_meaning_and_action_once_per_gpu():
    found = xc.violations("gpu07", xc.parse_kernel_log(LOG), [], codes=("HW_GPU_XID", "HW_GPU_MEMORY_ERROR"))
    by_code = {(v["code"], v["message"].split(" (")[0]) for v in found}
    # The 13s, 94 and 45 need no action; 79 and the 154 after it, and 48 (twice: one violation) do.
    assert by_code == {("HW_GPU_XID", "XID 79"), ("HW_GPU_XID", "XID 154"), ("HW_GPU_XID", "XID 48")}
    assert all(v["severity"] == "error" and v["host"] == "gpu07" and v["field"] == "gpu_errors" for v in found)
    ecc = next(v for v in found if v["message"].startswith("XID 48"))
    assert ecc["message"].startswith(
        "XID 48 (double-bit ECC error; action: reset_gpu) on 0000:3a:00.0 (2 times) in this boot's kernel log"
    )
    assert "ROBUST_CHANNEL_GPU_ECC_DBE" in ecc["message"] and "nvidia-smi -r" in ecc["message"]


def test_violations_can_warn_for_chosen_actions():
    found = xc.violations(None, xc.parse_kernel_log(LOG), [], warn_on=("reset_gpu",))
    assert {(v["message"][:6], v["severity"]) for v in found} == {
        ("XID 79", "error"),
        ("XID 15", "error"),
        ("XID 48", "warning"),
    }


def test_describe():
    assert (
        xc.describe(xc.classify(79, pci="0000:1b:00.0"))
        == "XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0"
    )
    assert xc.describe(xc.gpu_events([{"bus_id": "X", "row_remap": {"failure": True}}])[0]).startswith(
        "Remapped Rows / Remapping Failure Occurred (row remapping failed; action: replace) on x"
    )
