"""The Prometheus XID alerts come from the XID catalogue: the critical list is the catalogue's codes whose
action takes the GPU or node out of service, the rule renders exactly those, and the promtool tests' XIDs
sit on the side of the line the catalogue puts them."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from ansible_collections.gpufleet.cluster.plugins.filter.xid_drain_reasons import FilterModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import xid_catalogue
from jinja2 import Environment, StrictUndefined
from jinja2.nativetypes import NativeEnvironment

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = ROOT / "roles/prometheus/defaults/main.yml"
RULES = ROOT / "roles/prometheus/templates/etc/prometheus/rules.d/gpufleet.yml.j2"
PROMTOOL_TESTS = ROOT / "tests/prometheus/gpufleet-rules.test.yml"
OUT_OF_SERVICE = ("drain", "reset_gpu", "reboot", "replace")


def critical_default() -> list[int]:
    env = NativeEnvironment(undefined=StrictUndefined)
    env.filters["gpufleet.cluster.xid_drain_reasons"] = FilterModule().filters()["xid_drain_reasons"]
    source = yaml.safe_load(DEFAULTS.read_text())["prometheus_alert_xid_critical"]
    return env.from_string(source).render()


def catalogue_critical() -> list[int]:
    return sorted(int(e.key) for e in xid_catalogue.xids() if e.action in OUT_OF_SERVICE)


def test_the_default_critical_list_is_the_catalogues():
    codes = critical_default()
    assert codes == catalogue_critical()
    assert 79 in codes and 48 in codes and 13 not in codes and 31 not in codes


def xid_exprs(codes: list[int]) -> dict[str, str]:
    """The XID rules' expressions as the template renders them (its variables between [% %])."""
    env = Environment(variable_start_string="[%", variable_end_string="%]", undefined=StrictUndefined)
    text = RULES.read_text()
    out = {}
    for alert in ("GpuXidCritical", "GpuXidError"):
        expr = re.search(r"- alert: " + alert + r"\n\s+expr: (.*)\n", text).group(1)
        out[alert] = env.from_string(expr).render(prometheus_alert_xid_critical=codes)
    return out


def test_the_rules_raise_exactly_the_catalogues_critical_xids():
    exprs = xid_exprs(critical_default())
    critical = sorted(int(c) for c in re.findall(r"DCGM_FI_DEV_XID_ERRORS == (\d+)", exprs["GpuXidCritical"]))
    assert critical == catalogue_critical()
    unless = sorted(int(c) for c in re.findall(r"== (\d+)", exprs["GpuXidError"]))
    assert unless == catalogue_critical()
    assert exprs["GpuXidError"].startswith("DCGM_FI_DEV_XID_ERRORS > 0 unless on (instance, gpu)")


def test_the_promtool_tests_xids_are_on_the_catalogues_side():
    tests = yaml.safe_load(PROMTOOL_TESTS.read_text())["tests"]
    xid = next(t for t in tests if t["name"].startswith("XID"))
    fired = {}
    for case in xid["alert_rule_test"]:
        for alert in case["exp_alerts"]:
            fired[case["alertname"]] = int(re.search(r"XID (\d+)", alert["exp_annotations"]["summary"]).group(1))
    assert fired["GpuXidCritical"] in catalogue_critical()
    assert fired["GpuXidError"] not in catalogue_critical()
