"""The telemetry role's node-side collectors (roles/telemetry/files): Slurm queue / spend / node-state
parsers on fixtures in squeue, sacct and sinfo's real output, the RDMA port reader on a sysfs tree,
and the GPU job-mapping prolog / epilog."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, *[".."] * 6))
FILES = os.path.join(ROOT, "roles", "telemetry", "files")
FIXTURES = os.path.join(HERE, "fixtures", "slurm_metrics")


def _load(name):
    # The programs import the module they share from their own directory, as when installed.
    if FILES not in sys.path:
        sys.path.insert(0, FILES)
    spec = importlib.util.spec_from_file_location(name, os.path.join(FILES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    dont = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont
    return module


slurm = _load("gpufleet_slurm_metrics")
rdma = _load("gpufleet_rdma_metrics")
jobmap = _load("gpufleet_jobmap")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as fh:
        return fh.read()


def samples(text):
    """Prometheus text -> {(name, frozenset(labels)): value}; fails on a malformed line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _, rest = head.partition("{")
        labels = {}
        for part in rest.rstrip("}").split('",') if rest else []:
            key, _, val = part.partition('="')
            labels[key] = val.rstrip('"')
        out[(name, frozenset(labels.items()))] = float(value)
    return out


NOW = slurm.parse_time("2026-11-30T10:00:00")

# --------------------------------------------------------------------------- parsers


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("billing=16,cpu=16,gres/gpu=8,mem=64000M,node=1", 8),
        ("billing=16,cpu=16,gres/gpu=16,gres/gpu:h100=16,mem=128000M,node=2", 16),
        ("gres:gpu:8", 8),
        ("gres:gpu:h100:2", 2),
        ("gres/gpu:4", 4),
        ("gres/gpu:h100:4", 4),
        ("N/A", 0),
        ("billing=1,cpu=1,mem=1000M,node=1", 0),
        ("", 0),
    ],
)
def test_gpus_of_tres(tres, gpus):
    assert slurm.gpus_of_tres(tres) == gpus


def test_parse_time_unset_values():
    assert slurm.parse_time("Unknown") is None
    assert slurm.parse_time("None") is None
    assert slurm.parse_time("garbage") is None
    assert slurm.parse_time("2026-11-30T10:00:00") - slurm.parse_time("2026-11-30T09:00:00") == 3600


def test_parse_squeue_22_05():
    jobs = slurm.parse_squeue(fixture("squeue-22.05.txt"))
    assert [j["job"] for j in jobs] == ["57", "58", "59", "60", "61"]
    assert [j["gpus"] for j in jobs] == [16, 2, 4, 0, 1]  # 2 nodes x 8 for job 57
    assert jobs[4]["state"] == "COMPLETING"


def test_parse_squeue_24_11_tres_syntax():
    jobs = slurm.parse_squeue(fixture("squeue-24.11.txt"))
    assert [(j["state"], j["gpus"]) for j in jobs] == [("PENDING", 8), ("RUNNING", 8)]


def test_queue_rows():
    q = slurm.queue_rows(slurm.parse_squeue(fixture("squeue-22.05.txt")), NOW)
    assert q["jobs"] == {
        ("pending", "research", "h100-lab"): 1,
        ("pending", "product", "h100-lab"): 1,
        ("running", "research", "h100-lab"): 1,
        ("running", "research", "all"): 1,
    }
    assert q["gpus"][("pending", "research", "h100-lab")] == 16
    assert q["wait_max"] == {("research", "h100-lab"): 3600, ("product", "h100-lab"): 600}


def test_parse_sacct_states_and_unknown_times():
    jobs = {j["job"]: j for j in slurm.parse_sacct(fixture("sacct-22.05.txt"))}
    assert jobs["43"]["state"] == "CANCELLED"
    assert jobs["44"]["end"] is None and jobs["44"]["gpus"] == 16
    assert jobs["46"]["start"] is None
    assert jobs["47_3"]["state"] == "NODE_FAIL"


def test_gpu_hours_clip_to_the_window_and_count_running_jobs_so_far():
    w = slurm.window_rows(slurm.parse_sacct(fixture("sacct-22.05.txt")), NOW, 24)
    hours = {k: round(v, 3) for k, v in w["gpu_hours"].items()}
    assert hours == {
        # 41 ran 09:30-11:30 yesterday: the window starts 10:00, so 1.5 h x 8 GPUs
        ("research", "h100-lab", "COMPLETED"): 12.0,
        ("research", "h100-lab", "FAILED"): 2.0,  # 30 min x 4
        ("product", "h100-lab", "CANCELLED"): 1.0,  # 30 min x 2
        ("product", "h100-lab", "RUNNING"): 8.0,  # 30 min so far x 16
        ("product", "h100-lab", "NODE_FAIL"): 8.0,  # 1 h x 8
    }


def test_started_wait_only_counts_jobs_started_in_the_window():
    w = slurm.window_rows(slurm.parse_sacct(fixture("sacct-22.05.txt")), NOW, 2)
    # since 08:00: 42 (10 min), 43 (30 s), 44 (30 min), 45 (0 s); not 41 (yesterday) nor 47_3 (07:00)
    assert w["wait_max"] == {("research", "h100-lab"): 600, ("product", "h100-lab"): 1800, ("research", "all"): 0}
    assert w["wait_avg"][("product", "h100-lab")] == pytest.approx(915)


def test_parse_sinfo_dedups_nodes_and_strips_flags():
    nodes = slurm.parse_sinfo(fixture("sinfo-22.05.txt"))
    assert [(n["node"], n["state"]) for n in nodes] == [
        ("lab-gpu01", "mixed"),
        ("lab-gpu02", "drained"),
        ("lab-gpu03", "draining"),
        ("lab-gpu04", "down"),
    ]


def test_render_slurm_textfile():
    text = slurm.render(
        slurm.parse_squeue(fixture("squeue-22.05.txt")),
        slurm.parse_sacct(fixture("sacct-22.05.txt")),
        slurm.parse_sinfo(fixture("sinfo-22.05.txt")),
        NOW,
        [24],
    )
    s = samples(text)
    assert (
        s[
            (
                "gpufleet_slurm_jobs",
                frozenset({"state": "pending", "account": "research", "partition": "h100-lab"}.items()),
            )
        ]
        == 1
    )
    assert (
        s[
            (
                "gpufleet_slurm_queue_wait_seconds_max",
                frozenset({"account": "research", "partition": "h100-lab"}.items()),
            )
        ]
        == 3600
    )
    key = {"account": "product", "partition": "h100-lab", "state": "NODE_FAIL", "window": "24h"}
    assert s[("gpufleet_slurm_gpu_hours", frozenset(key.items()))] == 8
    drained = {dict(k[1])["slurm_node"] for k in s if k[0] == "gpufleet_slurm_node_drained"}
    assert drained == {"lab-gpu02", "lab-gpu03"}
    reason = {dict(k[1])["reason"] for k in s if k[0] == "gpufleet_slurm_node_drained"}
    assert "gpufleet health: expected 8 GPUs, found 7" in reason
    assert not any(k[0] == "gpufleet_slurm_scrape_error" for k in s)
    assert s[("gpufleet_textfile_last_run_timestamp_seconds", frozenset({"collector": "slurm"}.items()))] == int(NOW)


def test_render_reports_a_failed_command_and_leaves_its_families_out():
    text = slurm.render(None, [], [], NOW, [24], ["squeue"])
    s = samples(text)
    assert s[("gpufleet_slurm_scrape_error", frozenset({"command": "squeue"}.items()))] == 1
    assert "gpufleet_slurm_jobs" not in text


# --------------------------------------------------------------------------- RDMA


def _port(root, dev, port, state, phys, rate, counters=None, netdev=None):
    base = os.path.join(root, "class", "infiniband", dev)
    p = os.path.join(base, "ports", str(port))
    os.makedirs(p, exist_ok=True)
    for name, value in (("state", state), ("phys_state", phys), ("rate", rate), ("link_layer", "InfiniBand")):
        with open(os.path.join(p, name), "w") as fh:
            fh.write(value + "\n")
    if counters is not None:
        os.makedirs(os.path.join(p, "counters"), exist_ok=True)
        for name, value in counters.items():
            with open(os.path.join(p, "counters", name), "w") as fh:
                fh.write(f"{value}\n")
    if netdev:
        os.makedirs(os.path.join(base, "device", "net", netdev), exist_ok=True)


@pytest.fixture
def sysfs(tmp_path):
    root = str(tmp_path / "sys")
    _port(
        root,
        "mlx5_0",
        1,
        "4: ACTIVE",
        "5: LinkUp",
        "400 Gb/sec (4X NDR)",
        {"link_downed": 0, "symbol_error": 12, "port_rcv_errors": 3, "excessive_buffer_overrun_errors": 0},
        netdev="ibp24s0",
    )
    _port(root, "mlx5_1", 1, "1: DOWN", "3: Disabled", "40 Gb/sec (4X QDR)", {"link_downed": 7})
    _port(root, "mlx5_2", 1, "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)")  # no counters directory
    _port(root, "bnxt_re0", 1, "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)")
    return root


def test_rdma_ports_read_state_rate_and_counters(sysfs):
    ports = {p["device"]: p for p in rdma.read_ports(sysfs)}
    assert set(ports) == {"mlx5_0", "mlx5_1", "mlx5_2", "bnxt_re0"}
    assert ports["mlx5_0"]["state"] == "ACTIVE" and ports["mlx5_0"]["rate_gbps"] == 400
    assert ports["mlx5_0"]["netdev"] == "ibp24s0"
    assert ports["mlx5_0"]["counters"]["symbol_error"] == 12
    assert ports["mlx5_1"]["state_id"] == 1 and ports["mlx5_1"]["phys_state"] == "Disabled"
    assert ports["mlx5_2"]["counters"] == {}


def test_rdma_device_globs(sysfs):
    assert [p["device"] for p in rdma.read_ports(sysfs, ["mlx5_*"])] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert rdma.read_ports(os.path.join(sysfs, "nowhere")) == []


def test_rdma_textfile(sysfs, tmp_path):
    out = tmp_path / "rdma.prom"
    assert rdma.main(["--sysfs-root", sysfs, "--devices", "mlx5_*", "--output", str(out)]) == 0
    s = samples(out.read_text())

    def v(name, **labels):
        return s[(name, frozenset(labels.items()))]

    assert v("gpufleet_rdma_port_up", device="mlx5_0", port="1") == 1
    assert v("gpufleet_rdma_port_up", device="mlx5_1", port="1") == 0
    assert v("gpufleet_rdma_port_rate_gbps", device="mlx5_2", port="1") == 200
    assert v("gpufleet_rdma_port_state", device="mlx5_1", port="1") == 1
    assert v("gpufleet_rdma_port_counter_total", device="mlx5_0", port="1", counter="symbol_error") == 12
    assert v("gpufleet_rdma_port_counter_total", device="mlx5_1", port="1", counter="link_downed") == 7
    assert not any(k[0] == "gpufleet_rdma_port_counter_total" and ("device", "mlx5_2") in k[1] for k in s)
    assert not any(("device", "bnxt_re0") in k[1] for k in s)
    assert [f for f in os.listdir(tmp_path) if f.startswith(".gpufleet-")] == []


def test_rdma_tree_of_the_sysfs_double(tmp_path):
    """The lab's fake sysfs (gpufleet-double-sysfs from a hardware profile) reads as 8 ports at 400 Gb/s."""
    import subprocess

    profile = os.path.join(ROOT, "molecule", "resources", "profiles", "h100-rdma-port-down.json")
    tool = os.path.join(ROOT, "molecule", "resources", "doubles", "bin", "gpufleet-double-sysfs")
    subprocess.run([sys.executable, tool, "--profile", profile, str(tmp_path)], check=True, capture_output=True)
    ports = {p["device"]: p for p in rdma.read_ports(str(tmp_path))}
    assert len(ports) == 8
    assert [d for d, p in ports.items() if p["state"] != "ACTIVE"] == ["mlx5_3"]
    assert ports["mlx5_0"]["rate_gbps"] == 400


# --------------------------------------------------------------------------- job mapping


@pytest.fixture
def dirs(tmp_path):
    return {
        "map_dir": str(tmp_path / "map"),
        "state_dir": str(tmp_path / "state"),
        "output": str(tmp_path / "jobmap.prom"),
    }


ENV = {
    "SLURM_JOB_ID": "123",
    "SLURM_JOB_USER": "alice",
    "SLURM_JOB_UID": "1000",
    "SLURM_JOB_ACCOUNT": "research",
    "SLURM_JOB_PARTITION": "h100-lab",
    "SLURM_JOB_GPUS": "0,1",
}


@pytest.mark.parametrize(
    ("env", "gpus"),
    [
        ({"SLURM_JOB_GPUS": "2,0,1"}, ["0", "1", "2"]),
        ({"CUDA_VISIBLE_DEVICES": "4,5"}, ["4", "5"]),
        ({"SLURM_JOB_GPUS": "", "GPU_DEVICE_ORDINAL": "7"}, ["7"]),
        ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, []),
        ({"CUDA_VISIBLE_DEVICES": "GPU-7d0c5e1a"}, []),
        ({}, []),
    ],
)
def test_job_gpus(env, gpus):
    assert jobmap.job_gpus(env) == gpus


def _read(path):
    with open(path) as fh:
        return fh.read()


def test_prolog_writes_map_and_metric_epilog_removes_them(dirs):
    assert jobmap.update("prolog", ENV, now=1.0, **dirs)
    assert _read(os.path.join(dirs["map_dir"], "0")) == "123\n"
    assert _read(os.path.join(dirs["map_dir"], "1")) == "123\n"
    s = samples(_read(dirs["output"]))
    key = {"gpu": "1", "slurm_job": "123", "user": "alice", "account": "research", "partition": "h100-lab"}
    assert s[("gpufleet_slurm_gpu_job", frozenset(key.items()))] == 1
    # A second job shares GPU 1 (time-slicing): both ids in its file, one metric each.
    other = {
        **ENV,
        "SLURM_JOB_ID": "124",
        "SLURM_JOB_USER": "bob",
        "SLURM_JOB_ACCOUNT": "product",
        "SLURM_JOB_GPUS": "1",
    }
    assert jobmap.update("prolog", other, now=2.0, **dirs)
    assert _read(os.path.join(dirs["map_dir"], "1")) == "123\n124\n"
    jobs = sorted(dict(k[1])["slurm_job"] for k in samples(_read(dirs["output"])) if k[0] == "gpufleet_slurm_gpu_job")
    assert jobs == ["123", "123", "124"]
    # The epilog gets no GPU list here: it uses what the prolog recorded.
    assert jobmap.update("epilog", {"SLURM_JOB_ID": "123"}, now=3.0, **dirs)
    assert not os.path.exists(os.path.join(dirs["map_dir"], "0"))
    assert _read(os.path.join(dirs["map_dir"], "1")) == "124\n"
    left = [dict(k[1]) for k in samples(_read(dirs["output"])) if k[0] == "gpufleet_slurm_gpu_job"]
    assert left == [{"gpu": "1", "slurm_job": "124", "user": "bob", "account": "product", "partition": "h100-lab"}]
    assert jobmap.update("epilog", {**other, "SLURM_JOB_GPUS": "1"}, now=4.0, **dirs)
    assert os.listdir(dirs["map_dir"]) == []
    assert "gpufleet_slurm_gpu_job{" not in _read(dirs["output"])


def test_a_job_without_gpus_changes_nothing(dirs):
    assert not jobmap.update("prolog", {**ENV, "SLURM_JOB_GPUS": ""}, **dirs)
    assert not os.path.exists(dirs["output"])
    assert not jobmap.update("prolog", {**ENV, "SLURM_JOB_ID": "../etc"}, **dirs)


def test_main_never_fails_the_hook(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SLURM_JOB_ID", "9")
    monkeypatch.setenv("SLURM_JOB_GPUS", "0")
    args = [
        "prolog",
        "--map-dir",
        str(blocker / "map"),
        "--state-dir",
        str(tmp_path / "s"),
        "--output",
        str(tmp_path / "o"),
    ]
    assert jobmap.main(args) == 0


def test_shared_write_atomic_keeps_the_old_file_when_a_write_fails(tmp_path):
    textfile = _load("gpufleet_textfile")
    target = tmp_path / "gpufleet_rdma.prom"
    textfile.write_atomic(str(target), "old 1\n")
    with pytest.raises(TypeError):
        textfile.write_atomic(str(target), None)  # fails inside the write, after the temporary file exists
    assert target.read_text() == "old 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["gpufleet_rdma.prom"]
    assert oct(target.stat().st_mode & 0o777) == "0o644"


def test_shared_exposition_escapes_label_values_and_rounds_float_noise():
    textfile = _load("gpufleet_textfile")
    out = textfile.Exposition()
    out.family("m", "gauge", "A metric.", [([("job", 'a"b\\c\nd')], 0.1 + 0.2), ([("job", "x")], 3.0)])
    out.last_run("test", 12.9)
    assert out.text().splitlines() == [
        "# HELP m A metric.",
        "# TYPE m gauge",
        'm{job="a\\"b\\\\c\\nd"} 0.3',
        'm{job="x"} 3',
        "# HELP gpufleet_textfile_last_run_timestamp_seconds When a gpufleet textfile collector last wrote its file.",
        "# TYPE gpufleet_textfile_last_run_timestamp_seconds gauge",
        'gpufleet_textfile_last_run_timestamp_seconds{collector="test"} 12',
    ]
