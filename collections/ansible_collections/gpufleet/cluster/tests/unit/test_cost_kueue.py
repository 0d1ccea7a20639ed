"""Unit cost on a Kubernetes brief: Kueue's Workloads (kueue.x-k8s.io/v1beta1, as `kubectl get
workloads.kueue.x-k8s.io -A -o json` prints them) read into the same job records as sacct's, and the
same formulas applied to them."""

from __future__ import annotations

from datetime import datetime

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import cost


def _cond(ctype, status, reason, at):
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": "",
        "lastTransitionTime": at,
        "observedGeneration": 1,
    }


def _workload(name, created, conds, gpus=8, count=2, admitted=True, past=None, ns="research"):
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{name}-3f2a1",
            "namespace": ns,
            "creationTimestamp": created,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "controller": True}],
        },
        "spec": {
            "queueName": "research",
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "train", "resources": {"requests": {"nvidia.com/gpu": str(gpus), "cpu": "32"}}}
                            ]
                        }
                    },
                }
            ],
        },
        "status": {"conditions": conds},
    }
    if admitted:
        wl["status"]["admission"] = {
            "clusterQueue": "research",
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": count,
                    "flavors": {"nvidia.com/gpu": "h100"},
                    "resourceUsage": {"nvidia.com/gpu": str(gpus * count), "cpu": str(32 * count)},
                }
            ],
        }
    if past is not None:
        wl["status"]["accumulatedPastExexcutionTimeSeconds"] = past
    return wl


def _admitted(at):
    return [_cond("QuotaReserved", "True", "QuotaReserved", at), _cond("Admitted", "True", "Admitted", at)]


DOC = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        # queued 10 min, ran 2 h on 16 GPUs, succeeded
        _workload(
            "done",
            "2026-03-01T08:00:00Z",
            [*_admitted("2026-03-01T08:10:00Z"), _cond("Finished", "True", "Succeeded", "2026-03-01T10:10:00Z")],
        ),
        # ran 1 h, failed
        _workload(
            "broke",
            "2026-03-01T09:00:00Z",
            [*_admitted("2026-03-01T09:00:05Z"), _cond("Finished", "True", "Failed", "2026-03-01T10:00:05Z")],
            gpus=4,
            count=1,
        ),
        # preempted after 30 min, not admitted again
        _workload(
            "bumped",
            "2026-03-01T10:00:00Z",
            [
                _cond("QuotaReserved", "False", "Pending", "2026-03-01T10:30:00Z"),
                _cond("Admitted", "False", "NoReservation", "2026-03-01T10:30:00Z"),
                _cond("Evicted", "True", "Preempted", "2026-03-01T10:30:00Z"),
            ],
            admitted=False,
            past=1800,
        ),
        # admitted again after an eviction that cost 15 min; running since 11:00
        _workload(
            "again",
            "2026-03-01T10:00:00Z",
            [*_admitted("2026-03-01T11:00:00Z"), _cond("Evicted", "False", "Preempted", "2026-03-01T10:45:00Z")],
            gpus=8,
            count=1,
            past=900,
        ),
        # still queued
        _workload(
            "waiting",
            "2026-03-01T11:30:00Z",
            [_cond("QuotaReserved", "False", "Pending", "2026-03-01T11:30:01Z")],
            admitted=False,
        ),
    ],
}
NOW = datetime(2026, 3, 1, 12, 0, 0)


def test_workloads_become_job_records_with_the_states_their_cost_has():
    jobs = {j["job_id"]: j for j in cost.parse_kueue_workloads(DOC, now=NOW)}
    assert {k: (j["state"], j["gpus"], j["elapsed_s"]) for k, j in jobs.items()} == {
        "research/job-done-3f2a1": ("COMPLETED", 16, 7200),
        "research/job-broke-3f2a1": ("FAILED", 4, 3600),
        "research/job-bumped-3f2a1": ("PREEMPTED", 16, 1800),
        "research/job-again-3f2a1": ("RUNNING", 8, 3600),
        "research/job-again-3f2a1#evicted": ("PREEMPTED", 8, 900),
        "research/job-waiting-3f2a1": ("PENDING", 16, 0),
    }
    done = jobs["research/job-done-3f2a1"]
    assert (done["submit"], done["start"], done["end"]) == (
        datetime(2026, 3, 1, 8, 0),
        datetime(2026, 3, 1, 8, 10),
        datetime(2026, 3, 1, 10, 10),
    )
    assert (done["name"], done["account"]) == ("done", "research")
    assert jobs["research/job-bumped-3f2a1"]["start"] == datetime(2026, 3, 1, 10, 0)
    assert jobs["research/job-again-3f2a1#evicted"]["end"] == datetime(2026, 3, 1, 11, 0)


def test_usage_from_workloads_counts_gpu_hours_as_sacct_does():
    jobs = cost.parse_kueue_workloads(DOC, now=NOW)
    use = cost.usage(jobs, 32, datetime(2026, 3, 1, 8, 0), datetime(2026, 3, 1, 12, 0), source="Kueue Workloads")
    assert use["accepted_gpu_hours"] == pytest.approx(32.0)  # 16 GPUs x 2 h
    assert use["retry_gpu_hours_by_state"] == pytest.approx({"FAILED": 4.0, "PREEMPTED": 8.0 + 2.0})
    assert use["in_progress_gpu_hours"] == pytest.approx(8.0)
    assert use["jobs"] == {"accepted": 1, "retry": 3, "in_progress": 1}
    assert use["idle_gpu_hours"] == pytest.approx(32 * 4 - (32 + 14 + 8))
    assert use["queue_wait_s"]["max"] == 3600.0  # "again" created at 10:00, admitted at 11:00


def test_gpus_from_the_pod_sets_when_there_is_no_admission():
    wl = _workload("x", "2026-03-01T08:00:00Z", [], gpus=2, count=3, admitted=False)
    assert cost.parse_kueue_workloads({"items": [wl]})[0]["gpus"] == 6


@pytest.mark.parametrize("stamp", ["2026-03-01T09:10:00+01:00", "2026-03-01T08:10:00.123456Z"])
def test_timestamps_are_utc(stamp):
    assert cost.parse_k8s_time(stamp) == datetime(2026, 3, 1, 8, 10)


@pytest.mark.parametrize("doc", [{"kind": "List"}, [], "sacct text", {"items": "x"}])
def test_not_a_workload_list(doc):
    with pytest.raises(cost.CostError, match=r"kubectl get workloads\.kueue\.x-k8s\.io -A -o json"):
        cost.parse_kueue_workloads(doc)


def test_the_report_names_its_source():
    jobs = cost.parse_kueue_workloads(DOC, now=NOW)
    use = cost.usage(jobs, 32, datetime(2026, 3, 1, 8, 0), datetime(2026, 3, 1, 12, 0), source="Kueue Workloads")
    section = {"monthly": {"compute": 73000}, "unit": {"name": "training job", "measure": "completed_jobs"}}
    text = cost.render_markdown(cost.unit_cost(use, section))
    assert "Kueue Workloads 2026-03-01T08:00:00 → 2026-03-01T12:00:00 (4 h), 32 GPUs" in text
