# Managed by gpufleet (role telemetry): local changes are overwritten.
"""What gpufleet's telemetry programs share: writing a textfile collector's file atomically.

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
