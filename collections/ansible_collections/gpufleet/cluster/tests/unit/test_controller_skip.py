"""module_utils/common/controller_skip: what never reaches the controller's evaluation, an
ansible-core without the private modules it uses (every task then goes to a worker), which actions
the controller runs itself and which go to a worker, the switches and the heavy-task limit, and an
error around the executor. The results it sends are compared with Ansible's own in
tests/unit/test_controller_skip_play.py."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import controller_skip


def task(**fields):
    base = {"when": ["flag"], "loop": None, "loop_with": None, "delegate_to": None}
    return SimpleNamespace(**(base | fields))


def test_tasks_a_worker_must_decide_are_left_to_it():
    for fields in ({"when": []}, {"loop": [1, 2]}, {"loop_with": "items"}, {"delegate_to": "h1"}):
        assert controller_skip.skipped_result(None, task(**fields), {}, None, None) is None, fields


class PlayContext:
    """Records whether the evaluation got as far as the play context."""

    def __init__(self):
        self.used = False

    def set_task_and_variable_override(self, **_):
        self.used = True
        raise RuntimeError("stop here")


def test_without_ansible_cores_private_modules_every_task_goes_to_a_worker(monkeypatch):
    import ansible._internal

    context = PlayContext()
    assert controller_skip.skipped_result(None, task(), {"flag": False}, context, None) is None
    assert context.used  # with the modules, the evaluation starts

    monkeypatch.delattr(ansible._internal, "_display_utils")
    monkeypatch.setitem(sys.modules, "ansible._internal._display_utils", None)
    context = PlayContext()
    assert controller_skip.skipped_result(None, task(), {"flag": False}, context, None) is None
    assert not context.used


def test_the_switch(monkeypatch):
    monkeypatch.setenv(controller_skip.ENV_SWITCH, "0")
    assert not controller_skip.enabled()
    monkeypatch.delenv(controller_skip.ENV_SWITCH)
    assert controller_skip.enabled()


def action(**fields):
    base = {
        "action": "ansible.builtin.set_fact",
        "_resolved_action": "ansible.builtin.set_fact",
        "until": [],
        "retries": None,
        "timeout": 0,
        "async_val": 0,
        "loop_control": None,
    }
    return SimpleNamespace(**(base | fields))


def test_the_controllers_own_actions_run_in_it():
    assert controller_skip.runs_in_controller(action())
    assert controller_skip.runs_in_controller(action(action="assert", _resolved_action="ansible.builtin.assert"))
    assert controller_skip.runs_in_controller(action(action="include_tasks", _resolved_action=None))
    assert controller_skip.runs_in_controller(action(loop_control=SimpleNamespace(pause=0)))


def test_a_roles_argument_validation_runs_in_it_though_ansible_leaves_it_unresolved():
    validation = action(action="ansible.builtin.validate_argument_spec", _resolved_action=None)
    assert controller_skip.runs_in_controller(validation)
    # a short name nothing resolved may be a playbook's own plugin
    assert not controller_skip.runs_in_controller(action(action="validate_argument_spec", _resolved_action=None))


def test_package_questions_are_answered_there_unless_delegated_or_blocking():
    question = {"action": "gpufleet.cluster.missing_packages", "_resolved_action": "gpufleet.cluster.missing_packages"}
    assert controller_skip.answers_from_packages(action(**question, delegate_to=None))
    assert not controller_skip.runs_in_controller(action(**question))  # not without the host's list
    for fields in ({"delegate_to": "h2"}, {"retries": 3}, {"until": ["x"]}, {"async_val": 10}):
        assert not controller_skip.answers_from_packages(action(**question, **({"delegate_to": None} | fields)))
    assert not controller_skip.answers_from_packages(action(delegate_to=None))


def test_what_could_block_the_controller_or_touch_a_host_goes_to_a_worker():
    for fields in (
        {"action": "ansible.builtin.command", "_resolved_action": "ansible.builtin.command"},
        {"action": "debug", "_resolved_action": "ansible.legacy.debug"},  # a playbook's action_plugins/debug.py
        {"action": "debug", "_resolved_action": None},  # not resolved: nothing is known of it
        {"until": ["x"]},
        {"retries": 3},
        {"timeout": 30},
        {"async_val": 60},
        {"loop_control": SimpleNamespace(pause=2)},
    ):
        assert not controller_skip.runs_in_controller(action(**fields)), fields


def test_the_actions_switch(monkeypatch):
    monkeypatch.setenv(controller_skip.ACTIONS_SWITCH, "0")
    assert controller_skip.enabled() and not controller_skip.actions_enabled()
    monkeypatch.delenv(controller_skip.ACTIONS_SWITCH)
    monkeypatch.setenv(controller_skip.ENV_SWITCH, "0")
    assert not controller_skip.actions_enabled()


def test_the_heavy_limit(monkeypatch):
    monkeypatch.delenv(controller_skip.HEAVY_SWITCH, raising=False)
    assert controller_skip.heavy_seconds() == controller_skip.HEAVY_MS / 1000
    monkeypatch.setenv(controller_skip.HEAVY_SWITCH, "250")
    assert controller_skip.heavy_seconds() == 0.25
    monkeypatch.setenv(controller_skip.HEAVY_SWITCH, "soon")  # not a number: the default
    assert controller_skip.heavy_seconds() == controller_skip.HEAVY_MS / 1000


def test_a_heavy_task_goes_to_workers_unless_the_play_is_small(monkeypatch):
    monkeypatch.delenv(controller_skip.HEAVY_SWITCH, raising=False)
    assert not controller_skip.too_heavy(0.005, 1000)  # light: the controller is cheaper than a fork
    assert controller_skip.too_heavy(0.020, 1000)
    assert not controller_skip.too_heavy(0.020, 3)  # 60 ms for the play: less than one worker's wall time
    assert controller_skip.too_heavy(0.040, 3)
    assert controller_skip.too_heavy(0.300, 0)  # no play hosts known: one


class Strategy(controller_skip.ControllerSkipMixin):
    """What the mixin uses of a strategy: the queued-task cache, the callbacks, the results queue."""

    def __init__(self):
        self._queued_task_cache = {}
        self._pending_results = 0
        self._loader = self._variable_manager = None
        self._gpufleet_heavy_tasks = set()
        self.callbacks, self.results = [], []
        self._tqm = SimpleNamespace(send_callback=lambda name, *args: self.callbacks.append(name))
        self._final_q = SimpleNamespace(send_task_result=self.results.append)


def test_an_error_around_the_executor_is_the_tasks_failure_not_the_strategys(monkeypatch):
    def broken(*_args):
        raise RuntimeError("the executor's surroundings broke")

    monkeypatch.setattr(controller_skip, "executed_result", broken)
    strategy = Strategy()
    task = SimpleNamespace(_uuid="t1", copy=lambda **_: SimpleNamespace())
    assert strategy._run_here(SimpleNamespace(name="h1"), task, {}, None)
    assert strategy.callbacks == ["v2_runner_on_start"] and strategy._pending_results == 1
    (sent,) = strategy.results
    assert sent._return_data["failed"] is True
    assert "the executor's surroundings broke" in sent._return_data["msg"]
    assert ("h1", "t1") in strategy._queued_task_cache
