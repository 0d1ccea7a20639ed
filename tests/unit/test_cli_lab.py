"""gpufleet lab: a new lab does not inherit the last lab's cached facts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from gpufleet_cli import acceptance_reuse, cmd_lab, cmd_preflight
from gpufleet_cli.common import CliError

ROOT = Path(__file__).resolve().parents[2]


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
    # Never the real lab's added nodes or their inventory: a test must leave a running lab alone.
    monkeypatch.setattr(cmd_lab, "EXTRA_INVENTORY", str(tmp_path.parent / f"{tmp_path.name}-gpu-nodes.yml"))
    monkeypatch.setattr(cmd_lab, "_lab_containers", lambda: [])

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


# --- lab up --gpu-nodes N --------------------------------------------------------------------


def _grown_lab(monkeypatch, tmp_path, containers=()):
    """A lab whose commands are recorded, with these added containers already there."""
    calls = _fake_lab(monkeypatch, tmp_path)
    inventory = Path(cmd_lab.EXTRA_INVENTORY)
    monkeypatch.setattr(cmd_lab, "_lab_containers", lambda: sorted(containers))
    extra_vars = []

    def fake_run(cmd):
        calls.append((cmd, []))
        for arg in cmd:
            if arg.startswith("@"):
                extra_vars.append(json.loads(Path(arg[1:]).read_text()))
        return 0

    monkeypatch.setattr(cmd_lab, "_run", fake_run)
    return calls, inventory, extra_vars


def test_extra_inventory_continues_the_lab_addresses_in_the_brief_networks():
    data = yaml.safe_load(cmd_lab.extra_inventory(5))
    hosts = data["all"]["children"]["gpu_lab"]["hosts"]
    assert list(hosts) == ["lab-gpu03", "lab-gpu04", "lab-gpu05"]
    assert hosts["lab-gpu05"]["ansible_host"] == "10.250.10.15"
    assert hosts["lab-gpu05"]["bmc_ip"] == "10.250.11.15" and hosts["lab-gpu05"]["storage_ip"] == "10.250.12.15"
    assert hosts["lab-gpu05"]["fabric_ips"] == [f"10.250.{20 + r}.15" for r in range(8)]
    # The hosts of hosts.yml follow the same rule: lab-gpu02 is .12 on every network.
    base = yaml.safe_load((ROOT / "inventories/lab/hosts.yml").read_text())["all"]["children"]["gpu_lab"]["hosts"]
    assert base["lab-gpu02"]["fabric_ips"] == [f"10.250.{20 + r}.12" for r in range(8)]


def test_a_grown_lab_passes_preflight(tmp_path):
    # The lab's inventory directory with the generated source beside hosts.yml, as Ansible reads it.
    site = tmp_path / "lab"
    shutil.copytree(ROOT / "inventories/lab", site)
    (site / "more-gpu-nodes.yml").write_text(cmd_lab.extra_inventory(16))
    violations, timing = cmd_preflight.run_preflight(str(site), None)
    assert timing["hosts"] == 17
    assert [v for v in violations if v["severity"] == "error"] == []
    # The pool's group in order: the scenario's nodes first, then the added ones.
    (read,) = cmd_preflight.ansible_read([str(site)], keys=[])
    assert read["groups"]["gpu_lab"] == [f"lab-gpu{i:02d}" for i in range(1, 17)]


def test_up_with_more_gpu_nodes_creates_them_and_prepares_the_whole_lab(monkeypatch, tmp_path):
    calls, inventory, extra_vars = _grown_lab(monkeypatch, tmp_path)
    assert cmd_lab.run(SimpleNamespace(action="up", gpu_nodes=4)) == 0
    playbooks = [c[0] for c in calls if c[0][0] == "ansible-playbook"]
    assert [Path(next(a for a in cmd if a.endswith(".yml"))).name for cmd in playbooks] == [
        "create.yml",
        "prepare.yml",
    ]
    assert playbooks[1][1:3] == ["-i", cmd_lab.INVENTORY]
    (platforms,) = [v["molecule_yml"]["platforms"] for v in extra_vars]
    assert [(p["name"], p["ip"], p["network"]) for p in platforms] == [
        ("lab-gpu03", "10.250.10.13", "gpufleet-lab"),
        ("lab-gpu04", "10.250.10.14", "gpufleet-lab"),
    ]
    # The scenario's own platform options, so an added node is the same container as lab-gpu01.
    scenario = yaml.safe_load((ROOT / "molecule/lab/molecule.yml").read_text())["platforms"][1]
    for key in ("systemd", "command", "privileged", "extra_opts", "network"):
        assert platforms[0][key] == scenario[key], key
    assert list(yaml.safe_load(inventory.read_text())["all"]["children"]["gpu_lab"]["hosts"]) == [
        "lab-gpu03",
        "lab-gpu04",
    ]


def test_up_with_fewer_gpu_nodes_removes_the_rest_and_their_inventory(monkeypatch, tmp_path):
    calls, inventory, _ = _grown_lab(monkeypatch, tmp_path, containers=("lab-gpu03", "lab-gpu04"))
    inventory.write_text(cmd_lab.extra_inventory(4))
    assert cmd_lab.run(SimpleNamespace(action="up", gpu_nodes=3)) == 0
    assert [c[0] for c in calls if c[0][0] == "podman"] == [["podman", "rm", "-f", "-t", "5", "lab-gpu04"]]
    assert "lab-gpu04" not in inventory.read_text() and "lab-gpu03" in inventory.read_text()
    calls.clear()
    assert cmd_lab.run(SimpleNamespace(action="up")) == 0
    assert [c[0] for c in calls if c[0][0] == "podman"] == [["podman", "rm", "-f", "-t", "5", "lab-gpu03", "lab-gpu04"]]
    assert not inventory.exists()
    assert not [c for c in calls if c[0][0] == "ansible-playbook"]


def test_up_refuses_a_gpu_node_count_out_of_range(monkeypatch, tmp_path):
    _grown_lab(monkeypatch, tmp_path)
    for count in (1, cmd_lab.MAX_GPU_NODES + 1):
        with pytest.raises(CliError, match="--gpu-nodes"):
            cmd_lab.run(SimpleNamespace(action="up", gpu_nodes=count))


def test_a_container_podman_lists_as_up_but_cannot_exec_in_is_not_up(monkeypatch):
    def fake(cmd, **_kw):
        if cmd[:2] == ["podman", "ps"]:
            return SimpleNamespace(returncode=0, stdout="lab-ctl01\tUp 9 hours ago\nlab-gpu01\tUp 9 hours ago\n")
        return SimpleNamespace(returncode=0 if cmd[2] == "lab-ctl01" else 255, stdout="", stderr="")

    monkeypatch.setattr(cmd_lab.subprocess, "run", fake)
    states = dict(cmd_lab._status())
    assert states["lab-ctl01"] == "Up 9 hours ago"
    assert states["lab-gpu01"].startswith("dead (Up 9 hours ago")
    assert states["lab-gpu02"] == "absent"
