"""``gpufleet preflight`` on every form ``-i`` takes in Ansible: the same violations as the YAML inventory.

Each site (the lab, the examples, the preflight fixtures) is rewritten as an INI file, as an executable
inventory script, and as a directory of several sources (YAML, INI and a constructed plugin config);
the CLI must report exactly the violations (codes, hosts, fields, messages) it reports for the
site's hosts.yml, and say which reader ran. Inventories it cannot read are exit 2 naming the file,
its form and Ansible's own message.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import expand_hostname_range
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import FIXTURES
from gpufleet_cli.cmd_preflight import resolve_paths
from gpufleet_cli.main import main

ROOT = Path(__file__).resolve().parents[6]
SITES = {
    "lab": ROOT / "inventories" / "lab",
    "k8s-example": ROOT / "inventories" / "example-h200-roce-k8s",
    "broken": Path(FIXTURES) / "broken",
    "gvars": Path(FIXTURES) / "gvars",
}
# The repository's ansible.cfg, with and without the script plugin (its enable_plugins lacks it).
WITH_SCRIPT = (
    "ansible.builtin.host_list,ansible.builtin.script,ansible.builtin.yaml,ansible.builtin.ini,ansible.builtin.auto"
)
WITHOUT_SCRIPT = "ansible.builtin.host_list,ansible.builtin.yaml,ansible.builtin.ini,ansible.builtin.auto"


def cli(capsys, *argv):
    rc = main(["preflight", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def violations(capsys, *argv) -> tuple[int, list[tuple], str]:
    rc, out, err = cli(capsys, *argv, "--format", "json")
    assert rc in (0, 1), err
    found = sorted(
        (v["severity"], v["code"], v["host"] or "", v["field"], v["message"]) for v in json.loads(out)["violations"]
    )
    return rc, found, err


# --- the same inventory in other forms --------------------------------------------------------------


def flatten(doc: dict) -> dict[str, dict]:
    """A YAML inventory as groups: {name: {"hosts": {host: inline vars}, "children": [...], "vars": {...}}}."""
    groups: dict[str, dict] = {}

    def walk(name: str, data: dict | None) -> None:
        g = groups.setdefault(name, {"hosts": {}, "children": [], "vars": {}})
        data = data or {}
        g["vars"].update(data.get("vars") or {})
        for pattern, hvars in (data.get("hosts") or {}).items():
            for host in expand_hostname_range(str(pattern)):
                g["hosts"].setdefault(host, {}).update(hvars or {})
        for child, cdata in (data.get("children") or {}).items():
            if child not in g["children"]:
                g["children"].append(child)
            walk(child, cdata)

    for name, data in doc.items():
        walk(name, data)
    return groups


def to_ini(groups: dict[str, dict]) -> str:
    """INI inventory text: every value as a Python literal, which the ini plugin reads back exactly."""
    lines = ["# Written from hosts.yml by test_cli_preflight_forms.py"]
    for name, g in groups.items():
        if g["hosts"]:
            lines.append(f"[{name}]")
            for host, hvars in g["hosts"].items():
                lines.append(" ".join([host, *(f"{k}={shlex.quote(repr(v))}" for k, v in hvars.items())]))
        if g["children"]:
            lines += [f"[{name}:children]", *g["children"]]
        if g["vars"]:
            lines += [f"[{name}:vars]", *(f"{k}={v!r}" for k, v in g["vars"].items())]
    return "\n".join(lines) + "\n"


def to_script_json(groups: dict[str, dict]) -> dict:
    """What an inventory script prints for --list: groups, and every host's own vars in _meta.hostvars."""
    out: dict = {"_meta": {"hostvars": {}}}
    for name, g in groups.items():
        entry = {k: v for k, v in (("hosts", list(g["hosts"])), ("children", g["children"]), ("vars", g["vars"])) if v}
        out[name] = entry
        for host, hvars in g["hosts"].items():
            out["_meta"]["hostvars"].setdefault(host, {}).update(hvars)
    return out


def write_script(path: Path, listing: dict, rc: int = 0) -> None:
    path.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"LISTING = json.loads({json.dumps(json.dumps(listing))})\n"
        f"if {rc}:\n"
        "    sys.exit('inventory backend unreachable')\n"
        "print(json.dumps({} if '--host' in sys.argv else LISTING))\n"
    )
    path.chmod(0o755)


def site_copy(name: str, tmp_path: Path) -> tuple[Path, dict]:
    """A copy of the site without its hosts.yml (brief, group_vars, host_vars kept), and hosts.yml's content."""
    src = SITES[name]
    dst = tmp_path / name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("hosts.yml"))
    return dst, yaml.safe_load((src / "hosts.yml").read_text())


@pytest.mark.parametrize("name", list(SITES))
def test_an_ini_inventory_gives_the_violations_of_its_yaml(capsys, tmp_path, name):
    rc_yaml, from_yaml, _ = violations(capsys, "-i", str(SITES[name]))
    site, doc = site_copy(name, tmp_path)
    (site / "hosts.ini").write_text(to_ini(flatten(doc)))
    rc_ini, from_ini, _ = violations(capsys, "-i", str(site))
    assert (rc_ini, from_ini) == (rc_yaml, from_yaml)
    # The file itself, with its brief.
    rc_file, from_file, err = violations(capsys, "-i", str(site / "hosts.ini"), "--brief", str(site / "brief.yml"))
    assert (rc_file, from_file) == (rc_yaml, from_yaml)
    assert "inventory: read by Ansible's inventory (INI: hosts.ini)" in err


@pytest.mark.parametrize("name", ["lab", "broken"])
def test_an_inventory_script_gives_the_violations_of_its_yaml(capsys, monkeypatch, tmp_path, name):
    monkeypatch.setenv("ANSIBLE_INVENTORY_ENABLED", WITH_SCRIPT)
    rc_yaml, from_yaml, _ = violations(capsys, "-i", str(SITES[name]))
    site, doc = site_copy(name, tmp_path)
    write_script(site / "inventory.py", to_script_json(flatten(doc)))
    # group_vars/ and host_vars/ beside the script apply, as they do for any source.
    rc, found, _ = violations(capsys, "-i", str(site / "inventory.py"), "--brief", str(site / "brief.yml"))
    assert (rc, found) == (rc_yaml, from_yaml)
    rc, out, _ = cli(capsys, "-i", str(site))  # the directory: the script is its one source
    assert out.splitlines()[0] == "inventory: read by Ansible's inventory (script: inventory.py)"
    assert rc == rc_yaml


def test_a_directory_of_several_sources_gives_the_violations_of_the_yaml(capsys, tmp_path):
    """Controllers in YAML, GPU nodes in INI, the pool's group made by the constructed plugin."""
    rc_yaml, from_yaml, _ = violations(capsys, "-i", str(SITES["broken"]))
    site, doc = site_copy("broken", tmp_path)
    groups = flatten(doc)
    ctl = {"all": {"children": {"slurm_controllers": {"hosts": groups["slurm_controllers"]["hosts"]}}}}
    (site / "a-controllers.yml").write_text(yaml.safe_dump(ctl))
    (site / "b-nodes.ini").write_text(to_ini({"gpu_nodes": groups["gpu_h100"]}))
    (site / "c-pools.yml").write_text(
        "plugin: ansible.builtin.constructed\nstrict: true\ngroups:\n  gpu_h100: \"'gpu_nodes' in group_names\"\n"
    )
    rc, found, err = violations(capsys, "-i", str(site))
    # gpu_nodes is an extra group in this form; no check names it.
    assert (rc, found) == (rc_yaml, from_yaml)
    assert (
        "inventory: read by Ansible's inventory (directory: YAML: a-controllers.yml, INI: b-nodes.ini, "
        "plugin config (ansible.builtin.constructed): c-pools.yml)"
    ) in err


def test_a_plain_yaml_inventory_is_read_directly(capsys):
    rc, out, _ = cli(capsys, "-i", str(SITES["lab"]))
    assert rc == 0 and out.splitlines()[0] == "inventory: read directly (YAML: hosts.yml)"
    assert resolve_paths(str(SITES["lab"]), None) == (str(SITES["lab"] / "hosts.yml"), str(SITES["lab"] / "brief.yml"))


def test_the_brief_is_found_beside_the_inventory_for_every_form(tmp_path):
    site, doc = site_copy("gvars", tmp_path)
    (site / "hosts.ini").write_text(to_ini(flatten(doc)))
    assert resolve_paths(str(site), None) == (str(site), str(site / "brief.yml"))
    brief = str(site / "brief.yml")
    assert resolve_paths(str(site / "hosts.ini"), brief) == (str(site / "hosts.ini"), brief)


def test_a_yaml_host_with_a_port_is_read_by_ansible(capsys, tmp_path):
    """host:port keys are valid YAML inventory the direct reader does not reproduce: Ansible reads them."""
    rc_yaml, from_yaml, _ = violations(capsys, "-i", str(SITES["broken"]))
    site, doc = site_copy("broken", tmp_path)
    hosts = doc["all"]["children"]["slurm_controllers"]["hosts"]
    hosts["ctl01:2222"] = hosts.pop("ctl01")
    (site / "hosts.yml").write_text(yaml.safe_dump(doc))
    rc, found, err = violations(capsys, "-i", str(site))
    assert (rc, found) == (rc_yaml, from_yaml)
    assert "inventory: read by Ansible's inventory (YAML: hosts.yml, host 'ctl01:2222' has a port" in err


def test_a_host_list(capsys):
    rc, out, _ = cli(capsys, "-i", "gpu001,gpu002,", "--brief", str(SITES["broken"] / "brief.yml"))
    assert rc == 1 and out.splitlines()[0] == "inventory: read by Ansible's inventory (host list)"
    assert "GROUP_MISSING" in out and "preflight FAILED: 2 hosts" in out


def test_hostile_values_in_an_ini_inventory_are_reported_not_run(capsys, tmp_path):
    site, doc = site_copy("broken", tmp_path)
    groups = flatten(doc)
    groups["gpu_h100"]["hosts"]["gpu002"]["bmc_ip"] = (
        "{{ lookup('ansible.builtin.pipe', 'touch " + str(tmp_path / "PWNED") + "') }}"
    )
    (site / "hosts.ini").write_text(to_ini(groups))
    rc, found, _ = violations(capsys, "-i", str(site))
    assert rc == 1 and not (tmp_path / "PWNED").exists()
    assert any(
        code == "HOST_ADDR_INVALID" and host == "gpu002" and field == "bmc_ip" for _s, code, host, field, _m in found
    )


# --- what cannot be read ----------------------------------------------------------------------------


def _unreadable(capsys, *argv) -> str:
    rc, out, err = cli(capsys, *argv)
    assert rc == 2, (out, err)
    # The CLI's own line, wherever it is: a dependency may print before it (shown with -v).
    assert "Traceback" not in out + err
    assert any(line.startswith("gpufleet: error: ") for line in err.splitlines()), err
    return err


def test_a_bad_ini_file_names_the_file_the_form_and_ansibles_message(capsys, tmp_path):
    shutil.copy(SITES["broken"] / "brief.yml", tmp_path / "brief.yml")
    (tmp_path / "hosts.ini").write_text("[gpu_h100]\ngpu001 ansible_host\n")
    err = _unreadable(capsys, "-i", str(tmp_path))
    assert f"{tmp_path / 'hosts.ini'}: Ansible's inventory cannot read it (INI: hosts.ini): " in err
    assert "ansible.builtin.ini plugin: " in err and "Expected key=value host variable assignment" in err


def test_a_bad_source_among_several_is_named(capsys, tmp_path):
    """Ansible itself only warns and goes on without the source: preflight stops on it."""
    shutil.copy(SITES["broken"] / "brief.yml", tmp_path / "brief.yml")
    shutil.copy(SITES["broken"] / "hosts.yml", tmp_path / "hosts.yml")
    (tmp_path / "more.ini").write_text("[gpu_h100:vars]\nthis is not a variable\n")
    err = _unreadable(capsys, "-i", str(tmp_path))
    assert f"{tmp_path / 'more.ini'}: Ansible's inventory cannot read it (INI: more.ini): " in err


def test_a_failing_script(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ANSIBLE_INVENTORY_ENABLED", WITH_SCRIPT)
    write_script(tmp_path / "inv.py", {}, rc=1)
    err = _unreadable(capsys, "-i", str(tmp_path / "inv.py"), "--brief", str(SITES["broken"] / "brief.yml"))
    assert "inv.py: Ansible's inventory cannot read it (script: inv.py): " in err
    assert "ansible.builtin.script plugin: " in err and "inventory backend unreachable" in err


def test_a_script_without_the_script_plugin_says_how_to_enable_it(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ANSIBLE_INVENTORY_ENABLED", WITHOUT_SCRIPT)
    write_script(tmp_path / "inv.py", to_script_json(flatten(yaml.safe_load((SITES["lab"] / "hosts.yml").read_text()))))
    err = _unreadable(capsys, "-i", str(tmp_path / "inv.py"), "--brief", str(SITES["lab"] / "brief.yml"))
    assert "(script: inv.py)" in err and "add ansible.builtin.script to [inventory] enable_plugins" in err


def test_an_unknown_inventory_plugin(capsys, tmp_path):
    shutil.copy(SITES["broken"] / "brief.yml", tmp_path / "brief.yml")
    (tmp_path / "cloud.yml").write_text("plugin: example.nosuch.cloud\n")
    err = _unreadable(capsys, "-i", str(tmp_path))
    assert "cloud.yml: Ansible's inventory cannot read it (plugin config (example.nosuch.cloud): cloud.yml): " in err
    assert "example.nosuch.cloud" in err.split("cannot read it", 1)[1].split("):", 1)[1]


def test_an_empty_directory_and_a_missing_host_list_brief(capsys, tmp_path):
    err = _unreadable(capsys, "-i", str(tmp_path))
    assert "no hosts.yml or hosts.yaml or other inventory source" in err
    err = _unreadable(capsys, "-i", "a,b")
    assert "host list: --brief FILE is required" in err


@pytest.mark.parametrize("mode", [0o644, 0o755])
def test_an_ini_file_is_not_taken_for_yaml(capsys, tmp_path, mode):
    """The input that used to end in 'YAML syntax error: did not find expected <document start>'."""
    shutil.copy(SITES["broken"] / "brief.yml", tmp_path / "brief.yml")
    ini = tmp_path / "hosts"
    ini.write_text(to_ini(flatten(yaml.safe_load((SITES["broken"] / "hosts.yml").read_text()))))
    ini.chmod(mode)  # executable or not: with or without the script plugin, the ini plugin reads it
    rc, out, err = cli(capsys, "-i", str(tmp_path))
    assert rc == 1 and "YAML" not in err, err
    assert "preflight FAILED: 9 hosts" in out
