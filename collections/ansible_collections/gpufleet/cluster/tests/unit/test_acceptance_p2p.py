"""GPU-to-GPU copies (nvbandwidth): the parser, the node's verdict, the outlier rule on them, the report
and the test double (module_utils/acceptance/p2p.py, outliers.py, report.py, doubles/bin/nvbandwidth)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.nvbandwidth_judge import nvbandwidth_judge
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import outliers as ao
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import p2p
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import build_report, render_markdown
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema
from hw_helpers import DOUBLES_BIN, profile_path

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "nvbandwidth")
DOUBLE = os.path.join(DOUBLES_BIN, "nvbandwidth")
PATH = "/usr/local/bin/nvbandwidth"


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as fh:
        return fh.read()


# --- the parser, on real-shaped output -------------------------------------------------------------


def test_v08_text_matrix_of_an_hgx_h100():
    r = p2p.parse(fixture("h100_hgx_read_ce_v0.8.txt"))
    assert (r["format"], r["gpus"], len(r["pairs"]), r["unmeasured"]) == ("text", 8, 56, [])
    assert r["version"] == "v0.8" and r["description"] == "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)"
    assert 374 < r["min_gbps"] <= min(p["gbps"] for p in r["pairs"]) < 378
    row, column = (int(x) for x in r["min_pair"].split("->"))
    assert {"row": row, "column": column, "gbps": r["min_gbps"]} in r["pairs"]
    # The SUM line is the tool's; the 56 cells add up to it within their rounding.
    assert r["sum_gbps"] == pytest.approx(sum(p["gbps"] for p in r["pairs"]), abs=0.3)
    assert r["sum_gbps"] == float(
        fixture("h100_hgx_read_ce_v0.8.txt").split("SUM device_to_device_memcpy_read_ce ")[1].split()[0]
    )


def test_json_and_text_of_one_matrix_agree():
    text = p2p.parse(fixture("h100_hgx_read_ce_v0.8.txt"))
    js = p2p.parse(fixture("h100_hgx_read_ce_v0.8.json"))
    assert js["format"] == "json" and js["version"] == "v0.8"
    assert js["pairs"] == text["pairs"] and js["min_pair"] == text["min_pair"]
    assert js["sum_gbps"] == pytest.approx(text["sum_gbps"], abs=0.01)


def test_the_slow_pair_is_the_weakest():
    r = p2p.parse(fixture("h100_hgx_read_ce_slow_pair_v0.8.txt"))
    assert r["min_pair"] in ("2->5", "5->2") and 337 < r["min_gbps"] < 340


def test_a_pair_without_peer_access_is_listed_not_zero():
    r = p2p.parse(fixture("pcie4_read_ce_partial_peers_v0.8.txt"))
    assert r["unmeasured"] == [[0, 3], [3, 0]]
    assert len(r["pairs"]) == 10 and 21 < r["min_gbps"] < 23


def test_an_older_release_with_zeros_on_the_diagonal():
    r = p2p.parse(fixture("a100_write_ce_zero_diagonal_v0.4.txt"), "device_to_device_memcpy_write_ce")
    assert r["version"] == "v0.4" and len(r["pairs"]) == 56 and r["unmeasured"] == []
    assert r["min_gbps"] > 270  # the 0.00 of the diagonal is not a pair


@pytest.mark.parametrize(
    "name, message",
    [
        ("h100_read_ce_truncated_v0.8.txt", r"8 column\(s\) and 4 row\(s\)"),
        ("h100_read_ce_truncated_v0.8.json", "does not parse"),
        ("h100_read_ce_error_v0.8.json", "ended in error"),
    ],
)
def test_output_cut_short_or_failed_is_an_error(name, message):
    with pytest.raises(p2p.P2PError, match=message):
        p2p.parse(fixture(name))


def test_text_without_its_sum_line_is_an_error():
    text = fixture("h100_hgx_read_ce_v0.8.txt")
    cut = text[: text.index("SUM ")]
    with pytest.raises(p2p.P2PError, match="no 'SUM device_to_device_memcpy_read_ce"):
        p2p.parse(cut)


def test_a_matrix_that_does_not_add_up_to_its_sum_is_an_error():
    text = fixture("h100_hgx_read_ce_v0.8.txt").replace(
        "SUM device_to_device_memcpy_read_ce ", "SUM device_to_device_memcpy_read_ce 1"
    )
    with pytest.raises(p2p.P2PError, match="adds up to"):
        p2p.parse(text)


def test_a_cell_that_is_no_figure_is_an_error():
    text = fixture("h100_hgx_read_ce_v0.8.txt")
    first = text.split("\n 1 ")[1].split()[0]
    with pytest.raises(p2p.P2PError, match="neither a figure"):
        p2p.parse(text.replace(f"\n 1 {' ' * (9 - len(first))}{first}", "\n 1      n/a!", 1))


@pytest.mark.parametrize(
    "output, message",
    [
        ("", "no output"),
        ("nvbandwidth Version: v0.8\n\nERROR: Invalid Arguments \nnvbandwidth -j :\n", "rejected its arguments"),
        ("nvbandwidth Version: v0.8\n\nERROR: Testcase device_to_device_memcpy_read_ce not found!\n", "not found"),
        ("nvbandwidth Version: v0.8\nRunning host_to_device_memcpy_ce.\n", "did not run"),
        (
            '{"nvbandwidth": {"error": "Specified list of testcase prefixes did not match any testcases"}}',
            "did not match",
        ),
        (
            '{"nvbandwidth": {"testcases": [{"name": "device_to_device_memcpy_read_ce", "status": "Running"}]}}',
            "did not finish",
        ),
        (
            '{"nvbandwidth": {"testcases": [{"name": "device_to_device_memcpy_read_ce", "status": "Passed", '
            '"bandwidth_matrix": [["N/A", "376.1"], ["375.9"]], "sum": 752.0}]}}',
            "row 1 of the bandwidth matrix has 1",
        ),
        ('["not", "an", "object"]', "not an object"),
    ],
)
def test_malformed_output_names_what_is_wrong(output, message):
    with pytest.raises(p2p.P2PError, match=message):
        p2p.parse(output)


def test_a_waived_testcase_is_not_a_figure():
    assert p2p.parse("nvbandwidth Version: v0.8\n\nWaived: \n")["waived"] is True
    doc = '{"nvbandwidth": {"testcases": [{"name": "device_to_device_memcpy_read_ce", "status": "Waived"}]}}'
    assert p2p.parse(doc) == {"testcase": "device_to_device_memcpy_read_ce", "format": "json", "waived": True}


# --- the node's verdict --------------------------------------------------------------------------------


def run(stdout: str, rc: int = 0) -> dict:
    return {"rc": rc, "stdout": stdout, "stderr": ""}


def codes(found):
    return [(v["code"], v["severity"]) for v in found]


def test_no_binary_is_recorded_and_fails_only_where_the_brief_requires_it():
    out = nvbandwidth_judge({"skipped": True}, "gpu01", path=PATH, present=False)
    assert out["violations"] == []
    assert out["record"] == {
        "host": "gpu01",
        "path": PATH,
        "testcase": p2p.TESTCASE,
        "status": "not gathered",
        "reason": f"no executable nvbandwidth at {PATH}",
    }
    out = nvbandwidth_judge(
        {"skipped": True}, "gpu01", path=PATH, present=False, brief={"acceptance": {"p2p": {"required": True}}}
    )
    assert codes(out["violations"]) == [("P2P_NOT_GATHERED", "error")]
    assert out["violations"][0]["host"] == "gpu01" and PATH in out["violations"][0]["message"]
    assert out["violations"][0]["field"] == "acceptance.p2p.required"


def test_a_measured_node():
    out = nvbandwidth_judge(run(fixture("h100_hgx_read_ce_v0.8.json")), "gpu01", path=PATH, present=True)
    assert out["violations"] == [] and out["record"]["status"] == "measured"
    assert out["record"]["gpus"] == 8 and out["record"]["min_gbps"] > 374


def test_a_failed_run_is_an_error_with_its_output():
    out = nvbandwidth_judge(
        run("nvbandwidth Version: v0.8\n[CUDA_ERROR_NO_DEVICE] in cuInit", rc=1), "gpu01", path=PATH, present=True
    )
    assert codes(out["violations"]) == [("P2P_RUN_FAILED", "error")]
    assert "exited with status 1" in out["record"]["reason"] and "CUDA_ERROR_NO_DEVICE" in out["record"]["reason"]
    out = nvbandwidth_judge(run(fixture("h100_read_ce_truncated_v0.8.txt")), "gpu01", path=PATH, present=True)
    assert codes(out["violations"]) == [("P2P_RUN_FAILED", "error")] and out["record"]["status"] == "failed"
    assert "min_gbps" not in out["record"]


def test_pairs_without_peer_access_warn_or_fail_and_the_floor():
    text = fixture("pcie4_read_ce_partial_peers_v0.8.txt")
    out = nvbandwidth_judge(run(text), "ws02", path=PATH, present=True)
    assert codes(out["violations"]) == [("P2P_NO_PEER_ACCESS", "warning")]
    assert "0->3, 3->0" in out["violations"][0]["message"]
    brief = {"acceptance": {"p2p": {"required": True, "min_gbps": 24}}}
    out = nvbandwidth_judge(run(text), "ws02", path=PATH, present=True, brief=brief)
    assert codes(out["violations"]) == [("P2P_NO_PEER_ACCESS", "error"), ("P2P_BELOW_FLOOR", "error")]
    assert "expected at least 24 GB/s" in out["violations"][1]["message"]


def test_the_filter_refuses_what_is_not_a_command_result():
    with pytest.raises(AnsibleFilterError, match="registered command result"):
        nvbandwidth_judge("376.0", "gpu01", path=PATH, present=True)


def test_the_brief_schema_names_a_bad_p2p_field():
    errors, _ = schema.validate({"acceptance": {"p2p": {"required": "yes", "min_gbps": -1, "floor": 1}}})
    got = {e["field"]: e["message"] for e in errors if e["field"].startswith("acceptance.p2p")}
    assert set(got) == {"acceptance.p2p.required", "acceptance.p2p.min_gbps", "acceptance.p2p.floor"}


# --- the pool's outlier rule on the weakest pair ------------------------------------------------------


def measured(text: str) -> dict:
    return nvbandwidth_judge(run(text), "x", path=PATH, present=True)["record"]


def single(host: str, record: dict, busbw: float = 480.0) -> dict:
    return {"scope": "single-node", "host": host, "busbw_largest": busbw, "p2p": record}


def slowed(text: str, row: int, column: int, share: float) -> str:
    """The text matrix with one cell (and its SUM) scaled: a pair slower by 1 - share."""
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith(f"{row:>2} ") and "N/A" in ln)
    cells = lines[i].split()
    old = float(cells[column + 1])
    cells[column + 1] = f"{old * share:.2f}"
    lines[i] = f"{row:>2}" + "".join(f"{c:>10}" for c in cells[1:])
    j = next(k for k, ln in enumerate(lines) if ln.startswith("SUM "))
    name, total = lines[j].split()[1:]
    lines[j] = f"SUM {name} {float(total) - old + float(cells[column + 1]):.2f}"
    return "\n".join(lines) + "\n"


def pool_of_eight(slow_host: str | None = None):
    """Eight nodes of one HGX pool: the same healthy matrix each, the jitter of a second sample
    (about +-0.4 %) on each node's cells, and optionally one pair 10 % slower on one node."""
    base = fixture("h100_hgx_read_ce_v0.8.txt")
    runs = []
    for k in range(8):
        host = f"gpu{k + 1:02d}"
        text = slowed(base, k % 8, (k + 3) % 8, 1.0 - 0.004 * ((k % 3) - 1)) if (k + 3) % 8 != k % 8 else base
        if host == slow_host:
            text = slowed(text, 6, 1, 0.9)
        runs.append(single(host, measured(text)))
    return runs


def test_an_identical_pool_names_no_p2p_outlier():
    runs = pool_of_eight()
    section, found = ao.judge({}, pools={r["host"]: "h100" for r in runs}, runs=runs)
    assert [v for v in found if v["code"] == "P2P_OUTLIER"] == []
    metrics = {s["metric"]: s for s in section}
    assert metrics["p2p_min"]["nodes"] == 8 and metrics["p2p_min"]["outliers"] == []
    assert metrics["p2p_sum"]["outliers"] == []


def test_one_pair_ten_percent_slower_on_one_node_is_named_with_its_pair():
    runs = pool_of_eight(slow_host="gpu05")
    section, found = ao.judge({}, pools={r["host"]: "h100" for r in runs}, runs=runs)
    named = [(v["code"], v["host"], v["severity"]) for v in found]
    assert named == [("P2P_OUTLIER", "gpu05", "warning")]
    assert "weakest GPU pair's copy bandwidth (nvbandwidth) (GPU 6->1)" in found[0]["message"]
    # The sum of 56 pairs barely moves: only the weakest pair names the node.
    assert {s["metric"]: s["outliers"] for s in section}["p2p_sum"] == []


def test_nodes_without_a_measured_matrix_are_left_out_of_the_figure():
    runs = pool_of_eight()
    runs[0] = single("gpu01", {"status": "not gathered", "path": PATH})
    section, _ = ao.judge({}, pools={r["host"]: "h100" for r in runs}, runs=runs)
    assert {s["metric"]: s["nodes"] for s in section}["p2p_min"] == 7


# --- the report ------------------------------------------------------------------------------------------


def test_the_report_shows_each_node_p2p_figure_beside_its_busbw():
    runs = [
        {
            "label": "single-node gpu01",
            "scope": "single-node",
            "host": "gpu01",
            "floor_gbps": 400,
            "run": None,
            "p2p": measured(fixture("h100_hgx_read_ce_slow_pair_v0.8.txt")),
        },
        {
            "label": "single-node gpu02",
            "scope": "single-node",
            "host": "gpu02",
            "floor_gbps": 400,
            "run": None,
            "p2p": {
                "status": "not gathered",
                "reason": f"no executable nvbandwidth at {PATH}",
                "testcase": p2p.TESTCASE,
                "path": PATH,
            },
        },
    ]
    report = build_report("lab", runs=runs, timestamp="20260101T000000Z")
    assert report["runs"][0]["p2p"]["min_pair"] in ("2->5", "5->2")
    md = render_markdown(report)
    section = md.split("## GPU-to-GPU copies (nvbandwidth)")[1].split("##")[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| gpu")]
    assert re.match(
        r"\| gpu01 \| - \| device_to_device_memcpy_read_ce \| measured \| 33[78]\.\d\d \((2->5|5->2)\) \| ", rows[0]
    )
    assert (
        f"| gpu02 | - | device_to_device_memcpy_read_ce | not gathered: no executable nvbandwidth at {PATH} |"
        in rows[1]
    )


def test_the_report_module_keeps_each_runs_p2p_record():
    # The module hands build_report the runs as plan_logs leaves them (output moved to a log file):
    # a node's nvbandwidth record must survive that step, or the report shows no figures at all.
    from ansible_collections.gpufleet.cluster.plugins.modules.acceptance_report import plan_logs

    record = {
        "label": "single-node gpu01",
        "scope": "single-node",
        "host": "gpu01",
        "floor_gbps": 400,
        "run": None,
        "output": "all_reduce_perf output",
        "p2p": measured(fixture("h100_hgx_read_ce_slow_pair_v0.8.txt")),
    }
    (entry,), logs = plan_logs([record])
    assert entry["p2p"] == record["p2p"] and "output" not in entry and list(logs) == [entry["log"]]
    report = build_report("lab", runs=[entry], timestamp="20260101T000000Z")
    assert report["runs"][0]["p2p"]["min_pair"] in ("2->5", "5->2")


def test_no_p2p_section_without_records():
    report = build_report("lab", runs=[{"label": "all", "scope": "multi-node", "run": None}], timestamp="t")
    assert "GPU-to-GPU copies" not in render_markdown(report)


# --- the test double ------------------------------------------------------------------------------------


def double(profile: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, GPUFLEET_HW_PROFILE=profile_path(profile) if profile else "/nonexistent")
    return subprocess.run([sys.executable, DOUBLE, *args], capture_output=True, text=True, env=env, check=False)


@pytest.mark.parametrize("as_json", [False, True])
def test_the_double_parses_with_the_real_parser(as_json):
    out = double("h100-hgx-healthy", "-t", p2p.TESTCASE, *(["-j"] if as_json else []))
    assert out.returncode == 0, out.stderr
    r = p2p.parse(out.stdout)
    assert r["format"] == ("json" if as_json else "text") and r["gpus"] == 8 and r["unmeasured"] == []
    # 18 NVLinks at 20.9 GB/s each, +-0.3 %
    assert all(374 < p["gbps"] < 378 for p in r["pairs"])


def test_the_double_plants_the_slow_pair_of_its_profile():
    r = p2p.parse(double("h100-slow-p2p", "-t", p2p.TESTCASE, "-j").stdout)
    slow = sorted(p["gbps"] for p in r["pairs"])
    assert r["min_pair"] in ("3->6", "6->3") and all(336 < v < 340 for v in slow[:2]) and slow[2] > 374


def test_the_double_follows_the_topology():
    missing = p2p.parse(double("h100-nvlink-missing", "-t", p2p.TESTCASE).stdout)
    assert missing["min_pair"] in ("2->5", "5->2") and missing["min_gbps"] < 40
    pcie = p2p.parse(double("stack-l40s-pcie", "-t", p2p.TESTCASE).stdout)
    assert pcie["gpus"] == 4 and pcie["max_gbps"] < 40


def test_the_double_refuses_unknown_flags_as_the_real_tool_does():
    out = double("h100-hgx-healthy", "-t", p2p.TESTCASE, "--frobnicate")
    assert out.returncode == 1 and "ERROR: Invalid Arguments" in out.stdout and "nvbandwidth CLI:" in out.stdout
    with pytest.raises(p2p.P2PError, match="rejected its arguments"):
        p2p.parse(out.stdout)
    unknown = double("h100-hgx-healthy", "-t", "no_such_testcase")
    assert unknown.returncode == 0 and "ERROR: Testcase no_such_testcase not found!" in unknown.stdout
    both = double("h100-hgx-healthy", "-t", p2p.TESTCASE, "-p", "device", "-j")
    assert both.returncode == 1 and "cannot specify both" in json.loads(both.stdout)["nvbandwidth"]["error"]


def test_the_double_without_a_profile_fails_like_a_node_without_a_driver():
    out = double(None, "-t", p2p.TESTCASE)
    assert out.returncode == 1 and "cuInit" in out.stderr
    judged = nvbandwidth_judge(
        {"rc": out.returncode, "stdout": out.stdout, "stderr": out.stderr}, "gpu01", path=PATH, present=True
    )
    assert codes(judged["violations"]) == [("P2P_RUN_FAILED", "error")]


def test_the_slow_pair_profile_passes_the_hardware_gate(tmp_path):
    """h100-slow-p2p's topology is intact (NV18 everywhere): only the copy matrix shows its pair."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.hw import gate as hwgate
    from hw_helpers import brief_and_pool, facts_from_doubles

    brief, pool = brief_and_pool()
    facts = facts_from_doubles("h100-slow-p2p", str(tmp_path))
    assert facts["problems"] == []
    assert hwgate.check_node("lab-gpu02", facts, brief, pool) == []
