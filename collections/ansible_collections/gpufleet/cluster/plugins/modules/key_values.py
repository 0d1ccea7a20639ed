#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: key_values
short_description: Set several C(key = value) settings of a configuration file in one call
version_added: 0.1.0
description:
  - Sets each key of I(values) in I(path), a file of C(key = value) lines such as C(auditd.conf). Every active
    line of the key (not a comment) becomes C(key<separator>value), and a key with no such line is added at the
    end, in the order given. Every other line, comments included, stays as it is.
  - What one M(ansible.builtin.lineinfile) task per key does (with C(regexp='^\s*key\s*=')), in one call to the
    host. The file is read once and, only when a setting differs, written once (atomically, keeping its owner,
    group and mode).
  - The file must exist (the package that owns it installed it); a missing file fails the task, except in check
    mode, where the package may only be previewed.
options:
  path:
    description: The configuration file.
    type: path
    required: true
  values:
    description: The settings, key to value (a value is written as text; true and false as C(yes) and C(no)).
    type: dict
    required: true
  separator:
    description: What is written between a key and its value. Lines are recognised by C(=) whatever surrounds it.
    type: str
    default: " = "
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.attributes
attributes:
  check_mode:
    details: Nothing is written; the result says what would change.
  diff_mode:
    support: full
    details: The file's text before and after.
seealso:
  - module: ansible.builtin.lineinfile
"""

EXAMPLES = r"""
- name: Set auditd's retention and disk-full behaviour
  gpufleet.cluster.key_values:
    path: /etc/audit/auditd.conf
    values:
      max_log_file: 32
      num_logs: 10
      max_log_file_action: ROTATE
  notify: Restart auditd
"""

RETURN = r"""
changed_keys:
  description: The keys whose lines were changed or added, in the order of I(values).
  type: list
  elements: str
  returned: always
"""

import os
import re
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_text


def _text(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def apply(text: str, values: dict, separator: str) -> tuple[str, list[str]]:
    """text with every key of values set (its active lines replaced, a missing key appended) and the keys that
    changed."""
    lines = text.splitlines(keepends=True)
    changed, seen = [], set()
    for key, value in values.items():
        wanted = f"{key}{separator}{_text(value)}"
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        for i, line in enumerate(lines):
            if pattern.match(line):
                seen.add(key)
                ending = line[len(line.rstrip("\r\n")) :] or "\n"
                if line.rstrip("\r\n") != wanted:
                    lines[i] = wanted + ending
                    if key not in changed:
                        changed.append(key)
        if key not in seen:
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += "\n"
            lines.append(wanted + "\n")
            changed.append(key)
    return "".join(lines), changed


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "values": {"type": "dict", "required": True},
            "separator": {"type": "str", "default": " = "},
        },
        supports_check_mode=True,
    )
    path, values = module.params["path"], module.params["values"]
    for key in values:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", key):
            module.fail_json(msg=f"{path}: key {key!r} is not a setting's name (letters, digits, _ . -)")
    b_path = to_bytes(path, errors="surrogate_or_strict")
    if not os.path.isfile(b_path):
        if module.check_mode:
            module.exit_json(changed=True, changed_keys=list(values), msg=f"{path} does not exist yet")
        module.fail_json(msg=f"{path} does not exist: install the package that owns it first")
    with open(b_path, "rb") as fh:
        before = to_text(fh.read(), errors="surrogate_or_strict")
    after, changed = apply(before, values, module.params["separator"])
    result = {"changed": bool(changed), "changed_keys": changed}
    if changed and module._diff:
        result["diff"] = {"before_header": path, "after_header": path, "before": before, "after": after}
    if changed and not module.check_mode:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(b_path), prefix=b".gpufleet-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(to_bytes(after, errors="surrogate_or_strict"))
        # The new file takes the old one's owner, group, mode and SELinux context.
        module.atomic_move(tmp, b_path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
