# Managed by gpufleet (role telemetry): local changes are overwritten.
"""What gpufleet's telemetry programs share: Prometheus' text format, and writing a textfile
collector's file atomically.

Installed beside the programs (``telemetry_bin_dir``), which import it from their own directory.
Python 3 stdlib only.
"""

from __future__ import annotations

import os
import tempfile


def write_atomic(path: str, text: str, mode: int = 0o644) -> None:
    """Write next to the target, then rename: node_exporter never reads half a file, and a program
    killed mid-write leaves the previous file whole (and no temporary file behind)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".gpufleet-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def escape(value) -> str:
    """A label value in Prometheus' text exposition format: backslash, double quote and line feed escaped."""
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def number(value: float) -> str:
    """A sample value: whole numbers without a fraction, others to six decimals (no float noise)."""
    value = round(float(value), 6)
    return str(int(value)) if value.is_integer() else repr(value)


class Exposition:
    """The lines of one textfile, built family by family; :meth:`text` is the file."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, rows) -> None:
        """``# HELP`` and ``# TYPE`` of one metric, then a sample per ``(labels, value)`` row, labels
        being ``(name, value)`` pairs in the order they are printed."""
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in rows:
            text = ",".join(f'{k}="{escape(v)}"' for k, v in labels)
            self.lines.append(f"{name}{{{text}}} {number(value)}")

    def last_run(self, collector: str, now: float) -> None:
        """The timestamp every gpufleet collector writes, by which a stale file is alerted on."""
        self.family(
            "gpufleet_textfile_last_run_timestamp_seconds",
            "gauge",
            "When a gpufleet textfile collector last wrote its file.",
            [([("collector", collector)], int(now))],
        )

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
