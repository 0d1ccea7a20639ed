"""nccl_tests: the parser on fixtures in every nccl-tests format (our own, modelled on real logs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_tests as nt

FIXTURES = Path(__file__).parent / "fixtures" / "nccl"
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
ROW_KEYS = {"size", "type", "oop_busbw", "ip_busbw", "oop_wrong", "ip_wrong", "oop_time_us", "ip_time_us"}


def load(name: str) -> tuple[list[dict], list[str]]:
    return nt.parse((FIXTURES / name).read_text(), name)


# fixture, runs, collective, ranks, hosts, gpu, nccl, rows, largest size, busbw at largest, avg, out_of_bounds
CASES = [
    (
        "allreduce_2node_h100_ib_healthy_mpi_warnings.txt",
        1,
        "all_reduce",
        16,
        ["gpu-a017", "gpu-a018"],
        ["NVIDIA H100 80GB HBM3"],
        "2.26.2",
        31,
        8 << 30,
        374.18,
        131.258,
        0,
    ),
    (
        "allreduce_2node_h100_ib_lowbw.txt",
        1,
        "all_reduce",
        16,
        ["h100-r2n07", "h100-r2n08"],
        ["NVIDIA H100 80GB HBM3"],
        "2.25.1",
        31,
        8 << 30,
        46.29,
        20.5337,
        0,
    ),
    (
        "allreduce_2node_h200_roce_single_size_v2.17.txt",
        1,
        "all_reduce",
        16,
        ["roce-h200-014", "roce-h200-022"],
        ["NVIDIA H200"],
        "2.27.5",
        1,
        8 << 30,
        443.54,
        442.185,
        0,
    ),
    (
        "allreduce_2node_gh200_srun_label_container.txt",
        1,
        "all_reduce",
        8,
        ["gh-n0411", "gh-n0412"],
        ["NVIDIA GH200 120GB"],
        "2.26.2",
        5,
        1 << 30,
        181.41,
        175.706,
        0,
    ),
    (
        "allreduce_2node_a100_mpirun_tag_output.txt",
        1,
        "all_reduce",
        16,
        ["a100-07", "a100-08"],
        ["NVIDIA A100-SXM4-80GB"],
        "2.21.5",
        5,
        2 << 30,
        None,
        None,
        0,
    ),
    (
        "allreduce_1node_a100_no_validation.txt",
        1,
        "all_reduce",
        4,
        ["dev-box-3"],
        ["NVIDIA A100-SXM4-80GB"],
        None,
        21,
        1 << 30,
        None,
        105.199,
        0,
    ),
    (
        "allreduce_1node_h100_wrong_values.txt",
        1,
        None,
        8,
        ["gpu-b009"],
        ["NVIDIA H100 80GB HBM3"],
        None,
        8,
        4 << 30,
        None,
        None,
        2,
    ),
    (
        "allreduce_2node_h100_ib.json",
        1,
        "all_reduce",
        16,
        ["gpu-d101", "gpu-d102"],
        ["NVIDIA H100 80GB HBM3"],
        "2.26.3",
        13,
        4 << 30,
        None,
        None,
        0,
    ),
]


@pytest.mark.parametrize(
    "name,nruns,collective,ranks,hosts,gpus,nccl,nrows,largest,busbw,avg,oob", CASES, ids=[c[0] for c in CASES]
)
def test_fixture(name, nruns, collective, ranks, hosts, gpus, nccl, nrows, largest, busbw, avg, oob):
    runs, warnings = load(name)
    assert warnings == []
    assert len(runs) == nruns
    run = runs[0]
    assert set(run) == RUN_KEYS
    assert run["file"] == name
    assert run["collective"] == collective
    assert run["ranks"] == ranks
    assert run["hosts"] == hosts
    assert run["gpu_names"] == gpus
    assert run["nccl_version"] == nccl
    assert len(run["rows"]) == nrows
    assert all(set(r) == ROW_KEYS for r in run["rows"])
    assert max(r["size"] for r in run["rows"]) == largest
    if busbw is not None:
        assert nt.busbw_at_largest(run) == pytest.approx(busbw)
    if avg is not None:
        assert run["avg_busbw"] == pytest.approx(avg)
    assert run["out_of_bounds"] == oob
    # Every fixture here is a run that printed its footer; the only failure line any prints is
    # nccl-tests' own count of wrong values.
    assert run["completed"] is True
    assert [f["text"] for f in run["failures"]] == ([f"# Out of bounds values : {oob} FAILED"] if oob else [])
    assert run["truncated"] is False
    # Peak is the max over all rows and both placements, never the footer's average.
    assert run["peak_busbw"] == max(max(r["oop_busbw"], r["ip_busbw"]) for r in run["rows"])
    json.dumps(runs)  # plain data


def test_row_types_and_units():
    runs, _ = load("allreduce_2node_h100_ib_healthy_mpi_warnings.txt")
    first, last = runs[0]["rows"][0], runs[0]["rows"][-1]
    assert first == {
        "size": 8,
        "type": "float",
        "oop_busbw": 0.0,
        "ip_busbw": 0.0,
        "oop_wrong": 0,
        "ip_wrong": 0,
        "oop_time_us": 30.77,
        "ip_time_us": 31.22,
    }
    assert isinstance(last["size"], int) and last["size"] == 8589934592
    assert isinstance(last["oop_time_us"], float) and last["oop_time_us"] > 40000


def test_average_is_not_peak():
    runs, _ = load("allreduce_2node_h100_ib_healthy_mpi_warnings.txt")
    assert runs[0]["avg_busbw"] < runs[0]["peak_busbw"] / 2


def test_na_wrong_is_none():
    runs, _ = load("allreduce_1node_a100_no_validation.txt")
    assert all(r["oop_wrong"] is None and r["ip_wrong"] is None for r in runs[0]["rows"])


def test_wrong_values_counted():
    runs, _ = load("allreduce_1node_h100_wrong_values.txt")
    wrong = {(r["size"], r["oop_wrong"], r["ip_wrong"]) for r in runs[0]["rows"] if r["oop_wrong"] or r["ip_wrong"]}
    assert wrong == {(1 << 30, 12, 0), (4 << 30, 0, 3)}


def test_several_runs_in_one_log():
    runs, warnings = load("allreduce_multi_runs_single_node.txt")
    assert warnings == []
    assert [r["hosts"] for r in runs] == [["gpu01"], ["gpu02"], ["gpu03"]]
    assert [r["ranks"] for r in runs] == [8, 8, 8]
    assert all(r["nccl_version"] == "2.27.3" and len(r["rows"]) == 14 for r in runs)
    assert nt.busbw_at_largest(runs[2]) < 310 < nt.busbw_at_largest(runs[0])


def test_nccl_info_lines_between_rows_are_ignored():
    runs, _ = load("debug_2node_h100_ib_gdrdma.txt")
    assert len(runs) == 1 and [r["size"] for r in runs[0]["rows"]] == [4 << 30, 8 << 30]
    assert runs[0]["nccl_version"] == "2.26.2"


def test_failed_run_is_a_warning_not_a_run():
    runs, warnings = load("allreduce_failure_fabric_manager.txt")
    assert runs == []
    assert len(warnings) == 1 and "system not yet initialized" in warnings[0] and ":2:" in warnings[0]


def test_json_env_is_never_in_runs_and_is_redacted():
    text = (FIXTURES / "allreduce_2node_h100_ib.json").read_text()
    runs, _ = nt.parse(text, "x.json")
    assert "fixtureSecretValue0000" not in json.dumps(runs)
    doc = nt.redact_json_env(json.loads(text))
    dumped = json.dumps(doc)
    for secret in ("fixtureSecretValue0000", "hf_fixture_not_a_real_token_0000", "/home/acc", "/etc/munge"):
        assert secret not in dumped
    assert "NCCL_IB_HCA=mlx5_0,mlx5_1" in doc["env"]
    assert "AWS_SECRET_ACCESS_KEY=<redacted>" in doc["env"]
    assert "PATH=<redacted>" in doc["env"]
    assert doc["results"] == json.loads(text)["results"]  # only env changes


@pytest.mark.parametrize(
    "entry,expected",
    [
        ("NCCL_ALGO=Ring", "NCCL_ALGO=Ring"),
        ("NCCL_IB_SECRET_KEY=x", "NCCL_IB_SECRET_KEY=<redacted>"),
        ("HOME=/root", "HOME=<redacted>"),
        ("garbage", "<redacted>"),
        (42, "<redacted>"),
    ],
)
def test_redact_env_entry(entry, expected):
    assert nt.redact_env_entry(entry) == expected


@pytest.mark.parametrize(
    "code,version",
    [(22705, "2.27.5"), ("23007", "2.30.7"), (2804, "2.8.4"), (21903, "2.19.3"), (None, None), ("x", None), (0, None)],
)
def test_nccl_version_from_code(code, version):
    assert nt.nccl_version_from_code(code) == version


@pytest.mark.parametrize(
    "line,expected",
    [
        ("[1,0]<stdout>:#  Rank  0 Group", "#  Rank  0 Group"),
        ("[1,12]<stderr>: warning", "warning"),
        ("0: # nccl-tests version 2.18.2", "# nccl-tests version 2.18.2"),
        ("  12: text", "text"),
        ("[1,0]<stdout>:3: x", "x"),
        ("           8             2     float", "           8             2     float"),
    ],
)
def test_strip_prefix(line, expected):
    assert nt.strip_prefix(line) == expected


@pytest.mark.parametrize(
    "line,expected",
    [
        # pre-2.17 row
        (
            "  1073741824     268435456     float     sum      -1   5443.6  197.25  369.84      0   5452.7  196.92  369.22      0",  # noqa: E501 - a real nccl-tests line
            {"size": 1 << 30, "oop_busbw": 369.84, "ip_busbw": 369.22, "oop_wrong": 0, "oop_time_us": 5443.6},
        ),
        # N/A wrong
        (
            "        1024           256     float     sum      -1    12.10    0.08    0.13    N/A    12.20    0.08    0.13    N/A",  # noqa: E501 - a real nccl-tests line
            {"oop_wrong": None, "ip_wrong": None},
        ),
        # all_gather: redop "none"; broadcast: root 0
        (
            "     1048576         65536     float    none      -1    41.20   25.45   23.86      0    40.10   26.15   24.51      0",  # noqa: E501 - a real nccl-tests line
            {"type": "float", "oop_busbw": 23.86},
        ),
        (
            "     1048576        262144     float    none       0    20.00   52.43   52.43      0    19.90   52.69   52.69      0",  # noqa: E501 - a real nccl-tests line
            {"ip_busbw": 52.69},
        ),
        # very old build: no root column
        (
            "        8192          2048     float     sum    40.01    0.20    0.36  0e+00    39.90    0.21    0.36  0e+00",  # noqa: E501 - a real nccl-tests line
            {"oop_busbw": 0.36, "oop_wrong": 0},
        ),
        # %g wrong count, timestamp column (-T)
        (
            "     1048576        262144     float     sum      -1   100.00   10.49   19.66  2e+06   100.00   10.49   19.66      0  2026-03-02 10:14:07",  # noqa: E501 - a real nccl-tests line
            {"oop_wrong": 2000000},
        ),
        # in-place only (trace replay): blank out-of-place block
        (
            "     1048576        262144     float     sum      -1                                   100.00   10.49   19.66      0",  # noqa: E501 - a real nccl-tests line
            {"oop_busbw": None, "ip_busbw": 19.66},
        ),
    ],
)
def test_parse_row_variants(line, expected):
    row = nt.parse_row(line)
    assert row is not None
    for key, value in expected.items():
        assert row[key] == value, key


@pytest.mark.parametrize(
    "line",
    [
        "",
        "# Avg bus bandwidth    : 33.4",
        "8 2 float",
        "Running 2 nodes 8 GPUs each",
        "1 2 3 4 5 6 7 8 9 10 11 12",
        "12 34 float sum -1 x y z 0 1 2 3 0",
    ],
)
def test_parse_row_rejects(line):
    assert nt.parse_row(line) is None


def test_old_format_runs_split_without_version_header():
    block = (FIXTURES / "allreduce_2node_h100_ib_lowbw.txt").read_text()
    runs, _ = nt.parse(block + "\nsome noise\n" + block, "two.txt")
    assert len(runs) == 2 and runs[0]["rows"] == runs[1]["rows"]


def test_rank_lines_only_last_kept_gives_ranks_from_index():
    text = (
        "#  Rank 71 Group  0 Pid  1484 on rack-07-n18 device  3 [0x01] NVIDIA Graphics Device\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"  # noqa: E501 - a real nccl-tests line
        "   536870912     134217728     float     sum      -1   1806.7  297.16  586.06      0   1835.9  292.43  576.74      0\n"  # noqa: E501 - a real nccl-tests line
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 581.4 \n"
    )
    runs, _ = nt.parse(text)
    assert runs[0]["ranks"] == 72 and runs[0]["gpu_names"] == ["NVIDIA Graphics Device"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\x00\x01\x02garbage\xff",
        "{not json",
        '{"results": "x"}',
        "[1, 2]",
        "# nThread 1 nGpus 1\n#\n",
        "{" * 1000,
        '{"results": [{"size": "big"}, 7]}',
    ],
)
def test_garbage_never_raises(text):
    runs, warnings = nt.parse(text, "g")
    assert runs == [] and warnings


def test_json_truncated_by_a_crash_is_reported():
    text = (FIXTURES / "allreduce_2node_h100_ib.json").read_text()[:3000]
    runs, warnings = nt.parse(text, "cut.json")
    assert runs == [] and "invalid JSON" in warnings[0]


def test_json_nan_and_string_bools():
    doc = {
        "nccl_version": 22705,
        "args": ["./all_gather_perf"],
        "results": [
            {
                "size": 1024,
                "type": "float",
                "out_of_place": {"time": 5.0, "bus_bw": "nan", "nwrong": None},
                "in_place": {"time": 5.0, "bus_bw": 1.5, "nwrong": 0.0},
            }
        ],
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": "nan", "okay": "unchecked"},
    }
    runs, _ = nt.parse_json_doc(doc, "j")
    run = runs[0]
    assert run["collective"] == "all_gather" and run["nccl_version"] == "2.27.5"
    assert run["rows"][0]["oop_busbw"] is None and run["rows"][0]["oop_wrong"] is None
    assert run["peak_busbw"] == 1.5 and run["avg_busbw"] is None
