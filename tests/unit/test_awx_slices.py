"""scripts/awx_slices: AWX's slicing of an inventory, and the checks of a sliced run."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    loader = importlib.machinery.SourceFileLoader("awx_slices", str(ROOT / "scripts" / "awx_slices"))
    spec = importlib.util.spec_from_loader("awx_slices", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


slices = _load()

INVENTORY = {
    "_meta": {
        "hostvars": {
            "gpu10": {"ansible_host": "10.0.0.10"},
            "gpu02": {"ansible_host": "10.0.0.2"},
            "ctl01": {"ansible_host": "10.0.0.1", "role": "controller"},
            "gpu01": {"ansible_host": "10.0.0.3"},
            "gpu03": {"ansible_host": "10.0.0.4"},
        }
    },
    "all": {"children": ["ungrouped", "controllers", "gpus"]},
    "controllers": {"hosts": ["ctl01"]},
    "gpus": {"hosts": ["gpu01", "gpu02", "gpu03", "gpu10"], "children": ["h100"]},
    "h100": {"hosts": ["gpu01", "gpu10"]},
    "ungrouped": {},
}


def test_slices_are_every_nth_host_by_name_from_the_slice_number_as_awx_cuts_them():
    hosts = list(INVENTORY["_meta"]["hostvars"])
    # By name: ctl01 gpu01 gpu02 gpu03 gpu10 (string order, as the database's ORDER BY name).
    assert slices.slice_hosts(hosts, 1, 2) == ["ctl01", "gpu02", "gpu10"]
    assert slices.slice_hosts(hosts, 2, 2) == ["gpu01", "gpu03"]
    assert slices.slice_hosts(hosts, 3, 3) == ["gpu02"]
    with pytest.raises(ValueError, match="slice 3 of 2"):
        slices.slice_hosts(hosts, 3, 2)


def test_a_slice_inventory_keeps_every_group_with_only_its_hosts_and_their_variables():
    inv = slices.slice_inventory(INVENTORY, 2, 2)
    assert sorted(inv["_meta"]["hostvars"]) == ["gpu01", "gpu03"]
    assert inv["_meta"]["hostvars"]["gpu01"] == {"ansible_host": "10.0.0.3"}
    assert inv["controllers"]["hosts"] == []
    assert inv["gpus"] == {"hosts": ["gpu01", "gpu03"], "children": ["h100"]}
    assert inv["h100"]["hosts"] == ["gpu01"]
    assert inv["all"] == {"children": ["ungrouped", "controllers", "gpus"]}


def test_the_slices_of_an_inventory_partition_its_hosts():
    hosts = list(INVENTORY["_meta"]["hostvars"])
    parts = [slices.slice_hosts(hosts, k, 2) for k in (1, 2)]
    assert slices.check_partition(hosts, parts) == []
    assert slices.check_partition(hosts, [parts[0], parts[1] + ["gpu02"]]) == ["gpu02 is in slice 1 and slice 2"]
    assert slices.check_partition(hosts, [parts[0], []]) == [
        "in no slice: gpu01, gpu03",
        "slice(s) 2 hold no host (AWX fails a slice without hosts)",
    ]
    # More slices than hosts: AWX would start slices with nothing to run.
    few = ["gpu01"]
    assert slices.check_partition(few, [slices.slice_hosts(few, k, 2) for k in (1, 2)]) == [
        "slice(s) 2 hold no host (AWX fails a slice without hosts)"
    ]


def test_slices_ran_side_by_side_only_when_all_were_running_at_one_moment():
    assert slices.overlapped([(0.0, 10.0), (2.0, 12.0)])
    assert not slices.overlapped([(0.0, 10.0), (10.5, 20.0)])  # one after the other
    assert not slices.overlapped([(0.0, 10.0), (2.0, 4.0), (5.0, 12.0)])  # no moment with all three
    assert not slices.overlapped([])
