# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: nccl_launch_argv
short_description: The command line of an NCCL acceptance run
version_added: 0.1.0
author: gpufleet developers
description:
  - C(local) - the binary alone on one node, one process driving every GPU (C(-g) = GPUs per node).
  - C(srun) - C(srun --mpi=pmix) on the given nodes, one task per GPU, C(--gres=gpu:N), exclusive; pyxis
    C(--container-image) when I(container_image) is set.
  - C(mpirun) - Open MPI over the brief's management network, one rank per GPU, the environment exported with C(-x).
  - Returns an argv list for C(ansible.builtin.command)'s C(argv) (no shell).
options:
  _input:
    description: The nodes of the run.
    type: list
    elements: str
    required: true
  launcher:
    description: How to start it.
    type: str
    choices: [local, srun, mpirun]
    required: true
  binary:
    description: Path of C(all_reduce_perf) on the nodes (or in the container).
    type: str
    required: true
  spec:
    description: The pool's spec from P(gpufleet.cluster.nccl_acceptance_spec#filter).
    type: dict
    required: true
  partition: {description: Slurm partition (srun)., type: str}
  srun_mpi: {description: srun's C(--mpi) plugin; empty leaves Slurm's default., type: str, default: pmix}
  container_image: {description: Pyxis container image (srun)., type: str, default: ""}
  container_mounts: {description: Pyxis C(--container-mounts) (srun)., type: str, default: ""}
  launcher_args: {description: Extra launcher arguments, before the binary., type: list, elements: str, default: []}
  test_extra_args: {description: Extra all_reduce_perf arguments., type: list, elements: str, default: []}
  env_names: {description: Variables mpirun exports (C(-x))., type: list, elements: str, default: []}
  step_factor: {description: nccl-tests C(-f)., type: int, default: 2}
  iters: {description: nccl-tests C(-n)., type: int, default: 20}
  warmup_iters: {description: nccl-tests C(-w)., type: int, default: 5}
  check: {description: nccl-tests C(-c) (1 counts wrong values)., type: int, default: 1}
"""

EXAMPLES = r"""
- name: Run all_reduce across the pool
  ansible.builtin.command:
    argv: "{{ _nodes | gpufleet.cluster.nccl_launch_argv('srun', '/opt/nccl-tests/bin/all_reduce_perf', _spec,
                                                         partition='h100') }}"
  environment:
    NCCL_DEBUG: INFO
  changed_when: false
"""

RETURN = r"""
_value:
  description: The argv.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import SpecError, launch_argv


def nccl_launch_argv(nodes, launcher, binary, spec, **kwargs):
    if isinstance(nodes, str) or not isinstance(nodes, (list, tuple)):
        raise AnsibleFilterError(f"nccl_launch_argv: input must be a list of nodes, got {type(nodes).__name__}")
    if not isinstance(spec, dict):
        raise AnsibleFilterError(f"nccl_launch_argv: spec must be nccl_acceptance_spec's result, got {spec!r}")
    for key in ("launcher_args", "test_extra_args", "env_names"):
        if isinstance(kwargs.get(key), str):
            raise AnsibleFilterError(f"nccl_launch_argv: {key} must be a list, got a string")
    try:
        return launch_argv(launcher, str(binary), list(nodes), spec, **kwargs)
    except SpecError as exc:
        raise AnsibleFilterError(f"nccl_launch_argv: {exc}") from exc
    except TypeError as exc:
        raise AnsibleFilterError(f"nccl_launch_argv: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"nccl_launch_argv": nccl_launch_argv}
