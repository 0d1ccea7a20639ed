"""The bisect at scale, as the acceptance role drives it, and the runs of a round started at once.

The planner is replayed round by round exactly as roles/acceptance/tasks/bisect.yml and
bisect_round.yml call it: the all-node result first (round 0), then every group the plan
proposes run in one round, the results appended, the plan asked again. A fake fabric gives a
group a low busbw when it holds a slow node.
"""

from __future__ import annotations

import math
import random
import sys

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import run as ar
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import concurrent_runs as cr

FLOOR = 360.0
POOL = [f"gpu{i:03d}" for i in range(1, 513)]


def busbw(group, slow) -> float:
    return 90.0 if set(group) & set(slow) else 395.0


def drive(nodes, slow, strategy, max_rounds=64):
    """(final plan, rounds run, groups per round) of the role's loop over bisect_step."""
    results = [{"nodes": list(nodes), "busbw": busbw(nodes, slow), "round": 0}]
    per_round = []
    for round_no in range(1, max_rounds + 1):
        plan = ar.bisect_step(results, nodes, FLOOR, strategy=strategy)
        if plan["done"]:
            return plan, round_no - 1, per_round
        groups = plan["next"]
        flat = [n for g in groups for n in g]
        # The groups of one round never share a node: the role starts them all at once.
        assert len(flat) == len(set(flat)), f"round {round_no} reuses a node"
        per_round.append(len(groups))
        results += [{"nodes": g, "busbw": busbw(g, slow), "round": round_no} for g in groups]
    raise AssertionError(f"no verdict after {max_rounds} rounds")


def slow_sets():
    """One and two slow nodes: at the edges, in one screening pair, in one half, far apart, and seeded random."""
    rng = random.Random(512)
    fixed = [
        ["gpu001"],
        ["gpu512"],
        ["gpu257"],
        ["gpu003", "gpu004"],
        ["gpu010", "gpu200"],
        ["gpu001", "gpu512"],
    ]
    drawn = [sorted(rng.sample(POOL, k)) for k in (1, 2) for _ in range(6)]
    return fixed + drawn


@pytest.mark.parametrize("strategy", ["pairs", "halves"])
@pytest.mark.parametrize("slow", slow_sets(), ids=lambda s: "+".join(s))
def test_512_nodes_resolved_in_log2_plus_2_rounds(strategy, slow):
    plan, rounds, per_round = drive(POOL, slow, strategy)
    assert plan["slow_nodes"] == sorted(slow)
    assert plan["slow_links"] == [] and plan["slow_groups"] == [] and not plan["inconclusive"]
    assert rounds <= math.ceil(math.log2(len(POOL))) + 2
    if strategy == "pairs":
        # One screening round holds every pair: the rounds stay few because each is wide.
        assert per_round[0] == len(POOL) // 2


def test_rounds_do_not_grow_with_the_pool_for_pairs():
    # Pairs: a screening round, then suspects against good nodes; the pool's size changes how many
    # groups a round holds (run at once), not how many rounds there are.
    rounds = {n: drive(POOL[:n], ["gpu003"], "pairs")[1] for n in (8, 64, 512)}
    assert len(set(rounds.values())) == 1, rounds


# --- the records of a round ------------------------------------------------------------

SPEC = {
    "pool": "h100",
    "gpus_per_node": 8,
    "multi_node_busbw_gbps": FLOOR,
    "multi_node_limit_gbps": 400.0,
    "required_max_bytes": "8G",
    "max_wrong": 0,
    "fabric": "infiniband",
    "gpudirect_rdma": True,
}


def test_run_records_judge_each_result_and_keep_the_order():
    results = [{"rc": 1, "stdout": "", "stderr": "srun: error: Unable to allocate resources"}, {"rc": 124}]
    records = ar.run_records(
        results, SPEC, "bisect", groups=[["a", "b"], ["c", "d"]], labels=["bisect a+b", "bisect c+d"], round_no=2
    )
    assert [(r["label"], r["nodes"], r["scope"], r["round"], r["busbw"]) for r in records] == [
        ("bisect a+b", ["a", "b"], "bisect", 2, None),
        ("bisect c+d", ["c", "d"], "bisect", 2, None),
    ]
    assert "Unable to allocate resources" in records[0]["violations"][0]["message"]
    assert "timed out (exit 124)" in records[1]["violations"][0]["message"]


def test_run_records_loopback_names_the_host_and_checks_lengths():
    (record,) = ar.run_records([{"rc": 0, "stdout": ""}], SPEC, "loopback", groups=[["a"]], labels=["loopback a"])
    assert record["host"] == "a" and record["scope"] == "bisect"
    with pytest.raises(ar.SpecError):
        ar.run_records([{}], SPEC, "bisect", groups=[], labels=[])
    with pytest.raises(ar.SpecError):
        ar.run_records([{}], SPEC, "single-node", groups=[["a"]], labels=["x"])


# --- commands at once ------------------------------------------------------------------


def sleeper(seconds: float, text: str) -> list[str]:
    return [sys.executable, "-c", f"import time; time.sleep({seconds}); print({text!r})"]


def overlapping(results) -> int:
    """The most runs whose [started, finished] spans overlap at one instant."""
    events = sorted([(r["started"], 1) for r in results] + [(r["finished"], -1) for r in results])
    now = most = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_run_all_starts_every_command_at_once_and_keeps_the_order():
    out = cr.run_all([{"argv": sleeper(0.5, f"run {i}")} for i in range(4)])
    assert [r["stdout"].strip() for r in out["results"]] == ["run 0", "run 1", "run 2", "run 3"]
    assert [r["rc"] for r in out["results"]] == [0, 0, 0, 0]
    assert out["max_in_flight"] == 4 and overlapping(out["results"]) == 4


def test_run_all_bounds_the_runs_in_flight():
    out = cr.run_all([{"argv": sleeper(0.3, "x")} for _ in range(5)], parallel=2)
    assert out["max_in_flight"] == 2 and overlapping(out["results"]) <= 2


def test_run_all_env_timeout_and_missing_command():
    runs = [
        {"argv": [sys.executable, "-c", "import os; print(os.environ['GPUFLEET_T'])"], "env": {"GPUFLEET_T": "seen"}},
        {"argv": sleeper(30, "never")},
        {"argv": ["/nonexistent/all_reduce_perf"]},
        {"argv": []},
    ]
    out = cr.run_all(runs, timeout=1, kill_after=1)
    env_run, slow_run, missing, empty = out["results"]
    assert env_run["rc"] == 0 and env_run["stdout"].strip() == "seen"
    assert slow_run["rc"] == cr.TIMED_OUT and "killed after 1 s" in slow_run["stderr"]
    assert slow_run["finished"] < 30
    assert missing["rc"] == cr.NOT_FOUND and "/nonexistent/all_reduce_perf" in missing["stderr"]
    assert empty["rc"] == cr.NOT_FOUND


def test_run_all_with_no_runs():
    assert cr.run_all([]) == {"results": [], "elapsed": 0.0, "max_in_flight": 0}
