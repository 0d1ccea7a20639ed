"""ansible.cfg acts on no site by surprise and checks host keys; only the lab's inventory opts out."""

from __future__ import annotations

import configparser
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cfg() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(os.path.join(ROOT, "ansible.cfg"))
    return cfg


def test_no_default_inventory():
    # A command typed without -i must not reach the lab (or any site).
    assert not _cfg().has_option("defaults", "inventory")


def test_host_keys_are_checked():
    assert _cfg().getboolean("defaults", "host_key_checking", fallback=True) is True


def _connection(inventory: str) -> dict:
    path = os.path.join(ROOT, "inventories", inventory, "group_vars", "all", "connection.yml")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh) or {}


def test_only_the_lab_turns_host_key_checking_off():
    # The lab's containers get new host keys each time they are made: its inventory opts out,
    # in the variable both Ansible's ssh connection and Mitogen read.
    assert _connection("lab").get("ansible_host_key_checking") is False
    for site in sorted(os.listdir(os.path.join(ROOT, "inventories"))):
        if site == "lab":
            continue
        conn = _connection(site)
        assert conn.get("ansible_host_key_checking", True) is not False, site
        assert "StrictHostKeyChecking=no" not in str(conn.get("ansible_ssh_common_args", "")), site
