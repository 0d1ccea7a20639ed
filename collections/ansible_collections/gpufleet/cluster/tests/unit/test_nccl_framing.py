"""nccl_tests / nccl_debug: every launcher's framing parses to the same result; every failure kind is found.

The framings are applied to one log (our own fixtures: an nccl-tests run and NCCL_DEBUG=INFO lines)
the way each launcher or log collector prints it; the parse of the framed log must equal the parse
of the log as nccl-tests printed it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_debug as nd
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_tests as nt

FIXTURES = Path(__file__).parent / "fixtures" / "nccl"
BASE = (FIXTURES / "allreduce_2node_h100_ib_healthy_mpi_warnings.txt").read_text() + (
    FIXTURES / "debug_2node_h100_ib_gdrdma.txt"
).read_text()


def _rank_of(i: int) -> int:
    return i % 16


def _no_hash(line: str) -> str:
    return re.sub(r"^#\s?", "", line)


def _ansi(line: str) -> str:
    if line.startswith("#"):
        return f"\x1b[32m{line}\x1b[0m"
    return line.replace("NCCL INFO", "\x1b[1;34mNCCL INFO\x1b[0m")


FRAMINGS = {
    "open_mpi_tag_output": lambda i, line: f"[1,{_rank_of(i)}]<stdout>:{line}",
    "mpich_intel_prepend_rank": lambda i, line: f"[{_rank_of(i)}] {line}",
    "srun_label": lambda i, line: f"{_rank_of(i):>2}: {line}",
    "kubernetes_cri_log": lambda i, line: f"2025-03-14T10:22:{i % 60:02d}.123456789Z stdout F {line}",
    "kubectl_timestamps": lambda i, line: f"2025-03-14T10:22:{i % 60:02d}.123456789+00:00 {line}",
    "kubectl_prefix": lambda i, line: f"[pod/nccl-acceptance-launcher-x7k2p/mpi-launcher] {line}",
    "kubernetes_and_open_mpi": lambda i, line: f"2025-03-14T10:22:31Z stderr F [1,{_rank_of(i)}]<stdout>:{line}",
    "ray_skypilot": lambda i, line: f"(worker{i % 2}, rank={i % 2}, pid={2769 + i % 2}, ip=10.100.10.12) {line}",
    "indented_open_mpi": lambda i, line: f"   [1,{_rank_of(i)}]<stdout>:{line}",
    "tabs": lambda i, line: re.sub(r" {2,}|(?<=\S) (?=\S)", "\t", line),
    "crlf": lambda i, line: line + "\r",
    "ansi_colour": lambda i, line: _ansi(line),
    "no_hash_in_header_and_footer": lambda i, line: _no_hash(line),
}


def _frame(text: str, how) -> str:
    return "\n".join(how(i, line) for i, line in enumerate(text.splitlines())) + "\n"


def _without_file(items):
    return [{k: v for k, v in item.items() if k != "file"} for item in items]


@pytest.mark.parametrize("name", sorted(FRAMINGS))
def test_every_framing_parses_like_the_plain_log(name):
    plain_runs, plain_warnings = nt.parse(BASE, "plain")
    framed = _frame(BASE, FRAMINGS[name])
    runs, warnings = nt.parse(framed, "framed")
    # The table of the first fixture and the short one printed among the NCCL_DEBUG lines.
    assert len(plain_runs) == 2
    assert _without_file(runs) == _without_file(plain_runs)
    assert [w.replace("framed", "plain") for w in warnings] == plain_warnings
    plain_debug = nd.parse_debug(BASE, "x")
    debug = nd.parse_debug(framed, "x")
    assert debug == plain_debug
    assert debug["network"] == "IB" and debug["gdr"] is True


@pytest.mark.parametrize(
    "line,expected",
    [
        ("[3] # Using devices", "# Using devices"),
        ("[12] gpu01:2:3 [0] NCCL INFO Using network IB", "gpu01:2:3 [0] NCCL INFO Using network IB"),
        ("2024-05-01T08:00:00.000000001Z stdout F 0: # x", "# x"),
        ("2024-05-01T08:00:00Z stdout P partial", "partial"),
        ("[pod/launcher-1/mpi] [1,3]<stdout>:row", "row"),
        ("\x1b[0;31mTest failure\x1b[0m common.cu:1", "Test failure common.cu:1"),
        ("#\tRank\t0", "# Rank 0"),
        ("x\r", "x"),
    ],
)
def test_strip_prefix_framings(line, expected):
    assert nt.strip_prefix(line) == expected


def test_device_lines_without_group_give_ranks_hosts_and_gpus():
    runs, _ = nt.parse((FIXTURES / "allreduce_2node_a100_srun_label_killed_mid_table.txt").read_text())
    run = runs[0]
    assert run["ranks"] == 16
    assert run["hosts"] == ["gpu-c006", "gpu-c007"]
    assert run["gpu_names"] == ["A100-SXM4-40GB"]
    assert run["rank_hosts"][9] == "gpu-c007"
    assert run["nccl_version"] == "2.12.12"


def test_old_and_new_device_lines_read_alike():
    old = "#   Rank  3 Pid     25 on   node-a device  3 [0x10] A100-SXM4-40GB"
    new = "#  Rank  3 Group  0 Pid     25 on   node-a device  3 [0000:10:00] A100-SXM4-40GB"
    table = "        1024           256     float     sum      -1    12.10    0.08    0.13      0    12.20    0.08    0.13      0"  # noqa: E501 - a line as the tool prints it
    for device in (old, new):
        runs, _ = nt.parse(f"# nThread 1 nGpus 1 minBytes 1024 maxBytes 1024\n# Using devices\n{device}\n{table}\n")
        assert (runs[0]["ranks"], runs[0]["hosts"], runs[0]["gpu_names"]) == (4, ["node-a"], ["A100-SXM4-40GB"])


def test_footer_without_hash_is_read():
    text = (
        "nThread 1 nGpus 8 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "           8             2     float     sum      -1    30.77    0.00    0.00      2    31.22    0.00    0.00      0\n"  # noqa: E501 - a line as the tool prints it
        "          16             4     float     sum      -1    31.16    0.00    0.00      0    30.85    0.00    0.00      0\n"  # noqa: E501 - a line as the tool prints it
        "Out of bounds values : 2 FAILED\n"
        "Avg bus bandwidth    : 128.9\n"
    )
    runs, _ = nt.parse(text)
    assert runs[0]["out_of_bounds"] == 2
    assert runs[0]["avg_busbw"] == pytest.approx(128.9)
    assert runs[0]["completed"] is True


# --- how a run ended -------------------------------------------------------------------------

# A failure line as each tool prints it, the text the parser must quote, the node it names
# (rank 9 is on gpu-b002 in RANK_HOSTS).
RANK_HOSTS = ["gpu-b001"] * 8 + ["gpu-b002"] * 8
FAILURES = [
    (
        "gpu-b002: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '",
        ["gpu-b002"],
    ),
    (" .. gpu-b002 pid 51209: Test failure common.cu:915", ["gpu-b002"]),
    (
        "     2097152         32768     float    none      -1 gpu-b002: Test CUDA failure common.cu:389 "
        "'an illegal memory access was encountered'",
        ["gpu-b002"],
    ),
    ("gpu-c004: Test CUDA failure common.cu:1002 'system not yet initialized'", ["gpu-c004"]),
    ("MPI_ABORT was invoked on rank 9 in communicator MPI_COMM_WORLD", ["gpu-b002"]),
    ("mpirun noticed that process rank 9 with PID 0 on node gpu-b002 exited on signal 6 (Aborted).", ["gpu-b002"]),
    ("mpirun detected that one or more processes exited with non-zero status, thus causing", []),
    ("srun: error: gpu-c007: task 9: Exited with exit code 3", ["gpu-c007"]),
    ("srun: error: gpu-c007: task 9: Killed", ["gpu-c007"]),
    (
        "slurmstepd: error: *** STEP 4242.0 ON gpu-c006 CANCELLED AT 2025-03-14T10:22:31 DUE TO TIME LIMIT ***",
        ["gpu-c006"],
    ),
    ("===   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES", []),
    ("Abort(1) on node 9 (rank 9 in comm 0): Fatal error in PMPI_Init_thread: Other MPI error", ["gpu-b002"]),
    ("/bin/bash: line 1: 4711 Segmentation fault      (core dumped) all_reduce_perf -b 8 -e 8G", []),
]


@pytest.mark.parametrize("line,hosts", FAILURES, ids=[f[0][:40] for f in FAILURES])
def test_each_failure_kind_is_found_with_its_node(line, hosts):
    text = f"# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n[1,9]<stderr>:{line}\r\n"
    found = nt.find_failures(text, RANK_HOSTS)
    assert [f["text"] for f in found] == [line.strip()]
    assert found[0]["line"] == 2
    assert found[0]["hosts"] == hosts


@pytest.mark.parametrize(
    "line",
    [
        "gpu01:1:2 [0] NCCL WARN NET/IB : Got async event : port error",
        "# Out of bounds values : 0 OK",
        "srun: error: gpu01: task 0: Exited with exit code 0",
        "WARNING: There was an error initializing an OpenFabrics device.",
        "           8             2     float     sum      -1    30.77    0.00    0.00      0    31.22    0.00    0.00      0",  # noqa: E501 - a line as the tool prints it
    ],
)
def test_lines_that_are_not_failures(line):
    assert nt.find_failures(line) == []


def test_failure_after_the_table_is_kept_with_the_run():
    runs, _ = nt.parse((FIXTURES / "allreduce_2node_h100_teardown_nccl_failure.txt").read_text())
    (run,) = runs
    assert max(r["size"] for r in run["rows"]) == 16 << 30
    assert run["completed"] is False
    assert run["truncated"] is False
    texts = [f["text"] for f in run["failures"]]
    assert texts[0].startswith("gpu-b002: Test NCCL failure common.cu:1204")
    assert any(t.startswith(".. gpu-b002 pid 51209: Test failure") for t in texts)
    assert {h for f in run["failures"] for h in f["hosts"]} == {"gpu-b002"}


def test_table_cut_short_is_truncated_and_the_killed_task_named():
    runs, _ = nt.parse((FIXTURES / "allreduce_2node_a100_srun_label_killed_mid_table.txt").read_text())
    (run,) = runs
    assert run["max_bytes"] == 8 << 30
    assert max(r["size"] for r in run["rows"]) == 64 << 20
    assert run["truncated"] is True
    assert run["completed"] is False
    by_text = {f["text"]: f["hosts"] for f in run["failures"]}
    assert by_text["srun: error: gpu-c007: task 9: Killed"] == ["gpu-c007"]
    assert any("CANCELLED" in t for t in by_text)


@pytest.mark.parametrize(
    "params,largest,truncated",
    [
        ("minBytes 8 maxBytes 1024 step: 2(factor)", 1024, False),
        ("minBytes 8 maxBytes 1024 step: 2(factor)", 512, True),
        # -b 1000 -f 2: 1024000 is the last size under 1 MiB; the table ends where it should.
        ("minBytes 1000 maxBytes 1048576 step: 2(factor)", 1024000, False),
        ("minBytes 1000 maxBytes 1048576 step: 2(factor)", 512000, True),
        ("minBytes 8 maxBytes 4096 step: 1024(bytes)", 3080, False),
        ("minBytes 8 maxBytes 4096 step: 1024(bytes)", 2056, True),
    ],
)
def test_truncated_follows_the_step(params, largest, truncated):
    row = f"{largest:>12d}  {largest // 4:>12d}     float     sum      -1    30.77    0.00    0.00      0    31.22    0.00    0.00      0"  # noqa: E501 - a line as the tool prints it
    runs, _ = nt.parse(f"# nThread 1 nGpus 1 {params}\n{row}\n")
    assert runs[0]["truncated"] is truncated


# --- NCCL_DEBUG hosts --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line,host",
    [
        ("gpu-a017:41210:41262 [0] NCCL INFO Using network IB", "gpu-a017"),
        (":22901:22901 [0] NCCL INFO Using network IB", "unknown"),
        ("NAME :70918:70928 [0] NCCL INFO Using network IB", "unknown"),
        ("[0] gpu-a017:41210:41262 [0] NCCL INFO Using network IB", "gpu-a017"),
        ("2025-03-14 10:22:31,402 rank0 gpu-a017:41210:41262 [0] NCCL INFO Using network IB", "gpu-a017"),
        ("NCCL INFO Using network IB", "unknown"),
    ],
)
def test_debug_lines_found_wherever_they_are(line, host):
    debug = nd.parse_debug(line + "\n")
    assert debug is not None
    assert debug["network"] == "IB"
    assert debug["hosts"] == [host]


def test_old_error_column_is_no_count_of_wrong_values():
    text = (
        "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "    33554432       8388608     float     sum    19902    1.69    2.53  2e-07    19898    1.69    2.53  2e-07\n"
    )
    (run,) = nt.parse(text)[0]
    assert (run["rows"][0]["oop_wrong"], run["rows"][0]["ip_wrong"]) == (None, None)
    assert run["rows"][0]["oop_busbw"] == 2.53


def test_reduced_max_bytes_and_a_footer_end_the_table_where_it_should():
    head = "# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20\n"
    row = "  2147483648     536870912     float     sum      -1  1258554    1.71    2.56      0  1258876    1.71    2.56      0\n"  # noqa: E501 - a line as the tool prints it
    # nccl-tests lowered maxBytes to what the GPU memory holds: the table is whole.
    reduced = head + "Reducing maxBytes to 2147483648 due to memory limitation\n" + row
    assert nt.parse(reduced)[0][0]["truncated"] is False
    # Without a footer, the table stops at 2 GiB of 8 GiB: cut short.
    assert nt.parse(head + row)[0][0]["truncated"] is True
    # With its footer the run ended on its own, wherever the table stops.
    footer = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 2.54225\n"
    assert nt.parse(head + row + footer)[0][0]["truncated"] is False


def test_a_footer_alone_is_read():
    runs, _ = nt.parse("Out of bounds values : 0 OK\nAvg bus bandwidth    : 362.198\n", keep_empty=True)
    assert runs[0]["avg_busbw"] == pytest.approx(362.198) and runs[0]["rows"] == []
    assert nt.parse("Avg bus bandwidth    : 362.198\n")[0] == []


def test_a_run_that_never_started_keeps_the_binary_the_launcher_named():
    text = "$ mpirun -np 2 ./build/alltoall_perf -b 8 -e 1G\nssh: connect to host gpu02 port 22: Connection refused\n"
    runs, _ = nt.parse(text, keep_empty=True)
    assert [r["collective"] for r in runs] == ["alltoall"]
    assert nt.parse(text)[0] == []


def test_warn_lines_keep_their_host_and_give_nranks():
    text = (
        "gpu-a017:5109:5177 [0] misc/socket.cc:502 NCCL WARN socketFinalizeAccept: wrong type 4 != 3\n"
        "[1,10]<stdout>:gpu-a018:27:65 [2] NCCL INFO comm 0x7f8cf8000dc0 rank 10 nranks 16 cudaDev 2 busId 201c0 "
        "- Init COMPLETE\n"
    )
    debug = nd.parse_debug(text)
    assert debug["hosts"] == ["gpu-a017", "gpu-a018"]
    assert debug["warnings"] == ["socketFinalizeAccept: wrong type 4 != 3"]
    assert debug["nranks"] == 16


def test_weak_failure_lines_only_with_weak():
    line = "gpu-a017:5911:5971 [0] transport/net_ib.cc:154 NCCL WARN NET/IB : mlx5_3:1 async fatal event on QP"
    assert nt.find_failures(line) == []
    assert [f["text"] for f in nt.find_failures(line, weak=True)] == [line]
    assert nt.find_failures("ib_device.c:1380 UCX  ERROR   ibv_create_ah(dlid=49152 sl=0)", weak=True)
