"""A run that failed never passes: exit status, failure lines and a table cut short, through the gate,
the bisect and the drain (module_utils/acceptance/run.py, nccl.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl as acc
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import run as arun

FIXTURES = Path(__file__).parent / "fixtures" / "nccl"
HEALTHY = (FIXTURES / "allreduce_2node_h100_ib_healthy_mpi_warnings.txt").read_text()
TEARDOWN = (FIXTURES / "allreduce_2node_h100_teardown_nccl_failure.txt").read_text()
KILLED = (FIXTURES / "allreduce_2node_a100_srun_label_killed_mid_table.txt").read_text()
# A gate every table above passes on busbw alone: fabric none (no transport evidence needed).
SPEC = {
    "pool": "h100",
    "gpus_per_node": 8,
    "single_node_busbw_gbps": 30.0,
    "multi_node_busbw_gbps": 30.0,
    "required_max_bytes": "64M",
    "max_wrong": 0,
    "fabric": "none",
    "gpudirect_rdma": False,
}


def _cut(text: str, last_size: int) -> str:
    """The log up to the row of ``last_size``: a table whose run ended there, with no word why."""
    out = []
    for line in text.splitlines():
        out.append(line)
        if line.split()[:1] == [str(last_size)]:
            break
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    "text,rc,status",
    [
        (HEALTHY, 0, "completed"),
        (HEALTHY, None, "completed"),
        (HEALTHY, 1, "failed"),
        (HEALTHY, 124, "timed out"),
        (HEALTHY, 137, "killed"),
        (HEALTHY, -9, "killed"),
        (TEARDOWN, 0, "failed"),
        (TEARDOWN, None, "failed"),
        (KILLED, None, "failed"),
        (_cut(HEALTHY, 524288), None, "incomplete"),
        (_cut(HEALTHY, 524288), 124, "timed out"),
        ("srun: error: Unable to allocate resources: Invalid partition name specified\n", 1, "failed"),
        ("", None, "no table"),
    ],
)
def test_run_end_status(text, rc, status):
    ended = arun.parse_log(text, "x", rc)["ended"]
    assert ended["status"] == status
    assert ended["rc"] == rc


def test_run_end_names_the_signal_and_quotes_the_failure():
    ended = arun.parse_log(TEARDOWN, "x", 137)["ended"]
    assert ended["signal"] == 9
    assert "SIGKILL" in ended["detail"]
    assert ended["failure"].startswith("gpu-b002: Test NCCL failure common.cu:1204")
    assert ended["hosts"] == ["gpu-b002"]


@pytest.mark.parametrize("rc", [0, 2, None])
def test_failure_after_the_table_fails_whatever_the_busbw(rc):
    parsed = arun.parse_log(TEARDOWN, "all-nodes h100", rc)
    assert parsed["busbw"] > SPEC["multi_node_busbw_gbps"]  # the table alone would pass
    out = arun.evaluate_log(
        parsed, SPEC, "multi-node", label="all-nodes h100", nodes=["gpu-b001", "gpu-b002"], rc=rc, output=TEARDOWN
    )
    failed = [v for v in out if v["code"] == acc.NCCL_RUN_FAILED]
    assert len(failed) == 1
    v = failed[0]
    assert v["severity"] == "error"
    assert "on gpu-b002" in v["message"]
    assert "Test NCCL failure common.cu:1204" in v["message"]
    assert acc.verdict(out) == acc.FAIL


def test_the_same_table_without_the_failure_passes():
    parsed = arun.parse_log(HEALTHY, "all-nodes h100", 0)
    out = arun.evaluate_log(parsed, SPEC, "multi-node", nodes=["gpu-a017", "gpu-a018"], rc=0, output=HEALTHY)
    assert acc.verdict(out) == acc.PASS


@pytest.mark.parametrize("rc,said", [(3, "exit 3"), (124, "timed out (exit 124)"), (-11, "signal 11 (SIGSEGV")])
def test_exit_status_alone_fails_a_complete_table(rc, said):
    parsed = arun.parse_log(HEALTHY, "single-node gpu-a017", rc)
    out = arun.evaluate_log(parsed, SPEC, "single-node", host="gpu-a017", label="single-node gpu-a017", rc=rc)
    (v,) = [v for v in out if v["code"] == acc.NCCL_RUN_FAILED]
    assert v["host"] == "gpu-a017"
    assert said in v["message"]


def test_table_cut_short_is_incomplete():
    text = _cut(HEALTHY, 524288)
    parsed = arun.parse_log(text, "bisect a+b")
    out = arun.evaluate_log(parsed, SPEC, "bisect", label="bisect a+b", output=text)
    (v,) = [v for v in out if v["code"] == acc.NCCL_RUN_INCOMPLETE]
    assert v["severity"] == "error"
    assert "512 KiB of 8 GiB" in v["message"]


def test_killed_mid_table_names_the_task_node_and_the_cut():
    parsed = arun.parse_log(KILLED, "all-nodes a100")
    out = arun.evaluate_log(parsed, SPEC, "multi-node", label="all-nodes a100", nodes=["gpu-c006", "gpu-c007"])
    (v,) = [v for v in out if v["code"] == acc.NCCL_RUN_FAILED]
    assert "gpu-c007" in v["message"]
    assert "64 MiB of 8 GiB" in v["message"]


def test_no_table_quotes_the_failure_line_first():
    text = "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592\n# Using devices\n"
    text += "gpu-c004: Test CUDA failure common.cu:1002 'system not yet initialized'\n"
    text += "srun: error: gpu-c004: task 0: Exited with exit code 2\n"
    parsed = arun.parse_log(text, "single-node gpu-c004", 2)
    out = arun.evaluate_log(parsed, SPEC, "single-node", host="gpu-c004", rc=2, output=text)
    (v,) = [v for v in out if v["code"] == acc.NCCL_NO_RUN]
    assert "failure: gpu-c004: Test CUDA failure common.cu:1002" in v["message"]
    assert "exit 2" in v["message"]


# --- bisect and drain ------------------------------------------------------------------------


def test_run_records_mark_a_failed_group():
    records = arun.run_records(
        [{"rc": 0, "stdout": TEARDOWN, "stderr": ""}, {"rc": 0, "stdout": HEALTHY, "stderr": ""}],
        SPEC,
        "bisect",
        groups=[["gpu-b001", "gpu-b002"], ["gpu-a017", "gpu-a018"]],
        labels=["bisect gpu-b001+gpu-b002", "bisect gpu-a017+gpu-a018"],
    )
    assert [r["failed"] for r in records] == [True, False]
    assert records[0]["ended"]["status"] == "failed"
    assert records[0]["busbw"] > SPEC["multi_node_busbw_gbps"]


def test_bisect_counts_a_failed_group_as_failed_whatever_its_busbw():
    nodes = ["n1", "n2", "n3", "n4"]
    floor = 100.0
    # n2 crashes every run it is in, after a table at full speed.
    results = [{"nodes": nodes, "busbw": 150.0, "failed": True}]

    def run(group):
        return {"nodes": group, "busbw": 150.0, "failed": "n2" in group}

    for _ in range(6):
        plan = acc.plan_bisect(nodes, floor, results)
        if plan["done"]:
            break
        results += [run(g) for g in plan["next"]]
    assert plan["done"]
    assert plan["slow_nodes"] == ["n2"]
    # Without the flag the same figures pass: the flag is what names n2.
    assert acc.plan_bisect(nodes, floor, [dict(r, failed=False) for r in results])["slow_nodes"] == []
    text = " ".join(v["message"] for v in acc.bisect_violations(dict(plan, tests=results), floor))
    assert "(run failed)" in text


def test_drain_reason_of_a_single_node_run_that_failed():
    parsed = arun.parse_log(TEARDOWN, "single-node gpu-b002", 0)
    record = {
        "host": "gpu-b002",
        "busbw": parsed["busbw"],
        "floor_gbps": 30.0,
        "ended": parsed["ended"],
        "violations": arun.evaluate_log(parsed, SPEC, "single-node", host="gpu-b002", rc=0, output=TEARDOWN),
    }
    (entry,) = arun.drain_list([], [record])
    assert entry["host"] == "gpu-b002"
    assert "single-node run failed: gpu-b002: Test NCCL failure" in entry["reason"]


def test_no_table_and_only_an_nccl_warn_fails_and_quotes_it():
    text = (
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592\n# Using devices\n"
        "#  Rank  0 Group  0 Pid 11 on gpu01 device  0 [0x10] NVIDIA H100 80GB HBM3\n"
        "gpu01:11:12 [0] transport/net_ib.cc:154 NCCL WARN NET/IB : mlx5_3:1 async fatal event on QP\n"
    )
    parsed = arun.parse_log(text, "x")
    assert parsed["runs"] == []
    assert parsed["no_table"][0]["hosts"] == ["gpu01"]
    assert parsed["ended"]["status"] == "failed"
    assert "async fatal event on QP" in parsed["ended"]["failure"]
    # A table beside the same WARN is read as it is: the WARN alone does not fail a run.
    table = "        1024           256     float     sum      -1    12.10    0.08    0.13      0    12.20    0.08    0.13      0"  # noqa: E501 - a line as the tool prints it
    assert arun.parse_log(text.replace("maxBytes 8589934592", "maxBytes 1024") + table + "\n")["ended"]["status"] == (
        "completed"
    )


@pytest.mark.parametrize(("asked", "severity"), [("8G", "warning"), ("16G", "error"), ("32G", "error")])
def test_table_below_the_brief_size_fails_unless_a_smaller_size_was_asked(asked, severity):
    # The healthy table reaches 8 GiB; the brief here wants 16 GiB; the run asked for `asked`
    # (its parameter line), and nccl-tests lowered it to 8 GiB for memory where it was more.
    size = acc.parse_size(asked)
    text = HEALTHY.replace("maxBytes 8589934592", f"maxBytes {size}")
    if size > 8 << 30:
        text = text.replace(
            "NCCL version 2.26.2", "Reducing maxBytes to 8589934592 due to memory limitation\nNCCL version 2.26.2"
        )
    spec = dict(SPEC, required_max_bytes="16G", max_bytes="16G")
    parsed = arun.parse_log(text, "s", 0)
    assert parsed["ended"]["status"] == "completed"
    out = arun.evaluate_log(parsed, dict(spec, gpus_per_node=16), "single-node", host="gpu-a017", rc=0)
    (v,) = [v for v in out if v["code"] == acc.NCCL_SIZE_TOO_SMALL]
    assert v["severity"] == severity
