# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: nccl_parse
short_description: Parse nccl-tests output and its NCCL_DEBUG=INFO lines into data
version_added: 0.1.0
author: gpufleet developers
description:
  - Reads what a launcher printed (C(all_reduce_perf) text in every nccl-tests format, launcher prefixes and
    noise included, or a C(-J) JSON document) and the NCCL_DEBUG=INFO lines mixed into it.
  - Garbage never raises; a log without a result table gives no run and a warning quoting the failure.
  - See docs/nccl-acceptance.md for the run and debug keys.
options:
  _input:
    description: The output (stdout, or stdout and stderr joined).
    type: str
    required: true
  label:
    description: A name for the log (the run label); it becomes the C(file) of every run and of the debug evidence.
    type: str
  rc:
    description:
      - The launcher's exit status, when known; C(ended) then says whether it failed (non-zero), timed out (124)
        or was killed (a signal).
    type: int
"""

EXAMPLES = r"""
- name: Parse the all-node run
  ansible.builtin.set_fact:
    _parsed: "{{ (__run.stdout ~ '\n' ~ __run.stderr) | gpufleet.cluster.nccl_parse('all-nodes h100') }}"

- name: Show its busbw at the largest message size
  ansible.builtin.debug:
    msg: "{{ _parsed.busbw }} GB/s"
"""

RETURN = r"""
_value:
  description: The parsed log.
  type: dict
  contains:
    runs:
      description: One dict per run (C(collective), C(ranks), C(hosts), C(gpu_names), C(nccl_version), C(rows), ...).
      type: list
      elements: dict
    debug:
      description: NCCL_DEBUG=INFO evidence (C(network), C(gdr), C(socket_fallback), C(transports), ...), or null.
      type: dict
    warnings:
      description: What could not be read (a run that failed before its table, invalid JSON).
      type: list
      elements: str
    busbw:
      description: Out-of-place busbw (GB/s) at the largest message size of the slowest run; null without a table.
      type: float
    failures:
      description: Every failure line of the output (C(Test NCCL failure), an MPI abort, an srun task killed, ...),
        each C({line, text, hosts}) with the node(s) it names.
      type: list
      elements: dict
    ended:
      description:
        - How the run ended, C({status, rc, signal, failure, hosts, detail}); C(status) is C(completed), C(failed),
          C(timed out), C(killed), C(incomplete) (the table stopped before the largest size asked for) or
          C(no table). Only C(completed) may pass.
      type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import parse_log


def nccl_parse(text, label=None, rc=None):
    if text is not None and not isinstance(text, str):
        raise AnsibleFilterError(
            f"nccl_parse: input must be the launcher's output (a string), got {type(text).__name__}"
        )
    return parse_log(text or "", None if label is None else str(label), rc)


class FilterModule:
    def filters(self):
        return {"nccl_parse": nccl_parse}
