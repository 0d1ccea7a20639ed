"""The CLI is the project's own package: its entry point, its version, and its imports at the top.

``pyproject.toml`` declares the package (``make venv`` installs it editable, giving ``.venv/bin/gpufleet``);
its version is the collection's. Every import of the collection's core sits at the top of a module of
``gpufleet_cli`` (a function-level one hides a dependency), and ``report``'s subcommands do not import
``cmd_report`` back.
"""

from __future__ import annotations

import ast
import importlib
import tomllib
from pathlib import Path

import pytest
import yaml
from gpufleet_cli import common
from gpufleet_cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "scripts" / "gpufleet_cli"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
GALAXY = yaml.safe_load((ROOT / "collections/ansible_collections/gpufleet/cluster/galaxy.yml").read_text())


def test_the_version_is_the_collections_everywhere():
    assert PYPROJECT["project"]["version"] == GALAXY["version"] == common.VERSION


def test_the_entry_point_is_the_cli_main():
    target = PYPROJECT["project"]["scripts"]["gpufleet"]
    module, _, name = target.partition(":")
    assert getattr(importlib.import_module(module), name) is importlib.import_module("gpufleet_cli.main").main
    # The package the build finds is the one the entry point names.
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert (ROOT / setuptools["package-dir"][""] / module.split(".")[0]).resolve() == PACKAGE.resolve()


def _function_imports(path: Path) -> list[str]:
    """``module:line name`` of each import inside a function (not at module level)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom):
                found.append(f"{path.name}:{inner.lineno} {'.' * inner.level}{inner.module or ''}")
            elif isinstance(inner, ast.Import):
                found.extend(f"{path.name}:{inner.lineno} {a.name}" for a in inner.names)
    return found


# The imports that stay in a function, each for its reason (written beside it in the code).
LAZY = {
    # ansible-runner, for the commands that run a playbook.
    "runner.py": {"ansible_runner"},
}


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_imports_are_at_the_top(path):
    lazy = [f for f in _function_imports(path) if f.split(" ", 1)[1] not in LAZY.get(path.name, set())]
    assert lazy == []


def test_the_check_finds_an_import_inside_a_function(tmp_path):
    # The check above must see the imports it is meant to refuse.
    sample = tmp_path / "cmd_sample.py"
    sample.write_text(
        "from .common import ROOT\n\n\ndef f():\n"
        "    from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import cost\n"
        "    from .cmd_report import find_reports\n"
    )
    assert _function_imports(sample) == [
        "cmd_sample.py:5 ansible_collections.gpufleet.cluster.plugins.module_utils.ops",
        "cmd_sample.py:6 .cmd_report",
    ]


def _imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names |= {node.module} if node.module else {a.name for a in node.names}
    return names


@pytest.mark.parametrize("module", ["cmd_cost.py", "cmd_history.py"])
def test_reports_subcommands_do_not_import_cmd_report(module):
    assert "cmd_report" not in _imports_of(PACKAGE / module)


def test_preflights_child_imports_nothing_of_the_collection():
    # Ansible's collection loader (init_plugin_loader) must be the first to load the collection in the
    # child, or the collection's plugins its inventory uses stand without their collection metadata.
    tree = ast.parse((PACKAGE / "inventory_child.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not [m for m in imported if m.startswith("ansible_collections") or m.startswith("cmd_")]
    assert {m for m in imported if not m.startswith("ansible")} <= {"__future__", "common", "typing"} | {
        "contextlib",
        "gc",
        "json",
        "os",
        "re",
        "sys",
    }


@pytest.mark.parametrize(
    ("argv", "command", "expected"),
    [
        (["report", "cost", "--sacct", "s.txt", "--brief", "b.yml"], "cost", {"sacct": "s.txt", "brief": "b.yml"}),
        (["report", "history", "gpu01", "--cluster", "lab"], "history", {"node": "gpu01", "cluster": "lab"}),
        (["report", "show", "r/lab/x"], "show", {"path": "r/lab/x"}),
        (["report", "r/lab/x"], "show", {"path": "r/lab/x"}),
        (["report", "r/lab/x", "--kind", "gate"], "show", {"path": "r/lab/x", "kind": "gate"}),
        (["report", "--kind", "gate", "r/lab/x"], "show", {"path": "r/lab/x", "kind": "gate"}),
        (["report", "--kind", "drift"], None, {"path": None, "kind": "drift"}),
        (["report", "--dir", "elsewhere", "cost", "--gpus", "8"], "cost", {"dir": "elsewhere", "gpus": 8}),
        (["report", "cost", "--dir", "elsewhere"], "cost", {"dir": "elsewhere"}),
    ],
)
def test_report_subcommands_and_the_path_spelling(argv, command, expected):
    args = build_parser().parse_args(argv)
    assert args.command == "report" and getattr(args, "report_command", None) == command
    assert {k: getattr(args, k) for k in expected} == expected
    assert args.func.__module__ == f"gpufleet_cli.cmd_{'report' if command in (None, 'show') else command}"


@pytest.mark.parametrize("command", ["show", "cost", "history"])
def test_each_report_subcommand_has_its_own_help(capsys, command):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["report", command, "--help"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: gpufleet report {command} [-h]")
