"""Sizing and unit cost from sacct --parsable2 output: arithmetic checked by hand on the fixtures.

The fixtures hold one day (2026-03-01) of a 16-GPU cluster: three completed GPU jobs (178 GPU-h),
one FAILED, one TIMEOUT and one CANCELLED (36 GPU-h to retry), one RUNNING (16 GPU-h), one PENDING
and one CPU-only job. Capacity 16 x 24 = 384 GPU-h, so 154 GPU-h idle.
"""

from __future__ import annotations

import math
import os
from datetime import datetime

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import cost

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "cost")
DAY = (datetime(2026, 3, 1), datetime(2026, 3, 2))
COST = {
    "currency": "EUR",
    "monthly": {"compute": 73000, "network": 7300, "storage": 3650, "support": 1460, "operations": 5840},
    "unit": {"name": "training job", "measure": "completed_jobs"},
    "target_units_per_month": 500,
    "baseline": {"name": "GPU rental", "price_per_unit": 1200},
}


def read(name):
    with open(os.path.join(FIX, name), encoding="utf-8") as fh:
        return fh.read()


def day_usage(name="sacct_22.05_steps.txt"):
    return cost.usage(cost.parse_sacct(read(name)), 16, *DAY)


def test_steps_are_skipped_and_both_slurm_versions_agree():
    old, new = cost.parse_sacct(read("sacct_22.05_steps.txt")), cost.parse_sacct(read("sacct_24.11_allocations.txt"))
    assert [j["job_id"] for j in old] == [str(n) for n in range(101, 110)]
    assert [(j["state"], j["gpus"]) for j in old] == [(j["state"], j["gpus"]) for j in new]
    assert old[4]["state"] == "CANCELLED"  # "CANCELLED by 1001"
    assert old[7]["start"] is None and new[7]["start"] is None  # PENDING: Unknown / None
    assert day_usage("sacct_22.05_steps.txt") == day_usage("sacct_24.11_allocations.txt")


def test_gpu_hours_by_outcome():
    u = day_usage()
    assert u["capacity_gpu_hours"] == pytest.approx(384)
    assert u["accepted_gpu_hours"] == pytest.approx(160 + 16 + 2)
    assert u["retry_gpu_hours"] == pytest.approx(16 + 16 + 4)
    assert u["retry_gpu_hours_by_state"] == pytest.approx({"CANCELLED": 4, "FAILED": 16, "TIMEOUT": 16})
    assert u["in_progress_gpu_hours"] == pytest.approx(16)
    assert u["allocated_gpu_hours"] == pytest.approx(230)
    assert u["idle_gpu_hours"] == pytest.approx(154)
    assert u["jobs"] == {"accepted": 3, "retry": 3, "in_progress": 1}
    assert not u["over_allocated"]


def test_queue_wait_from_submit_and_start():
    q = day_usage()["queue_wait_s"]
    # waits: 600, 1800, 3600, 0, 3600, 3600, 0 (running), 0 (CPU job); the pending job has none
    assert q["jobs"] == 8
    assert q["mean"] == pytest.approx(13200 / 8)
    assert q["p50"] == pytest.approx(1200)
    assert q["max"] == pytest.approx(3600)


def test_the_window_clips_jobs_that_started_before_it():
    jobs = cost.parse_sacct(read("sacct_22.05_steps.txt"))
    u = cost.usage(jobs, 16, datetime(2026, 3, 1, 5), datetime(2026, 3, 1, 11))
    # 101: 05:00-10:00 x 16 = 80; 102: 10:30-11:00 x 8 = 4
    assert u["accepted_gpu_hours"] == pytest.approx(84)
    assert u["capacity_gpu_hours"] == pytest.approx(96)


def test_without_a_window_it_spans_the_first_start_to_the_last_end():
    u = cost.usage(cost.parse_sacct(read("sacct_22.05_steps.txt")), 16)
    assert (u["window_start"], u["window_end"]) == ("2026-03-01T00:00:00", "2026-03-02T00:00:00")


def test_effective_unit_cost_splits_compute_by_gpu_hours():
    rep = cost.unit_cost(day_usage(), COST, {"verdict": "pass", "timestamp": "20260302T000000Z"})
    items = rep["monthly_items"]
    assert items["compute"] == pytest.approx(73000 * 194 / 384)
    assert items["idle"] == pytest.approx(73000 * 154 / 384)
    assert items["retries"] == pytest.approx(73000 * 36 / 384)
    assert rep["monthly_total"] == pytest.approx(91250)  # nothing counted twice
    assert rep["accepted_units_month"] == pytest.approx(3 * 730 / 24)
    assert rep["unit_cost"] == pytest.approx(1000.0)
    assert rep["idle_share"] == pytest.approx(73000 * 154 / 384 / 91250)
    assert rep["retry_share"] == pytest.approx(0.075)
    assert rep["utilisation"] == pytest.approx(230 / 384)


def test_capacity_for_the_target():
    c = cost.unit_cost(day_usage(), COST)["capacity"]
    assert c["useful_units_per_gpu_month"] == pytest.approx(91.25 / 16)
    assert c["required_gpus"] == pytest.approx(500 / (91.25 / 16))
    assert c["required_gpus_whole"] == 88


def test_baseline_beaten_and_not():
    b = cost.unit_cost(day_usage(), COST)["baseline"]
    assert b["beats"] and b["difference_per_unit"] == pytest.approx(200)
    assert b["difference_share"] == pytest.approx(200 / 1200)
    assert b["monthly_difference"] == pytest.approx(200 * 91.25)
    cheaper = dict(COST, baseline={"name": "model API", "price_per_unit": 900})
    b = cost.unit_cost(day_usage(), cheaper)["baseline"]
    assert not b["beats"] and b["difference_per_unit"] == pytest.approx(-100)


@pytest.mark.parametrize(
    ("unit", "units_month"),
    [
        ({"name": "GPU-hour", "measure": "gpu_hours"}, 178 * 730 / 24),
        ({"name": "M tokens", "measure": "per_gpu_hour", "per_gpu_hour": 2.5}, 178 * 2.5 * 730 / 24),
    ],
)
def test_other_measures_of_accepted_work(unit, units_month):
    rep = cost.unit_cost(day_usage(), dict(COST, unit=unit))
    assert rep["accepted_units_month"] == pytest.approx(units_month)
    assert rep["unit_cost"] == pytest.approx(91250 / units_month)


def test_no_accepted_work_gives_no_unit_cost_and_no_verdict_of_beating():
    jobs = [j for j in cost.parse_sacct(read("sacct_22.05_steps.txt")) if j["state"] != "COMPLETED"]
    rep = cost.unit_cost(cost.usage(jobs, 16, *DAY), COST)
    assert rep["unit_cost"] is None and rep["baseline"]["beats"] is False
    assert rep["capacity"]["required_gpus"] is None
    text = cost.render_markdown(rep)
    assert "not defined" in text and "cannot compare" in text


def test_markdown_shows_both_formulas_with_their_inputs():
    text = cost.render_markdown(cost.unit_cost(day_usage(), COST, {"verdict": "pass", "timestamp": "T"}))
    assert "required_gpu_capacity = target_work_per_month / useful_work_per_gpu_month" in text
    assert "= 500 training job / 5.703 training job per GPU-month" in text
    assert "87.7 → 88 GPUs" in text and "72 more are needed" in text
    assert "(compute + network + storage + support + operations + idle + retries) / accepted units" in text
    assert "= (36,880 + 7,300 + 3,650 + 1,460 + 5,840 + 29,276 + 6,844) EUR / 91.25 training job" in text
    assert "= 1,000.00 EUR per training job" in text
    assert "BEATS GPU rental" in text and "200.00 EUR per training job (16.7%)" in text
    assert "Idle share 32.1%, retry share 7.5%" in text
    assert "FAILED 16.0" in text and "Acceptance: pass" in text


def test_markdown_flags_a_cluster_that_failed_acceptance():
    text = cost.render_markdown(cost.unit_cost(day_usage(), COST, {"verdict": "fail", "timestamp": "T"}))
    assert "provisional" in text
    assert "not backed by an accepted cluster" in cost.render_markdown(cost.unit_cost(day_usage(), COST))


def test_png_of_where_the_money_goes(tmp_path):
    pytest.importorskip("matplotlib")
    path = cost.plot_money(cost.unit_cost(day_usage(), COST), str(tmp_path / "cost.png"))
    with open(path, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("JobID|State\n1|COMPLETED\n", "without Submit, Start, AllocTRES"),
        ("101|x|COMPLETED\n", "expected sacct --parsable2 output"),
        (
            "JobID|State|Submit|Start|AllocTRES|ElapsedRaw\n1|COMPLETED|2026-03-01T00:00:00\n",
            "line 2: expected 6 fields",
        ),
        ("JobID|State|Submit|Start|AllocTRES\n", "ElapsedRaw or Elapsed"),
    ],
)
def test_not_sacct_output_is_a_clear_error(text, match):
    with pytest.raises(cost.CostError, match=match):
        cost.parse_sacct(text)


def test_parsable_with_trailing_bar_and_elapsed_text():
    text = (
        "JobID|State|Submit|Start|End|Elapsed|AllocTRES|\n"
        "7|COMPLETED|2026-03-01T00:00:00|2026-03-01T00:00:00|2026-03-02T01:00:00|1-01:00:00|gres/gpu=2|\n"
    )
    (job,) = cost.parse_sacct(text)
    assert job["elapsed_s"] == 25 * 3600 and job["gpus"] == 2


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("billing=8,cpu=8,gres/gpu=8,mem=8G,node=1", 8),
        ("cpu=8,gres/gpu:h100=4,gres/gpu=4", 4),
        ("cpu=8,gres/gpu:a100=2,gres/gpu:h100=4", 6),
        ("cpu=8,mem=1G", 0),
        ("", 0),
    ],
)
def test_gpus_from_alloctres(tres, gpus):
    assert cost.tres_gpus(tres) == gpus


def test_a_wrong_gpu_count_is_refused_and_over_allocation_flagged():
    jobs = cost.parse_sacct(read("sacct_22.05_steps.txt"))
    with pytest.raises(cost.CostError):
        cost.usage(jobs, 0, *DAY)
    u = cost.usage(jobs, 4, *DAY)
    assert u["over_allocated"] and math.isclose(u["idle_gpu_hours"], 0)
    rep = cost.unit_cost(u, COST)
    assert rep["monthly_total"] == pytest.approx(91250)
    assert "is the GPU count right?" in cost.render_markdown(rep)


def test_real_sacct_output_from_the_lab_cluster():
    # sacct 22.05 on the lab controller after srun --gres=gpu:2 (ok), --gres=gpu:1 exit 3, -N2 --gres=gpu:2 (ok).
    jobs = cost.parse_sacct(read("sacct_lab_22.05_real.txt"))
    assert [(j["job_id"], j["state"], j["gpus"], j["elapsed_s"]) for j in jobs] == [
        ("13", "COMPLETED", 2, 20),
        ("14", "FAILED", 1, 6),
        ("15", "COMPLETED", 4, 10),
    ]
    u = cost.usage(jobs, 16, datetime(2026, 11, 30, 6, 15), datetime(2026, 11, 30, 6, 16))
    assert u["accepted_gpu_hours"] == pytest.approx((2 * 20 + 4 * 10) / 3600)
    assert u["retry_gpu_hours_by_state"] == pytest.approx({"FAILED": 6 / 3600})
    text = cost.render_markdown(cost.unit_cost(u, COST))
    assert "0.0167 h" in text and "FAILED 0.00167" in text
