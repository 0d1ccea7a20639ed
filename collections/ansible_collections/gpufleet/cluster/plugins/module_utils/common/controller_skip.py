# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Controller side only: skip a task whose ``when`` is false, and run a task that never touches its
host, without forking a worker for it.

Used by the collection's strategies (gpufleet.cluster.linear, gpufleet.cluster.mitogen_linear).

Ansible forks one worker process per task and host, and the worker evaluates the task's ``when``
first: a task that is skipped still costs a fork, the worker's set-up and its teardown, about as
much controller time as a task that runs. A no-op re-run of site.yml skips about a quarter of its
task results. The mixin evaluates the condition in the controller, exactly as the worker would
(the same play context override, the same variables, the same conditional evaluation), and when
it is cleanly false sends the worker's skipped result itself. Anything else goes to a worker as
before: a true condition, a loop (its ``when`` is per item), a delegated task, an evaluation that
raises or warns, a play context that cannot be set up. So a task is never skipped here that the
worker would have run, and every error is still the worker's to report.

A task that is not skipped but whose action runs wholly in the controller (``set_fact``, ``assert``,
``fail``, ``debug``, ``validate_argument_spec``, ``group_by``, ``include_vars``, which reads the
controller's files, and the includes, which the worker only templates) is run here by Ansible's own
TaskExecutor, the code the worker would run, on a copy of the task (the executor templates the task and
its parent blocks in place, and the task is shared by every host). Such a task never opens a connection,
so the worker would spend its whole life on its own fork and teardown. What could block the controller
or behave differently in it goes to a worker: retries or ``until`` (they sleep), a ``timeout`` (an alarm
signal), ``async``, a loop that pauses, and an action resolved to anything but ansible-core's own plugin
(a playbook's ``action_plugins/`` may shadow a short name). The controller is one process and the
workers run on every core, so a task whose run here takes longer than a worker costs the controller
(HEAVY_MS: its template does real work) sends its remaining hosts to workers, unless the play is so
small that running it here for all of its hosts takes less than one worker's wall time (WORKER_WALL_MS).

A loop whose items are all skipped (or that has none) is run here the same way, with the executor's
connection refused: when an item would run on its host, that run is thrown away (its item results had
not been sent) and the task goes to a worker on this host and the next ones. The worker then evaluates
the loop's expression (and any lookup in it) a second time, as it does a condition found true here.

A role's package question (gpufleet.cluster.missing_packages) is answered here too once the host's
package list has been read in this run and nothing on the host changed since (host_packages.py): the
first question of a run on a host goes to a worker, which reads the whole list with it.
"""

from __future__ import annotations

import os
import time

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import host_packages

# GPUFLEET_CONTROLLER_SKIP=0 turns both off (every task goes to a worker, as in ansible.builtin.linear);
# GPUFLEET_CONTROLLER_ACTIONS=0 only the controller's own actions (false conditions are still skipped here).
ENV_SWITCH = "GPUFLEET_CONTROLLER_SKIP"
ACTIONS_SWITCH = "GPUFLEET_CONTROLLER_ACTIONS"

# Above this many milliseconds, a task's run in the controller costs it more than forking a worker
# (about 8 ms of the controller's time per task and host) that runs the task on another core: the
# task's other hosts go to workers. GPUFLEET_CONTROLLER_HEAVY_MS sets another limit.
HEAVY_SWITCH = "GPUFLEET_CONTROLLER_HEAVY_MS"
HEAVY_MS = 10.0


def heavy_seconds() -> float:
    try:
        return float(os.environ.get(HEAVY_SWITCH, HEAVY_MS)) / 1000
    except ValueError:
        return HEAVY_MS / 1000


# What a worker costs in wall time, from its fork to its result (about 100 ms on the lab, most of it the
# fork, the worker's set-up and its teardown): a play of a few hosts waits that long for its workers
# however little each one does, so a task heavier than HEAVY_MS still runs here when running it for
# every host of the play, one after another, takes less than that.
WORKER_WALL_MS = 100.0


def too_heavy(elapsed: float, hosts: int) -> bool:
    """Whether a task that took ``elapsed`` seconds here for one host sends the play's other hosts
    (``hosts`` in all) to workers."""
    return elapsed > heavy_seconds() and elapsed * max(hosts, 1) > WORKER_WALL_MS / 1000


# ansible-core's action plugins that never use the task's connection. The includes have no plugin: the
# executor returns their templated arguments before it loads one.
CONTROLLER_ACTIONS = frozenset(
    f"ansible.builtin.{name}"
    for name in ("set_fact", "assert", "fail", "debug", "validate_argument_spec", "group_by", "include_vars")
)
INCLUDES = frozenset(
    f"{prefix}{name}"
    for prefix in ("", "ansible.builtin.", "ansible.legacy.")
    for name in ("include_tasks", "include_role")
)


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


def actions_enabled() -> bool:
    return enabled() and os.environ.get(ACTIONS_SWITCH, "1") != "0"


def runs_in_controller(task) -> bool:
    """Whether the task's action runs wholly in the controller and nothing about it can block it there."""
    # A role's argument validation is written as the FQCN and left unresolved by ansible-core; an
    # ansible.builtin name cannot be shadowed by a playbook's plugins.
    resolved = getattr(task, "_resolved_action", None) or (task.action if task.action in CONTROLLER_ACTIONS else None)
    if task.action not in INCLUDES and resolved not in CONTROLLER_ACTIONS:
        return False
    return not blocks(task)


def blocks(task) -> bool:
    """Whether running the task could block the controller: retries or until (they sleep), a timeout (an
    alarm signal), async, a loop that pauses."""
    if task.until or task.retries is not None or task.timeout or task.async_val:
        return True
    return bool(getattr(task.loop_control, "pause", 0))


def answers_from_packages(task) -> bool:
    """Whether the task is a package question the controller may answer from the host's package list."""
    return host_packages.is_question(task) and not task.delegate_to and not blocks(task)


def executed_result(host, task, task_vars, play_context, loader, final_q, variable_manager):
    """Run the task as the worker would (on ``task``, a copy): (its result, the task's fields after it)."""
    from ansible._internal import _task
    from ansible.executor.task_executor import TaskExecutor
    from ansible.plugins.loader import get_plugin_loader_namespace

    with _task.TaskContext(task):
        result = TaskExecutor(
            host, task, task_vars, play_context, loader, get_plugin_loader_namespace(), final_q, variable_manager
        ).run()
    return result, task.dump_attrs()


def loops_without_host(task) -> bool:
    """Whether the task is a loop the controller may try to run (every item skipped, or no item)."""
    if task.loop is None and not task.loop_with:
        return False
    return not task.delegate_to and not blocks(task)


class _ItemRecorder:
    """The executor's results queue in a run that may be thrown away: the per-item callbacks are kept (their
    results copied as they were sent) to be sent only when the run is kept; a connection asked for marks the
    run as one that needs its host."""

    def __init__(self):
        self.needs_host = False
        self.callbacks: list = []

    def send_callback(self, method_name, task_result):
        from ansible.executor.task_result import _RawTaskResult
        from ansible.vars.clean import module_response_deepcopy

        data = module_response_deepcopy(task_result._return_data)
        fields = dict(task_result.task_fields)
        self.callbacks.append((method_name, _RawTaskResult(task_result.host, task_result.task, data, fields)))

    def __getattr__(self, name):
        # Anything else the executor would send (a prompt, a result of its own) is the worker's to send.
        self.needs_host = True
        raise _HostNeeded(name)


class _HostNeeded(Exception):
    """An item of the loop would run on its host (the executor asked for its connection)."""


def hostless_loop_result(host, task, task_vars, play_context, loader, variable_manager):
    """Run a looped task (``task``, a copy) as the worker would, as long as no item needs the host: (its
    result, the task's fields after it, the per-item callbacks to send), or None when an item would run
    on the host or the loop's evaluation warned (the worker does it all again and reports it)."""
    from ansible._internal import _display_utils, _task
    from ansible.executor.task_executor import TaskExecutor
    from ansible.plugins.loader import get_plugin_loader_namespace

    class Executor(TaskExecutor):
        def _get_connection(self, *args, **kwargs):
            recorder.needs_host = True
            raise _HostNeeded

    recorder = _ItemRecorder()
    # The executor adds the loop's variables to the ones it is given: a copy, for the worker's sake.
    executor = Executor(
        host, task, task_vars.copy(), play_context, loader, get_plugin_loader_namespace(), recorder, variable_manager
    )
    with _task.TaskContext(task), _display_utils.DeferredWarningContext(variables=task_vars) as warnings:
        result = executor.run()
    if recorder.needs_host or warnings.get_warnings() or warnings.get_deprecation_warnings():
        return None
    return result, task.dump_attrs(), recorder.callbacks


def skipped_result(host, task, task_vars, play_context, loader):
    """The skipped result the worker would return, or None when the task must go to a worker."""
    if not task.when or task.loop is not None or task.loop_with or task.delegate_to:
        return None
    tempvars = task_vars.copy()
    try:
        # ansible-core's private modules, imported here: an ansible-core without them (another
        # release) sends every task to a worker, as Ansible's own linear strategy does.
        from ansible._internal import _display_utils
        from ansible._internal._templating._engine import TemplateEngine

        templar = TemplateEngine(loader=loader, variables=task_vars)
        with _display_utils.DeferredWarningContext(variables=task_vars) as warnings:
            context = play_context.set_task_and_variable_override(task=task, variables=task_vars, templar=templar)
            context.post_validate(templar=templar)
            if not context.remote_addr:
                context.remote_addr = host.address
            context.update_vars(tempvars)
            why: dict = {}
            if task._resolve_conditional(task.when, tempvars, result_context=why):
                return None
            result = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"} | why
            task.update_result_no_log(templar, result)
        if warnings.get_warnings() or warnings.get_deprecation_warnings():
            return None
    except Exception:  # the worker evaluates it again and reports the error
        return None
    return result


def squashed_fields(task) -> dict:
    """``task.dump_attrs()`` as the worker sends it: after ``squash()``, on a copy (the task is shared)."""
    copy = task.copy(exclude_parent=True, exclude_tasks=True)
    copy._parent = task._parent
    copy.squash()
    return copy.dump_attrs()


class ControllerSkipMixin:
    """A strategy mixin: ``_queue_task`` sends a false ``when``'s skipped result, and the result of a task
    that runs wholly in the controller, without a worker."""

    def _queue_task(self, host, task, task_vars, play_context):
        if enabled():
            result = skipped_result(host, task, task_vars, play_context, self._loader)
            if result is not None and self._send_skipped(host, task, task_vars, play_context, result):
                return None
            heavy = getattr(self, "_gpufleet_heavy_tasks", None)
            if heavy is None:
                heavy = self._gpufleet_heavy_tasks = set()
            if (
                actions_enabled()
                and task._uuid not in heavy
                and runs_in_controller(task)
                and self._run_here(host, task, task_vars, play_context)
            ):
                return None
            if actions_enabled() and answers_from_packages(task):
                snapshot = host_packages.snapshot_of(host.name)
                if snapshot is None:
                    # The worker's query lists every package too (the result that brings it: observe).
                    task_vars = {**task_vars, host_packages.WANT_VAR: True}
                elif self._run_here(
                    host, task, {**task_vars, host_packages.SNAPSHOT_VAR: snapshot}, play_context, weigh=False
                ):
                    # Never heavy: a worker would cost the controller a fork and the host a query.
                    return None
            if (
                actions_enabled()
                and task._uuid not in heavy
                and loops_without_host(task)
                and not runs_in_controller(task)
                and self._loop_here(host, task, task_vars, play_context)
            ):
                return None
        return super()._queue_task(host, task, task_vars, play_context)

    def _convert_wire_task_result_to_raw(self, wire_task_result):
        """Every result the strategy receives, a worker's or the controller's: the hosts' package lists
        are kept or dropped here, before any callback or ``register`` sees the result."""
        raw = super()._convert_wire_task_result_to_raw(wire_task_result)
        host_packages.observe(raw)
        return raw

    def _send_skipped(self, host, task, task_vars, play_context, result) -> bool:
        """Queue the result as a worker would have (the same cache entry, callback and count)."""
        try:
            from ansible.executor.task_result import _RawTaskResult

            fields = squashed_fields(task)
        except Exception:
            return False
        self._started_here(host, task, task_vars, play_context)
        self._final_q.send_task_result(_RawTaskResult(host=host, task=task, return_data=result, task_fields=fields))
        self._pending_results += 1
        return True

    def _run_here(self, host, task, task_vars, play_context, weigh: bool = True) -> bool:
        """Run the task in this process and queue its result as a worker would have; unless ``weigh`` is
        false, a run that took longer than a worker costs the controller sends the task's next hosts to
        workers."""
        try:
            from ansible.executor.task_result import _RawTaskResult

            # The executor templates the task and its parent blocks in place; every host shares them.
            copy = task.copy(exclude_tasks=True)
        except Exception:
            return False
        self._started_here(host, task, task_vars, play_context)
        started = time.perf_counter()
        try:
            result, fields = executed_result(
                host, copy, task_vars, play_context, self._loader, self._final_q, self._variable_manager
            )
        except Exception as ex:  # the executor reports its own errors; this is anything around it
            from ansible._internal._errors import _error_utils

            result, fields = _error_utils.result_dict_from_exception(ex), {}
        if weigh and too_heavy(time.perf_counter() - started, len(getattr(self, "_hosts_cache", ()))):
            self._gpufleet_heavy_tasks.add(task._uuid)
        self._final_q.send_task_result(_RawTaskResult(host=host, task=task, return_data=result, task_fields=fields))
        self._pending_results += 1
        return True

    def _loop_here(self, host, task, task_vars, play_context) -> bool:
        """Run a loop whose items never reach the host here, and queue its item callbacks and result as a
        worker would have. When an item would run on the host (or the run took longer than a worker costs
        the controller), this host and the task's next ones go to workers."""
        started = time.perf_counter()
        try:
            from ansible.executor.task_result import _RawTaskResult

            copy = task.copy(exclude_tasks=True)
            done = hostless_loop_result(host, copy, task_vars, play_context, self._loader, self._variable_manager)
        except Exception:  # the worker runs it again and reports any error
            done = None
        if done is None or too_heavy(time.perf_counter() - started, len(getattr(self, "_hosts_cache", ()))):
            self._gpufleet_heavy_tasks.add(task._uuid)
        if done is None:
            return False
        result, fields, callbacks = done
        self._started_here(host, task, task_vars, play_context)
        for method_name, item_result in callbacks:
            self._final_q.send_callback(method_name, item_result)
        self._final_q.send_task_result(_RawTaskResult(host=host, task=task, return_data=result, task_fields=fields))
        self._pending_results += 1
        return True

    def _started_here(self, host, task, task_vars, play_context) -> None:
        """What queuing a task to a worker records: the entry its result is matched to, the start callback."""
        self._queued_task_cache[(host.name, task._uuid)] = {
            "host": host,
            "task": task,
            "task_vars": task_vars,
            "play_context": play_context,
        }
        self._tqm.send_callback("v2_runner_on_start", host, task)
