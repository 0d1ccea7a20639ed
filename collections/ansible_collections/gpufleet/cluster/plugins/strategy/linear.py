# gpufleet.cluster.linear: Ansible's linear strategy, with the collection's filter plugins imported in
# the controller before the workers fork (module_utils/common/preload.py): every worker that templates a
# gpufleet filter otherwise imports all of them again, ~1 s per task on three hosts. A task whose `when`
# is false is skipped in the controller, and a task whose action never touches its host (set_fact,
# assert, ...) runs there, without a worker (module_utils/common/controller_skip.py), as does a loop whose
# items never reach the host; a role's package question is answered there from the host's package list
# (module_utils/common/host_packages.py).
# ansible.cfg's strategy: every gpufleet run uses it unless ANSIBLE_STRATEGY asks for
# gpufleet.cluster.mitogen_linear (the lab, the benchmarks and Molecule do; see mitogen_linear.py).
from __future__ import annotations

DOCUMENTATION = """
name: linear
short_description: Ansible's linear strategy with gpufleet's filter plugins loaded once in the controller
description:
  - Runs plays exactly as C(ansible.builtin.linear); before the first task, imports the collection's filter
    and test plugins in the controller so that the forked workers inherit them.
  - A task whose C(when) is false for a host is skipped in the controller with the result the worker would
    send, without forking a worker (C(GPUFLEET_CONTROLLER_SKIP=0) turns this off).
  - A task whose action never touches its host (C(set_fact), C(assert), C(fail), C(debug),
    C(validate_argument_spec), C(group_by), C(include_vars), the includes) is run in the controller by
    Ansible's own task executor, without forking a worker (C(GPUFLEET_CONTROLLER_ACTIONS=0) turns only
    this off); when one host's run of it takes over 10 ms (C(GPUFLEET_CONTROLLER_HEAVY_MS)) and its run
    for every host of the play would take over 100 ms, its other hosts go to workers.
  - A loop whose items are all skipped, or that has none, is run in the controller the same way; when an item
    would run on the host, that attempt is dropped and the task goes to a worker there and on its next hosts.
  - C(gpufleet.cluster.missing_packages) is answered in the controller from the host's package list, read
    with the host's first package question of the run and kept until a task reports a change, failure or
    loss of that host (or a delegated task one of any host).
  - C(GPUFLEET_CONTROLLER_ACTIONS=0) turns these two off as well.
author: gpufleet
"""

from ansible.plugins.strategy.linear import StrategyModule as _Linear
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.controller_skip import ControllerSkipMixin
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.preload import (
    preload_jinja_plugins,
    preload_worker_imports,
)


class StrategyModule(ControllerSkipMixin, _Linear):
    """ansible.builtin.linear, the collection's Jinja plugins preloaded, false conditions skipped without a worker."""

    def __init__(self, tqm):
        preload_jinja_plugins()
        preload_worker_imports()
        super().__init__(tqm)
