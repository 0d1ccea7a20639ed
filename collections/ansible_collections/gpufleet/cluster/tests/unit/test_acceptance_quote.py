"""The provider's quote beside the brief and the measurement (module_utils/acceptance/quote.py)."""

from __future__ import annotations

import copy

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import quote as aq
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import build_report, render_markdown
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import validate

BRIEF = {
    "networks": {"fabric": {"type": "infiniband", "link_speed_gbps": 400}},
    "acceptance": {"single_node_busbw_gbps": 440, "multi_node_busbw_gbps": 330},
    "pools": [
        {
            "name": "h100",
            "group": "gpu_h100",
            "accelerator": "h100-sxm-80gb",
            "gpus_per_node": 8,
            "topology": "8gpu-sxm-nvlink",
            "nics_per_node": 8,
            "quote": {
                "source": "provider quote Q-1142, 2026-11-02",
                "accelerator": "NVIDIA H100 80GB HBM3",
                "gpus_per_node": 8,
                "nics_per_node": 8,
                "nic_speed_gbps": 400,
                "fabric": "infiniband",
                "single_node_busbw_gbps": 480,
                "multi_node_busbw_gbps": 370,
            },
        }
    ],
}
NODES = [{"host": h, "pool": "h100", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8} for h in ("gpu01", "gpu02")]
RUNS = [
    {"scope": "single-node", "host": "gpu01", "busbw_largest": 478.0},
    {"scope": "single-node", "host": "gpu02", "busbw_largest": 476.0},
    {"scope": "multi-node", "host": None, "busbw_largest": 365.0, "run": {"hosts": ["gpu01", "gpu02"]}},
]
DEBUG = [{"hosts": ["gpu01", "gpu02"], "nnodes": 2, "network": "IB", "link_layers": ["IB"], "socket_fallback": False}]


def rows(section: list[dict]) -> dict:
    return {r["field"]: r for r in section[0]["rows"]}


def test_a_quote_met_by_brief_and_measurement_has_no_difference():
    section, found = aq.compare(BRIEF, nodes=NODES, runs=RUNS, debug=DEBUG)
    assert found == []
    assert section[0]["pool"] == "h100" and section[0]["source"] == "provider quote Q-1142, 2026-11-02"
    r = rows(section)
    assert (r["single_node_busbw_gbps"]["quote"], r["single_node_busbw_gbps"]["measured"]) == (480, 477.0)
    assert r["fabric"]["measured"] == "infiniband" and r["accelerator"]["brief"] == "h100-sxm-80gb"
    assert "topology" not in r  # not quoted


def test_each_difference_is_named_as_a_warning():
    brief = copy.deepcopy(BRIEF)
    brief["pools"][0]["nics_per_node"] = 4  # the brief contradicts the quote
    slow = [dict(RUNS[0]), dict(RUNS[1], busbw_largest=470.0), dict(RUNS[2], busbw_largest=300.0)]
    sockets = [dict(DEBUG[0], network="Socket", socket_fallback=True, link_layers=[])]
    nodes = [NODES[0], dict(NODES[1], gpu_count=7)]
    _, found = aq.compare(brief, nodes=nodes, runs=slow, debug=sockets)
    assert {(v["code"], v["severity"], v["field"]) for v in found} == {
        ("QUOTE_DIFFERS", "warning", "pools[h100].quote.nics_per_node"),
        ("QUOTE_DIFFERS", "warning", "pools[h100].quote.gpus_per_node"),
        ("QUOTE_DIFFERS", "warning", "pools[h100].quote.fabric"),
        ("QUOTE_DIFFERS", "warning", "pools[h100].quote.multi_node_busbw_gbps"),
    }
    text = {v["field"].rsplit(".", 1)[1]: v["message"] for v in found}
    assert "the brief says 4, the quote 8" in text["nics_per_node"]
    assert "measured 7, 8, quoted 8" in text["gpus_per_node"]
    assert "measured ethernet, quoted infiniband" in text["fabric"]
    assert "measured 300.0 GB/s is more than 5% below the quoted 370 GB/s (-18.9%)" in text["multi_node_busbw_gbps"]


def test_the_brief_can_make_a_difference_fail_and_widen_the_tolerance():
    brief = copy.deepcopy(BRIEF)
    brief["acceptance"].update(quote_differs="fail", quote_busbw_tolerance=0.2)
    slow = [*RUNS[:2], dict(RUNS[2], busbw_largest=300.0)]
    assert aq.compare(brief, nodes=NODES, runs=slow, debug=DEBUG)[1] == []  # 18.9 % below: within 20 %
    brief["acceptance"]["single_node_busbw_gbps"] = 500  # the floor asks more than was quoted
    (found,) = aq.compare(brief, nodes=NODES, runs=slow, debug=DEBUG)[1]
    assert (
        found["severity"] == "error" and "the brief's floor 500 GB/s is above the quoted 480 GB/s" in found["message"]
    )


def test_a_top_level_quote_applies_to_every_pool_and_a_pools_own_fields_win():
    brief = copy.deepcopy(BRIEF)
    own = brief["pools"][0].pop("quote")
    brief["quote"] = dict(own, gpus_per_node=4)
    brief["pools"][0]["quote"] = {"gpus_per_node": 8}
    assert aq.pool_quote(brief, brief["pools"][0])["gpus_per_node"] == 8
    assert aq.compare(brief, nodes=NODES, runs=RUNS, debug=DEBUG)[1] == []
    del brief["pools"][0]["quote"]
    # Quoted 4: the brief (8) and the nodes (8) both differ.
    found = aq.compare(brief, nodes=NODES, runs=RUNS, debug=DEBUG)[1]
    assert [v["field"] for v in found] == ["pools[h100].quote.gpus_per_node"] * 2


def test_no_quote_no_section():
    brief = copy.deepcopy(BRIEF)
    del brief["pools"][0]["quote"]
    assert aq.compare(brief, nodes=NODES, runs=RUNS, debug=DEBUG) == ([], [])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"quote_differs": "maybe"}, "acceptance.quote_differs: expected warn or fail, found 'maybe'"),
        ({"quote_busbw_tolerance": 2}, "acceptance.quote_busbw_tolerance: expected a share from 0 to 1, found 2"),
    ],
)
def test_bad_settings_name_the_field(change, message):
    brief = copy.deepcopy(BRIEF)
    brief["acceptance"].update(change)
    with pytest.raises(aq.QuoteError, match=message):
        aq.compare(brief)


def test_a_quote_that_is_not_a_mapping_is_named():
    brief = copy.deepcopy(BRIEF)
    brief["pools"][0]["quote"] = "480 GB/s"
    with pytest.raises(aq.QuoteError, match=r"pools\[h100\].quote: expected a mapping of quoted fields, found str"):
        aq.compare(brief)


def test_the_schema_validates_the_quote():
    from hw_helpers import BRIEF as FULL

    brief = copy.deepcopy(FULL)
    brief["quote"] = {"fabric": "infiniband", "single_node_busbw_gbps": 480}
    brief["pools"][0]["quote"] = {"gpus_per_node": 0, "fabric": "token-ring", "colour": "green"}
    brief["acceptance"] = {"quote_differs": "sometimes"}
    found, _ = validate(brief)
    fields = {v["field"] for v in found}
    assert {
        "pools[0].quote.gpus_per_node",
        "pools[0].quote.fabric",
        "pools[0].quote.colour",
        "acceptance.quote_differs",
    } <= fields, found
    assert not any(f.startswith("quote.") for f in fields)


def test_the_report_shows_quote_brief_and_measurement_side_by_side():
    runs = [
        {"label": f"single-node {h}", "scope": "single-node", "host": h, "floor_gbps": 440, "run": _run(b, [h])}
        for h, b in (("gpu01", 478.0), ("gpu02", 476.0))
    ]
    runs.append(
        {"label": "all-nodes", "scope": "multi-node", "floor_gbps": 330, "run": _run(340.0, ["gpu01", "gpu02"])}
    )
    report = build_report("site", runs=runs, nodes=NODES, debug=DEBUG, brief=BRIEF, timestamp="T")
    assert [v["field"] for v in report["violations"] if v["code"] == "QUOTE_DIFFERS"] == [
        "pools[h100].quote.multi_node_busbw_gbps"
    ]
    text = render_markdown(report)
    assert "## Provider's quote" in text and "### h100 (provider quote Q-1142, 2026-11-02)" in text
    assert report["verdict"] == "pass"
    assert "| single_node_busbw_gbps | 480 | 440 | 477.00 | none |" in text
    assert "| multi_node_busbw_gbps | 370 | 330 | 340.00 | measured 340.0 GB/s is more than 5% below" in text


def _run(busbw: float, hosts: list[str]) -> dict:
    row = {"size": 8 << 30, "type": "float", "oop_busbw": busbw, "ip_busbw": busbw, "oop_wrong": 0, "ip_wrong": 0}
    return {"rows": [dict(row, oop_time_us=1.0, ip_time_us=1.0)], "out_of_bounds": 0, "hosts": hosts}


def test_the_report_module_reads_the_brief_and_names_a_bad_quote(tmp_path):
    from ansible_collections.gpufleet.cluster.plugins.modules import acceptance_report
    from module_helpers import FailJson, module_args, run_main

    runs = [
        {
            "label": "single-node gpu01",
            "scope": "single-node",
            "host": "gpu01",
            "floor_gbps": 440,
            "run": _run(478.0, ["gpu01"]),
        }
    ]
    args = {"dest": str(tmp_path), "cluster": "site", "runs": runs, "nodes": NODES[:1], "plots": False}
    result = run_main(acceptance_report.main, dict(args, brief=BRIEF))
    assert result["verdict"] == "pass"
    report = (tmp_path / "site").rglob("acceptance.json").__next__().read_text()
    assert '"quote": [' in report and '"pool": "h100"' in report
    bad = copy.deepcopy(BRIEF)
    bad["acceptance"]["quote_differs"] = "loudly"
    with module_args(dict(args, brief=bad)), pytest.raises(FailJson) as exc:
        acceptance_report.main()
    assert exc.value.args[0]["msg"] == "brief: acceptance.quote_differs: expected warn or fail, found 'loudly'"


def test_the_example_sites_quote_agrees_with_its_brief():
    """inventories/example-h100-ib-slurm carries a sample quote; before anything is measured it must match the brief."""
    import os

    import yaml

    root = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 6))
    with open(os.path.join(root, "inventories", "example-h100-ib-slurm", "brief.yml"), encoding="utf-8") as fh:
        brief = yaml.safe_load(fh)
    found, _ = validate(brief)
    assert [v for v in found if v["severity"] == "error"] == []
    section, differences = aq.compare(brief)
    assert differences == [] and len(section[0]["rows"]) == 8
