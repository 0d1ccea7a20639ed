#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: files
short_description: Create a role's directories and write its files, in one call to the host when nothing changes
version_added: 0.1.0
description:
  - Creates each of I(directories) (with its missing parents, as M(ansible.builtin.file) with C(state=directory)
    does) and writes each of I(files) from a template or a string, as M(gpufleet.cluster.file_content) writes
    one, setting owner, group and mode on all of them.
  - One call to the host compares every directory and every file (the text by its SHA-1 checksum) and sets what
    differs. Only when a text differs (and not in check mode) does a second call receive the texts that differ (as
    files in the connection's temporary directory, never as module arguments), validate each and move it into
    place. A role's directories and files that change together cost one task and one call instead of one of each
    per path.
  - The directories come first, in their order, then the files, in theirs. A failure (a directory that is a file,
    a text its validate command refuses) stops there; what came before it is done, nothing after it is touched.
  - The task changes when any directory or file changes; C(results) says which. A handler notified by the task
    runs for a change in any of them, so put files that need different handlers in different tasks.
  - For what M(gpufleet.cluster.file_content) does not do, this does not do either (C(backup), C(force=false),
    C(follow)).
options:
  directories:
    description: The directories to create, in order (each a mapping, or its path alone).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The directory.
        type: path
        required: true
      owner:
        description: Its owner (by default the task's I(owner)).
        type: str
      group:
        description: Its group (by default the task's I(group)).
        type: str
      mode:
        description: Its mode (by default the task's I(directory_mode)); missing parents get the same.
        type: raw
  files:
    description: The files to write, in order.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: The file. Its directory must exist, or be one of I(directories).
        type: path
        required: true
      src:
        description:
          - A Jinja template, looked up and rendered on the controller as M(gpufleet.cluster.file_content) renders
            it (the role's C(templates/) first, C(trim_blocks), C(\\n) line endings), with the task's variables and
            C(item) when the task loops. Exactly one of I(src) and I(content).
        type: path
      vars:
        description:
          - Variables for this file's template alone, on top of the task's (as a loop variable would be), so that one
            template written once per rail, per device or per user is one task and one call, not one per item.
          - Only with I(src).
        type: dict
      content:
        description: The text, as it is (a list or dictionary as JSON). Exactly one of I(src) and I(content).
        type: str
      owner:
        description: Its owner (by default the task's I(owner)).
        type: str
      group:
        description: Its group (by default the task's I(group)).
        type: str
      mode:
        description: Its mode (by default the task's I(mode)).
        type: raw
      validate:
        description:
          - A command that checks the new text before it replaces I(dest), with C(%s) for the file holding it; a
            non-zero exit fails the task and leaves I(dest) as it was. Runs only for a text that differs.
        type: str
      state:
        description:
          - C(absent) removes I(dest) (a file or a link; a directory there fails the task) where it exists, and
            needs neither I(src) nor I(content), so a file written under one condition and removed under the
            other is one item.
        type: str
        choices: [present, absent]
        default: present
  owner:
    description: The owner of every directory and file that does not name one.
    type: str
  group:
    description: The group of every directory and file that does not name one.
    type: str
  mode:
    description: The mode of every file that does not name one.
    type: raw
  directory_mode:
    description: The mode of every directory that does not name one.
    type: raw
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.files
  - gpufleet.cluster.attributes
attributes:
  action:
    support: full
  check_mode:
    details: Nothing is created or written; a missing directory, a text or an attribute that differs is a change.
  diff_mode:
    support: full
    details: One diff per directory created and per file changed (its text before and after, hidden with C(no_log)).
  safe_file_operations:
    support: full
  vault:
    support: none
seealso:
  - module: gpufleet.cluster.file_content
  - module: ansible.builtin.file
  - module: ansible.builtin.template
"""

EXAMPLES = r"""
- name: Write slurm.conf and topology.conf in their directory
  gpufleet.cluster.files:
    directories:
      - {path: /etc/slurm, mode: "0755"}
      - {path: /var/spool/slurmctld, owner: slurm, group: slurm, mode: "0750"}
    files:
      - {src: etc/slurm/slurm.conf.j2, dest: /etc/slurm/slurm.conf}
      - {src: etc/slurm/topology.conf.j2, dest: /etc/slurm/topology.conf}
    owner: root
    group: root
    mode: "0644"
  notify: Reconfigure slurmctld

- name: Write one systemd-networkd file per rail, each from the same template with its own rail
  gpufleet.cluster.files:
    files: >-
      {{ rails | map('community.general.dict_kv', 'rail')
         | map('community.general.dict_kv', 'vars')
         | zip(rails | map(attribute='name') | map('regex_replace', '^(.*)$', '/etc/systemd/network/60-\1.network')
               | map('community.general.dict_kv', 'dest'))
         | map('combine', {'src': 'rail.network.j2'}) | list }}
    mode: "0644"
"""

RETURN = r"""
results:
  description: What happened to each directory and file, directories first, in the order asked.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The directory or file.
      type: str
    changed:
      description: Whether it was created, written or had an attribute set.
      type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.file_text import (
    before_diff,
    current_checksum,
    file_args,
    write,
)

_ATTRIBUTES = {"owner": {"type": "str"}, "group": {"type": "str"}, "mode": {"type": "raw"}}


def ensure_directory(module: AnsibleModule, spec: dict) -> tuple[bool, dict | None]:
    """Create spec's directory and its missing parents (each with spec's attributes, as ansible.builtin.file does)
    and set its attributes. Returns whether it changed and its diff (None when it did not)."""
    path = spec["path"]
    b_path = to_bytes(path, errors="surrogate_or_strict")
    if os.path.lexists(b_path) and not os.path.isdir(b_path):
        module.fail_json(msg=f"{path} exists and is not a directory: remove it or name another directory")
    if not os.path.isdir(b_path):
        diff = {"before": {"path": path, "state": "absent"}, "after": {"path": path, "state": "directory"}}
        if module.check_mode:
            return True, diff
        current = ""
        for part in path.strip("/").split("/"):
            current = f"{current}/{part}" if os.path.isabs(path) or current else part
            b_current = to_bytes(current, errors="surrogate_or_strict")
            if not os.path.isdir(b_current):
                try:
                    os.mkdir(b_current)
                except FileExistsError:
                    # Another task (a delegated one for another host) made it in the meantime.
                    if not os.path.isdir(b_current):
                        module.fail_json(msg=f"{current} exists and is not a directory: remove it or name another")
                    continue
                module.set_fs_attributes_if_different(file_args(module, spec, current), True, expand=False)
        module.set_fs_attributes_if_different(file_args(module, spec, path), True, expand=False)
        return True, diff
    diff = {"before": {"path": path}, "after": {"path": path}}
    changed = module.set_fs_attributes_if_different(file_args(module, spec, path), False, diff=diff)
    return changed, diff if changed else None


def file_state(module: AnsibleModule, spec: dict, size_limit: int) -> dict:
    """How spec's file differs from what is wanted: "content" (bool) and, in diff mode, the text before; for a
    file that is not wanted, "remove" (bool)."""
    dest = spec["dest"]
    b_dest = to_bytes(dest, errors="surrogate_or_strict")
    if os.path.isdir(b_dest) and not os.path.islink(b_dest):
        state = "removed" if spec["state"] == "absent" else "written"
        module.fail_json(msg=f"dest {dest} is a directory: name the file to be {state}")
    if spec["state"] == "absent":
        return {"content": False, "remove": os.path.lexists(b_dest)}
    state = {"content": current_checksum(module, dest) != spec["_checksum"]}
    if state["content"] and module._diff:
        state["diff_before"] = before_diff(dest, size_limit)
    return state


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "directories": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {"path": {"type": "path", "required": True}, **_ATTRIBUTES},
            },
            "files": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "dest": {"type": "path", "required": True},
                    "validate": {"type": "str"},
                    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
                    # Set by the action plugin: the wanted text's SHA-1 (of a file that is present).
                    "_checksum": {"type": "str"},
                    **_ATTRIBUTES,
                },
            },
            # Set by the action plugin: where the texts that differ lie on the host (by their index in files, only
            # when they must be written), and the largest file the diff shows (DEFAULT_MAX_FILE_SIZE_FOR_DIFF).
            "_sources": {"type": "dict", "default": {}},
            "_diff_size_limit": {"type": "int", "default": 104448},
            "unsafe_writes": {"type": "bool", "default": False},
            **_ATTRIBUTES,
            "directory_mode": {"type": "raw"},
        },
        supports_check_mode=True,
    )
    p = module.params
    defaults = {"owner": p["owner"], "group": p["group"]}
    directories = [
        {**defaults, "mode": p["directory_mode"], **{k: v for k, v in d.items() if v is not None}}
        for d in p["directories"]
    ]
    files = [{**defaults, "mode": p["mode"], **{k: v for k, v in f.items() if v is not None}} for f in p["files"]]
    sources = {int(k): v for k, v in p["_sources"].items()}

    # The texts that differ: in a first call (no sources yet) the action plugin sends them and calls again,
    # before anything is touched; in check mode they are the changes to report.
    states = [file_state(module, f, p["_diff_size_limit"]) for f in files]
    wanted = [i for i, s in enumerate(states) if s["content"] and i not in sources]
    if wanted and not module.check_mode:
        module.exit_json(changed=False, content_wanted=wanted)

    results, diffs = [], []
    for spec in directories:
        changed, diff = ensure_directory(module, spec)
        results.append({"path": spec["path"], "changed": changed})
        if diff:
            diffs.append(diff)
    for i, (spec, state) in enumerate(zip(files, states, strict=True)):
        dest = spec["dest"]
        if spec["state"] == "absent":
            if state["remove"]:
                if not module.check_mode:
                    os.unlink(to_bytes(dest, errors="surrogate_or_strict"))
                diffs.append({"before": {"path": dest, "state": "file"}, "after": {"path": dest, "state": "absent"}})
            results.append({"path": dest, "changed": state["remove"]})
            continue
        changed = state["content"]
        if changed and not module.check_mode:
            write(module, sources[i], dest, spec.get("validate"), spec, p["unsafe_writes"])
        diff = {"before": {"path": dest}, "after": {"path": dest}}
        # As ansible.builtin.copy: a text that would change is the change a preview reports, attributes aside.
        if not (changed and module.check_mode):
            attributes_changed = module.set_fs_attributes_if_different(file_args(module, spec, dest), False, diff=diff)
            if attributes_changed and not changed:
                diffs.append({"index": i, **diff})
            changed = changed or attributes_changed
        if "diff_before" in state:
            diffs.append({"index": i, "diff_before": state["diff_before"]})
        results.append({"path": dest, "changed": changed})
    module.exit_json(changed=any(r["changed"] for r in results), results=results, diffs=diffs if module._diff else [])


if __name__ == "__main__":
    main()
