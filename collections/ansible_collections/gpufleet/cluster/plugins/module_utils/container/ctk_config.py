# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""What ``nvidia-ctk runtime configure --runtime=containerd --dry-run`` prints, split into files.

Up to toolkit 1.17 the dry run prints one TOML document: the whole containerd config.toml with
the NVIDIA runtime added. From 1.18 it prints two, one after the other on stdout: first the
drop-in (what ``/etc/containerd/config.d/99-nvidia.toml`` would hold: the CRI plugin's section
with the NVIDIA runtime), then the top-level config.toml with
``imports = ["/etc/containerd/config.d/*.toml"]`` added (nvidia-container-toolkit v1.18.0,
pkg/config/engine/containerd/config_drop_in.go; the "Drop-in config:" / "Top-level config:"
labels go to stderr).

The documents are written by go-toml, which puts a document's root keys (``version``,
``imports``) before its tables and indents the keys inside a table. So the second document
starts at the first unindented ``key = value`` line that follows a table header; the split is
taken only where both halves parse as TOML. Pure Python, no I/O.
"""

from __future__ import annotations

import re
import tomllib

_TABLE = re.compile(r"^\s*\[")
_ROOT_KEY = re.compile(r"""^(?:[A-Za-z0-9_-]+|"[^"]*")\s*=""")


def _load(text: str) -> dict | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


def split_dry_run(stdout: str) -> dict[str, str]:
    """``{"top_level": ..., "drop_in": ...}`` from the dry run's stdout.

    One document (toolkit < 1.18): it is the top-level config and ``drop_in`` is "" — the text is
    returned unchanged. Two documents (toolkit >= 1.18): the first is the drop-in, the second the
    top-level config (which imports the drop-in), each without surrounding blank lines. Raises
    ValueError when the text is not one or two TOML documents.
    """
    if not isinstance(stdout, str):
        raise ValueError(f"expected the dry run's stdout as text, found {type(stdout).__name__}")
    lines = stdout.splitlines(keepends=True)
    seen_table = False
    for i, line in enumerate(lines):
        if _TABLE.match(line):
            seen_table = True
            continue
        if seen_table and _ROOT_KEY.match(line):
            first, second = "".join(lines[:i]), "".join(lines[i:])
            # The top-level config of a drop-in always imports it: a key inside a table that
            # happens to be unindented is not taken for the start of a document.
            top = _load(second)
            if _load(first) is not None and top is not None and "imports" in top:
                return {"drop_in": first.strip("\n"), "top_level": second.strip("\n")}
    if _load(stdout) is not None:
        return {"drop_in": "", "top_level": stdout}
    raise ValueError(
        "expected one TOML document (nvidia-ctk < 1.18) or a drop-in followed by the top-level config "
        "(nvidia-ctk >= 1.18) from nvidia-ctk runtime configure --dry-run, found text that is neither"
    )


__all__ = ["split_dry_run"]
