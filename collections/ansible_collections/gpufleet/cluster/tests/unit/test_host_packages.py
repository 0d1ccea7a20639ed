"""module_utils/common/host_packages: which results keep a host's package list, which drop it, and what a
result that brings one looks like after the strategy has seen it. The strategy's use of the lists in a
real run: tests/unit/test_package_snapshot_play.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import host_packages as hp

LISTING = {"manager": "dpkg", "installed": {"munge": "0.5.15-2"}}


class Result:
    """What observe() uses of the strategy's _RawTaskResult."""

    def __init__(self, host, data, *, changed=False, failed=False, unreachable=False, delegate_to=None):
        self.host = SimpleNamespace(name=host)
        self.task = SimpleNamespace(delegate_to=delegate_to)
        self._return_data = data
        self._flags = (changed, failed, unreachable)

    def is_changed(self):
        return self._flags[0]

    def is_failed(self):
        return self._flags[1]

    def is_unreachable(self):
        return self._flags[2]


@pytest.fixture(autouse=True)
def no_lists():
    hp.forget()
    yield
    hp.forget()


def keep(host):
    hp.observe(Result(host, {"changed": False, hp.RESULT_KEY: dict(LISTING)}))
    assert hp.snapshot_of(host) == LISTING


def test_a_result_that_brings_a_list_is_kept_and_the_list_leaves_the_result():
    data = {"changed": False, "missing": [], hp.RESULT_KEY: dict(LISTING)}
    hp.observe(Result("n1", data))
    assert hp.snapshot_of("n1") == LISTING
    assert data == {"changed": False, "missing": []}  # no callback or register sees the list


def test_a_change_a_failure_or_a_lost_host_drops_that_hosts_list_only():
    for flags in ({"changed": True}, {"failed": True}, {"unreachable": True}):
        keep("n1")
        keep("n2")
        hp.observe(Result("n1", {}, **flags))
        assert hp.snapshot_of("n1") is None, flags
        assert hp.snapshot_of("n2") == LISTING, flags


def test_a_delegated_change_drops_every_list():
    keep("n1")
    keep("n2")
    hp.observe(Result("n1", {"changed": True}, changed=True, delegate_to="n2"))
    assert hp.snapshot_of("n1") is None and hp.snapshot_of("n2") is None


def test_an_unchanged_result_keeps_the_lists():
    keep("n1")
    hp.observe(Result("n1", {"changed": False}))
    hp.observe(Result("n1", {"skipped": True}))
    assert hp.snapshot_of("n1") == LISTING


def test_a_list_read_through_a_delegated_task_or_malformed_is_not_kept():
    hp.observe(Result("n1", {hp.RESULT_KEY: dict(LISTING)}, delegate_to="n2"))
    hp.observe(Result("n2", {hp.RESULT_KEY: {"manager": "none", "installed": {}}}))
    hp.observe(Result("n3", {hp.RESULT_KEY: {"manager": "dpkg", "installed": ["munge"]}}))
    assert [hp.snapshot_of(h) for h in ("n1", "n2", "n3")] == [None, None, None]


def test_a_result_observe_cannot_read_drops_every_list():
    keep("n1")
    hp.observe(SimpleNamespace(host=None))
    assert hp.snapshot_of("n1") is None


def test_which_tasks_are_package_questions():
    assert hp.is_question(SimpleNamespace(action="missing_packages", _resolved_action=hp.ACTION))
    assert hp.is_question(SimpleNamespace(action=hp.ACTION, _resolved_action=None))
    assert not hp.is_question(SimpleNamespace(action="missing_packages", _resolved_action="ansible.legacy.x"))
