"""Names are matched whole: a final newline passes a ``^...$`` pattern applied with ``re.match``
(``$`` also matches before a final newline), so every validator of a name that lands in a file the
roles write uses ``fullmatch``. One value per validator, valid but for the newline at its end."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import expand_hostname_range
from ansible_collections.gpufleet.cluster.plugins.module_utils.k8s.objects import kubeadm_join_config, parse_taint
from ansible_collections.gpufleet.cluster.plugins.module_utils.net.rails import rail_plan_violations
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops.observability import check_label_name
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import check
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import site

TOKEN = "abcdef.0123456789abcdef"
CA_HASH = "sha256:" + "0" * 64


def test_an_inventory_host_name_with_a_final_newline_is_invalid():
    brief, groups, hostvars = site("slurm")
    group = brief["pools"][0]["group"]
    old = groups[group][0]
    new = old + "\n"
    for members in groups.values():
        members[:] = [new if h == old else h for h in members]
    hostvars[new] = hostvars.pop(old)
    hits = [v for v in check(brief, groups, hostvars) if v["code"] == "HOST_NAME_INVALID"]
    assert [v["host"] for v in hits] == [new]
    assert repr(new) in hits[0]["message"]


def test_a_taint_with_a_final_newline_is_refused():
    assert parse_taint("gpu=only:NoSchedule") == {"key": "gpu", "value": "only", "effect": "NoSchedule"}
    with pytest.raises(ValueError, match="expected a taint"):
        parse_taint("gpu=only:NoSchedule\n")


@pytest.mark.parametrize(
    ("token", "ca_hash"), [(TOKEN + "\n", CA_HASH), (TOKEN, CA_HASH + "\n")], ids=["token", "hash"]
)
def test_a_join_token_or_ca_hash_with_a_final_newline_is_refused(token, ca_hash):
    kubeadm_join_config("gpu01", "10.0.0.1:6443", TOKEN, CA_HASH)
    with pytest.raises(ValueError, match="expected"):
        kubeadm_join_config("gpu01", "10.0.0.1:6443", token, ca_hash)


def test_a_prometheus_label_name_with_a_final_newline_is_refused():
    assert check_label_name("pool") and not check_label_name("pool\n")


@pytest.mark.parametrize(
    ("device", "field"),
    [({"netdev": "ibp24s0\n", "hca": "mlx5_0"}, "netdev"), ({"netdev": "ibp24s0", "hca": "mlx5_0\n"}, "hca")],
    ids=["netdev", "hca"],
)
def test_a_rail_device_name_with_a_final_newline_is_a_violation(device, field):
    fabric = {"type": "infiniband", "rails": [{"cidr": "10.10.0.0/24"}]}
    found = rail_plan_violations("gpu01", fabric, ["10.10.0.5"], [device])
    assert [(v["code"], v["field"]) for v in found] == [("RAIL_DEVICE_INVALID", f"rdma_rail_devices[0].{field}")]


def test_a_host_range_keeps_a_final_newline_in_every_name():
    assert expand_hostname_range("gpu[01:02]") == ["gpu01", "gpu02"]
    # As Ansible expands it (the host-name check then names each), never the clean gpu01, gpu02.
    assert expand_hostname_range("gpu[01:02]\n") == ["gpu01\n", "gpu02\n"]
