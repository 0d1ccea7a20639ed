"""Device-to-rail mapping and the per-rail addressing / routing plan (module_utils/net/rails.py)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.rails import FilterModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.net import rails

IB = {
    "type": "infiniband",
    "mtu": 4092,
    "rails": [{"cidr": "10.250.20.0/24"}, {"cidr": "10.250.21.0/24", "gateway": "10.250.21.1"}],
}
IPS = ["10.250.20.11", "10.250.21.11"]
DEVS = [{"netdev": "ibp24s0", "hca": "mlx5_0"}, {"pci": "2A:00.0", "hca": "mlx5_1", "port": 2}]


def codes(violations):
    return sorted(v["code"] for v in violations)


def test_plan_of_a_good_mapping():
    plan = rails.rail_plan("gpu01", IB, IPS, DEVS, table_base=200, priority_base=300)
    assert plan == [
        {
            "rail": 0,
            "name": "rail0",
            "netdev": "ibp24s0",
            "pci": None,
            "hca": "mlx5_0",
            "port": 1,
            "network": "10.250.20.0/24",
            "prefix": 24,
            "gateway": None,
            "table": 200,
            "priority": 300,
            "address": "10.250.20.11",
            "cidr": "10.250.20.11/24",
        },
        {
            "rail": 1,
            "name": "rail1",
            "netdev": None,
            "pci": "0000:2a:00.0",
            "hca": "mlx5_1",
            "port": 2,
            "network": "10.250.21.0/24",
            "prefix": 24,
            "gateway": "10.250.21.1",
            "table": 201,
            "priority": 301,
            "address": "10.250.21.11",
            "cidr": "10.250.21.11/24",
        },
    ]


@pytest.mark.parametrize("ftype", ["none", "ethernet", None])
def test_no_rdma_fabric_means_no_rails(ftype):
    assert rails.rail_plan("gpu01", {"type": ftype, "rails": IB["rails"]}, [], []) == []


@pytest.mark.parametrize(
    ("ips", "devices", "code", "field"),
    [
        (IPS[:1], DEVS, "RAIL_IPS_COUNT", "fabric_ips"),
        ([*IPS, "10.250.22.11"], DEVS, "RAIL_IPS_COUNT", "fabric_ips"),
        (IPS, DEVS[:1], "RAIL_NO_DEVICE", "rdma_rail_devices[1]"),
        (IPS, [*DEVS, {"netdev": "ibp3s0", "hca": "mlx5_9"}], "RAIL_DEVICES_COUNT", "rdma_rail_devices"),
        (IPS, [DEVS[0], {"netdev": "ibp24s0", "hca": "mlx5_1"}], "RAIL_DEVICE_SHARED", "rdma_rail_devices[1].netdev"),
        (IPS, [DEVS[0], {"netdev": "ibp41s0", "hca": "mlx5_0"}], "RAIL_DEVICE_SHARED", "rdma_rail_devices[1].hca"),
        (
            IPS,
            [{"pci": "0000:18:00.0", "hca": "a"}, {"pci": "18:00.0", "hca": "b"}],
            "RAIL_DEVICE_SHARED",
            "rdma_rail_devices[1].pci",
        ),
        (IPS, [DEVS[0], {"hca": "mlx5_1"}], "RAIL_DEVICE_NO_KEY", "rdma_rail_devices[1]"),
        (IPS, [DEVS[0], {"netdev": "ibp41s0"}], "RAIL_DEVICE_INVALID", "rdma_rail_devices[1].hca"),
        (IPS, [DEVS[0], {"pci": "18:00", "hca": "mlx5_1"}], "RAIL_DEVICE_INVALID", "rdma_rail_devices[1].pci"),
        (IPS, [DEVS[0], {"netdev": "a" * 16, "hca": "mlx5_1"}], "RAIL_DEVICE_INVALID", "rdma_rail_devices[1].netdev"),
        (IPS, [DEVS[0], {"netdev": "x", "hca": "y", "port": 0}], "RAIL_DEVICE_INVALID", "rdma_rail_devices[1].port"),
        (IPS, [DEVS[0], {"netdev": "x", "hca": "y", "vlan": 3}], "RAIL_DEVICE_INVALID", "rdma_rail_devices[1]"),
        (IPS, [DEVS[0], "ibp41s0"], "RAIL_DEVICE_INVALID", "rdma_rail_devices[1]"),
        (["10.250.20.11", "10.250.22.11"], DEVS, "RAIL_IP_OUTSIDE", "fabric_ips[1]"),
        (["10.250.20.11", "10.250.21.255"], DEVS, "RAIL_IP_RESERVED", "fabric_ips[1]"),
        (["10.250.20.11", "not-an-ip"], DEVS, "RAIL_IP_INVALID", "fabric_ips[1]"),
        ("10.250.20.11", DEVS, "RAIL_IPS_INVALID", "fabric_ips"),
        (IPS, {"netdev": "ibp24s0"}, "RAIL_DEVICES_INVALID", "rdma_rail_devices"),
    ],
)
def test_bad_mapping_names_host_and_field(ips, devices, code, field):
    found = rails.rail_plan_violations("lab-gpu01", IB, ips, devices)
    assert (code, field) in [(v["code"], v["field"]) for v in found], found
    assert all(v["host"] == "lab-gpu01" and v["severity"] == "error" for v in found)
    with pytest.raises(rails.RailPlanError) as err:
        rails.rail_plan("lab-gpu01", IB, ips, devices)
    assert "lab-gpu01" in str(err.value) and field in str(err.value)


def test_every_problem_is_reported_at_once():
    found = rails.rail_plan_violations("gpu01", IB, ["10.250.20.11"], [{"netdev": "ibp24s0", "hca": "mlx5_0"}])
    assert codes(found) == ["RAIL_IPS_COUNT", "RAIL_NO_DEVICE"]


def test_point_to_point_rails_accept_both_addresses():
    fabric = {"type": "roce", "rails": [{"cidr": "10.0.0.0/31"}]}
    plan = rails.rail_plan("gpu01", fabric, ["10.0.0.0"], [{"netdev": "eth2", "hca": "mlx5_0"}])
    assert plan[0]["cidr"] == "10.0.0.0/31"


def test_filter_raises_with_every_problem():
    f = FilterModule().filters()
    with pytest.raises(AnsibleFilterError) as err:
        f["rail_plan"](IB, "lab-gpu02", IPS[:1], DEVS[:1])
    text = str(err.value)
    assert "lab-gpu02" in text and "fabric_ips" in text and "rdma_rail_devices[1]" in text
    assert f["rail_plan_violations"](IB, "lab-gpu02", IPS, DEVS) == []
    assert [r["table"] for r in f["rail_plan"](IB, "h", IPS, DEVS, table_base=10)] == [10, 11]


def test_filter_rejects_a_non_dict_fabric():
    with pytest.raises(AnsibleFilterError, match=r"networks\.fabric"):
        FilterModule().filters()["rail_plan"]("infiniband", "h", IPS, DEVS)
