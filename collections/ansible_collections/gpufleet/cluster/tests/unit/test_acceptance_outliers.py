"""Nodes judged against their own pool (module_utils/acceptance/outliers.py) and the report's section."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import outliers as ao
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import build_report, render_markdown

# Eight H100 nodes as an HGX pool measures them: out-of-place busbw at 8 GB within about +-0.5 %.
EIGHT = {f"gpu{i:02d}": v for i, v in enumerate([481.2, 479.8, 480.5, 482.0, 478.9, 480.1, 481.7, 479.4], 1)}
FLOOR = 400.0


def single(host: str, busbw: float) -> dict:
    """A report run entry of a node's single-node run (what build_report's _run_entry gives)."""
    return {"scope": "single-node", "host": host, "busbw_largest": busbw}


def brief(**outliers) -> dict:
    return {"acceptance": {"outliers": outliers}} if outliers else {}


def test_a_pool_of_identical_nodes_has_no_outlier():
    assert ao.find(EIGHT) == []
    section, found = ao.judge({}, pools=dict.fromkeys(EIGHT, "h100"), runs=[single(h, v) for h, v in EIGHT.items()])
    assert found == [] and section[0]["nodes"] == 8 and section[0]["outliers"] == []


def test_a_node_ten_percent_slower_but_above_the_floor_is_named():
    values = dict(EIGHT, gpu05=round(EIGHT["gpu05"] * 0.9, 1))
    assert values["gpu05"] > FLOOR
    section, found = ao.judge({}, pools=dict.fromkeys(values, "h100"), runs=[single(h, v) for h, v in values.items()])
    assert [(v["code"], v["host"], v["severity"]) for v in found] == [("NCCL_OUTLIER", "gpu05", "warning")]
    assert "single-node busbw 431 GB/s is 10.3% below 480.3 GB/s, pool h100's median of 8 nodes" in found[0]["message"]
    assert section[0]["outliers"][0]["z"] > ao.DEFAULTS["mad_threshold"]


def test_the_brief_makes_an_outlier_fail():
    values = dict(EIGHT, gpu05=430.0)
    _, found = ao.judge(
        brief(severity="fail"), pools=dict.fromkeys(values, "h100"), runs=[single(h, v) for h, v in values.items()]
    )
    assert [(v["host"], v["severity"]) for v in found] == [("gpu05", "error")]


def test_a_pool_of_two_only_warns_even_when_the_brief_says_fail():
    runs = [single("gpu01", 480.0), single("gpu02", 430.0)]
    section, found = ao.judge(brief(severity="fail"), pools={"gpu01": "h100", "gpu02": "h100"}, runs=runs)
    assert [(v["host"], v["severity"]) for v in found] == [("gpu02", "warning")]
    assert "too small to judge robustly" in found[0]["message"]
    assert section[0]["outliers"][0]["small_pool"] is True


def test_a_noisy_pool_does_not_name_its_ordinary_spread():
    """Nodes spread over +-4 %: one 6 % below the median is within the pool's own scatter (z < 3.5)."""
    noisy = {f"n{i}": v for i, v in enumerate([500, 480, 490, 470, 510, 460, 495, 465, 452])}
    assert ao.find(noisy) == []


def test_each_pool_has_its_own_median():
    pools = {**dict.fromkeys(EIGHT, "h100"), "l1": "l40s", "l2": "l40s", "l3": "l40s", "l4": "l40s"}
    runs = [single(h, v) for h, v in EIGHT.items()] + [single(h, 120.0) for h in ("l1", "l2", "l3", "l4")]
    section, found = ao.judge({}, pools=pools, runs=runs)
    assert found == [] and {s["pool"] for s in section} == {"h100", "l40s"}


def test_a_node_slow_at_the_smallest_size_is_named_by_its_worst_run():
    # Eight nodes at 30-31 us for the smallest message; gpu04 twice, its re-run 38 us (a slow CPU or
    # NIC path shows first in latency, with busbw at 8 GB unchanged).
    latency = dict(zip(EIGHT, [30.2, 30.6, 30.1, 30.4, 30.9, 30.3, 30.7, 30.5], strict=True))
    runs = [dict(single(h, v), latency_us=latency[h]) for h, v in EIGHT.items()]
    runs.append(dict(single("gpu04", EIGHT["gpu04"]), latency_us=38.0))
    section, found = ao.judge({}, pools=dict.fromkeys(EIGHT, "h100"), runs=runs)
    assert [(v["code"], v["host"]) for v in found] == [("NCCL_OUTLIER", "gpu04")]
    assert "single-node latency at the smallest size 38 us is" in found[0]["message"]
    assert "above" in found[0]["message"]
    by_metric = {s["metric"]: s for s in section}
    assert by_metric["latency_us"]["nodes"] == 8 and by_metric["single_node_busbw"]["outliers"] == []


def test_storage_and_checkpoint_restore():
    def rec(host, write, restore):
        return {
            "host": host,
            "targets": [{"kind": "scratch", "status": "measured", "write": {"gbps": write}, "read": {"gbps": 12.0}}],
            "checkpoint": {"read_s": restore},
        }

    hosts = [f"gpu{i:02d}" for i in range(1, 7)]
    storage = [rec(h, 6.0 if h != "gpu03" else 4.8, 20.0 if h != "gpu06" else 26.0) for h in hosts]
    _, found = ao.judge({}, pools=dict.fromkeys(hosts, "h100"), storage=storage)
    assert sorted((v["code"], v["host"], v["message"].split(" ")[0]) for v in found) == [
        ("STORAGE_OUTLIER", "gpu03", "scratch"),
        ("STORAGE_OUTLIER", "gpu06", "checkpoint"),
    ]
    restore = next(v for v in found if v["host"] == "gpu06")
    assert "30.0% above 20 s" in restore["message"]


def test_a_node_without_a_pool_or_a_figure_is_not_judged():
    _, found = ao.judge({}, pools={"gpu01": "h100"}, runs=[single("gpu01", 480.0), single("gpu02", 100.0)])
    assert found == []


@pytest.mark.parametrize(
    ("outliers", "message"),
    [
        ({"severity": "loud"}, "acceptance.outliers.severity: expected warn or fail, found 'loud'"),
        ({"min_deviation": 5}, "acceptance.outliers.min_deviation: expected a number from 0 to 1, found 5"),
        ({"min_pool_size": 1}, "acceptance.outliers.min_pool_size: expected a number at least 2, found 1"),
        ({"mad_threshold": "high"}, "acceptance.outliers.mad_threshold: expected a number at least 0, found 'high'"),
    ],
)
def test_bad_settings_name_the_field(outliers, message):
    with pytest.raises(ao.OutlierError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ao.settings({"acceptance": {"outliers": outliers}})


def test_the_report_judges_and_shows_outliers():
    values = dict(EIGHT, gpu05=430.0)
    runs = [
        {"label": f"single-node {h}", "scope": "single-node", "host": h, "floor_gbps": FLOOR, "run": run_of(v)}
        for h, v in values.items()
    ]
    nodes = [{"host": h, "pool": "h100", "versions": {}} for h in values]
    report = build_report("lab", runs=runs, nodes=nodes, brief={"pools": [{"name": "h100"}]}, timestamp="T")
    assert report["verdict"] == "pass" and report["counts"]["warnings"] == 1
    assert [v["host"] for v in report["violations"] if v["code"] == "NCCL_OUTLIER"] == ["gpu05"]
    text = render_markdown(report)
    assert "## Outliers within a pool" in text and "gpu05 430 (-10.5%)" in text
    failing = build_report(
        "lab", runs=runs, nodes=nodes, brief={"acceptance": {"outliers": {"severity": "fail"}}}, timestamp="T"
    )
    assert failing["verdict"] == "fail"
    assert "outliers" in build_report("lab", runs=runs, nodes=nodes, timestamp="T")


def run_of(busbw: float) -> dict:
    """A parsed nccl-tests run with one row at 8 GB (the fields summarize_run reads)."""
    return {
        "rows": [
            {
                "size": 8 << 30,
                "type": "float",
                "oop_busbw": busbw,
                "ip_busbw": busbw,
                "oop_wrong": 0,
                "ip_wrong": 0,
                "oop_time_us": 1.0,
                "ip_time_us": 1.0,
            }
        ],
        "out_of_bounds": 0,
        "hosts": [],
    }
