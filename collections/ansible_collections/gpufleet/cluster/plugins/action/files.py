# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Controller side of gpufleet.cluster.files: render every text, then one module call when nothing changes.

Each file's text is rendered here (a template, as gpufleet.cluster.file_content renders it, or a string) and
only its SHA-1 goes to the host with the directories and the attributes. When texts differ (and not in check
mode) they go to the connection's temporary directory as files and the module is called a second time to
validate and move them into place. The diffs are assembled here from the module's "before" and the rendered
texts, in the shape ansible.builtin.copy and ansible.builtin.file give them.
"""

from __future__ import annotations

import os
from hashlib import sha1

from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes
from ansible_collections.gpufleet.cluster.plugins.action.file_content import ActionModule as FileContentAction

MODULE = "gpufleet.cluster.files"
_FILE_KEYS = {"dest", "src", "vars", "content", "owner", "group", "mode", "validate", "state"}
_DIRECTORY_KEYS = {"path", "owner", "group", "mode"}
_TASK_KEYS = {"directories", "files", "owner", "group", "mode", "directory_mode", "unsafe_writes"}


class ActionModule(FileContentAction):
    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(FileContentAction, self).run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        unknown = sorted(set(args) - _TASK_KEYS)
        if unknown:
            supported = ", ".join(sorted(_TASK_KEYS))
            raise AnsibleActionFail(f"unsupported options: {', '.join(unknown)} (supported: {supported})")
        # A directory may be named by its path alone.
        directories = [{"path": d} if isinstance(d, str) else d for d in args.get("directories") or []]
        files = list(args.get("files") or [])
        for n, d in enumerate(directories):
            if not isinstance(d, dict) or "path" not in d or set(d) - _DIRECTORY_KEYS:
                raise AnsibleActionFail(
                    f"directories[{n}] must be a path or a mapping with path and only {sorted(_DIRECTORY_KEYS)}: {d!r}"
                )
        dests = [f.get("dest") for f in files if isinstance(f, dict)]
        twice = sorted({d for d in dests if dests.count(d) > 1})
        if twice:
            raise AnsibleActionFail(f"files names a dest more than once: {', '.join(map(str, twice))}")
        texts, module_files = [], []
        for n, f in enumerate(files):
            if not isinstance(f, dict) or "dest" not in f or set(f) - _FILE_KEYS:
                raise AnsibleActionFail(f"files[{n}] must be a mapping with dest and only {sorted(_FILE_KEYS)}")
            if f.get("state", "present") not in ("present", "absent"):
                raise AnsibleActionFail(f"files[{n}] ({f['dest']}): state is present or absent, not {f['state']!r}")
            if f.get("state") == "absent":
                # Nothing to render: a file that is not wanted may have no text to give.
                texts.append(("", b""))
                module_files.append({"dest": f["dest"], "state": "absent"})
                continue
            if ("src" in f) == ("content" in f):
                raise AnsibleActionFail(f"files[{n}] ({f['dest']}): exactly one of src (a template) and content")
            if "vars" in f and ("src" not in f or not isinstance(f["vars"], dict)):
                raise AnsibleActionFail(f"files[{n}] ({f['dest']}): vars (a mapping) is for a template (src)")
            if f.get("mode") == "preserve":
                raise AnsibleActionFail(f"files[{n}] ({f['dest']}): mode=preserve is not supported: give the mode")
            if "src" in f:
                text = self._render(f["src"], f["dest"], {**task_vars, **f.get("vars", {})})
            else:
                text = self._content_text(f["content"])
            data = to_bytes(text, errors="surrogate_or_strict")
            texts.append((text, data))
            item = {k: v for k, v in f.items() if k not in ("src", "vars", "content")}
            module_files.append(dict(item, _checksum=sha1(data).hexdigest()))

        module_args = {k: v for k, v in args.items() if k not in ("directories", "files")}
        module_args.update(directories=directories, files=module_files, _diff_size_limit=C.MAX_FILE_SIZE_FOR_DIFF)
        try:
            module_result = self._execute_module(MODULE, module_args=module_args, task_vars=task_vars)
            wanted = module_result.pop("content_wanted", None)
            if wanted and not module_result.get("failed"):
                sources = self._put_texts(wanted, module_files, texts)
                module_args["_sources"] = sources
                module_result = self._execute_module(MODULE, module_args=module_args, task_vars=task_vars)
                if module_result.pop("content_wanted", None) and not module_result.get("failed"):
                    module_result.update(failed=True, msg="the files changed on the host while they were written")
        finally:
            # A connection without pipelining made a temporary directory for the module itself.
            if self._connection._shell.tmpdir is not None:
                self._remove_tmp_path(self._connection._shell.tmpdir)
        module_diffs = module_result.pop("diffs", None) or []
        result.update(module_result)
        if self._task.diff and not result.get("failed") and module_diffs:
            result["diff"] = [self._diff(d, module_files, texts) for d in module_diffs]
        return result

    def _put_texts(self, wanted: list[int], files: list[dict], texts: list[tuple[str, bytes]]) -> dict[str, str]:
        """Put the texts of files[wanted] in temporary files on the host; their paths by index."""
        tmpdir = self._connection._shell.tmpdir or self._make_tmp_path()
        sources = {}
        for i in wanted:
            # The suffix stays for a validate command that goes by it (as ansible.builtin.copy keeps it).
            name = f".source{i}{os.path.splitext(files[i]['dest'])[1]}"
            sources[str(i)] = self._connection._shell.join_path(tmpdir, name)
            self._transfer_data(sources[str(i)], texts[i][1])
        self._fixup_perms2((tmpdir, *sources.values()))
        return sources

    def _diff(self, module_diff: dict, files: list[dict], texts: list[tuple[str, bytes]]) -> dict:
        """One diff: a directory's or a file's attributes as the module gave it, or a file's text before and after."""
        if "diff_before" not in module_diff:
            return {k: v for k, v in module_diff.items() if k != "index"}
        i = module_diff["index"]
        text, data = texts[i]
        return self._content_diff(files[i]["dest"], module_diff["diff_before"], data, text)
