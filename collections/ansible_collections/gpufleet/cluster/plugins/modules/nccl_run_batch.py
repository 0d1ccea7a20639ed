#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_run_batch
short_description: Run several nccl-tests launches at once and return each one's output (acceptance bisect)
version_added: 0.1.0
description:
  - Starts every command of I(runs) at the same time, at most I(parallel) at once, waits for them all and returns
    each one's exit status and output in the order given. The acceptance role runs the groups of a bisect round
    this way (one C(srun) or C(mpirun) per group of nodes; the groups of a round share no node), and the NIC
    loopback runs of a pool's nodes, so that a round takes as long as its slowest run, not the sum of its runs.
  - A command still running after I(timeout) seconds is sent SIGTERM, then SIGKILL I(kill_after) seconds later,
    and reported with exit status 124, as C(timeout(1)) does.
  - It judges nothing (the role parses and judges each output with P(gpufleet.cluster.nccl_run_record#filter)),
    and changes nothing.
  - Ansible's C(async) is not used for this because Mitogen (the strategy of ansible.cfg) never finishes
    fire-and-forget jobs.
options:
  runs:
    description:
      - The commands, each a list (the command and its arguments, no shell) or C({argv, env}) - C(argv) that list,
        C(env) variables added to the task's environment for this command only.
    type: list
    elements: raw
    required: true
  parallel:
    description: Commands running at once at most; C(0) runs them all at once.
    type: int
    default: 0
  timeout:
    description: Seconds one command may run; C(0) for no limit.
    type: int
    default: 0
  kill_after:
    description: Seconds between SIGTERM and SIGKILL for a command past I(timeout).
    type: int
    default: 30
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.attributes
attributes:
  check_mode:
    details:
      - The commands run in check mode too - they are read-only benchmarks, as every benchmark task of the
        acceptance role (C(check_mode) false) - and nothing is reported changed.
"""

EXAMPLES = r"""
- name: Run the groups of a bisect round at once, 64 at a time
  gpufleet.cluster.nccl_run_batch:
    runs:
      - argv: [srun, -N2, -w, "gpu001,gpu002", /opt/nccl-tests/bin/all_reduce_perf, -b, "8", -e, 8G]
      - argv: [srun, -N2, -w, "gpu003,gpu004", /opt/nccl-tests/bin/all_reduce_perf, -b, "8", -e, 8G]
    parallel: 64
    timeout: 1800
  register: __runs
"""

RETURN = r"""
results:
  description:
    - One per command, in the order of I(runs) - C(argv), C(rc) (124 past I(timeout), 127 when the command could
      not be started), C(stdout), C(stderr), C(started) and C(finished) (seconds since the first command started).
  returned: always
  type: list
  elements: dict
elapsed:
  description: Seconds from the first start to the last end.
  returned: always
  type: float
max_in_flight:
  description: The most commands that were running at the same time.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.concurrent_runs import run_all


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "runs": {"type": "list", "elements": "raw", "required": True},
            "parallel": {"type": "int", "default": 0},
            "timeout": {"type": "int", "default": 0},
            "kill_after": {"type": "int", "default": 30},
        },
        supports_check_mode=True,
    )
    p = module.params
    runs = [run if isinstance(run, dict) else {"argv": run} for run in p["runs"]]
    for i, run in enumerate(runs):
        argv = run.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str | int | float) for a in argv):
            module.fail_json(msg=f"runs[{i}].argv: expected a non-empty list of strings, got {argv!r:.200}")
        env = run.get("env")
        if env is not None and not isinstance(env, dict):
            module.fail_json(msg=f"runs[{i}].env: expected a mapping of variables, got {env!r:.200}")
    if p["parallel"] < 0 or p["timeout"] < 0 or p["kill_after"] < 0:
        module.fail_json(msg="parallel, timeout and kill_after must be >= 0")
    out = run_all(runs, p["parallel"], timeout=p["timeout"] or None, kill_after=p["kill_after"])
    module.exit_json(changed=False, **out)


if __name__ == "__main__":
    main()
