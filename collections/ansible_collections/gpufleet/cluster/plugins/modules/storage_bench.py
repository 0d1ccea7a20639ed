#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: storage_bench
short_description: Measure a node's scratch, shared mounts and a checkpoint round trip (storage acceptance)
version_added: 0.1.0
description:
  - Runs on a GPU node. For the local scratch and each shared mount, a sequential write then read with fio
    (C(--output-format=json), parsed by C(module_utils/storage/acceptance.py)) in a directory of its own
    (C(<path>/.gpufleet-acceptance-<host>)), removed afterwards.
  - The scratch is measured whether a device is mounted there or not; the record says which (C(note)). A
    shared mount is measured only when it is mounted; first access (an automount) is bounded by
    I(probe_timeout), so an absent file server is reported C(not mounted), never waited on.
  - Then a checkpoint round trip in I(checkpoint_dir) - random data written and fsynced, caches dropped where
    permitted (C(/proc/sys/vm/drop_caches) is read-only in containers; the file's own pages are evicted with
    C(posix_fadvise(DONTNEED)) anyway, and the record says which happened), read back, sha256 compared, both
    directions timed.
  - It judges nothing; the filter P(gpufleet.cluster.storage_evaluate#filter) compares the record with the
    brief's C(acceptance.storage).
options:
  host:
    description: The node's inventory name (named in the record and the directory names).
    type: str
    required: true
  scratch_path:
    description: The local scratch (the brief's C(storage.scratch.path)); empty to skip it.
    type: str
    default: /scratch/local
  shared:
    description: Shared mounts to measure, each C({path, index}) (index in the brief's C(storage.shared)).
    type: list
    elements: dict
    default: []
  checkpoint_dir:
    description: Where the checkpoint round trip writes; empty to skip it.
    type: str
    default: ""
  checkpoint_size_bytes:
    description: Bytes of the checkpoint.
    type: int
    default: 4294967296
  drop_caches:
    description: The kernel's drop_caches file (written C(3) after a sync); empty not to try.
    type: str
    default: /proc/sys/vm/drop_caches
  fio:
    description: fio's path.
    type: str
    default: fio
  fio_size:
    description: Bytes each fio job writes, fio's syntax (C(8G), C(64M)).
    type: str
    default: 8G
  fio_numjobs:
    description: Parallel fio jobs (files).
    type: int
    default: 4
  fio_block_size:
    description: fio's block size.
    type: str
    default: 1M
  fio_iodepth:
    description: fio's queue depth.
    type: int
    default: 32
  fio_ioengine:
    description: fio's I/O engine.
    type: str
    default: libaio
  fio_direct:
    description:
      - O_DIRECT (bypass the page cache). A file system that refuses it is measured with buffered I/O (the write
        ends with an fsync, the read starts with the cache invalidated) and the record says so.
    type: bool
    default: true
  fio_runtime_s:
    description: fio's C(--runtime) of each pass, a cap (a pass ends when its size is done or at this time).
    type: int
    default: 60
  timeout_s:
    description: Seconds one fio pass may take before it is killed (timeout(1)).
    type: int
    default: 600
  probe_timeout_s:
    description: Seconds the first access of a path (an automount, an NFS server) may take.
    type: int
    default: 20
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.attributes
attributes:
  check_mode:
    details: In check mode nothing is written or measured; the record says so (C(skipped)).
"""

EXAMPLES = r"""
- name: Measure the node's storage
  gpufleet.cluster.storage_bench:
    host: "{{ inventory_hostname }}"
    scratch_path: /scratch/local
    shared: [{path: /shared/ckpt, index: 0}]
    checkpoint_dir: /shared/ckpt/tenants/research
    checkpoint_size_bytes: "{{ 4 * 1024 ** 3 }}"
  register: __bench
"""

RETURN = r"""
record:
  description:
    - C(host); C(targets), one per path - C(kind) (scratch or shared), C(index), C(path), C(status) (measured,
      not configured, not mounted, missing, no space, failed, skipped), C(note), C(mount) (findmnt's target,
      source, fstype), C(direct), C(write) and C(read) (fio's figures, C(gbps) in 1e9 bytes/s); C(checkpoint)
      (C(directory), C(path), C(size_bytes), C(write_s), C(read_s), C(write_gbps), C(read_gbps),
      C(sha256_written), C(sha256_read), C(verified), C(caches_dropped), C(fadvise), C(caches_note), C(status),
      C(note)); C(fio_version); C(skipped) in check mode.
  returned: always
  type: dict
"""

import json
import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.storage.acceptance import (
    MEASURED,
    checkpoint_roundtrip,
    fio_argv,
    parse_fio,
    size_bytes,
)

_TIMED_OUT = (124, 137)


def probe(run, path: str, timeout_s: int) -> dict:
    """Reach ``path`` within ``timeout_s`` (an automount mounts on first access), then read its mount.

    ``{"state": "ok"|"missing"|"timeout"|"error", "note", "mount": {target, source, fstype} | None}``.
    """
    rc, out, err = run(["timeout", "-k", "2", str(timeout_s), "stat", "-c", "%F", path.rstrip("/") + "/."])
    if rc in _TIMED_OUT:
        return {"state": "timeout", "note": f"no answer within {timeout_s} s (file server down?)", "mount": None}
    if rc != 0:
        msg = (err or out).strip().splitlines()
        text = msg[-1] if msg else f"stat exited {rc}"
        state = "missing" if "No such file" in text or "Not a directory" in text else "error"
        return {"state": state, "note": text, "mount": None}
    rc, out, err = run(
        ["timeout", "-k", "2", str(timeout_s), "findmnt", "-J", "-o", "TARGET,SOURCE,FSTYPE", "-T", path]
    )
    mount = None
    if rc == 0:
        try:
            fs = (json.loads(out).get("filesystems") or [{}])[0]
            mount = {k: fs.get(k) for k in ("target", "source", "fstype")}
        except (ValueError, AttributeError, IndexError):
            mount = None
    return {"state": "ok", "note": "", "mount": mount}


def _free(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def measure(run, target: dict, params: dict) -> dict:
    """fio write then read in ``<path>/.gpufleet-acceptance-<host>`` (removed afterwards)."""
    path = target["path"]
    work = os.path.join(path, f".gpufleet-acceptance-{params['host']}")
    need = size_bytes(params["fio_size"]) * params["fio_numjobs"]
    try:
        os.makedirs(work, mode=0o700, exist_ok=True)
    except OSError as exc:
        return dict(target, status="failed", note=f"cannot create {work}: {exc.strerror or exc}")
    try:
        free = _free(work)
        target["free_bytes"] = free
        if free < need * 1.05:
            return dict(target, status="no space", note=f"fio needs {need} bytes, {free} free in {path}")
        direct = params["fio_direct"]
        notes = []

        def one(direction: str, direct_io: bool) -> tuple[dict, str]:
            argv = fio_argv(
                work,
                direction,
                size=params["fio_size"],
                numjobs=params["fio_numjobs"],
                block_size=params["fio_block_size"],
                iodepth=params["fio_iodepth"],
                ioengine=params["fio_ioengine"],
                direct=direct_io,
                runtime_s=params["fio_runtime_s"],
                fio=params["fio"],
            )
            rc, out, err = run(["timeout", "-k", "10", str(params["timeout_s"]), *argv])
            parsed = parse_fio(out, direction)
            if rc in _TIMED_OUT:
                parsed.update(ok=False, error=f"fio {direction} killed after {params['timeout_s']} s")
            elif rc != 0 and parsed["ok"]:
                parsed.update(ok=False, error=f"fio exited {rc}: {(err or '').strip()[-300:]}")
            elif not parsed["ok"] and err.strip():
                parsed["error"] = f"{parsed['error']}; {err.strip()[-300:]}"
            return parsed, out

        write, _ = one("write", direct)
        if not write["ok"] and direct:
            notes.append(f"O_DIRECT refused ({write['error']}): buffered I/O, fsync at the end, cache invalidated")
            for name in os.listdir(work):
                os.unlink(os.path.join(work, name))
            direct = False
            write, _ = one("write", False)
        read, _ = one("read", direct) if write["ok"] else ({"ok": False, "error": "not run: the write failed"}, "")
        mount = target.get("mount") or {}
        if target["kind"] == "scratch" and mount.get("target") != os.path.normpath(path):
            where = " ".join(x for x in (mount.get("fstype"), mount.get("source")) if x) or "?"
            notes.insert(0, f"no device mounted at {path}: a directory on {mount.get('target') or '?'} ({where})")
        elif mount:
            notes.insert(0, f"{mount.get('fstype')} {mount.get('source')}")
        return dict(
            target,
            status=MEASURED,
            direct=direct,
            write=write,
            read=read,
            fio_version=write.get("version"),
            note="; ".join(notes),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def target_of(run, kind: str, path: str, index: int, params: dict) -> dict:
    target = {"kind": kind, "index": index, "path": path, "status": None, "note": "", "mount": None}
    found = probe(run, path, params["probe_timeout_s"])
    target["mount"] = found["mount"]
    if found["state"] == "timeout":
        return dict(target, status="not mounted", note=found["note"])
    if found["state"] != "ok":
        if kind == "shared":
            return dict(target, status="not mounted", note=f"{path}: {found['note']}")
        return dict(target, status="missing", note=f"{found['note']} (run playbooks/storage.yml)")
    mount = found["mount"] or {}
    if kind == "shared" and (mount.get("target") != os.path.normpath(path) or mount.get("fstype") == "autofs"):
        return dict(
            target,
            status="not mounted",
            note=f"{path} is a directory on {mount.get('target') or '?'} ({mount.get('fstype') or '?'}), not a mount",
        )
    return measure(run, target, params)


def checkpoint(run, params: dict) -> dict:
    directory = params["checkpoint_dir"]
    size = params["checkpoint_size_bytes"]
    rec = {"directory": directory, "size_bytes": size, "status": None, "note": ""}
    found = probe(run, directory, params["probe_timeout_s"])
    if found["state"] == "timeout":
        return dict(rec, status="not mounted", note=found["note"])
    if found["state"] != "ok":
        return dict(rec, status="missing", note=found["note"])
    free = _free(directory)
    if free < size * 1.05:
        return dict(rec, status="no space", note=f"the checkpoint needs {size} bytes, {free} free in {directory}")
    try:
        result = checkpoint_roundtrip(
            directory,
            size,
            name=f".gpufleet-acceptance-{params['host']}.ckpt",
            drop_caches=params["drop_caches"] or None,
        )
    except OSError as exc:
        return dict(rec, status="failed", note=f"{exc.filename or directory}: {exc.strerror or exc}")
    mount = found["mount"] or {}
    return dict(
        rec,
        **result,
        status=MEASURED,
        mount=mount,
        note=result["caches_note"],
    )


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "scratch_path": {"type": "str", "default": "/scratch/local"},
            "shared": {"type": "list", "elements": "dict", "default": []},
            "checkpoint_dir": {"type": "str", "default": ""},
            "checkpoint_size_bytes": {"type": "int", "default": 4 << 30},
            "drop_caches": {"type": "str", "default": "/proc/sys/vm/drop_caches"},
            "fio": {"type": "str", "default": "fio"},
            "fio_size": {"type": "str", "default": "8G"},
            "fio_numjobs": {"type": "int", "default": 4},
            "fio_block_size": {"type": "str", "default": "1M"},
            "fio_iodepth": {"type": "int", "default": 32},
            "fio_ioengine": {"type": "str", "default": "libaio"},
            "fio_direct": {"type": "bool", "default": True},
            "fio_runtime_s": {"type": "int", "default": 60},
            "timeout_s": {"type": "int", "default": 600},
            "probe_timeout_s": {"type": "int", "default": 20},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        size_bytes(p["fio_size"])
    except ValueError as exc:
        module.fail_json(msg=f"fio_size: {exc}")
    if p["checkpoint_size_bytes"] <= 0:
        module.fail_json(msg=f"checkpoint_size_bytes must be > 0, got {p['checkpoint_size_bytes']}")
    for i, m in enumerate(p["shared"]):
        if not isinstance(m.get("path"), str) or not m["path"].startswith("/"):
            module.fail_json(msg=f"shared[{i}]: expected {{path: /absolute/path, index: N}}, got {m!r}")

    record: dict = {"host": p["host"], "targets": [], "checkpoint": None}
    if module.check_mode:
        record["skipped"] = "check mode: nothing written or measured"
        module.exit_json(changed=False, record=record)

    def run(argv):
        return module.run_command(argv, check_rc=False)

    if p["scratch_path"]:
        record["targets"].append(target_of(run, "scratch", p["scratch_path"], 0, p))
    for i, m in enumerate(p["shared"]):
        record["targets"].append(target_of(run, "shared", m["path"], int(m.get("index", i)), p))
    if p["checkpoint_dir"]:
        record["checkpoint"] = checkpoint(run, p)
    versions = [t.get("fio_version") for t in record["targets"] if t.get("fio_version")]
    record["fio_version"] = versions[0] if versions else None
    # Everything written is removed again: a measurement, not a change.
    module.exit_json(changed=False, record=record)


if __name__ == "__main__":
    main()
