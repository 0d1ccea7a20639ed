"""Storage acceptance: fio's JSON (captured from real fio runs), the checkpoint round trip (for real, in a
temporary directory), the judgement against acceptance.storage, the storage_bench module, the report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from unittest.mock import patch

import pytest
from ansible.errors import AnsibleFilterError
from ansible.module_utils import basic
from ansible_collections.gpufleet.cluster.plugins.filter.storage_acceptance import (
    storage_evaluate,
    storage_not_tested,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import build_report, render_markdown
from ansible_collections.gpufleet.cluster.plugins.module_utils.storage import acceptance as sa
from ansible_collections.gpufleet.cluster.plugins.modules import acceptance_report, storage_bench
from module_helpers import ExitJson, FailJson, module_args

HERE = os.path.dirname(os.path.abspath(__file__))
FIO = os.path.join(HERE, "fixtures", "fio")


def fixture(name: str) -> str:
    with open(os.path.join(FIO, name), encoding="utf-8") as fh:
        return fh.read()


# --- fio --------------------------------------------------------------------------------------------

# (fixture, direction, bytes, jobs): real fio runs (docs: how each was captured is in fixtures/fio/README.md).
FIO_CASES = [
    ("debian12-ext4-write.json", "write", 64 << 20, 1),
    ("debian12-ext4-read.json", "read", 64 << 20, 1),
    ("lab-overlay-write.json", "write", 64 << 20, 1),
    ("lab-overlay-read.json", "read", 64 << 20, 1),
]


@pytest.mark.parametrize(("name", "direction", "size", "jobs"), FIO_CASES, ids=[c[0] for c in FIO_CASES])
def test_parse_real_fio_runs(name, direction, size, jobs):
    text = fixture(name)
    raw = json.loads(text[text.index("{") :])
    part = raw["jobs"][0][direction]
    got = sa.parse_fio(text, direction)
    assert got["ok"], got
    assert got["error"] is None
    assert got["version"].startswith("fio-3.")
    assert got["jobs"] == jobs
    assert got["bytes"] == size == part["io_bytes"]
    assert got["gbps"] == pytest.approx(part["bw_bytes"] / 1e9)
    assert got["runtime_s"] == pytest.approx(part["runtime"] / 1000)
    assert got["gbps"] > 0 and got["lat_mean_ms"] > 0
    # The other direction of the same run moved nothing: it is not a result.
    other = sa.parse_fio(text, "read" if direction == "write" else "write")
    assert not other["ok"] and "transferred nothing" in other["error"]


def test_parse_fio_sums_jobs_without_group_reporting():
    text = fixture("debian12-ext4-write.json")
    data = json.loads(text)
    job = data["jobs"][0]
    data["jobs"] = [job, json.loads(json.dumps(job))]
    got = sa.parse_fio("note: both iodepth >= 1 and synchronous I/O engine are selected\n" + json.dumps(data), "write")
    assert got["ok"] and got["jobs"] == 2
    assert got["bytes"] == 2 * job["write"]["io_bytes"]
    assert got["gbps"] == pytest.approx(2 * job["write"]["bw_bytes"] / 1e9)


def test_parse_fio_failures():
    got = sa.parse_fio(fixture("missing-directory.txt"), "write")
    assert not got["ok"] and "no JSON" in got["error"] and "is not a directory" in got["error"]
    assert "no output" in sa.parse_fio("", "read")["error"]
    assert "does not parse" in sa.parse_fio('{"jobs": [', "read")["error"]
    assert "no job" in sa.parse_fio('{"jobs": []}', "read")["error"]
    data = json.loads(fixture("debian12-ext4-write.json"))
    data["jobs"][0]["error"] = 22
    got = sa.parse_fio(json.dumps(data), "write")
    assert not got["ok"] and "error 22" in got["error"]
    with pytest.raises(ValueError):
        sa.parse_fio("{}", "trim")


def test_fio_argv_write_then_read_the_same_files():
    w = sa.fio_argv("/scratch/local/x", "write", size="64M", numjobs=2, iodepth=8, direct=False, runtime_s=10)
    r = sa.fio_argv("/scratch/local/x", "read", size="64M", numjobs=2, iodepth=8, direct=False, runtime_s=10)
    assert w[0] == "fio" and "--rw=write" in w and "--rw=read" in r
    assert "--end_fsync=1" in w and "--end_fsync=1" not in r
    assert w[-1] == r[-1] == "--output-format=json"
    for arg in ("--name=gpufleet-seq", "--directory=/scratch/local/x", "--size=64M", "--numjobs=2", "--direct=0"):
        assert arg in w and arg in r
    assert "--invalidate=1" in r
    with pytest.raises(ValueError):
        sa.fio_argv("/x", "randwrite")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("64M", 64 << 20), ("8G", 8 << 30), ("1.5g", int(1.5 * (1 << 30))), ("4096", 4096), (512, 512), ("2GiB", 2 << 30)],
)
def test_size_bytes(value, expected):
    assert sa.size_bytes(value) == expected


@pytest.mark.parametrize("value", ["lots", "", "8X", True])
def test_size_bytes_rejects(value):
    with pytest.raises(ValueError):
        sa.size_bytes(value)


# --- the checkpoint round trip, for real ----------------------------------------------------------------


def test_checkpoint_roundtrip_verifies_and_times(tmp_path):
    got = sa.checkpoint_roundtrip(str(tmp_path), 5 << 20, chunk=1 << 20, drop_caches=str(tmp_path / "no" / "such"))
    assert got["verified"]
    assert got["size_bytes"] == got["read_bytes"] == 5 << 20
    assert got["sha256_written"] == got["sha256_read"] and len(got["sha256_read"]) == 64
    assert got["write_s"] > 0 and got["read_s"] > 0 and got["write_gbps"] > 0 and got["read_gbps"] > 0
    # drop_caches could not be written: recorded, not failed; the file's pages were evicted with fadvise.
    assert not got["caches_dropped"] and got["fadvise"]
    assert "caches not dropped" in got["caches_note"]
    assert not os.listdir(tmp_path)  # removed


def test_checkpoint_roundtrip_drops_caches_where_permitted(tmp_path):
    fake = tmp_path / "drop_caches"
    fake.write_text("")
    got = sa.checkpoint_roundtrip(str(tmp_path), 4096, drop_caches=str(fake))
    assert got["caches_dropped"] and fake.read_text() == "3\n"
    assert got["verified"]


def test_checkpoint_roundtrip_detects_corruption(tmp_path):
    real_read = os.read
    flipped = []

    def corrupt(fd, n):
        data = real_read(fd, n)
        if data and not flipped:
            flipped.append(True)
            return bytes([data[0] ^ 0xFF]) + data[1:]
        return data

    with patch.object(sa.os, "read", corrupt):
        got = sa.checkpoint_roundtrip(str(tmp_path), 1 << 20, drop_caches=None)
    assert flipped and not got["verified"]
    assert got["sha256_written"] != got["sha256_read"]
    v = sa.evaluate({"host": "n1", "targets": [], "checkpoint": dict(got, status="measured")}, {})
    assert [x["code"] for x in v] == ["STORAGE_CHECKSUM_MISMATCH"] and v[0]["host"] == "n1"


def test_checkpoint_roundtrip_misuse(tmp_path):
    with pytest.raises(ValueError):
        sa.checkpoint_roundtrip(str(tmp_path), 0)
    with pytest.raises(OSError):
        sa.checkpoint_roundtrip(str(tmp_path / "absent"), 10)


# --- judgement -----------------------------------------------------------------------------------------


def fio_ok(gbps: float) -> dict:
    return {"ok": True, "error": None, "gbps": gbps, "bytes": 1 << 26}


def record(scratch_w=2.0, scratch_r=3.0, shared=None, ckpt=None) -> dict:
    targets = [
        {
            "kind": "scratch",
            "index": 0,
            "path": "/scratch/local",
            "status": "measured",
            "write": fio_ok(scratch_w),
            "read": fio_ok(scratch_r),
        }
    ]
    targets += shared or []
    return {
        "host": "gpu01",
        "targets": targets,
        "checkpoint": ckpt
        if ckpt is not None
        else {"status": "measured", "verified": True, "read_s": 2.0, "size_bytes": 1 << 30, "path": "/c/x"},
    }


def test_no_floor_means_measured_only():
    assert sa.evaluate(record(scratch_w=0.001, scratch_r=0.001), {}) == []
    assert sa.evaluate(record(), {"checkpoint_size_gib": 4}) == []


def test_each_floor_missed_names_host_what_floor_and_measured():
    floors = {"scratch_write_gbps": 5, "scratch_read_gbps": 2.5, "checkpoint_max_restore_s": 1.5}
    found = sa.evaluate(record(scratch_w=2.0, scratch_r=3.0), floors)
    assert [(v["code"], v["field"]) for v in found] == [
        ("STORAGE_BELOW_FLOOR", "acceptance.storage.scratch_write_gbps"),
        ("STORAGE_RESTORE_SLOW", "acceptance.storage.checkpoint_max_restore_s"),
    ]
    assert all(v["host"] == "gpu01" and v["severity"] == "error" for v in found)
    assert "expected >= 5 GB/s, measured 2 GB/s" in found[0]["message"] and "/scratch/local" in found[0]["message"]
    assert "expected <= 1.5 s, measured 2 s" in found[1]["message"]
    # At the floor passes.
    assert sa.evaluate(record(scratch_w=5.0), {"scratch_write_gbps": 5}) == []


def test_shared_mount_floors_and_states():
    mounted = {
        "kind": "shared",
        "index": 1,
        "path": "/shared/ckpt",
        "status": "measured",
        "write": fio_ok(0.5),
        "read": fio_ok(4.0),
    }
    found = sa.evaluate(record(shared=[mounted]), {"shared_write_gbps": 1, "shared_read_gbps": 3})
    assert [(v["code"], v["field"]) for v in found] == [("STORAGE_BELOW_FLOOR", "acceptance.storage.shared_write_gbps")]
    absent = {"kind": "shared", "index": 0, "path": "/shared/x", "status": "not mounted", "note": "no answer in 20 s"}
    warn = sa.evaluate(record(shared=[absent]), {})
    assert [(v["code"], v["severity"], v["field"]) for v in warn] == [
        ("STORAGE_NOT_MOUNTED", "warning", "storage.shared[0].path")
    ]
    assert "no answer in 20 s" in warn[0]["message"]
    err = sa.evaluate(record(shared=[absent]), {"shared_read_gbps": 1})
    assert [(v["code"], v["severity"]) for v in err] == [("STORAGE_NOT_MOUNTED", "error")]
    unconfigured = {"kind": "shared", "index": 0, "path": "/x", "status": "not configured"}
    assert sa.evaluate(record(shared=[unconfigured]), {"shared_read_gbps": 1}) == []


@pytest.mark.parametrize(
    ("status", "code"),
    [("missing", "STORAGE_PATH_MISSING"), ("no space", "STORAGE_NO_SPACE"), ("failed", "STORAGE_BENCH_FAILED")],
)
def test_targets_that_could_not_be_measured(status, code):
    rec = record()
    rec["targets"][0] = {"kind": "scratch", "path": "/scratch/local", "status": status, "note": "why"}
    found = sa.evaluate(rec, {})
    assert [v["code"] for v in found] == [code] and "why" in found[0]["message"]


def test_failed_fio_pass_and_failed_checkpoint():
    rec = record(ckpt={"status": "failed", "directory": "/c", "note": "Permission denied"})
    rec["targets"][0]["read"] = {"ok": False, "error": "fio read killed after 600 s"}
    found = sa.evaluate(rec, {})
    assert [v["code"] for v in found] == ["STORAGE_BENCH_FAILED", "STORAGE_CHECKPOINT_FAILED"]
    assert "killed after 600 s" in found[0]["message"] and "Permission denied" in found[1]["message"]


def test_skipped_record_and_not_tested_nodes():
    assert sa.evaluate({"host": "a", "skipped": "check mode", "targets": [], "checkpoint": None}, {"x": 1}) == []
    found = sa.not_tested(["a", "b", "b"], [{"host": "a"}])
    assert [(v["code"], v["host"]) for v in found] == [("STORAGE_NODE_NOT_TESTED", "b")]


def test_filters():
    assert storage_evaluate(record(scratch_w=1), {"scratch_write_gbps": 2})[0]["code"] == "STORAGE_BELOW_FLOOR"
    assert storage_not_tested([], ["x"])[0]["host"] == "x"
    with pytest.raises(AnsibleFilterError):
        storage_evaluate("nope")
    with pytest.raises(AnsibleFilterError):
        storage_evaluate({}, floors=[1])
    with pytest.raises(AnsibleFilterError):
        storage_not_tested({}, [])


# --- the storage_bench module ---------------------------------------------------------------------------


def run_module(args: dict, run_command=None) -> dict:
    with module_args(args):
        if run_command is not None:

            def bound(self, argv, check_rc=False):
                return run_command(self, argv, check_rc=check_rc)

            with patch.object(basic.AnsibleModule, "run_command", bound), pytest.raises(ExitJson) as exc:
                storage_bench.main()
        else:
            with pytest.raises(FailJson) as exc:
                storage_bench.main()
    return exc.value.args[0]


class FakeNode:
    """Answers stat / findmnt / fio like a node: the scratch a directory on / (overlay), fio from fixtures."""

    def __init__(self, mounts: dict, direct_refused: bool = False, hang: tuple = ()):
        self.mounts = mounts
        self.direct_refused = direct_refused
        self.hang = hang
        self.calls: list[list[str]] = []

    def __call__(self, _module, argv, check_rc=False):
        self.calls.append(list(argv))
        cmd = argv[4]
        path = argv[-1]
        if cmd == "stat":
            target = path[: -len("/.")]
            if target in self.hang:
                return 124, "", ""
            if not os.path.isdir(target):
                return 1, "", f"stat: cannot statx '{path}': No such file or directory"
            return 0, "directory\n", ""
        if cmd == "findmnt":
            target = max((m for m in self.mounts if path.startswith(m)), key=len)
            fs = dict(self.mounts[target], target=target)
            return 0, json.dumps({"filesystems": [fs]}), ""
        if cmd == "fio":
            direction = next(a.split("=")[1] for a in argv if a.startswith("--rw="))
            if self.direct_refused and "--direct=1" in argv:
                return 1, "", "fio: looks like your file system does not support direct=1/buffered=0\n"
            return 0, fixture(f"debian12-ext4-{direction}.json"), ""
        raise AssertionError(f"unexpected command {argv}")


def bench_args(tmp_path, **kw) -> dict:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    args = {
        "host": "gpu01",
        "scratch_path": str(scratch),
        "checkpoint_dir": str(scratch),
        "checkpoint_size_bytes": 1 << 20,
        "drop_caches": str(tmp_path / "ro" / "drop_caches"),
        "fio_size": "1M",
        "fio_numjobs": 1,
    }
    args.update(kw)
    return args


def test_module_measures_a_scratch_directory_and_says_no_device_is_mounted(tmp_path):
    node = FakeNode({"/": {"source": "overlay", "fstype": "overlay"}})
    rec = run_module(bench_args(tmp_path), node)["record"]
    scratch = rec["targets"][0]
    assert scratch["status"] == "measured" and scratch["direct"] is True
    assert scratch["write"]["ok"] and scratch["read"]["ok"] and scratch["write"]["gbps"] > 0
    assert "no device mounted at" in scratch["note"] and "overlay" in scratch["note"]
    assert rec["fio_version"].startswith("fio-3.")
    ck = rec["checkpoint"]
    assert ck["status"] == "measured" and ck["verified"] and ck["read_bytes"] == 1 << 20
    assert "caches not dropped" in ck["note"]
    # What it wrote is gone; fio ran under timeout(1).
    assert os.listdir(tmp_path / "scratch") == []
    fio_calls = [c for c in node.calls if "fio" in c]
    assert [c[:3] for c in fio_calls] == [["timeout", "-k", "10"]] * 2
    assert sa.evaluate(rec, {}) == []


def test_module_falls_back_to_buffered_io_when_o_direct_is_refused(tmp_path):
    node = FakeNode({"/": {"source": "tmpfs", "fstype": "tmpfs"}}, direct_refused=True)
    rec = run_module(bench_args(tmp_path, checkpoint_dir=""), node)["record"]
    scratch = rec["targets"][0]
    assert scratch["status"] == "measured" and scratch["direct"] is False
    assert "O_DIRECT refused" in scratch["note"]
    assert [("--direct=1" in c, "--rw=write" in c) for c in node.calls if "fio" in c] == [
        (True, True),
        (False, True),
        (False, False),
    ]
    assert rec["checkpoint"] is None


def test_module_shared_mounts_mounted_absent_hanging(tmp_path):
    mounted = tmp_path / "shared"
    plain = tmp_path / "plain"
    slow = tmp_path / "slow"
    for d in (mounted, plain, slow):
        d.mkdir()
    node = FakeNode(
        {"/": {"source": "overlay", "fstype": "overlay"}, str(mounted): {"source": "srv:/export", "fstype": "nfs4"}},
        hang=(str(slow),),
    )
    shared = [
        {"path": str(mounted), "server": "srv", "export": "/export"},
        {"path": str(plain)},
        {"path": str(slow)},
        {"path": str(tmp_path / "absent")},
    ]
    rec = run_module(bench_args(tmp_path, shared=shared, scratch_path=""), node)["record"]
    got = [(t["index"], t["status"]) for t in rec["targets"]]
    assert got == [(0, "measured"), (1, "not mounted"), (2, "not mounted"), (3, "not mounted")]
    assert rec["targets"][0]["note"] == "nfs4 srv:/export"
    assert "not a mount" in rec["targets"][1]["note"]
    assert "no answer within 20 s" in rec["targets"][2]["note"]
    assert "No such file" in rec["targets"][3]["note"]
    codes = [(v["code"], v["field"], v["severity"]) for v in sa.evaluate(rec, {"shared_write_gbps": 0.001})]
    assert codes == [("STORAGE_NOT_MOUNTED", f"storage.shared[{i}].path", "error") for i in (1, 2, 3)]


def test_module_missing_scratch_and_no_space(tmp_path):
    node = FakeNode({"/": {"source": "overlay", "fstype": "overlay"}})
    rec = run_module(bench_args(tmp_path, scratch_path=str(tmp_path / "nope"), checkpoint_dir=""), node)["record"]
    assert rec["targets"][0]["status"] == "missing" and "playbooks/storage.yml" in rec["targets"][0]["note"]
    rec = run_module(bench_args(tmp_path, fio_size="1P", checkpoint_size_bytes=1 << 60), node)["record"]
    assert rec["targets"][0]["status"] == "no space"
    assert rec["checkpoint"]["status"] == "no space"
    assert [v["code"] for v in sa.evaluate(rec, {})] == ["STORAGE_NO_SPACE", "STORAGE_NO_SPACE"]


def test_module_check_mode_writes_nothing(tmp_path):
    node = FakeNode({"/": {"source": "overlay", "fstype": "overlay"}})
    result = run_module(dict(bench_args(tmp_path), _ansible_check_mode=True), node)
    assert result["changed"] is False and "check mode" in result["record"]["skipped"]
    assert node.calls == []


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"fio_size": "huge"}, "fio_size"),
        ({"checkpoint_size_bytes": 0}, "checkpoint_size_bytes"),
        ({"shared": [{"path": "relative"}]}, "shared"),
    ],
)
def test_module_rejects_bad_options(tmp_path, kw, match):
    result = run_module(bench_args(tmp_path, **kw))
    assert match in result["msg"]


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed here (the lab has it)")
def test_module_with_real_fio(tmp_path):
    """Debian's fio, for real, on a temporary directory: the figures are fio's own."""

    def real(_module, argv, check_rc=False):
        p = subprocess.run(argv, capture_output=True, text=True, check=False)
        return p.returncode, p.stdout, p.stderr

    args = bench_args(tmp_path, fio_size="4M", fio_runtime_s=5)
    rec = run_module(args, real)["record"]
    scratch = rec["targets"][0]
    assert scratch["status"] == "measured", scratch
    assert scratch["write"]["bytes"] == 4 << 20 and scratch["read"]["bytes"] == 4 << 20
    assert scratch["write"]["gbps"] > 0 and scratch["read"]["gbps"] > 0
    assert rec["checkpoint"]["verified"]
    found = sa.evaluate(rec, {"scratch_write_gbps": 100000})
    assert [v["code"] for v in found] == ["STORAGE_BELOW_FLOOR"]


# --- the report's Storage section and verdict ----------------------------------------------------------------


def test_report_storage_section_and_verdict(tmp_path):
    rec = record(scratch_w=1.0)
    rec["violations"] = sa.evaluate(rec, {"scratch_write_gbps": 5})
    report = build_report("lab", runs=[], storage=[rec], violations=rec["violations"], nccl=False)
    assert report["verdict"] == "fail" and report["nccl_run"] is False
    md = render_markdown(report)
    assert "## Storage" in md and "| gpu01 | scratch | /scratch/local | measured | 1.00 | 3.00 |" in md
    assert "verified" in md and "NCCL phases not run" in md
    rec_ok = record()
    rec_ok["violations"] = []
    assert build_report("lab", runs=[], storage=[rec_ok], nccl=False)["verdict"] == "pass"
    # Nothing tested at all is no pass; NCCL expected but absent neither.
    assert build_report("lab", runs=[], nccl=False)["verdict"] == "fail"
    assert build_report("lab", runs=[], storage=[rec_ok], nccl=True)["verdict"] == "fail"


def run_report(args: dict) -> dict:
    with module_args(args), pytest.raises(ExitJson) as exc:
        acceptance_report.main()
    return exc.value.args[0]


def test_report_module_counts_storage_failures_and_missing_nodes(tmp_path):
    bad = record(scratch_w=1.0)
    bad["violations"] = sa.evaluate(bad, {"scratch_write_gbps": 5})
    result = run_report(
        {
            "dest": str(tmp_path),
            "cluster": "lab",
            "nccl": False,
            "storage": [bad],
            "storage_expected": ["gpu01", "gpu02"],
            "plots": False,
        }
    )
    assert result["verdict"] == "fail"
    assert sorted((v["code"], v["host"]) for v in result["errors"]) == [
        ("STORAGE_BELOW_FLOOR", "gpu01"),
        ("STORAGE_NODE_NOT_TESTED", "gpu02"),
    ]
    assert result["bad_nodes"] == ["gpu01", "gpu02"]
    with open(result["json"], encoding="utf-8") as fh:
        report = json.load(fh)
    assert report["storage"][0]["targets"][0]["write"]["gbps"] == 1.0
    assert not any(v["code"] == "NCCL_NODE_NOT_TESTED" for v in report["violations"])
