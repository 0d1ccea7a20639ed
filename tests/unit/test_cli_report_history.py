"""``gpufleet report history NODE``: the node's records as a table, its trend, the cluster found, exit 2 when
there is nothing to show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history
from gpufleet_cli.main import main


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["report", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def store(base: Path, cluster: str = "lab") -> str:
    path = history.store_path(str(base), cluster)
    history.append(
        path,
        [
            {
                "time": "2026-11-29T10:00:00Z",
                "run": "20261129T100000Z",
                "kind": "acceptance",
                "host": "gpu01",
                "pool": "h100",
                "verdict": "pass",
                "figures": {"single_node_busbw": 445.0, "latency_us": 30.1},
                "valid_until": "2027-02-27",
            },
            {
                "time": "2026-11-29T10:00:00Z",
                "run": "20261129T100000Z",
                "kind": "acceptance",
                "host": "gpu02",
                "pool": "h100",
                "verdict": "pass",
                "figures": {"single_node_busbw": 446.0},
            },
            history.record(
                "gate", cluster, "gpu01", "fail", run="20261201T080000Z", pool="h100", codes=["HW_PORT_RATE"]
            ),
            {
                "time": "2026-12-03T10:00:00Z",
                "run": "20261203T100000Z",
                "kind": "acceptance",
                "host": "gpu01",
                "pool": "h100",
                "verdict": "pass",
                "figures": {"single_node_busbw": 390.0, "latency_us": 31.0},
                "valid_until": "2027-03-03",
            },
        ],
    )
    return path


def test_history_prints_the_nodes_records_and_trend(capsys, tmp_path):
    store(tmp_path)
    rc, out, err = cli(capsys, "history", "gpu01", "--dir", str(tmp_path))
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "# History: gpu01 (lab)"
    assert "3 record(s)" in out
    table = [line for line in lines if line.startswith("| 2026")]
    assert [row.split("|")[2].strip() for row in table] == ["acceptance", "gate", "acceptance"]
    assert "445" in table[0] and "2027-02-27" in table[0]
    assert "HW_PORT_RATE" in table[1]
    assert "390" in table[2] and "2027-03-03" in table[2]
    assert "gpu02" not in out.split("## Since")[0].split("\n", 1)[1]
    assert "single_node_busbw: 445 → 390 GB/s since 2026-11-29 — DEGRADED" in out
    assert "WARNING NODE_DEGRADED" in out


def test_history_json(capsys, tmp_path):
    store(tmp_path)
    rc, out, _ = cli(capsys, "history", "gpu02", "--dir", str(tmp_path), "--format", "json")
    data = json.loads(out)
    assert rc == 0 and data["node"] == "gpu02" and len(data["records"]) == 1
    assert data["trends"][0]["text"] == "446 → 446 GB/s since 2026-11-29"


def test_history_cluster_from_the_brief(capsys, tmp_path):
    store(tmp_path, "ci")
    store(tmp_path, "lab")
    brief = tmp_path / "brief.yml"
    brief.write_text("cluster:\n  name: ci\n")
    rc, out, err = cli(capsys, "history", "gpu01", "--dir", str(tmp_path), "--brief", str(brief))
    assert rc == 0, err and out.startswith("# History: gpu01 (ci)")
    rc, out, err = cli(capsys, "history", "gpu01", "--dir", str(tmp_path))
    assert rc == 2 and "several clusters have a history" in err and "ci, lab" in err


def test_history_warns_on_a_torn_line_and_still_prints(capsys, tmp_path):
    path = store(tmp_path)
    with open(path, "a") as fh:
        fh.write('{"time": "2026-12-04')
    rc, out, err = cli(capsys, "history", "gpu01", "--dir", str(tmp_path))
    assert rc == 0 and "3 record(s)" in out
    assert "warning:" in err and "torn" in err


def test_history_of_an_unknown_node_is_exit_2(capsys, tmp_path):
    store(tmp_path)
    rc, _, err = cli(capsys, "history", "gpu09", "--dir", str(tmp_path))
    assert rc == 2 and "no record of gpu09" in err


def test_no_history_at_all(capsys, tmp_path):
    rc, _, err = cli(capsys, "history", "gpu01", "--dir", str(tmp_path), "--cluster", "lab")
    assert rc == 2 and "no history of cluster lab" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # report history is a subcommand whose NODE argparse requires ...
        (["history"], "the following arguments are required: NODE"),
        # ... and report (show) takes one PATH only.
        (["{dir}", "gpu01"], "unrecognized arguments: gpu01"),
        (["show", "{dir}", "gpu01"], "unrecognized arguments: gpu01"),
    ],
)
def test_a_missing_or_misplaced_node_is_a_usage_error(capsys, tmp_path, argv, message):
    store(tmp_path)
    with pytest.raises(SystemExit) as exc:
        cli(capsys, *[a.format(dir=tmp_path) for a in argv], "--dir", str(tmp_path))
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_history_shows_the_collectives_beyond_all_reduce_where_a_run_measured_them(capsys, tmp_path):
    path = store(tmp_path)
    history.append(
        path,
        [
            {
                "time": "2026-12-05T10:00:00Z",
                "run": "20261205T100000Z",
                "kind": "acceptance",
                "host": "gpu01",
                "pool": "h100",
                "verdict": "pass",
                "figures": {"single_node_busbw": 444.0, "all_gather_busbw": 412.5, "alltoall_busbw": 320.0},
            },
            {
                "time": "2026-12-06T10:00:00Z",
                "run": "20261206T100000Z",
                "kind": "acceptance",
                "host": "gpu01",
                "pool": "h100",
                "verdict": "fail",
                "figures": {"single_node_busbw": 443.0, "all_gather_busbw": 410.0, "alltoall_busbw": 250.0},
            },
        ],
    )
    rc, out, err = cli(capsys, "history", "gpu01", "--dir", str(tmp_path))
    assert rc == 0, err
    header = next(line for line in out.splitlines() if line.startswith("| time"))
    assert "| all_gather_busbw | alltoall_busbw |" in header
    assert "alltoall_busbw: 320 → 250 GB/s since 2026-12-05 — DEGRADED" in out
    assert "all_gather_busbw: 412.5 → 410 GB/s since 2026-12-05\n" in out
    # A node whose runs measured no other collective has no such column.
    rc, out, _ = cli(capsys, "history", "gpu02", "--dir", str(tmp_path))
    assert rc == 0 and "all_gather_busbw" not in out and "alltoall_busbw" not in out
