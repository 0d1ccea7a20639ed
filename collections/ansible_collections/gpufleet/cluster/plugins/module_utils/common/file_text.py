# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Host side of writing a file whose text the controller rendered (file_content and files).

The controller sends the SHA-1 of the text it wants; the host compares it with the file's and, only when
they differ, receives the text as a file in the connection's temporary directory, checks it with the
validate command and moves it over the file atomically, as ansible.builtin.copy does.
"""

from __future__ import annotations

import os

from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text

# How much of a file the diff looks at to decide whether it is binary (ansible.builtin.file's peek).
_PEEK_BYTES = 8192
# The file options a task may set on what it writes (ansible.builtin.files' common arguments).
FILE_ATTRIBUTE_KEYS = ("owner", "group", "mode", "seuser", "serole", "selevel", "setype", "attributes")


def current_checksum(module, dest: str) -> str | None:
    """The SHA-1 of dest's text, or None where dest is not a readable regular file (absent, a link, a directory)."""
    b_dest = to_bytes(dest, errors="surrogate_or_strict")
    if os.path.islink(b_dest) or not os.path.isfile(b_dest) or not os.access(b_dest, os.R_OK):
        return None
    return module.sha1(dest)


def before_diff(dest: str, size_limit: int) -> dict:
    """The diff's "before" side as ansible.builtin.copy shows it: the text, or why it is left out."""
    b_dest = to_bytes(dest, errors="surrogate_or_strict")
    if os.path.islink(b_dest) or not os.path.isfile(b_dest):
        return {"before": ""}
    size = os.path.getsize(b_dest)
    if size_limit > 0 and size > size_limit:
        return {"dst_larger": size_limit}
    with open(b_dest, "rb") as f:
        data = f.read()
    if b"\x00" in data[:_PEEK_BYTES]:
        return {"dst_binary": 1}
    return {"before_header": dest, "before": to_text(data)}


def file_args(module, attributes: dict, path: str) -> dict:
    """The common file arguments of path (owner, group, mode, SELinux context) from a dict of them."""
    params = {key: attributes.get(key) for key in FILE_ATTRIBUTE_KEYS}
    return module.load_file_common_arguments(params, path=path)


def write(module, source: str, dest: str, validate: str | None, attributes: dict, unsafe_writes: bool) -> None:
    """Check source with the validate command, then move it over dest atomically (as ansible.builtin.copy does).
    Fails the module, leaving dest as it was, when dest's directory is missing or the command refuses the text."""
    b_dest = to_bytes(dest, errors="surrogate_or_strict")
    dest_dir = os.path.dirname(b_dest) or b"."
    if not os.path.isdir(dest_dir):
        module.fail_json(msg=f"Destination directory {to_native(dest_dir)} does not exist: create it before {dest}")
    if validate:
        if "%s" not in validate:
            module.fail_json(msg=f"validate must contain %s (the file to check): {validate}")
        # The command sees the file as it will be: its mode, owner and group set first.
        module.set_fs_attributes_if_different(file_args(module, attributes, source), False)
        rc, out, err = module.run_command(validate % source)
        if rc != 0:
            module.fail_json(msg=f"failed to validate: {dest} left as it was", exit_status=rc, stdout=out, stderr=err)
    if os.path.islink(b_dest):
        os.unlink(b_dest)
    module.atomic_move(source, dest, unsafe_writes=unsafe_writes, keep_dest_attrs=True)
