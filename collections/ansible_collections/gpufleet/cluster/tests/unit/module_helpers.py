"""Run an Ansible module's main() in-process: exit_json / fail_json become exceptions."""

from __future__ import annotations


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


def exit_json(self, **kwargs):
    raise ExitJson(kwargs)


def fail_json(self, **kwargs):
    raise FailJson(kwargs)
