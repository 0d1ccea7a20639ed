"""gpufleet lab: a new lab does not inherit the last lab's cached facts."""

from __future__ import annotations

from types import SimpleNamespace

from gpufleet_cli import acceptance_reuse, cmd_lab


def test_forget_facts_removes_only_the_lab_hosts(tmp_path):
    for name in ("lab-ctl01", "lab-gpu02", "stack-deb12"):
        (tmp_path / name).write_text("{}")
    assert cmd_lab.forget_facts(str(tmp_path)) == ["lab-ctl01", "lab-gpu02"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stack-deb12"]
    assert cmd_lab.forget_facts(str(tmp_path)) == []
    assert cmd_lab.forget_facts(str(tmp_path / "absent")) == []


def test_forget_facts_removes_the_files_of_ansible_core_2_19s_cache(tmp_path):
    # ansible-core 2.19 prefixes each key with its cache schema: s1_<host>.
    for name in ("s1_lab-ctl01", "s1_lab-gpu01", "lab-gpu01", "s1_ci-gpu01", "s1_lab-gpu01x", "xs1_lab-gpu02"):
        (tmp_path / name).write_text("{}")
    assert cmd_lab.forget_facts(str(tmp_path)) == ["lab-ctl01", "lab-gpu01"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s1_ci-gpu01", "s1_lab-gpu01x", "xs1_lab-gpu02"]


def _fake_lab(monkeypatch, tmp_path, rc=0, states=None):
    calls = []
    states = states or dict.fromkeys(cmd_lab.LAB_HOSTS, "Up 2 hours")
    monkeypatch.setattr(cmd_lab, "_status", lambda: [(h, states.get(h, "absent")) for h in cmd_lab.LAB_HOSTS])
    monkeypatch.setattr(cmd_lab, "FACT_CACHE", str(tmp_path))
    monkeypatch.setattr(acceptance_reuse, "RECORD_DIR", str(tmp_path.parent / f"{tmp_path.name}-records"))

    def fake_run(cmd):
        # The facts are gone before Molecule creates the hosts.
        calls.append((cmd, sorted(p.name for p in tmp_path.iterdir())))
        return rc

    monkeypatch.setattr(cmd_lab, "_run", fake_run)
    (tmp_path / "lab-gpu01").write_text("{}")
    return calls


def test_up_forgets_the_facts_before_creating(monkeypatch, tmp_path):
    calls = _fake_lab(monkeypatch, tmp_path)
    assert cmd_lab.run(SimpleNamespace(action="up")) == 0
    assert [c[0][1:3] for c in calls if c[0][0] == "molecule"] == [["create", "-s"], ["prepare", "-s"]]
    assert all(files == [] for _, files in calls)


def test_up_makes_a_lab_anew_when_a_host_is_gone_or_stopped(monkeypatch, tmp_path, capsys):
    # Molecule's state file may still say "created": it would skip create and prepare.
    calls = _fake_lab(monkeypatch, tmp_path, states={"lab-ctl01": "Up 2 hours", "lab-gpu01": "Exited (0) 1 minute ago"})
    assert cmd_lab.run(SimpleNamespace(action="up")) == 0
    steps = [c[0][1] for c in calls if c[0][0] == "molecule"]
    assert steps == ["destroy", "create", "prepare"]
    assert "lab-gpu01 (Exited (0) 1 minute ago), lab-gpu02 (absent)" in capsys.readouterr().out


def test_down_forgets_the_facts_even_when_destroy_fails(monkeypatch, tmp_path):
    calls = _fake_lab(monkeypatch, tmp_path, rc=1)
    assert cmd_lab.run(SimpleNamespace(action="down")) == cmd_lab.EXIT_FAILED
    assert calls[0][0][:2] == ["molecule", "destroy"]
    assert list(tmp_path.iterdir()) == []


def test_up_builds_the_image_of_the_suite_molecule_will_run(monkeypatch, tmp_path):
    # Molecule's cluster platforms run localhost/gpufleet-testhost:${GPUFLEET_TEST_SUITE:-bookworm}:
    # `lab up` must build that one (bookworm-bare for a first converge that installs everything).
    for env, suite in ((None, "bookworm"), ("bookworm-bare", "bookworm-bare")):
        if env is None:
            monkeypatch.delenv("GPUFLEET_TEST_SUITE", raising=False)
        else:
            monkeypatch.setenv("GPUFLEET_TEST_SUITE", env)
        calls = _fake_lab(monkeypatch, tmp_path)
        assert cmd_lab.run(SimpleNamespace(action="up")) == 0
        testbed = [c[0] for c in calls if c[0][0].endswith("scripts/testbed")]
        assert testbed == [[testbed[0][0], "all", suite]]
