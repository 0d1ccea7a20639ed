"""The kubectl test double's MPIJob path (molecule/resources/doubles/stack/k8s/kubectl): it places
the workers as the scheduler would and runs the all_reduce_perf double as the launcher, whose log
our parser reads back. The API server stand-in is replaced by an in-memory store, except in the tests of what happens
between kubectl calls (the operator runs a created MPIJob in the background): those run the API
server stand-in on a local port (k8s_live)."""

from __future__ import annotations

import json
import time

import k8s_live
import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_debug as nd
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_tests as nt
from ansible_collections.gpufleet.cluster.plugins.module_utils.k8s import objects as k8s
from k8s_doubles import BRIEF, GPU_TAINT, IMAGE, K8S_DOUBLES, PROFILES, RESERVED, ROOT, load_double

ARGV = ["/opt/nccl-tests/bin/all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1", "-n", "20", "-w", "5"]


def load_kubectl():
    return load_double("kubectl", "gpufleet_kubectl_double")


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """Nodes of the gpu_stack scenario (two H100, one L40S, the control plane) in a store that
    plays the API server; the nodes' profiles as the prepare step installs them."""
    kubectl = load_kubectl()
    store: dict[tuple, dict] = {}

    def key(obj):
        return kubectl.d.key_of(obj)

    def put(_srv, obj):
        created = key(obj) not in store
        store[key(obj)] = json.loads(json.dumps(obj))
        return created

    def get(_srv, kind, ns, name, selector=None):
        if name:
            return store[(kind, "" if kind in kubectl.d.CLUSTER_SCOPED else ns, name)]
        items = [o for k, o in sorted(store.items()) if k[0] == kind and (not ns or k[1] == ns)]
        items = [o for o in items if kubectl.d.selector_matches(selector, o["metadata"].get("labels"))]
        return {"kind": "List", "items": items}

    def call(_srv, _method, path, _body=None):
        return 404, {}

    peers = tmp_path / "peers"
    peers.mkdir()
    nodes = {
        "stack-deb12": ("stack-h100-roce", {"gpufleet.io/pool": "stack-h100"}, [RESERVED, GPU_TAINT]),
        "stack-deb12b": ("stack-h100-roce", {"gpufleet.io/pool": "stack-h100"}, [RESERVED, GPU_TAINT]),
        "stack-deb13": ("stack-l40s-pcie", {"gpufleet.io/pool": "stack-l40s"}, [GPU_TAINT]),
        "k8s-cp01": (None, {}, [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]),
    }
    for name, (profile, labels, taints) in nodes.items():
        if profile:
            (peers / f"{name}.json").write_text((PROFILES / f"{profile}.json").read_text())
        put(
            None,
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
                "spec": {"taints": taints},
            },
        )
    monkeypatch.setattr(kubectl, "put", put)
    monkeypatch.setattr(kubectl, "get", get)
    monkeypatch.setattr(kubectl.d, "call", call)
    monkeypatch.setattr(kubectl, "PEERS_DIR", str(peers))
    monkeypatch.setattr(kubectl, "LOGS_DIR", str(tmp_path / "logs"))
    monkeypatch.setattr(
        kubectl, "IMAGE_PROGRAMS", {"all_reduce_perf": str(ROOT / "molecule/resources/doubles/bin/all_reduce_perf")}
    )
    return kubectl, store


def mpijob(name="acc", hostnames=("stack-deb12", "stack-deb12b"), **kw):
    brief = yaml.safe_load(BRIEF.read_text())
    return k8s.mpijob(
        brief,
        "stack-h100",
        len(hostnames),
        IMAGE,
        ARGV,
        name=name,
        mpirun_args=["--allow-run-as-root"],
        hostnames=list(hostnames),
        **{"env": {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}, **kw},
    )


def create(kubectl, store, job):
    job["metadata"].setdefault("namespace", "gpufleet")
    kubectl.put(None, job)
    return kubectl.run_mpijob(None, store[kubectl.d.key_of(job)])


def conditions(store, job):
    stored = store[("MPIJob", "gpufleet", job["metadata"]["name"])]
    return {c["type"]: c["status"] for c in stored["status"]["conditions"]}


def test_mpijob_runs_on_the_pool_nodes_and_its_log_parses(cluster):
    kubectl, store = cluster
    job = mpijob()
    record = create(kubectl, store, job)
    assert record["pending"] == {} and record["rc"] == 0
    assert sorted(record["workers"].values()) == ["stack-deb12", "stack-deb12b"]
    assert conditions(store, job)["Succeeded"] == "True"
    launcher = kubectl.get(None, "Pod", "gpufleet", None, "training.kubeflow.org/job-role=launcher")["items"]
    assert [p["status"]["phase"] for p in launcher] == ["Succeeded"]
    log = kubectl.pod_log(launcher[0])
    (run,) = nt.parse(log)[0]
    # nccl-tests in a pod prints the pod's host name; the acceptance role maps them back to nodes
    assert run["hosts"] == ["acc-worker-0", "acc-worker-1"] and run["ranks"] == 16
    profile = json.loads((PROFILES / "stack-h100-roce.json").read_text())
    assert nt.busbw_at_largest(run) == pytest.approx(profile["net_busbw_gbps"], rel=0.01)
    debug = nd.parse_debug(log)
    assert debug is not None and debug["network"] == "IB" and debug["gdr"]


def test_mpijob_without_the_pool_tolerations_stays_pending(cluster, capsys):
    kubectl, store = cluster
    job = mpijob("notol")
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["tolerations"] = []
    record = create(kubectl, store, job)
    assert record["workers"] == {} and "rc" not in record
    assert all("untolerated taint {gpufleet.io/reserved: training}" in why for why in record["pending"].values())
    assert "Succeeded" not in conditions(store, job)
    began = time.monotonic()
    assert kubectl.wait(None, {"--for": "condition=Succeeded", "--timeout": "0.5s"}, ["mpijob/notol"], "gpufleet") == 1
    # kubectl wait watches until its timeout, then gives kubectl's message
    assert time.monotonic() - began >= 0.5
    assert capsys.readouterr().err == "error: timed out waiting for the condition on mpijobs/notol\n"


def test_cordoned_node_takes_no_worker(cluster):
    kubectl, store = cluster
    store[("Node", "", "stack-deb12b")]["spec"]["unschedulable"] = True
    record = create(kubectl, store, mpijob("cordoned"))
    assert list(record["workers"].values()) == ["stack-deb12"]
    assert list(record["pending"].values()) == [
        # stack-deb12 already holds the other worker's 8 GPUs
        "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "2 node(s) didn't match Pod's node affinity/selector, 1 node(s) were unschedulable."
    ]


def mpijob_asking_gpus(name, gpus):
    """An MPIJob whose workers ask for ``gpus`` GPUs each."""
    job = mpijob(name)
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/gpu"
    ] = gpus
    return job


def test_too_few_gpus_for_the_ranks_fails_the_launcher(cluster):
    kubectl, store = cluster
    job = mpijob_asking_gpus("fewgpus", 4)
    record = create(kubectl, store, job)
    assert record["rc"] != 0 and conditions(store, job)["Failed"] == "True"
    launcher = kubectl.get(
        None, "Pod", "gpufleet", None, "training.kubeflow.org/job-name=fewgpus,training.kubeflow.org/job-role=launcher"
    )
    assert "Invalid number of GPUs" in kubectl.pod_log(launcher["items"][0])


def test_more_gpus_than_the_node_has_is_insufficient(cluster):
    kubectl, store = cluster
    job = mpijob_asking_gpus("toomany", 16)
    record = create(kubectl, store, job)
    assert record["workers"] == {}
    assert all("Insufficient nvidia.com/gpu" in why for why in record["pending"].values())


@pytest.mark.parametrize(
    ("tolerations", "tolerated"),
    [
        ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], True),
        ([{"operator": "Exists"}], True),
        ([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}], True),
        ([{"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent", "effect": "NoSchedule"}], False),
        ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], False),
        ([], False),
    ],
)
def test_tolerations_follow_the_scheduler(cluster, tolerations, tolerated):
    kubectl, _ = cluster
    assert kubectl.tolerates(tolerations, GPU_TAINT) is tolerated


def test_mpirun_command_needs_the_image_program_and_ranks(cluster):
    kubectl, _ = cluster
    assert kubectl.mpirun_command({"command": ["mpirun"], "args": ["-np", "4", "-x", "A", *ARGV]})[2:] == (4, ["A"])
    with pytest.raises(ValueError, match="unable to find"):
        kubectl.mpirun_command({"command": ["mpirun"], "args": ["-np", "4", "/bin/true"]})
    with pytest.raises(ValueError, match="-np"):
        kubectl.mpirun_command({"command": ["mpirun"], "args": ARGV})


def test_a_custom_resource_is_refused_until_its_crd_is_applied(cluster, capsys):
    """kubectl apply / create / diff of an MPIJob before the MPI Operator's manifest (its CRD) is in
    the cluster fails with kubectl's own error; the stand-in manifest's CRD makes it known, and a
    built-in kind never needs one."""
    kubectl, _store = cluster
    job = mpijob()
    job["metadata"]["namespace"] = "gpufleet"
    with pytest.raises(SystemExit) as exc:
        kubectl.require_kind(None, job, "job.yaml")
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert 'no matches for kind "MPIJob" in version "kubeflow.org/v2beta1"' in err
    assert "ensure CRDs are installed first" in err
    with pytest.raises(SystemExit) as exc:
        kubectl.require_kind(None, job, "job.yaml", code=2)
    assert exc.value.code == 2  # kubectl diff: above 1 is an error, not "differs"
    manifest = (K8S_DOUBLES / "mpi-operator.yaml").read_text()
    (crd,) = [doc for doc in yaml.safe_load_all(manifest) if doc["kind"] == "CustomResourceDefinition"]
    kubectl.put(None, crd)
    kubectl.require_kind(None, job, "job.yaml")
    wrong_version = {**job, "apiVersion": "kubeflow.org/v1"}
    with pytest.raises(SystemExit):
        kubectl.require_kind(None, wrong_version, "job.yaml")
    kubectl.require_kind(None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}, "ns.yaml")


# --- kubectl create returns at once; the operator runs the job in the background -------------------


@pytest.fixture
def live(tmp_path):
    """The API server stand-in and kubectl (k8s_live), with the gpu_stack scenario's two H100 nodes."""
    cluster = k8s_live.start(tmp_path)
    labels = {"gpufleet.io/pool": "stack-h100"}
    for name in ("stack-deb12", "stack-deb12b"):
        (cluster.peers / f"{name}.json").write_text((PROFILES / "stack-h100-roce.json").read_text())
    cluster.apply(*(k8s_live.gpu_node(n, labels, [RESERVED, GPU_TAINT]) for n in ("stack-deb12", "stack-deb12b")))
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpufleet"}}),
    )
    yield cluster
    cluster.stop()


def test_create_returns_at_once_and_wait_blocks_until_the_job_succeeded(live):
    job = mpijob("slow", env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "GPUFLEET_DOUBLE_SLEEP": "2"})
    began = time.monotonic()
    created = live.kubectl("create", "-f", "-", stdin=json.dumps(job))
    assert created.stdout == "mpijob/slow created\n"
    assert time.monotonic() - began < 2  # the launcher sleeps 2 s: create did not wait for it
    stored = json.loads(live.kubectl("-n", "gpufleet", "get", "mpijob", "slow", "-o", "json").stdout)
    assert "Succeeded" not in {c["type"] for c in (stored.get("status") or {}).get("conditions") or []}
    waited = live.kubectl("-n", "gpufleet", "wait", "--for=condition=Succeeded", "mpijob/slow", "--timeout=60s")
    assert waited.stdout == "mpijob.kubeflow.org/slow condition met\n"
    assert time.monotonic() - began >= 2
    stored = json.loads(live.kubectl("-n", "gpufleet", "get", "mpijob", "slow", "-o", "json").stdout)
    assert [(c["type"], c["status"]) for c in stored["status"]["conditions"]] == [
        ("Created", "True"),
        ("Running", "False"),
        ("Succeeded", "True"),
    ]
    log = live.kubectl(
        "-n",
        "gpufleet",
        "logs",
        "--tail=-1",
        "-l",
        "training.kubeflow.org/job-name=slow,training.kubeflow.org/job-role=launcher",
    ).stdout
    (run,) = nt.parse(log)[0]
    assert run["hosts"] == ["slow-worker-0", "slow-worker-1"]
    (record,) = live.mpijob_records()
    assert record["rc"] == 0 and sorted(record["workers"].values()) == ["stack-deb12", "stack-deb12b"]
    assert record["finished"] - record["started"] >= 2
    # The set-based selector reads the workers of several jobs in one call.
    pods = json.loads(
        live.kubectl(
            "-n",
            "gpufleet",
            "get",
            "pods",
            "-l",
            "training.kubeflow.org/job-name in (slow,other),training.kubeflow.org/job-role=worker",
            "-o",
            "json",
        ).stdout
    )["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["stack-deb12", "stack-deb12b"]


def test_wait_times_out_with_kubectls_message_while_the_job_runs(live):
    job = mpijob("long", env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "GPUFLEET_DOUBLE_SLEEP": "3"})
    live.kubectl("create", "-f", "-", stdin=json.dumps(job))
    began = time.monotonic()
    waited = live.kubectl(
        "-n", "gpufleet", "wait", "--for=condition=Succeeded", "mpijob/long", "--timeout=1s", check=False
    )
    assert waited.returncode == 1 and 1 <= time.monotonic() - began < 3
    assert waited.stderr == "error: timed out waiting for the condition on mpijobs/long\n"
    stored = json.loads(live.kubectl("-n", "gpufleet", "get", "mpijob", "long", "-o", "json").stdout)
    assert ("Running", "True") in [(c["type"], c["status"]) for c in stored["status"]["conditions"]]
    live.kubectl("-n", "gpufleet", "wait", "--for=condition=Succeeded", "mpijob/long", "--timeout=60s")


def test_the_operator_fails_a_job_past_its_active_deadline_and_frees_its_workers(live):
    # The launcher would sleep 30 s; the job's deadline is 1 s: the operator fails it then, as the
    # launcher Job's controller does (DeadlineExceeded), whoever is watching.
    job = mpijob("late", env={"GPUFLEET_DOUBLE_SLEEP": "30"}, active_deadline_s=1)
    live.kubectl("create", "-f", "-", stdin=json.dumps(job))
    began = time.monotonic()
    live.kubectl("-n", "gpufleet", "wait", "--for=condition=Failed", "mpijob/late", "--timeout=20s")
    assert time.monotonic() - began < 5
    stored = json.loads(live.kubectl("-n", "gpufleet", "get", "mpijob", "late", "-o", "json").stdout)
    failed = next(c for c in stored["status"]["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "True",
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
    )
    pods = json.loads(live.kubectl("-n", "gpufleet", "get", "pods", "-o", "json").stdout)["items"]
    assert {p["metadata"]["name"]: p["status"]["phase"] for p in pods} == {
        "late-launcher": "Failed",
        "late-worker-0": "Failed",
        "late-worker-1": "Failed",
    }
    (record,) = live.mpijob_records()
    assert record["ended"] == "deadline" and record["rc"] != 0


def test_a_pending_job_fails_at_its_deadline_and_its_pending_worker_goes(live):
    # stack-deb12b is cordoned: one worker waits for a node, until the deadline fails the job.
    live.kubectl("cordon", "stack-deb12b")
    job = mpijob("stuck", active_deadline_s=1)
    live.kubectl("create", "-f", "-", stdin=json.dumps(job))
    live.kubectl("-n", "gpufleet", "wait", "--for=condition=Failed", "mpijob/stuck", "--timeout=20s")
    stored = json.loads(live.kubectl("-n", "gpufleet", "get", "mpijob", "stuck", "-o", "json").stdout)
    assert [(c["type"], c.get("reason")) for c in stored["status"]["conditions"]] == [
        ("Created", "MPIJobCreated"),
        ("Failed", "DeadlineExceeded"),
    ]
    pods = json.loads(live.kubectl("-n", "gpufleet", "get", "pods", "-o", "json").stdout)["items"]
    assert {p["metadata"]["name"]: p["status"]["phase"] for p in pods} == {"stuck-worker-0": "Failed"}
    (record,) = live.mpijob_records()
    assert record["ended"] == "deadline" and list(record["pending"]) == ["stuck-worker-1"]


def test_a_deleted_job_loses_its_pods_and_its_launcher(live):
    job = mpijob("gone", env={"GPUFLEET_DOUBLE_SLEEP": "30"})
    live.kubectl("create", "-f", "-", stdin=json.dumps(job))
    live.kubectl("-n", "gpufleet", "wait", "--for=condition=Running", "mpijob/gone", "--timeout=20s")
    began = time.monotonic()
    deleted = live.kubectl("-n", "gpufleet", "delete", "mpijob", "gone")
    assert deleted.stdout == 'mpijob.kubeflow.org "gone" deleted\n'
    records = []
    while not records and time.monotonic() - began < 10:
        time.sleep(0.2)
        records = live.mpijob_records()
    (record,) = records
    assert record["ended"] == "deleted" and time.monotonic() - began < 10  # not the launcher's 30 s
    assert json.loads(live.kubectl("-n", "gpufleet", "get", "pods", "-o", "json").stdout)["items"] == []
    again = live.kubectl("-n", "gpufleet", "delete", "mpijob", "gone", check=False)
    assert again.returncode == 1
    assert again.stderr == 'Error from server (NotFound): mpijobs.kubeflow.org "gone" not found\n'
