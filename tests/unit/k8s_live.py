"""A live Kubernetes test double on this machine, for the tests that need what a detached process
does between kubectl calls (the MPIJob path's operator): the API server stand-in
(molecule/resources/doubles/stack/k8s/kube-apiserver) on a free local port with its state in a
temporary directory, and ``kubectl`` on a PATH directory, the kubectl stand-in run by this
interpreter, with the test bed's paths (logs, state, node profiles) under that directory."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml
from k8s_doubles import K8S_DOUBLES, ROOT

ALL_REDUCE_PERF = ROOT / "molecule/resources/doubles/bin/all_reduce_perf"
MPI_OPERATOR = K8S_DOUBLES / "mpi-operator.yaml"


@dataclass
class LiveCluster:
    base: Path
    bin: Path
    kubeconfig: Path
    env: dict
    server: subprocess.Popen

    @property
    def kubectl_log(self) -> Path:
        return Path(self.env["GPUFLEET_DOUBLE_LOG_DIR"]) / "kubectl.log"

    @property
    def peers(self) -> Path:
        return Path(self.env["GPUFLEET_DOUBLE_PEERS_DIR"])

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [str(self.bin / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check and proc.returncode:
            raise AssertionError(f"kubectl {' '.join(args)}: rc {proc.returncode}\n{proc.stdout}{proc.stderr}")
        return proc

    def apply(self, *docs: dict) -> None:
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def mpijob_records(self) -> list[dict]:
        """The operator's record of each MPIJob it is done with, from kubectl's log."""
        if not self.kubectl_log.exists():
            return []
        lines = [json.loads(line) for line in self.kubectl_log.read_text().splitlines()]
        return [job for line in lines for job in line.get("mpijobs", [])]

    def stop(self) -> None:
        self.server.terminate()
        self.server.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(base: Path, mpi_operator: bool = True) -> LiveCluster:
    """The API server stand-in and kubectl under ``base``, with the MPI Operator's manifest (its
    MPIJob CRD) applied unless ``mpi_operator`` is false."""
    lib, bindir = base / "lib", base / "bin"
    for d in (lib, bindir, base / "log", base / "state", base / "peers"):
        d.mkdir(parents=True)
    # As the test bed installs them: the programs, the shared modules and the image's nccl-tests side by
    # side (the programs copied: Python would look for their modules beside a link's target).
    for f in ("kubectl", "kube-apiserver"):
        shutil.copy(K8S_DOUBLES / f, lib / f)
    for f in ("gpufleet_k8s_double.py", "gpufleet_k8s_jobs.py"):
        (lib / f).symlink_to(K8S_DOUBLES / f)
    (lib / "all_reduce_perf").symlink_to(ALL_REDUCE_PERF)
    env = {
        **os.environ,
        "PYTHONPATH": str(lib),
        "PYTHONDONTWRITEBYTECODE": "1",
        "GPUFLEET_DOUBLE_LOG_DIR": str(base / "log"),
        "GPUFLEET_DOUBLE_K8S_STATE_DIR": str(base / "state"),
        "GPUFLEET_DOUBLE_PEERS_DIR": str(base / "peers"),
    }
    (bindir / "kubectl").write_text(f'#!/bin/sh\nexec {sys.executable} {lib / "kubectl"} "$@"\n')
    (bindir / "kubectl").chmod(0o755)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(lib / "kube-apiserver"), "127.0.0.1", str(port)],
        env=env,
        stdout=(base / "log" / "kube-apiserver.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1):
                break
        except OSError:
            time.sleep(0.1)
    else:
        server.kill()
        raise AssertionError("the API server stand-in did not answer")
    kubeconfig = base / "admin.conf"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "kubernetes", "cluster": {"server": url}}],
                "users": [{"name": "kubernetes-admin", "user": {}}],
                "contexts": [{"name": "admin", "context": {"cluster": "kubernetes", "user": "kubernetes-admin"}}],
                "current-context": "admin",
            }
        )
    )
    cluster = LiveCluster(base, bindir, kubeconfig, env, server)
    if mpi_operator:
        cluster.kubectl("apply", "-f", str(MPI_OPERATOR))
    return cluster


def gpu_node(name: str, labels: dict, taints: list | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "spec": {"taints": taints or []},
    }
