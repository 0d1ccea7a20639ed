"""``gpufleet preflight``: exit codes, formats, unreadable input, hostile input, and agreement
with ``playbooks/preflight.yml`` on the same inventories."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import FIXTURES
from gpufleet_cli.main import main

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 6))
VENV_BIN = os.path.join(ROOT, ".venv", "bin")


def cli(capsys, *argv):
    rc = main(["preflight", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def fx(name, *parts):
    return os.path.join(FIXTURES, name, *parts)


@pytest.mark.parametrize(
    ("path", "rc"),
    [
        (fx("slurm"), 0),
        (fx("k8s"), 0),
        (fx("gvars"), 0),
        (fx("broken"), 1),
        (os.path.join(ROOT, "inventories", "lab"), 0),
        (os.path.join(ROOT, "inventories", "example-h100-ib-slurm"), 0),
        (os.path.join(ROOT, "inventories", "example-h200-roce-k8s"), 0),
    ],
)
def test_exit_codes(capsys, path, rc):
    code, out, _err = cli(capsys, "-i", path)
    assert code == rc, out
    assert out.strip().splitlines()[-1].startswith("preflight passed" if rc == 0 else "preflight FAILED")


def test_json_shape(capsys):
    code, out, _err = cli(capsys, "-i", fx("broken"), "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and set(data) == {"ok", "violations"}
    for v in data["violations"]:
        assert set(v) == {"severity", "code", "host", "field", "message"}
        assert v["severity"] in ("error", "warning") and isinstance(v["code"], str) and isinstance(v["field"], str)
        assert v["host"] is None or isinstance(v["host"], str)


def test_warnings_only_exit_zero(capsys):
    code, out, _err = cli(capsys, "-i", fx("gvars"))  # tenants exceed the 2-node pool: a warning
    assert code == 0 and "TENANT_QUOTA_EXCEEDS" in out and "0 errors, 1 warning" in out


def test_text_lists_every_violation_and_summary(capsys):
    code, out, _err = cli(capsys, "-i", fx("broken"))
    lines = out.strip().splitlines()
    assert code == 1 and len(lines) >= 10
    assert "gpu004: fabric_ips[0]" in out and lines[-1].endswith("0 warnings")


def test_file_inventory_needs_brief(capsys):
    code, _out, err = cli(capsys, "-i", fx("slurm", "hosts.yml"))
    assert code == 2 and "--brief" in err
    code, _out, _err = cli(capsys, "-i", fx("slurm", "hosts.yml"), "--brief", fx("slurm", "brief.yml"))
    assert code == 0


@pytest.mark.parametrize(
    ("files", "needle"),
    [
        ({}, "no hosts.yml"),
        ({"hosts.yml": "all: {}\n"}, "brief.yml: no such brief file"),
        ({"hosts.yml": "all:\n  hosts:\n    a: [\n", "brief.yml": "brief_version: 1\n"}, "hosts.yml:4"),
        ({"hosts.yml": "all: {}\n", "brief.yml": "pools:\n  - name: x\n   bad: indent\n"}, "brief.yml:3"),
        ({"hosts.yml": "all:\n  hosts: [a, b]\n", "brief.yml": "brief_version: 1\n"}, "must be a mapping"),
        ({"hosts.yml": "- just\n- a list\n", "brief.yml": "brief_version: 1\n"}, "expected a YAML inventory"),
        ({"hosts.yml": "all:\n  hosts:\n    gpu[9:1]:\n", "brief.yml": "brief_version: 1\n"}, "bad range"),
        ({"hosts.yml": b"\xff\xfe\x00garbage", "brief.yml": "brief_version: 1\n"}, "hosts.yml"),
    ],
)
def test_unreadable_input_exits_2(capsys, tmp_path, files, needle):
    for name, text in files.items():
        (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    code, out, err = cli(capsys, "-i", str(tmp_path))
    assert code == 2, (out, err)
    assert needle in err and "Traceback" not in err + out


def test_missing_path_exits_2(capsys, tmp_path):
    code, _out, err = cli(capsys, "-i", str(tmp_path / "nope"))
    assert code == 2 and "no such inventory" in err


HOSTILE_NAMES = [
    "$(touch PWNED)",
    "a;rm -rf /",
    "{{ lookup('pipe','touch PWNED') }}",
    "{% raw %}x",
    "\x1b[31mred",
    "x" * 300,
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_host_names_reported_not_executed(capsys, tmp_path, name):
    shutil.copy(fx("slurm", "brief.yml"), tmp_path / "brief.yml")
    text = Path(fx("slurm", "hosts.yml")).read_text().replace("        gpu002:", f"        {json.dumps(name)}:")
    (tmp_path / "hosts.yml").write_text(text)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, out, _err = cli(capsys, "-i", str(tmp_path), "--format", "json")
    finally:
        os.chdir(cwd)
    assert code == 1 and not (tmp_path / "PWNED").exists()
    assert any(v["code"] == "HOST_NAME_INVALID" and v["host"] == name for v in json.loads(out)["violations"])
    code, out, _err = cli(capsys, "-i", str(tmp_path))
    assert "\x1b" not in out


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("bmc_ip", "{{ lookup('pipe', 'touch PWNED') }}"),
        ("ansible_host", "$(touch PWNED)"),
        ("storage_ip", {"a": 1}),
        ("fabric_ips", ["10.30.0.1"] * 100_000),
        ("fabric_ips", [[[]]] * 8),
        ("bmc_ip", 10),
        ("ansible_host", None),
    ],
)
def test_hostile_values_reported(capsys, tmp_path, var, value):
    import yaml

    shutil.copy(fx("slurm", "brief.yml"), tmp_path / "brief.yml")
    inv = yaml.safe_load(Path(fx("slurm", "hosts.yml")).read_text())
    inv["all"]["children"]["gpu_h100"]["hosts"]["gpu002"][var] = value
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inv))
    code, out, err = cli(capsys, "-i", str(tmp_path), "--format", "json")
    assert code == 1 and "Traceback" not in err
    assert any(v["host"] == "gpu002" for v in json.loads(out)["violations"])
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    "brief",
    [
        "[]\n",
        "brief_version: 1\n",
        "pools: !!python/object/apply:os.system ['touch PWNED']\n",
        "a: &a [*a]\n",
        "pools:\n" + "  - {name: p, group: g}\n" * 400,
        "cluster: {name: 'x' }\n" * 2,
    ],
)
def test_hostile_briefs(capsys, tmp_path, brief):
    shutil.copy(fx("slurm", "hosts.yml"), tmp_path / "hosts.yml")
    (tmp_path / "brief.yml").write_text(brief)
    code, out, err = cli(capsys, "-i", str(tmp_path))
    assert code in (1, 2) and "Traceback" not in out + err
    assert not (tmp_path / "PWNED").exists()


# --- the playbook and the CLI agree ----------------------------------------------------------------


def _playbook(inventory: str, brief: str, report: str) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}",
        ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
    )
    return subprocess.run(
        [
            os.path.join(VENV_BIN, "ansible-playbook"),
            os.path.join(ROOT, "playbooks", "preflight.yml"),
            "-i",
            inventory,
            "-e",
            f"brief_file={brief}",
            "-e",
            f"preflight_report={report}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(not os.path.exists(os.path.join(VENV_BIN, "ansible-playbook")), reason="needs the project venv")
@pytest.mark.parametrize("name", ["slurm", "broken", "k8s", "gvars", "hostile"])
def test_playbook_agrees_with_cli(capsys, tmp_path, name):
    if name == "hostile":
        import yaml

        shutil.copy(fx("slurm", "brief.yml"), tmp_path / "brief.yml")
        inv = yaml.safe_load(Path(fx("slurm", "hosts.yml")).read_text())
        hosts = inv["all"]["children"]["gpu_h100"]["hosts"]
        hosts["gpu002"]["bmc_ip"] = "{{ lookup('ansible.builtin.pipe', 'touch " + str(tmp_path / "PWNED") + "') }}"
        hosts["gpu003;id"] = hosts.pop("gpu003")
        (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inv))
        inventory, brief = str(tmp_path / "hosts.yml"), str(tmp_path / "brief.yml")
    else:
        inventory, brief = fx(name, "hosts.yml"), fx(name, "brief.yml")
    report = tmp_path / "report.json"
    proc = _playbook(inventory, brief, str(report))
    assert report.exists(), proc.stdout + proc.stderr
    from_playbook = json.loads(report.read_text())
    code, out, _err = cli(capsys, "-i", inventory, "--brief", brief, "--format", "json")
    from_cli = json.loads(out)

    def key(v):
        return (v["severity"], v["code"], v["host"] or "", v["field"], v["message"])

    assert sorted(map(key, from_playbook["violations"])) == sorted(map(key, from_cli["violations"]))
    assert from_playbook["ok"] == from_cli["ok"]
    assert (proc.returncode == 0) == from_cli["ok"] == (code == 0), proc.stdout[-2000:]
    if not from_cli["ok"]:
        assert "preflight error(s)" in proc.stdout
    assert not (tmp_path / "PWNED").exists()


def test_cli_entry_point_runs_standalone():
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "gpufleet"), "preflight", "-i", fx("slurm"), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["ok"] is True


def test_hostile_brief_values_from_yaml_are_named(capsys, tmp_path):
    """A brief file written as an operator would: a pool name with a final newline, an export carrying
    unit directives, Jinja in the description, .inf as a cost. Each is named with its field."""
    inv = tmp_path / "site"
    shutil.copytree(fx("slurm"), inv)
    text = (inv / "brief.yml").read_text()
    name = text.split("pools:", 1)[1].split("name:", 1)[1].split("\n", 1)[0].strip()
    text = text.replace(f"name: {name}", f'name: "{name}\\n"', 1)
    text = text.replace("cluster:\n", "cluster:\n  description: \"{{ lookup('pipe', 'id') }}\"\n", 1)
    text += (
        "storage:\n  shared:\n"
        '    - {server: 10.20.8.5, export: "/export/data\\n[Unit]\\nOnFailure=x.service", path: /shared}\n'
        "cost:\n  monthly: {compute: .inf}\n  unit: {name: job}\n"
    )
    (inv / "brief.yml").write_text(text)
    code, out, _err = cli(capsys, "-i", str(inv), "--format", "json")
    found = {(v["code"], v["field"]) for v in json.loads(out)["violations"]}
    assert code == 1
    assert {
        ("SCHEMA_CONTROL_CHAR", "pools[0].name"),
        ("SCHEMA_CONTROL_CHAR", "storage.shared[0].export"),
        ("SCHEMA_TEMPLATE_SYNTAX", "cluster.description"),
        ("SCHEMA_WRONG_TYPE", "cost.monthly.compute"),
    } <= found, found
