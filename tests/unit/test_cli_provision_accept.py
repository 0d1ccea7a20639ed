"""``gpufleet provision`` and the last passing acceptance: kept when nothing changed, measured otherwise.

A fake ``ansible_runner`` module plays a three-host cluster (ctl01, gpu01, gpu02): each run feeds
the CLI the events Ansible would and writes what the playbooks would under a temporary reports/
(the hardware gate's records of the GPU nodes, the acceptance report). The CLI's own code runs as
it is: RunSession, the tracker, the summary, the decision, the record under .cache/acceptance.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from gpufleet_cli import acceptance_reuse, cmd_lab, cmd_provision, runner
from gpufleet_cli.main import main

HOSTS = ("ctl01", "gpu01", "gpu02")
GPU_HOSTS = ("gpu01", "gpu02")


class FakeCluster:
    """Stands in for the ansible_runner module. Set the attributes to script the next runs."""

    def __init__(self, root: Path):
        self.root = root
        self.reports = root / "reports" / "lab"
        self.changed: set[str] = set()
        self.failed: set[str] = set()
        self.unreachable: set[str] = set()
        self.verdict = "pass"
        self.uuids = {h: [f"GPU-{h}-{i}" for i in range(8)] for h in GPU_HOSTS}
        self.rc: int | None = None
        self.calls: list[dict] = []
        self._stamp = 0

    def _dir(self) -> Path:
        self._stamp += 1
        d = self.reports / f"20260101T{self._stamp:06d}Z"
        d.mkdir(parents=True)
        return d

    def run(self, **kw):
        argv = shlex.split(kw.get("cmdline") or "")
        playbook = Path(kw["playbook"]).name
        call = {"playbook": playbook, "argv": argv, "limit": kw.get("limit")}
        self.calls.append(call)
        hosts = [h for h in HOSTS if not kw.get("limit") or f"!{h}" not in kw["limit"].split(":")]
        handler = kw["event_handler"]
        check = "--check" in argv
        skip_accept = "acceptance" in (argv[argv.index("--skip-tags") + 1] if "--skip-tags" in argv else "")
        stats = {"ok": {}, "changed": {}, "failures": {}, "dark": {}, "skipped": {}}
        alive = list(hosts)

        def play(name, on, changed=False):
            handler({"event": "playbook_on_play_start", "event_data": {"play": name}})
            handler({"event": "playbook_on_task_start", "event_data": {"task": f"{name} task"}})
            for h in on:
                ch = changed and h in self.changed and not check
                handler({"event": "runner_on_ok", "event_data": {"host": h, "res": {"changed": ch}}})
                stats["changed" if ch else "ok"][h] = stats["changed" if ch else "ok"].get(h, 0) + 1

        if playbook == "site.yml":
            play("Preflight gate", alive)
            play("Base OS", alive, changed=True)
            for h in sorted(self.failed & set(alive)):
                handler(
                    {
                        "event": "runner_on_failed",
                        "event_data": {"host": h, "task": "Install the driver", "res": {"msg": "apt failed"}},
                    }
                )
                stats["failures"][h] = 1
            for h in sorted(self.unreachable & set(alive)):
                handler({"event": "runner_on_unreachable", "event_data": {"host": h, "res": {"msg": "ssh: no route"}}})
                stats["dark"][h] = 1
            alive = [h for h in alive if h not in self.failed and h not in self.unreachable]
            play("Hardware gate", alive)
            if not check:
                gate = self._dir() / "gate"
                gate.mkdir()
                for h in GPU_HOSTS:
                    if h in alive:
                        facts = {"gpus": [{"uuid": u, "bus_id": f"0000:{i}"} for i, u in enumerate(self.uuids[h])]}
                        (gate / f"{h}.json").write_text(json.dumps({"host": h, "status": "pass", "facts": facts}))
        if playbook == "acceptance.yml" or (playbook == "site.yml" and not skip_accept):
            play("Find the acceptance hosts", alive)
            play("NCCL acceptance on each node alone", [h for h in alive if h in GPU_HOSTS])
            if not check:
                # As the acceptance_report module: the nodes the caller left out are named, and a
                # pass of the rest is partial.
                excluded = {}
                for i, arg in enumerate(argv[:-1]):
                    if arg == "-e" and argv[i + 1].startswith("{"):
                        excluded.update(json.loads(argv[i + 1]).get("acceptance_excluded_nodes") or {})
                left_out = [{"host": h, "reason": r} for h, r in excluded.items()]
                verdict = "partial" if self.verdict == "pass" and left_out else self.verdict
                report = {"verdict": verdict, "not_accepted": left_out}
                (self._dir() / "acceptance.json").write_text(json.dumps(report))
                if self.verdict != "pass":
                    stats["failures"]["ctl01"] = 1
        handler({"event": "playbook_on_stats", "event_data": stats})
        rc = self.rc if self.rc is not None else (2 if stats["failures"] else 4 if stats["dark"] else 0)
        return SimpleNamespace(rc=rc)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    (tmp_path / "playbooks").mkdir()
    for name in ("site.yml", "acceptance.yml"):
        (tmp_path / "playbooks" / name).write_text("---\n")
    inv = tmp_path / "inventory"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "hosts.yml").write_text("all:\n  hosts: {ctl01: {}, gpu01: {}, gpu02: {}}\n")
    (inv / "brief.yml").write_text("cluster: {name: lab}\n")
    (inv / "group_vars" / "all.yml").write_text("x: 1\n")
    fake = FakeCluster(tmp_path)
    monkeypatch.setitem(sys.modules, "ansible_runner", fake)
    monkeypatch.setattr(runner, "ROOT", str(tmp_path))
    monkeypatch.setattr(cmd_provision, "ROOT", str(tmp_path))
    monkeypatch.setattr(acceptance_reuse, "RECORD_DIR", str(tmp_path / "records"))
    monkeypatch.delenv("GPUFLEET_BRIEF", raising=False)
    fake.inventory = inv
    return fake


def provision(fake, capsys, *extra) -> tuple[int, str]:
    rc = main(["provision", "-i", str(fake.inventory), "--no-progress", *extra])
    return rc, capsys.readouterr().out


def accepted(fake) -> dict | None:
    return acceptance_reuse.load(str(fake.inventory))


def converge_and_accept(fake, capsys) -> dict:
    fake.changed = set(HOSTS)
    rc, out = provision(fake, capsys)
    assert rc == 0, out
    assert "== NCCL acceptance: measuring: this run changed ctl01, gpu01, gpu02" in out
    fake.changed = set()
    fake.calls.clear()
    record = accepted(fake)
    assert record is not None
    return record


def test_first_provision_converges_then_measures_and_records(cluster, capsys):
    cluster.changed = set(HOSTS)
    rc, out = provision(cluster, capsys)
    assert rc == 0, out
    assert [(c["playbook"], c["argv"]) for c in cluster.calls] == [
        ("site.yml", ["--skip-tags", "acceptance"]),
        ("acceptance.yml", []),
    ]
    assert "NCCL acceptance: PASS; report" in out
    # One summary for both runs: counts summed per host, both logs named.
    assert out.count("\nSummary\n") == 1
    assert "hosts: 3 total, 3 ok, 3 changed, 0 failed, 0 unreachable" in out
    assert out.count("  full log: ") == 2
    assert "Hardware gate:" in out and "NCCL acceptance on each node alone" in out
    record = accepted(cluster)
    assert sorted(record["hosts"]) == list(GPU_HOSTS)
    assert record["report"].endswith("acceptance.json") and Path(record["report"]).exists()


def test_a_no_op_rerun_keeps_the_passing_acceptance(cluster, capsys):
    record = converge_and_accept(cluster, capsys)
    reports_before = sorted(cluster.reports.glob("*/acceptance.json"))
    rc, out = provision(cluster, capsys)
    assert rc == 0, out
    assert [c["playbook"] for c in cluster.calls] == ["site.yml"]
    assert "NCCL acceptance: PASS, kept from " in out and "nothing changed since it was measured" in out
    assert f"report {record['report'][: -len('.json')]}.md" in out
    assert "hosts: 3 total, 3 ok, 0 changed, 0 failed, 0 unreachable" in out
    assert sorted(cluster.reports.glob("*/acceptance.json")) == reports_before
    assert accepted(cluster) == record  # kept as it was, not renewed


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda f: f.changed.add("gpu02"), "this run changed gpu02"),
        (lambda f: f.uuids["gpu01"].__setitem__(3, "GPU-new"), "the hardware of gpu01 is not what was measured"),
        (
            lambda f: (f.inventory / "brief.yml").write_text("cluster: {name: lab}\nx: 2\n"),
            "the brief changed since the last passing acceptance",
        ),
        (
            lambda f: (f.inventory / "group_vars" / "all.yml").write_text("x: 2\n"),
            "the inventory changed since the last passing acceptance",
        ),
        (
            lambda f: (
                (f.reports / "zz-later").mkdir()
                or (f.reports / "zz-later" / "acceptance.json").write_text('{"verdict": "fail"}')
            ),
            "a later acceptance ran",
        ),
        (lambda f: Path(accepted(f)["report"]).unlink(), "is gone or no longer a pass"),
        (lambda f: acceptance_reuse.forget(str(f.inventory)), "no passing acceptance of this inventory on record"),
    ],
    ids=["host-changed", "gpu-swapped", "brief", "group-vars", "later-acceptance", "report-gone", "no-record"],
)
def test_anything_that_moved_makes_it_measure(cluster, capsys, change, reason):
    converge_and_accept(cluster, capsys)
    change(cluster)
    rc, out = provision(cluster, capsys)
    assert rc == 0, out
    assert [c["playbook"] for c in cluster.calls] == ["site.yml", "acceptance.yml"]
    line = next(line for line in out.splitlines() if line.startswith("== NCCL acceptance: measuring: "))
    assert reason in line
    assert "NCCL acceptance: PASS; report" in out
    assert accepted(cluster) is not None  # measured and passed: recorded anew


def test_extra_vars_and_code_are_part_of_what_was_accepted(cluster, capsys, monkeypatch, tmp_path):
    converge_and_accept(cluster, capsys)
    rc, out = provision(cluster, capsys, "-e", "nccl_min_bytes=8")
    assert "the -e arguments changed" in out and rc == 0
    # The same -e again: kept.
    cluster.calls.clear()
    rc, out = provision(cluster, capsys, "-e", "nccl_min_bytes=8")
    assert [c["playbook"] for c in cluster.calls] == ["site.yml"], out
    # gpufleet's code: a fingerprint of another tree differs in "code" only.
    code = tmp_path / "code"
    (code / "roles" / "x" / "tasks").mkdir(parents=True)
    (code / "roles" / "x" / "tasks" / "main.yml").write_text("---\n")
    a = acceptance_reuse.fingerprint(str(cluster.inventory), None, [], root=str(code))
    (code / "roles" / "x" / "tasks" / "main.yml").write_text("--- # changed\n")
    b = acceptance_reuse.fingerprint(str(cluster.inventory), None, [], root=str(code))
    assert [k for k in a if a[k] != b[k]] == ["code"]


def test_reaccept_and_flush_cache_measure_in_one_site_run(cluster, capsys):
    first = converge_and_accept(cluster, capsys)
    for flag in ("--reaccept", "--flush-cache"):
        cluster.calls.clear()
        time.sleep(0.01)
        rc, out = provision(cluster, capsys, flag)
        assert rc == 0, out
        assert [c["playbook"] for c in cluster.calls] == ["site.yml"]
        assert "--skip-tags" not in cluster.calls[0]["argv"]
        assert "NCCL acceptance: PASS; report" in out
        assert accepted(cluster)["report"] != first["report"]


def test_too_old_or_max_age_zero_measures(cluster, capsys):
    record = converge_and_accept(cluster, capsys)
    record["accepted_at"] -= 3 * 3600
    acceptance_reuse.save(
        str(cluster.inventory), record["fingerprint"], record["hosts"], record["report"], now=record["accepted_at"]
    )
    rc, out = provision(cluster, capsys, "--accept-max-age", "2")
    assert "is 3.0 h old (--accept-max-age 2)" in out and rc == 0
    cluster.calls.clear()
    rc, out = provision(cluster, capsys, "--accept-max-age", "0")
    assert "--accept-max-age 0 never reuses" in out
    assert [c["playbook"] for c in cluster.calls] == ["site.yml", "acceptance.yml"]


def test_a_failed_host_sits_out_the_acceptance_and_nothing_is_recorded(cluster, capsys):
    converge_and_accept(cluster, capsys)
    cluster.failed = {"gpu02"}
    rc, out = provision(cluster, capsys)
    assert rc == 1, out
    assert [(c["playbook"], c["limit"]) for c in cluster.calls] == [
        ("site.yml", None),
        ("acceptance.yml", "all:!gpu02"),
    ]
    assert "measuring: this run failed on gpu02" in out
    assert "gpu02 [Base OS / Install the driver]" in out and "apt failed" in out
    # The acceptance of the rest is told why gpu02 sits out, and the verdict line names it.
    excluded = json.loads(cluster.calls[1]["argv"][cluster.calls[1]["argv"].index("-e") + 1])
    assert excluded == {
        "acceptance_excluded_nodes": {"gpu02": "failed in the stage 'Base OS' (task 'Install the driver')"}
    }
    assert (
        "NCCL acceptance: PARTIAL (not accepted: gpu02: failed in the stage 'Base OS' (task 'Install the driver'))"
        in out
    )
    assert accepted(cluster) is None  # an acceptance of part of the cluster is no hand-over
    # Fixed, and nothing else changed: the next run measures the whole cluster again.
    cluster.failed = set()
    cluster.calls.clear()
    rc, out = provision(cluster, capsys)
    assert rc == 0 and "no passing acceptance of this inventory on record" in out
    assert [(c["playbook"], c["limit"]) for c in cluster.calls] == [("site.yml", None), ("acceptance.yml", None)]


def test_no_acceptance_when_every_host_failed_or_ansible_stopped(cluster, capsys):
    converge_and_accept(cluster, capsys)
    cluster.failed = set(HOSTS)
    rc, out = provision(cluster, capsys)
    assert rc == 1 and "NCCL acceptance: not run: every host failed before it" in out
    assert [c["playbook"] for c in cluster.calls] == ["site.yml"]
    assert accepted(cluster) is None
    cluster.failed, cluster.rc = set(), 5
    cluster.calls.clear()
    rc, out = provision(cluster, capsys)
    assert rc == 1 and "NCCL acceptance: not run: ansible-playbook stopped (rc 5) before it" in out
    assert [c["playbook"] for c in cluster.calls] == ["site.yml"]


def test_a_failing_acceptance_is_not_recorded(cluster, capsys):
    converge_and_accept(cluster, capsys)
    cluster.verdict = "fail"
    rc, out = provision(cluster, capsys, "--reaccept")
    assert rc == 1 and "NCCL acceptance: FAIL" in out
    assert accepted(cluster) is None


def test_check_limit_and_tags_run_site_as_given(cluster, capsys):
    record = converge_and_accept(cluster, capsys)
    rc, out = provision(cluster, capsys, "--check")
    assert rc == 0 and [(c["playbook"], c["argv"]) for c in cluster.calls] == [("site.yml", ["--check"])]
    assert accepted(cluster) == record  # a preview changes nothing
    cluster.calls.clear()
    rc, out = provision(cluster, capsys, "--tags", "slurm")
    assert rc == 0, out
    assert [(c["playbook"], c["argv"]) for c in cluster.calls] == [("site.yml", ["--tags", "slurm"])]
    assert accepted(cluster) == record  # changed nothing
    # A --limit run that could not reach a host: the next whole run measures.
    cluster.unreachable = {"gpu02"}
    rc, out = provision(cluster, capsys, "--limit", "gpu02", "--skip-tags", "acceptance")
    assert rc == 1 and "UNREACHABLE" in out and accepted(cluster) is None
    cluster.unreachable = set()
    acceptance_reuse.save(str(cluster.inventory), record["fingerprint"], record["hosts"], record["report"])
    # A --limit run that changed a host: the next whole run measures.
    cluster.changed = {"gpu01"}
    cluster.calls.clear()
    rc, out = provision(cluster, capsys, "--limit", "gpu01", "--skip-tags", "acceptance")
    assert rc == 0 and "measuring" not in out, out
    assert [(c["playbook"], c["limit"]) for c in cluster.calls] == [("site.yml", "gpu01")]
    assert accepted(cluster) is None


def test_accept_max_age_must_be_hours(cluster, capsys):
    for bad in ("-1", "soon", "nan", "inf"):
        with pytest.raises(SystemExit) as exc:
            main(["provision", "-i", str(cluster.inventory), "--accept-max-age", bad])
        assert exc.value.code == 2
        assert "expected hours (a number >= 0)" in capsys.readouterr().err
    assert cluster.calls == []


def test_hardware_identity_follows_what_acceptance_depends_on():
    base = {
        "gpus": [{"uuid": "GPU-1", "bus_id": "0000:18:00.0", "name": "H100", "memory_mib": 81559}],
        "packages": {"libnccl2": "2.26.2-1+cuda12.8"},
        "kernel": "6.8.0-51-generic",
        "rdma": {"ports": [{"device": "mlx5_0", "port": 1, "node_guid": "9c63:c003", "state": "ACTIVE"}]},
        "memory": {"total_kib": 1000},
        "problems": [],
    }
    ident = acceptance_reuse.hardware_identity(base)
    same = json.loads(json.dumps(base))
    same["memory"]["total_kib"] = 999  # not what acceptance measures
    same["problems"] = ["a warning"]
    assert acceptance_reuse.hardware_identity(same) == ident
    for path, value in (
        (("gpus", 0, "uuid"), "GPU-2"),
        (("packages", "libnccl2"), "2.27.3-1+cuda12.8"),
        (("kernel",), "6.8.0-52-generic"),
        (("rdma", "ports", 0, "state"), "DOWN"),
    ):
        moved = json.loads(json.dumps(base))
        node = moved
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        assert acceptance_reuse.hardware_identity(moved) != ident, path


def test_an_inventory_file_takes_its_group_vars_and_extra_var_files_along(tmp_path):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "hosts.yml").write_text("all: {}\n")
    (tmp_path / "brief.yml").write_text("cluster: {name: a}\n")
    (tmp_path / "group_vars" / "all.yml").write_text("x: 1\n")
    (tmp_path / "more.yml").write_text("y: 1\n")
    inv = str(tmp_path / "hosts.yml")
    a = acceptance_reuse.fingerprint(inv, None, ["@" + str(tmp_path / "more.yml")])
    (tmp_path / "group_vars" / "all.yml").write_text("x: 2\n")
    (tmp_path / "more.yml").write_text("y: 2\n")
    b = acceptance_reuse.fingerprint(inv, None, ["@" + str(tmp_path / "more.yml")])
    assert [k for k in a if a[k] != b[k]] == ["inventory", "extra_vars"]


def test_lab_up_and_down_forget_the_lab_record(tmp_path, monkeypatch):
    monkeypatch.setattr(acceptance_reuse, "RECORD_DIR", str(tmp_path / "records"))
    monkeypatch.setattr(cmd_lab, "FACT_CACHE", str(tmp_path / "facts"))
    monkeypatch.setattr(cmd_lab, "_run", lambda cmd: 0)
    # Never the real lab's added GPU nodes or their inventory file.
    monkeypatch.setattr(cmd_lab, "EXTRA_INVENTORY", str(tmp_path / "more-gpu-nodes.yml"))
    monkeypatch.setattr(cmd_lab, "_lab_containers", lambda: [])
    for action in ("up", "down"):
        acceptance_reuse.save(cmd_lab.INVENTORY, {}, {"lab-gpu01": "x"}, str(tmp_path / "a.json"))
        assert acceptance_reuse.load(cmd_lab.INVENTORY) is not None
        assert cmd_lab.run(SimpleNamespace(action=action)) == 0
        assert acceptance_reuse.load(cmd_lab.INVENTORY) is None


def test_ctrl_c_stops_ansible_playbook_and_says_how_to_go_on(cluster, capsys, monkeypatch):
    """Ctrl-C during a run: ansible-runner is asked to cancel (it kills ansible-playbook's process
    group), the summary so far is printed, and the CLI exits 130 with what to do next."""
    import os
    import signal

    converge_and_accept(cluster, capsys)
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN in a background job (make test's test-fast)
    polled = []

    def interrupted_run(**kw):
        handler = kw["event_handler"]
        handler({"event": "playbook_on_play_start", "event_data": {"play": "GPU node software stack"}})
        handler({"event": "playbook_on_task_start", "event_data": {"task": "Install the driver"}})
        os.kill(os.getpid(), signal.SIGINT)  # the operator's Ctrl-C, delivered to this process
        polled.append(kw["cancel_callback"]())  # ansible-runner's next poll
        cluster.calls.append({"playbook": Path(kw["playbook"]).name})
        return SimpleNamespace(rc=254)

    monkeypatch.setattr(cluster, "run", interrupted_run)
    rc = main(["provision", "-i", str(cluster.inventory), "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 130 and polled == [True]
    assert [c["playbook"] for c in cluster.calls] == ["site.yml"]  # no acceptance after an interrupt
    assert "interrupted (SIGINT) during 'GPU node software stack / Install the driver'" in captured.err
    assert "run the same command again to converge" in captured.err
    assert "Summary" in captured.out
    # The handler was put back: a later Ctrl-C does what it did before.
    assert signal.getsignal(signal.SIGINT) == before
    # What the interrupted run changed is unknown: the last passing acceptance is not kept.
    assert accepted(cluster) is None


def test_ansible_playbook_killed_from_outside_is_named_and_nothing_follows(cluster, capsys, monkeypatch):
    """ansible-playbook ended by a signal (the OOM killer, kill -9) has no exit status: the CLI says
    it was killed and where, measures no acceptance after it, forgets the last passing one and
    exits 1 with what to do next."""
    converge_and_accept(cluster, capsys)

    def killed_run(**kw):
        handler = kw["event_handler"]
        handler({"event": "playbook_on_play_start", "event_data": {"play": "Slurm"}})
        handler({"event": "playbook_on_task_start", "event_data": {"task": "Write slurm.conf"}})
        cluster.calls.append({"playbook": Path(kw["playbook"]).name})
        return SimpleNamespace(rc=None)  # what ansible-runner returns for a signalled child

    monkeypatch.setattr(cluster, "run", killed_run)
    rc = main(["provision", "-i", str(cluster.inventory), "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 1
    assert [c["playbook"] for c in cluster.calls] == ["site.yml"]
    assert "ansible-playbook was killed during 'Slurm / Write slurm.conf'" in captured.err
    assert "run the same command again to converge" in captured.err
    assert "Summary" in captured.out
    assert accepted(cluster) is None


def test_a_full_controller_disk_is_refused_before_any_host_is_touched(cluster, capsys, monkeypatch):
    """No room under .cache/runner for the run's log and events: the CLI says how much is free and
    where, runs no playbook (ansible-runner would fail part way through with a traceback), and
    exits 1."""
    import shutil

    real = shutil.disk_usage

    def full(path):
        usage = real(path)
        return usage._replace(free=5 << 20) if ".cache" in str(path) else usage

    monkeypatch.setattr(runner.shutil, "disk_usage", full)
    rc = main(["provision", "-i", str(cluster.inventory), "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 1
    assert cluster.calls == []
    assert "only 5 MiB free under " in captured.err and ".cache/runner" in captured.err
    assert "No host was touched" in captured.err


def test_only_a_run_that_did_not_end_by_itself_is_swept(cluster, capsys, monkeypatch):
    """The left-over sweep runs after an interrupted or killed ansible-playbook only: a run that
    ended by itself keeps its SSH connection masters for the next run."""
    swept = []
    monkeypatch.setattr(runner, "stop_leftovers", lambda mark: swept.append(mark) or 0)
    converge_and_accept(cluster, capsys)
    assert swept == []

    def killed_run(**kw):
        cluster.calls.append({"playbook": Path(kw["playbook"]).name, "mark": kw["envvars"][runner.RUN_MARK]})
        return SimpleNamespace(rc=None)

    monkeypatch.setattr(cluster, "run", killed_run)
    assert main(["provision", "-i", str(cluster.inventory), "--no-progress"]) == 1
    assert swept == [cluster.calls[-1]["mark"]]


def test_a_full_controller_disk_before_the_acceptance_says_the_first_run_stands(cluster, capsys, monkeypatch):
    """.cache/runner fills between provision's two runs: the acceptance does not start, the
    message does not claim that no host was touched, and the record of the last passing
    acceptance is forgotten (the hosts changed since)."""
    import shutil

    real = shutil.disk_usage
    checks = []

    def filling(path):
        usage = real(path)
        checks.append(path)
        return usage._replace(free=5 << 20) if len(checks) > 1 else usage

    converge_and_accept(cluster, capsys)
    monkeypatch.setattr(runner.shutil, "disk_usage", filling)
    cluster.changed = set(HOSTS)
    rc = main(["provision", "-i", str(cluster.inventory), "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 1
    assert [c["playbook"] for c in cluster.calls] == ["site.yml"]
    assert "This command's earlier playbook runs stand" in captured.err
    assert "No host was touched" not in captured.err
    # The hosts changed and nothing measured them: the last passing acceptance is not kept.
    assert accepted(cluster) is None
