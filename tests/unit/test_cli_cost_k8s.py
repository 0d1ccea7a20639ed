"""``gpufleet report cost`` on a Kubernetes brief: Kueue's Workloads from a file, or read with kubectl on
the first control-plane node through Ansible; the report names its source."""

from __future__ import annotations

import json
import subprocess

from cost_fixtures import ROOT, UNIT, WINDOW
from gpufleet_cli import cmd_cost
from gpufleet_cli.main import main

K8S = ROOT / "inventories/example-h200-roce-k8s"
WORKLOADS = UNIT / "cost" / "kueue_workloads.json"


def cli(capsys, *argv):
    rc = main(["report", "cost", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_report_from_a_workloads_file(capsys, tmp_path):
    rc, out, err = cli(
        capsys, "--workloads", str(WORKLOADS), "-i", str(K8S), "--dir", str(tmp_path), *WINDOW, "--format", "json"
    )
    assert rc == 0, err
    rep = json.loads(out)
    use = rep["usage"]
    assert use["source"] == "Kueue Workloads"
    # 16 GPUs x 12 h and 16 GPUs x 11 h completed; 8 GPUs x 2 h failed.
    assert use["accepted_gpu_hours"] == 16 * 12 + 16 * 11
    assert use["retry_gpu_hours_by_state"] == {"FAILED": 16.0}
    assert use["jobs"] == {"accepted": 2, "retry": 1, "in_progress": 0}


def test_workloads_are_read_on_the_first_control_plane_node(capsys, tmp_path, monkeypatch):
    seen = {}

    def fake_run(argv, **kw):
        seen["argv"] = argv
        payload = {"plays": [{"tasks": [{"hosts": {argv[1]: {"rc": 0, "stdout": WORKLOADS.read_text()}}}]}]}
        return subprocess.CompletedProcess(argv, 0, json.dumps(payload), "")

    monkeypatch.setattr(cmd_cost.subprocess, "run", fake_run)
    rc, out, err = cli(capsys, "-i", str(K8S), "--dir", str(tmp_path), *WINDOW)
    assert rc == 0, err
    argv = seen["argv"]
    brief = (K8S / "brief.yml").read_text()
    assert "control_plane: kubernetes" in brief
    assert argv[argv.index("-a") + 1] == (
        "kubectl --kubeconfig /etc/kubernetes/admin.conf get workloads.kueue.x-k8s.io --all-namespaces -o json"
    )
    assert "Kueue Workloads 2026-03-01T00:00:00" in out


def test_a_file_that_is_not_a_workload_list_is_exit_2(capsys, tmp_path):
    bad = tmp_path / "w.json"
    bad.write_text("NAME   QUEUE\n")
    rc, _, err = cli(capsys, "--workloads", str(bad), "-i", str(K8S), "--dir", str(tmp_path), *WINDOW)
    assert rc == 2 and "found no JSON" in err
    bad.write_text('{"kind": "List"}')
    rc, _, err = cli(capsys, "--workloads", str(bad), "-i", str(K8S), "--dir", str(tmp_path), *WINDOW)
    assert rc == 2 and "a List with items" in err


def test_sacct_and_workloads_exclude_each_other(capsys, tmp_path):
    try:
        rc = main(["report", "cost", "--sacct", "a", "--workloads", "b", "-i", str(K8S)])
    except SystemExit as exc:
        rc = exc.code
    assert rc == 2
    assert "not allowed with argument" in capsys.readouterr().err
