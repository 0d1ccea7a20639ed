"""``gpufleet report cost``: sacct file or sacct through Ansible, the brief's cost section, the acceptance verdict."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from cost_fixtures import COST, SACCT, SITE, WINDOW
from gpufleet_cli import cmd_cost
from gpufleet_cli.main import main


def site(tmp_path: Path, cost=COST) -> Path:
    inv = tmp_path / "site"
    shutil.copytree(SITE, inv)
    brief = yaml.safe_load((inv / "brief.yml").read_text())
    if cost is not None:
        brief["cost"] = cost
    (inv / "brief.yml").write_text(yaml.safe_dump(brief))
    return inv


def cli(capsys, *argv):
    rc = main(["report", "cost", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_report_from_a_sacct_file_with_a_gpu_count(capsys, tmp_path):
    inv = site(tmp_path)
    rc, out, err = cli(
        capsys,
        "--sacct",
        str(SACCT),
        "--brief",
        str(inv / "brief.yml"),
        "--gpus",
        "16",
        "--dir",
        str(tmp_path),
        *WINDOW,
    )
    assert rc == 0, err
    assert "= 1,000.00 EUR per training job" in out
    assert "BEATS GPU rental" in out and "88 GPUs" in out
    assert "not backed by an accepted cluster" in out  # no acceptance report under --dir


def test_gpus_come_from_the_inventory_pools(capsys, tmp_path):
    inv = site(tmp_path)
    rc, out, err = cli(
        capsys, "--sacct", str(SACCT), "-i", str(inv), "--dir", str(tmp_path), *WINDOW, "--format", "json"
    )
    assert rc == 0, err
    rep = json.loads(out)
    hosts = yaml.safe_load((inv / "hosts.yml").read_text())
    assert rep["usage"]["gpus"] > 0 and rep["usage"]["gpus"] % 8 == 0
    assert rep["usage"]["capacity_gpu_hours"] == pytest.approx(rep["usage"]["gpus"] * 24)
    assert hosts  # the fixture site has hosts: the count came from them


def test_the_latest_acceptance_verdict_is_shown(capsys, tmp_path):
    reports = tmp_path / "reports" / "sjc-a"
    for stamp, verdict in (("20260301T000000Z", "pass"), ("20260302T000000Z", "fail")):
        (reports / stamp).mkdir(parents=True)
        (reports / stamp / "acceptance.json").write_text(json.dumps({"verdict": verdict, "timestamp": stamp}))
    inv = site(tmp_path)
    rc, out, _ = cli(
        capsys, "--sacct", str(SACCT), "-i", str(inv), "--gpus", "16", "--dir", str(tmp_path / "reports"), *WINDOW
    )
    assert rc == 0 and "Acceptance: fail (20260302T000000Z): the unit cost is provisional." in out


def test_png_is_written(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    inv = site(tmp_path)
    png = tmp_path / "money.png"
    rc, _, err = cli(
        capsys,
        "--sacct",
        str(SACCT),
        "-i",
        str(inv),
        "--gpus",
        "16",
        "--png",
        str(png),
        "--dir",
        str(tmp_path),
        *WINDOW,
    )
    assert rc == 0 and png.read_bytes()[:4] == b"\x89PNG" and str(png) in err


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda inv: None, "has no cost: section"),
        (lambda inv: {"monthly": {"compute": -1}, "unit": {"name": "job"}}, "cost.monthly.compute"),
    ],
)
def test_a_missing_or_invalid_cost_section_is_exit_2(capsys, tmp_path, mutate, message):
    inv = site(tmp_path, cost=mutate(tmp_path))
    rc, _, err = cli(capsys, "--sacct", str(SACCT), "-i", str(inv), "--dir", str(tmp_path), *WINDOW)
    assert rc == 2 and message in err


def test_unreadable_inputs_are_exit_2(capsys, tmp_path):
    inv = site(tmp_path)
    bad = tmp_path / "not-sacct.txt"
    bad.write_text("hello|world\n")
    assert cli(capsys, "--sacct", str(bad), "-i", str(inv), "--dir", str(tmp_path))[0] == 2
    assert cli(capsys, "--sacct", str(tmp_path / "none.txt"), "-i", str(inv), "--dir", str(tmp_path))[0] == 2
    rc, _, err = cli(capsys, "--sacct", str(SACCT), "--brief", str(inv / "brief.yml"), "--dir", str(tmp_path))
    assert rc == 2 and "--gpus N" in err
    rc, _, err = cli(capsys, "-i", str(inv), "--since", "yesterday", "--dir", str(tmp_path))
    assert rc == 2 and "--since" in err


def test_sacct_runs_on_the_first_controller_through_ansible(capsys, tmp_path, monkeypatch):
    inv = site(tmp_path)
    seen = {}

    def fake_run(argv, **kw):
        seen["argv"], seen["env"] = argv, kw["env"]
        host = argv[1]
        payload = {"plays": [{"tasks": [{"hosts": {host: {"rc": 0, "stdout": SACCT.read_text()}}}]}]}
        return subprocess.CompletedProcess(argv, 0, json.dumps(payload), "")

    monkeypatch.setattr(cmd_cost.subprocess, "run", fake_run)
    rc, out, err = cli(capsys, "-i", str(inv), "--gpus", "16", "--dir", str(tmp_path), *WINDOW)
    assert rc == 0, err
    argv = seen["argv"]
    hosts = yaml.safe_load((inv / "hosts.yml").read_text())
    controllers = hosts["all"]["children"]["slurm_controllers"]["hosts"]
    assert argv[1] == next(iter(controllers)) and argv[argv.index("-m") + 1] == "ansible.builtin.command"
    sacct = argv[argv.index("-a") + 1]
    assert sacct.startswith("sacct --allusers --allocations --parsable2 --starttime 2026-03-01T00:00:00")
    assert "AllocTRES" in sacct and "Submit" in sacct
    assert seen["env"]["ANSIBLE_STDOUT_CALLBACK"] == "ansible.builtin.json"
    assert "= 1,000.00 EUR per training job" in out


def test_a_failing_remote_sacct_is_exit_2(capsys, tmp_path, monkeypatch):
    inv = site(tmp_path)

    def fake_run(argv, **kw):
        payload = {
            "plays": [
                {
                    "tasks": [
                        {"hosts": {argv[1]: {"rc": 1, "stderr": "sacct: error: Slurm accounting storage is disabled"}}}
                    ]
                }
            ]
        }
        return subprocess.CompletedProcess(argv, 2, json.dumps(payload), "")

    monkeypatch.setattr(cmd_cost.subprocess, "run", fake_run)
    rc, _, err = cli(capsys, "-i", str(inv), "--gpus", "16", "--dir", str(tmp_path))
    assert rc == 2 and "accounting storage is disabled" in err


def test_plain_report_still_renders_paths(capsys, tmp_path):
    rc = main(["report", str(tmp_path / "nothing-here")])
    assert rc == 2
