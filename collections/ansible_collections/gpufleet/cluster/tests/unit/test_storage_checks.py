"""Preflight of the brief's storage, acceptance.storage and cost sections: each code fails and passes."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import validate
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import check
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import codes, set_path, site

STORAGE = {
    "scratch": {"path": "/scratch/local", "devices": ["/dev/nvme0n1", "/dev/nvme1n1"]},
    "shared": [{"server": "10.20.8.50", "export": "/export/ckpt", "path": "/shared/ckpt"}],
    "checkpoint_root": "/shared/ckpt/tenants",
}
COST = {
    "currency": "EUR",
    "monthly": {"compute": 100000, "network": 5000, "storage": 4000, "support": 2000, "operations": 9000},
    "unit": {"name": "training job", "measure": "completed_jobs"},
    "target_units_per_month": 500,
    "baseline": {"name": "GPU rental", "price_per_unit": 400},
}
FLOORS = {"scratch_write_gbps": 20, "scratch_read_gbps": 25, "shared_write_gbps": 2, "checkpoint_max_restore_s": 60}


def good():
    brief, groups, hostvars = site("slurm")
    brief["storage"] = copy.deepcopy(STORAGE)
    brief["cost"] = copy.deepcopy(COST)
    brief["acceptance"]["storage"] = dict(FLOORS)
    return brief, groups, hostvars


def ours(violations):
    return {
        c
        for c in codes(violations)
        if c.startswith(("STORAGE_", "ACC_STORAGE_", "COST_")) or "storage" in c.lower() or "cost" in c.lower()
    }


def test_the_complete_sections_pass():
    brief, groups, hostvars = good()
    found = check(brief, groups, hostvars)
    assert not ours(found), found
    schema, clean = validate(brief)
    assert not schema
    assert clean["storage"]["scratch"]["raid_level"] == 0
    assert clean["storage"]["scratch"]["filesystem"] == "xfs"
    assert clean["storage"]["shared"][0]["type"] == "nfs"
    assert clean["cost"]["monthly"]["support"] == 2000
    assert clean["acceptance"]["storage"]["checkpoint_size_gib"] == 4


def test_sections_are_optional():
    brief, groups, hostvars = site("slurm")
    assert not ours(check(brief, groups, hostvars))
    _, clean = validate(brief)
    assert "storage" not in clean and "cost" not in clean


CASES = [
    # (id, path in the brief, value, code, severity)
    ("device-not-dev", "storage.scratch.devices", ["nvme0n1"], "SCHEMA_BAD_FORMAT", "error"),
    (
        "duplicate-device",
        "storage.scratch.devices",
        ["/dev/nvme0n1", "/dev/nvme0n1"],
        "STORAGE_SCRATCH_DUPLICATE_DEVICE",
        "error",
    ),
    (
        "more-than-nvme",
        "storage.scratch.devices",
        [f"/dev/nvme{i}n1" for i in range(9)],
        "STORAGE_SCRATCH_MORE_THAN_NVME",
        "error",
    ),
    (
        "pool-devices-more-than-nvme",
        "pools.0.scratch_devices",
        [f"/dev/nvme{i}n1" for i in range(10)],
        "STORAGE_SCRATCH_MORE_THAN_NVME",
        "error",
    ),
    ("raid-level", "storage.scratch.raid_level", 5, "SCHEMA_BAD_ENUM", "error"),
    ("relative-path", "storage.scratch.path", "scratch", "SCHEMA_BAD_FORMAT", "error"),
    ("dotdot-path", "storage.scratch.path", "/scratch/../etc", "SCHEMA_BAD_FORMAT", "error"),
    ("system-path", "storage.scratch.path", "/var", "STORAGE_PATH_SYSTEM", "error"),
    ("shared-on-root", "storage.shared.0.path", "/", "STORAGE_PATH_SYSTEM", "error"),
    ("shared-is-scratch", "storage.shared.0.path", "/scratch/local", "STORAGE_PATH_DUPLICATE", "error"),
    ("shared-inside-scratch", "storage.shared.0.path", "/scratch/local/x", "STORAGE_PATH_NESTED", "error"),
    ("scratch-inside-shared", "storage.shared.0.path", "/scratch", "STORAGE_PATH_NESTED", "error"),
    ("bad-server", "storage.shared.0.server", "nfs server!", "STORAGE_SHARED_SERVER", "error"),
    ("relative-export", "storage.shared.0.export", "export/ckpt", "STORAGE_SHARED_EXPORT", "error"),
    ("server-off-storage-net", "storage.shared.0.server", "10.20.0.50", "STORAGE_SHARED_OFF_NETWORK", "warning"),
    ("bad-fs-type", "storage.shared.0.type", "cifs", "SCHEMA_BAD_ENUM", "error"),
    ("options-with-space", "storage.shared.0.options", "rw, hard", "SCHEMA_BAD_FORMAT", "error"),
    (
        "checkpoint-on-scratch",
        "storage.checkpoint_root",
        "/scratch/local/ckpt",
        "STORAGE_CHECKPOINT_ON_SCRATCH",
        "error",
    ),
    ("checkpoint-local", "storage.checkpoint_root", "/srv/ckpt", "STORAGE_CHECKPOINT_NOT_SHARED", "warning"),
    ("checkpoint-no-tenants", "tenants", [], "STORAGE_CHECKPOINT_NO_TENANTS", "warning"),
    ("shared-floor-no-mount", "storage.shared", [], "ACC_STORAGE_NO_SHARED", "error"),
    ("scratch-floor-above-limit", "acceptance.storage.scratch_write_gbps", 40, "ACC_STORAGE_ABOVE_LIMIT", "error"),
    ("raid1-write-above-one-device", "storage.scratch.raid_level", 1, "ACC_STORAGE_ABOVE_LIMIT", "error"),
    ("scratch-floor-no-devices", "storage.scratch.devices", [], "ACC_STORAGE_NO_SCRATCH", "warning"),
    ("negative-floor", "acceptance.storage.shared_read_gbps", -1, "SCHEMA_OUT_OF_RANGE", "error"),
    ("unknown-storage-floor", "acceptance.storage.iops", 5, "SCHEMA_UNKNOWN_KEY", "error"),
    ("rate-missing", "cost.unit.measure", "per_gpu_hour", "COST_UNIT_RATE_MISSING", "error"),
    ("rate-unused", "cost.unit.per_gpu_hour", 1000, "COST_UNIT_RATE_UNUSED", "warning"),
    ("all-zero", "cost.monthly", {"compute": 0}, "COST_MONTHLY_ZERO", "error"),
    ("compute-missing", "cost.monthly", {"network": 10}, "SCHEMA_MISSING_KEY", "error"),
    ("unit-missing", "cost.unit", None, "SCHEMA_MISSING_KEY", "error"),
    ("bad-currency", "cost.currency", "euro", "SCHEMA_BAD_FORMAT", "error"),
    ("negative-cost", "cost.monthly.network", -5, "SCHEMA_OUT_OF_RANGE", "error"),
    ("free-baseline", "cost.baseline.price_per_unit", 0, "COST_BASELINE_ZERO", "warning"),
]


@pytest.mark.parametrize(("path", "value", "code", "severity"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_problem_is_reported_with_its_field(path, value, code, severity):
    brief, groups, hostvars = good()
    set_path(brief, path, value)
    found = [v for v in check(brief, groups, hostvars) if v["code"] == code]
    assert found, f"expected {code} for {path}={value!r}"
    assert all(v["severity"] == severity for v in found), found
    assert all(v["field"] and "expected" in v["message"] for v in found), found


def test_lustre_mounts_need_a_nid_and_fs_name():
    brief, groups, hostvars = good()
    brief["storage"]["shared"].append(
        {"type": "lustre", "server": "10.20.8.60@o2ib", "export": "lfs01", "path": "/lustre"}
    )
    assert not ours(check(brief, groups, hostvars))
    brief["storage"]["shared"][1].update(server="10.20.8.60", export="/not/a/fsname")
    fields = {v["field"] for v in check(brief, groups, hostvars) if v["code"].startswith("STORAGE_SHARED")}
    assert fields == {"storage.shared[1].server", "storage.shared[1].export"}


def test_host_scratch_devices_are_checked_per_host():
    brief, groups, hostvars = good()
    host = groups["gpu_h100"][0]
    hostvars[host]["storage_scratch_devices"] = "/dev/nvme0n1"
    hostvars[host]["storage_scratch_wipe"] = "yes"
    found = [v for v in check(brief, groups, hostvars) if v["host"] == host]
    assert {(v["code"], v["field"]) for v in found} >= {
        ("STORAGE_SCRATCH_DEVICES_INVALID", "storage_scratch_devices"),
        ("STORAGE_SCRATCH_WIPE_INVALID", "storage_scratch_wipe"),
    }
    hostvars[host]["storage_scratch_devices"] = ["/dev/sdb", "/dev/sdb"]
    hostvars[host]["storage_scratch_wipe"] = True
    found = [v for v in check(brief, groups, hostvars) if v["host"] == host]
    assert [v["code"] for v in found] == ["STORAGE_SCRATCH_DUPLICATE_DEVICE"]


def test_host_devices_alone_satisfy_the_scratch_floors_and_set_the_limit():
    brief, groups, hostvars = good()
    brief["storage"]["scratch"]["devices"] = []
    host = groups["gpu_h100"][0]
    hostvars[host]["storage_scratch_devices"] = ["/dev/nvme0n1"]
    found = ours(check(brief, groups, hostvars))
    assert "ACC_STORAGE_NO_SCRATCH" not in found
    assert "ACC_STORAGE_ABOVE_LIMIT" in found  # 20 GB/s from one device
    brief["acceptance"]["storage"].update(scratch_write_gbps=10, scratch_read_gbps=12)
    assert not ours(check(brief, groups, hostvars))


def test_every_problem_is_reported_at_once():
    brief, groups, hostvars = good()
    set_path(brief, "storage.scratch.path", "/usr")
    set_path(brief, "storage.shared.0.export", "relative")
    set_path(brief, "cost.unit.measure", "per_gpu_hour")
    found = ours(check(brief, groups, hostvars))
    assert {"STORAGE_PATH_SYSTEM", "STORAGE_SHARED_EXPORT", "COST_UNIT_RATE_MISSING"} <= found
