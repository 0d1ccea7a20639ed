"""The scratch consent/refusal rules, on lsblk / wipefs output in their real JSON formats.

The rule that matters most: a device holding a filesystem (or anything) is never wiped without consent,
and the OS disk or a device in use is never touched, consent or not.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.storage import FilterModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.storage import plane as storage
from ansible_collections.gpufleet.cluster.plugins.module_utils.storage.plane import (
    StoragePlanError,
    mount_unit_name,
    scratch_plan,
    shared_mounts,
)

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "storage")
PATH = "/scratch/local"
DATA = ["/dev/nvme1n1", "/dev/nvme2n1", "/dev/nvme3n1", "/dev/nvme4n1"]


def load(name):
    with open(os.path.join(FIX, name), encoding="utf-8") as fh:
        return json.load(fh)


def plan(fixture, devices, consent=False, signatures=None, path=PATH):
    return scratch_plan(load(fixture), devices, host="gpu01", path=path, consent=consent, signatures=signatures)


def codes(p, severity=None):
    return [v["code"] for v in p["violations"] if severity is None or v["severity"] == severity]


# --- clean devices ------------------------------------------------------------------------------------


def test_clean_devices_become_a_raid0_without_consent_and_nothing_is_wiped():
    p = plan("lsblk_fresh.json", DATA)
    assert p["action"] == storage.CREATE
    assert p["create_raid"] and p["mkfs"]
    assert p["target"] == "/dev/md/gf-scratch"
    assert p["wipe"] == [] and p["findings"] == [] and p["violations"] == []


def test_one_clean_device_is_used_as_it_is():
    p = plan("lsblk_fresh.json", ["/dev/nvme2n1"])
    assert (p["action"], p["target"], p["create_raid"]) == ("create", "/dev/nvme2n1", False)


def test_no_devices_means_nothing_to_do():
    p = plan("lsblk_fresh.json", [])
    assert p["action"] == storage.SKIP and p["target"] is None


def test_short_names_from_lsblk_without_p_are_understood():
    data = {"blockdevices": [{"name": "sdb", "type": "disk", "fstype": None, "mountpoint": None}]}
    p = scratch_plan(data, ["/dev/sdb"], host="h", path=PATH)
    assert p["action"] == "create" and p["target"] == "/dev/sdb"


# --- the consent rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "found"),
    [
        ("/dev/nvme1n1", "a xfs filesystem (label data)"),
        ("/dev/nvme2n1", "partitions /dev/nvme2n1p1"),
    ],
)
def test_a_device_holding_something_is_never_wiped_without_consent(device, found):
    p = plan("lsblk_dirty.json", [device, "/dev/nvme4n1"])
    assert p["action"] == storage.REFUSE
    assert p["wipe"] == [] and not p["mkfs"] and not p["create_raid"] and p["target"] is None
    assert p["findings"] == [{"device": device, "found": [found]}]
    (v,) = p["violations"]
    assert (v["code"], v["severity"], v["host"]) == ("SCRATCH_DEVICE_NOT_EMPTY", "warning", "gpu01")
    assert device in v["message"] and found in v["message"] and "storage_scratch_wipe" in v["message"]


def test_signatures_only_wipefs_sees_also_need_consent():
    sig = {"/dev/nvme6n1": load("wipefs_nvme6n1.json")}
    p = plan("lsblk_dirty.json", ["/dev/nvme6n1"], signatures=sig)
    assert p["action"] == "refuse" and p["wipe"] == []
    assert p["findings"][0]["found"] == ["gpt signature at 0x37e3ee55e00", "PMBR signature at 0x1fe"]
    # Without the wipefs evidence the same device looks empty: the role must always gather it.
    assert plan("lsblk_dirty.json", ["/dev/nvme6n1"])["action"] == "create"


def test_with_consent_every_device_holding_something_is_wiped_partitions_first():
    sig = {"/dev/nvme1n1": load("wipefs_nvme1n1.json")}
    p = plan("lsblk_dirty.json", ["/dev/nvme1n1", "/dev/nvme2n1", "/dev/nvme4n1"], consent=True, signatures=sig)
    assert p["action"] == "create" and p["violations"] == []
    assert p["wipe"] == ["/dev/nvme1n1", "/dev/nvme2n1p1", "/dev/nvme2n1"]
    assert [f["device"] for f in p["findings"]] == ["/dev/nvme1n1", "/dev/nvme2n1"]
    assert p["findings"][0]["found"] == ["a xfs filesystem (label data)"]  # wipefs' xfs is not repeated


def test_one_refused_device_stops_the_whole_scratch():
    p = plan("lsblk_dirty.json", ["/dev/nvme4n1", "/dev/nvme1n1"])
    assert p["action"] == "refuse" and p["target"] is None and not p["create_raid"]


# --- never touched, even with consent -------------------------------------------------------------------


@pytest.mark.parametrize("consent", [False, True])
@pytest.mark.parametrize("device", ["/dev/nvme0n1", "/dev/nvme0n1p3", "/dev/nvme0n1p1", "/dev/mapper/vg0-root"])
def test_the_os_disk_is_refused_even_with_consent(device, consent):
    p = plan("lsblk_fresh.json", [device, "/dev/nvme1n1"], consent=consent)
    assert p["action"] == storage.ERROR and p["wipe"] == [] and not p["mkfs"]
    assert codes(p) == ["SCRATCH_DEVICE_OS_DISK"]
    assert device in p["violations"][0]["message"]


def test_a_whole_disk_root_without_partitions_is_refused():
    p = scratch_plan(load("lsblk_vm_loop.json"), ["/dev/vda"], host="vm", path=PATH, consent=True)
    assert codes(p) == ["SCRATCH_DEVICE_OS_DISK"] and "/dev/vda holds /" in p["violations"][0]["message"]
    assert scratch_plan(load("lsblk_vm_loop.json"), ["/dev/loop0", "/dev/loop1"], host="vm", path=PATH)["action"] == (
        "create"
    )


@pytest.mark.parametrize("consent", [False, True])
@pytest.mark.parametrize(
    ("device", "why"),
    [
        ("/dev/nvme3n1", "member of active RAID array /dev/md0"),
        ("/dev/nvme5n1", "/dev/nvme5n1 mounted at /mnt/old"),
    ],
)
def test_a_device_in_use_is_refused_even_with_consent(device, why, consent):
    p = plan("lsblk_dirty.json", [device], consent=consent)
    assert p["action"] == "error" and p["wipe"] == []
    assert codes(p) == ["SCRATCH_DEVICE_IN_USE"] and why in p["violations"][0]["message"]


def test_a_missing_device_is_an_error_naming_what_exists():
    p = plan("lsblk_fresh.json", ["/dev/nvme9n1"], consent=True)
    assert codes(p) == ["SCRATCH_DEVICE_MISSING"] and "/dev/nvme1n1" in p["violations"][0]["message"]


def test_a_device_named_twice_is_an_error():
    assert "SCRATCH_DEVICE_DUPLICATE" in codes(plan("lsblk_fresh.json", ["/dev/nvme1n1", "/dev/nvme1n1"]))


def test_every_error_is_reported_at_once():
    p = plan("lsblk_fresh.json", ["/dev/nvme0n1", "/dev/nvme9n1"], consent=True)
    assert sorted(codes(p)) == ["SCRATCH_DEVICE_MISSING", "SCRATCH_DEVICE_OS_DISK"]


# --- idempotence: our own scratch is kept ----------------------------------------------------------------


def test_our_mounted_array_is_left_as_it_is():
    p = plan("lsblk_ours.json", DATA)
    assert (p["action"], p["target"], p["wipe"], p["mkfs"]) == ("none", "/dev/md127", [], False)


def test_our_array_not_mounted_is_only_mounted():
    p = plan("lsblk_ours_unmounted.json", DATA)
    assert (p["action"], p["target"], p["wipe"], p["mkfs"]) == ("mount", "/dev/md127", [], False)


def test_our_array_mounted_at_another_path_is_an_error():
    p = plan("lsblk_ours.json", DATA, path="/scratch/other")
    assert p["action"] == "error" and codes(p) == ["SCRATCH_MOUNTED_ELSEWHERE"]


def test_a_changed_device_list_does_not_rebuild_our_array_even_with_consent():
    p = plan("lsblk_ours.json", DATA[:3], consent=True)
    assert p["action"] == "error" and set(codes(p)) == {"SCRATCH_DEVICE_IN_USE"} and p["wipe"] == []


def test_a_single_device_scratch_is_recognised_by_its_label():
    data = {"blockdevices": [{"name": "/dev/sdb", "type": "disk", "fstype": "xfs", "label": "gf-scratch"}]}
    assert scratch_plan(data, ["/dev/sdb"], host="h", path=PATH)["action"] == "mount"
    data["blockdevices"][0]["label"] = "someone-else"
    assert scratch_plan(data, ["/dev/sdb"], host="h", path=PATH)["action"] == "refuse"


def test_flat_lsblk_list_with_pkname_is_understood():
    flat = {
        "blockdevices": [
            {"name": "/dev/sda", "type": "disk", "fstype": None, "mountpoint": None, "pkname": None},
            {"name": "/dev/sda1", "type": "part", "fstype": "ext4", "mountpoint": "/", "pkname": "/dev/sda"},
            {"name": "/dev/sdb", "type": "disk", "fstype": None, "mountpoint": None, "pkname": None},
        ]
    }
    assert codes(scratch_plan(flat, ["/dev/sda"], host="h", path=PATH, consent=True)) == ["SCRATCH_DEVICE_OS_DISK"]
    assert scratch_plan(flat, ["/dev/sdb"], host="h", path=PATH)["action"] == "create"


def test_real_lsblk_of_this_machine_is_parsed():
    try:
        out = subprocess.run(
            ["lsblk", "-J", "-p", "-o", "NAME,TYPE,FSTYPE,LABEL,MOUNTPOINT,PKNAME"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("no lsblk here")
    nodes = storage.flatten_lsblk(json.loads(out))
    root = [n for n, v in nodes.items() if "/" in v["mounts"]]
    if root:  # in a container / is an overlay: nothing to check
        assert codes(scratch_plan(json.loads(out), root[:1], host="here", path=PATH, consent=True)) == [
            "SCRATCH_DEVICE_OS_DISK"
        ]


def test_misuse_is_an_error_not_a_plan():
    with pytest.raises(StoragePlanError):
        scratch_plan({"nope": 1}, ["/dev/sdb"], host="h", path=PATH)
    with pytest.raises(StoragePlanError):
        scratch_plan(load("lsblk_fresh.json"), "/dev/sdb", host="h", path=PATH)
    flt = FilterModule().filters()["scratch_plan"]
    with pytest.raises(AnsibleFilterError, match="consent must be true or false"):
        flt(load("lsblk_fresh.json"), ["/dev/nvme1n1"], "h", PATH, consent="yes")
    assert flt(load("lsblk_fresh.json"), ["/dev/nvme1n1"], "h", PATH)["action"] == "create"


# --- shared mounts ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "unit"),
    [
        ("/shared/ckpt", "shared-ckpt.mount"),
        ("/shared//ckpt/", "shared-ckpt.mount"),
        ("/mnt/my-data", "mnt-my\\x2ddata.mount"),
        ("/mnt/a b", "mnt-a\\x20b.mount"),
        ("/.hidden", "\\x2ehidden.mount"),
        ("/", "-.mount"),
    ],
)
def test_mount_unit_names_match_systemd_escape(path, unit):
    assert mount_unit_name(path) == unit


def test_mount_unit_names_agree_with_the_real_systemd_escape():
    import shutil

    tool = shutil.which("systemd-escape")
    if not tool:
        pytest.skip("systemd-escape not installed")
    for path in ("/shared/ckpt", "/mnt/my-data", "/data/x_y.z", "/mnt/ä"):
        real = subprocess.run([tool, "--path", "--suffix=mount", path], capture_output=True, text=True).stdout
        assert mount_unit_name(path) == real.strip()


def test_shared_mounts_become_units_with_type_defaults():
    defaults = {"nfs": "rw,hard,vers=4.2", "lustre": "_netdev,flock"}
    got = shared_mounts(
        [
            {"server": "10.0.0.5", "export": "/export/ckpt", "path": "/shared/ckpt", "type": "nfs"},
            {"server": "fd00::5", "export": "/x", "path": "/shared/x", "type": "nfs", "options": "ro"},
            {"server": "10.0.0.9@o2ib", "export": "lfs01", "path": "/lustre", "type": "lustre"},
        ],
        defaults,
    )
    assert [(m["unit"], m["what"], m["options"]) for m in got] == [
        ("shared-ckpt.mount", "10.0.0.5:/export/ckpt", "rw,hard,vers=4.2"),
        ("shared-x.mount", "[fd00::5]:/x", "ro"),
        ("lustre.mount", "10.0.0.9@o2ib:/lfs01", "_netdev,flock"),
    ]
    assert got[0]["automount"] == "shared-ckpt.automount"
    with pytest.raises(StoragePlanError):
        mount_unit_name("relative")


# --- without udev (a container): lsblk shows no filesystem, wipefs does --------------------------------


def test_without_udev_a_filesystem_only_wipefs_sees_is_still_refused():
    # Captured in a lab container: lsblk's FSTYPE is null, wipefs finds the ext4.
    sig = {"/dev/loop0": load("wipefs_loop0_ext4.json")}
    p = plan("lsblk_container_loop.json", ["/dev/loop0"], signatures=sig)
    assert p["action"] == "refuse" and p["wipe"] == []
    assert p["findings"] == [{"device": "/dev/loop0", "found": ["a ext4 filesystem (label olddata)"]}]


def test_without_udev_our_scratch_is_recognised_from_wipefs_and_never_rewiped():
    sig = {"/dev/loop0": load("wipefs_loop0_ours.json")}
    for consent in (False, True):
        p = plan("lsblk_container_loop.json", ["/dev/loop0"], consent=consent, signatures=sig)
        assert (p["action"], p["wipe"], p["mkfs"]) == ("mount", [], False)


def test_a_bind_mounted_disk_in_a_container_is_in_use():
    p = plan("lsblk_container_loop.json", ["/dev/vda"], consent=True)
    assert codes(p) == ["SCRATCH_DEVICE_IN_USE"] and "/root/.ssh/authorized_keys" in p["violations"][0]["message"]


def test_probe_targets_are_the_devices_and_everything_on_them():
    assert storage.probe_targets(load("lsblk_dirty.json"), ["/dev/nvme2n1", "/dev/nvme3n1"]) == [
        "/dev/nvme2n1",
        "/dev/nvme2n1p1",
        "/dev/nvme3n1",
        "/dev/md0",
    ]
    assert storage.probe_targets(load("lsblk_fresh.json"), ["/dev/nvme9n1"]) == ["/dev/nvme9n1"]


def test_our_array_is_recognised_from_wipefs_of_the_array():
    data = load("lsblk_ours_unmounted.json")
    for disk in data["blockdevices"][1:]:
        disk["fstype"] = disk["label"] = None
        disk["children"][0]["fstype"] = disk["children"][0]["label"] = None
    # Without the array's signature it is some active array: in use, never touched.
    assert codes(scratch_plan(data, DATA, host="h", path=PATH, consent=True)) == ["SCRATCH_DEVICE_IN_USE"] * 4
    sig = {"/dev/md127": {"signatures": [{"device": "md127", "offset": "0x0", "type": "xfs", "label": "gf-scratch"}]}}
    p = scratch_plan(data, DATA, host="h", path=PATH, consent=True, signatures=sig)
    assert (p["action"], p["target"], p["wipe"]) == ("mount", "/dev/md127", [])
