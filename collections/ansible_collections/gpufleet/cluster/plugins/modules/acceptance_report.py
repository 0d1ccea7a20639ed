#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: acceptance_report
short_description: Write the NCCL acceptance report (JSON, Markdown, busbw plots)
version_added: 0.1.0
description:
  - Builds the report of an NCCL acceptance from the runs, transport evidence, node records, violations, bisect
    and drained nodes the C(acceptance) role collected, and writes it under I(dest)C(/<cluster>/<timestamp>/) -
    C(acceptance.json) (schema C(gpufleet.nccl-acceptance/1)), C(acceptance.md), C(junit.xml) (JUnit XML for CI
    systems), one C(busbw-<run>.png) per run
    (busbw against message size, with the floor and the physical limit), one C(history-<pool>.png) per pool (each
    node's single-node busbw over time), and the raw output of each run under C(logs/).
  - Appends one record per measured node to the cluster's history, I(dest)C(/<cluster>/history.jsonl), and sets
    each node's figures beside its first acceptance (the report's History section).
  - Meant for the controller (C(delegate_to) set to localhost), whose Python has matplotlib; without matplotlib the
    plots are skipped and the report says why.
  - The verdict fails on any error violation or any single-/multi-node run below its floor; bisect runs are
    diagnostics. The module itself fails only on bad options or when it cannot write.
options:
  dest:
    description: Base directory of the reports.
    type: path
    required: true
  cluster:
    description: Cluster name (the brief's C(cluster.name)); the report goes under I(dest)C(/<cluster>/).
    type: str
    required: true
  timestamp:
    description: The report's timestamp (C(20250101T120000Z)); default now (UTC).
    type: str
  runs:
    description:
      - One record per run - C(label), C(scope) (C(single-node), C(multi-node) or C(bisect)), C(host) (single-node),
        C(floor_gbps), C(limit_gbps), C(run) (one run of P(gpufleet.cluster.nccl_parse#filter), or null when the
        launcher printed no table), and optionally C(output), the raw output, written to C(logs/<label>.log).
      - Optionally C(rc) (the launcher's exit status) and C(ended) (how the run ended, the C(ended) of
        P(gpufleet.cluster.nccl_parse#filter)); the report shows each run's end and first failure line, and a run
        that did not end cleanly fails whatever its busbw. C(nodes) and C(violations) (the run's own) place its
        failures on its nodes in C(junit.xml).
      - C(collective) (C(all_gather), C(alltoall); all_reduce without it) marks a run of a collective beyond
        all_reduce (P(gpufleet.cluster.nccl_collective_records#filter)) - it counts in the verdict and the node's
        acceptance, has its section in the report, and stays out of the outliers, the quote and the history.
    type: list
    elements: dict
    default: []
  debug:
    description: NCCL_DEBUG=INFO evidence, one entry per run that printed some.
    type: list
    elements: dict
    default: []
  nodes:
    description: Node records (P(gpufleet.cluster.nccl_node_record#filter)).
    type: list
    elements: dict
    default: []
  expected_nodes:
    description:
      - Every node of the pools under test. One without a node record or a single-node run is reported as
        C(not tested) with the violation C(NCCL_NODE_NOT_TESTED) (unreachable, or its phase failed).
    type: list
    elements: str
    default: []
  violations:
    description: Every violation of the acceptance.
    type: list
    elements: dict
    default: []
  bisect:
    description: The finished bisect plan, or a list of them (one per pool); they are merged for the report.
    type: raw
  drained:
    description: Nodes drained by this acceptance.
    type: list
    elements: str
    default: []
  breaker:
    description:
      - The drain breaker's decision (P(gpufleet.cluster.drain_breaker#filter)), kept in the report as C(breaker) with
        its own section; null when the drain step did not run. A tripped breaker's error is among I(violations).
    type: dict
  floors:
    description: The brief's acceptance block (as the runs used it).
    type: dict
    default: {}
  limits:
    description: Physical limits, C(single_node_gbps) and C(multi_node_gbps).
    type: dict
    default: {}
  versions:
    description: The brief's software pins, shown beside what the nodes report.
    type: dict
    default: {}
  context:
    description: Anything else worth keeping in the JSON (launcher, container image, the pools' specs).
    type: dict
    default: {}
  plots:
    description: Draw the busbw plots.
    type: bool
    default: true
  nccl:
    description:
      - Whether the NCCL phases ran in this invocation. False (tags chose only storage / workload) - no run and no
        node record is expected, and the NCCL sections say so.
    type: bool
    default: true
  storage:
    description:
      - Storage acceptance records, one per node (P(gpufleet.cluster.storage_bench#module)'s C(record) with its
        C(violations) from P(gpufleet.cluster.storage_evaluate#filter)); shown in the Storage section, their
        violations counted in the verdict.
    type: list
    elements: dict
    default: []
  link_errors:
    description:
      - Each node's link error counters record (P(gpufleet.cluster.link_errors_judge#filter)'s C(record)), shown in
        the Link error counters section; their violations come in I(violations).
    type: list
    elements: dict
    default: []
  storage_expected:
    description: Nodes that must have a storage record (C(STORAGE_NODE_NOT_TESTED) for each that has none).
    type: list
    elements: str
    default: []
  workload:
    description:
      - The workload acceptance (tasks C(workload.yml) - C(spec), C(jobs), C(throughput_samples_per_s),
        C(resumed_step), C(restore_s), C(verdict), C(violations), or C(skipped)); shown in the Workload section, its
        violations counted in the verdict.
    type: dict
  brief_nodes:
    description:
      - Every node of the brief's pools in the inventory, whatever this run's limit. Each one that was not tested is
        listed under C(not_accepted) with the reason, and a run whose measured nodes all passed is then C(partial),
        never C(pass).
    type: list
    elements: str
    default: []
  run_nodes:
    description: The hosts this run covered (the play's hosts within its C(--limit)); omitted - every host.
    type: list
    elements: str
  failed_earlier:
    description: Hosts of this run that failed or were unreachable in an earlier stage.
    type: list
    elements: str
    default: []
  excluded:
    description: Host -> why the caller left it out of this acceptance (e.g. the CLI's "unreachable in stage X").
    type: dict
    default: {}
  rdma_pairs:
    description:
      - Each pool's per-rail RDMA pairs record (P(gpufleet.cluster.rdma_pairs_judge#filter)), shown as the report's
        C(rdma_pairs) section; its violations come in I(violations). Each node's weakest port joins its history
        (C(rdma_port_min), Gb/s).
    type: list
    elements: dict
    default: []
  brief:
    description:
      - The topology brief. With it the report judges each node's single-node busbw, GPU-to-GPU copy and storage
        figures against its pool's median (C(NCCL_OUTLIER), C(P2P_OUTLIER), C(STORAGE_OUTLIER),
        C(acceptance.outliers)) and sets the provider's C(quote) beside the brief and the measurement
        (C(QUOTE_DIFFERS)), and each node against its own history (C(NODE_DEGRADED), C(acceptance.history),
        C(acceptance.valid_days)); see docs/nccl-acceptance.md.
    type: dict
    default: {}
  fallback_dest:
    description:
      - Where the report goes when I(dest) cannot be written (a full or read-only disk); a warning says so. Default
        C(gpufleet-reports) in the system's temporary directory. When both fail, the task fails and returns the whole
        report as C(report).
    type: path
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.attributes
attributes:
  check_mode:
    details: In check mode the report is built and its verdict returned; nothing is written.
seealso:
  - name: NCCL acceptance
    description: Gate rules, bisect and the report's layout (docs/nccl-acceptance.md, docs/acceptance-role.md).
    link: https://example.invalid/gpufleet/docs/nccl-acceptance.md
"""

EXAMPLES = r"""
- name: Write the acceptance report on the controller
  gpufleet.cluster.acceptance_report:
    dest: "{{ playbook_dir }}/../reports"
    cluster: "{{ gpufleet_brief.cluster.name }}"
    runs: "{{ _runs }}"
    debug: "{{ _debug }}"
    nodes: "{{ _nodes }}"
    violations: "{{ _violations }}"
    bisect: "{{ _plan | default(omit) }}"
    drained: "{{ _drained }}"
    floors: "{{ gpufleet_brief.acceptance }}"
    versions: "{{ gpufleet_brief.software }}"
  delegate_to: localhost
  run_once: true
  register: __report
"""

RETURN = r"""
dir:
  description: The report's directory (in check mode, where it would be).
  returned: always
  type: str
  sample: reports/lab/20250101T120000Z
json:
  description: Path of C(acceptance.json).
  returned: always
  type: str
markdown:
  description: Path of C(acceptance.md).
  returned: always
  type: str
junit:
  description:
    - Path of C(junit.xml), the report as JUnit XML for CI systems - one test suite per node, one test case per
      check (its single-node run, each multi-node run it took part in, each other error naming it), failures with
      the violations' messages.
  returned: always
  type: str
plots:
  description: Paths of the PNG plots written.
  returned: always
  type: list
  elements: str
logs:
  description: Paths of the raw run outputs written.
  returned: always
  type: list
  elements: str
timestamp:
  description: The report's timestamp.
  returned: always
  type: str
verdict:
  description:
    - C(pass), C(fail), or C(partial) (every node measured passed, but a node of the brief was not accepted in this
      run, see C(not_accepted)).
  returned: always
  type: str
counts:
  description: C(errors), C(warnings) and C(runs).
  returned: always
  type: dict
errors:
  description: The error violations, each C({severity, code, host, field, message}).
  returned: always
  type: list
  elements: dict
failed_runs:
  description: Labels of the single-/multi-node runs that failed their gate.
  returned: always
  type: list
  elements: str
bad_nodes:
  description: Nodes named by an error violation, a failed single-node run, or drained.
  returned: always
  type: list
  elements: str
not_accepted:
  description: C({host, reason}) for each node of the brief this run did not test.
  returned: always
  type: list
  elements: dict
accepted:
  description:
    - The nodes this run accepted (a passing single-node run, no error, not drained; none when the verdict fails).
  returned: always
  type: list
  elements: str
valid_until:
  description:
    - The date (C(YYYY-MM-DD)) the acceptance of I(accepted) is valid until (the brief's C(acceptance.valid_days)).
  returned: always
  type: str
history:
  description: The history store the run's records were appended to (C(<dest>/<cluster>/history.jsonl)).
  returned: always
  type: str
fallback:
  description: Why the report is not under I(dest) (it is under I(fallback_dest)); null when it is.
  returned: always
  type: str
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.history import HistoryError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.outliers import OutlierError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.quote import QuoteError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.report import (
    add_history,
    build_report,
    not_accepted,
    slug,
    timestamp_now,
    write_report,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.atomic import write_atomic
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, violation
from ansible_collections.gpufleet.cluster.plugins.module_utils.storage.acceptance import (
    not_tested as storage_not_tested,
)

_RUN_KEYS = (
    "label",
    "scope",
    "host",
    "nodes",
    "floor_gbps",
    "limit_gbps",
    "run",
    "rc",
    "ended",
    "violations",
    "log",
    "p2p",
    "dcgm_diag",
    # all_gather / alltoall (acceptance/collectives.py); absent: all_reduce.
    "collective",
)


def merge_bisect(value) -> dict | None:
    """One plan for the report from a plan, a list of plans (one per pool) or nothing."""
    if not value:
        return None
    if isinstance(value, dict):
        return value
    plans = [p for p in value if isinstance(p, dict) and p]
    if not plans:
        return None
    if len(plans) == 1:
        return plans[0]
    merged: dict = {
        "done": all(p.get("done") for p in plans),
        "next": [],
        "slow_nodes": [],
        "slow_links": [],
        "slow_groups": [],
        "good_nodes": [],
        "inconclusive": all(p.get("inconclusive") for p in plans),
        "tests": [],
        "tests_run": 0,
    }
    reasons = []
    for p in plans:
        for key in ("slow_nodes", "slow_links", "slow_groups", "good_nodes", "tests"):
            merged[key].extend(p.get(key) or [])
        merged["tests_run"] += int(p.get("tests_run") or 0)
        label = f"{p['pool']}: " if p.get("pool") else ""
        reasons.append(f"{label}{p.get('reason', '')}")
    merged["reason"] = "; ".join(reasons)
    merged["plans"] = plans
    return merged


def plan_logs(records: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """Each record with ``log`` (``logs/<slug>.log``, relative) instead of ``output``; and the logs' texts."""
    cleaned: list[dict] = []
    texts: dict[str, str] = {}
    used: set[str] = set()
    for record in records:
        entry = {k: record.get(k) for k in _RUN_KEYS if k in record}
        output = record.get("output")
        if isinstance(output, str) and output:
            name = slug(str(record.get("label") or "run"))
            base, n = name, 2
            while name in used:
                name, n = f"{base}-{n}", n + 1
            used.add(name)
            rel = os.path.join("logs", f"{name}.log")
            texts[rel] = output if output.endswith("\n") else output + "\n"
            entry["log"] = rel
        cleaned.append(entry)
    return cleaned, texts


def write_all(dest: str, report: dict, logs: dict[str, str], plots: bool) -> dict:
    """The raw logs, then the report (JSON last but one, Markdown last), under ``dest``."""
    out_dir = os.path.join(dest, slug(report["cluster"]), report["timestamp"])
    for rel, text in logs.items():
        os.makedirs(os.path.dirname(os.path.join(out_dir, rel)), exist_ok=True)
        write_atomic(os.path.join(out_dir, rel), text)
    written = write_report(dest, report, plots=plots)
    written["logs"] = [os.path.join(out_dir, rel) for rel in logs]
    return written


def untested(expected: list[str], nodes: list[dict], runs: list[dict]) -> tuple[list[dict], list[dict]]:
    """Node rows and violations for expected nodes that have no record or no single-node run."""
    recorded = {n.get("host") for n in nodes}
    ran = {r.get("host") for r in runs if r.get("scope") == "single-node"}
    rows, violations = [], []
    for host in dict.fromkeys(expected):
        if host in recorded and host in ran:
            continue
        if host not in recorded:
            rows.append({"host": host, "status": "not tested", "versions": {}})
        violations.append(
            violation(
                "NCCL_NODE_NOT_TESTED",
                "pools[].group",
                f"expected a single-node run and a record of {host}, found "
                f"{'no record' if host not in recorded else 'no single-node run'} (unreachable, or its phase "
                "failed or was skipped); fix the node and run acceptance again",
                host,
            )
        )
    return rows, violations


def bad_nodes(report: dict) -> list[str]:
    hosts = {v["host"] for v in report.get("violations") or [] if v.get("severity") == ERROR and v.get("host")}
    hosts |= {e["host"] for e in report.get("runs") or [] if e.get("scope") == "single-node" and e["result"] == "fail"}
    hosts |= set(report.get("drained") or [])
    return sorted(h for h in hosts if h)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dest": {"type": "path", "required": True},
            "cluster": {"type": "str", "required": True},
            "timestamp": {"type": "str"},
            "runs": {"type": "list", "elements": "dict", "default": []},
            "debug": {"type": "list", "elements": "dict", "default": []},
            "nodes": {"type": "list", "elements": "dict", "default": []},
            "expected_nodes": {"type": "list", "elements": "str", "default": []},
            "violations": {"type": "list", "elements": "dict", "default": []},
            "bisect": {"type": "raw"},
            "drained": {"type": "list", "elements": "str", "default": []},
            "breaker": {"type": "dict"},
            "floors": {"type": "dict", "default": {}},
            "limits": {"type": "dict", "default": {}},
            "versions": {"type": "dict", "default": {}},
            "context": {"type": "dict", "default": {}},
            "plots": {"type": "bool", "default": True},
            "nccl": {"type": "bool", "default": True},
            "storage": {"type": "list", "elements": "dict", "default": []},
            "link_errors": {"type": "list", "elements": "dict", "default": []},
            "storage_expected": {"type": "list", "elements": "str", "default": []},
            "workload": {"type": "dict"},
            "brief_nodes": {"type": "list", "elements": "str", "default": []},
            "run_nodes": {"type": "list", "elements": "str"},
            "failed_earlier": {"type": "list", "elements": "str", "default": []},
            "excluded": {"type": "dict", "default": {}},
            "fallback_dest": {"type": "path"},
            "brief": {"type": "dict", "default": {}},
            "rdma_pairs": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    bisect = p["bisect"]
    if bisect is not None and not isinstance(bisect, (dict, list)):
        module.fail_json(msg=f"bisect must be a plan (dict) or a list of plans, got {type(bisect).__name__}")
    for i, v in enumerate(p["violations"]):
        missing = {"severity", "code", "message"} - set(v)
        if missing:
            module.fail_json(msg=f"violations[{i}] lacks {', '.join(sorted(missing))}: {v!r}")
    stamp = p["timestamp"] or timestamp_now()
    out_dir = os.path.join(p["dest"], slug(p["cluster"]), stamp)
    runs, log_texts = plan_logs(p["runs"])
    missing_rows, missing = untested(p["expected_nodes"], p["nodes"], runs) if p["nccl"] else ([], [])
    # Storage and workload: their violations join the verdict.
    storage = p["storage"]
    missing += [v for r in storage for v in r.get("violations") or []]
    missing += storage_not_tested(p["storage_expected"], storage)
    missing += list((p["workload"] or {}).get("violations") or [])
    flagged = {v.get("host") for v in p["violations"] if v.get("severity") == ERROR}
    drained = set(p["drained"])
    nodes = [
        n
        if n.get("status")
        else dict(n, status="drained" if n.get("host") in drained else ("fail" if n.get("host") in flagged else "pass"))
        for n in p["nodes"]
    ]
    try:
        report = build_report(
            p["cluster"],
            runs=runs,
            debug=p["debug"],
            nodes=[*nodes, *missing_rows],
            violations=[*p["violations"], *missing],
            bisect=merge_bisect(bisect),
            drained=p["drained"],
            floors=p["floors"],
            limits=p["limits"],
            versions=p["versions"],
            timestamp=stamp,
            storage=storage,
            workload=p["workload"],
            nccl=p["nccl"],
            not_accepted=not_accepted(
                p["brief_nodes"],
                tested=p["expected_nodes"],
                run_nodes=p["run_nodes"],
                failed_earlier=p["failed_earlier"],
                excluded=p["excluded"],
            ),
            brief=p["brief"],
            link_errors=p["link_errors"],
            rdma_pairs=p["rdma_pairs"],
        )
        # Each node against its own history (reports/<cluster>/history.jsonl): trends, NODE_DEGRADED,
        # and the date the nodes accepted here are valid until.
        store = history.store_path(p["dest"], p["cluster"])
        past, store_warnings = history.read(store)
        for w in store_warnings:
            module.warn(w)
        records = add_history(report, past, p["brief"])
    except (QuoteError, OutlierError, HistoryError) as exc:
        # The brief's quote, outlier or history settings are wrong: say which field, what was expected and found.
        module.fail_json(msg=f"brief: {exc}")
    if p["context"]:
        report["context"] = p["context"]
    # Whether the drain breaker let this run drain (null: the drain step did not run).
    report["breaker"] = p["breaker"]
    result = {
        "changed": True,
        "dir": out_dir,
        "json": os.path.join(out_dir, "acceptance.json"),
        "markdown": os.path.join(out_dir, "acceptance.md"),
        "junit": os.path.join(out_dir, "junit.xml"),
        "plots": [],
        "logs": [os.path.join(out_dir, rel) for rel in log_texts],
        "timestamp": stamp,
        "verdict": report["verdict"],
        "counts": report["counts"],
        "errors": [v for v in report["violations"] if v.get("severity") == ERROR],
        "failed_runs": [e["label"] for e in report["runs"] if e["scope"] != "bisect" and e["result"] == "fail"],
        "bad_nodes": bad_nodes(report),
        "not_accepted": report["not_accepted"],
        "accepted": report["history"]["accepted"],
        "valid_until": report["history"]["valid_until"],
        "history": store,
        "fallback": None,
    }
    if not module.check_mode:
        # A report that cannot be written where it belongs (a full or read-only disk) is written
        # in the fallback directory instead, with a warning; when that fails too, the whole report
        # is returned in the result (the run's log keeps it) and the task fails with both causes.
        fallback = p["fallback_dest"] or os.path.join(tempfile.gettempdir(), "gpufleet-reports")
        try:
            written = write_all(p["dest"], report, log_texts, p["plots"])
        except OSError as exc:
            try:
                written = write_all(fallback, report, log_texts, p["plots"])
            except OSError as exc2:
                module.fail_json(
                    msg=f"cannot write the acceptance report (verdict {report['verdict']}) under {out_dir} ({exc}) "
                    f"nor under {fallback} ({exc2}); the whole report is in this result's 'report'",
                    report=report,
                    **result,
                )
            result["fallback"] = f"{out_dir}: {exc}"
            module.warn(
                f"cannot write the acceptance report under {out_dir} ({exc}): written under {written['dir']} "
                "instead; free space there and move it back"
            )
        # The history is appended after the report is written: a run that could not write its report
        # keeps no record. A store that cannot be written (a full disk) warns; the verdict stands.
        try:
            history.append(store, records)
        except OSError as exc:
            module.warn(
                f"cannot append this run's {len(records)} record(s) to {store} ({exc}): the nodes' history lacks it"
            )
        result.update(
            dir=written["dir"],
            json=written["json"],
            markdown=written["markdown"],
            junit=written["junit"],
            plots=written["plots"],
            logs=written["logs"],
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
