"""The workload acceptance on a Kubernetes brief (module_utils/acceptance/workload_k8s.py and its filters): the Job
it renders (validated against the pinned Kubernetes version's schemas, strict), the tenant and queue it
goes through, Kueue's Workload read back (the queue wait), the Job's pods, the labels and the verdict."""

from __future__ import annotations

import copy
import os

import kubernetes_validate
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter import k8s_workload as kw_filter
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import workload
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import workload_k8s as kw
from ansible_collections.gpufleet.cluster.plugins.module_utils.k8s import objects as k8s

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 6))
IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"


def stack_brief():
    with open(os.path.join(ROOT, "molecule/gpu_stack/vars/brief.yml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def spec_of(brief):
    return workload.workload_spec(brief)


def render(brief=None, **kw_args):
    brief = brief or stack_brief()
    spec = spec_of(brief)
    args = {"name": "gpufleet-workload-1", "namespace": "research", "checkpoint_dir": spec["checkpoint_dir"] + "/run1"}
    args.update(kw_args)
    return kw.job(brief, spec, image=IMAGE, **args)


def test_the_scenario_brief_has_a_workload_on_the_h100_pool():
    spec = spec_of(stack_brief())
    assert spec["partition"] == "stack-h100" and spec["window_s"] > 0
    assert spec["min_samples_per_s"] is not None and spec["max_restore_s"] is not None


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"node": "stack-deb12"},
        {"window_s": 18.0},
        {"extra_resources": {"rdma/rdma_shared_device_a": 1}},
        {"active_deadline_s": 1500},
    ],
    ids=["shared-or-not", "pinned", "window", "extra-resources", "deadline"],
)
def test_the_job_is_valid_for_the_pinned_version(kwargs):
    brief = stack_brief()
    job = render(brief, **kwargs)
    kubernetes_validate.validate(job, k8s.k8s_version(brief), strict=True)
    assert list(yaml.safe_load_all(yaml.safe_dump_all([job]))) == [job]


def test_the_job_with_dataset_and_weights_is_valid_and_mounts_them_read_only():
    brief = stack_brief()
    brief["acceptance"]["workload"].update(dataset="/data/sample.csv", weights="/models/base")
    job = render(brief)
    kubernetes_validate.validate(job, k8s.k8s_version(brief), strict=True)
    pod = job["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
    assert env["GPUFLEET_DATASET"] == "/data/sample.csv" and env["GPUFLEET_WEIGHTS"] == "/models/base"
    mounts = {m["mountPath"]: m.get("readOnly", False) for m in pod["containers"][0]["volumeMounts"]}
    assert mounts == {"/var/lib/gpufleet-workload/run1": False, "/data/sample.csv": True, "/models/base": True}
    assert pod["volumes"][0]["hostPath"] == {
        "path": "/var/lib/gpufleet-workload/run1",
        "type": "DirectoryOrCreate",
    }


def test_the_job_is_queued_suspended_indexed_and_replaceable():
    job = render(node="stack-deb12", window_s=12)
    meta, spec = job["metadata"], job["spec"]
    assert meta["labels"][kw.QUEUE_LABEL] == "default" and meta["namespace"] == "research"
    assert spec["suspend"] is True
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (
        "Indexed",
        1,
        1,
        1,
    )
    assert spec["podFailurePolicy"]["rules"][0] == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["nodeSelector"] == {"gpufleet.io/pool": "stack-h100"}
    assert {t["key"] for t in pod["tolerations"]} == {"gpufleet.io/reserved", "nvidia.com/gpu"}
    container = pod["containers"][0]
    assert container["image"] == IMAGE
    assert container["command"] == [
        "/bin/sh",
        "-c",
        "mkdir -p '/var/lib/gpufleet-workload/run1' && exec python3 /opt/gpufleet-workload/train.py",
    ]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {
        "GPUFLEET_CHECKPOINT_DIR": "/var/lib/gpufleet-workload/run1",
        # the scenario brief's dataset sample and base weights, at their paths on the node
        "GPUFLEET_DATASET": "/var/lib/gpufleet-workload-data/sample.csv",
        "GPUFLEET_WEIGHTS": "/var/lib/gpufleet-workload-data/base-weights.json",
        "GPUFLEET_WINDOW_S": "12",
    }
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["stack-deb12"]}]}
    ]


def test_the_job_carries_the_deadline_the_cluster_enforces():
    assert render(active_deadline_s=1500)["spec"]["activeDeadlineSeconds"] == 1500
    assert "activeDeadlineSeconds" not in render()["spec"]
    with pytest.raises(kw.K8sWorkloadError, match="expected at least 1 s, found 0"):
        render(active_deadline_s=0)


def test_the_brief_image_wins_and_a_job_needs_one():
    brief = stack_brief()
    brief["acceptance"]["workload"]["image"] = "registry.example/train:1"
    assert render(brief)["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example/train:1"
    bare = stack_brief()
    bare["acceptance"]["workload"].pop("image")
    with pytest.raises(kw.K8sWorkloadError, match=r"acceptance\.workload\.image: expected the production image"):
        kw.job(bare, spec_of(bare), name="w", namespace="research", checkpoint_dir="/c")
    with pytest.raises(kw.K8sWorkloadError, match="Job name: expected a DNS label"):
        render(name="Bad_Name")


def test_a_broken_job_fails_the_schema():
    job = render()
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicie"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.33.4", strict=True)


def test_the_tenant_of_the_pool_and_a_named_one():
    brief = stack_brief()
    assert kw.tenant_for_pool(brief, "stack-h100") == {"name": "research", "namespace": "research", "queue": "default"}
    assert kw.tenant_for_pool(brief, "stack-l40s")["name"] == "serving"
    assert kw.tenant_for_pool(brief, "stack-h100", "serving")["name"] == "serving"
    with pytest.raises(
        kw.K8sWorkloadError, match=r"expected one of the brief's tenants \['research', 'serving'\], found 'x'"
    ):
        kw.tenant_for_pool(brief, "stack-h100", "x")
    brief["tenants"] = [t for t in brief["tenants"] if t["name"] == "serving"]
    with pytest.raises(kw.K8sWorkloadError, match=r"acceptance\.workload\.partition: .*'stack-h100'"):
        kw.tenant_for_pool(brief, "stack-h100")


def _workload(job="w1", conditions=(), created="2026-12-03T10:00:00Z", admission=None):
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{job}-abcde",
            "creationTimestamp": created,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "u"}],
        },
        "status": {"conditions": list(conditions), **({"admission": admission} if admission else {})},
    }


def test_admission_reads_the_queue_wait_from_kueue_conditions():
    admitted = _workload(
        conditions=[
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "lastTransitionTime": "2026-12-03T10:00:03Z",
            },
            {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": "2026-12-03T10:00:04Z"},
        ],
        admission={
            "clusterQueue": "research",
            "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "stack-h100"}}],
        },
    )
    other = _workload(job="other", created="2026-12-03T09:00:00Z")
    got = kw.admission({"kind": "List", "items": [other, admitted]}, "w1")
    assert got["admitted"] and got["queue_wait_s"] == 4.0 and got["cluster_queue"] == "research"
    assert got["flavors"] == {"nvidia.com/gpu": "stack-h100"} and got["name"] == "job-w1-abcde"
    # Only QuotaReserved (an admission check still pending): the reservation time, not admitted.
    reserved = _workload(conditions=[admitted["status"]["conditions"][0]])
    got = kw.admission({"items": [reserved]}, "w1")
    assert not got["admitted"] and got["queue_wait_s"] == 3.0
    pending = _workload(
        conditions=[
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "couldn't assign flavors"}
        ]
    )
    got = kw.admission({"items": [pending]}, "w1")
    assert not got["admitted"] and got["queue_wait_s"] is None and got["reason"] == "Pending"
    assert got["message"] == "couldn't assign flavors"
    assert kw.admission({"items": []}, "w1")["found"] is False


def _pod(name, created, phase="Running", node="stack-deb12", job="w1", deleting=False):
    meta = {
        "name": name,
        "creationTimestamp": created,
        "labels": {kw.JOB_NAME_LABEL: job, kw.INDEX_LABEL: "0"},
    }
    if deleting:
        meta["deletionTimestamp"] = created
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def test_job_pods_oldest_first_and_only_the_jobs():
    pods = {
        "items": [
            _pod("w1-0-bbbbb", "2026-12-03T10:00:09Z", "Succeeded"),
            _pod("w1-0-aaaaa", "2026-12-03T10:00:01Z", "Failed"),
            _pod("w2-0-ccccc", "2026-12-03T10:00:00Z", job="w2"),
        ]
    }
    got = kw.job_pods(pods, "w1")
    assert [(p["name"], p["phase"], p["index"], p["node"]) for p in got] == [
        ("w1-0-aaaaa", "Failed", "0", "stack-deb12"),
        ("w1-0-bbbbb", "Succeeded", "0", "stack-deb12"),
    ]


def _out(*lines):
    return "\n".join(f"gpufleet-workload {line}" for line in lines) + "\n"


FIRST = {
    "job_id": "w1",
    "pod": "w1-0-aaaaa",
    "node": "stack-deb12",
    "submit_time": 100.0,
    "output": _out(
        "event=start step=0 time=101.0",
        "step=100 samples_per_s=5000 loss=0.1 time=102.0",
        "event=checkpoint step=150 time=103.0",
        "step=200 samples_per_s=5200 loss=0.1 time=104.0",
    ),
}
SECOND = {
    "job_id": "w1",
    "pod": "w1-0-bbbbb",
    "node": "stack-deb12",
    "submit_time": 110.0,
    "output": _out("event=resumed step=150 time=112.0", "step=250 samples_per_s=5100 loss=0.1 time=113.5"),
}
ADMITTED = {"admitted": True, "queue_wait_s": 1.0, "name": "job-w1-abcde"}
PODS = [{"name": "w1-0-bbbbb", "phase": "Succeeded", "deleting": False}]


def test_evaluate_passes_with_the_slurm_fields_and_the_k8s_ones():
    spec = spec_of(stack_brief())
    got = kw.evaluate(FIRST, SECOND, spec, ADMITTED, PODS)
    assert got["verdict"] == "pass", got["violations"]
    assert got["resumed_step"] == 150 and got["restore_s"] == pytest.approx(3.5)
    assert got["throughput_samples_per_s"] == pytest.approx(5100)
    assert got["queue_wait_s"] == 1.0 and got["deleted_pod"] == "w1-0-aaaaa" and got["replacement_pod"] == "w1-0-bbbbb"


def test_evaluate_fails_when_not_admitted_or_not_replaced_or_not_resumed():
    spec = spec_of(stack_brief())
    got = kw.evaluate(FIRST, SECOND, spec, {"admitted": False, "reason": "Pending", "message": "no quota"}, PODS)
    assert got["verdict"] == "fail"
    assert [v["code"] for v in got["violations"]] == ["WORKLOAD_NOT_ADMITTED"]
    assert "found Pending: no quota" in got["violations"][0]["message"]
    # The "replacement" is the deleted pod itself, still there and not terminating: nothing was deleted.
    same = dict(SECOND, pod="w1-0-aaaaa")
    got = kw.evaluate(FIRST, same, spec, ADMITTED, [{"name": "w1-0-aaaaa", "deleting": False}])
    assert [v["code"] for v in got["violations"]] == ["WORKLOAD_NOT_RESUMED"]
    assert "replace the deleted pod w1-0-aaaaa by a new pod" in got["violations"][0]["message"]
    fresh = dict(SECOND, output=_out("event=start step=0 time=112.0", "step=50 samples_per_s=5100 time=113.0"))
    got = kw.evaluate(FIRST, fresh, spec, ADMITTED, PODS)
    assert [v["code"] for v in got["violations"]] == ["WORKLOAD_NOT_RESUMED"]
    slow = dict(SECOND, submit_time=0.0)
    got = kw.evaluate(FIRST, slow, spec, ADMITTED, PODS)
    assert [v["code"] for v in got["violations"]] == ["WORKLOAD_RESTORE_SLOW"]


def test_labels_name_gpu_network_storage_queue_and_cost():
    brief = stack_brief()
    brief["cost"] = {"currency": "EUR", "monthly": {"compute": 1}, "unit": {"name": "training job"}}
    spec = spec_of(brief)
    got = kw.labels(brief, spec, kw.tenant_for_pool(brief, "stack-h100"), "stack-deb12")
    assert got["gpu"] == {"accelerator": "h100-sxm-80gb", "gpus": 1, "pool": "stack-h100", "node": "stack-deb12"}
    assert got["network"] == {"fabric": "roce", "link_speed_gbps": 200}
    assert got["storage"] == {"checkpoint_dir": "/var/lib/gpufleet-workload", "shared": False}
    assert got["queue"] == {"namespace": "research", "local_queue": "default", "tenant": "research"}
    assert got["cost"] == {"tenant": "research", "currency": "EUR", "unit": "training job"}


def test_filters_wrap_errors_and_check_their_input():
    f = kw_filter.FilterModule().filters()
    brief = stack_brief()
    spec = spec_of(brief)
    job = f["k8s_workload_job"](brief, spec, "w", "research", "/c", IMAGE, window_s="9")
    assert job["spec"]["template"]["spec"]["containers"][0]["env"][-1] == {"name": "GPUFLEET_WINDOW_S", "value": "9"}
    with pytest.raises(AnsibleFilterError, match=r"k8s_workload_job: acceptance\.workload\.image"):
        f["k8s_workload_job"](brief, dict(spec, image=""), "w", "research", "/c")
    with pytest.raises(AnsibleFilterError, match="expects the workload_spec"):
        f["k8s_workload_job"](brief, "x", "w", "research", "/c")
    with pytest.raises(AnsibleFilterError, match="k8s_workload_tenant"):
        f["k8s_workload_tenant"](brief, "stack-h100", "nobody")
    with pytest.raises(AnsibleFilterError, match="k8s_workload_evaluate expects"):
        f["k8s_workload_evaluate"](FIRST, SECOND, spec, ADMITTED, "pods")
    assert f["k8s_workload_admission"]({"items": []}, "w")["found"] is False
    assert f["k8s_workload_pods"]({"items": []}, "w") == []
    assert f["k8s_workload_labels"](copy.deepcopy(brief), spec, {"name": "research"})["queue"]["tenant"] == "research"


def test_report_workload_section_on_kubernetes():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import (
        build_report,
        render_markdown,
    )

    spec = spec_of(stack_brief())
    got = kw.evaluate(FIRST, SECOND, spec, dict(ADMITTED, cluster_queue="research"), PODS, {"conditions": []})
    assert [v["code"] for v in got["violations"]] == ["WORKLOAD_JOB_NOT_COMPLETE"]
    got = kw.evaluate(
        FIRST,
        SECOND,
        spec,
        dict(ADMITTED, cluster_queue="research"),
        PODS,
        {"conditions": [{"type": "Complete", "status": "True"}]},
    )
    workload_result = dict(
        got,
        spec=spec,
        jobs=[FIRST, SECOND],
        control_plane="kubernetes",
        job={"name": "w1", "namespace": "research", "queue": "default"},
    )
    report = build_report("stack-test", runs=[], workload=workload_result, violations=got["violations"], nccl=False)
    assert report["verdict"] == "pass"
    md = render_markdown(report)
    assert "as Job research/w1 (queue default, ClusterQueue research) on pool stack-h100" in md
    assert "its pod deleted halfway (kubectl delete pod)" in md and "scancel" not in md
    assert "| queue wait: Kueue admission less creation (s) | 1.00 |" in md
    assert "| restore: deletion to first step (s) | 3.50 | 60 |" in md
    assert "w1-0-aaaaa@stack-deb12, w1-0-bbbbb@stack-deb12" in md
