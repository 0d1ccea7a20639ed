"""Workload acceptance: the output format, the brief's spec, the sbatch line, the judgement; the preflight
codes of acceptance.workload; and the test suite's training loop (tests/workload/train.py) run for real."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.workload import (
    workload_evaluate,
    workload_parse,
    workload_sbatch_argv,
    workload_spec,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import workload as wl
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import build_report, render_markdown
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.schema import validate
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import load_yaml_file
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import check
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import DELETE, set_path, site

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", "..", "..", "..", ".."))
TRAIN = os.path.join(REPO, "tests", "workload", "train.py")

FIRST = """\
+ mkdir -p /var/lib/gpufleet-workload/x
gpufleet-workload event=start step=0 time=1000.000
gpufleet-workload step=40 samples_per_s=2500.0 loss=0.5 time=1001.000
gpufleet-workload step=95 samples_per_s=3500.5 loss=0.1 time=1002.000
gpufleet-workload event=checkpoint step=95 time=1002.010
0: gpufleet-workload step=150 samples_per_s=3000.0 loss=0.05 time=1003.000
slurmstepd: error: *** JOB 12 ON lab-gpu01 CANCELLED AT 2026-11-30T10:00:00 ***
"""
SECOND = """\
gpufleet-workload event=resumed step=95 time=1010.500
gpufleet-workload step=160 samples_per_s=3100.0 loss=0.04 time=1011.500
"""


# --- output ------------------------------------------------------------------------------------------


def test_parse_line():
    assert wl.parse_line("gpufleet-workload step=3 samples_per_s=10.5 time=1.5 loss=0.2 rank=0") == {
        "step": 3,
        "samples_per_s": 10.5,
        "time": 1.5,
        "loss": 0.2,
        "rank": "0",
    }
    assert wl.parse_line("0: gpufleet-workload event=resumed step=7 time=2")["event"] == "resumed"
    for line in ("gpufleet-workload", "gpufleet-workload step=x", "other step=3", "xgpufleet-workload step=1", ""):
        assert wl.parse_line(line) is None, line


def test_parse_output():
    one = wl.parse_output(FIRST)
    assert [p["step"] for p in one["progress"]] == [40, 95, 150]
    assert one["throughput"] == {
        "median": 3000.0,
        "mean": pytest.approx(3000.1666, rel=1e-4),
        "last": 3000.0,
        "lines": 3,
    }
    assert one["last_checkpoint_step"] == 95 and one["last_step"] == 150 and one["resumed_step"] is None
    two = wl.parse_output(SECOND)
    assert two["resumed_step"] == 95 and two["first_step"] == 160 and two["first_step_time"] == 1011.5
    empty = wl.parse_output("Traceback (most recent call last):\n")
    assert empty["progress"] == [] and empty["throughput"]["median"] is None
    assert workload_parse(None)["throughput"]["lines"] == 0


# --- the brief's spec and the submission ------------------------------------------------------------


def lab_brief() -> dict:
    return load_yaml_file(os.path.join(REPO, "inventories", "lab", "brief.yml"))


def test_spec_of_the_lab():
    spec = wl.workload_spec(lab_brief())
    assert spec["command"] == "python3 /opt/gpufleet-workload/train.py"
    assert spec["partition"] == "h100-lab" and spec["gpus"] == 1 and not spec["image"]
    assert spec["window_s"] == pytest.approx(9) and spec["shared"] is False
    assert spec["min_samples_per_s"] == 1000 and spec["max_restore_s"] == 60


def test_spec_defaults_shared_and_absent():
    brief = lab_brief()
    brief["acceptance"]["workload"] = {"command": "train", "checkpoint_dir": "/shared/ckpt/run"}
    brief["storage"] = {"shared": [{"server": "s", "export": "/e", "path": "/shared/ckpt"}]}
    spec = wl.workload_spec(brief)
    assert spec["partition"] == "h100-lab" and spec["window_minutes"] == 10 and spec["shared"] is True
    del brief["acceptance"]["workload"]
    assert wl.workload_spec(brief) is None
    with pytest.raises(AnsibleFilterError):
        workload_spec([])
    brief["acceptance"]["workload"] = {"command": "x"}
    with pytest.raises(AnsibleFilterError, match="checkpoint_dir"):
        workload_spec(brief)


def test_sbatch_argv_host_stack_pinned():
    spec = wl.workload_spec(lab_brief())
    argv = workload_sbatch_argv(spec, "gf", "/var/tmp/o-%j.out", "/var/lib/w/run1", nodelist="lab-gpu01")
    assert argv[:2] == ["sbatch", "--parsable"]
    for arg in (
        "--job-name=gf",
        "--nodes=1",
        "--output=/var/tmp/o-%j.out",
        "--partition=h100-lab",
        "--gres=gpu:1",
        "--nodelist=lab-gpu01",
        # the lab brief's dataset sample and base weights, where the acceptance downloads them
        "--export=ALL,GPUFLEET_CHECKPOINT_DIR=/var/lib/w/run1,"
        "GPUFLEET_DATASET=/var/lib/gpufleet-workload-data/sample.csv,"
        "GPUFLEET_WEIGHTS=/var/lib/gpufleet-workload-data/base-weights.json",
    ):
        assert arg in argv, (arg, argv)
    assert not any(a.startswith("--container-image") for a in argv)
    assert argv[-1] == "--wrap=mkdir -p '/var/lib/w/run1' && python3 /opt/gpufleet-workload/train.py"


def test_sbatch_argv_with_the_production_image():
    spec = dict(
        wl.workload_spec(lab_brief()),
        image="nvcr.io#nvidia/pytorch:25.01-py3",
        dataset="/data/sample",
        weights="/models/w",
    )
    argv = wl.sbatch_argv(
        spec,
        job_name="gf",
        output="/o",
        checkpoint_dir="/c/r",
        container_mounts="/etc/x:/etc/x",
        extra_args=["-A", "t"],
    )
    assert "--container-image=nvcr.io#nvidia/pytorch:25.01-py3" in argv
    assert "--container-mounts=/etc/x:/etc/x,/c/r:/c/r,/data/sample:/data/sample,/models/w:/models/w" in argv
    assert "--export=ALL,GPUFLEET_CHECKPOINT_DIR=/c/r,GPUFLEET_DATASET=/data/sample,GPUFLEET_WEIGHTS=/models/w" in argv
    assert argv[-3:-1] == ["-A", "t"] and not any(a.startswith("--nodelist") for a in argv)
    with pytest.raises(wl.WorkloadError):
        wl.sbatch_argv(spec, job_name="gf", output="/o", checkpoint_dir="/c,d")
    with pytest.raises(AnsibleFilterError):
        workload_sbatch_argv("x", "gf", "/o", "/c")


def test_sbatch_argv_time_limit_in_whole_minutes_before_the_sites_own_args():
    spec = wl.workload_spec(lab_brief())
    argv = workload_sbatch_argv(spec, "gf", "/o", "/c", extra_args=["--time=90"], time_limit_s=609.0)
    # 609 s is 10.15 minutes: Slurm's --time counts minutes, rounded up so the job is never cut short.
    assert [a for a in argv if a.startswith("--time=")] == ["--time=11", "--time=90"]
    assert argv.index("--time=11") < argv.index("--time=90")  # sbatch takes the last: the site's
    assert "--time=1" in wl.sbatch_argv(spec, job_name="gf", output="/o", checkpoint_dir="/c", time_limit_s=5)
    assert not any(a.startswith("--time") for a in workload_sbatch_argv(spec, "gf", "/o", "/c"))
    with pytest.raises(AnsibleFilterError, match="expected more than 0 s, found 0"):
        workload_sbatch_argv(spec, "gf", "/o", "/c", time_limit_s=0)


# --- the judgement -------------------------------------------------------------------------------------


def jobs(first=FIRST, second=SECOND, submit=1009.0):
    return (
        {"job_id": "12", "node": "lab-gpu01", "state": "RUNNING", "output": first, "submit_time": 1000.0},
        {"job_id": "13", "node": "lab-gpu01", "state": "RUNNING", "output": second, "submit_time": submit},
    )


def spec(**kw):
    return dict(wl.workload_spec(lab_brief()), **kw)


def test_evaluate_pass():
    got = workload_evaluate(*jobs(), spec())
    assert got["verdict"] == "pass" and got["violations"] == []
    assert got["throughput_samples_per_s"] == 3000.0 and got["resumed_step"] == 95
    assert got["restore_s"] == pytest.approx(2.5) and got["last_checkpoint_step"] == 95
    # FIRST's start line names no inputs; a job that names them has them recorded.
    assert got["started_from"] == {}
    said = FIRST.replace("event=start step=0", "event=start step=0 dataset=/d/s.csv weights=/d/w.json samples=64")
    got = workload_evaluate(*jobs(first=said), spec())
    assert got["started_from"] == {"dataset": "/d/s.csv", "weights": "/d/w.json", "samples": 64}


@pytest.mark.parametrize(
    ("args", "kw", "code", "text"),
    [
        ({}, {"min_samples_per_s": 5000}, "WORKLOAD_BELOW_FLOOR", "expected >= 5000 samples/s, measured 3000"),
        ({}, {"max_restore_s": 1}, "WORKLOAD_RESTORE_SLOW", "within 1 s of the submission, measured 2.5 s"),
        ({"first": "python3: can't open file\n"}, {}, "WORKLOAD_NO_THROUGHPUT", "can't open file"),
        ({"second": FIRST}, {}, "WORKLOAD_NOT_RESUMED", "found it started at step 40"),
        ({"second": "Traceback\n"}, {}, "WORKLOAD_NOT_RESUMED", "found no 'gpufleet-workload event=resumed"),
        (
            {
                "second": "gpufleet-workload event=resumed step=0 time=1\n"
                "gpufleet-workload step=5 samples_per_s=1 time=2\n"
            },
            {},
            "WORKLOAD_NOT_RESUMED",
            "found it started at step 5",
        ),
        (
            {"second": "gpufleet-workload event=resumed step=95 time=1010\n"},
            {},
            "WORKLOAD_NOT_RESUMED",
            "printed no progress line",
        ),
    ],
)
def test_evaluate_failures(args, kw, code, text):
    got = workload_evaluate(*jobs(**args), spec(**kw))
    assert got["verdict"] == "fail"
    assert [v["code"] for v in got["violations"]] == [code]
    assert text in got["violations"][0]["message"]
    assert got["violations"][0]["severity"] == "error"


def test_evaluate_jobs_that_did_not_run():
    first, second = jobs()
    got = wl.evaluate(
        dict(first, error="job 12 did not start within 300 s: JobState=PENDING Reason=Resources"), {}, spec()
    )
    assert [v["code"] for v in got["violations"]] == ["WORKLOAD_NOT_RUN"] and "Reason=Resources" in got["violations"][
        0
    ]["message"]
    got = wl.evaluate(first, dict(second, error="job 13 did not start"), spec())
    assert [v["code"] for v in got["violations"]] == ["WORKLOAD_NOT_RESUMED"]
    with pytest.raises(AnsibleFilterError):
        workload_evaluate(first, None, {})


def test_report_workload_section():
    got = wl.evaluate(*jobs(), spec())
    workload = dict(got, spec=spec(), jobs=list(jobs()))
    report = build_report("lab", runs=[], workload=workload, violations=got["violations"], nccl=False)
    assert report["verdict"] == "pass"
    md = render_markdown(report)
    assert "## Workload" in md and "| resumed at step | 95 | > 0 |" in md
    assert "| restore: resubmission to first step (s) | 2.50 | 60 |" in md and "12@lab-gpu01" in md
    skipped = build_report("lab", runs=[], workload={"skipped": "check mode", "violations": []}, nccl=False)
    assert skipped["verdict"] == "fail"  # nothing was tested
    assert "Not run: check mode." in render_markdown(skipped)


# --- preflight: acceptance.workload --------------------------------------------------------------------------

WORKLOAD = {"command": "python3 train.py", "checkpoint_dir": "/shared/ckpt/wl", "window_minutes": 0.5}


def good():
    brief, groups, hostvars = site("slurm")
    brief["storage"] = {"shared": [{"server": "10.20.8.50", "export": "/export/ckpt", "path": "/shared/ckpt"}]}
    brief["acceptance"]["workload"] = copy.deepcopy(WORKLOAD)
    return brief, groups, hostvars


def ours(found):
    return [v for v in found if v["code"].startswith("ACC_WORKLOAD") or "workload" in (v["field"] or "")]


def test_the_workload_section_passes_and_is_optional():
    brief, groups, hostvars = good()
    assert ours(check(brief, groups, hostvars)) == []
    schema, clean = validate(brief)
    assert not schema and clean["acceptance"]["workload"]["window_minutes"] == 0.5
    del brief["acceptance"]["workload"]
    assert ours(check(brief, groups, hostvars)) == []


def _pool_name():
    return site("slurm")[0]["pools"][0]["name"]


CASES = [
    ("no-command", "acceptance.workload.command", DELETE, "SCHEMA_MISSING_KEY", "error"),
    ("no-checkpoint", "acceptance.workload.checkpoint_dir", DELETE, "SCHEMA_MISSING_KEY", "error"),
    ("relative-checkpoint", "acceptance.workload.checkpoint_dir", "ckpt", "SCHEMA_BAD_FORMAT", "error"),
    ("zero-window", "acceptance.workload.window_minutes", 0, "SCHEMA_OUT_OF_RANGE", "error"),
    ("unknown-key", "acceptance.workload.replicas", 2, "SCHEMA_UNKNOWN_KEY", "error"),
    ("negative-floor", "acceptance.workload.min_samples_per_s", -1, "SCHEMA_OUT_OF_RANGE", "error"),
    ("partition-unknown", "acceptance.workload.partition", "nope", "ACC_WORKLOAD_PARTITION_UNKNOWN", "warning"),
    ("gpus-above-pool", "acceptance.workload.gpus", 72, "ACC_WORKLOAD_GPUS_ABOVE_POOL", "error"),
    ("ftp-dataset", "acceptance.workload.dataset_url", "ftp://mirror/x.csv", "SCHEMA_BAD_FORMAT", "error"),
    ("short-sha", "acceptance.workload.weights_sha256", "abc", "SCHEMA_BAD_FORMAT", "error"),
    (
        "url-without-checksum",
        "acceptance.workload.dataset_url",
        "https://files.example.com/s.csv",
        "ACC_WORKLOAD_SOURCE_INCOMPLETE",
        "error",
    ),
    (
        "local-ckpt",
        "acceptance.workload.checkpoint_dir",
        "/var/lib/wl",
        "ACC_WORKLOAD_CHECKPOINT_NOT_SHARED",
        "warning",
    ),
    (
        "job-scratch-ckpt",
        "acceptance.workload.checkpoint_dir",
        "/scratch/local/jobs/ckpt",
        "ACC_WORKLOAD_CHECKPOINT_ON_JOB_SCRATCH",
        "error",
    ),
]


def test_on_kubernetes_the_workload_needs_a_tenant_of_its_pool():
    brief, groups, hostvars = good()
    brief["cluster"]["control_plane"] = "kubernetes"
    pool = brief["acceptance"]["workload"].get("partition") or _pool_name()
    brief["tenants"] = [{"name": "a", "gpus": 1, "pools": ["elsewhere"]}]
    found = [v for v in check(brief, groups, hostvars) if v["code"] == "ACC_WORKLOAD_NO_TENANT"]
    assert [(v["field"], v["severity"]) for v in found] == [("acceptance.workload.partition", "error")]
    assert (
        f"expected a tenant whose pools include {pool}" in found[0]["message"]
        and "a (elsewhere)" in found[0]["message"]
    )
    brief["tenants"] = [{"name": "a", "gpus": 1}]  # no pools: every pool
    assert [v for v in check(brief, groups, hostvars) if v["code"].startswith("ACC_WORKLOAD_N")] == []
    brief["cluster"]["control_plane"] = "slurm"
    brief["tenants"] = [{"name": "a", "gpus": 1, "pools": ["elsewhere"]}]
    assert [v for v in check(brief, groups, hostvars) if v["code"] == "ACC_WORKLOAD_NO_TENANT"] == []


@pytest.mark.parametrize(("path", "value", "code", "severity"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_workload_problem_is_reported_with_its_field(path, value, code, severity):
    brief, groups, hostvars = good()
    set_path(brief, path, value)
    found = [v for v in check(brief, groups, hostvars) if v["code"] == code]
    assert found, f"expected {code} for {path}={value!r}"
    assert all(v["severity"] == severity for v in found), found
    assert all(v["field"].startswith("acceptance.workload") and v["message"] for v in found), found


def test_a_download_needs_its_node_path_and_checksum():
    brief, groups, hostvars = good()
    wl = brief["acceptance"]["workload"]
    for key in ("dataset", "dataset_sha256", "weights", "weights_sha256", "weights_url"):
        wl.pop(key, None)
    wl["dataset_url"] = "https://models.example.com/sample.csv"
    wl["weights_sha256"] = "0" * 64
    found = {v["field"]: v for v in check(brief, groups, hostvars) if v["code"] == "ACC_WORKLOAD_SOURCE_INCOMPLETE"}
    assert sorted(found) == ["acceptance.workload.dataset_url", "acceptance.workload.weights_sha256"]
    assert all(v["severity"] == "error" for v in found.values())
    assert found["acceptance.workload.dataset_url"]["message"] == (
        "expected the dataset download complete (URL, node path and SHA-256), found no "
        "acceptance.workload.dataset and acceptance.workload.dataset_sha256"
    )
    assert found["acceptance.workload.weights_sha256"]["message"].endswith("found no acceptance.workload.weights_url")
    wl.update(
        dataset="/data/sample.csv", dataset_sha256="a" * 64, weights="/data/w.json", weights_url="file:///srv/w.json"
    )
    assert ours(check(brief, groups, hostvars)) == []


def test_gpus_within_the_named_pool_pass():
    brief, groups, hostvars = good()
    brief["acceptance"]["workload"].update(partition=_pool_name(), gpus=brief["pools"][0]["gpus_per_node"])
    assert ours(check(brief, groups, hostvars)) == []


def test_the_lab_brief_only_warns_that_its_checkpoints_are_local():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import load_inventory

    inv = load_inventory(os.path.join(REPO, "inventories", "lab", "hosts.yml"))
    found = ours(check(lab_brief(), inv.groups, inv.hostvars))
    assert [(v["code"], v["severity"]) for v in found] == [("ACC_WORKLOAD_CHECKPOINT_NOT_SHARED", "warning")]


# --- the training loop, for real ------------------------------------------------------------------------------


def train(ckpt, *args, timeout=60):
    return subprocess.run(
        [sys.executable, TRAIN, "--checkpoint-dir", str(ckpt), "--report-every-s", "0", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    ).stdout


def test_train_checkpoints_and_resumes(tmp_path):
    ckpt = tmp_path / "ckpt"
    first = wl.parse_output(train(ckpt, "--max-steps", "60", "--checkpoint-every-s", "0"))
    assert first["events"][0]["event"] == "start" and first["resumed_step"] is None
    assert first["last_step"] == 60 and first["last_checkpoint_step"] == 60
    assert first["throughput"]["median"] > 0
    assert sorted(os.listdir(ckpt)) == ["checkpoint.json"]  # the temporary file was renamed
    second = wl.parse_output(train(ckpt, "--max-steps", "90"))
    assert second["resumed_step"] == 60 and second["first_step"] == 61 and second["last_step"] == 90
    losses_first = [p["loss"] for p in first["progress"]]
    # It learns: the loss after resuming is well below where it started.
    assert second["progress"][-1]["loss"] < losses_first[0] / 10


def test_train_resumed_past_its_window_still_steps_once(tmp_path):
    """A pod replaced after the window ran out (its last checkpoint already holds the whole window) still
    steps and reports once after resuming, so the restore is measured, then ends the job."""
    ckpt = tmp_path / "ckpt"
    train(ckpt, "--window-s", "0.3", "--checkpoint-every-s", "0")
    state = json.loads((ckpt / "checkpoint.json").read_text())
    assert state["trained_s"] >= 0.3
    out = wl.parse_output(train(ckpt, "--window-s", "0.3"))
    assert out["resumed_step"] == state["step"]
    assert out["first_step_time"] is not None and out["last_step"] > state["step"]
    assert [e["event"] for e in out["events"]][-1] == "done"


def test_train_reads_a_dataset_and_the_environment(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("".join(f"{x},{2 * x + 1}\n" for x in range(-5, 6)))
    env = dict(os.environ, GPUFLEET_CHECKPOINT_DIR=str(tmp_path / "c"), GPUFLEET_DATASET=str(data))
    out = subprocess.run(
        [sys.executable, TRAIN, "--max-steps", "5", "--report-every-s", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    ).stdout
    assert wl.parse_output(out)["last_step"] == 5
    with open(tmp_path / "c" / "checkpoint.json", encoding="utf-8") as fh:
        assert '"weights": [' in fh.read()


def test_train_starts_from_base_weights_and_says_what_it_read(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("".join(f"{x},{2 * x + 1}\n" for x in range(-5, 6)))
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"weights": [2.0], "bias": 1.0}))
    out = train(tmp_path / "c", "--dataset", str(data), "--weights", str(base), "--max-steps", "3")
    start = wl.parse_output(out)["events"][0]
    assert (start["event"], start["dataset"], start["weights"], start["samples"]) == (
        "start",
        str(data),
        str(base),
        11,
    )
    # Started at the exact solution: the loss is zero from the first step.
    assert wl.parse_output(out)["progress"][0]["loss"] < 1e-9
    base.write_text(json.dumps({"weights": [1.0, 2.0], "bias": 0}))
    with pytest.raises(subprocess.CalledProcessError) as exc:
        train(tmp_path / "d", "--dataset", str(data), "--weights", str(base), "--max-steps", "3")
    assert "has 2 weights, the data 1" in exc.value.stderr


def test_train_killed_resumes_from_the_last_checkpoint(tmp_path):
    """SIGKILL mid-run (scancel's last resort): the next run resumes at the last checkpoint it announced."""
    ckpt = tmp_path / "ckpt"
    proc = subprocess.Popen(
        [
            sys.executable,
            TRAIN,
            "--checkpoint-dir",
            str(ckpt),
            "--report-every-s",
            "0.2",
            "--checkpoint-every-s",
            "0.3",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if sum("event=checkpoint" in ln for ln in lines) >= 2:
                break
    finally:
        proc.kill()
        proc.wait(timeout=10)
    announced = wl.parse_output("".join(lines))["last_checkpoint_step"]
    assert announced and announced > 0
    resumed = wl.parse_output(train(ckpt, "--max-steps", str(announced + 1)))["resumed_step"]
    assert resumed >= announced


def test_parse_scontrol_job_line():
    line = (
        "JobId=42 JobName=gpufleet-acceptance-workload UserId=root(0) GroupId=root(0) Priority=1 "
        "JobState=PENDING Reason=Resources Dependency=(null) NodeList=(null) "
        "Command=(null) WorkDir=/root with space StdErr=/var/tmp/gpufleet-workload-42.out "
        "StdOut=/var/tmp/gpufleet-workload-42.out TresPerNode=gres:gpu:1\n"
    )
    job = wl.parse_job(line)
    assert job["JobId"] == "42" and job["JobState"] == "PENDING" and job["Reason"] == "Resources"
    assert job["NodeList"] == "(null)" and job["StdOut"] == "/var/tmp/gpufleet-workload-42.out"
    assert job["WorkDir"] == "/root with space" and job["TresPerNode"] == "gres:gpu:1"
    assert wl.parse_job("slurm_load_jobs error: Invalid job id specified\n") == {}
    assert wl.parse_job("") == {}


def test_evaluate_warns_when_it_resumes_from_an_older_checkpoint():
    older = SECOND.replace("event=resumed step=95", "event=resumed step=40")
    got = wl.evaluate(*jobs(second=older), spec())
    assert got["verdict"] == "pass" and got["resumed_step"] == 40
    assert [(v["code"], v["severity"]) for v in got["violations"]] == [("WORKLOAD_RESUMED_OLDER", "warning")]
    assert "(step 95), found step 40" in got["violations"][0]["message"]
