"""Python warnings of gpufleet's dependencies: kept from the user unless asked for (``-v``).

A release of a library that Ansible imports can start printing a Python warning on every run (a
``CryptographyDeprecationWarning`` when ansible-core imports a deprecated key type, say). Such a line
is not gpufleet's word, says nothing about the cluster, and pushes the CLI's own lines down. So:

- in the CLI's own process, a warning raised from a file outside this checkout is dropped unless
  ``-v`` was given; one raised from gpufleet's own code is always shown;
- every Python child the CLI starts (the inventory reader, ansible-playbook through ansible-runner,
  ``ansible`` for a command on a host) gets ``PYTHONWARNINGS=ignore`` unless ``-v`` was given. Those
  are Ansible's processes: Ansible's own warnings and deprecations go through its display, not
  through Python's warnings, so what the setting hides there is its libraries' alone. A
  ``PYTHONWARNINGS`` the user set is left as it is.

Ansible's own warnings ([WARNING]/[DEPRECATION WARNING] lines) are untouched either way.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterable

from .common import ROOT

_OWN = tuple(os.path.join(os.path.realpath(ROOT), d) + os.sep for d in ("scripts", "collections"))
_state = {"show": False}


def is_own(filename: str) -> bool:
    """Whether a warning raised at ``filename`` comes from gpufleet's own code."""
    try:
        return os.path.realpath(filename).startswith(_OWN)
    except (TypeError, ValueError):
        return False


def _showwarning(message, category, filename, lineno, file=None, line=None):
    # What Python's own showwarning writes, where it writes it.
    if _state["show"] or is_own(filename):
        # stderr closed: the warning is lost, as Python's own would be.
        with contextlib.suppress(OSError):
            (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))


def configure(verbose: int | bool) -> None:
    """Show the dependencies' warnings from now on when ``verbose``; hide them otherwise."""
    _state["show"] = bool(verbose)
    warnings.showwarning = _showwarning


def replay(caught: Iterable[warnings.WarningMessage]) -> None:
    """Show the warnings recorded before ``configure`` (imports, argument parsing) by the same rule."""
    for w in caught:
        _showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)


def child_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a Python child of the CLI: its Python warnings hidden unless ``-v``."""
    if not _state["show"] and "PYTHONWARNINGS" not in os.environ:
        env["PYTHONWARNINGS"] = "ignore"
    return env
