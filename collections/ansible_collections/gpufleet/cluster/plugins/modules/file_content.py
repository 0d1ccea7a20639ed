#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: file_content
short_description: Write a file from a template or a string, in one call to the host when nothing changes
version_added: 0.1.0
description:
  - Writes I(dest) with the text of a template (I(src), rendered on the controller as M(ansible.builtin.template)
    renders it) or of a string (I(content), as M(ansible.builtin.copy) writes it), and sets its owner, group and
    mode.
  - The same result as M(ansible.builtin.template) and M(ansible.builtin.copy) give, in fewer calls to the host.
    Those compare the file in one module call (C(stat)) and then set its attributes in another (C(file)), even
    when nothing changes. Here the controller sends the text's SHA-1 checksum and one call compares it with the
    file's and sets the attributes; only a file whose text differs costs a second call, which receives the text
    (as a file in the connection's temporary directory, never as a module argument) and replaces I(dest)
    atomically.
  - The text is never logged on the host (it does not travel as a module argument), and a task with C(no_log)
    hides it from the diff.
  - A symbolic link at I(dest) is replaced by a file, as M(ansible.builtin.copy) does without C(follow).
  - For what this does not do (C(backup), C(force=false), C(follow), a directory as I(dest), the template's Jinja
    options), use M(ansible.builtin.template) or M(ansible.builtin.copy).
options:
  dest:
    description: The file to write. Its directory must exist (except in check mode, which only reports the change).
    type: path
    required: true
  src:
    description:
      - A Jinja template, looked up as M(ansible.builtin.template) looks it up (the role's C(templates/) first) and
        rendered on the controller with the task's variables and the template variables (C(ansible_managed),
        C(template_path), ...), with C(trim_blocks) and C(\\n) line endings.
      - Exactly one of I(src) and I(content) is given.
    type: path
  content:
    description:
      - The text to write, as it is (a list or dictionary is written as JSON, as M(ansible.builtin.copy) does).
      - Exactly one of I(src) and I(content) is given.
    type: str
  validate:
    description:
      - A command that checks the new text before it replaces I(dest), with C(%s) for the file holding it (as in
        M(ansible.builtin.copy)); a non-zero exit fails the task and leaves I(dest) as it was.
      - Runs only when the text differs from the file's, and not in check mode.
    type: str
extends_documentation_fragment:
  - ansible.builtin.files
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.files
  - gpufleet.cluster.attributes
attributes:
  action:
    support: full
  check_mode:
    details: In check mode nothing is written; a text that differs or an attribute that differs is reported as a change.
  diff_mode:
    support: full
    details: The text before and after (hidden with C(no_log)), and the owner, group or mode that change.
  safe_file_operations:
    support: full
  vault:
    support: none
seealso:
  - module: ansible.builtin.template
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Write slurm.conf
  gpufleet.cluster.file_content:
    src: etc/slurm/slurm.conf.j2
    dest: /etc/slurm/slurm.conf
    owner: root
    group: root
    mode: "0644"
  notify: Restart slurmctld

- name: Keep the NVIDIA peer-memory module loaded at boot
  gpufleet.cluster.file_content:
    content: "nvidia-peermem\n"
    dest: /etc/modules-load.d/gpufleet-nvidia-peermem.conf
    mode: "0644"

- name: Write the sudoers drop-in (checked by visudo)
  gpufleet.cluster.file_content:
    content: "%ops ALL=(ALL) NOPASSWD: ALL\n"
    dest: /etc/sudoers.d/ops
    mode: "0440"
    validate: visudo -cf %s
"""

RETURN = r"""
dest:
  description: The file written.
  returned: always
  type: str
checksum:
  description: The SHA-1 checksum of the text the file holds now (the text asked for).
  returned: always
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.file_text import (
    before_diff,
    current_checksum,
    write,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dest": {"type": "path", "required": True},
            # Task options the action plugin consumes on the controller; never sent to the host.
            "src": {"type": "path"},
            "content": {"type": "str", "no_log": True},
            "validate": {"type": "str"},
            # Set by the action plugin: the wanted text's SHA-1, where the text lies on the host (only when it must
            # be written), and the largest file the diff shows (DEFAULT_MAX_FILE_SIZE_FOR_DIFF).
            "_checksum": {"type": "str", "required": True},
            "_source": {"type": "path"},
            "_diff_size_limit": {"type": "int", "default": 104448},
        },
        add_file_common_args=True,
        supports_check_mode=True,
    )
    p = module.params
    dest = p["dest"]
    if os.path.isdir(to_bytes(dest, errors="surrogate_or_strict")):
        module.fail_json(msg=f"dest {dest} is a directory: name the file to write")
    result = {"dest": dest, "checksum": p["_checksum"], "changed": False}
    if current_checksum(module, dest) != p["_checksum"]:
        if module._diff:
            result["diff_before"] = before_diff(dest, p["_diff_size_limit"])
        if module.check_mode:
            # As ansible.builtin.copy: a text that would change is the change to report, attributes aside.
            result["changed"] = True
            module.exit_json(**result)
        if p["_source"] is None:
            # The action plugin sends the text and calls again.
            result["content_wanted"] = True
            module.exit_json(**result)
        write(module, p["_source"], dest, p["validate"], p, p["unsafe_writes"])
        result["changed"] = True
    diff = {"before": {"path": dest}, "after": {"path": dest}}
    file_args = module.load_file_common_arguments(p, path=dest)
    attributes_changed = module.set_fs_attributes_if_different(file_args, False, diff=diff)
    # As ansible.builtin.copy: a file whose text was written shows the text's diff only.
    if attributes_changed and module._diff and not result["changed"]:
        result["diff_attributes"] = diff
    result["changed"] = result["changed"] or attributes_changed
    module.exit_json(**result)


if __name__ == "__main__":
    main()
