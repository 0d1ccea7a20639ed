"""The README's quick start is scripts/quickstart: the same commands in the same order, each one a
command the CLI knows."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "quickstart")
MARKER = "<!-- quickstart: the commands of scripts/quickstart (a unit test holds them equal) -->"


def _strip(line: str) -> str:
    """A shell line without its trailing comment and extra blanks."""
    return " ".join(re.sub(r"\s+#.*$", "", line).split())


def readme_commands() -> list[str]:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        text = fh.read()
    assert MARKER in text, "README.md: the quick-start block's marker is gone"
    block = re.search(r"```sh\n(.*?)```", text.split(MARKER, 1)[1], re.DOTALL)
    assert block, "README.md: no ```sh block after the quick-start marker"
    return [c for c in map(_strip, block.group(1).splitlines()) if c]


def script_commands() -> list[str]:
    with open(SCRIPT, encoding="utf-8") as fh:
        text = fh.read()
    body = text.split("# quickstart:begin\n", 1)[1].split("# quickstart:end\n", 1)[0]
    return [c for c in map(_strip, body.splitlines()) if c]


def test_the_readme_shows_exactly_the_scripts_commands():
    assert readme_commands() == script_commands()


def test_the_quick_start_runs_every_gate_and_the_cost_report():
    commands = script_commands()
    for sub in ("preflight", "provision", "verify", "accept", "report cost", "drift"):
        assert any(c.startswith(f"scripts/gpufleet {sub} ") for c in commands), sub
    # The preview comes before the real run.
    assert commands.index('scripts/gpufleet provision -i "$INV" --check --diff') < commands.index(
        'scripts/gpufleet provision -i "$INV"'
    )


@pytest.mark.parametrize("command", [c for c in script_commands() if c.startswith("scripts/gpufleet ")])
def test_each_cli_command_is_one_the_cli_knows(command):
    words = shlex.split(command.replace('"$INV"', "inventories/lab"))
    # The subcommand words (up to the first option) with --help: argparse rejects an unknown one.
    sub = []
    for word in words[1:]:
        if word.startswith("-"):
            break
        sub.append(word)
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "gpufleet"), *sub, "--help"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    # Every option the quick start passes is one the subcommand's help names.
    for opt in (w for w in words if w.startswith("-")):
        assert opt in proc.stdout, f"{command}: {opt} not in `gpufleet {' '.join(sub)} --help`"


def test_the_script_refuses_an_inventory_that_is_not_there(tmp_path):
    proc = subprocess.run(
        ["bash", SCRIPT, str(tmp_path / "nowhere")], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert proc.returncode == 2
    assert "no such inventory directory" in proc.stderr
