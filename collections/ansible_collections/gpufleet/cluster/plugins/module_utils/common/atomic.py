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


def append_line(path: str, text: str, mode: int = 0o644) -> None:
    """Append ``text`` (whole lines, UTF-8) to ``path`` under an exclusive lock, in one ``write``.

    Two writers (forks of one run, two runs) never interleave: each holds ``flock`` on the file
    while it appends. A writer killed mid-write leaves at most a torn last line; the next append
    starts on a new line, so the torn one stays a line of its own that readers skip. A write that
    fails (a full disk) is cut back to the file's length before it, and the error raised.
    """
    import fcntl

    data = text.encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    data = b"\n" + data
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)
