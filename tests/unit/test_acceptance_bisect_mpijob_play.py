"""The acceptance role's bisect on Kubernetes (launcher mpijob) as Ansible runs it: the MPIJobs of a
round run at the same time, at most acceptance_bisect_parallel of them.

ansible-playbook runs phase 2 (roles/acceptance/tasks/cluster.yml) on local hosts: a controller
and a pool of four nodes, one of them with a slow network (the h100-slow-net profile). kubectl is the
Kubernetes test double (molecule/resources/doubles/stack/k8s/kubectl) against the API server stand-in
on a local port (k8s_live): ``kubectl create`` of an MPIJob returns at once and a background process
plays the MPI Operator, which runs the all_reduce_perf double for the job's worker nodes and records
when the launcher started and ended in kubectl's log. The launcher sleeps a little (the double's
GPUFLEET_DOUBLE_SLEEP, passed as a launcher variable), so jobs that ran together overlap in that
record and jobs run one after the other do not. No lab is needed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import k8s_live
import pytest
from lab_playbook import VENV_BIN, ansible_env, lab_brief_without_gates
from test_acceptance_bisect_play import DOUBLE, PLAYBOOK, PROFILES, inventory, overlap

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

POOL_LABEL = "gpufleet.io/pool"


@pytest.fixture
def cluster(tmp_path, request):
    live = k8s_live.start(tmp_path / "k8s", mpi_operator=getattr(request, "param", True))
    yield live
    live.stop()


def run(tmp_path: Path, cluster: k8s_live.LiveCluster, nodes: list[str], slow: str, *args: str, rc: int = 0, gpus=None):
    """Phase 2 with the mpijob launcher; (what it recorded, the MPIJobs' records, ansible's output),
    or (None, None, ansible's output) when it fails as expected (``rc``). ``gpus``: {node: the GPUs
    its profile gives the device plugin}, for a node with fewer than the pool's."""
    for node in nodes:
        profile = json.loads((PROFILES / f"{'h100-slow-net' if node == slow else 'h100-hgx-healthy'}.json").read_text())
        profile["hostname"] = node
        profile["gpu_count"] = (gpus or {}).get(node, profile["gpu_count"])
        (cluster.peers / f"{node}.json").write_text(json.dumps(profile))
    cluster.apply(*(k8s_live.gpu_node(n, {POOL_LABEL: "h100-lab"}) for n in nodes))
    (tmp_path / "hosts.yml").write_text(inventory(nodes))
    (tmp_path / "play.yml").write_text(PLAYBOOK.replace("acceptance_launcher: srun", "acceptance_launcher: mpijob"))
    out = tmp_path / "out.json"
    env = ansible_env(
        cluster.bin,
        **{k: v for k, v in cluster.env.items() if k.startswith("GPUFLEET_DOUBLE_") or k == "PYTHONPATH"},
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"),
        ANSIBLE_PYTHON_INTERPRETER=sys.executable,
    )
    extra = {
        "out": str(out),
        "brief": str(lab_brief_without_gates(tmp_path)),
        "acceptance_kubeconfig": str(cluster.kubeconfig),
        "acceptance_container_image": "nvcr.io/nvidia/pytorch:25.01-py3",
        "acceptance_all_reduce_perf": str(DOUBLE),
        # A small sweep: the double prints one row per size. Each launcher lasts 1.5 s more.
        "acceptance_min_bytes": "1G",
        "acceptance_env": {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "GPUFLEET_DOUBLE_SLEEP": "1.5"},
    }
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts.yml", "play.yml", "-e", json.dumps(extra), *args]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == rc, proc.stdout[-4000:] + proc.stderr[-2000:]
    if rc:
        return None, None, proc.stdout + proc.stderr
    return json.loads(out.read_text()), cluster.mpijob_records(), proc.stdout


def spans(records: list[dict]) -> dict[str, tuple[float, float]]:
    """Each group's (launcher start, end), the group named by its nodes; one MPIJob per group here."""
    return {",".join(sorted(r["workers"].values())): (r["started"], r["finished"]) for r in records}


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def round_lines(stdout: str) -> list[str]:
    return re.findall(r"Round \d+: \d+ group\(s\), \d+ running at once at most", stdout)


@pytest.fixture(autouse=True)
def _double_present():
    if not DOUBLE.exists():
        pytest.skip("needs the all_reduce_perf double")


def test_round_mpijobs_run_at_once_and_name_the_slow_node(tmp_path, cluster):
    nodes = ["gpu01", "gpu02", "gpu03", "gpu04"]
    recorded, jobs, stdout = run(tmp_path, cluster, nodes, "gpu03")
    (plan,) = recorded["plans"]
    assert plan["slow_nodes"] == ["gpu03"] and plan["slow_links"] == []
    bisect = [r for r in recorded["runs"] if r["label"].startswith("bisect ")]
    first = [r["nodes"] for r in bisect if r["round"] == 1]
    assert first == [["gpu01", "gpu02"], ["gpu03", "gpu04"]]
    # Every run is an MPIJob that ran to its end on its own nodes; the log names nodes, not pods.
    assert all(j["rc"] == 0 and j["pending"] == {} for j in jobs)
    assert len(jobs) == 1 + len(bisect)
    assert all(sorted(r["run"]["hosts"]) == sorted(r["nodes"]) for r in bisect)
    s = spans(jobs)
    assert overlap(s["gpu01,gpu02"], s["gpu03,gpu04"])
    # The slow node caps its group's figure.
    busbw = {"+".join(r["nodes"]): r["busbw"] for r in bisect if r["round"] == 1}
    assert busbw["gpu03+gpu04"] < 100 < busbw["gpu01+gpu02"]
    assert round_lines(stdout)[0] == "Round 1: 2 group(s), 2 running at once at most"
    assert most_at_once(list(s.values())) == 2


def test_one_mpijob_at_a_time_when_parallel_is_1(tmp_path, cluster):
    nodes = ["gpu01", "gpu02", "gpu03", "gpu04"]
    recorded, jobs, stdout = run(tmp_path, cluster, nodes, "gpu03", "-e", "acceptance_bisect_parallel=1")
    assert recorded["plans"][0]["slow_nodes"] == ["gpu03"]
    s = spans(jobs)
    pairs = [g for g in s if g.count(",") == 1]
    assert len(pairs) >= 3
    assert not any(overlap(s[a], s[b]) for a in pairs for b in pairs if a < b)
    assert most_at_once(list(s.values())) == 1
    assert all(line.endswith(", 1 running at once at most") for line in round_lines(stdout))


@pytest.mark.parametrize("cluster", [False], indirect=True)
def test_an_mpijob_that_cannot_be_created_stops_the_play(tmp_path, cluster):
    # Without the MPI Operator's CRD the API server refuses the MPIJob: the play stops with kubectl's
    # error, rather than recording a run without a figure.
    _, _, output = run(tmp_path, cluster, ["gpu01", "gpu02"], "gpu02", rc=2)
    assert re.search(r"kubectl create of gpufleet-nccl-h100-lab-[0-9]{8}t[0-9]{6}z-0: error: resource mapping", output)
    assert 'no matches for kind "MPIJob" in version "kubeflow.org/v2beta1"' in output


def test_an_mpijob_that_never_succeeds_is_a_run_without_a_figure(tmp_path, cluster):
    # gpu02 advertises 4 GPUs, the pool's workers ask for 8: its worker stays Pending, the job never
    # succeeds, kubectl wait gives up at acceptance_run_timeout and the run has no figure, the
    # scheduler's reason in its output. Without a figure there is nothing to bisect.
    recorded, _, _ = run(
        tmp_path, cluster, ["gpu01", "gpu02"], "none", "-e", "acceptance_run_timeout=2", gpus={"gpu02": 4}
    )
    (run_record,) = recorded["runs"]
    assert run_record["label"] == "all-nodes h100-lab" and run_record["busbw"] is None and run_record["rc"] == 1
    assert "timed out waiting for the condition on mpijobs/gpufleet-nccl-h100-lab-" in run_record["output"]
    # gpu01 already holds the other worker's 8 GPUs
    assert "Pending workers: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu." in run_record["output"]
    assert run_record["violations"] and recorded["plans"] == []
    # The job that overran was deleted once read, and the worker that held gpu01's GPUs with it.
    assert re.search(r"mpijobs/gpufleet-nccl-h100-lab-\S+ deleted after the timeout", run_record["output"])
    assert json.loads(cluster.kubectl("-n", "gpufleet", "get", "mpijobs", "-o", "json").stdout)["items"] == []
    assert json.loads(cluster.kubectl("-n", "gpufleet", "get", "pods", "-o", "json").stdout)["items"] == []
    waited = 0.0
    while (records := cluster.mpijob_records()) == [] and waited < 5:  # the operator's next look
        time.sleep(0.5)
        waited += 0.5
    (job,) = records
    assert list(job["workers"].values()) == ["gpu01"] and "rc" not in job and job["ended"] == "deleted"


def test_an_mpijob_that_fails_is_known_when_it_fails(tmp_path, cluster):
    # The launcher's program is missing: mpirun fails, the job gains Failed, and the run ends then
    # with that said, rather than at acceptance_run_timeout (120 s here) as a wait for Succeeded alone
    # would.
    recorded, jobs, _ = run(
        tmp_path,
        cluster,
        ["gpu01", "gpu02"],
        "none",
        "-e",
        "acceptance_run_timeout=120",
        "-e",
        "acceptance_all_reduce_perf=/opt/nccl-tests/bin/missing_all_reduce_perf",
    )
    (run_record,) = recorded["runs"]
    assert run_record["busbw"] is None and run_record["rc"] == 1
    assert "ended with condition Failed" in run_record["output"], run_record["output"]
    assert "timed out waiting" not in run_record["output"]
    (job,) = jobs
    assert job["rc"] != 0
