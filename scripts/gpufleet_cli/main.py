"""Entry point: discovers ``cmd_*`` modules and dispatches to them.

Each ``cmd_<name>.py`` module that defines ``register(subparsers)`` adds its command(s) and sets
``func`` on the parser via ``set_defaults``; ``cmd_cost`` and ``cmd_history`` are subcommands of
``report`` (``cmd_report`` adds them). ``func``
takes the parsed ``argparse.Namespace`` and returns the exit code:
0 success, 1 failed checks or hosts, 2 usage or unreadable input.

Whatever a command raises ends in one line on standard error and an exit code, never a traceback:
an input that cannot be read or parsed (``InputError``) exits 2 with its message; an error nobody
foresaw exits 2 too, naming the command's inputs and the log file that holds its traceback.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import os
import pkgutil
import sys
import tempfile
import traceback
import warnings

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import InputError

from . import __name__ as _pkg
from . import pywarnings
from .common import EXIT_INPUT, ROOT, CliError, version_string

# The arguments that name what a command reads, in the order an error message lists them.
_INPUT_ARGS = ("inventory", "brief", "racks", "files", "file", "dir", "output")


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
    except InputError as exc:
        print(f"gpufleet: error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("gpufleet: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except (Exception, RecursionError, MemoryError) as exc:
        return _unexpected(args, exc)


def _one_line(text: str, limit: int = 500) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def inputs_of(args: argparse.Namespace) -> str:
    """What the command was given to read, for a message: ``-i inventories/lab, --brief b.yml``."""
    named = []
    for name in _INPUT_ARGS:
        value = getattr(args, name, None)
        if value:
            values = value if isinstance(value, list) else [value]
            named.append(f"{name} {', '.join(str(v) for v in values)}")
    return "; ".join(named) or "no input file"


def log_traceback(exc: BaseException) -> str | None:
    """Write the traceback to a new file under .cache/errors/ (else the temporary directory); its path."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    for base in (os.path.join(ROOT, ".cache", "errors"), tempfile.gettempdir()):
        try:
            os.makedirs(base, exist_ok=True)
            fd, path = tempfile.mkstemp(prefix=f"gpufleet-{stamp}-", suffix=".log", dir=base)
            with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:
                fh.write(" ".join(sys.argv) + "\n" + text)
            return path
        except (OSError, RecursionError, MemoryError):
            continue
    return None


def _unexpected(args: argparse.Namespace, exc: BaseException) -> int:
    """An error no check foresaw: one line naming the inputs and the traceback's log file, exit 2."""
    try:
        log = log_traceback(exc)
        what = _one_line(f"{type(exc).__name__}: {exc}", 300)
    except (Exception, RecursionError, MemoryError):  # a message that cannot even be printed
        log, what = None, type(exc).__name__
    where = f"traceback in {log}" if log else "no traceback could be written"
    print(
        f"gpufleet: error: {args.command} stopped on input it could not handle ({inputs_of(args)}): {what} "
        f"({where}; please report it)",
        file=sys.stderr,
    )
    return EXIT_INPUT


__all__ = ["EXIT_INPUT", "build_parser", "inputs_of", "log_traceback", "main"]
