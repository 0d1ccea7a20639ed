"""Host firewall rendered from the inventory, and read back from nft -j (module_utils/net/firewall.py)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.firewall import FilterModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.net import firewall as fw

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "firewall")
FILTERS = FilterModule().filters()

# The spec whose loaded table is fixtures/firewall/nft-1.0.6-list-table.json
# (`nft -f` of firewall_nft(SPEC) in a fresh network namespace, then `nft -j list table inet gpufleet`).
SPEC = {
    "host": "lab-gpu01",
    "management_sources": ["10.250.10.0/24", "10.250.10.1", "fd00::/64"],
    "management_ports": [{"name": "ssh", "port": 22}, {"name": "node_exporter", "port": 9100}],
    "members": ["10.250.10.10", "10.250.10.11", "10.250.10.12"],
    "member_ports": [
        {"name": "slurmd", "port": 6818},
        {"name": "srun", "port": "60001-63000"},
        {"name": "dns", "port": 53, "proto": "udp"},
    ],
    "fabric_interfaces": ["ibp24s0", "ibp41s0"],
    "fabric_sources": ["10.250.20.0/24", "10.250.21.0/24"],
    "fabric_trusted": True,
    "forward_policy": "drop",
    "egress_restrict": True,
    "egress_allow": [
        {"name": "registry", "dest": ["192.0.2.0/24", "2001:db8::1"], "port": 443},
        {"name": "ntp", "dest": ["198.51.100.7"], "port": 123, "proto": "udp"},
        {"name": "anyport", "dest": ["203.0.113.9"]},
    ],
}


def spec(**changes):
    out = copy.deepcopy(SPEC)
    out.update(changes)
    return out


def codes(violations):
    return sorted(v["code"] for v in violations)


def load_fixture():
    with open(os.path.join(FIXTURES, "nft-1.0.6-list-table.json"), encoding="utf-8") as fh:
        return fh.read()


def test_the_loaded_table_reads_back_as_the_expected_summary():
    assert fw.nft_table_summary(load_fixture()) == fw.firewall_expected(SPEC)


def test_summary_sets_policies_and_a_few_rules():
    summary = fw.nft_table_summary(load_fixture())
    assert summary["policies"] == {"input": "drop", "forward": "drop", "output": "drop"}
    assert summary["sets"] == {
        # 10.250.10.1 is inside 10.250.10.0/24: dropped, nft refuses overlapping intervals.
        "mgmt4": ["10.250.10.0/24"],
        "mgmt6": ["fd00::/64"],
        "members4": ["10.250.10.10/32", "10.250.10.11/32", "10.250.10.12/32"],
        "fabric4": ["10.250.20.0/24", "10.250.21.0/24"],
    }
    rules = summary["rules"]
    assert {
        "chain": "input",
        "comment": "management ssh",
        "verdict": "accept",
        "saddr": "@mgmt4",
        "proto": "tcp",
        "dport": "22",
    } in rules
    assert {
        "chain": "input",
        "comment": "cluster srun",
        "verdict": "accept",
        "saddr": "@members4",
        "proto": "tcp",
        "dport": "60001-63000",
    } in rules
    assert {
        "chain": "forward",
        "comment": "fabric not routed out",
        "verdict": "drop",
        "iifname": ["ibp24s0", "ibp41s0"],
        "oifname_not": ["ibp24s0", "ibp41s0"],
    } in rules
    assert {
        "chain": "output",
        "comment": "egress registry",
        "verdict": "accept",
        "daddr": ["2001:db8::1/128"],
        "proto": "tcp",
        "dport": "443",
    } in rules


def test_a_table_missing_a_rule_differs_from_the_expected_one():
    data = json.loads(load_fixture())
    data["nftables"] = [i for i in data["nftables"] if i.get("rule", {}).get("comment") != "cluster slurmd"]
    assert fw.nft_table_summary(data) != fw.firewall_expected(SPEC)


def test_a_table_with_another_member_differs_from_the_expected_one():
    assert fw.nft_table_summary(load_fixture()) != fw.firewall_expected(spec(members=["10.250.10.10", "10.250.10.11"]))


def test_other_tables_are_ignored():
    data = json.loads(load_fixture())
    data["nftables"].append(
        {"rule": {"family": "ip", "table": "nat", "chain": "input", "handle": 9, "expr": [{"accept": None}]}}
    )
    data["nftables"].append(
        {"chain": {"family": "ip", "table": "nat", "name": "input", "hook": "input", "policy": "accept", "handle": 1}}
    )
    assert fw.nft_table_summary(data) == fw.firewall_expected(SPEC)


def test_rendered_script_replaces_only_its_own_table():
    text = fw.firewall_nft(SPEC, header="# Ansible managed")
    lines = text.splitlines()
    assert lines[0] == "#!/usr/sbin/nft -f"
    assert lines[1] == "# Ansible managed"
    assert "table inet gpufleet" in lines and "delete table inet gpufleet" in lines
    assert lines.index("table inet gpufleet") < lines.index("delete table inet gpufleet")
    assert "flush ruleset" not in text
    assert "type filter hook input priority filter; policy drop;" in text
    assert '    ip saddr @mgmt4 tcp dport 22 accept comment "management ssh"' in lines


def test_no_egress_restriction_means_output_accept_and_no_output_rules():
    expected = fw.firewall_expected(spec(egress_restrict=False))
    assert expected["policies"]["output"] == "accept"
    assert [r for r in expected["rules"] if r["chain"] == "output"] == []


def test_forward_policy_accept_keeps_the_fabric_rules():
    expected = fw.firewall_expected(spec(forward_policy="accept"))
    assert expected["policies"]["forward"] == "accept"
    assert [r["comment"] for r in expected["rules"] if r["chain"] == "forward"] == [
        "fabric not routed out",
        "nothing routed into the fabric",
    ]


def test_untrusted_fabric_gets_no_input_accept():
    expected = fw.firewall_expected(spec(fabric_trusted=False))
    assert not [r for r in expected["rules"] if r["chain"] == "input" and r["comment"] == "fabric"]
    assert [r for r in expected["rules"] if r["chain"] == "output" and r["comment"] == "fabric"]


def test_no_fabric_interfaces_no_fabric_rules():
    expected = fw.firewall_expected(spec(fabric_interfaces=[], egress_restrict=False))
    assert not [r for r in expected["rules"] if "fabric" in r["comment"]]
    assert "fabric4" not in expected["sets"]


def test_no_ipv6_source_no_ipv6_rules():
    expected = fw.firewall_expected(spec(management_sources=["10.250.10.0/24"]))
    assert "mgmt6" not in expected["sets"]
    assert not [r for r in expected["rules"] if r.get("saddr") == "@mgmt6"]


def test_members_are_kept_host_by_host_and_deduplicated():
    plan = fw.firewall_plan(spec(members=["10.0.0.2", "10.0.0.1", "10.0.0.2", "10.0.0.0/30"]))
    assert plan["members4"] == ["10.0.0.0/30"]
    plan = fw.firewall_plan(spec(members=["10.0.0.2", "10.0.0.1", "10.0.0.2"]))
    assert plan["members4"] == ["10.0.0.1/32", "10.0.0.2/32"]


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"management_sources": []}, "FIREWALL_NO_MANAGEMENT", "firewall_management_sources"),
        ({"management_sources": ["10.250.10.0/33"]}, "FIREWALL_ADDRESS_INVALID", "firewall_management_sources[0]"),
        ({"members": ["lab-gpu01"]}, "FIREWALL_ADDRESS_INVALID", "firewall_members[0]"),
        (
            {"management_ports": [{"name": "ssh", "port": 0}]},
            "FIREWALL_PORT_INVALID",
            "firewall_management_ports[0].port",
        ),
        (
            {"member_ports": [{"name": "srun", "port": "63000-60001"}]},
            "FIREWALL_PORT_INVALID",
            "firewall_member_ports[0].port",
        ),
        (
            {"member_ports": [{"name": "x", "port": 1, "proto": "sctp"}]},
            "FIREWALL_PORT_INVALID",
            "firewall_member_ports[0].proto",
        ),
        ({"member_ports": [{"name": "a b", "port": 1}]}, "FIREWALL_PORT_INVALID", "firewall_member_ports[0].name"),
        ({"member_ports": ["6818"]}, "FIREWALL_PORT_INVALID", "firewall_member_ports[0]"),
        (
            {"member_ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]},
            "FIREWALL_PORT_DUPLICATE",
            "firewall_member_ports",
        ),
        (
            {"fabric_interfaces": ["a-very-long-interface-name"]},
            "FIREWALL_INTERFACE_INVALID",
            "firewall_fabric_interfaces",
        ),
        ({"forward_policy": "reject"}, "FIREWALL_POLICY_INVALID", "firewall_forward_policy"),
        ({"egress_restrict": "yes"}, "FIREWALL_SPEC_INVALID", "firewall_egress_restrict"),
        ({"egress_allow": [{"name": "r", "port": 443}]}, "FIREWALL_EGRESS_INVALID", "firewall_egress_allow[0].dest"),
        ({"colour": "blue"}, "FIREWALL_SPEC_INVALID", "spec"),
    ],
)
def test_each_bad_field_is_named(changes, code, field):
    found = fw.firewall_violations(spec(**changes))
    assert [(v["code"], v["field"], v["host"]) for v in found] == [(code, field, "lab-gpu01")]
    assert found[0]["message"].startswith("expected") or code in ("FIREWALL_PORT_DUPLICATE", "FIREWALL_SPEC_INVALID")


def test_every_problem_is_reported_at_once():
    found = fw.firewall_violations(
        spec(management_sources=["bad"], members=["also-bad"], forward_policy="maybe", member_ports=[{"name": "x"}])
    )
    assert codes(found) == [
        "FIREWALL_ADDRESS_INVALID",
        "FIREWALL_ADDRESS_INVALID",
        "FIREWALL_POLICY_INVALID",
        "FIREWALL_PORT_INVALID",
    ]


def test_a_good_spec_has_no_violations():
    assert fw.firewall_violations(SPEC) == []


def test_filters_raise_with_every_problem():
    with pytest.raises(AnsibleFilterError) as err:
        FILTERS["firewall_nft"](spec(members=["x"], forward_policy="maybe"))
    text = str(err.value)
    assert "the firewall of lab-gpu01 cannot be rendered" in text
    assert "firewall_members[0]" in text and "firewall_forward_policy" in text


def test_filter_summary_rejects_other_json():
    with pytest.raises(AnsibleFilterError, match="nft -j list table"):
        FILTERS["nft_table_summary"]('{"tables": []}')


def test_filters_map():
    assert set(FILTERS) == {
        "firewall_nft",
        "firewall_expected",
        "firewall_violations",
        "nft_table_summary",
        "interfaces_in_networks",
        "address_in_networks",
    }
    assert FILTERS["firewall_expected"](SPEC) == fw.firewall_expected(SPEC)
    assert FILTERS["firewall_violations"](spec(forward_policy="x"))[0]["code"] == "FIREWALL_POLICY_INVALID"


@pytest.mark.skipif(shutil.which("nft") is None, reason="nft is not installed")
@pytest.mark.parametrize(
    "changes", [{}, {"egress_restrict": False, "fabric_interfaces": []}, {"management_sources": ["::/0"]}]
)
def test_nft_accepts_the_rendered_script(tmp_path, changes):
    path = tmp_path / "gpufleet.nft"
    path.write_text(fw.firewall_nft(spec(**changes)))
    proc = subprocess.run(["nft", "-c", "-f", str(path)], capture_output=True, text=True, check=False)
    if "Operation not permitted" in proc.stderr:
        pytest.skip("nft -c needs CAP_NET_ADMIN here")
    assert proc.returncode == 0, proc.stderr


def test_interfaces_in_networks_finds_the_rail_interfaces_only():
    facts = {
        "interfaces": ["lo", "eth0", "ib0", "ib1", "veth-x", "br.10"],
        "lo": {"ipv4": {"address": "127.0.0.1"}},
        "eth0": {"ipv4": {"address": "10.250.10.11"}},
        "ib0": {"ipv4": {"address": "10.250.20.11"}},
        "ib1": {"ipv4": {"address": "10.250.21.11"}},
        "veth_x": {},
        "br_10": {"ipv4": {"address": "10.250.21.200"}},
    }
    rails = ["10.250.20.0/24", "10.250.21.0/24"]
    assert fw.interfaces_in_networks(facts, rails) == ["br.10", "ib0", "ib1"]
    assert fw.interfaces_in_networks(facts, []) == []
    assert fw.interfaces_in_networks(None, rails) == []


# `ip -j -4 address show` on a GPU node, in the shape iproute2 6.1 (Debian 12) prints it (links
# without an IPv4 address are left out): eth0 on the management network, ib0 and ib1 on two rails
# (ib1 with its rail address as a secondary) and a bridge.
IP_J_4 = json.loads(
    """[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"mtu":65536,"addr_info":[
    {"family":"inet","local":"127.0.0.1","prefixlen":8,"scope":"host","label":"lo"}]},
 {"ifindex":2,"ifname":"eth0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500,"addr_info":[
    {"family":"inet","local":"10.250.10.11","prefixlen":24,"broadcast":"10.250.10.255","scope":"global","label":"eth0"}]},
 {"ifindex":5,"ifname":"ib0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":4092,"addr_info":[
    {"family":"inet","local":"10.250.20.11","prefixlen":24,"scope":"global","label":"ib0"}]},
 {"ifindex":6,"ifname":"ib1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":4092,"addr_info":[
    {"family":"inet","local":"192.168.99.1","prefixlen":24,"scope":"global","label":"ib1"},
    {"family":"inet","local":"10.250.21.11","prefixlen":24,"scope":"global","secondary":true,"label":"ib1"}]},
 {"ifindex":8,"ifname":"br.10","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1500,"addr_info":[
    {"family":"inet","local":"10.250.21.200","prefixlen":24,"scope":"global","label":"br.10"}]}]"""
)


def test_interfaces_in_networks_reads_ip_json():
    rails = ["10.250.20.0/24", "10.250.21.0/24", "10.250.22.0/24"]
    # ib1's rail address is its second: every address counts, not only the first.
    assert fw.interfaces_in_networks(IP_J_4, rails) == ["br.10", "ib0", "ib1"]
    assert FILTERS["interfaces_in_networks"](IP_J_4, rails) == ["br.10", "ib0", "ib1"]
    assert fw.interfaces_in_networks(IP_J_4, ["10.250.10.0/24"]) == ["eth0"]
    assert fw.interfaces_in_networks([], rails) == []
    # Entries that are not a link with addresses are skipped.
    junk = [{}, "junk", {"ifname": "x", "addr_info": "garbage"}, {"ifname": "y", "addr_info": [{}]}]
    assert fw.interfaces_in_networks(junk, rails) == []


def test_interfaces_in_networks_counts_secondary_fact_addresses():
    facts = {
        "interfaces": ["ib1"],
        "ib1": {"ipv4": {"address": "192.168.99.1"}, "ipv4_secondaries": [{"address": "10.250.21.11"}]},
    }
    assert fw.interfaces_in_networks(facts, ["10.250.21.0/24"]) == ["ib1"]


@pytest.mark.parametrize(
    ("address", "cidrs", "expected"),
    [
        ("10.250.10.1", ["10.250.10.0/24"], True),
        ("10.250.11.1", ["10.250.10.0/24"], False),
        ("10.250.11.1", ["10.250.10.0/24", "10.250.11.0/28"], True),
        (" 10.250.10.1 ", ["10.250.10.0/24"], True),
        ("fd00::5", ["10.0.0.0/8", "fd00::/64"], True),
        ("10.0.0.1", ["fd00::/64"], False),
        ("10.0.0.1", ["not-a-cidr", "10.0.0.0/8"], True),
        ("", ["0.0.0.0/0"], False),
        ("host.example", ["0.0.0.0/0"], False),
        ("10.0.0.1", [], False),
        ("10.0.0.1", None, False),
    ],
)
def test_address_in_networks(address, cidrs, expected):
    assert fw.address_in_networks(address, cidrs) is expected
    assert FILTERS["address_in_networks"](address, cidrs) is expected
