"""``provision``, ``verify`` and ``accept`` are always subcommands, each running a playbook of the repository."""

from __future__ import annotations

import os

import pytest
from gpufleet_cli import cmd_provision
from gpufleet_cli.main import build_parser

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("name", sorted(cmd_provision.COMMANDS))
def test_each_stage_command_runs_a_playbook_that_exists(name):
    playbook = cmd_provision.COMMANDS[name][0]
    assert os.path.isfile(os.path.join(ROOT, "playbooks", playbook)), playbook


@pytest.mark.parametrize("name", sorted(cmd_provision.COMMANDS))
def test_each_stage_command_is_registered_whatever_the_root(name, tmp_path, monkeypatch):
    # A root without the playbooks: the commands are still there (a missing playbook is the run's
    # error, named by ansible-playbook, not a subcommand that silently disappears).
    monkeypatch.setattr(cmd_provision, "ROOT", str(tmp_path))
    args = build_parser().parse_args([name, "-i", "inventories/lab"])
    assert args.command == name
