"""When ``gpufleet provision`` may keep the last passing acceptance instead of measuring again.

Measuring takes every GPU node out of service for minutes (NCCL all_reduce on each node and across
the pool, storage, a training job). A provision re-run on a cluster in service that changed nothing
would take the GPUs from users' jobs only to measure what was measured before. So after a provision
run whose acceptance passed, the CLI writes a record (``.cache/acceptance/``) of what was accepted:

- the fingerprint of the inputs: every file of the inventory (hosts, group_vars, host_vars), the
  brief, the ``-e`` arguments (and the files ``-e @file`` names), and gpufleet's own playbooks,
  roles, collection and ansible.cfg;
- per GPU node, the identity of the hardware the gate saw just before the measurement: GPU UUIDs,
  bus IDs, models and memory, the driver and every pinned package's version, the kernel, the RDMA
  ports (GUIDs, firmware, state, rate), the NVMe devices;
- the acceptance report it refers to, and when.

A later provision run (no --check, --limit, --tags, --skip-tags, --reaccept or --flush-cache) first
runs every stage up to and including the hardware gate, and keeps the record's acceptance only when
all of this holds; otherwise it measures:

1. that run changed nothing and failed nothing on any host;
2. the fingerprint of the inputs is the record's;
3. the record's report is still there, passed, and no acceptance report of the cluster is newer
   (a later acceptance run, passing or failing, by any means, is the one that counts);
4. this run's hardware gate passed on the same GPU nodes as the record's, with the same identity;
5. the record is younger than the maximum age (``--accept-max-age``, hours).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import time

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.atomic import write_atomic
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.bounded import InputError, read_regular_file

from .common import ROOT
from .reports import try_load_json

RECORD_DIR = os.path.join(ROOT, ".cache", "acceptance")
SCHEMA = 1
DEFAULT_MAX_AGE_H = 168.0
# gpufleet's own code: a change to any of it may change what is installed or how it is measured.
CODE_PATHS = ("ansible.cfg", "playbooks", "roles", os.path.join("collections", "ansible_collections", "gpufleet"))
_SKIP_DIRS = {"__pycache__", "tests", ".pytest_cache"}


def _hash_files(paths: list[str], base: str, digest) -> None:
    """Feed each regular file (relative name and content) under ``paths`` into ``digest``, in a fixed order."""
    files: list[str] = []
    for path in paths:
        if os.path.isfile(path):
            files.append(path)
            continue
        for top, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")]
            files += [
                os.path.join(top, n) for n in names if not n.startswith(".") and not n.endswith((".pyc", ".retry"))
            ]
    for path in sorted(set(files)):
        digest.update(os.path.relpath(path, base).encode() + b"\0")
        try:
            digest.update(read_regular_file(path, "an inventory file"))
        except InputError as exc:  # a FIFO or device is never read: it would block or never end
            digest.update(f"unreadable: {exc}".encode())
        digest.update(b"\0")


def brief_path(inventory: str, brief: str | None = None) -> str:
    """The brief a run reads (--brief, $GPUFLEET_BRIEF, else brief.yml beside the inventory)."""
    path = brief or os.environ.get("GPUFLEET_BRIEF") or ""
    if path:
        return os.path.abspath(path)
    inv = os.path.abspath(inventory)
    return os.path.join(inv if os.path.isdir(inv) else os.path.dirname(inv), "brief.yml")


def fingerprint(inventory: str, brief: str | None, extra_vars: list[str], root: str = ROOT) -> dict[str, str]:
    """SHA-256 of each input of a run: the inventory, the brief, the -e arguments, gpufleet's code."""
    inv = os.path.abspath(inventory)
    parts: dict[str, str] = {}
    d = hashlib.sha256()
    if os.path.isdir(inv):
        _hash_files([inv], inv, d)
    else:  # an inventory file: Ansible also reads the group_vars/ and host_vars/ beside it
        base = os.path.dirname(inv)
        _hash_files([inv, os.path.join(base, "group_vars"), os.path.join(base, "host_vars")], base, d)
    parts["inventory"] = d.hexdigest()
    d = hashlib.sha256()
    bp = brief_path(inventory, brief)
    _hash_files([bp], os.path.dirname(bp), d)
    parts["brief"] = d.hexdigest()
    d = hashlib.sha256()
    for ev in extra_vars:
        d.update(ev.encode() + b"\0")
        if ev.startswith("@"):
            _hash_files([os.path.abspath(ev[1:])], os.path.dirname(os.path.abspath(ev[1:])), d)
    parts["extra_vars"] = d.hexdigest()
    d = hashlib.sha256()
    _hash_files([os.path.join(root, p) for p in CODE_PATHS], root, d)
    parts["code"] = d.hexdigest()
    return parts


def hardware_identity(facts: dict) -> str:
    """A digest of what a node's acceptance depends on and a no-op run would not change by itself."""
    facts = facts if isinstance(facts, dict) else {}
    gpus = [
        {k: g.get(k) for k in ("uuid", "bus_id", "name", "memory_mib", "driver_version")}
        for g in facts.get("gpus") or []
        if isinstance(g, dict)
    ]
    ports = [
        {
            k: p.get(k)
            for k in ("device", "port", "node_guid", "fw_ver", "link_layer", "state", "phys_state", "rate_gbps")
        }
        for p in (facts.get("rdma") or {}).get("ports") or []
        if isinstance(p, dict)
    ]
    ident = {
        "gpus": gpus,
        "gpu_count": facts.get("gpu_count"),
        "packages": facts.get("packages"),
        "kernel": facts.get("kernel"),
        "rdma_ports": ports,
        "nvme": facts.get("nvme"),
        "fabric_manager": facts.get("fabric_manager"),
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


def read_gate(gate_dir: str | None) -> tuple[dict[str, str], list[str]]:
    """({host: hardware identity} of the passing records, [problems]) of one hardware gate run."""
    if not gate_dir:
        return {}, ["this run wrote no hardware gate records"]
    hosts: dict[str, str] = {}
    problems: list[str] = []
    for path in sorted(glob.glob(os.path.join(gate_dir, "*.json"))):
        rec, error = try_load_json(path)
        if error:
            problems.append(f"gate record {os.path.basename(path)} is unreadable")
            continue
        if not isinstance(rec, dict):
            problems.append(f"gate record {os.path.basename(path)} is not a record")
            continue
        host = str(rec.get("host") or os.path.splitext(os.path.basename(path))[0])
        if rec.get("status") != "pass":
            problems.append(f"the hardware gate did not pass on {host}")
            continue
        hosts[host] = hardware_identity(rec.get("facts") or {})
    if not hosts and not problems:
        problems.append("this run wrote no hardware gate records")
    return hosts, problems


def record_path(inventory: str, record_dir: str | None = None) -> str:
    """``.cache/acceptance/<inventory's name>-<digest of its absolute path>.json``."""
    record_dir = record_dir or RECORD_DIR
    inv = os.path.abspath(inventory)
    key = hashlib.sha256(inv.encode()).hexdigest()[:16]
    name = os.path.basename(inv.rstrip(os.sep)) or "inventory"
    return os.path.join(record_dir, f"{name}-{key}.json")


def load(inventory: str, record_dir: str | None = None) -> dict | None:
    rec, _error = try_load_json(record_path(inventory, record_dir))
    return rec if isinstance(rec, dict) and rec.get("schema") == SCHEMA else None


def save(
    inventory: str,
    fp: dict[str, str],
    hosts: dict[str, str],
    report: str,
    now: float | None = None,
    record_dir: str | None = None,
) -> str:
    """Write the record of a passing acceptance (atomically); return its path."""
    path = record_path(inventory, record_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rec = {
        "schema": SCHEMA,
        "inventory": os.path.abspath(inventory),
        "accepted_at": time.time() if now is None else now,
        "report": os.path.abspath(report),
        "fingerprint": fp,
        "hosts": hosts,
    }
    write_atomic(path, json.dumps(rec, indent=2, sort_keys=True) + "\n")
    return path


def forget(inventory: str, record_dir: str | None = None) -> bool:
    """Remove the record of ``inventory``; True when there was one."""
    try:
        os.remove(record_path(inventory, record_dir))
    except FileNotFoundError:
        return False
    return True


def newest_report(reports: str, cluster: str | None, since: float = 0.0) -> str | None:
    """The newest `<reports>/<cluster>/<stamp>/acceptance.json` written at or after `since` (any cluster: None)."""
    found = [
        (os.path.getmtime(p), p)
        for p in glob.glob(os.path.join(reports, cluster or "*", "*", "acceptance.json"))
        if os.path.getmtime(p) >= since - 1
    ]
    return max(found)[1] if found else None


def report_verdict(path: str) -> str | None:
    data, _error = try_load_json(path)
    return str(data.get("verdict")) if isinstance(data, dict) else None


_FP_NAMES = {
    "inventory": "the inventory",
    "brief": "the brief",
    "extra_vars": "the -e arguments",
    "code": "gpufleet's playbooks, roles or plugins",
}


def why_not_reuse(
    record: dict | None,
    fp: dict[str, str],
    gate_hosts: dict[str, str],
    gate_problems: list[str],
    reports: str,
    cluster: str | None,
    max_age_h: float,
    now: float | None = None,
) -> str | None:
    """None when the record's acceptance still holds for this run, else why it does not (one sentence).

    The caller has checked that this run changed and failed nothing (condition 1 of the module's list).
    """
    now = time.time() if now is None else now
    if max_age_h <= 0:
        return "--accept-max-age 0 never reuses an acceptance"
    if record is None:
        return "no passing acceptance of this inventory on record"
    changed = [name for key, name in _FP_NAMES.items() if (record.get("fingerprint") or {}).get(key) != fp.get(key)]
    if changed:
        return f"{' and '.join(changed)} changed since the last passing acceptance"
    report = str(record.get("report") or "")
    if report_verdict(report) != "pass":
        return f"the last passing acceptance's report {report} is gone or no longer a pass"
    newest = newest_report(reports, cluster)
    if newest and os.path.abspath(newest) != os.path.abspath(report):
        return f"a later acceptance ran ({newest})"
    if gate_problems:
        return gate_problems[0]
    accepted = record.get("hosts") or {}
    if sorted(accepted) != sorted(gate_hosts):
        return (
            f"the hardware gate saw nodes {', '.join(sorted(gate_hosts)) or 'none'}, the acceptance measured "
            f"{', '.join(sorted(accepted)) or 'none'}"
        )
    moved = sorted(h for h in gate_hosts if accepted.get(h) != gate_hosts[h])
    if moved:
        return f"the hardware of {', '.join(moved)} is not what was measured (GPUs, packages, kernel or RDMA ports)"
    try:
        age_h = (now - float(record.get("accepted_at"))) / 3600
    except (TypeError, ValueError):
        return "the record has no time"
    if age_h > max_age_h or age_h < -1:
        return f"the last passing acceptance is {age_h:.1f} h old (--accept-max-age {max_age_h:g})"
    return None
