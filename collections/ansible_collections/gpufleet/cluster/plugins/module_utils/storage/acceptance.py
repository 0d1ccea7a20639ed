# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Storage acceptance: fio's JSON, the checkpoint round trip, the judgement against the floors.

* :func:`parse_fio` - ``fio --output-format=json`` of one sequential job (write or read) -> bytes,
  seconds, GB/s (decimal, 1e9 bytes/s: the unit of ``acceptance.storage``), errors.
* :func:`fio_argv` - the fio command line of the write and read passes.
* :func:`checkpoint_roundtrip` - write N bytes of random data, fsync, drop the caches where permitted,
  read them back, compare sha256, time both (the module ``storage_bench`` runs it on the node).
* :func:`evaluate` - one node's record against ``acceptance.storage``: a violation per floor missed
  (host, what, floor, measured), a checksum mismatch, a failed measurement, a shared mount not mounted.
  A floor the brief does not set is measured only, never judged.

Standard library only: the module runs this on the nodes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Mapping, Sequence

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, violation

GB = 1e9
GIB = 1 << 30
# fio's own size suffixes are powers of 1024 (kb_base=1024, its default).
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}

# Which floor judges which measurement: (target kind, direction) -> acceptance.storage key.
FLOOR_KEYS = {
    ("scratch", "write"): "scratch_write_gbps",
    ("scratch", "read"): "scratch_read_gbps",
    ("shared", "write"): "shared_write_gbps",
    ("shared", "read"): "shared_read_gbps",
}
MEASURED = "measured"
STATUSES = (MEASURED, "not configured", "not mounted", "missing", "no space", "failed", "skipped")


def size_bytes(value) -> int:
    """``64M`` / ``8G`` / ``1.5g`` / ``4096`` -> bytes (1024-based, like fio)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 8G, found {value!r}")
    if isinstance(value, int | float):
        return int(value)
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ValueError(f"expected a size such as 64M or 8G, found {value!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


# --- fio --------------------------------------------------------------------------------------------


def _json_start(text: str) -> int:
    """Index of the JSON object in fio's output (it may print notes such as 'note: both iodepth ...' first)."""
    for m in re.finditer(r"^\{", text, re.MULTILINE):
        return m.start()
    return -1


def parse_fio(text: str, direction: str) -> dict:
    """One fio run (``--output-format=json``, ``--group_reporting`` or not) -> its figures for ``direction``.

    Returns ``{"ok", "error", "version", "jobs", "bytes", "runtime_s", "bw_bytes", "gbps", "iops",
    "lat_mean_ms", "options"}``; ``ok`` is False (and ``error`` says why) when there is no JSON, a job
    reports an error, or nothing was transferred.
    """
    if direction not in ("read", "write"):
        raise ValueError(f"direction must be read or write, got {direction!r}")
    out = {
        "ok": False,
        "error": None,
        "version": None,
        "jobs": 0,
        "bytes": 0,
        "runtime_s": None,
        "bw_bytes": None,
        "gbps": None,
        "iops": None,
        "lat_mean_ms": None,
        "options": {},
    }
    text = text or ""
    start = _json_start(text)
    if start < 0:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        out["error"] = "fio printed no JSON" + (f": {' / '.join(lines[-3:])[:300]}" if lines else " (no output)")
        return out
    try:
        data, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as exc:
        out["error"] = f"fio's JSON does not parse: {exc}"
        return out
    jobs = [j for j in data.get("jobs") or [] if isinstance(j, dict)]
    out["version"] = data.get("fio version")
    out["jobs"] = len(jobs)
    if not jobs:
        out["error"] = "fio's JSON holds no job"
        return out
    errors = [f"{j.get('jobname', '?')}: error {j.get('error')}" for j in jobs if j.get("error")]
    total_bytes = 0
    bw = 0.0
    iops = 0.0
    runtime_ms = 0
    lat_weighted = 0.0
    for job in jobs:
        part = job.get(direction) or {}
        total_bytes += int(part.get("io_bytes") or 0)
        bw += float(part.get("bw_bytes") or 0)
        iops += float(part.get("iops") or 0)
        runtime_ms = max(runtime_ms, int(part.get("runtime") or 0))
        lat = (part.get("lat_ns") or part.get("clat_ns") or {}).get("mean")
        if lat:
            lat_weighted += float(lat) * int(part.get("io_bytes") or 0)
    out["options"] = dict(jobs[0].get("job options") or {})
    out["bytes"] = total_bytes
    out["runtime_s"] = runtime_ms / 1000 if runtime_ms else None
    out["bw_bytes"] = bw
    out["gbps"] = bw / GB
    out["iops"] = iops
    out["lat_mean_ms"] = (lat_weighted / total_bytes / 1e6) if total_bytes and lat_weighted else None
    if errors:
        out["error"] = "fio job failed: " + "; ".join(errors)
    elif total_bytes <= 0 or bw <= 0:
        out["error"] = f"fio transferred nothing ({direction}: {total_bytes} bytes)"
    else:
        out["ok"] = True
    return out


def fio_argv(
    directory: str,
    direction: str,
    *,
    size: str = "8G",
    numjobs: int = 4,
    block_size: str = "1M",
    iodepth: int = 32,
    ioengine: str = "libaio",
    direct: bool = True,
    runtime_s: int = 60,
    fio: str = "fio",
    name: str = "gpufleet-seq",
) -> list[str]:
    """fio's argv for a sequential ``write`` (ending with an fsync) or ``read`` of the same files.

    Both passes use the same job name, so the read pass reads the files the write pass wrote
    (``<name>.<job>.0``). fio invalidates the file's page cache before each job (``invalidate=1``), so
    a buffered read is not served from the cache the write filled.
    """
    if direction not in ("read", "write"):
        raise ValueError(f"direction must be read or write, got {direction!r}")
    argv = [
        fio,
        f"--name={name}",
        f"--directory={directory}",
        f"--rw={direction}",
        f"--bs={block_size}",
        f"--size={size}",
        f"--numjobs={int(numjobs)}",
        f"--iodepth={int(iodepth)}",
        f"--ioengine={ioengine}",
        f"--direct={1 if direct else 0}",
        "--invalidate=1",
        "--group_reporting",
        f"--runtime={int(runtime_s)}",
        "--output-format=json",
    ]
    if direction == "write":
        argv.insert(-1, "--end_fsync=1")
    return argv


# --- the checkpoint round trip ------------------------------------------------------------------------


def _drop_caches(path: str, drop_caches: str | None) -> dict:
    """Evict the file's pages: posix_fadvise(DONTNEED) on the file (any user), then the kernel's caches."""
    result = {"fadvise": False, "dropped": False, "note": ""}
    notes = []
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            result["fadvise"] = True
        finally:
            os.close(fd)
    except (OSError, AttributeError) as exc:
        notes.append(f"posix_fadvise failed ({exc})")
    if drop_caches:
        try:
            os.sync()
            with open(drop_caches, "w", encoding="ascii") as fh:
                fh.write("3\n")
            result["dropped"] = True
        except OSError as exc:
            notes.append(f"caches not dropped: {drop_caches}: {exc.strerror or exc}")
    else:
        notes.append("caches not dropped (not asked)")
    if result["fadvise"] and not result["dropped"]:
        notes.append("the checkpoint's own pages were evicted with posix_fadvise(DONTNEED)")
    result["note"] = "; ".join(notes)
    return result


def checkpoint_roundtrip(
    directory: str,
    size: int,
    *,
    name: str = ".gpufleet-acceptance.ckpt",
    chunk: int = 16 << 20,
    drop_caches: str | None = "/proc/sys/vm/drop_caches",
    keep: bool = False,
) -> dict:
    """Write ``size`` bytes of random data to ``directory/name``, fsync, drop caches, read back, verify.

    Timed: the writes plus the fsync (``write_s``), and the reads (``read_s``, the restore time);
    generating the data and hashing it are not counted. The file is removed afterwards unless ``keep``.
    Raises OSError when the file cannot be written or read (the caller records it).
    """
    if size <= 0:
        raise ValueError(f"checkpoint size must be > 0 bytes, got {size}")
    path = os.path.join(directory, name)
    written = hashlib.sha256()
    write_s = 0.0
    remaining = size
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            while remaining > 0:
                block = os.urandom(min(chunk, remaining))
                written.update(block)
                view = memoryview(block)
                t0 = time.perf_counter()
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                write_s += time.perf_counter() - t0
                remaining -= len(block)
            t0 = time.perf_counter()
            os.fsync(fd)
            write_s += time.perf_counter() - t0
        finally:
            os.close(fd)
        caches = _drop_caches(path, drop_caches)
        read = hashlib.sha256()
        read_s = 0.0
        total = 0
        fd = os.open(path, os.O_RDONLY)
        try:
            while True:
                t0 = time.perf_counter()
                block = os.read(fd, chunk)
                read_s += time.perf_counter() - t0
                if not block:
                    break
                total += len(block)
                read.update(block)
        finally:
            os.close(fd)
    finally:
        if not keep:
            with contextlib.suppress(OSError):
                os.unlink(path)
    return {
        "path": path,
        "size_bytes": size,
        "read_bytes": total,
        "write_s": write_s,
        "read_s": read_s,
        "write_gbps": size / write_s / GB if write_s > 0 else None,
        "read_gbps": total / read_s / GB if read_s > 0 else None,
        "sha256_written": written.hexdigest(),
        "sha256_read": read.hexdigest(),
        "verified": total == size and written.hexdigest() == read.hexdigest(),
        "caches_dropped": caches["dropped"],
        "fadvise": caches["fadvise"],
        "caches_note": caches["note"],
    }


# --- judgement ----------------------------------------------------------------------------------------


def _fmt(value) -> str:
    return "none" if value is None else f"{float(value):.3g}"


def evaluate(record: Mapping, floors: Mapping | None, host: str | None = None) -> list[dict]:
    """Violations of one node's storage record against ``acceptance.storage``.

    ``record``: ``{"host", "targets": [{"kind": scratch|shared, "index", "path", "status", "note",
    "write": <parse_fio>, "read": <parse_fio>}], "checkpoint": {...} | None, "skipped"?}``.
    A shared mount that is not mounted is an error when a shared floor is set, else a warning;
    a floor the brief does not set is never judged.
    """
    floors = floors or {}
    host = host or record.get("host")
    out: list[dict] = []
    if record.get("skipped"):
        return out
    for target in record.get("targets") or []:
        kind = target.get("kind")
        path = target.get("path")
        status = target.get("status")
        what = "scratch" if kind == "scratch" else f"shared mount {path}"
        field = "storage.scratch.path" if kind == "scratch" else f"storage.shared[{target.get('index', 0)}].path"
        if status == "not configured":
            continue
        if status == "not mounted":
            shared_floor = floors.get("shared_write_gbps") is not None or floors.get("shared_read_gbps") is not None
            out.append(
                violation(
                    "STORAGE_NOT_MOUNTED",
                    field,
                    f"expected the shared file system mounted at {path}, found {target.get('note') or 'no mount'}"
                    + ("; its floors could not be measured" if shared_floor else "; not measured"),
                    host=host,
                    severity=ERROR if shared_floor else WARNING,
                )
            )
            continue
        if status in ("missing", "no space", "failed"):
            code = {"missing": "STORAGE_PATH_MISSING", "no space": "STORAGE_NO_SPACE"}.get(
                status, "STORAGE_BENCH_FAILED"
            )
            out.append(
                violation(
                    code,
                    field,
                    f"expected a sequential write and read of the {what} ({path}), found: {target.get('note')}",
                    host=host,
                )
            )
            continue
        if status != MEASURED:
            continue
        for direction in ("write", "read"):
            part = target.get(direction) or {}
            key = FLOOR_KEYS[(kind, direction)]
            if not part.get("ok"):
                out.append(
                    violation(
                        "STORAGE_BENCH_FAILED",
                        field,
                        f"expected fio's sequential {direction} of the {what} ({path}) to complete, found: "
                        f"{part.get('error') or 'no result'}",
                        host=host,
                    )
                )
                continue
            floor = floors.get(key)
            if floor is not None and part.get("gbps") is not None and part["gbps"] < float(floor):
                out.append(
                    violation(
                        "STORAGE_BELOW_FLOOR",
                        f"acceptance.storage.{key}",
                        f"{what} sequential {direction} ({path}): expected >= {float(floor):g} GB/s, measured "
                        f"{_fmt(part['gbps'])} GB/s",
                        host=host,
                    )
                )
    ckpt = record.get("checkpoint")
    if ckpt is not None:
        out.extend(_evaluate_checkpoint(ckpt, floors, host))
    return out


def _evaluate_checkpoint(ckpt: Mapping, floors: Mapping, host: str | None) -> list[dict]:
    out: list[dict] = []
    status = ckpt.get("status")
    where = ckpt.get("path") or ckpt.get("directory")
    if status in ("skipped", "not configured"):
        return out
    if status != MEASURED:
        code = {"missing": "STORAGE_PATH_MISSING", "no space": "STORAGE_NO_SPACE", "not mounted": "STORAGE_NOT_MOUNTED"}
        out.append(
            violation(
                code.get(status, "STORAGE_CHECKPOINT_FAILED"),
                "acceptance.storage.checkpoint_size_gib",
                f"expected a checkpoint round trip in {ckpt.get('directory')}, found: {ckpt.get('note')}",
                host=host,
            )
        )
        return out
    if not ckpt.get("verified"):
        out.append(
            violation(
                "STORAGE_CHECKSUM_MISMATCH",
                "acceptance.storage.checkpoint_size_gib",
                f"checkpoint {where}: expected the data read back to match what was written "
                f"({ckpt.get('size_bytes')} bytes, sha256 {ckpt.get('sha256_written')}), found "
                f"{ckpt.get('read_bytes')} bytes, sha256 {ckpt.get('sha256_read')}",
                host=host,
            )
        )
    ceiling = floors.get("checkpoint_max_restore_s")
    if ceiling is not None and ckpt.get("read_s") is not None and ckpt["read_s"] > float(ceiling):
        out.append(
            violation(
                "STORAGE_RESTORE_SLOW",
                "acceptance.storage.checkpoint_max_restore_s",
                f"checkpoint restore ({_fmt(ckpt.get('size_bytes', 0) / GIB)} GiB from {where}): expected <= "
                f"{float(ceiling):g} s, measured {_fmt(ckpt['read_s'])} s",
                host=host,
            )
        )
    return out


def not_tested(expected: Sequence[str], records: Sequence[Mapping]) -> list[dict]:
    """An error per node of the pools that has no storage record (unreachable, or its phase failed)."""
    have = {r.get("host") for r in records}
    return [
        violation(
            "STORAGE_NODE_NOT_TESTED",
            "acceptance.storage",
            f"expected a storage record of {h}, found none (unreachable, or the storage phase failed); "
            "fix the node and run acceptance again",
            host=h,
        )
        for h in dict.fromkeys(expected)
        if h not in have
    ]


__all__ = [
    "FLOOR_KEYS",
    "checkpoint_roundtrip",
    "evaluate",
    "fio_argv",
    "not_tested",
    "parse_fio",
    "size_bytes",
]
