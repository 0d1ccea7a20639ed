"""``gpufleet report cost -i``: the inventory is read as ``gpufleet preflight`` reads it, in every form.

The cluster's GPU count is each pool's ``gpus_per_node`` times the hosts of its inventory group; here
the inventory is an INI file (with a host range, which Ansible's INI reader expands), read through
Ansible's own inventory like preflight does, and the brief comes with ``--brief``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from cost_fixtures import COST, ROOT, SACCT, SITE, WINDOW
from gpufleet_cli.main import main

# Six H100 nodes as a range and one more by name; the pool's group as the brief names it.
INI = """\
[slurm_controllers]
ctl01 ansible_host=10.20.0.10

[gpu_h100]
gpu[001:006] ansible_user=root
gpu099

[gpu:children]
gpu_h100
"""


def brief_file(tmp_path: Path) -> Path:
    brief = yaml.safe_load((SITE / "brief.yml").read_text())
    brief["cost"] = COST
    path = tmp_path / "brief.yml"
    path.write_text(yaml.safe_dump(brief))
    return path


def cost(capsys, *argv):
    rc = main(["report", "cost", "--sacct", str(SACCT), *WINDOW, "--format", "json", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def ansible_available():
    if shutil.which("ansible-inventory") is None and not (ROOT / ".venv/bin/ansible-inventory").exists():
        pytest.skip("ansible-core is not installed")


def test_gpus_from_an_ini_inventory(capsys, tmp_path, ansible_available):
    (tmp_path / "hosts.ini").write_text(INI)
    brief = brief_file(tmp_path)
    pool = yaml.safe_load(brief.read_text())["pools"][0]
    assert pool["group"] == "gpu_h100"
    rc, out, err = cost(capsys, "-i", str(tmp_path / "hosts.ini"), "--brief", str(brief), "--dir", str(tmp_path))
    assert rc == 0, err
    assert "read by Ansible's inventory (INI: hosts.ini)" in err
    # gpu001..gpu006 from the range plus gpu099: seven nodes of the pool's GPUs each.
    assert json.loads(out)["usage"]["gpus"] == 7 * pool["gpus_per_node"]


def test_a_directory_with_an_ini_inventory_and_its_brief(capsys, tmp_path, ansible_available):
    site = tmp_path / "site"
    site.mkdir()
    (site / "hosts.ini").write_text(INI)
    shutil.copy(brief_file(tmp_path), site / "brief.yml")
    rc, out, err = cost(capsys, "-i", str(site), "--dir", str(tmp_path))
    assert rc == 0, err
    assert json.loads(out)["usage"]["gpus"] == 7 * 8


def test_an_ini_inventory_file_needs_the_brief(capsys, tmp_path):
    (tmp_path / "hosts.ini").write_text(INI)
    rc, _out, err = cost(capsys, "-i", str(tmp_path / "hosts.ini"))
    assert rc == 2
    assert "hosts.ini is an inventory file: --brief FILE is required" in err


def test_an_inventory_ansible_cannot_read_names_the_file_and_the_form(capsys, tmp_path, ansible_available):
    (tmp_path / "hosts.ini").write_text("[gpu_h100\ngpu001\n")
    rc, _out, err = cost(capsys, "-i", str(tmp_path / "hosts.ini"), "--brief", str(brief_file(tmp_path)))
    assert rc == 2
    assert "hosts.ini: Ansible's inventory cannot read it (INI: hosts.ini)" in err
