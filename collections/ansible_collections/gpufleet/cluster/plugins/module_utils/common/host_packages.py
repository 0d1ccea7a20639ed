# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Controller side only: each host's installed packages, read once per run and kept while nothing on the
host changes, so that gpufleet.cluster.missing_packages is answered in the controller.

Every role asks which of its packages are missing before its package task: a no-op re-run of site.yml
asks about 16 times per host, each a worker forked for one ``dpkg-query`` on the host. The collection's
strategies (module_utils/common/controller_skip.py) ask the first question of a run on a host with
``snapshot: true``: the same query also lists every installed package, and the action plugin returns
that list under RESULT_KEY. The strategy keeps it (``observe``, for every result it receives, before any
callback sees it) and answers the host's next questions in the controller, with the module's result.

The list is only as good as the last time nothing changed: any result of the host that is changed,
failed or unreachable drops it, and so does any such result of a delegated task, for every host (the
task may have acted on another one). The next question reads the host again. A no-op run reads each
host once; a first converge, which changes something before most questions, reads it about as often
as before. A package that someone else installs or removes on the host during the run, with no task
of the run reporting a change, is not seen until the next run (or the next change on that host).

The lists live in this module, for the controller process's lifetime (one ansible-playbook run: the
strategy object is made again for every play). Only the strategy's process reads and writes them; a
worker forked from it never consults its copy.
"""

from __future__ import annotations

import threading

ACTION = "gpufleet.cluster.missing_packages"
# The task variable with which the strategy hands the action a host's list (answer from it) or asks
# for one (call the module with snapshot: true); and the result key that carries the list back.
SNAPSHOT_VAR = "_gpufleet_package_snapshot"
WANT_VAR = "_gpufleet_package_snapshot_wanted"
RESULT_KEY = "_gpufleet_package_snapshot"

_lock = threading.Lock()
_snapshots: dict[str, dict] = {}


def is_question(task) -> bool:
    """Whether the task runs gpufleet.cluster.missing_packages (a collection's FQCN cannot be shadowed)."""
    return ACTION in (getattr(task, "_resolved_action", None), getattr(task, "action", None))


def valid(snapshot) -> bool:
    return (
        isinstance(snapshot, dict)
        and snapshot.get("manager") in ("dpkg", "rpm")
        and isinstance(snapshot.get("installed"), dict)
    )


def snapshot_of(host: str) -> dict | None:
    with _lock:
        return _snapshots.get(host)


def forget(host: str | None = None) -> None:
    """Drop one host's list, or every host's."""
    with _lock:
        if host is None:
            _snapshots.clear()
        else:
            _snapshots.pop(host, None)


def observe(raw) -> None:
    """Keep the list a result carries (and take it out of the result), or drop the lists it may have
    made wrong. ``raw`` is the strategy's _RawTaskResult; this never raises."""
    try:
        host = raw.host.name
        data = raw._return_data
        snapshot = data.pop(RESULT_KEY, None) if isinstance(data, dict) else None
        if not isinstance(data, dict) or raw.is_changed() or raw.is_failed() or raw.is_unreachable():
            forget(None if getattr(raw.task, "delegate_to", None) else host)
        elif valid(snapshot) and not getattr(raw.task, "delegate_to", None):
            with _lock:
                _snapshots[host] = snapshot
    except Exception:
        forget()
