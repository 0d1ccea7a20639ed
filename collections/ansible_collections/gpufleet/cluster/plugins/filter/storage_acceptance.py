# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: storage_evaluate
short_description: Judge a node's storage acceptance record against the brief's acceptance.storage
version_added: 0.1.0
author: gpufleet developers
description:
  - Takes the record of P(gpufleet.cluster.storage_bench#module) and the brief's C(acceptance.storage) and returns
    the violations - a floor missed (C(STORAGE_BELOW_FLOOR), naming host, what, floor and measured), a checkpoint
    read back too slowly (C(STORAGE_RESTORE_SLOW)) or wrongly (C(STORAGE_CHECKSUM_MISMATCH)), a measurement that
    failed (C(STORAGE_BENCH_FAILED), C(STORAGE_CHECKPOINT_FAILED), C(STORAGE_PATH_MISSING), C(STORAGE_NO_SPACE)),
    a shared mount not mounted (C(STORAGE_NOT_MOUNTED); an error only when a shared floor is set).
  - A floor the brief does not set is measured only, never judged.
  - Also C(storage_not_tested) - the nodes of the pools without a storage record (C(STORAGE_NODE_NOT_TESTED)).
options:
  _input:
    description: The node's record (the module's C(record)).
    type: dict
    required: true
  floors:
    description: The brief's C(acceptance.storage).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Judge the node's storage
  ansible.builtin.set_fact:
    _violations: "{{ __bench.record | gpufleet.cluster.storage_evaluate(gpufleet_brief.acceptance.storage) }}"
"""

RETURN = r"""
_value:
  description: Violations, each C({severity, code, host, field, message}).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.storage import acceptance as _acc


def storage_evaluate(record, floors=None):
    if not isinstance(record, dict):
        raise AnsibleFilterError(
            f"storage_evaluate expects the storage_bench record (a dict), got {type(record).__name__}"
        )
    if floors is not None and not isinstance(floors, dict):
        raise AnsibleFilterError(f"storage_evaluate: floors must be acceptance.storage (a dict), got {floors!r}")
    return _acc.evaluate(record, floors or {})


def storage_not_tested(records, expected):
    if not isinstance(records, list) or not isinstance(expected, list):
        raise AnsibleFilterError("storage_not_tested expects a list of records and a list of host names")
    return _acc.not_tested(expected, records)


class FilterModule:
    def filters(self):
        return {"storage_evaluate": storage_evaluate, "storage_not_tested": storage_not_tested}
