"""Prometheus scrape targets and alert expectations from the brief and the inventory
(module_utils/ops/observability.py, filter prometheus.py), and the dcgm-exporter test double."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.prometheus import FilterModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import observability as obs

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, *[".."] * 6))

BRIEF = {
    "cluster": {"name": "lab"},
    "controllers": {"group": "slurm_controllers"},
    "networks": {"fabric": {"type": "infiniband", "link_speed_gbps": 400}},
    "pools": [
        {
            "name": "h100-lab",
            "group": "gpu_lab",
            "accelerator": "h100-sxm-80gb",
            "gpus_per_node": 8,
            "nics_per_node": 8,
        },
        {
            "name": "l40s",
            "group": "gpu_l40s",
            "accelerator": "l40s-48gb",
            "gpus_per_node": 4,
            "nic_speed_gbps": 200,
            "nics_per_node": 2,
            "rdma_devices": ["mlx5_*"],
        },
    ],
    "tenants": [{"name": "research", "gpus": 12}, {"name": "vision", "gpus": 4, "pools": ["l40s"]}],
}
GROUPS = {
    "all": ["lab-ctl01", "lab-gpu01", "lab-gpu02", "l40s-01"],
    "slurm_controllers": ["lab-ctl01"],
    "gpu_lab": ["lab-gpu01", "lab-gpu02"],
    "gpu_l40s": ["l40s-01"],
}
HOSTVARS = {
    "lab-ctl01": {"ansible_host": "10.250.10.10"},
    "lab-gpu01": {"ansible_host": "10.250.10.11", "rack": "r01"},
    "lab-gpu02": {"ansible_host": "10.250.10.12", "rack": "r02", "dcgm_exporter_port": 9401},
    "l40s-01": {"ansible_host": "fd00::21", "gpufleet_tenant": "vision-prod"},
}
EXPORTERS = [
    {"job": "node", "port": 9100, "hosts": "all", "port_var": "node_exporter_port"},
    {"job": "dcgm", "port": 9400, "hosts": "gpu", "port_var": "dcgm_exporter_port"},
]


def targets(configs, job):
    cfg = next(c for c in configs if c["job_name"] == job)
    return {s["labels"]["instance"]: (s["targets"], s["labels"]) for s in cfg["static_configs"]}


def test_one_job_per_exporter_one_target_per_host():
    configs = obs.scrape_configs(BRIEF, GROUPS, HOSTVARS, EXPORTERS)
    assert [c["job_name"] for c in configs] == ["node", "dcgm"]
    assert set(targets(configs, "node")) == set(GROUPS["all"])
    assert set(targets(configs, "dcgm")) == {"lab-gpu01", "lab-gpu02", "l40s-01"}


def test_addresses_ports_and_overrides():
    configs = obs.scrape_configs(BRIEF, GROUPS, HOSTVARS, EXPORTERS)
    dcgm = targets(configs, "dcgm")
    assert dcgm["lab-gpu01"][0] == ["10.250.10.11:9400"]
    assert dcgm["lab-gpu02"][0] == ["10.250.10.12:9401"]  # the host's dcgm_exporter_port
    assert dcgm["l40s-01"][0] == ["[fd00::21]:9400"]


def test_labels_from_the_brief_and_the_inventory():
    configs = obs.scrape_configs(BRIEF, GROUPS, HOSTVARS, EXPORTERS)
    node = targets(configs, "node")
    assert node["lab-gpu01"][1] == {
        "instance": "lab-gpu01",
        "cluster": "lab",
        "node": "lab-gpu01",
        "pool": "h100-lab",
        "accelerator": "h100-sxm-80gb",
        "tenant": "research",
        "rack": "r01",
    }
    # A controller is in no pool and no rack here: those labels are left out, not empty.
    assert node["lab-ctl01"][1] == {"instance": "lab-ctl01", "cluster": "lab", "node": "lab-ctl01"}
    # research covers every pool, vision only l40s: shared; the host variable wins over both.
    assert node["l40s-01"][1]["tenant"] == "vision-prod"
    assert obs.pool_tenant(BRIEF, "l40s") == obs.SHARED_TENANT


@pytest.mark.parametrize(
    ("tenants", "pool", "owner"),
    [
        ([], "h100-lab", None),
        ([{"name": "a", "gpus": 1}], "h100-lab", "a"),
        ([{"name": "a", "gpus": 1, "pools": ["x"]}, {"name": "b", "gpus": 1, "pools": ["h100-lab"]}], "h100-lab", "b"),
        ([{"name": "a", "gpus": 1}, {"name": "b", "gpus": 1}], "h100-lab", "shared"),
    ],
)
def test_pool_tenant(tenants, pool, owner):
    assert obs.pool_tenant({**BRIEF, "tenants": tenants}, pool) == owner


def test_controllers_scope_and_groups_and_options():
    exporters = [
        {"job": "slurm", "port": 8080, "hosts": "controllers", "path": "/probe", "interval": "60s"},
        {"job": "l40s_only", "port": 9500, "hosts": "gpu_l40s", "scheme": "https"},
    ]
    configs = obs.scrape_configs(BRIEF, GROUPS, HOSTVARS, exporters)
    assert configs[0]["metrics_path"] == "/probe" and configs[0]["scrape_interval"] == "60s"
    assert list(targets(configs, "slurm")) == ["lab-ctl01"]
    assert list(targets(configs, "l40s_only")) == ["l40s-01"] and configs[1]["scheme"] == "https"


def test_every_problem_at_once_naming_host_and_field():
    exporters = [
        {"job": "node", "port": 9100, "hosts": "all"},
        {"job": "node", "port": 9101, "hosts": "all"},
        {"job": "bad job", "port": 1, "hosts": "all"},
        {"job": "dcgm", "port": 9400, "hosts": "gpu", "port_var": "dcgm_exporter_port"},
        {"job": "x", "port": 9, "hosts": "no_such_group"},
    ]
    hostvars = {**HOSTVARS, "lab-gpu02": {**HOSTVARS["lab-gpu02"], "dcgm_exporter_port": "ninety"}}
    with pytest.raises(obs.ScrapeConfigError) as err:
        obs.scrape_configs(BRIEF, GROUPS, hostvars, exporters)
    found = sorted((v["code"], v["host"], v["field"]) for v in err.value.violations)
    assert found == [
        ("PROM_EXPORTER_HOSTS", None, "exporters[4].hosts"),
        ("PROM_EXPORTER_JOB", None, "exporters[1].job"),
        ("PROM_EXPORTER_JOB", None, "exporters[2].job"),
        ("PROM_EXPORTER_PORT", "lab-gpu02", "dcgm_exporter_port"),
    ]
    assert "expected a TCP port (1-65535), found 'ninety'" in str(err.value)


def test_filter_wraps_errors_and_checks_its_input():
    f = FilterModule().filters()
    assert f["prometheus_scrape_configs"](BRIEF, GROUPS, HOSTVARS, EXPORTERS)[0]["job_name"] == "node"
    with pytest.raises(AnsibleFilterError, match="PROM_EXPORTERS"):
        f["prometheus_scrape_configs"](BRIEF, GROUPS, HOSTVARS, [])
    with pytest.raises(AnsibleFilterError, match="expects the brief"):
        f["prometheus_scrape_configs"]("brief.yml", GROUPS, HOSTVARS, EXPORTERS)


def test_pool_expectations():
    assert FilterModule().filters()["prometheus_pool_expectations"](BRIEF) == [
        {"pool": "h100-lab", "gpus_per_node": 8, "rdma_ports": 8, "rdma_rate_gbps": 400, "rdma_devices": []},
        {"pool": "l40s", "gpus_per_node": 4, "rdma_ports": 2, "rdma_rate_gbps": 200, "rdma_devices": ["mlx5_*"]},
    ]
    no_fabric = {**BRIEF, "networks": {"fabric": {"type": "none"}}}
    assert [p["rdma_ports"] for p in obs.pool_expectations(no_fabric)] == [0, 0]


# --------------------------------------------------------------------------- dcgm-exporter double


def _double():
    path = os.path.join(ROOT, "molecule", "resources", "doubles", "stack", "bin", "dcgm_exporter_double.py")
    spec = importlib.util.spec_from_file_location("dcgm_exporter_double", path)
    module = importlib.util.module_from_spec(spec)
    dont, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont
    return module


dx = _double()
PROFILES = os.path.join(ROOT, "molecule", "resources", "profiles")
COUNTERS = os.path.join(ROOT, "molecule", "resources", "doubles", "stack", "dcgm-exporter", "default-counters.csv")


def _lines(text, name):
    return [line for line in text.splitlines() if line.startswith(name + "{")]


def test_double_serves_the_exposition_format_from_the_profile(tmp_path):
    collectors = dx.read_collectors(COUNTERS)
    assert ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).") in collectors
    text = dx.render(collectors, dx.load_profile(os.path.join(PROFILES, "h100-gpu-missing.json")), "gpu01")
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in text
    temps = _lines(text, "DCGM_FI_DEV_GPU_TEMP")
    assert len(temps) == 7  # the profile lost GPU 7
    assert (
        temps[0].startswith('DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-')
        and 'modelName="NVIDIA H100 80GB HBM3"' in temps[0]
    )
    assert 'Hostname="gpu01"' in temps[0] and temps[0].endswith(" 31")


def test_double_job_mapping_telemetry_and_nvlink(tmp_path):
    profile = dx.load_profile(os.path.join(PROFILES, "h100-nvlink-missing.json"))
    profile["telemetry"] = {"gpus": {"3": {"DCGM_FI_DEV_XID_ERRORS": 79}}}
    (tmp_path / "1").write_text("41\n42\n")
    csv = tmp_path / "c.csv"
    csv.write_text(
        "DCGM_FI_DEV_XID_ERRORS, gauge, x\nDCGM_FI_DEV_NVLINK_GET_STATE, gauge, s\nDCGM_FI_DRIVER_VERSION, label, d\n"
    )
    text = dx.render(dx.read_collectors(str(csv)), profile, "h", str(tmp_path))
    xid = _lines(text, "DCGM_FI_DEV_XID_ERRORS")
    assert [line.rsplit(" ", 1)[1] for line in xid if 'gpu="3"' in line] == ["79"]
    assert sum('gpu="1"' in line for line in xid) == 2
    assert any('gpu="1"' in line and 'hpc_job="42"' in line for line in xid)
    assert all('DCGM_FI_DRIVER_VERSION="570.133.20"' in line for line in xid)
    states = _lines(text, "DCGM_FI_DEV_NVLINK_GET_STATE")
    down = {line.split('gpu="')[1].split('"')[0] for line in states if line.endswith(" 0")}
    assert down == {"2", "5"}  # the profile's missing pair
    assert sum('gpu="0"' in line for line in states) == 18


def test_double_refuses_an_unknown_field_like_dcgm(tmp_path):
    csv = tmp_path / "c.csv"
    csv.write_text("# comment\nDCGM_FI_DEV_NO_SUCH_FIELD, gauge, x\n")
    with pytest.raises(dx.ConfigError, match="could not find DCGM field DCGM_FI_DEV_NO_SUCH_FIELD"):
        dx.read_collectors(str(csv))
    csv.write_text("DCGM_FI_DEV_GPU_TEMP, histogram, x\n")
    with pytest.raises(dx.ConfigError, match="metric type"):
        dx.read_collectors(str(csv))


def test_role_counters_are_fields_the_double_knows():
    import yaml

    with open(os.path.join(ROOT, "roles", "dcgm_exporter", "defaults", "main.yml"), encoding="utf-8") as fh:
        counters = yaml.safe_load(fh)["dcgm_exporter_counters"]
    assert {c[0] for c in counters} <= dx.KNOWN
    assert {c[1] for c in counters} <= {"gauge", "counter", "label"}
