# gpufleet.cluster.mitogen_linear: Ansible's linear strategy run through Mitogen when it is installed
# (requirements.in), plain linear otherwise. Opt-in: ANSIBLE_STRATEGY=gpufleet.cluster.mitogen_linear
# (ansible.cfg's default is gpufleet.cluster.linear); the lab (make lab), the benchmarks and Molecule set it.
#
# Mitogen keeps one Python interpreter per host over the SSH connection and sends modules to it,
# instead of a fresh ssh exec + module upload + interpreter start per task: a no-op re-run takes
# well under half the time (figures: docs/benchmarks.md). Task order, results, check mode and
# diffs are linear's.
# Like gpufleet.cluster.linear, it imports the collection's filters in the controller before the
# workers fork (module_utils/common/preload.py), skips a task whose `when` is false without a worker
# (module_utils/common/controller_skip.py), runs there the tasks and loops that never reach the host,
# answers package questions from each host's package list (module_utils/common/host_packages.py),
# and lists the installed collections once there (Mitogen's
# planner walks them all in every task's worker otherwise).
# The strategy is not a variable (-e cannot set it): ANSIBLE_STRATEGY selects it for one command.
# Mitogen's own debug log (which holds no_log arguments: secrets) only with GPUFLEET_MITOGEN_DEBUG=1,
# never from -vvv alone.
# Not for playbooks with fire-and-forget async tasks (poll: 0 + async_status): under Mitogen 0.3.29
# their jobs never finished (Molecule's podman create playbook hung; the scenarios use gpufleet's own
# create playbook and start background jobs with systemd-run). Nor wait_for_connection: it resets the
# connection before each attempt, and every call after a reset fails ("Broker ... exitted"; the
# scenarios' prepare waits for sshd from the controller, then pings). Molecule runs this strategy
# (.config/molecule/config.yml). gpufleet's roles and playbooks have neither.
from __future__ import annotations

DOCUMENTATION = """
name: mitogen_linear
short_description: Ansible's linear strategy over Mitogen's connection (plain linear without Mitogen)
description:
  - Runs plays exactly as C(ansible.builtin.linear), with Mitogen's persistent per-host interpreter when the
    C(mitogen) package is importable; falls back to C(ansible.builtin.linear) with a warning when it is not.
  - Otherwise it does what C(gpufleet.cluster.linear) does, in the same way and with the same switches (false
    conditions, the controller's own actions, loops whose items never reach the host and package questions
    decided or run in the controller, without a worker).
author: gpufleet
"""

import logging
import os
import threading

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.controller_skip import ControllerSkipMixin
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.preload import (
    preload_jinja_plugins,
    preload_worker_imports,
)

# How long a run waits on a node that stopped answering without closing its connection (power
# lost, kernel panic, cable pulled) before it marks the node unreachable and goes on without it:
# an SSH keepalive every 15 s, given up after 4 unanswered ones, about a minute during which every
# host waits at that task. Mitogen's own fallback (30 s x 10) holds a play for five minutes. An
# inventory's mitogen_ssh_keepalive_interval / _count still win; without Mitogen, ansible.cfg's
# ssh_args carry the same values.
KEEPALIVE_DEFAULTS = {"mitogen_ssh_keepalive_interval": 15, "mitogen_ssh_keepalive_count": 4}

try:
    import ansible_mitogen.loaders
    import ansible_mitogen.logging
    import ansible_mitogen.strategy

    _Base = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)
    _mitogen_log_setup = ansible_mitogen.logging.setup

    def _quiet_log_setup():
        """Mitogen's logging, but never at DEBUG unless GPUFLEET_MITOGEN_DEBUG=1.

        At -vvv Mitogen logs every call with its arguments, no_log tasks' included: the MUNGE key
        and the database passwords would be in the log (molecule/resources/tasks/assert-no-secrets.yml
        catches it). Ansible's own -vvv output is unchanged.
        """
        _mitogen_log_setup()
        if os.environ.get("GPUFLEET_MITOGEN_DEBUG") != "1":
            for name in ("mitogen", "mitogen.io", "ansible_mitogen", "operon"):
                logging.getLogger(name).setLevel(logging.ERROR)

    ansible_mitogen.logging.setup = _quiet_log_setup

    def _collection_dirs_once():
        """Mitogen's collection scan, done once in the controller instead of in every task's worker.

        For every task that runs a collection's module, Mitogen's planner (0.3.x, ``_load_collections``)
        walks every installed collection (the ``ansible`` package brings ~50) in the worker Ansible forks
        for that task and host; the result never reaches the next worker. The collections cannot change
        during a run, so the walk is done here, before any worker forks, and the workers read the list.
        """
        import ansible.collections.list
        import ansible_mitogen.planner

        if getattr(ansible_mitogen.planner, "_gpufleet_collection_dirs", None) is not None:
            return
        load = getattr(ansible_mitogen.planner, "_load_collections", None)
        if load is None:  # another Mitogen: leave it as it is
            return
        dirs = sorted({p.decode("utf-8") for p in ansible.collections.list.list_collection_dirs()})
        ansible_mitogen.planner._gpufleet_collection_dirs = dirs

        def _load_collections(invocation):
            invocation._extra_sys_paths.update(dirs)

        ansible_mitogen.planner._load_collections = _load_collections

    # The modules every run sends to every host first: Ansible's module support, Mitogen's runner and
    # target side. Each is sent with the modules it imports, which the mux works out once per run.
    PREWARM_MODULES = (
        "ansible.module_utils.basic",
        "ansible_mitogen.runner",
        "ansible_mitogen.target",
        "mitogen.parent",
        "mitogen.service",
        "mitogen.fork",
    )

    def _prewarm(responder):
        """Prepare what a host's first task asks the mux for (PREWARM_MODULES and the modules they import),
        in a thread of the mux, while the controller is still on the plays that do not reach a host.

        Mitogen's mux finds, reads, minifies and compresses each module a host imports the first time a
        host asks for it, and keeps the answer for the rest of the run: about 0.9 s of one core, on the path
        of the first task that reaches a host. Asking for the same modules here fills the same cache the
        same way (the mux's own code, with the same arguments), only earlier; a module a host asks for
        meanwhile is worked out by whichever asks first. Nothing here may stop the mux: a failure leaves
        the work to the host's own request.
        """
        build = getattr(responder, "_build_tuple", None)
        if build is None:  # another Mitogen: leave it as it is
            return
        for root in PREWARM_MODULES:
            try:
                for name in [root, *build(root)[4]]:
                    build(name)
            except Exception:  # the host's own request does the work then, as without this
                continue

    def _prewarm_in_each_mux():
        """Start _prewarm in each mux process as Mitogen sets up its module responder."""
        import ansible_mitogen.process

        setup = ansible_mitogen.process._setup_responder
        if getattr(setup, "_gpufleet_prewarm", False):
            return

        def _setup_responder(responder):
            setup(responder)
            threading.Thread(target=_prewarm, args=(responder,), name="gpufleet-prewarm", daemon=True).start()

        _setup_responder._gpufleet_prewarm = True
        ansible_mitogen.process._setup_responder = _setup_responder

    def _keepalive_defaults():
        """gpufleet's SSH keepalive where the inventory sets none (KEEPALIVE_DEFAULTS).

        Mitogen reads ``mitogen_ssh_keepalive_interval`` / ``_count`` from the task's variables and
        falls back to 30 s x 10 when they are unset. Its spec classes are given a fallback of their
        own here, so an inventory's or a play's values still win.
        """
        import ansible_mitogen.transport_config as tc

        for cls in (tc.PlayContextSpec, tc.MitogenViaSpec):
            for name, fallback in KEEPALIVE_DEFAULTS.items():
                read = getattr(cls, name, None)
                if read is None or getattr(read, "_gpufleet_fallback", None) is not None:
                    continue

                def with_fallback(self, _read=read, _fallback=fallback):
                    value = _read(self)
                    return _fallback if value in (None, "") else value

                with_fallback._gpufleet_fallback = fallback
                setattr(cls, name, with_fallback)

    class StrategyModule(ControllerSkipMixin, ansible_mitogen.strategy.StrategyMixin, _Base):
        """Mitogen's linear strategy."""

        def __init__(self, *args, **kwargs):
            _keepalive_defaults()
            preload_jinja_plugins()
            preload_worker_imports()
            _collection_dirs_once()
            _prewarm_in_each_mux()
            super().__init__(*args, **kwargs)

except ImportError:  # pragma: no cover - depends on what is installed
    from ansible.plugins.strategy.linear import StrategyModule as _Linear
    from ansible.utils.display import Display

    class StrategyModule(ControllerSkipMixin, _Linear):
        """Plain linear: Mitogen is not installed."""

        def __init__(self, tqm):
            Display().warning("gpufleet.cluster.mitogen_linear: mitogen is not installed, using the linear strategy")
            preload_jinja_plugins()
            preload_worker_imports()
            super().__init__(tqm)
