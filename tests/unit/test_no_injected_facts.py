"""ansible.cfg and Molecule set inject_facts_as_vars = false: facts are only ansible_facts.*.

A role, playbook or scenario that reads a fact as a top-level variable (``ansible_os_family``,
``ansible_default_ipv4``, or gpufleet's own ``gpufleet_hw`` from gpufleet.cluster.gpu_facts) gets an
undefined variable at run time. This finds such reads before a run does; Ansible's own magic and
connection variables (``ansible_host``, ``ansible_check_mode``, ...) are not facts and stay allowed.
"""

from __future__ import annotations

import configparser
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = ("roles", "playbooks", "molecule", "inventories")
# Magic, connection and play variables Ansible sets whatever inject_facts_as_vars says.
NOT_FACTS = {
    "become",
    "check_mode",
    "collections",
    "config_file",
    "connection",
    "diff_mode",
    "failed_result",
    "failed_task",
    "forks",
    "host",
    "host_key_checking",
    "index_var",
    "inventory_sources",
    "limit",
    "loop",
    "loop_var",
    "managed",
    "mitogen",
    "parent_role_names",
    "password",
    "play_batch",
    "play_hosts",
    "play_hosts_all",
    "play_name",
    "play_role_names",
    "playbook_python",
    "port",
    "python_interpreter",
    "role_names",
    "run_tags",
    "skip_tags",
    "ssh_common_args",
    "ssh_pass",
    "ssh_private_key_file",
    "user",
    "verbosity",
    "version",
}
INJECTED = re.compile(r"(?<![\w.'\"\[])ansible_(?!facts\b)([a-z0-9_]+)")
# gpufleet.cluster.gpu_facts's fact read bare (or as hostvars[h].gpufleet_hw / 'gpufleet_hw').
GPUFLEET_HW = re.compile(r"(?<!ansible_facts\.)(?<!ansible_facts\[')(?<!'ansible_facts', ')\bgpufleet_hw\b")


def _code_lines(path: pathlib.Path):
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        yield n, line


def _files():
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in (".yml", ".yaml", ".j2") and path.is_file():
                yield path


def test_the_settings_say_no_injection():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "ansible.cfg")
    assert cfg.getboolean("defaults", "inject_facts_as_vars") is False
    molecule = yaml.safe_load((ROOT / ".config/molecule/config.yml").read_text())
    assert molecule["provisioner"]["config_options"]["defaults"]["inject_facts_as_vars"] is False


def test_no_fact_is_read_as_a_top_level_variable():
    found = []
    for path in _files():
        for n, line in _code_lines(path):
            for m in INJECTED.finditer(line):
                if m.group(1) not in NOT_FACTS:
                    found.append(f"{path.relative_to(ROOT)}:{n}: ansible_{m.group(1)}")
            if "name:" not in line and GPUFLEET_HW.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: gpufleet_hw (read ansible_facts.gpufleet_hw)")
    assert not found, "facts read as variables (use ansible_facts.<name>):\n" + "\n".join(found)


def test_the_check_finds_injected_reads():
    assert INJECTED.search("when: ansible_os_family == 'Debian'")
    assert not INJECTED.search("when: ansible_facts.os_family == 'Debian'")
    assert GPUFLEET_HW.search("x: '{{ gpufleet_hw | f }}'")
    assert GPUFLEET_HW.search("map('extract', hostvars, 'gpufleet_hw')")
    assert not GPUFLEET_HW.search("map('extract', hostvars, ['ansible_facts', 'gpufleet_hw'])")
    assert not GPUFLEET_HW.search("x: '{{ ansible_facts.gpufleet_hw | f }}'")
