#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: history_append
short_description: Keep a hardware gate or drift result per node in the cluster's history
version_added: 0.1.0
description:
  - Appends one record per node to I(dest)C(/<cluster>/history.jsonl), the history store the acceptance report
    also appends to (C(module_utils/acceptance/history.py)); C(gpufleet report history NODE) prints a node's
    records.
  - The append is one locked C(write), so two writers never interleave and a run killed mid-write leaves at most a
    torn last line, which readers skip with a warning.
  - Meant for the controller (C(delegate_to) set to localhost).
options:
  dest:
    description: Base directory of the reports.
    type: path
    required: true
  cluster:
    description: Cluster name (the brief's C(cluster.name)).
    type: str
    required: true
  kind:
    description: What the records are the result of.
    type: str
    choices: [gate, drift]
    required: true
  run:
    description: The run's timestamp (C(20250101T120000Z)), the same for every node of the run.
    type: str
    required: true
  records:
    description:
      - One per node - C(host), C(verdict) (gate C(pass) / C(fail); drift C(clean), C(drifted) or C(unknown)),
        and optionally C(pool), C(figures) (name to number) and C(codes) (the violations' codes or the drifted
        components).
      - Exactly one of I(records) and I(report) is given.
    type: list
    elements: dict
  report:
    description:
      - A drift report (P(gpufleet.cluster.drift_check#filter)); one record per node of it, its status as the
        verdict and its drifted components as the codes.
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.attributes
attributes:
  check_mode:
    details: In check mode nothing is appended.
"""

EXAMPLES = r"""
- name: Keep this node's gate result in the history
  gpufleet.cluster.history_append:
    dest: "{{ playbook_dir }}/../reports"
    cluster: "{{ gpufleet_brief.cluster.name }}"
    kind: gate
    run: 20250101T120000Z
    records:
      - {host: gpu01, pool: h100, verdict: pass}
  delegate_to: localhost
"""

RETURN = r"""
path:
  description: The history store.
  returned: always
  type: str
appended:
  description: How many records were appended (0 in check mode).
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dest": {"type": "path", "required": True},
            "cluster": {"type": "str", "required": True},
            "kind": {"type": "str", "required": True, "choices": ["gate", "drift"]},
            "run": {"type": "str", "required": True},
            "records": {"type": "list", "elements": "dict"},
            "report": {"type": "dict"},
        },
        required_one_of=[("records", "report")],
        mutually_exclusive=[("records", "report")],
        supports_check_mode=True,
    )
    p = module.params
    if p["report"] is not None:
        p["records"] = history.drift_node_results(p["report"])
    problems = []
    for i, r in enumerate(p["records"]):
        if not isinstance(r.get("host"), str) or not r.get("host"):
            problems.append(f"records[{i}].host: expected a node name, found {r.get('host')!r}")
        if not isinstance(r.get("verdict"), str) or not r.get("verdict"):
            problems.append(f"records[{i}].verdict: expected the node's result, found {r.get('verdict')!r}")
    if problems:
        module.fail_json(msg="; ".join(problems))
    records = [
        history.record(
            p["kind"],
            p["cluster"],
            r["host"],
            r["verdict"],
            run=p["run"],
            pool=r.get("pool"),
            figures=r.get("figures"),
            codes=[str(c) for c in r.get("codes") or []],
        )
        for r in p["records"]
    ]
    path = history.store_path(p["dest"], p["cluster"])
    appended = 0
    if not module.check_mode:
        try:
            appended = history.append(path, records)
        except OSError as exc:
            # The history is secondary to the result itself (written and judged already): a full disk warns.
            module.warn(f"cannot append {len(records)} {p['kind']} record(s) to {path} ({exc}): the history lacks them")
    module.exit_json(changed=appended > 0, path=path, appended=appended)


if __name__ == "__main__":
    main()
