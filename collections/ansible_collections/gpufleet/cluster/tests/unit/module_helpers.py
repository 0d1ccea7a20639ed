"""Run an Ansible module's main() in-process: exit_json / fail_json become exceptions."""

from __future__ import annotations

import contextlib
from unittest.mock import patch

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


def exit_json(self, **kwargs):
    raise ExitJson(kwargs)


def fail_json(self, **kwargs):
    raise FailJson(kwargs)


@contextlib.contextmanager
def module_args(args: dict):
    """Give a module's main() these arguments, with exit_json / fail_json raising ExitJson / FailJson."""
    with (
        patch_module_args(args),
        patch.object(basic.AnsibleModule, "exit_json", exit_json),
        patch.object(basic.AnsibleModule, "fail_json", fail_json),
    ):
        yield


def run_main(main, args: dict) -> dict:
    """Run a module's main() with these arguments; return what it passed to exit_json."""
    import pytest

    with module_args(args), pytest.raises(ExitJson) as exc:
        main()
    return exc.value.args[0]
