"""The all_reduce_perf test double (molecule/resources/doubles/bin) read back by our parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl as acc
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_debug as nd
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_tests as nt

ROOT = Path(__file__).resolve().parents[2]
DOUBLE = ROOT / "molecule/resources/doubles/bin/all_reduce_perf"


def profile(host: str, **kw) -> dict:
    base = {
        "hostname": host,
        "gpu_name": "NVIDIA H100 80GB HBM3",
        "gpu_count": 8,
        "busbw_gbps": 478.0,
        "net_busbw_gbps": 96.0,
        "nccl_version": "2.26.2",
        "network": "IB",
        "gdr": True,
        "nics": 2,
    }
    base.update(kw)
    return base


@pytest.fixture
def cluster(tmp_path):
    """Three node profiles; gpu03 is the planted slow node."""
    peers = tmp_path / "peers"
    peers.mkdir()
    profiles = {"gpu01": profile("gpu01"), "gpu02": profile("gpu02"), "gpu03": profile("gpu03", net_busbw_gbps=31.0)}
    for host, data in profiles.items():
        (peers / f"{host}.json").write_text(json.dumps(data))
    own = tmp_path / "hw-profile.json"
    own.write_text(json.dumps(profiles["gpu01"]))
    return {"profile": own, "peers": peers}


def run_double(cluster, *args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_", "PMIX_", "NCCL_"))}
    full_env.update(GPUFLEET_HW_PROFILE=str(cluster["profile"]), GPUFLEET_DOUBLE_PEERS_DIR=str(cluster["peers"]))
    full_env.update(env)
    return subprocess.run(
        [sys.executable, str(DOUBLE), *args], capture_output=True, text=True, env=full_env, check=False, timeout=60
    )


def test_double_is_executable_and_says_it_is_a_double():
    assert os.access(DOUBLE, os.X_OK)
    assert "TEST DOUBLE" in DOUBLE.read_text().splitlines()[1]


def test_single_node_round_trip(cluster):
    proc = run_double(cluster, "-b", "8", "-e", "8G", "-f", "2", "-g", "8")
    assert proc.returncode == 0, proc.stderr
    runs, warnings = nt.parse(proc.stdout, "double")
    assert warnings == []
    (run,) = runs
    assert run["collective"] == "all_reduce" and run["ranks"] == 8 and run["hosts"] == ["gpu01"]
    assert run["gpu_names"] == ["NVIDIA H100 80GB HBM3"] and run["nccl_version"] == "2.26.2"
    assert [r["size"] for r in run["rows"]][:3] == [8, 16, 32] and run["rows"][-1]["size"] == 8 << 30
    assert nt.busbw_at_largest(run) == pytest.approx(478.0, rel=0.03)
    assert acc.evaluate_run(run, 440, field=acc.FIELD_SINGLE, min_size="8G") == []
    assert nd.parse_debug(proc.stdout) is None  # no NCCL_DEBUG, no INFO lines


def test_multi_node_slow_node_caps_the_job(cluster):
    proc = run_double(cluster, "-b", "1M", "-e", "1G", "-f", "2", "-g", "8", "--hosts", "gpu01,gpu02,gpu03")
    (run,) = nt.parse(proc.stdout)[0]
    assert run["hosts"] == ["gpu01", "gpu02", "gpu03"] and run["ranks"] == 24
    assert nt.busbw_at_largest(run) < 32
    assert acc.verdict(acc.evaluate_run(run, 90)) == "fail"


def test_slurm_nodelist_and_bisect_finds_the_planted_node(cluster):
    def run_group(nodes):
        proc = run_double(
            cluster,
            "-b",
            "64M",
            "-e",
            "1G",
            "-f",
            "2",
            "-g",
            "8",
            SLURM_JOB_NODELIST=",".join(nodes),
            SLURM_NNODES=str(len(nodes)),
        )
        runs, _ = nt.parse(proc.stdout)
        return nt.busbw_at_largest(runs[0]) if runs else None

    proc = run_double(cluster, "-b", "1G", "-e", "1G", "-g", "8", SLURM_JOB_NODELIST="gpu[01-02]", SLURM_NNODES="2")
    (run,) = nt.parse(proc.stdout)[0]
    assert run["hosts"] == ["gpu01", "gpu02"] and nt.busbw_at_largest(run) > 90
    plan = acc.bisect(["gpu01", "gpu02", "gpu03"], run_group, 90)
    assert plan["slow_nodes"] == ["gpu03"]


def test_nccl_debug_info_round_trip(cluster):
    proc = run_double(cluster, "-b", "1G", "-e", "1G", "-g", "8", "--hosts", "gpu01,gpu02", NCCL_DEBUG="INFO")
    debug = nd.parse_debug(proc.stdout, "double")
    assert debug["network"] == "IB" and debug["gdr"] is True and debug["socket_fallback"] is False
    assert debug["nccl_version"] == "2.26.2" and debug["ib_devices"] == ["mlx5_0:1/IB", "mlx5_1:1/IB"]
    assert acc.evaluate_transport(debug, "infiniband", True) == []
    assert len(nt.parse(proc.stdout)[0]) == 1  # INFO lines do not disturb the table


def test_socket_profile_falls_back(cluster):
    data = json.loads(cluster["profile"].read_text())
    cluster["profile"].write_text(json.dumps(dict(data, network="Socket")))
    proc = run_double(cluster, "-b", "1G", "-e", "1G", "-g", "8", "--hosts", "gpu01,gpu02", NCCL_DEBUG="INFO")
    debug = nd.parse_debug(proc.stdout)
    assert debug["socket_fallback"] is True
    codes = [v["code"] for v in acc.evaluate_transport(debug, "infiniband", True)]
    assert codes == ["NCCL_SOCKET_FALLBACK"]
    assert nt.busbw_at_largest(nt.parse(proc.stdout)[0][0]) < 3


def test_only_rank_zero_prints(cluster):
    proc = run_double(cluster, "-g", "8", SLURM_PROCID="3")
    assert proc.returncode == 0 and proc.stdout == ""


def test_too_many_gpus_fails_like_the_real_one(cluster):
    proc = run_double(cluster, "-g", "9")
    assert proc.returncode == 1 and "Invalid number of GPUs: 9 requested but only 8 were found" in proc.stderr


def test_no_validation_prints_na(cluster):
    proc = run_double(cluster, "-b", "1M", "-e", "4M", "-f", "2", "-g", "8", "-c", "0")
    (run,) = nt.parse(proc.stdout)[0]
    assert all(r["oop_wrong"] is None for r in run["rows"])


def test_planted_wrong_values(cluster):
    data = json.loads(cluster["profile"].read_text())
    cluster["profile"].write_text(json.dumps(dict(data, wrong_values=7)))
    proc = run_double(cluster, "-b", "1M", "-e", "4M", "-f", "2", "-g", "8")
    assert proc.returncode == 1
    (run,) = nt.parse(proc.stdout)[0]
    assert run["out_of_bounds"] == 2 and run["rows"][-1]["oop_wrong"] == 7
    assert [v["code"] for v in acc.evaluate_run(run, 100)] == ["NCCL_WRONG_RESULTS"]


def test_missing_profile(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(DOUBLE)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GPUFLEET_HW_PROFILE": str(tmp_path / "none.json")},
    )
    assert proc.returncode == 1 and "cannot read hardware profile" in proc.stderr


@pytest.mark.parametrize(
    "spec,hosts",
    [
        ("gpu[01-03]", ["gpu01", "gpu02", "gpu03"]),
        ("a,b", ["a", "b"]),
        ("n[1,3-4]x", ["n1x", "n3x", "n4x"]),
        ("gpu[08-10],login1", ["gpu08", "gpu09", "gpu10", "login1"]),
    ],
)
def test_hostlist_expansion(spec, hosts):
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("all_reduce_perf_double", str(DOUBLE))
    spec_ = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec_)
    loader.exec_module(module)
    assert module.expand_hostlist(spec) == hosts
