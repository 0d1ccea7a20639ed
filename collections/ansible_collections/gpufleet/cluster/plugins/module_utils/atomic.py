# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Write a file whole or not at all.

A reader (the CLI, the next run, an operator) never sees half a file: the text goes
to a temporary file in the same directory, is flushed to disk, and replaces the
target in one rename. A full disk, a kill or a Ctrl-C in the middle leaves the old
file (or none) and no temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile


def write_atomic(path: str, text: str, mode: int = 0o644) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically, with permissions ``mode``."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
