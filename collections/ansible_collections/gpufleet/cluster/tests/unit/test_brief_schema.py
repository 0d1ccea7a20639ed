from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import validate
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import DELETE, set_path, site


def _brief():
    return site("slurm")[0]


@pytest.mark.parametrize("name", ["slurm", "k8s", "gvars"])
def test_fixture_briefs_are_clean(name):
    violations, clean = validate(site(name)[0])
    assert violations == []
    assert clean["acceptance"]["max_wrong"] == 0


# (path, value, code, field)
FAILING = [
    ("surprise", 1, "SCHEMA_UNKNOWN_KEY", "surprise"),
    ("pools.0.gpu_count", 8, "SCHEMA_UNKNOWN_KEY", "pools[0].gpu_count"),
    ("networks.fabric.speed", 400, "SCHEMA_UNKNOWN_KEY", "networks.fabric.speed"),
    ("cluster.control_plane", DELETE, "SCHEMA_MISSING_KEY", "cluster.control_plane"),
    ("software", DELETE, "SCHEMA_MISSING_KEY", "software"),
    ("pools.0.accelerator", DELETE, "SCHEMA_MISSING_KEY", "pools[0].accelerator"),
    ("pools.0.gpus_per_node", "eight", "SCHEMA_WRONG_TYPE", "pools[0].gpus_per_node"),
    ("pools.0.gpudirect_rdma", "yes", "SCHEMA_WRONG_TYPE", "pools[0].gpudirect_rdma"),
    ("pools.0.gpus_per_node", True, "SCHEMA_WRONG_TYPE", "pools[0].gpus_per_node"),
    ("networks", [], "SCHEMA_WRONG_TYPE", "networks"),
    ("cluster.control_plane", "nomad", "SCHEMA_BAD_ENUM", "cluster.control_plane"),
    ("networks.fabric.type", "omnipath", "SCHEMA_BAD_ENUM", "networks.fabric.type"),
    ("pools.0.sharing", "vgpu", "SCHEMA_BAD_ENUM", "pools[0].sharing"),
    ("pools.0.topology", "mesh", "SCHEMA_BAD_ENUM", "pools[0].topology"),
    ("brief_version", 2, "SCHEMA_BAD_ENUM", "brief_version"),
    ("pools.0.gpus_per_node", 0, "SCHEMA_OUT_OF_RANGE", "pools[0].gpus_per_node"),
    ("pools", [], "SCHEMA_OUT_OF_RANGE", "pools"),
    ("software.driver", "latest", "SCHEMA_BAD_FORMAT", "software.driver"),
    ("acceptance.max_bytes", "lots", "SCHEMA_BAD_FORMAT", "acceptance.max_bytes"),
    ("cluster.name", "Bad Name!", "SCHEMA_BAD_FORMAT", "cluster.name"),
    ("pools.0.labels", {"ok": "a b"}, "SCHEMA_BAD_FORMAT", "pools[0].labels.ok"),
    ("software.cuda", 12.8, "SCHEMA_UNQUOTED_VERSION", "software.cuda"),
    ("cluster.name", "lab\n", "SCHEMA_CONTROL_CHAR", "cluster.name"),
    ("pools.0.labels", {"tier": "a\n"}, "SCHEMA_BAD_FORMAT", "pools[0].labels.tier"),
    ("software.driver", "570.133.20\n", "SCHEMA_BAD_FORMAT", "software.driver"),
    ("acceptance.max_bytes", "8G\n", "SCHEMA_BAD_FORMAT", "acceptance.max_bytes"),
    ("pools.0.rdma_devices", ["mlx5_*", "$(reboot)"], "SCHEMA_BAD_FORMAT", "pools[0].rdma_devices[1]"),
    (
        "acceptance.workload",
        {"command": "true", "checkpoint_dir": "/ckpt", "image": "nvcr.io/x:1 --privileged"},
        "SCHEMA_BAD_FORMAT",
        "acceptance.workload.image",
    ),
    ("pools.0.accelerator", "h100-sxm\n", "SCHEMA_CONTROL_CHAR", "pools[0].accelerator"),
    ("cluster.description", "{{ lookup('pipe', 'id') }}", "SCHEMA_TEMPLATE_SYNTAX", "cluster.description"),
    (
        "cost",
        {"monthly": {"compute": float("inf")}, "unit": {"name": "job"}},
        "SCHEMA_WRONG_TYPE",
        "cost.monthly.compute",
    ),
]


@pytest.mark.parametrize(("path", "value", "code", "field"), FAILING, ids=[f"{c[2]}:{c[3]}" for c in FAILING])
def test_schema_failures(path, value, code, field):
    brief = _brief()
    set_path(brief, path, value)
    violations, _clean = validate(brief)
    hits = [v for v in violations if v["code"] == code and v["field"] == field]
    assert hits, violations
    assert hits[0]["host"] is None
    assert "expected" in hits[0]["message"] and "found" in hits[0]["message"]


# Fields the format may add: valid values pass.
PASSING = [
    ("pools.0.sharing_config", {"mig_profile": "1g.10gb"}),
    ("pools.0.labels", {"gpufleet.io/pool": "train", "tier": "a"}),
    ("pools.0.taints", ["nvidia.com/gpu=present:NoSchedule"]),
    ("pools.0.acceptance", {"single_node_busbw_gbps": 400}),
    ("acceptance.max_wrong_waived", True),
    ("software.slurm", "24.11.5"),
    ("networks.fabric.roce", {"pfc_priority": 3, "dscp": 26, "ecn": True}),
    ("cluster.description", "anything"),
    ("pools.0.rdma_devices", ["mlx5_[0-3]", "mlx5_?", "ibp24s0"]),
]


@pytest.mark.parametrize(("path", "value"), PASSING, ids=[p[0] for p in PASSING])
def test_schema_passes(path, value):
    brief = _brief()
    set_path(brief, path, value)
    assert validate(brief)[0] == []


def test_every_problem_reported_at_once():
    brief = _brief()
    set_path(brief, "cluster.control_plane", "nomad")
    set_path(brief, "pools.0.sharing", "vgpu")
    set_path(brief, "extra", 1)
    codes = [v["code"] for v in validate(brief)[0]]
    assert sorted(codes) == ["SCHEMA_BAD_ENUM", "SCHEMA_BAD_ENUM", "SCHEMA_UNKNOWN_KEY"]


@pytest.mark.parametrize("brief", [None, [], "x", 1, {1: 2}, {"pools": "x" * 5000}, {"pools": [None] * 300}])
def test_hostile_briefs_never_crash(brief):
    violations, clean = validate(brief)
    assert violations
    assert isinstance(clean, dict)
    assert all(len(v["message"]) < 500 for v in violations)


def test_defaults_filled():
    brief = _brief()
    set_path(brief, "pools.0.sharing", DELETE)
    set_path(brief, "acceptance", DELETE)
    _v, clean = validate(brief)
    assert clean["pools"][0]["sharing"] == "full-gpu"
    assert clean["acceptance"]["max_wrong"] == 0 and clean["acceptance"]["max_bytes"] == "8G"
