"""The drain circuit breaker: module_utils/ops/drain_breaker.py and its filters (acceptance and remediation)."""

from __future__ import annotations

import json
import os

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.drain_breaker import (
    drain_breaker,
    k8s_out_of_service,
    slurm_out_of_service,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import drain_breaker as breaker

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "breaker")


def nodes(n: int, prefix: str = "gpu") -> list[str]:
    return [f"{prefix}{i:02d}" for i in range(1, n + 1)]


# --- the limit ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "share", "limit"),
    [
        (2, 0.25, 1),  # rounded up: one bad node of a two-node pool may still be drained
        (1, 0.25, 1),
        (4, 0.25, 1),
        (5, 0.25, 2),
        (8, 0.25, 2),
        (9, 0.25, 3),
        (30, 0.1, 3),
        (100, 0.07, 7),  # 0.07 * 100 is 7.000000000000001 in floating point: still 7
        (100, 0.55, 55),  # 0.55 * 100 is 55.00000000000001
        (7, 0.0, 0),
        (7, 1.0, 7),
        (0, 0.25, 0),
    ],
)
def test_limit_is_the_share_rounded_up(size, share, limit):
    assert breaker.drain_limit(size, share) == limit


# --- judging one run ------------------------------------------------------------------------

CASES = [
    # id, pool size, to drain, out of service before, share, tripped, over_share, last_node
    ("one of two", 2, ["gpu02"], [], 0.25, False, False, False),
    ("both of two", 2, ["gpu01", "gpu02"], [], 0.25, True, True, True),
    ("the other of two is down already", 2, ["gpu02"], ["gpu01"], 0.25, True, True, True),
    ("one of four, one down already", 4, ["gpu02"], ["gpu04"], 0.25, True, True, False),
    ("one of four, itself drained already", 4, ["gpu02"], ["gpu02"], 0.25, False, False, False),
    # Past its share already, but draining a node that is out takes nothing more away.
    ("again a node out already, pool past its share", 4, ["gpu02"], ["gpu01", "gpu02"], 0.25, False, True, False),
    ("the only node", 1, ["gpu01"], [], 0.25, True, False, True),
    ("two of eight", 8, ["gpu01", "gpu05"], [], 0.25, False, False, False),
    ("three of eight", 8, ["gpu01", "gpu05", "gpu08"], [], 0.25, True, True, False),
    ("three of thirty at 10 %", 30, ["gpu01", "gpu02", "gpu03"], [], 0.1, False, False, False),
    ("four of thirty at 10 %", 30, ["gpu01", "gpu02", "gpu03", "gpu04"], [], 0.1, True, True, False),
    ("share 1 still keeps the last node", 2, ["gpu02"], ["gpu01"], 1.0, True, False, True),
    ("share 0 drains nothing", 8, ["gpu03"], [], 0.0, True, True, False),
    ("down nodes of other pools do not count", 4, ["gpu02"], ["cpu01", "cpu02"], 0.25, False, False, False),
]


@pytest.mark.parametrize(
    ("size", "to_drain", "out", "share", "tripped", "over_share", "last_node"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_judge_one_pool(size, to_drain, out, share, tripped, over_share, last_node):
    decision = breaker.judge({"h100": nodes(size)}, to_drain, out, share=share)
    assert decision["tripped"] is tripped
    assert decision["allowed"] is (not tripped)
    assert decision["forced"] is False
    (row,) = decision["pools"]
    assert (row["over_share"], row["last_node"], row["tripped"]) == (over_share, last_node, tripped)
    assert row["size"] == size and row["to_drain"] == to_drain
    assert row["new"] == [n for n in to_drain if n not in out]
    assert row["in_service_after"] == size - row["out_after"]


def test_one_pool_past_its_limit_stops_every_drain():
    pools = {"h100": nodes(4), "l40s": nodes(8, "l40s")}
    decision = breaker.judge(pools, ["gpu01", "gpu02", "l40s01"], [])
    assert decision["tripped"] and not decision["allowed"]
    by_pool = {r["pool"]: r for r in decision["pools"]}
    assert by_pool["h100"]["tripped"] and not by_pool["l40s"]["tripped"]


def test_force_lets_a_tripped_breaker_drain():
    decision = breaker.judge({"h100": nodes(2)}, ["gpu01", "gpu02"], [], force=True)
    assert (decision["tripped"], decision["allowed"], decision["forced"]) == (True, True, True)
    # Force on a breaker that did not trip changes nothing.
    quiet = breaker.judge({"h100": nodes(2)}, ["gpu01"], [], force=True)
    assert (quiet["tripped"], quiet["allowed"], quiet["forced"]) == (False, True, False)


def test_nothing_to_drain_lists_no_pool():
    decision = breaker.judge({"h100": nodes(2)}, [], ["gpu01", "gpu02"])
    assert decision == {
        "tripped": False,
        "allowed": True,
        "forced": False,
        "share": 0.25,
        "to_drain": [],
        "pools": [],
    }


@pytest.mark.parametrize(
    ("pools", "to_drain", "share", "match"),
    [
        ({"h100": ["gpu01"]}, ["gpu09"], 0.25, "gpu09: in no pool"),
        ({"h100": ["gpu01"]}, ["gpu01"], 1.5, "share must be a number from 0 to 1"),
        ({"h100": ["gpu01"]}, ["gpu01"], -0.1, "share must be"),
        ({"h100": ["gpu01"]}, ["gpu01"], True, "share must be"),
        ({"h100": ["gpu01"]}, ["gpu01"], "a quarter", "share must be"),
        (["gpu01"], ["gpu01"], 0.25, "pools must map"),
        ({"h100": "gpu01"}, ["gpu01"], 0.25, "must be a list of node names"),
        ({"h100": ["gpu01"]}, "gpu01", 0.25, "to_drain must be a list"),
    ],
)
def test_judge_misuse(pools, to_drain, share, match):
    with pytest.raises(breaker.BreakerError, match=match):
        breaker.judge(pools, to_drain, [], share=share)


# --- what the operator reads -----------------------------------------------------------------


def test_tripped_message_names_nodes_limit_and_likely_fault():
    decision = breaker.judge({"h100-lab": nodes(4)}, ["gpu01", "gpu02"], ["gpu04"])
    (found,) = breaker.violations(
        decision, field="acceptance_drain_max_share", force_hint="--force (acceptance_drain_force=true)"
    )
    assert found["code"] == "DRAIN_BREAKER_TRIPPED" and found["severity"] == "error" and found["host"] is None
    assert found["field"] == "acceptance_drain_max_share"
    text = found["message"]
    for part in (
        "drain breaker tripped",
        "pool h100-lab: draining gpu01, gpu02 (with gpu04 already out of service)",
        "3 of its 4 nodes out of service",
        "the limit of 1 (25 % of 4, rounded up)",
        "None of the 2 node(s) to drain (gpu01, gpu02) was drained",
        "the floor, the brief or the fabric rather than the nodes",
        "--force (acceptance_drain_force=true)",
    ):
        assert part in text, (part, text)


def test_last_node_message_and_remediation_hint():
    decision = breaker.judge({"h100": nodes(1)}, ["gpu01"], [])
    text = breaker.message(decision, source="remediation")
    assert "would leave 1 of its 1 nodes out of service, none in service" in text
    assert "limit of" not in text  # the share allows one node of one: only the last-node rule tripped
    assert "the brief (its pins)" in text and "floor" not in text


def test_forced_is_a_warning_and_a_quiet_breaker_says_nothing():
    forced = breaker.judge({"h100": nodes(2)}, ["gpu01", "gpu02"], [], force=True)
    (warn,) = breaker.violations(forced, field="remediate_drain_max_share", source="remediation")
    assert warn["code"] == "DRAIN_BREAKER_FORCED" and warn["severity"] == "warning"
    assert "overridden by force" in warn["message"] and "Drained anyway: gpu01, gpu02" in warn["message"]
    assert breaker.violations(breaker.judge({"h100": nodes(2)}, ["gpu01"], []), field="x") == []


# --- nodes already out of service ------------------------------------------------------------


def test_slurm_out_of_service_from_sinfo_states():
    with open(os.path.join(FIXTURES, "sinfo-node-states.txt"), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    # Listed once each, in sinfo's order; idle~ (powered down, wakes on demand), mix- (planned) and
    # planned take jobs; "*" (not responding) and "$" (maintenance reservation) do not.
    assert breaker.slurm_out_of_service(lines) == [
        "gpu02",
        "gpu04",
        "gpu05",
        "gpu06",
        "gpu09",
        "gpu12",
        "gpu14",
        "gpu15",
    ]
    assert breaker.slurm_out_of_service(["", "no separator", "|idle", "gpu01|IDLE"]) == []


def test_k8s_out_of_service_from_kubectl_nodes():
    with open(os.path.join(FIXTURES, "kubectl-get-nodes.json"), encoding="utf-8") as fh:
        data = json.load(fh)
    assert breaker.k8s_out_of_service(data["items"]) == ["gpu-l40s-02", "gpu-l40s-03", "gpu-l40s-04"]
    assert k8s_out_of_service(data) == ["gpu-l40s-02", "gpu-l40s-03", "gpu-l40s-04"]
    assert k8s_out_of_service({}) == []


# --- the filters --------------------------------------------------------------------------


def test_filter_takes_drain_records_and_returns_the_violation():
    to_drain = [
        {"host": "gpu01", "reason": "gpufleet acceptance: single-node 89.5 GB/s < 440 GB/s floor"},
        {"host": "gpu02", "reason": "gpufleet acceptance: single-node 90.1 GB/s < 440 GB/s floor"},
    ]
    out = drain_breaker(to_drain, {"h100": nodes(2)}, out_of_service=[], field="acceptance_drain_max_share")
    assert out["tripped"] and not out["allowed"]
    assert [v["code"] for v in out["violations"]] == ["DRAIN_BREAKER_TRIPPED"]
    assert out["message"] == out["violations"][0]["message"]
    calm = drain_breaker(to_drain[:1], {"h100": nodes(2)}, share="0.25")
    assert calm["allowed"] and calm["violations"] == [] and calm["message"] is None


def test_filter_misuse_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="input must be a list"):
        drain_breaker("gpu01", {"h100": ["gpu01"]})
    with pytest.raises(AnsibleFilterError, match="has no host"):
        drain_breaker([{"reason": "x"}], {"h100": ["gpu01"]})
    with pytest.raises(AnsibleFilterError, match="in no pool"):
        drain_breaker(["gpu09"], {"h100": ["gpu01"]})
    with pytest.raises(AnsibleFilterError, match="share must be"):
        drain_breaker(["gpu01"], {"h100": ["gpu01"]}, share="a quarter")
    with pytest.raises(AnsibleFilterError, match="sinfo's lines"):
        slurm_out_of_service(3)
    assert slurm_out_of_service("gpu01|down*\ngpu02|idle\n") == ["gpu01"]


# --- the remediation report -----------------------------------------------------------------


def _remediation(breaker_decision: dict, outcome: str) -> dict:
    return {
        "kind": "remediation",
        "schema": 1,
        "cluster": "lab",
        "serial": "25%",
        "batches": [],
        "nodes": {
            h: {"before": [{"component": "driver-package"}], "outcome": outcome, "reason": "r"}
            for h in ("gpu01", "gpu02")
        },
        "breaker": breaker_decision,
    }


def test_remediation_report_fails_and_says_so_when_the_breaker_tripped():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.ops.drift import remediation_markdown

    tripped = drain_breaker(
        ["gpu01", "gpu02"], {"h100": nodes(2)}, field="remediate_drain_max_share", source="remediation"
    )
    md = remediation_markdown(_remediation(tripped, "blocked"))
    assert "**Verdict: FAILED** (2 blocked)" in md
    assert "**Drain breaker TRIPPED**: drain breaker tripped: pool h100: draining gpu01, gpu02" in md
    assert "the brief (its pins)" in md
    forced = drain_breaker(["gpu01", "gpu02"], {"h100": nodes(2)}, force=True, source="remediation")
    md = remediation_markdown(_remediation(forced, "resumed"))
    assert "**Verdict: OK** (2 resumed)" in md and "**Drain breaker overridden by force**" in md
    # Reports written before the breaker existed have no breaker: unchanged.
    old = _remediation(None, "resumed")
    del old["breaker"]
    assert "Drain breaker" not in remediation_markdown(old)


def test_the_nodes_are_named_in_one_order_whatever_order_they_came_in():
    # Ansible builds the list from groups in the order hosts answer: the message must not change with it.
    pools = {"h100": ["gpu01", "gpu02"]}
    orders = (["gpu01", "gpu02"], ["gpu02", "gpu01"])
    texts = {breaker.message(breaker.judge(pools, order, share=0.25)) for order in orders}
    assert len(texts) == 1
    assert "draining gpu01, gpu02 would leave" in texts.pop()
