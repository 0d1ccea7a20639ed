from __future__ import annotations

import random

import pytest
from ansible_collections.gpufleet.cluster.plugins.filter import slurm as slurm_filter
from ansible_collections.gpufleet.cluster.plugins.module_utils.slurm import conf as slurm

# --------------------------------------------------------------------------- hostlists


@pytest.mark.parametrize(
    ("names", "expr"),
    [
        ([], ""),
        (["ctl01"], "ctl01"),
        (["login"], "login"),
        ([f"gpu{n:03d}" for n in range(1, 513)], "gpu[001-512]"),
        (["gpu001", "gpu002", "gpu003", "gpu010"], "gpu[001-003,010]"),
        (["gpu09", "gpu10", "gpu11"], "gpu[09-11]"),
        (["gpu099", "gpu100", "gpu101"], "gpu[099-101]"),
        (["n9", "n10", "n11"], "n[9-11]"),
        (["n1", "n01"], "n01,n1"),
        (["lab-gpu01", "lab-gpu02"], "lab-gpu[01-02]"),
        (["b2", "a1", "a2", "login", "b1"], "a[1-2],b[1-2],login"),
        (["rack1-node05", "rack1-node06", "rack2-node01"], "rack1-node[05-06],rack2-node01"),
        (["gpu001-ib"], "gpu001-ib"),
        (["gpu1", "gpu1"], "gpu1"),
        (["gpu008", "gpu009", "gpu10"], "gpu[008-009,10]"),
    ],
)
def test_hostlist_compress(names, expr):
    assert slurm.hostlist_compress(names) == expr
    assert sorted(slurm.hostlist_expand(expr)) == sorted(set(names))


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("gpu[001-003]", ["gpu001", "gpu002", "gpu003"]),
        ("gpu[1-2,5],ctl01", ["gpu1", "gpu2", "gpu5", "ctl01"]),
        ("gpu[01-02]-ib", ["gpu01-ib", "gpu02-ib"]),
        ("gpu[9-10]", ["gpu9", "gpu10"]),
        ("", []),
    ],
)
def test_hostlist_expand(expr, names):
    assert slurm.hostlist_expand(expr) == names


def test_hostlist_expand_rejects_reversed_range():
    with pytest.raises(ValueError, match="bad hostlist range"):
        slurm.hostlist_expand("gpu[5-1]")


def test_hostlist_roundtrip_random():
    rng = random.Random(7)
    for _ in range(50):
        names = {f"{rng.choice(['gpu', 'cpu', 'a-'])}{rng.randint(0, 300):0{rng.choice([1, 3])}d}" for _ in range(40)}
        assert sorted(slurm.hostlist_expand(slurm.hostlist_compress(names))) == sorted(names)


# --------------------------------------------------------------------------- GRES, features, shapes


@pytest.mark.parametrize(
    ("key", "overrides", "expected"),
    [
        ("h100-sxm-80gb", None, "h100"),
        ("H200-SXM-141GB", None, "h200"),
        ("l40s", None, "l40s"),
        ("gh200", None, "gh200"),
        ("h100-sxm-80gb", {"h100-sxm-80gb": "h100_80g"}, "h100_80g"),
        ("", None, ""),
        (None, None, ""),
    ],
)
def test_gres_type(key, overrides, expected):
    assert slurm.gres_type(key, overrides) == expected


POOL = {
    "name": "h100-lab",
    "group": "gpu_lab",
    "accelerator": "h100-sxm-80gb",
    "gpus_per_node": 8,
    "cpus": 224,
    "sockets": 2,
    "memory_gib": 2048,
    "labels": {"gpufleet.io/tier": "gold"},
}
FACTS = {
    "processor_vcpus": 2,
    "processor_count": 1,
    "processor_cores": 2,
    "processor_threads_per_core": 1,
    "memtotal_mb": 24105,
}


def test_node_shape_from_facts():
    node = slurm.node_shape("lab-gpu01", POOL, FACTS, gres_type_name="h100", rack="r01")
    assert node == {
        "NodeName": "lab-gpu01",
        "CPUs": 2,
        "Sockets": 1,
        "CoresPerSocket": 2,
        "ThreadsPerCore": 1,
        "RealMemory": 23081,
        "Gres": "gpu:h100:8",
        "Features": "h100-lab,h100,h100-sxm-80gb,rack_r01,tier_gold",
        "State": "UNKNOWN",
    }


def test_node_shape_from_brief_without_facts():
    node = slurm.node_shape("gpu001", POOL, {}, gres_type_name="h100")
    assert node["CPUs"] == 224
    assert node["Sockets"] == 2
    assert "CoresPerSocket" not in node
    assert node["RealMemory"] == int(2048 * 1024 * 0.95)
    assert node["Gres"] == "gpu:h100:8"


def test_node_shape_untyped_gres_and_no_gpus():
    assert slurm.node_shape("n1", {"name": "p", "gpus_per_node": 4})["Gres"] == "gpu:4"
    assert "Gres" not in slurm.node_shape("n1", {"name": "p"})


def _shapes(n, racks=1, pool=POOL):
    per_rack = n // racks
    return [
        slurm.node_shape(f"gpu{i:04d}", pool, FACTS, gres_type_name="h100", rack=f"r{(i - 1) // per_rack:02d}")
        for i in range(1, n + 1)
    ]


def test_node_lines_collapse_identical_nodes():
    lines = slurm.node_lines(_shapes(2048, racks=1))
    assert lines == [
        "NodeName=gpu[0001-2048] CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=23081 "
        "Gres=gpu:h100:8 Features=h100-lab,h100,h100-sxm-80gb,rack_r00,tier_gold State=UNKNOWN"
    ]


def test_node_lines_one_per_rack_and_shape():
    shapes = _shapes(64, racks=4)
    shapes[5] = dict(shapes[5], RealMemory=1000)
    lines = slurm.node_lines(shapes)
    assert len(lines) == 5
    assert lines[0].startswith("NodeName=gpu[0001-0005,0007-0016] ")
    assert lines[1].startswith("NodeName=gpu0006 ")
    assert "RealMemory=1000" in lines[1]


def test_node_lines_rejects_duplicates():
    with pytest.raises(ValueError, match="defined twice"):
        slurm.node_lines([{"NodeName": "a1"}, {"NodeName": "a1"}])


def test_partitions_one_per_pool_plus_default():
    pools = [{"name": "h100"}, {"name": "l40s"}]
    parts = slurm.partitions_from_pools(pools, {"h100": ["g1", "g2"], "l40s": ["l1"]}, "all", {"MaxTime": "INFINITE"})
    assert slurm.partition_lines(parts) == [
        "PartitionName=h100 Nodes=g[1-2] Default=NO MaxTime=INFINITE",
        "PartitionName=l40s Nodes=l1 Default=NO MaxTime=INFINITE",
        "PartitionName=all Nodes=g[1-2],l1 Default=YES MaxTime=INFINITE",
    ]


def test_partitions_default_named_after_a_pool():
    parts = slurm.partitions_from_pools([{"name": "h100"}, {"name": "l40s"}], {"h100": ["g1"], "l40s": ["l1"]}, "l40s")
    assert [(p["name"], p["default"]) for p in parts] == [("h100", False), ("l40s", True)]


# --------------------------------------------------------------------------- topology


def test_topology_leaf_per_rack_and_explicit_switch():
    nodes = [
        {"name": "gpu001", "rack": "r01"},
        {"name": "gpu002", "rack": "r01"},
        {"name": "gpu003", "rack": "r02"},
        {"name": "gpu004", "rack": "r02", "switch": "ib-leaf7"},
        {"name": "gpu005"},
    ]
    assert slurm.topology_lines(nodes) == [
        "SwitchName=ib-leaf7 Nodes=gpu004",
        "SwitchName=leaf-r01 Nodes=gpu[001-002]",
        "SwitchName=leaf-r02 Nodes=gpu003",
        "SwitchName=leaf-unplaced Nodes=gpu005",
        "SwitchName=top Switches=ib-leaf7,leaf-r[01-02],leaf-unplaced",
    ]


def test_topology_empty_without_racks():
    assert slurm.topology_lines([{"name": "gpu001"}, {"name": "gpu002"}]) == []


# --------------------------------------------------------------------------- reading and planning


CONF = """\
# managed
ClusterName=lab
SlurmctldHost=lab-ctl01
SelectType=select/cons_tres
HealthCheckInterval=60
NodeName=lab-gpu[01-02] CPUs=2 RealMemory=23081 Gres=gpu:h100:8 State=UNKNOWN
PartitionName=h100-lab Nodes=lab-gpu[01-02] Default=NO
"""


def test_parse_slurm_conf():
    conf = slurm.parse_slurm_conf(CONF)
    assert conf["params"]["clustername"] == "lab"
    assert sorted(conf["nodes"]) == ["lab-gpu01", "lab-gpu02"]
    assert conf["partitions"] == {"h100-lab": "Nodes=lab-gpu[01-02] Default=NO"}


def test_node_gres():
    assert slurm.node_gres(CONF, "lab-gpu02") == [{"name": "gpu", "type": "h100", "count": 8}]
    assert slurm.node_gres(CONF, "lab-gpu09") == []
    two = "NodeName=n1 Gres=gpu:a100:4,nic:2,gpu:1g.10gb:7\n"
    assert slurm.node_gres(two, "n1") == [
        {"name": "gpu", "type": "a100", "count": 4},
        {"name": "nic", "type": "", "count": 2},
        {"name": "gpu", "type": "1g.10gb", "count": 7},
    ]


def _edit(text, old, new):
    assert old in text
    return text.replace(old, new)


ADD_NODE = _edit(CONF, "lab-gpu[01-02]", "lab-gpu[01-03]")


@pytest.mark.parametrize(
    ("case", "old", "new", "version", "ctld", "slurmd", "restart_nodes", "added"),
    [
        ("first run", "", CONF, "22.05.8", "start", "start", [], ["lab-gpu01", "lab-gpu02"]),
        ("no change", CONF, CONF, "22.05.8", "none", "none", [], []),
        ("comment only", CONF, "# another header\n" + CONF, "22.05.8", "none", "none", [], []),
        ("interval", CONF, _edit(CONF, "Interval=60", "Interval=30"), "22.05.8", "reconfigure", "reconfigure", [], []),
        ("select type", CONF, _edit(CONF, "cons_tres", "cons_res"), "22.05.8", "restart", "restart", [], []),
        ("add node 22.05", CONF, ADD_NODE, "22.05.8", "restart", "restart", [], ["lab-gpu03"]),
        ("add node 24.11", CONF, ADD_NODE, "24.11.5", "reconfigure", "reconfigure", [], ["lab-gpu03"]),
        ("remove node 22.05", ADD_NODE, CONF, "22.05.8", "restart", "restart", [], []),
        (
            "node gres",
            CONF,
            CONF + "NodeName=lab-gpu02 CPUs=2 RealMemory=23081 Gres=gpu:h100:4 State=UNKNOWN\n",
            "22.05.8",
            "reconfigure",
            "reconfigure",
            ["lab-gpu02"],
            [],
        ),
        ("partition", CONF, _edit(CONF, "Default=NO", "Default=YES"), "22.05.8", "reconfigure", "reconfigure", [], []),
    ],
)
def test_reconfigure_plan(case, old, new, version, ctld, slurmd, restart_nodes, added):
    plan = slurm.reconfigure_plan(old, new, version)
    assert plan["slurmctld"] == ctld, (case, plan)
    assert plan["slurmd"] == slurmd, (case, plan)
    assert plan["restart_nodes"] == restart_nodes, (case, plan)
    assert plan["added"] == added, (case, plan)
    assert bool(plan["reasons"]) == (ctld != "none"), (case, plan)


@pytest.mark.parametrize(
    ("plan", "node", "action"),
    [
        ({"slurmd": "start", "added": ["a"]}, "a", "start"),
        ({"slurmd": "restart", "added": ["c"]}, "c", "start"),
        ({"slurmd": "restart", "added": ["c"]}, "a", "restart"),
        ({"slurmd": "reconfigure", "restart_nodes": ["b"]}, "b", "restart"),
        ({"slurmd": "reconfigure", "restart_nodes": ["b"]}, "a", "reconfigure"),
        ({"slurmd": "none"}, "a", "none"),
    ],
)
def test_slurmd_action(plan, node, action):
    assert slurm.slurmd_action(plan, node) == action


def test_adding_a_node_orders_controller_first_then_nodes():
    """The whole add-a-node sequence, as the roles run it (Slurm 22.05)."""
    ctl = slurm.reconfigure_plan(CONF, ADD_NODE, "22.05.8")
    assert ctl["slurmctld"] == "restart"
    actions = {
        n: slurm.slurmd_action(slurm.reconfigure_plan(CONF, ADD_NODE, "22.05.8"), n) for n in ("lab-gpu01", "lab-gpu02")
    }
    actions["lab-gpu03"] = slurm.slurmd_action(slurm.reconfigure_plan("", ADD_NODE, "22.05.8"), "lab-gpu03")
    assert actions == {"lab-gpu01": "restart", "lab-gpu02": "restart", "lab-gpu03": "start"}
    # 23.11+: nobody restarts but the new node starts.
    new = slurm.reconfigure_plan(CONF, ADD_NODE, "23.11.1")
    assert new["slurmctld"] == "reconfigure"
    assert [slurm.slurmd_action(new, n) for n in ("lab-gpu01", "lab-gpu03")] == ["reconfigure", "start"]


# --------------------------------------------------------------------------- the filter wrappers


def test_filter_node_shapes_from_hostvars():
    filters = slurm_filter.FilterModule().filters()
    groups = {"gpu_lab": ["lab-gpu01", "lab-gpu02"]}
    hostvars = {
        "lab-gpu01": {"inventory_hostname_short": "lab-gpu01", "ansible_facts": FACTS, "rack": "r01"},
        "lab-gpu02": {"inventory_hostname_short": "lab-gpu02", "rack": "r01"},
    }
    shapes = filters["slurm_node_shapes"]([POOL], groups, hostvars)
    assert shapes[0]["CPUs"] == 2 and shapes[1]["CPUs"] == 224
    lines = filters["slurm_nodes"](shapes)
    assert len(lines) == 2
    assert filters["slurm_partitions"](shapes, [POOL]) == [
        "PartitionName=h100-lab Nodes=lab-gpu[01-02] Default=NO",
        "PartitionName=all Nodes=lab-gpu[01-02] Default=YES",
    ]
    assert filters["slurm_topology"](shapes) == [
        "SwitchName=leaf-r01 Nodes=lab-gpu[01-02]",
        "SwitchName=top Switches=leaf-r01",
    ]


def test_filter_rejects_a_node_in_two_pools():
    filters = slurm_filter.FilterModule().filters()
    pools = [dict(POOL, name="a", group="g1"), dict(POOL, name="b", group="g2")]
    with pytest.raises(Exception, match="is in pools a and b"):
        filters["slurm_node_shapes"](pools, {"g1": ["n1"], "g2": ["n1"]}, {})
