"""The acceptance report keeps the drain breaker's decision and names a dead Slurm daemon as the cause."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.filter.drain_breaker import drain_breaker
from ansible_collections.gpufleet.cluster.plugins.filter.nccl_parse import nccl_parse
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import render_breaker
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import daemons as control_daemons
from ansible_collections.gpufleet.cluster.plugins.modules import acceptance_report
from module_helpers import run_main

HERE = os.path.dirname(os.path.abspath(__file__))
SINGLE_NODE_LOG = os.path.join(HERE, "fixtures", "nccl", "allreduce_multi_runs_single_node.txt")


def run_report(args: dict) -> dict:
    return run_main(acceptance_report.main, args)


def single_runs(hosts: list[str], floor: float) -> list[dict]:
    with open(SINGLE_NODE_LOG, encoding="utf-8") as fh:
        run = nccl_parse(fh.read())["runs"][0]
    return [
        {"label": f"single-node {h}", "scope": "single-node", "host": h, "floor_gbps": floor, "run": run} for h in hosts
    ]


def test_tripped_breaker_is_in_the_json_and_the_markdown(tmp_path):
    # Both nodes of a two-node pool below an impossible single-node floor: the breaker must keep both.
    to_drain = [{"host": "gpu01", "reason": "r"}, {"host": "gpu02", "reason": "r"}]
    decision = drain_breaker(to_drain, {"h100": ["gpu01", "gpu02"]}, field="acceptance_drain_max_share")
    result = run_report(
        {
            "dest": str(tmp_path),
            "cluster": "c",
            "timestamp": "t",
            "runs": single_runs(["gpu01", "gpu02"], 1e9),
            "nodes": [{"host": "gpu01", "versions": {}}, {"host": "gpu02", "versions": {}}],
            "violations": decision["violations"],
            "drained": [],
            "breaker": decision,
            "plots": False,
        }
    )
    assert result["verdict"] == "fail"
    assert "DRAIN_BREAKER_TRIPPED" in [v["code"] for v in result["errors"]]
    report = json.loads(Path(result["json"]).read_text(encoding="utf-8"))
    assert report["breaker"]["tripped"] is True and report["breaker"]["allowed"] is False
    assert report["drained"] == []
    md = Path(result["markdown"]).read_text(encoding="utf-8")
    assert "## Drain breaker" in md and "**TRIPPED: no node was drained**" in md
    assert "| h100 | 2 | 1 | - | gpu01, gpu02 | 2 | TRIPPED |" in md
    assert "- **DRAIN_BREAKER_TRIPPED** drain breaker tripped: pool h100: draining gpu01, gpu02" in md


def test_no_breaker_section_when_the_drain_step_did_not_run(tmp_path):
    result = run_report(
        {
            "dest": str(tmp_path),
            "cluster": "c",
            "timestamp": "t",
            "runs": single_runs(["gpu01"], 1.0),
            "nodes": [{"host": "gpu01", "versions": {}}],
            "plots": False,
        }
    )
    assert result["verdict"] == "pass"
    assert json.loads(Path(result["json"]).read_text(encoding="utf-8"))["breaker"] is None
    assert "Drain breaker" not in Path(result["markdown"]).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("decision", "state"),
    [
        (drain_breaker(["gpu01"], {"h100": ["gpu01", "gpu02"]}), "**closed: the drain went ahead**"),
        (drain_breaker(["gpu01", "gpu02"], {"h100": ["gpu01", "gpu02"]}, force=True), "overridden by force"),
        (drain_breaker([], {"h100": ["gpu01", "gpu02"]}), "Nothing to drain."),
    ],
)
def test_breaker_section_states(decision, state):
    text = "\n".join(render_breaker({"breaker": decision}))
    assert state in text
    assert "at most 25 % of a pool's nodes out of service" in text


def test_a_dead_daemon_fails_the_report_with_its_name_and_nothing_drained(tmp_path):
    # What tasks/control_daemons.yml records when slurmctld was stopped before the multi-node runs:
    # the single-node runs passed, no multi-node run was started, nothing was drained.
    probe = [
        {
            "item": {"host": "lab-ctl01", "units": ["slurmctld", "munge", "slurmdbd"], "role": "controller"},
            "stdout": "inactive\nactive\nactive",
            "rc": 3,
        }
    ]
    found = control_daemons.check(probe, "multi-node")["violations"]
    result = run_report(
        {
            "dest": str(tmp_path),
            "cluster": "lab",
            "timestamp": "t",
            "runs": single_runs(["lab-gpu01", "lab-gpu02"], 1.0),
            "nodes": [{"host": "lab-gpu01", "versions": {}}, {"host": "lab-gpu02", "versions": {}}],
            "violations": found,
            "drained": [],
            "plots": False,
        }
    )
    assert result["verdict"] == "fail"
    assert [(v["code"], v["host"]) for v in result["errors"]] == [("ACCEPTANCE_CONTROL_DAEMON_DOWN", "lab-ctl01")]
    assert result["errors"][0]["message"].startswith("slurmctld is not running on lab-ctl01")
    report = json.loads(Path(result["json"]).read_text(encoding="utf-8"))
    assert report["drained"] == [] and {n["status"] for n in report["nodes"]} == {"pass"}
