"""``gpufleet report``: latest report found, acceptance / gate / drift rendered, no report → exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_tests
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import report as rep
from gpufleet_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
NCCL = ROOT / "collections/ansible_collections/gpufleet/cluster/tests/unit/fixtures/nccl"


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["report", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def acceptance(base: Path, cluster: str = "lab", stamp: str = "20260302T101500Z", plots: bool = False) -> Path:
    runs, _ = nccl_tests.parse((NCCL / "allreduce_multi_runs_single_node.txt").read_text(), "single.txt")
    report = rep.build_report(
        cluster,
        runs=[{"label": "single-node gpu01", "scope": "single-node", "host": "gpu01", "run": runs[0], "floor_gbps": 1}],
        timestamp=stamp,
    )
    return Path(rep.write_report(str(base), report, plots=plots)["dir"])


def violation(host: str, code: str, severity: str = "error") -> dict:
    return {"severity": severity, "code": code, "host": host, "field": "gpus", "message": f"{code} on {host}"}


def gate(base: Path, cluster: str = "lab", stamp: str = "20260302T120000Z", sub: str = "hardware") -> Path:
    d = base / cluster / stamp / sub
    d.mkdir(parents=True)
    records = {
        "gpu02": {
            "host": "gpu02",
            "pool": "h100-train",
            "status": "fail",
            "summary": {"gpus": "7x NVIDIA H100 80GB HBM3", "driver": "570.133.20"},
            "violations": [violation("gpu02", "HW_GPU_COUNT"), violation("gpu02", "HW_NUMA", "warning")],
            "facts": {"gpus": []},
        },
        "gpu01": {"host": "gpu01", "ok": True, "violations": []},  # the minimal shape
        "gpu10": {"violations": [violation("gpu10", "HW_RDMA_PORT_DOWN")]},  # no host, no status: derived
    }
    for host, rec in records.items():
        (d / f"{host}.json").write_text(json.dumps(rec))
    return d.parent


def test_latest_acceptance_rendered_with_render_markdown(capsys, tmp_path):
    acceptance(tmp_path, stamp="20260301T000000Z")
    newest = acceptance(tmp_path, stamp="20260302T101500Z")
    rc, out, err = cli(capsys, "--dir", str(tmp_path))
    assert rc == 0, err
    expected = rep.render_markdown(json.loads((newest / "acceptance.json").read_text()))
    assert out == expected
    assert str(newest) in err


def test_gate_records_rendered_as_table_and_violations(capsys, tmp_path):
    gate(tmp_path)
    rc, out, _err = cli(capsys, "--dir", str(tmp_path), "--kind", "gate")
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == "# Hardware gate: lab"
    assert lines[2].startswith("**Verdict: FAIL** (2 of 3 nodes failed; 2 errors, 1 warning), 20260302T120000Z")
    assert "- Failed: gpu02, gpu10" in out
    assert "| host | pool | status | gpus | driver | errors |" in out
    # natural order: gpu01, gpu02, gpu10
    rows = [line for line in lines if line.startswith("| gpu")]
    assert [r.split("|")[1].strip() for r in rows] == ["gpu01", "gpu02", "gpu10"]
    assert "| gpu02 | h100-train | FAIL | 7x NVIDIA H100 80GB HBM3 | 570.133.20 | HW_GPU_COUNT |" in out
    assert "| gpu10 | - | FAIL | - | - | HW_RDMA_PORT_DOWN |" in out
    assert "| error | HW_GPU_COUNT | gpu02 | gpus | HW_GPU_COUNT on gpu02 |" in out
    assert out.index("HW_RDMA_PORT_DOWN on gpu10") < out.index("HW_NUMA on gpu02")  # errors before warnings


@pytest.mark.parametrize("sub", ["hardware", "gate"])
def test_gate_directory_names(capsys, tmp_path, sub):
    d = gate(tmp_path, sub=sub)
    rc, out, _err = cli(capsys, str(d))
    assert rc == 0 and out.startswith("# Hardware gate: lab")


def test_directory_with_several_kinds_renders_each_or_the_one_asked(capsys, tmp_path):
    d = acceptance(tmp_path, stamp="20260303T000000Z")
    (d / "drift").mkdir()
    (d / "drift/gpu01.json").write_text(json.dumps({"host": "gpu01", "ok": False, "violations": []}))
    rc, out, _err = cli(capsys, "--dir", str(tmp_path))
    assert rc == 0
    assert out.startswith("# NCCL acceptance: lab") and "# Drift: lab" in out
    rc, out, _err = cli(capsys, "--dir", str(tmp_path), "--kind", "drift")
    assert rc == 0 and out.startswith("# Drift: lab") and "NCCL" not in out


def test_kind_selects_the_latest_of_that_kind(capsys, tmp_path):
    acceptance(tmp_path, stamp="20260301T000000Z")
    gate(tmp_path, stamp="20260305T000000Z")
    rc, out, _err = cli(capsys, "--dir", str(tmp_path))
    assert rc == 0 and out.startswith("# Hardware gate")  # newest of any kind
    rc, out, _err = cli(capsys, "--dir", str(tmp_path), "--kind", "acceptance")
    assert rc == 0 and out.startswith("# NCCL acceptance")


def test_drift_single_file_with_nodes_key(capsys, tmp_path):
    d = tmp_path / "sjc-a" / "20260310T000000Z"
    d.mkdir(parents=True)
    doc = {
        "cluster": "sjc-a",
        "nodes": [
            {"host": "gpu001", "ok": True, "violations": []},
            {
                "host": "gpu002",
                "ok": False,
                "summary": {"driver": "570.124.06"},
                "violations": [violation("gpu002", "DRIFT_DRIVER")],
            },
        ],
    }
    (d / "drift.json").write_text(json.dumps(doc))
    rc, out, _err = cli(capsys, "--dir", str(tmp_path))
    assert rc == 0
    assert out.startswith("# Drift: sjc-a") and "| gpu002 | FAIL | 570.124.06 | DRIFT_DRIVER |" in out


def test_path_to_a_cluster_directory_or_a_json_file(capsys, tmp_path):
    acceptance(tmp_path, stamp="20260301T000000Z")
    newest = acceptance(tmp_path, stamp="20260302T000000Z")
    rc, out, _err = cli(capsys, str(tmp_path / "lab"))
    assert rc == 0 and "20260302T000000Z" in out
    rc, out, _err = cli(capsys, str(newest / "acceptance.json"))
    assert rc == 0 and out.startswith("# NCCL acceptance: lab")
    d = gate(tmp_path, cluster="other")
    rc, out, _err = cli(capsys, str(d / "hardware/gpu02.json"))
    assert rc == 0 and "| gpu02 | h100-train | FAIL |" in out


def test_plots_redrawn(capsys, tmp_path):
    d = acceptance(tmp_path, plots=False)
    assert not list(d.glob("*.png"))
    rc, out, err = cli(capsys, "--dir", str(tmp_path), "--plots")
    assert rc == 0, err
    assert (d / "busbw-single-node-gpu01.png").read_bytes()[:4] == b"\x89PNG"
    assert "![busbw vs message size, single-node gpu01](busbw-single-node-gpu01.png)" in out
    assert "drew 1 plot" in err


def test_list(capsys, tmp_path):
    acceptance(tmp_path, stamp="20260302T000000Z")
    gate(tmp_path, stamp="20260301T000000Z")
    rc, out, _err = cli(capsys, "--dir", str(tmp_path), "--list")
    assert rc == 0
    assert [line.split()[2] for line in out.splitlines()] == ["gate", "acceptance"]


@pytest.mark.parametrize(
    ("setup", "argv", "message"),
    [
        ("none", [], "no report under"),
        ("none", ["--kind", "gate"], "no gate report under"),
        ("missing-dir", [], "no report under"),
        ("gate-only", ["--kind", "acceptance"], "no acceptance report under"),
        ("bad-json", [], "not valid JSON"),
        ("wrong-shape", [], "expected a per-node record"),
        ("not-acceptance", [], "expected an NCCL acceptance report"),
        ("broken-acceptance", [], "not an NCCL acceptance report this version can read"),
        ("none", ["nope/x"], "nope/x: no such report directory or JSON file"),
        ("none", ["--list"], "no report under"),
    ],
)
def test_no_or_unreadable_report_exit_2(capsys, tmp_path, setup, argv, message):
    base = tmp_path / "reports"
    base.mkdir()
    d = base / "lab" / "20260302T000000Z"
    if setup == "missing-dir":
        base.rmdir()
    elif setup == "gate-only":
        gate(base)
    elif setup in ("bad-json", "wrong-shape"):
        (d / "gate").mkdir(parents=True)
        (d / "gate/gpu01.json").write_text("{" if setup == "bad-json" else "42")
    elif setup in ("not-acceptance", "broken-acceptance"):
        d.mkdir(parents=True)
        (d / "acceptance.json").write_text("[1]" if setup == "not-acceptance" else json.dumps({"runs": [{}]}))
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        rc, out, err = cli(capsys, "--dir", str(base), *argv)
    finally:
        os.chdir(old)
    assert rc == 2
    assert message in err and "Traceback" not in err
    assert out == ""


def test_no_report_message_names_the_command(capsys, tmp_path):
    rc, _out, err = cli(capsys, "--dir", str(tmp_path))
    assert rc == 2 and "run gpufleet accept first" in err
