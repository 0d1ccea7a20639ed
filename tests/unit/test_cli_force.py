"""``--force`` on the commands that drain: it becomes the drain breaker's force variable, and only there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpufleet_cli import cmd_drift, cmd_provision
from gpufleet_cli.main import main


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A project root whose playbooks exist and whose reports are empty."""
    (tmp_path / "playbooks").mkdir()
    for name in ("site.yml", "verify.yml", "acceptance.yml"):
        (tmp_path / "playbooks" / name).write_text("---\n")
    (tmp_path / "inv").mkdir()
    (tmp_path / "inv" / "hosts.yml").write_text("all: {}\n")
    monkeypatch.setattr(cmd_provision, "ROOT", str(tmp_path))
    monkeypatch.setattr(cmd_drift, "REPORTS_DIR", str(tmp_path / "reports"))
    return tmp_path


def recorder(monkeypatch, module) -> list[tuple[str, list[str]]]:
    calls: list[tuple[str, list[str]]] = []

    def run_playbook(playbook, opts, stream=None):
        calls.append((playbook, list(opts.extra_vars)))
        return 0

    monkeypatch.setattr(module, "run_playbook", run_playbook)
    return calls


class FakeSession:
    """Stands in for RunSession in ``provision``: records each run's extra variables."""

    calls: list[tuple[str, list[str]]] = []

    def __init__(self, opts, stream=None):
        self.opts = opts

    def run(self, playbook, opts=None):
        FakeSession.calls.append((playbook, list((opts or self.opts).extra_vars)))
        return 0

    def finish(self):
        return 0


@pytest.mark.parametrize("command", ["accept", "verify"])
def test_accept_force_reaches_the_playbook_and_verify_has_none(capsys, root, monkeypatch, command):
    calls = recorder(monkeypatch, cmd_provision)
    inv = str(root / "inv")
    if command == "verify":
        with pytest.raises(SystemExit) as exc:
            main([command, "-i", inv, "--force"])
        assert exc.value.code == 2 and calls == []
        return
    assert main([command, "-i", inv, "-e", "acceptance_drain_force=false", "--force"]) == 0
    ((playbook, extra),) = calls
    # After the user's -e, so the option wins; as JSON, so the playbook gets a boolean.
    assert playbook == "acceptance.yml"
    assert extra == ["acceptance_drain_force=false", json.dumps({"acceptance_drain_force": True})]
    assert main([command, "-i", inv]) == 0
    assert calls[1][1] == []


def test_provision_force_reaches_the_acceptance(capsys, root, monkeypatch):
    FakeSession.calls = []
    monkeypatch.setattr(cmd_provision, "RunSession", FakeSession)
    assert main(["provision", "-i", str(root / "inv"), "--check", "--force"]) == 0
    assert FakeSession.calls == [("site.yml", [json.dumps({"acceptance_drain_force": True})])]


def test_remediate_force_reaches_the_playbook(capsys, root, monkeypatch):
    calls = recorder(monkeypatch, cmd_drift)
    inv = str(root / "inv")
    main(["remediate", "-i", inv, "--force", "--serial", "1"])
    assert json.loads(calls[0][1][-1]) == {"remediate_drain_force": True, "remediate_serial": 1}
    main(["remediate", "-i", inv])
    assert calls[1][1] == []


def test_remediate_table_says_the_breaker_tripped(capsys, root, monkeypatch):
    message = (
        "drain breaker tripped: pool h100: draining gpu01, gpu02 would leave 2 of its 2 nodes out of service, "
        "more than the limit of 1 (25 % of 2, rounded up) and none in service."
    )
    report = {
        "kind": "remediation",
        "cluster": "lab",
        "serial": "25%",
        "batches": [],
        "nodes": {h: {"before": [{"component": "driver-package"}], "outcome": "blocked"} for h in ("gpu01", "gpu02")},
        "breaker": {"tripped": True, "allowed": False, "forced": False, "message": message},
    }

    def run_playbook(playbook, opts, stream=None):
        d = Path(cmd_drift.REPORTS_DIR) / "lab" / "20260310T100000Z"
        d.mkdir(parents=True)
        (d / "remediation.json").write_text(json.dumps(report))
        return 2

    monkeypatch.setattr(cmd_drift, "run_playbook", run_playbook)
    rc = main(["remediate", "-i", str(root / "inv")])
    out = capsys.readouterr().out
    assert rc == 1
    assert message in out.splitlines()
    assert "BLOCKED" in out
