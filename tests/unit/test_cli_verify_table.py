"""The per-node table `gpufleet verify` prints from the hardware gate's records."""

from __future__ import annotations

import json
import os

from gpufleet_cli.cmd_provision import gate_table, latest_gate_dir


def _record(path, host, status, codes, gpus="8", firmware=None):
    summary = {"gpus": gpus, "driver": "570.133.20", **({"firmware": firmware} if firmware else {})}
    path.write_text(json.dumps({"host": host, "status": status, "codes": codes, "summary": summary}))


def test_table_lists_every_node_with_its_verdict_and_codes(tmp_path):
    gate = tmp_path / "lab" / "20260101T000000Z" / "gate"
    gate.mkdir(parents=True)
    _record(gate / "gpu01.json", "gpu01", "pass", [])
    _record(gate / "gpu02.json", "gpu02", "fail", ["HW_GPU_COUNT"], gpus="7")
    mixed = "VBIOS 96.00.99.00.01 x7 / 96.00.74.00.0D x1, NIC 28.43.2026, BIOS 2.4.1"
    _record(gate / "gpu03.json", "gpu03", "fail", ["HW_FIRMWARE_MIXED"], firmware=mixed)
    (gate / "broken.json").write_text("{not json")
    text = gate_table(latest_gate_dir(str(tmp_path)))
    lines = text.splitlines()
    assert lines[0] == f"Hardware gate: {gate}"
    broken = next(line for line in lines if line.strip().startswith("broken.json"))
    assert broken.split()[1] == "unreadable"
    gpu01 = next(line for line in lines if line.strip().startswith("gpu01"))
    gpu02 = next(line for line in lines if line.strip().startswith("gpu02"))
    assert gpu01.split()[1:3] == ["PASS", "8"]
    assert gpu02.split()[1:3] == ["FAIL", "7"]
    assert gpu02.rstrip().endswith("HW_GPU_COUNT")
    assert lines[1].split() == ["host", "gate", "gpus", "driver", "nvlink", "rdma", "firmware", "codes"]
    gpu03 = next(line for line in lines if line.strip().startswith("gpu03"))
    assert gpu03.rstrip().endswith(f"{mixed}  HW_FIRMWARE_MIXED")


def test_only_gate_dirs_written_by_this_run_count(tmp_path):
    old = tmp_path / "lab" / "old" / "gate"
    old.mkdir(parents=True)
    os.utime(old, (1_000_000, 1_000_000))
    assert latest_gate_dir(str(tmp_path), since=2_000_000) is None
    assert "no hardware gate records" in gate_table(None)


def test_acceptance_line_names_the_verdict_and_the_markdown_report(tmp_path):
    from gpufleet_cli.cmd_provision import acceptance_line

    run = tmp_path / "lab" / "20260101T000000Z"
    run.mkdir(parents=True)
    (run / "acceptance.json").write_text(json.dumps({"verdict": "fail"}))
    line = acceptance_line(str(tmp_path))
    assert line == f"NCCL acceptance: FAIL; report {run}/acceptance.md (scripts/gpufleet report)"
    assert acceptance_line(str(tmp_path), since=os.path.getmtime(run / "acceptance.json") + 10) is None


def test_acceptance_line_names_the_warnings_a_pass_carries(tmp_path):
    from gpufleet_cli.cmd_provision import acceptance_line

    run = tmp_path / "lab" / "20260101T000000Z"
    run.mkdir(parents=True)
    warn = {"severity": "warning"}
    report = {
        "verdict": "pass",
        "violations": [
            {**warn, "code": "NCCL_OUTLIER", "host": "gpu03"},
            {**warn, "code": "NODE_DEGRADED", "host": "gpu04"},
            {**warn, "code": "NODE_DEGRADED", "host": "gpu01"},
            {**warn, "code": "NODE_DEGRADED", "host": "gpu04"},
            {**warn, "code": "QUOTE_DIFFERS"},
            {"severity": "error", "code": "NCCL_BUSBW_BELOW_FLOOR", "host": "gpu09"},
        ],
    }
    (run / "acceptance.json").write_text(json.dumps(report))
    first, second = acceptance_line(str(tmp_path)).split("\n")
    assert first == f"NCCL acceptance: PASS; report {run}/acceptance.md (scripts/gpufleet report)"
    assert second == (
        "  warnings (5): NCCL_OUTLIER: gpu03; NODE_DEGRADED: gpu01, gpu04; QUOTE_DIFFERS (the report says why)"
    )


def test_acceptance_line_sums_up_storage_and_workload(tmp_path):
    from gpufleet_cli.cmd_provision import acceptance_line

    run = tmp_path / "lab" / "20260101T000000Z"
    run.mkdir(parents=True)
    report = {
        "verdict": "fail",
        "storage": [
            {"host": "gpu01", "violations": [{"severity": "error", "code": "STORAGE_BELOW_FLOOR"}]},
            {"host": "gpu02", "violations": [{"severity": "warning", "code": "STORAGE_NOT_MOUNTED"}]},
        ],
        "workload": {"verdict": "pass", "throughput_samples_per_s": 3000.5, "resumed_step": 95, "restore_s": 2.54},
    }
    (run / "acceptance.json").write_text(json.dumps(report))
    line = acceptance_line(str(tmp_path))
    assert line.endswith(
        "(scripts/gpufleet report); storage: FAIL (gpu01) on 2 node(s); "
        "workload: PASS (3000.5 samples/s, resumed at step 95, restore 2.5 s)"
    )
    # A float median is shown to one decimal, not with its binary noise.
    report["workload"]["throughput_samples_per_s"] = 243972.15000000002
    (run / "acceptance.json").write_text(json.dumps(report))
    assert "workload: PASS (243972.2 samples/s, resumed" in acceptance_line(str(tmp_path))
    report["workload"]["throughput_samples_per_s"] = None
    (run / "acceptance.json").write_text(json.dumps(report))
    assert "workload: PASS (- samples/s, resumed" in acceptance_line(str(tmp_path))
    report["workload"] = {"skipped": "check mode: no job submitted"}
    (run / "acceptance.json").write_text(json.dumps(report))
    assert acceptance_line(str(tmp_path)).endswith("; workload: not run (check mode: no job submitted)")


def test_acceptance_line_sums_up_the_collectives_beyond_all_reduce(tmp_path):
    from gpufleet_cli.cmd_provision import acceptance_line

    run = tmp_path / "lab" / "20260101T000000Z"
    run.mkdir(parents=True)
    runs = [
        {"label": "single-node gpu01", "result": "pass", "collective": "all_reduce"},
        {"label": "single-node all_gather gpu01", "result": "pass", "collective": "all_gather"},
        {"label": "all-nodes all_gather h100", "result": "pass", "collective": "all_gather"},
        {"label": "single-node alltoall gpu01", "result": "pass", "collective": "alltoall"},
        {"label": "all-nodes alltoall h100", "result": "fail", "collective": "alltoall"},
    ]
    (run / "acceptance.json").write_text(json.dumps({"verdict": "fail", "runs": runs}))
    assert acceptance_line(str(tmp_path)).endswith(
        "(scripts/gpufleet report); all_gather: PASS (2 run(s)); alltoall: FAIL (all-nodes alltoall h100)"
    )
    # Without them the line is as before.
    (run / "acceptance.json").write_text(json.dumps({"verdict": "pass", "runs": runs[:1]}))
    assert acceptance_line(str(tmp_path)).endswith("(scripts/gpufleet report)")


def test_only_this_clusters_gate_and_acceptance(tmp_path, monkeypatch):
    """Another inventory's run writing its reports meanwhile is not shown as this run's."""
    import json

    from gpufleet_cli.cmd_provision import acceptance_line, brief_cluster_name

    for cluster in ("lab", "stack-test"):
        gate = tmp_path / "reports" / cluster / "20261130T000000Z" / "gate"
        gate.mkdir(parents=True)
        (gate.parent / "acceptance.json").write_text(json.dumps({"verdict": "pass" if cluster == "lab" else "fail"}))
    reports = str(tmp_path / "reports")
    assert latest_gate_dir(reports, cluster="lab").endswith("/lab/20261130T000000Z/gate")
    assert latest_gate_dir(reports, cluster="stack-test").endswith("/stack-test/20261130T000000Z/gate")
    assert "NCCL acceptance: PASS" in acceptance_line(reports, cluster="lab")
    assert "NCCL acceptance: FAIL" in acceptance_line(reports, cluster="stack-test")
    monkeypatch.delenv("GPUFLEET_BRIEF", raising=False)
    inv = tmp_path / "inv"
    inv.mkdir()
    (inv / "brief.yml").write_text("cluster:\n  name: lab\n")
    assert brief_cluster_name(str(inv)) == "lab"
    assert brief_cluster_name(str(inv), brief=str(tmp_path / "missing.yml")) is None
