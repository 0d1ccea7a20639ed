"""Where reports are and how they are read: what ``gpufleet report`` renders and ``report cost`` reads.

Reports live under ``reports/<cluster>/<timestamp>/`` (``--dir``, default ``reports/`` at the repository
root); the latest is the greatest timestamp. A directory's kinds are told by the files it holds (see
``cmd_report``).
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import (
    InputError,
    load_json_bytes,
    read_regular_file,
)

from .common import ROOT, CliError

REPORTS_DIR = os.path.join(ROOT, "reports")
KINDS = ("acceptance", "gate", "drift", "remediation")
GATE_DIRS = ("hardware", "gate")
GATE_FILES = ("gate.json", "hardware.json")
MAX_JSON_BYTES = 64 * 1024 * 1024
_STAMP_RE = re.compile(r"^\d{8}T?\d{4,6}")


def add_dir_option(p: argparse.ArgumentParser, inherited: bool = False) -> None:
    """``--dir DIR``. ``inherited``: on a subcommand of ``report``, which has ``--dir`` too: the value
    stays ``report``'s (its default, or ``report --dir X``) unless given after the subcommand."""
    p.add_argument(
        "--dir",
        default=argparse.SUPPRESS if inherited else REPORTS_DIR,
        metavar="DIR",
        help="where reports are written (default: reports/ at the repository root)",
    )


@dataclass(frozen=True)
class ReportDir:
    path: str
    kinds: tuple[str, ...]

    @property
    def stamp(self) -> str:
        return os.path.basename(os.path.normpath(self.path))

    @property
    def cluster(self) -> str:
        return os.path.basename(os.path.dirname(os.path.normpath(self.path)))


def json_files(directory: str) -> list[str]:
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [os.path.join(directory, n) for n in names if n.endswith(".json") and not n.startswith(".")]


def kinds_in(directory: str) -> tuple[str, ...]:
    """The kinds of report a directory holds, in KINDS order."""
    found: list[str] = []
    if os.path.isfile(os.path.join(directory, "acceptance.json")):
        found.append("acceptance")
    if any(os.path.isfile(os.path.join(directory, f)) for f in GATE_FILES) or any(
        json_files(os.path.join(directory, d)) for d in GATE_DIRS
    ):
        found.append("gate")
    if os.path.isfile(os.path.join(directory, "drift.json")) or json_files(os.path.join(directory, "drift")):
        found.append("drift")
    if os.path.isfile(os.path.join(directory, "remediation.json")):
        found.append("remediation")
    return tuple(found)


def find_reports(base: str, kind: str | None = None) -> list[ReportDir]:
    """Report directories one or two levels under ``base`` (``<cluster>/<timestamp>`` or ``<run>``), oldest first."""
    out: list[ReportDir] = []
    if not os.path.isdir(base):
        return out

    def subdirs(d: str) -> list[str]:
        try:
            return sorted(os.path.join(d, n) for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)))
        except OSError:
            return []

    for first in subdirs(base):
        candidates = [first, *subdirs(first)]
        for d in candidates:
            ks = kinds_in(d)
            if ks and (kind is None or kind in ks):
                out.append(ReportDir(d, ks))
    return sorted(out, key=_age_key)


def _age_key(r: ReportDir) -> tuple:
    try:
        mtime = os.path.getmtime(r.path)
    except OSError:
        mtime = 0.0
    # Timestamp-named directories sort by name (UTC stamps compare as strings); others after them by mtime.
    return (1 if _STAMP_RE.match(r.stamp) else 0, r.stamp if _STAMP_RE.match(r.stamp) else "", mtime, r.path)


def show_dir(path: str) -> str:
    """A directory as an error message names it: relative to the working directory when under it."""
    rel = os.path.relpath(path)
    return (rel if not rel.startswith("..") else path).rstrip("/") + "/"


def try_load_json(path: str) -> tuple[object, str | None]:
    """(data, None), or (None, why it cannot be read): for files a run wrote, where an unreadable one is
    reported among others rather than stopping the command. Bounded as :func:`load_json` is."""
    try:
        return load_json_bytes(read_regular_file(path, "a JSON record", MAX_JSON_BYTES), path), None
    except InputError as exc:
        return None, str(exc)


def load_json(path: str):
    """A report's JSON: a regular file of at most MAX_JSON_BYTES (bounded.py); CliError(2) naming it otherwise."""
    try:
        return load_json_bytes(read_regular_file(path, "a JSON report", MAX_JSON_BYTES), path)
    except InputError as exc:
        raise CliError(str(exc)) from None
