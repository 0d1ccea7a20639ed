"""The kubectl test double's batch/v1 Job path (molecule/resources/doubles/stack/k8s/gpufleet_k8s_jobs.py):
the API server's refusals, Kueue's admission, the Job controller replacing a deleted pod, and the pods
running the real training loop (tests/workload/train.py), which the new pod resumes from its checkpoint.
The API server stand-in is replaced by an in-memory store; the Jobs are gpufleet's own
(module_utils/acceptance/workload_k8s.py) on the gpu_stack scenario's brief and Kueue objects."""

from __future__ import annotations

import json
import sys
import time

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import workload
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import workload_k8s as kw
from ansible_collections.gpufleet.cluster.plugins.module_utils.k8s import objects as k8s
from k8s_doubles import BRIEF, GPU_TAINT, IMAGE, PROFILES, RESERVED, ROOT, load_double

TRAIN = ROOT / "tests/workload/train.py"


def load_kubectl():
    return load_double("kubectl", "gpufleet_kubectl_double_jobs")


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """The gpu_stack scenario's nodes, its Kueue objects (research: 8 of the H100 pool's 16 GPUs) and
    the research namespace, in a store that plays the API server."""
    kubectl = load_kubectl()
    store: dict[tuple, dict] = {}

    def put(_srv, obj):
        key = kubectl.d.key_of(obj)
        created = key not in store
        store[key] = json.loads(json.dumps(obj))
        return created

    def get(_srv, kind, ns, name, selector=None):
        if name:
            return store[(kind, "" if kind in kubectl.d.CLUSTER_SCOPED else ns, name)]
        items = [o for k, o in sorted(store.items()) if k[0] == kind and (not ns or k[1] == ns)]
        return {
            "kind": "List",
            "items": [o for o in items if kubectl.d.selector_matches(selector, o["metadata"].get("labels"))],
        }

    def delete(_srv, kind, ns, name):
        store.pop((kind, "" if kind in kubectl.d.CLUSTER_SCOPED else ns, name), None)

    peers = tmp_path / "peers"
    peers.mkdir()
    nodes = {
        "stack-deb12": ("stack-h100-roce", {"gpufleet.io/pool": "stack-h100"}, [RESERVED, GPU_TAINT]),
        "stack-deb12b": ("stack-h100-roce", {"gpufleet.io/pool": "stack-h100"}, [RESERVED, GPU_TAINT]),
        "stack-deb13": ("stack-l40s-pcie", {"gpufleet.io/pool": "stack-l40s"}, [GPU_TAINT]),
    }
    for i, (name, (profile, labels, taints)) in enumerate(nodes.items()):
        (peers / f"{name}.json").write_text((PROFILES / f"{profile}.json").read_text())
        put(
            None,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
                "spec": {"taints": taints},
                "status": {"addresses": [{"type": "InternalIP", "address": f"10.250.30.{12 + i}"}]},
            },
        )
    brief = yaml.safe_load(BRIEF.read_text())
    for obj in k8s.kueue_objects(brief, {"stack-h100": 2, "stack-l40s": 1}):
        put(None, obj)
    monkeypatch.setattr(kubectl, "put", put)
    monkeypatch.setattr(kubectl, "get", get)
    monkeypatch.setattr(kubectl, "delete", delete)
    monkeypatch.setattr(kubectl, "PEERS_DIR", str(peers))
    monkeypatch.setattr(kubectl, "LOGS_DIR", str(tmp_path / "logs"))
    monkeypatch.setattr(kubectl.jobs, "KUBELET_DIR", str(tmp_path / "kubelet"))
    # No second machine here: each node's kubelet is reached by a local shell, not SSH; the nodes
    # asked for are recorded.
    reached = []

    def local_shell(_srv, node):
        reached.append(node)
        return ["/bin/sh", "-c"], None

    kubectl.real_node_shell, kubectl.reached = kubectl.node_shell, reached
    monkeypatch.setattr(kubectl, "node_shell", local_shell)
    api = kubectl.Api(None)
    yield kubectl, store, api, brief, tmp_path
    for (kind, ns, name), _obj in list(store.items()):  # never leave a training process behind
        if kind == "Job":
            kubectl.jobs.delete_job(api, ns, name)


def render(brief, tmp_path, name="wl", gpus=1, backoff_limit=1, window_s=3.0, namespace="research", **kw_args):
    brief = json.loads(json.dumps(brief))
    # The dataset sample and weights where this machine has them (the brief's paths are a node's).
    brief["acceptance"]["workload"].update(
        command=f"{sys.executable} {TRAIN} --report-every-s 0.1 --checkpoint-every-s 0.2",
        gpus=gpus,
        dataset=str(TRAIN.parent / "sample.csv"),
        weights=str(TRAIN.parent / "base-weights.json"),
    )
    spec = workload.workload_spec(brief)
    return kw.job(
        brief,
        spec,
        name=name,
        namespace=namespace,
        checkpoint_dir=str(tmp_path / "ckpt" / name),
        image=IMAGE,
        backoff_limit=backoff_limit,
        window_s=window_s,
        **kw_args,
    )


def pods_of(api, name):
    return kw.job_pods(api.get("Pod", "research", None, f"batch.kubernetes.io/job-name={name}"), name)


def wait_for(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def log_of(kubectl, api, pod_name):
    return kubectl.pod_log(api.find("Pod", "research", pod_name))


def test_a_queued_job_is_admitted_its_deleted_pod_replaced_and_resumed(cluster):
    kubectl, store, api, _brief, tmp_path = cluster
    job = render(_brief, tmp_path)
    kubectl.jobs.validate(job)
    created = kubectl.jobs.create(api, job)
    # Kueue: the Workload owned by the Job, admitted in the research ClusterQueue on the H100 flavor.
    adm = kw.admission(api.get("Workload", "research"), "wl")
    assert adm["admitted"] and adm["cluster_queue"] == "research"
    assert adm["flavors"] == {"nvidia.com/gpu": "stack-h100"} and adm["queue_wait_s"] >= 0
    assert created["spec"]["suspend"] is False
    (first,) = pods_of(api, "wl")
    assert first["phase"] == "Running" and first["index"] == "0" and first["node"] in ("stack-deb12", "stack-deb12b")
    # The container was started through the kubelet of the node the pod was placed on.
    assert kubectl.reached == [first["node"]]
    assert wait_for(lambda: "event=checkpoint" in log_of(kubectl, api, first["name"]))
    time.sleep(0.5)
    out1 = log_of(kubectl, api, first["name"])
    kubectl.jobs.delete_pod(api, "research", first["name"], grace_s=5)
    after = pods_of(api, "wl")
    assert [p["name"] for p in after] != [first["name"]] and len(after) == 1
    second = after[0]
    assert second["name"].startswith("wl-0-") and second["index"] == "0" and second["phase"] == "Running"
    assert store[("Job", "research", "wl")]["status"]["failed"] == 1
    assert kubectl.jobs.wait_job(api, "research", "wl", "Complete", 20)
    status = store[("Job", "research", "wl")]["status"]
    assert (status["failed"], status["succeeded"], status["active"]) == (1, 1, 0)
    assert [c["type"] for c in status["conditions"]] == ["SuccessCriteriaMet", "Complete"]
    out2 = log_of(kubectl, api, second["name"])
    one, two = workload.parse_output(out1), workload.parse_output(out2)
    assert two["resumed_step"] and two["resumed_step"] >= one["last_checkpoint_step"] > 0
    assert "event=done" in out2 and "event=done" not in out1
    # The container's environment reached it on its node: the dataset and weights the Job names.
    assert f"dataset={TRAIN.parent / 'sample.csv'} weights={TRAIN.parent / 'base-weights.json'} samples=512" in out1
    wl = api.get("Workload", "research")["items"][0]
    assert [c["type"] for c in wl["status"]["conditions"]] == ["QuotaReserved", "Admitted", "Finished"]
    kubectl.jobs.delete_job(api, "research", "wl")
    assert not [k for k in store if k[0] in ("Job", "Pod", "Workload")]


def test_backoff_limit_zero_fails_the_job_instead_of_replacing_the_pod(cluster):
    kubectl, store, api, brief, tmp_path = cluster
    kubectl.jobs.create(api, render(brief, tmp_path, name="nob", backoff_limit=0, window_s=30))
    (first,) = pods_of(api, "nob")
    kubectl.jobs.delete_pod(api, "research", first["name"], grace_s=5)
    assert pods_of(api, "nob") == []
    conds = {c["type"]: c["reason"] for c in store[("Job", "research", "nob")]["status"]["conditions"]}
    assert conds["Failed"] == "BackoffLimitExceeded"
    assert not kubectl.jobs.wait_job(api, "research", "nob", "Complete", 1)


def test_a_job_past_its_active_deadline_is_failed_and_its_pod_stopped(cluster):
    # The pod would train 30 s; the Job's deadline is 2 s: the Job controller stops it then.
    kubectl, store, api, brief, tmp_path = cluster
    kubectl.jobs.create(api, render(brief, tmp_path, name="late", window_s=30, active_deadline_s=2))
    (first,) = pods_of(api, "late")
    assert first["phase"] == "Running"
    assert not kubectl.jobs.wait_job(api, "research", "late", "Complete", 6)
    conds = {c["type"]: (c["reason"], c["message"]) for c in store[("Job", "research", "late")]["status"]["conditions"]}
    assert conds["Failed"] == ("DeadlineExceeded", "Job was active longer than specified deadline")
    (pod,) = pods_of(api, "late")
    assert pod["name"] == first["name"] and pod["phase"] == "Failed"
    assert "event=done" not in log_of(kubectl, api, first["name"])


def test_a_job_above_the_queue_quota_stays_suspended_with_kueues_reason(cluster):
    kubectl, store, api, brief, tmp_path = cluster
    job = render(brief, tmp_path, name="big", gpus=9)
    kubectl.jobs.create(api, job)
    adm = kw.admission(api.get("Workload", "research"), "big")
    assert not adm["admitted"] and adm["reason"] == "Pending"
    assert (
        "insufficient quota for nvidia.com/gpu in flavor stack-h100, request > maximum capacity (9 > 8)"
        in adm["message"]
    )
    assert store[("Job", "research", "big")]["spec"]["suspend"] is True
    assert pods_of(api, "big") == []


def test_a_second_job_waits_for_the_quota_the_first_holds(cluster):
    kubectl, _store, api, brief, tmp_path = cluster
    kubectl.jobs.create(api, render(brief, tmp_path, name="a", gpus=8, window_s=30))
    kubectl.jobs.create(api, render(brief, tmp_path, name="b", gpus=1, window_s=30))
    assert kw.admission(api.get("Workload", "research"), "a")["admitted"]
    adm = kw.admission(api.get("Workload", "research"), "b")
    assert not adm["admitted"] and "insufficient unused quota for nvidia.com/gpu in flavor stack-h100" in adm["message"]


def test_a_namespace_without_a_local_queue_is_inadmissible(cluster):
    kubectl, _store, api, brief, tmp_path = cluster
    kubectl.jobs.create(api, render(brief, tmp_path, name="nq", namespace="elsewhere"))
    adm = kw.admission(api.get("Workload", "elsewhere"), "nq")
    assert (adm["admitted"], adm["reason"], adm["message"]) == (
        False,
        "Inadmissible",
        "LocalQueue default doesn't exist",
    )


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            ["spec", "template", "spec", "restartPolicy"],
            None,
            'The Job "wl" is invalid: spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
            '"OnFailure", "Never"',
        ),
        (
            ["spec", "template", "spec", "restartPolicy"],
            "OnFailure",
            'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when '
            "podFailurePolicy is specified",
        ),
        (
            ["spec", "template", "spec", "containers", 0, "imagePullPolicie"],
            "Always",
            'strict decoding error: unknown field "spec.template.spec.containers[0].imagePullPolicie"',
        ),
        (["spec", "backofLimit"], 1, 'strict decoding error: unknown field "spec.backofLimit"'),
        (["spec", "completions"], None, "spec.completions: Required value: when completion mode is Indexed"),
        (
            ["spec", "template", "spec", "containers", 0, "image"],
            None,
            "spec.template.spec.containers[0].image: Required value",
        ),
    ],
)
def test_the_api_server_refuses_what_the_real_one_refuses(cluster, path, value, message):
    kubectl, _store, _api, brief, tmp_path = cluster
    job = render(brief, tmp_path)
    kubectl.jobs.validate(job)  # gpufleet's Job passes
    parent = job
    for key in path[:-1]:
        parent = parent[key]
    if value is None:
        parent.pop(path[-1])
    else:
        parent[path[-1]] = value
    with pytest.raises(kubectl.jobs.JobError) as err:
        kubectl.jobs.validate(job)
    assert message in str(err.value)


def test_kubectl_create_refuses_a_bad_job_with_the_servers_message(cluster, monkeypatch, capsys, tmp_path):
    kubectl, store, _api, brief, _tmp = cluster
    job = render(brief, tmp_path)
    job["spec"]["template"]["spec"].pop("restartPolicy")
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    monkeypatch.setattr(kubectl, "server", lambda _opts: None)
    monkeypatch.setattr(kubectl.d, "log", lambda *a, **k: None)
    monkeypatch.setattr(sys, "argv", ["kubectl", "create", "-f", str(path)])
    with pytest.raises(SystemExit) as code:
        kubectl.main()
    assert code.value.code == 1
    assert 'spec.template.spec.restartPolicy: Unsupported value: "Always"' in capsys.readouterr().err
    assert ("Job", "research", "wl") not in store


def test_a_pods_container_runs_on_its_node_over_ssh_at_the_nodes_internal_ip(cluster, monkeypatch, tmp_path):
    kubectl = cluster[0]
    key = tmp_path / "kubelet_ed25519"
    monkeypatch.setattr(kubectl, "KUBELET_KEY", str(key))
    assert kubectl.real_node_shell(None, "stack-deb12") == (
        None,
        f"the test bed's key for the nodes' kubelets is missing: {key}",
    )
    key.write_text("key")
    argv, why = kubectl.real_node_shell(None, "stack-deb12b")
    assert why is None and argv[:3] == ["ssh", "-i", str(key)] and argv[-1] == "root@10.250.30.13"
    assert "BatchMode=yes" in argv
    argv, why = kubectl.real_node_shell(None, "gone")
    assert argv is None and why == "node 'gone' has no InternalIP address: its kubelet cannot be reached"


def test_a_pod_deleted_while_its_node_is_unreachable_ends_killed(cluster, monkeypatch):
    # The node's kubelet cannot be reached for the deletion: the pod still ends, as killed (137),
    # and the Job controller replaces it.
    kubectl, _store, api, brief, tmp_path = cluster
    kubectl.jobs.create(api, render(brief, tmp_path, name="lost", window_s=30))
    (first,) = pods_of(api, "lost")
    local = kubectl.node_shell
    monkeypatch.setattr(kubectl, "node_shell", lambda _srv, node: (None, f"node {node!r} is unreachable"))
    pod = kubectl.jobs.delete_pod(api, "research", first["name"], grace_s=1)
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    monkeypatch.setattr(kubectl, "node_shell", local)
    assert [p["name"] for p in pods_of(api, "lost")] != [first["name"]]
    # Its process on the "node" (this machine) was never signalled: stop it now the node is back.
    assert kubectl.jobs.kill_container(api, pod, 0) in (137, 143)
