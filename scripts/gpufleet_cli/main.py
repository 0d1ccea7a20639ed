"""Entry point: discovers ``cmd_*`` modules and dispatches to them.

Each ``cmd_<name>.py`` module that defines ``register(subparsers)`` adds its command(s) and sets
``func`` on the parser via ``set_defaults``; ``cmd_cost`` and ``cmd_history`` are subcommands of
``report`` (``cmd_report`` adds them). ``func``
takes the parsed ``argparse.Namespace`` and returns the exit code:
0 success, 1 failed checks or hosts, 2 usage or unreadable input.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import warnings

from . import __name__ as _pkg
from . import pywarnings
from .common import EXIT_INPUT, CliError, version_string


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpufleet",
        description=(
            "Turn racks of bare-metal GPU servers into accepted clusters: "
            "check the topology brief, provision, gate on hardware facts and NCCL results."
        ),
    )
    parser.add_argument("--version", action="version", version=version_string())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    pkg = sys.modules[_pkg]
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("cmd_"):
            module = importlib.import_module(f"{_pkg}.{info.name}")
            if hasattr(module, "register"):
                module.register(sub)
    # Every command takes -v: at least, it shows the Python warnings of gpufleet's dependencies
    # (pywarnings); the playbook-running commands also pass it to Ansible.
    for command in sub.choices.values():
        if "-v" not in command._option_string_actions:
            command.add_argument(
                "-v", "--verbose", action="count", default=0, help="also show Python warnings of the dependencies"
            )
    return parser


def main(argv: list[str] | None = None) -> int:
    # What the imports of the commands' modules warn about is held until -v is known.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        parser = build_parser()
        args = parser.parse_args(argv)
    pywarnings.configure(getattr(args, "verbose", 0))
    pywarnings.replay(caught)
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"gpufleet: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("gpufleet: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


__all__ = ["EXIT_INPUT", "build_parser", "main"]
