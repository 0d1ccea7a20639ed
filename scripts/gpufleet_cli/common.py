"""Helpers shared by the CLI's subcommands."""

from __future__ import annotations

import os
import subprocess
import sys

try:
    from ansible.release import __version__ as ANSIBLE_CORE_VERSION
except ImportError:  # pragma: no cover - the venv always has it
    ANSIBLE_CORE_VERSION = "not installed"

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# ansible.cfg's fact cache (gpufleet.cluster.jsonfile, builtin jsonfile's files; fact_caching_timeout),
# kept between runs: `gpufleet provision` points ansible-runner at it, `gpufleet lab up|down` forget
# the lab hosts in it.
FACT_CACHE = os.path.join(ROOT, ".cache", "facts")
EXIT_OK, EXIT_FAILED, EXIT_INPUT = 0, 1, 2
# A run stopped by Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports it).
EXIT_INTERRUPTED = 130
VERSION = "0.1.0"


class CliError(Exception):
    """A user-facing error: printed without a traceback, exits with ``code``."""

    def __init__(self, message: str, code: int = EXIT_INPUT):
        super().__init__(message)
        self.code = code


def version_string() -> str:
    return f"gpufleet {VERSION} (ansible-core {ANSIBLE_CORE_VERSION})"


# What the benchmarks that need the lab print, and exit 0 after, when it is not up.
LAB_NOT_UP = "lab not up: run scripts/gpufleet lab up"


def lab_up() -> bool:
    """Whether `scripts/gpufleet lab status` says every lab host is up (False where it cannot say)."""
    gpufleet = os.path.join(ROOT, "scripts", "gpufleet")
    try:
        proc = subprocess.run(
            [sys.executable, gpufleet, "lab", "status"], capture_output=True, text=True, check=False, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0
