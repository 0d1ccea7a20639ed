# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Controller side only: skip a task whose ``when`` is false without forking a worker for it.

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
"""

from __future__ import annotations

import os

# GPUFLEET_CONTROLLER_SKIP=0 turns it off (every task goes to a worker, as in ansible.builtin.linear).
ENV_SWITCH = "GPUFLEET_CONTROLLER_SKIP"


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


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
    """A strategy mixin: ``_queue_task`` sends a false ``when``'s skipped result without a worker."""

    def _queue_task(self, host, task, task_vars, play_context):
        if enabled():
            result = skipped_result(host, task, task_vars, play_context, self._loader)
            if result is not None and self._send_skipped(host, task, task_vars, play_context, result):
                return None
        return super()._queue_task(host, task, task_vars, play_context)

    def _send_skipped(self, host, task, task_vars, play_context, result) -> bool:
        """Queue the result as a worker would have (the same cache entry, callback and count)."""
        try:
            from ansible.executor.task_result import _RawTaskResult

            fields = squashed_fields(task)
        except Exception:
            return False
        self._queued_task_cache[(host.name, task._uuid)] = {
            "host": host,
            "task": task,
            "task_vars": task_vars,
            "play_context": play_context,
        }
        self._tqm.send_callback("v2_runner_on_start", host, task)
        self._final_q.send_task_result(_RawTaskResult(host=host, task=task, return_data=result, task_fields=fields))
        self._pending_results += 1
        return True
