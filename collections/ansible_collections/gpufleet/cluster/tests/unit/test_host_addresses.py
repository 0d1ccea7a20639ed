"""gpufleet.cluster.host_addresses: one address per host, in order, with the missing value chosen."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.host_addresses import host_addresses

ADDRESSES = {"ctl01": "10.0.0.1", "gpu01": "10.0.0.11", "gpu02": "", "gpu03": None}


def test_addresses_in_the_hosts_order():
    assert host_addresses(["gpu01", "ctl01"], ADDRESSES) == ["10.0.0.11", "10.0.0.1"]


def test_a_host_without_an_address_gets_the_missing_value():
    hosts = ["gpu02", "gpu03", "gpu09"]
    assert host_addresses(hosts, ADDRESSES) == ["", "", ""]
    assert host_addresses(hosts, ADDRESSES, missing="name") == hosts
    assert host_addresses(hosts, ADDRESSES, missing="none") == ["none"] * 3


def test_it_refuses_what_is_not_a_list_or_a_map():
    with pytest.raises(AnsibleFilterError, match="list of host names, got str"):
        host_addresses("gpu01", ADDRESSES)
    with pytest.raises(AnsibleFilterError, match="map of host name to address, got list"):
        host_addresses(["gpu01"], ["10.0.0.1"])
