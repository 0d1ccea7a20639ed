# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Read input files with bounds set before anything is parsed (controller only).

Every file the CLI and the direct inventory reader take from a user goes through here:

- :func:`read_regular_file`: a regular file only (a FIFO, a device, a socket or a directory is refused
  by name, and a FIFO is never opened for reading), at most ``max_bytes`` of it;
- :func:`check_yaml_node`: a composed YAML document before it is constructed: nesting depth, and how
  many nodes its aliases add (an "alias bomb" is a few hundred bytes that expand to billions of nodes)
  or whether an alias refers to a node that holds it;
- :class:`BoundedConstructorMixin`: duplicate keys in a mapping are errors naming both lines, and an
  integer Python cannot print (past its 4,300-digit limit, reachable through a hex or octal literal)
  is an error naming its line;
- :func:`load_json_bytes`: JSON with the same bounds on integers and nesting;
- :func:`short_repr`: a value for an error message, cut *before* it is built, so that a huge value
  never costs a huge ``repr()``.

Each failure is an :class:`InputError` whose message names the file and says what was expected and
what was found; the CLI prints it on one line and exits 2.
"""

from __future__ import annotations

import json
import math
import os
import reprlib
import stat
from typing import Any

import yaml

# Larger than any brief, inventory, report or nccl-tests log in use by two orders of magnitude.
MAX_FILE_BYTES = 64 * 1024 * 1024
# Nesting deeper than this is no inventory or brief; the checks downstream recurse into values.
MAX_DEPTH = 200
# Nodes that aliases may add beyond those written in the document (YAML merge keys and anchors
# shared between hosts stay far below it; an alias bomb goes past it after a few levels).
MAX_ALIAS_EXPANSION = 1_000_000
# Digits of the largest integer accepted anywhere: Python's own limit for int <-> str conversion.
MAX_INT_DIGITS = 4300
# YAML documents smaller than this are always measured (check_yaml_node), larger ones when they hold an alias.
_MEASURE_ALWAYS_BELOW = 1024 * 1024

_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class InputError(Exception):
    """Input that cannot be read or parsed: the message names the file (and line where known)."""


def file_kind(mode: int) -> str:
    """What a file mode says the file is: "a regular file", "a FIFO (named pipe)", ..."""
    for test, name in _FILE_KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def _os_error(path: str, exc: OSError) -> InputError:
    return InputError(f"{path}: cannot read: {exc.strerror or exc}")


def check_regular_file(path: str, what: str = "a file") -> os.stat_result:
    """The file's stat when it is a regular file (links followed); InputError naming what it is otherwise."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file, expected {what}") from None
    except OSError as exc:
        raise _os_error(path, exc) from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: is {file_kind(st.st_mode)}, expected {what} (a regular file)")
    return st


def read_regular_file(path: str, what: str = "a file", max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The content of a regular file of at most ``max_bytes``; InputError naming the path otherwise.

    The path is checked before it is opened and again on the open descriptor (it may have been
    replaced in between); the open never blocks (O_NONBLOCK), so a FIFO put there in the meantime is
    refused, not waited on. A file that grows while it is read is cut at ``max_bytes + 1`` and refused.
    """
    st = check_regular_file(path, what)
    if st.st_size > max_bytes:
        raise InputError(f"{path}: {st.st_size} bytes, expected {what} of at most {max_bytes} bytes")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _os_error(path, exc) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: is {file_kind(st.st_mode)}, expected {what} (a regular file)")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise _os_error(path, exc) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise InputError(f"{path}: more than {max_bytes} bytes, expected {what} of at most {max_bytes} bytes")
    return data


def read_stream(stream, what: str, max_bytes: int = MAX_FILE_BYTES, name: str = "<stdin>") -> bytes:
    """At most ``max_bytes`` from a stream (standard input), as bytes; InputError when there is more.
    A text stream is read as characters and encoded."""
    data = stream.read(max_bytes + 1)
    if isinstance(data, str):
        data = data.encode("utf-8", errors="surrogateescape")
    if len(data) > max_bytes:
        raise InputError(f"{name}: more than {max_bytes} bytes, expected {what} of at most {max_bytes} bytes")
    return data


def check_directory(path: str, what: str = "a directory") -> list[str]:
    """The sorted entries of a directory that can be listed; InputError naming it otherwise."""
    try:
        return sorted(os.listdir(path))
    except NotADirectoryError:
        raise InputError(f"{path}: is not a directory, expected {what}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot list {what}: {exc.strerror or exc}") from None


# --- values in messages --------------------------------------------------------------------------

_REPR = reprlib.Repr()
_REPR.maxstring = 80
_REPR.maxother = 80
_REPR.maxlevel = 3
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` of at most about ``limit`` characters, never building the whole repr first.

    An integer too long to print says how many digits it has instead.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 1000:
        return f"<an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits>"
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- YAML -----------------------------------------------------------------------------------------


def _where(path: str, node) -> str:
    mark = getattr(node, "start_mark", None)
    return f"{path}:{mark.line + 1}" if mark is not None else path


def check_yaml_node(root, path: str, max_depth: int = MAX_DEPTH, max_expansion: int = MAX_ALIAS_EXPANSION) -> None:
    """Refuse a composed YAML document (a node graph) that nests deeper than ``max_depth``, whose
    aliases add more than ``max_expansion`` nodes, or where an alias refers to a node that holds it.

    Iterative, with each shared node measured once: its cost is that of the document as written.
    """
    if root is None:
        return
    size: dict[int, int] = {}  # id(node) -> nodes it stands for, aliases expanded
    depth: dict[int, int] = {}  # id(node) -> levels of nesting, itself included
    open_nodes: set[int] = set()  # nodes on the current path from the root
    written = 0
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        nid = id(node)
        value = node.value
        if isinstance(node, yaml.ScalarNode):
            if nid not in size:
                written += 1
                size[nid], depth[nid] = 1, 1
            continue
        kids = [n for pair in value for n in pair] if isinstance(node, yaml.MappingNode) else value
        if finished:
            open_nodes.discard(nid)
            size[nid] = 1 + sum(size[id(k)] for k in kids)
            depth[nid] = d = 1 + max((depth[id(k)] for k in kids), default=0)
            if d > max_depth:
                raise InputError(f"{_where(path, node)}: expected at most {max_depth} levels of nesting, found {d}")
            continue
        if nid in size:
            continue
        if nid in open_nodes:
            raise InputError(f"{_where(path, node)}: an alias refers to a node that contains it (a recursive alias)")
        written += 1
        open_nodes.add(nid)
        if len(open_nodes) > max_depth:
            raise InputError(f"{_where(path, node)}: expected at most {max_depth} levels of nesting, found more")
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)
    added = size[id(root)] - written
    if added > max_expansion:
        raise InputError(
            f"{path}: its aliases expand to {added} more nodes than are written, expected at most "
            f"{max_expansion} (an alias bomb?)"
        )


class BoundedConstructorMixin:
    """For a PyYAML loader class: bounds checked on the composed document, duplicate keys refused,
    integers bounded. Put it before the loader in the bases; set ``bounded_path`` for messages."""

    bounded_path = "<yaml>"
    # Whether the composed document is measured (check_yaml_node) before it is constructed.
    bounded_measure = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # PyYAML looks constructors up in a table, not by method: the bounded one goes in each
        # subclass's table (add_constructor copies the table before changing it).
        if hasattr(cls, "add_constructor"):
            cls.add_constructor("tag:yaml.org,2002:int", BoundedConstructorMixin.construct_yaml_int)

    def get_single_data(self):
        node = self.get_single_node()  # type: ignore[attr-defined]
        if node is None:
            return None
        if self.bounded_measure:
            check_yaml_node(node, self.bounded_path)
        return self.construct_document(node)  # type: ignore[attr-defined]

    def construct_mapping(self, node, deep=False):
        mapping = super().construct_mapping(node, deep=deep)  # type: ignore[misc]
        pairs = node.value  # after the merge keys were flattened into it, explicit keys last
        if len(mapping) != len(pairs):
            self._duplicate_key(node)
        return mapping

    def _duplicate_key(self, node) -> None:
        # Keys that merge keys brought in (written before the explicit ones, by flatten_mapping) may
        # be overridden by an explicit key; two explicit keys with the same value may not.
        explicit = getattr(node, "_explicit_keys", None)
        first: dict[Any, Any] = {}
        for key_node in explicit if explicit is not None else [k for k, _ in node.value]:
            key = self.construct_object(key_node)  # type: ignore[attr-defined]  # cached: no second build
            try:
                seen = first.get(key)
            except TypeError:
                continue
            if seen is not None:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {short_repr(key)} (first on line {seen.start_mark.line + 1}): expected each "
                    "key once in a mapping",
                    key_node.start_mark,
                )
            first[key] = key_node

    def flatten_mapping(self, node):
        explicit = [k for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"]
        merged = len(explicit) != len(node.value)
        super().flatten_mapping(node)  # type: ignore[misc]
        if merged and not hasattr(node, "_explicit_keys"):
            node._explicit_keys = explicit  # type: ignore[attr-defined]

    def construct_yaml_int(self, node):
        text = str(node.value)
        if len(text) > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"expected an integer of at most {MAX_INT_DIGITS} digits, found one written in {len(text)} characters",
                node.start_mark,
            )
        try:
            value = super().construct_yaml_int(node)  # type: ignore[misc]
        except ValueError as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"expected an integer, found {short_repr(text)} ({exc})", node.start_mark
            ) from None
        if value.bit_length() > MAX_INT_DIGITS * 3.33:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"expected an integer of at most {MAX_INT_DIGITS} digits, found a larger one",
                node.start_mark,
            )
        return value


def bounded_loader(base: type) -> type:
    """A loader class: ``base`` (a PyYAML loader) with :class:`BoundedConstructorMixin`'s bounds."""
    return type(f"Bounded{base.__name__}", (BoundedConstructorMixin, base), {})


def load_yaml_bytes(data: bytes | str, path: str, loader: type) -> Any:
    """One YAML document parsed by ``loader`` (a class made with :class:`BoundedConstructorMixin`),
    its messages naming ``path``; PyYAML's own exceptions pass through for the caller to word."""
    instance = loader(data)
    instance.bounded_path = path
    # Measuring costs about a fifth of the parse. Without an alias ("*name") a document expands to
    # nothing more than is written, and libyaml stops nesting at 1,000 levels: a large file without
    # one (thousands of hosts) skips the measure.
    marker = b"*" if isinstance(data, bytes) else "*"
    instance.bounded_measure = marker in data or len(data) < _MEASURE_ALWAYS_BELOW
    try:
        return instance.get_single_data()
    finally:
        instance.dispose()


# --- JSON -----------------------------------------------------------------------------------------


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"expected an integer of at most {MAX_INT_DIGITS} digits, found {len(text)} digits")
    return int(text)


def load_json_bytes(data: bytes | str, path: str) -> Any:
    """Parse JSON text; InputError names the file, line and column on any failure (nesting and
    integer length bounded). ``NaN`` and ``Infinity`` are kept: callers check numbers where they read them."""
    try:
        text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}), expected JSON") from None
    try:
        return json.loads(text, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deep, expected at most a few hundred levels") from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from None


def finite_number(value: Any) -> float | int | None:
    """``value`` when it is an int or a finite float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "InputError",
    "bounded_loader",
    "check_directory",
    "check_regular_file",
    "check_yaml_node",
    "file_kind",
    "finite_number",
    "load_json_bytes",
    "load_yaml_bytes",
    "read_regular_file",
    "read_stream",
    "short_repr",
]
