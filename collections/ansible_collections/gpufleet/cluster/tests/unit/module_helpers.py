"""Run an Ansible module's main() in-process: exit_json / fail_json become exceptions."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
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


def run_module(main, args: dict, check: bool = False, diff: bool = False) -> dict:
    """run_main with Ansible's check mode and diff mode flags set as asked."""
    return run_main(main, {**args, "_ansible_check_mode": check, "_ansible_diff": diff})


def failure_of(main, args: dict) -> str:
    """The message a module's main() fails with on these arguments."""
    import pytest

    with module_args(args), pytest.raises(FailJson) as exc:
        main()
    return exc.value.args[0]["msg"]


def sha1_text(text: str) -> str:
    """The SHA-1 of a text's UTF-8 bytes (what the file-writing modules compare)."""
    return hashlib.sha1(text.encode()).hexdigest()


def mode_of(path) -> str:
    """A path's permission bits as four octal digits ("0644")."""
    return f"0{stat.S_IMODE(os.stat(path).st_mode):03o}"
