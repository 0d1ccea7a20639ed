# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: workload_spec
short_description: The brief's acceptance.workload, its sbatch line, its output and its verdict
version_added: 0.1.0
author: gpufleet developers
description:
  - C(workload_spec) - the brief's C(acceptance.workload) with its defaults (partition the first pool, window in
    seconds) and C(shared), whether its checkpoint directory lies on a C(storage.shared) mount; null when the brief
    has none.
  - C(workload_sbatch_argv) - the C(sbatch --parsable) argv of the workload (one node, the partition, C(--gres=gpu:N),
    pyxis' C(--container-image) when the brief names an image), the job seeing C(GPUFLEET_CHECKPOINT_DIR),
    C(GPUFLEET_DATASET) and C(GPUFLEET_WEIGHTS).
  - C(workload_parse) - a job's output, the lines C(gpufleet-workload step=N samples_per_s=X time=T) and
    C(gpufleet-workload event=resumed|checkpoint step=N time=T) (docs/storage.md).
  - C(workload_job) - C(scontrol show job -o <id>) as a dict of its fields (C(JobState), C(Reason), C(NodeList),
    C(StdOut)...); empty when Slurm does not know the job.
  - C(workload_evaluate) - both jobs against the brief - C(WORKLOAD_NO_THROUGHPUT), C(WORKLOAD_BELOW_FLOOR),
    C(WORKLOAD_NOT_RESUMED) (no resume or resumed at step 0), C(WORKLOAD_RESTORE_SLOW), C(WORKLOAD_NOT_RUN).
options:
  _input:
    description: The brief (C(workload_spec)), the spec (C(workload_sbatch_argv)), a job's output (C(workload_parse)),
      the first job (C(workload_evaluate)).
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Read the workload of the brief
  ansible.builtin.set_fact:
    _spec: "{{ gpufleet_brief | gpufleet.cluster.workload_spec }}"

- name: Judge the two jobs
  ansible.builtin.set_fact:
    _result: "{{ _first | gpufleet.cluster.workload_evaluate(_second, _spec) }}"
"""

RETURN = r"""
_value:
  description: The spec, the argv, the parsed output or the evaluation (a dict with C(violations)).
  type: raw
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import workload as _wl


def workload_spec(brief):
    try:
        return _wl.workload_spec(brief)
    except (_wl.WorkloadError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"workload_spec: {exc}") from None


def workload_sbatch_argv(
    spec, job_name, output, checkpoint_dir, nodelist="", container_mounts="", extra_args=(), time_limit_s=None
):
    if not isinstance(spec, dict):
        raise AnsibleFilterError("workload_sbatch_argv expects the workload_spec (a dict)")
    try:
        return _wl.sbatch_argv(
            spec,
            job_name=str(job_name),
            output=str(output),
            checkpoint_dir=str(checkpoint_dir),
            nodelist=str(nodelist or ""),
            container_mounts=str(container_mounts or ""),
            extra_args=[str(a) for a in extra_args or []],
            time_limit_s=None if time_limit_s is None else float(time_limit_s),
        )
    except _wl.WorkloadError as exc:
        raise AnsibleFilterError(f"workload_sbatch_argv: {exc}") from None


def workload_parse(text):
    return _wl.parse_output(str(text or ""))


def workload_job(text):
    return _wl.parse_job(str(text or ""))


def workload_evaluate(first, second, spec):
    if not all(isinstance(x, dict) for x in (first, second, spec)):
        raise AnsibleFilterError("workload_evaluate expects the first job, the second job and the spec (dicts)")
    return _wl.evaluate(first, second, spec)


class FilterModule:
    def filters(self):
        return {
            "workload_spec": workload_spec,
            "workload_sbatch_argv": workload_sbatch_argv,
            "workload_parse": workload_parse,
            "workload_evaluate": workload_evaluate,
            "workload_job": workload_job,
        }
