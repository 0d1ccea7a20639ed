# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Controller side of gpufleet.cluster.missing_packages: answer from the host's package list when the
collection's strategy hands one over, else call the module (asking it for the list when the strategy
wants one). What the lists are and when they are dropped: module_utils/common/host_packages.py."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import host_packages, packages


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        # The module's own argument checks and conversions (a comma-separated string is a list).
        _validation, args = self.validate_argument_spec(packages.ARGUMENT_SPEC)
        snapshot = task_vars.get(host_packages.SNAPSHOT_VAR)
        if host_packages.valid(snapshot) and not args["snapshot"]:
            specs = packages.wanted(args["names"])
            if specs:
                result.update(packages.answer(specs, snapshot["installed"], snapshot["manager"]))
            else:
                result.update(changed=False, missing=[], installed={}, manager="none")
            return result
        module_args = dict(self._task.args)
        wanted = bool(task_vars.get(host_packages.WANT_VAR))
        if wanted:
            module_args["snapshot"] = True
        result.update(self._execute_module(host_packages.ACTION, module_args=module_args, task_vars=task_vars))
        if wanted and "snapshot" in result:
            listing = result["snapshot"] if args["snapshot"] else result.pop("snapshot")
            result[host_packages.RESULT_KEY] = listing
        return result
