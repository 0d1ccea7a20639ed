#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: paths_info
short_description: Look at several paths in one call - type, mode, owner, checksum and, for a small file, its text
version_added: 0.1.0
description:
  - For each of I(paths), whether it exists and, where it does, its type, mode, owner and group, and when asked
    its checksum and its text. What M(ansible.builtin.stat) and M(ansible.builtin.slurp) answer one path per
    task, this answers for all of them in one call to the host.
  - Roles that download, unpack, build and install something ask once, before those steps, whether the
    result is already in place (the source's checksum, the record of what was built, the installed file's
    checksum and mode) and skip every step when it is.
  - Links are followed (as M(ansible.builtin.stat) with C(follow=true)); a dangling link does not exist.
  - Never changes anything; safe in check mode.
options:
  paths:
    description: The paths to look at (each a mapping, or its path alone).
    type: list
    elements: raw
    required: true
    suboptions:
      path:
        description: The path.
        type: path
        required: true
      checksum:
        description: The algorithm of the checksum to return for a regular file (C(sha1), C(sha256), C(sha512)).
        type: str
        choices: [sha1, sha256, sha512]
      read:
        description:
          - Return the text of a regular file (UTF-8, undecodable bytes replaced). A file larger than
            I(read_limit) is not read (C(text) is absent and C(too_large) true).
        type: bool
        default: false
  read_limit:
    description: The largest file (in bytes) whose text is returned.
    type: int
    default: 65536
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.attributes
attributes:
  check_mode:
    details: It changes nothing, in check mode or not.
seealso:
  - module: ansible.builtin.stat
  - module: ansible.builtin.slurp
"""

EXAMPLES = r"""
- name: Look at the source, the record of the last build and the installed plugin
  gpufleet.cluster.paths_info:
    paths:
      - {path: /usr/local/src/pyxis/pyxis-0.20.0.tar.gz, checksum: sha256}
      - {path: /usr/local/src/pyxis/pyxis-0.20.0/BUILD-INFO.gpufleet, read: true}
      - {path: /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_pyxis.so, checksum: sha1}
  register: __pyxis_paths

- name: Build only when the record is not what this run would build
  ansible.builtin.command: make
  when: >-
    __pyxis_paths.paths['/usr/local/src/pyxis/pyxis-0.20.0/BUILD-INFO.gpufleet'].text | default('')
    != 'pyxis 0.20.0'
"""

RETURN = r"""
paths:
  description: What was found at each path, by the path as given.
  returned: always
  type: dict
  contains:
    exists:
      description: Whether the path exists (a link, whether what it points to does).
      type: bool
    type:
      description: C(file), C(directory) or C(other); absent when the path does not exist.
      type: str
    mode:
      description: The permission bits in octal, as C(0755).
      type: str
    owner:
      description: The owner's name (its uid as a string where it has no name).
      type: str
    group:
      description: The group's name (its gid as a string where it has no name).
      type: str
    size:
      description: The size in bytes.
      type: int
    checksum:
      description: The file's checksum in hex, with the algorithm asked; only for a regular file.
      type: str
    text:
      description: The file's text, where I(read) was asked and the file is no larger than I(read_limit).
      type: str
    too_large:
      description: True where I(read) was asked and the file is larger than I(read_limit).
      type: bool
"""

import grp
import hashlib
import os
import pwd
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_text


def _name(lookup, ident: int) -> str:
    try:
        return lookup(ident)[0]
    except KeyError:
        return str(ident)


def look(path: str, checksum: str | None, read: bool, read_limit: int) -> dict:
    """What is at path (followed through links), as RETURN describes one entry."""
    b_path = to_bytes(path, errors="surrogate_or_strict")
    try:
        st = os.stat(b_path)
    except (FileNotFoundError, NotADirectoryError):
        return {"exists": False}
    kind = "file" if stat.S_ISREG(st.st_mode) else "directory" if stat.S_ISDIR(st.st_mode) else "other"
    out = {
        "exists": True,
        "type": kind,
        "mode": f"{stat.S_IMODE(st.st_mode):04o}",
        "owner": _name(pwd.getpwuid, st.st_uid),
        "group": _name(grp.getgrgid, st.st_gid),
        "size": st.st_size,
    }
    if kind != "file":
        return out
    if checksum:
        digest = hashlib.new(checksum)
        with open(b_path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        out["checksum"] = digest.hexdigest()
    if read:
        if st.st_size > read_limit:
            out["too_large"] = True
        else:
            with open(b_path, "rb") as fh:
                out["text"] = to_text(fh.read(read_limit + 1), errors="surrogate_then_replace")
    return out


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "paths": {"type": "list", "elements": "raw", "required": True},
            "read_limit": {"type": "int", "default": 65536},
        },
        supports_check_mode=True,
    )
    found = {}
    for n, entry in enumerate(module.params["paths"]):
        spec = {"path": entry} if isinstance(entry, str) else entry
        if not isinstance(spec, dict) or not isinstance(spec.get("path"), str) or not spec["path"]:
            module.fail_json(msg=f"paths[{n}] must be a path or a mapping with path: {entry!r}")
        unknown = sorted(set(spec) - {"path", "checksum", "read"})
        if unknown:
            module.fail_json(msg=f"paths[{n}] ({spec['path']}): unsupported keys {unknown} (path, checksum, read)")
        algorithm = spec.get("checksum") or None
        if algorithm not in (None, "sha1", "sha256", "sha512"):
            module.fail_json(msg=f"paths[{n}] ({spec['path']}): checksum is sha1, sha256 or sha512, not {algorithm!r}")
        path = os.path.expanduser(spec["path"])
        try:
            read = module.boolean(spec.get("read", False))
            found[spec["path"]] = look(path, algorithm, read, module.params["read_limit"])
        except OSError as e:
            module.fail_json(msg=f"cannot read {path}: {e}")
    module.exit_json(changed=False, paths=found)


if __name__ == "__main__":
    main()
