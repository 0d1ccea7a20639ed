"""Slurm topology/block for NVLink-domain pools (NVL72): topology.conf lines, the filter's choice between
block and tree, the Slurm version it needs, and preflight's rack checks (module_utils/slurm/blocks.py,
preflight/slurm_topology.py, filter/slurm.py)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.slurm import FilterModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import check
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.slurm_topology import check_slurm_topology
from ansible_collections.gpufleet.cluster.plugins.module_utils.slurm import blocks
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import set_path, site

FILTERS = FilterModule().filters()
NVL72 = {"name": "gb200", "group": "gpu_gb200", "accelerator": "gb200-nvl72", "gpus_per_node": 4, "topology": "nvl72"}
H100 = {
    "name": "h100",
    "group": "gpu_h100",
    "accelerator": "h100-sxm-80gb",
    "gpus_per_node": 8,
    "topology": "8gpu-sxm-nvlink",
}


def shapes(pool: str, racks: dict[str, int], start: int = 1) -> list[dict]:
    """Node records as slurm_node_shapes leaves them: NodeName, pool, rack."""
    out, n = [], start
    for rack, count in racks.items():
        for _ in range(count):
            out.append({"NodeName": f"{pool}-{n:03d}", "pool": pool, "rack": rack, "switch": None})
            n += 1
    return out


def test_an_nvl72_rack_is_a_block_of_18_nodes():
    assert blocks.domain_block_size(NVL72) == 18
    assert blocks.domain_block_size(H100) is None
    nodes = [{"name": s["NodeName"], "rack": s["rack"]} for s in shapes("gb200", {"r01": 18, "r02": 18})]
    assert blocks.block_lines(nodes, [18]) == [
        "BlockName=r01 Nodes=gb200-[001-018]",
        "BlockName=r02 Nodes=gb200-[019-036]",
        "BlockSizes=18",
    ]
    assert blocks.block_lines([{"name": "a"}, {"name": "b"}], [18]) == []


def test_the_filter_writes_blocks_for_an_nvlink_domain_pool_and_a_tree_otherwise():
    topology, plugin = FILTERS["slurm_topology"], FILTERS["slurm_topology_plugin"]
    gb200 = shapes("gb200", {"dc1-r07": 18, "dc1-r08": 17})
    assert plugin([NVL72]) == "block"
    assert topology(gb200, "top", pools=[NVL72]) == [
        "BlockName=dc1-r07 Nodes=gb200-[001-018]",
        "BlockName=dc1-r08 Nodes=gb200-[019-035]",
        "BlockSizes=18",
    ]
    h100 = shapes("h100", {"a01": 2, "a02": 2})
    assert plugin([H100]) == "tree"
    tree = ["SwitchName=leaf-a01 Nodes=h100-[001-002]", "SwitchName=leaf-a02 Nodes=h100-[003-004]"]
    assert topology(h100, "top", pools=[H100]) == [*tree, "SwitchName=top Switches=leaf-a[01-02]"]
    # Without pools (the call of earlier playbooks) it is the tree, as before.
    assert topology(h100, "top") == topology(h100, "top", pools=[H100])
    # One TopologyPlugin per cluster: with an NVL72 pool, the other pools' racks are blocks too.
    mixed = topology(gb200 + shapes("h100", {"a01": 2}, start=900), "top", pools=[NVL72, H100])
    assert mixed[-2:] == ["BlockName=dc1-r08 Nodes=gb200-[019-035]", "BlockSizes=18"]
    assert "BlockName=a01 Nodes=h100-[900-901]" in mixed and plugin([NVL72, H100]) == "block"
    with pytest.raises(AnsibleFilterError, match="pools"):
        topology(h100, "top", pools="brief.yml")


@pytest.mark.parametrize(
    ("version", "ok"),
    [("slurm 22.05.8", False), ("slurm 23.02.7", False), ("slurm 23.11.4", True), ("24.11.5-2", True), ("", False)],
)
def test_topology_block_needs_slurm_23_11(version, ok):
    assert blocks.supports_block(version) is ok


def _brief(pinned: str | None = "24.11") -> dict:
    software = {"slurm": pinned} if pinned else {}
    return {"cluster": {"control_plane": "slurm"}, "software": software, "pools": [NVL72, H100]}


def test_preflight_names_nodes_without_a_rack_and_racks_that_do_not_fit_a_domain():
    gb = [f"gb{n:03d}" for n in range(1, 41)]
    racks = dict.fromkeys(gb[:19], "r01") | dict.fromkeys(gb[19:38], None) | dict.fromkeys(gb[38:], "r02")
    # gb020..gb038 have no rack; r01 holds 19 nodes (one too many); r02 only 2 (partial).
    hostvars = {h: ({"rack": r} if r else {}) for h, r in racks.items()}
    out = check_slurm_topology(_brief(), {"gpu_gb200": gb, "gpu_h100": []}, hostvars)
    found = [(v["code"], v["severity"], v["host"], v["field"]) for v in out]
    assert [f for f in found if f[0] == "SLURM_BLOCK_NO_RACK"] == [
        ("SLURM_BLOCK_NO_RACK", "error", h, "rack") for h in gb[19:38]
    ]
    assert ("SLURM_BLOCK_RACK_OVERFULL", "error", None, "rack (r01)") in found
    assert ("SLURM_BLOCK_RACK_PARTIAL", "error", None, "rack (r02)") in found
    over = next(v for v in out if v["code"] == "SLURM_BLOCK_RACK_OVERFULL")
    assert "expected at most 18 nodes in rack r01" in over["message"] and "found 19" in over["message"]
    assert "72 GPUs / 4 per node" in over["message"]
    for v in out:
        assert "expected" in v["message"] and "found" in v["message"]


def test_preflight_refuses_topology_block_on_a_slurm_pinned_too_old():
    hostvars = {f"gb{n:03d}": {"rack": "r01"} for n in range(1, 19)}
    groups = {"gpu_gb200": list(hostvars)}
    assert check_slurm_topology(_brief("24.11"), groups, hostvars) == []
    assert check_slurm_topology(_brief(None), groups, hostvars) == []  # the role checks the installed one
    (v,) = check_slurm_topology(_brief("22.05"), groups, hostvars)
    assert (v["code"], v["field"], v["severity"]) == ("SLURM_BLOCK_VERSION", "software.slurm", "error")
    assert "expected Slurm >= 23.11" in v["message"] and "found software.slurm 22.05" in v["message"]
    # Kubernetes has no topology.conf.
    k8s = dict(_brief("22.05"), cluster={"control_plane": "kubernetes"})
    assert check_slurm_topology(k8s, groups, hostvars) == []


def test_a_pool_without_an_nvlink_domain_is_not_checked():
    brief = {"cluster": {"control_plane": "slurm"}, "software": {"slurm": "22.05"}, "pools": [H100]}
    assert check_slurm_topology(brief, {"gpu_h100": ["gpu001"]}, {"gpu001": {}}) == []


def test_the_whole_preflight_runs_the_check():
    brief, groups, hostvars = site("slurm")
    set_path(brief, "software.slurm", "22.05")
    set_path(brief, "pools.0.accelerator", "gb200-nvl72")
    set_path(brief, "pools.0.topology", "nvl72")
    set_path(brief, "pools.0.gpus_per_node", 4)
    out = check(brief, groups, hostvars)
    codes = {v["code"] for v in out}
    assert {"SLURM_BLOCK_VERSION", "SLURM_BLOCK_RACK_PARTIAL"} <= codes, out
