"""``gpufleet nccl parse``: the operator/CI interface to the nccl-tests parser."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gpufleet_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "collections/ansible_collections/gpufleet/cluster/tests/unit/fixtures/nccl"
RUN_KEYS = {
    "file",
    "collective",
    "ranks",
    "hosts",
    "gpu_names",
    "nccl_version",
    "rows",
    "peak_busbw",
    "avg_busbw",
    "out_of_bounds",
    "rank_hosts",
    "max_bytes",
    "completed",
    "truncated",
    "failures",
}


def parse_json(capsys, *files: str, code: int = 0) -> dict:
    assert main(["nccl", "parse", *files, "--format", "json"]) == code
    return json.loads(capsys.readouterr().out)


def test_json_schema(capsys):
    out = parse_json(capsys, str(FIXTURES / "allreduce_2node_h100_ib_healthy_mpi_warnings.txt"))
    assert set(out) == {"runs", "debug", "warnings", "ended"}
    assert [e["status"] for e in out["ended"]] == ["completed"]
    (run,) = out["runs"]
    assert set(run) == RUN_KEYS
    assert run["hosts"] == ["gpu-a017", "gpu-a018"] and run["ranks"] == 16
    assert out["debug"] == [] and out["warnings"] == []


def test_several_files_runs_and_debug(capsys):
    files = [
        FIXTURES / n
        for n in (
            "allreduce_multi_runs_single_node.txt",
            "debug_2node_socket_fallback.txt",
            "allreduce_2node_h100_ib.json",
            "debug_2node_h100_ib_gdrdma.txt",
        )
    ]
    out = parse_json(capsys, *map(str, files))
    assert [Path(r["file"]).name for r in out["runs"]] == [
        "allreduce_multi_runs_single_node.txt",
        "allreduce_multi_runs_single_node.txt",
        "allreduce_multi_runs_single_node.txt",
        "debug_2node_socket_fallback.txt",
        "allreduce_2node_h100_ib.json",
        "debug_2node_h100_ib_gdrdma.txt",
    ]
    debug = {Path(d["file"]).name: d for d in out["debug"]}
    assert set(debug) == {"debug_2node_socket_fallback.txt", "debug_2node_h100_ib_gdrdma.txt"}
    for d in debug.values():
        assert {"file", "nccl_version", "network", "gdr", "socket_fallback"} <= set(d)
    assert debug["debug_2node_socket_fallback.txt"]["socket_fallback"] is True
    assert debug["debug_2node_socket_fallback.txt"]["gdr"] is False
    assert debug["debug_2node_h100_ib_gdrdma.txt"]["network"] == "IB"
    assert debug["debug_2node_h100_ib_gdrdma.txt"]["gdr"] is True
    assert "fixtureSecretValue0000" not in json.dumps(out)


def test_file_with_no_run_is_reported(capsys, tmp_path):
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 8)
    failed = FIXTURES / "allreduce_failure_fabric_manager.txt"
    # The second file prints 'Test CUDA failure': a failed run, exit 1; garbage alone is no failure.
    out = parse_json(capsys, str(garbage), str(failed), code=1)
    assert out["runs"] == []
    assert len(out["warnings"]) == 2
    assert "no nccl-tests run found" in out["warnings"][0]
    assert "system not yet initialized" in out["warnings"][1]
    assert [e["status"] for e in out["ended"]] == ["no table", "failed"]
    assert out["ended"][1]["hosts"] == ["gpu-c004"]
    assert parse_json(capsys, str(garbage))["ended"][0]["status"] == "no table"


@pytest.mark.parametrize(
    "name,rows,status",
    [
        # A full table to 16 GiB, then nccl-tests' "Test NCCL failure" at teardown.
        ("allreduce_2node_h100_teardown_nccl_failure.txt", 5, "failed"),
        # srun --label, killed at 64 MiB of 8 GiB.
        ("allreduce_2node_a100_srun_label_killed_mid_table.txt", 4, "failed"),
    ],
)
def test_failed_run_is_reported_and_exits_1(capsys, name, rows, status):
    out = parse_json(capsys, str(FIXTURES / name), code=1)
    assert len(out["runs"][0]["rows"]) == rows
    (ended,) = out["ended"]
    assert ended["status"] == status
    assert ended["failure"] and ended["failure"] in ended["detail"]
    assert main(["nccl", "parse", str(FIXTURES / name), "--format", "text"]) == 1
    text = capsys.readouterr().out
    assert f"FAILED: {FIXTURES / name}: run {status}: " in text


def test_max_bytes_makes_a_short_table_incomplete(capsys):
    name = str(FIXTURES / "allreduce_2node_h100_ib_healthy_mpi_warnings.txt")
    assert parse_json(capsys, name)["ended"][0]["status"] == "completed"
    assert main(["nccl", "parse", name, "--max-bytes", "16G"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ended"][0]["status"] == "incomplete"
    assert "expected results up to 16 GiB" in out["ended"][0]["detail"]
    assert main(["nccl", "parse", name, "--max-bytes", "8G"]) == 0
    capsys.readouterr()
    assert main(["nccl", "parse", name, "--max-bytes", "lots"]) == 2


@pytest.mark.parametrize("kind", ["missing", "directory", "unreadable"])
def test_unreadable_input_exits_2(capsys, tmp_path, kind):
    if kind == "missing":
        path = tmp_path / "nope.txt"
    elif kind == "directory":
        path = tmp_path
    else:
        path = tmp_path / "secret.txt"
        path.write_text("x")
        path.chmod(0)
        try:
            path.open().close()
            pytest.skip("running as root: permissions are not enforced")
        except PermissionError:
            pass
    assert main(["nccl", "parse", str(FIXTURES / "allreduce_2node_h100_ib_lowbw.txt"), str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing half-printed: every file is read before output
    errors = [line for line in captured.err.splitlines() if line.startswith("gpufleet: error: ")]
    assert errors and str(path) in errors[0]


def test_text_format(capsys):
    files = [FIXTURES / "allreduce_2node_h100_ib_lowbw.txt", FIXTURES / "debug_2node_socket_fallback.txt"]
    assert main(["nccl", "parse", *map(str, files), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "all_reduce, 16 ranks on h100-r2n07, h100-r2n08 (NVIDIA H100 80GB HBM3), NCCL 2.25.1" in text
    assert "busbw at 8 GiB: 46.29 GB/s; peak 46.60; avg over all sizes 20.53" in text
    assert "network Socket" in text and "SOCKET FALL-BACK" in text


def test_text_format_na_and_no_run(capsys, tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert (
        main(
            ["nccl", "parse", str(FIXTURES / "allreduce_1node_a100_no_validation.txt"), str(empty), "--format", "text"]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "N/A/N/A" in text and "warning:" in text and "empty.log: no nccl-tests run found" in text


def test_stdin(capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO((FIXTURES / "allreduce_2node_h100_ib_lowbw.txt").read_text()))
    out = parse_json(capsys, "-")
    assert out["runs"][0]["file"] == "<stdin>"


def test_bad_format_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["nccl", "parse", "x", "--format", "yaml"])
    assert exc.value.code == 2


def test_entry_script_end_to_end():
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts/gpufleet"),
            "nccl",
            "parse",
            str(FIXTURES / "allreduce_2node_h200_roce_single_size_v2.17.txt"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["runs"][0]["rows"][0]["size"] == 8 << 30
