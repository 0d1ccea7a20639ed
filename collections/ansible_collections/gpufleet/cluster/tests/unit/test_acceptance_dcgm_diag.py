"""GPU diagnostics (dcgmi diag): the parser on DCGM 3 and DCGM 4 JSON, the node's verdict, the brief's level,
the drain reason, the report, the history, the CLI summary, preflight and the test double
(module_utils/acceptance/dcgm_diag.py, run.py, report.py, history.py, preflight/dcgm_diag.py,
doubles/bin/dcgmi)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.dcgm_diag_judge import dcgm_diag_judge
from ansible_collections.gpufleet.cluster.plugins.filter.dcgm_diag_level import dcgm_diag_level, dcgm_diag_summary
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import dcgm_diag as dd
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import build_report, render_markdown
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import drain_list
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema
from hw_helpers import DOUBLES_BIN, profile_path

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "dcgm_diag")
DOUBLE = os.path.join(DOUBLES_BIN, "dcgmi")
PATH = "/usr/bin/dcgmi"


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as fh:
        return fh.read()


def codes(violations):
    return [(v["code"], v["severity"]) for v in violations]


def judged(name: str, rc: int = 0, level: int = 2, **kw) -> dict:
    return dd.judge("gpu01", level=level, path=PATH, present=True, rc=rc, stdout=fixture(name), **kw)


# --- the parser: one row per fixture -------------------------------------------------------------------

# fixture -> (layout, version, gpus, tests, failed (gpu, test), status counts)
PARSED = {
    "dcgm4_level2_pass.json": ("dcgm4", "4.2.3", 8, ["software", "memory", "pcie"], [], {"Pass": 24}),
    "dcgm4_level3_two_gpus_fail.json": (
        "dcgm4",
        "4.2.3",
        8,
        ["software", "memory", "diagnostic", "pcie", "memory_bandwidth", "targeted_stress", "targeted_power"],
        [(2, "memory"), (5, "targeted_power")],
        {"Pass": 54, "Fail": 2},
    ),
    "dcgm4_level2_skips.json": ("dcgm4", "4.2.3", 8, ["software", "memory", "pcie"], [], {"Pass": 15, "Skip": 9}),
    "dcgm4_level1_node_failure.json": ("dcgm4", "4.4.0", 8, ["software"], [], {"Pass": 8}),
    "dcgm3_level3_pass.json": ("dcgm3", "3.3.8", 4, None, [], {"Pass": 29, "Skip": 4}),
    "dcgm3_level3_deployment_fail.json": ("dcgm3", "3.3.8", 4, None, [(2, "Page Retirement/Row Remap")], None),
    "variant_level2_warn.json": ("dcgm4", "4.2.3", 8, ["software", "memory", "pcie"], [], {"Pass": 23, "Warn": 1}),
}


@pytest.mark.parametrize("name", sorted(PARSED))
def test_each_fixture_parses_to_its_tests_and_results(name):
    layout, version, gpus, tests, failed, counts = PARSED[name]
    r = dd.parse(fixture(name))
    assert (r["layout"], r["version"], r["gpus"]) == (layout, version, list(range(gpus)))
    if tests is not None:
        assert [t["name"] for t in r["tests"]] == tests
    got = [(res["gpu"], t["name"]) for t in r["tests"] for res in t["results"] if res["status"] == dd.FAIL]
    assert got == failed
    if counts is not None:
        found = {}
        for t in r["tests"]:
            for res in t["results"]:
                found[res["status"]] = found.get(res["status"], 0) + 1
        assert found == counts


def test_dcgm4_keeps_each_results_warning_text_and_info():
    r = dd.parse(fixture("dcgm4_level3_two_gpus_fail.json"))
    memory = next(t for t in r["tests"] if t["name"] == "memory")
    assert memory["category"] == "Hardware" and memory["status"] == dd.FAIL
    assert memory["results"][2]["warnings"] == ["Found 4 faulty memory elements on GPU 2"]
    assert memory["results"][2]["entity"] == "GPU 2"
    pcie = dd.parse(fixture("dcgm4_level2_pass.json"))["tests"][2]
    assert pcie["results"][3]["info"] == ["GPU 3 GPU to Host bandwidth:\t\t54.87 GB/s"]


def test_dcgm3_deployment_results_without_a_gpu_and_their_warnings_key():
    r = dd.parse(fixture("dcgm3_level3_deployment_fail.json"))
    deploy = [t for t in r["tests"] if t["category"] == "Deployment"]
    assert {res["gpu"] for t in deploy for res in t["results"] if res["status"] == dd.PASS} == {None}
    remap = next(t for t in deploy if t["name"] == "Page Retirement/Row Remap")
    assert remap["results"][0]["gpu"] == 2 and remap["results"][0]["warnings"][0].startswith("GPU 2 had uncorrectable")
    pcie = next(t for t in r["tests"] if t["name"] == "PCIe")
    assert [res["gpu"] for res in pcie["results"]] == [0, 1, 2, 3] and pcie["results"][1]["info"]


@pytest.mark.parametrize(
    "text, said",
    [
        ("", "no output"),
        (fixture("embedded_hostengine_failure.txt"), "no JSON"),
        (fixture("dcgm4_cut_short.txt"), "does not parse"),
        (fixture("dcgm4_runtime_error.json"), "did not run: Error: Unable to complete diagnostic"),
        ('{"DCGM Diagnostic": {"test_categories": []}}', "no test_categories"),
        ('{"nvbandwidth": {}}', "not dcgmi diag's"),
        (
            '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", '
            '"results": [{"entity_id": 0, "status": "Maybe"}]}]}]}}',
            "status 'Maybe'",
        ),
        (
            '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory", '
            '"results": [{"entity_id": 0}]}]}]}}',
            "no status",
        ),
    ],
)
def test_what_is_not_a_finished_run_raises(text, said):
    with pytest.raises(dd.DcgmDiagError, match=None) as exc:
        dd.parse(text)
    assert said in str(exc.value)


# --- the node's verdict -----------------------------------------------------------------------------------


def test_a_clean_run_passes_with_no_violation():
    out = judged("dcgm4_level2_pass.json")
    assert out["violations"] == [] and out["record"]["status"] == "passed"
    assert out["record"]["counts"] == {"Pass": 24, "Fail": 0, "Warn": 0, "Skip": 0}
    assert out["record"]["tests"][1] == {
        "category": "Hardware",
        "name": "memory",
        "status": "Pass",
        "results": {str(i): "Pass" for i in range(8)},
    }


def test_each_failed_test_is_a_violation_naming_the_gpu_the_test_and_dcgms_text():
    out = judged("dcgm4_level3_two_gpus_fail.json", rc=226, level=3)
    assert codes(out["violations"]) == [("DCGM_DIAG_FAILED", "error")] * 2
    first, second = (v["message"] for v in out["violations"])
    assert "GPU 2 failed test memory (Hardware): Found 4 faulty memory elements on GPU 2" in first
    assert "GPU 5 failed test targeted_power (Stress): Target power of 700.0 W" in second
    assert all(v["host"] == "gpu01" and v["field"] == "acceptance.dcgm_diag.level" for v in out["violations"])
    assert [(f["gpu"], f["test"]) for f in out["record"]["failures"]] == [(2, "memory"), (5, "targeted_power")]
    assert out["record"]["status"] == "failed"


def test_skips_pass_and_a_warn_result_is_a_warning():
    assert judged("dcgm4_level2_skips.json")["violations"] == []
    out = judged("variant_level2_warn.json")
    assert codes(out["violations"]) == [("DCGM_DIAG_WARNING", "warning")]
    assert "GPU 1 warned in test pcie" in out["violations"][0]["message"]
    assert out["record"]["status"] == "passed" and out["record"]["warnings"][0]["gpu"] == 1


def test_a_test_failing_in_its_summary_only_fails_the_node():
    out = judged("dcgm4_level1_node_failure.json", rc=226, level=1)
    assert codes(out["violations"]) == [("DCGM_DIAG_FAILED", "error")]
    assert "the node failed test software (Deployment): Persistence mode for GPU 0" in out["violations"][0]["message"]


def test_dcgm3_output_is_judged_too():
    assert judged("dcgm3_level3_pass.json", level=3)["violations"] == []
    out = judged("dcgm3_level3_deployment_fail.json", rc=226, level=3)
    assert codes(out["violations"]) == [("DCGM_DIAG_FAILED", "error")]
    assert "GPU 2 failed test Page Retirement/Row Remap (Deployment)" in out["violations"][0]["message"]


@pytest.mark.parametrize(
    "name, rc, said",
    [
        ("embedded_hostengine_failure.txt", 249, "exited with status 249: no JSON in the output"),
        ("dcgm4_cut_short.txt", 0, "JSON output that does not parse"),
        ("dcgm4_runtime_error.json", 226, "the diagnostic did not run"),
        # Every test passed but dcgmi says otherwise: not trusted as a pass.
        ("dcgm4_level2_pass.json", 226, "exited with status 226 although"),
    ],
)
def test_a_run_without_a_result_fails_the_node_and_is_never_a_pass(name, rc, said):
    out = judged(name, rc=rc)
    assert codes(out["violations"]) == [("DCGM_DIAG_RUN_FAILED", "error")]
    assert said in out["violations"][0]["message"] and out["record"]["status"] == "error"


def test_a_timeout_and_a_missing_dcgmi_fail_the_node():
    out = dd.judge("gpu01", level=3, path=PATH, present=True, rc=124, stdout="", timeout_s=3600)
    assert codes(out["violations"]) == [("DCGM_DIAG_RUN_FAILED", "error")]
    assert "timed out after 3600 s (level 3 normally takes about 15 minutes)" in out["violations"][0]["message"]
    out = dd.judge("gpu01", level=2, path=PATH, present=False)
    assert codes(out["violations"]) == [("DCGM_DIAG_RUN_FAILED", "error")]
    assert "no executable dcgmi at /usr/bin/dcgmi" in out["record"]["reason"]


def test_the_filter_reads_the_registered_result():
    result = {"rc": 226, "stdout": fixture("dcgm4_level3_two_gpus_fail.json"), "stderr": ""}
    out = dcgm_diag_judge(result, "gpu01", 3, PATH, True, timeout_s="3600")
    assert [f["gpu"] for f in out["record"]["failures"]] == [2, 5]
    # Skipped (no dcgmi): judged as absent.
    out = dcgm_diag_judge({"skipped": True}, "gpu01", 2, PATH, False)
    assert out["record"]["status"] == "error"
    with pytest.raises(AnsibleFilterError):
        dcgm_diag_judge("text", "gpu01", 2, PATH, True)


# --- the brief ----------------------------------------------------------------------------------------------


def brief_with(level=None, pool_level=None) -> dict:
    brief = {"acceptance": {}, "pools": [{"name": "h100"}, {"name": "l40s"}]}
    if level is not None:
        brief["acceptance"]["dcgm_diag"] = {"level": level}
    if pool_level is not None:
        brief["pools"][1]["acceptance"] = {"dcgm_diag": {"level": pool_level}}
    return brief


def test_the_level_is_off_by_default_and_a_pool_may_set_its_own():
    assert dd.level_for(brief_with(), "h100") is None
    assert dd.level_for(brief_with(2), "h100") == 2
    assert dd.level_for(brief_with(2, 1), "l40s") == 1 and dd.level_for(brief_with(2, 1), "h100") == 2
    assert dd.level_for(brief_with(None, 3), "l40s") == 3 and dd.level_for(brief_with(None, 3), "h100") is None
    assert dcgm_diag_level(brief_with(4), "h100") == 4
    with pytest.raises(AnsibleFilterError, match="expected one of 1, 2, 3, 4, found 5"):
        dcgm_diag_level(brief_with(5), "h100")


@pytest.mark.parametrize("level", [0, 5, "2", True])
def test_the_schema_refuses_a_level_outside_1_to_4(level):
    shape = schema.ACCEPTANCE.fields["dcgm_diag"].node
    out = []
    shape.check({"level": level}, "acceptance.dcgm_diag", out)
    assert out and out[0]["field"] == "acceptance.dcgm_diag.level", out
    pool_shape = schema.POOL_ACCEPTANCE.fields["dcgm_diag"].node
    out = []
    pool_shape.check({"level": level}, "pools[0].acceptance.dcgm_diag", out)
    assert out and out[0]["field"] == "pools[0].acceptance.dcgm_diag.level"


def test_the_schema_takes_levels_1_to_4():
    shape = schema.ACCEPTANCE.fields["dcgm_diag"].node
    for level in dd.LEVELS:
        out = []
        shape.check({"level": level}, "acceptance.dcgm_diag", out)
        assert out == []


# --- drain, report, history, CLI summary ------------------------------------------------------------------


def single(host: str, name: str, rc: int = 0, level: int = 2) -> dict:
    out = dd.judge(host, level=level, path=PATH, present=True, rc=rc, stdout=fixture(name))
    return {
        "label": f"single-node {host}",
        "scope": "single-node",
        "host": host,
        "pool": "h100",
        "floor_gbps": 400,
        "busbw": 445.0,
        "run": None,
        "ended": {"status": "completed", "rc": 0},
        "violations": out["violations"],
        "dcgm_diag": out["record"],
    }


def test_the_node_is_drained_with_the_gpu_and_the_test_as_the_reason():
    singles = [single("gpu01", "dcgm4_level2_pass.json"), single("gpu02", "dcgm4_level3_two_gpus_fail.json", 226, 3)]
    out = drain_list([], singles, stamp="20260101T000000Z")
    assert out == [
        {
            "host": "gpu02",
            "reason": "gpufleet acceptance: dcgmi diag -r 3 failed: GPU 2 memory, GPU 5 targeted_power "
            "(report 20260101T000000Z)",
        }
    ]
    crashed = single("gpu03", "embedded_hostengine_failure.txt", 249)
    (only,) = drain_list([], [crashed])
    assert only["reason"].startswith("gpufleet acceptance: dcgmi diag -r 2 gave no result: exited with status 249")


def test_the_report_shows_each_nodes_diagnostics_and_fails_the_verdict():
    runs = [single("gpu01", "dcgm4_level2_pass.json"), single("gpu02", "dcgm4_level3_two_gpus_fail.json", 226, 3)]
    # As tasks/report.yml hands them over: the single-node runs' violations counted in the verdict.
    violations = [v for r in runs for v in r["violations"]]
    report = build_report("lab", runs=runs, violations=violations, timestamp="20260101T000000Z")
    assert report["verdict"] == "fail" and report["counts"]["errors"] == 2
    assert report["runs"][1]["dcgm_diag"]["failures"][0]["gpu"] == 2
    md = render_markdown(report)
    section = md.split("## GPU diagnostics (dcgmi diag)")[1].split("\n## ")[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| gpu")]
    assert rows[0].startswith("| gpu01 | 2 | 4.2.3 | passed | 3 (software, memory, pcie) |")
    assert "| gpu02 | 3 | 4.2.3 | failed |" in rows[1]
    assert "GPU 2 memory Fail: Found 4 faulty memory elements on GPU 2; GPU 5 targeted_power Fail" in rows[1]


def test_the_report_module_keeps_each_runs_dcgm_record():
    from ansible_collections.gpufleet.cluster.plugins.modules.acceptance_report import plan_logs

    record = {**single("gpu01", "dcgm4_level2_pass.json"), "output": "all_reduce_perf output"}
    (entry,), _logs = plan_logs([record])
    assert entry["dcgm_diag"] == record["dcgm_diag"]


def test_no_section_without_records():
    report = build_report("lab", runs=[{"label": "all", "scope": "multi-node", "run": None}], timestamp="t")
    assert "GPU diagnostics" not in render_markdown(report)


def test_history_keeps_the_diagnostics_of_each_node():
    runs = [single("gpu01", "dcgm4_level2_pass.json"), single("gpu02", "dcgm4_level3_two_gpus_fail.json", 226, 3)]
    report = build_report(
        "lab",
        runs=runs,
        nodes=[{"host": "gpu01", "pool": "h100"}, {"host": "gpu02", "pool": "h100"}],
        timestamp="20260101T000000Z",
    )
    records = {r["host"]: r for r in history.acceptance_records(report, ["gpu01"], 90)}
    assert records["gpu01"]["dcgm_diag"] == {"level": 2, "status": "passed", "failed": []}
    assert records["gpu02"]["dcgm_diag"] == {
        "level": 3,
        "status": "failed",
        "failed": ["GPU 2 memory", "GPU 5 targeted_power"],
    }
    headers, rows = history.node_table([records["gpu02"]])
    assert "GPU diagnostics" in headers
    assert rows[0][headers.index("GPU diagnostics")] == "-r 3 failed: GPU 2 memory, GPU 5 targeted_power"


def test_the_cli_summary_names_the_failed_gpus():
    from gpufleet_cli.cmd_provision import dcgm_diag_summary

    runs = [single("gpu01", "dcgm4_level2_pass.json"), single("gpu02", "dcgm4_level2_pass.json")]
    assert dcgm_diag_summary({"runs": runs}) == "; GPU diagnostics (dcgmi diag -r 2): PASS on 2 node(s)"
    runs.append(single("gpu03", "dcgm4_level3_two_gpus_fail.json", 226, 3))
    assert dcgm_diag_summary({"runs": runs}) == (
        "; GPU diagnostics (dcgmi diag -r 2/3): FAIL on gpu03 (GPU 2 memory, GPU 5 targeted_power) of 3 node(s)"
    )
    assert dcgm_diag_summary({"runs": []}) == ""


def test_the_summary_filter_for_remediation():
    assert dcgm_diag_summary(single("gpu01", "dcgm4_level2_pass.json")["dcgm_diag"]) == "-r 2 passed"
    failed = single("gpu02", "dcgm4_level3_two_gpus_fail.json", 226, 3)["dcgm_diag"]
    assert dcgm_diag_summary(failed) == "-r 3 failed: GPU 2 memory, GPU 5 targeted_power"
    assert dcgm_diag_summary(None) is None


# --- preflight -----------------------------------------------------------------------------------------------


def test_preflight_warns_of_a_node_without_dcgm_where_its_pool_runs_diagnostics():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.catalogue import Pool
    from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.dcgm_diag import check_dcgm_diag
    from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.groups import PoolHosts, Pools

    brief = brief_with(None, 2)
    h100, l40s = (Pool(i, p, None, None) for i, p in enumerate(brief["pools"]))
    pools = Pools(
        members=(PoolHosts(h100, ("gpu01",)), PoolHosts(l40s, ("gpu02", "gpu03"))),
        host_pool={"gpu01": h100, "gpu02": l40s, "gpu03": l40s},
        controllers=(),
    )
    hostvars = {"gpu01": {"dcgm_packages": []}, "gpu02": {"dcgm_packages": []}, "gpu03": {}}
    out = check_dcgm_diag(brief, hostvars, pools)
    assert [(v["code"], v["severity"], v["host"], v["field"]) for v in out] == [
        ("ACCEPT_DCGM_DIAG_NO_DCGM", "warning", "gpu02", "dcgm_packages")
    ]
    assert "pools[1] (l40s), which runs dcgmi diag -r 2" in out[0]["message"]
    # The gate off: nothing to warn of.
    assert check_dcgm_diag(brief_with(), hostvars, pools) == []


# --- the test double ------------------------------------------------------------------------------------


def double(profile: str, *args: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, DOUBLE, *args],
        capture_output=True,
        text=True,
        check=False,
        env={
            **os.environ,
            "GPUFLEET_HW_PROFILE": profile_path(profile),
            "GPUFLEET_DCGMI_SECONDS_PER_LEVEL": "0",
            **env,
        },
    )


@pytest.mark.parametrize("level, tests", [(1, 1), (2, 3), (3, 7), (4, 9)])
def test_the_double_runs_each_levels_tests_and_its_json_parses(level, tests):
    p = double("h100-hgx-healthy", "diag", "-r", str(level), "-j")
    assert p.returncode == 0, p.stdout + p.stderr
    out = dd.judge("gpu01", level=level, path=PATH, present=True, rc=p.returncode, stdout=p.stdout)
    assert out["violations"] == [] and len(out["record"]["tests"]) == tests
    assert out["record"]["gpus"] == list(range(8)) and out["record"]["layout"] == "dcgm4"


def test_the_double_plants_the_profiles_failing_test():
    p = double("h100-dcgm-memory-fail", "diag", "-r", "2", "-j")
    assert p.returncode == 226
    out = dd.judge("gpu03", level=2, path=PATH, present=True, rc=p.returncode, stdout=p.stdout)
    assert [(f["gpu"], f["test"]) for f in out["record"]["failures"]] == [(3, "memory")]
    assert "Found 6 faulty memory elements on GPU 3" in out["violations"][0]["message"]
    # Level 1 runs no memory test: the planted fault is not seen there, as on real hardware.
    p = double("h100-dcgm-memory-fail", "diag", "-r", "1", "-j")
    assert p.returncode == 0
    with open(profile_path("h100-dcgm-memory-fail"), encoding="utf-8") as fh:
        assert json.load(fh)["fault"]["code"] == "DCGM_DIAG_FAILED"


def test_the_double_without_a_host_engine_prints_no_json(tmp_path):
    with open(profile_path("h100-hgx-healthy"), encoding="utf-8") as fh:
        profile = json.load(fh)
    profile["dcgm_diag"] = {"hostengine": False}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile))
    p = subprocess.run(
        [sys.executable, DOUBLE, "diag", "-r", "2", "-j"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GPUFLEET_HW_PROFILE": str(path), "GPUFLEET_DCGMI_SECONDS_PER_LEVEL": "0"},
    )
    assert p.returncode == 249 and p.stdout.startswith("Error: Unable to start an embedded host engine.")
    out = dd.judge("gpu01", level=2, path=PATH, present=True, rc=p.returncode, stdout=p.stdout)
    assert codes(out["violations"]) == [("DCGM_DIAG_RUN_FAILED", "error")]


def test_the_double_refuses_what_dcgmi_refuses():
    assert double("h100-hgx-healthy", "diag", "-r", "7", "-j").returncode == 255
    assert double("h100-hgx-healthy", "diag", "--bogus").returncode == 255


def test_the_remediation_report_shows_the_diagnostics_beside_the_acceptance():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.ops.drift import remediation_markdown

    failed = single("gpu02", "dcgm4_level3_two_gpus_fail.json", 226, 3)["dcgm_diag"]
    report = {
        "kind": "remediation",
        "schema": 1,
        "cluster": "lab",
        "nodes": {
            "gpu01": {"outcome": "resumed", "gate": "pass", "acceptance": "pass", "dcgm_diag": "-r 3 passed"},
            "gpu02": {
                "outcome": "drained",
                "gate": "pass",
                "acceptance": "fail",
                "dcgm_diag": dcgm_diag_summary(failed),
                "reason": "single-node NCCL acceptance failed",
            },
            "gpu03": {"outcome": "resumed", "gate": "pass", "acceptance": "pass"},
        },
    }
    md = remediation_markdown(report)
    assert "| pass (GPU diagnostics -r 3 passed) |" in md.split("| gpu01 |")[1].splitlines()[0]
    gpu02 = md.split("| gpu02 |")[1].splitlines()[0]
    assert "| fail (GPU diagnostics -r 3 failed: GPU 2 memory, GPU 5 targeted_power) |" in gpu02
    assert "GPU diagnostics" not in md.split("| gpu03 |")[1].splitlines()[0]
