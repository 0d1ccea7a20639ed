# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Controller side of gpufleet.cluster.file_content: render the text, then one module call when nothing changes.

ansible.builtin.template and ansible.builtin.copy make two module calls per file and host even when the
file is already right (a ``stat`` to compare checksums, then ``file`` for owner, group and mode), and on
the lab a module call costs about as much wall time as a task. This action renders the template (or takes
``content``) on the controller, as the template action does, and sends only the text's checksum with the
attributes: one call compares and sets them. Only when the text differs (and not in check mode) does it
put the text in the connection's temporary directory and call the module a second time to validate and
move it into place. The diff is assembled here from the module's "before" and the rendered text, in the
shape ansible.builtin.copy gives it.
"""

from __future__ import annotations

import json
import os
from hashlib import sha1

from ansible import constants as C
from ansible._internal._templating import _template_vars
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.action import ActionBase
from ansible.template import trust_as_template
from jinja2.defaults import (
    BLOCK_END_STRING,
    BLOCK_START_STRING,
    COMMENT_END_STRING,
    COMMENT_START_STRING,
    VARIABLE_END_STRING,
    VARIABLE_START_STRING,
)

MODULE = "gpufleet.cluster.file_content"
# The template action's defaults (jinja2's delimiters, trim_blocks, Unix line endings).
_TEMPLATE_OPTIONS = {
    "block_start_string": BLOCK_START_STRING,
    "block_end_string": BLOCK_END_STRING,
    "variable_start_string": VARIABLE_START_STRING,
    "variable_end_string": VARIABLE_END_STRING,
    "comment_start_string": COMMENT_START_STRING,
    "comment_end_string": COMMENT_END_STRING,
    "trim_blocks": True,
    "lstrip_blocks": False,
    "newline_sequence": "\n",
}
# What a task with no_log shows of the text in the diff (the words ansible.builtin.copy uses).
_HIDDEN = " [[ Diff output has been hidden because 'no_log: true' was specified for this result ]]\n"


class ActionModule(ActionBase):
    # No remote temporary directory up front: the call that changes nothing needs none.
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        src, content, dest = args.pop("src", None), args.pop("content", None), args.get("dest")
        if dest is None:
            raise AnsibleActionFail("dest is required")
        if (src is None) == (content is None):
            raise AnsibleActionFail("exactly one of src (a template) and content is required")
        if args.get("mode") == "preserve":
            raise AnsibleActionFail("mode=preserve is not supported: give the mode")
        text = self._render(src, dest, task_vars) if src is not None else self._content_text(content)
        data = to_bytes(text, errors="surrogate_or_strict")

        module_args = dict(args, _checksum=sha1(data).hexdigest(), _diff_size_limit=C.MAX_FILE_SIZE_FOR_DIFF)
        try:
            module_result = self._execute_module(MODULE, module_args=module_args, task_vars=task_vars)
            if module_result.pop("content_wanted", False) and not module_result.get("failed"):
                module_result = self._write(dest, data, module_args, task_vars)
        finally:
            # A connection without pipelining made a temporary directory for the module itself.
            if self._connection._shell.tmpdir is not None:
                self._remove_tmp_path(self._connection._shell.tmpdir)
        diff_before = module_result.pop("diff_before", None)
        diff_attributes = module_result.pop("diff_attributes", None)
        result.update(module_result)
        if self._task.diff and not result.get("failed"):
            diffs = []
            if diff_before is not None:
                diffs.append(self._content_diff(dest, diff_before, data, text))
            if diff_attributes is not None:
                diffs.append(diff_attributes)
            if diffs:
                result["diff"] = diffs
        return result

    def _content_text(self, content) -> str:
        """The text of content: a list or dictionary as JSON (as ansible.builtin.copy writes it), else its text."""
        if isinstance(content, (dict, list)):
            return json.dumps(content)
        return to_text(content, errors="surrogate_or_strict")

    def _render(self, src: str, dest: str, task_vars: dict) -> str:
        """Render the template src as ansible.builtin.template does with its default options."""
        try:
            source = self._find_needle("templates", src)
        except AnsibleError as e:
            raise AnsibleActionFail(to_text(e)) from e
        template_data = trust_as_template(self._loader.get_text_file_contents(source))
        # Includes and imports are searched for where the template action searches: each search path and
        # its templates/ subdirectory.
        searchpath = [*task_vars.get("ansible_search_path", []), self._loader._basedir, os.path.dirname(source)]
        searchpath = [q for p in searchpath for q in (os.path.join(p, "templates"), p)]
        temp_vars = dict(task_vars)
        temp_vars.update(
            _template_vars.generate_ansible_template_vars(
                path=src,
                fullpath=source,
                dest_path=dest,
                include_ansible_managed="ansible_managed" not in temp_vars,
            )
        )
        templar = self._templar.copy_with_new_env(searchpath=searchpath, available_variables=temp_vars)
        rendered = templar.template(template_data, escape_backslashes=False, overrides=_TEMPLATE_OPTIONS)
        return "" if rendered is None else to_text(rendered)

    def _write(self, dest: str, data: bytes, module_args: dict, task_vars: dict) -> dict:
        """Put the text in a temporary file on the host and have the module validate it and move it to dest."""
        tmpdir = self._connection._shell.tmpdir or self._make_tmp_path()
        # The suffix stays for a validate command that goes by it (as ansible.builtin.copy keeps it).
        source = self._connection._shell.join_path(tmpdir, ".source" + os.path.splitext(dest)[1])
        self._transfer_data(source, data)
        self._fixup_perms2((tmpdir, source))
        return self._execute_module(MODULE, module_args=dict(module_args, _source=source), task_vars=task_vars)

    def _content_diff(self, dest: str, before: dict, data: bytes, text: str) -> dict:
        """The text's diff in ansible.builtin.copy's shape: before from the host, after the rendered text."""
        diff = dict(before)
        limit = C.MAX_FILE_SIZE_FOR_DIFF
        if limit > 0 and len(data) > limit:
            diff["src_larger"] = limit
        elif b"\x00" in data:
            diff["src_binary"] = 1
        else:
            diff["after_header"] = dest
            diff["after"] = text
        if self._task.no_log:
            if "before" in diff:
                diff["before"] = ""
            if "after" in diff:
                diff["after"] = _HIDDEN
        return diff
