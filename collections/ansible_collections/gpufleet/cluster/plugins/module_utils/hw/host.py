# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Host facts: CPU, NUMA, memory, NVMe, kernel and the installed versions of the GPU stack (stdlib only).

Parsers are pure ``text -> (data, problems)``; the two ``read_*`` helpers walk a sysfs tree given
by its root so tests can point them at a fake one.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re

from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.parsing import (
    clean,
    lines_of,
    to_int,
    upstream_version,
)

# ---------------------------------------------------------------- CPU / NUMA / memory


def parse_lscpu(text: str | None) -> tuple[dict, list[str]]:
    """``LC_ALL=C lscpu`` -> ``{model, architecture, sockets, cores_per_socket, threads_per_core,
    logical_cpus, numa_nodes, numa_cpus: {node: cpulist}}``."""
    kv: dict[str, str] = {}
    for line in lines_of(text):
        key, sep, value = line.partition(":")
        if sep:
            kv.setdefault(key.strip(), value.strip())
    cpu = {
        "model": clean(kv.get("Model name")),
        "architecture": clean(kv.get("Architecture")),
        "sockets": to_int(kv.get("Socket(s)")),
        "cores_per_socket": to_int(kv.get("Core(s) per socket")),
        "threads_per_core": to_int(kv.get("Thread(s) per core")),
        "logical_cpus": to_int(kv.get("CPU(s)")),
        "numa_nodes": to_int(kv.get("NUMA node(s)")),
        "numa_cpus": {},
    }
    for key, value in kv.items():
        m = re.match(r"^NUMA node(\d+) CPU\(s\)$", key)
        if m:
            cpu["numa_cpus"][m.group(1)] = value
    problems = []
    if text and cpu["logical_cpus"] is None:
        problems.append("lscpu: no 'CPU(s):' line")
    return cpu, problems


def parse_cpuinfo(text: str | None) -> tuple[dict, list[str]]:
    """``/proc/cpuinfo`` (x86 layout) when lscpu is missing: the same keys as ``parse_lscpu``."""
    processors = 0
    sockets: set[str] = set()
    cores: int | None = None
    siblings: int | None = None
    model: str | None = None
    for line in lines_of(text):
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            processors += 1
        elif key == "physical id":
            sockets.add(value)
        elif key == "cpu cores" and cores is None:
            cores = to_int(value)
        elif key == "siblings" and siblings is None:
            siblings = to_int(value)
        elif key in ("model name", "Model name") and model is None:
            model = value
    threads = siblings // cores if cores and siblings else None
    cpu = {
        "model": model,
        "architecture": None,
        "sockets": len(sockets) or None,
        "cores_per_socket": cores,
        "threads_per_core": threads,
        "logical_cpus": processors or None,
        "numa_nodes": None,
        "numa_cpus": {},
    }
    return cpu, ([] if processors or not text else ["/proc/cpuinfo: no 'processor' line"])


def count_numa_nodes(sysfs_root: str = "/sys") -> int | None:
    """Number of ``<sysfs_root>/devices/system/node/node<N>`` directories, None when unreadable."""
    try:
        names = os.listdir(os.path.join(sysfs_root, "devices", "system", "node"))
    except OSError:
        return None
    count = sum(1 for n in names if re.match(r"^node\d+$", n))
    return count or None


def parse_meminfo(text: str | None) -> tuple[dict, list[str]]:
    """``/proc/meminfo`` -> ``{total_kib, total_gib, hugepages_total, hugepage_size_kib}``."""
    kv: dict[str, str] = {}
    for line in lines_of(text):
        key, sep, value = line.partition(":")
        if sep:
            kv[key.strip()] = value.strip()
    total = to_int(kv.get("MemTotal"))
    mem = {
        "total_kib": total,
        "total_gib": round(total / 1024 / 1024, 1) if total is not None else None,
        "hugepages_total": to_int(kv.get("HugePages_Total")),
        "hugepage_size_kib": to_int(kv.get("Hugepagesize")),
    }
    return mem, ([] if total is not None or not text else ["/proc/meminfo: no MemTotal line"])


# ---------------------------------------------------------------- NVMe


def _is_nvme(dev: dict) -> bool:
    return str(dev.get("tran") or "").lower() == "nvme" or str(dev.get("name") or "").startswith("nvme")


def parse_lsblk(text: str | None) -> tuple[list[dict], list[str]]:
    """``lsblk -J -b -d -o NAME,SIZE,TYPE,MODEL,SERIAL,TRAN`` -> NVMe disks ``[{name, size_bytes, model, serial}]``.

    Older util-linux prints sizes as strings; both parse. Partitions and non-NVMe disks are left out.
    """
    if not text or not text.strip():
        return [], []
    try:
        data = json.loads(text)
    except ValueError as exc:
        return [], [f"lsblk: not JSON: {exc}"]
    disks = []
    for dev in data.get("blockdevices", []) if isinstance(data, dict) else []:
        if not isinstance(dev, dict) or not _is_nvme(dev) or dev.get("type") not in (None, "disk"):
            continue
        disks.append(
            {
                "name": dev.get("name"),
                "size_bytes": to_int(dev.get("size")),
                "model": clean(dev.get("model")),
                "serial": clean(dev.get("serial")),
            }
        )
    return disks, []


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


def read_nvme_sysfs(sysfs_root: str = "/sys") -> tuple[list[dict] | None, list[str]]:
    """NVMe namespaces under ``<sysfs_root>/class/nvme/nvme*/nvme*n*`` (size is in 512-byte sectors).

    None when ``class/nvme`` does not exist (no NVMe driver loaded, or a container without it).
    """
    base = os.path.join(sysfs_root, "class", "nvme")
    if not os.path.isdir(base):
        return None, []
    disks: list[dict] = []
    problems: list[str] = []
    for ctrl in sorted(os.listdir(base), key=lambda n: to_int(n) or 0):
        ctrl_dir = os.path.join(base, ctrl)
        try:
            entries = sorted(os.listdir(ctrl_dir))
        except OSError:
            continue
        for ns in entries:
            if not re.match(r"^nvme\d+(c\d+)?n\d+$", ns):
                continue
            sectors = to_int(_read(os.path.join(ctrl_dir, ns, "size")))
            if sectors is None:
                problems.append(f"{ctrl}/{ns}: no size")
            disks.append(
                {
                    "name": ns,
                    "size_bytes": sectors * 512 if sectors is not None else None,
                    "model": clean(_read(os.path.join(ctrl_dir, "model"))),
                    "serial": clean(_read(os.path.join(ctrl_dir, "serial"))),
                }
            )
    return disks, problems


# ---------------------------------------------------------------- versions


def parse_cuda_version_json(text: str | None) -> tuple[str | None, list[str]]:
    """``/usr/local/cuda/version.json`` -> ``12.8.1`` (the ``cuda.version`` key)."""
    if not text:
        return None, []
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, [f"cuda version.json: not JSON: {exc}"]
    version = data.get("cuda", {}).get("version") if isinstance(data, dict) else None
    return (clean(version), []) if version else (None, ["cuda version.json: no cuda.version key"])


def parse_nvcc_version(text: str | None) -> tuple[str | None, list[str]]:
    """``nvcc --version`` -> ``12.8.93`` from ``Cuda compilation tools, release 12.8, V12.8.93``."""
    for line in lines_of(text):
        m = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", line)
        if m:
            return m.group(2), []
        m = re.search(r"release (\d+\.\d+)", line)
        if m:
            return m.group(1), []
    return None, (["nvcc --version: no 'release X.Y' line"] if text else [])


def parse_dpkg_query(text: str | None) -> tuple[dict[str, str], list[str]]:
    """``dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' <names>`` -> installed packages.

    Only packages whose status starts ``ii`` / ``hi`` (installed, possibly held) are kept;
    ``dpkg-query: no packages found matching X`` lines (stderr, merged or not) are ignored.
    """
    packages: dict[str, str] = {}
    for line in lines_of(text):
        parts = line.split("\t")
        if len(parts) < 2 or line.startswith("dpkg-query:"):
            continue
        name, version = parts[0].strip(), parts[1].strip()
        status = parts[2].strip() if len(parts) > 2 else "ii"
        if name and version and status[:2] in ("ii", "hi"):
            packages[name.split(":")[0]] = version
    return packages, []


def parse_rpm_query(text: str | None) -> tuple[dict[str, str], list[str]]:
    """``rpm -q --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n' <names>`` -> installed packages."""
    packages: dict[str, str] = {}
    for line in lines_of(text):
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0].strip() and "not installed" not in line:
            packages[parts[0].strip()] = parts[1].strip()
    return packages, []


def parse_ofed_info(text: str | None) -> tuple[str | None, list[str]]:
    """``ofed_info -s`` -> ``25.01-0.6.0`` from ``OFED-internal-25.01-0.6.0:`` or ``MLNX_OFED_LINUX-23.10-1.1.9.0:``."""
    for line in lines_of(text):
        m = re.search(r"(?:OFED-internal|MLNX_OFED_LINUX|OFED)-(\d[\w.]*-[\w.]+?):?\s*$", line.strip())
        if m:
            return m.group(1), []
    return None, (["ofed_info -s: no OFED version"] if text and text.strip() else [])


def parse_nvidia_ctk_version(text: str | None) -> tuple[str | None, list[str]]:
    """``nvidia-ctk --version`` -> ``1.17.5`` from ``NVIDIA Container Toolkit CLI version 1.17.5``."""
    for line in lines_of(text):
        m = re.search(r"version\s+v?(\d+\.\d+\.\d+\S*)", line, re.IGNORECASE)
        if m:
            return m.group(1), []
    return None, (["nvidia-ctk --version: no version"] if text and text.strip() else [])


def parse_fabricmanager_version(text: str | None) -> tuple[str | None, list[str]]:
    """``nv-fabricmanager --version`` -> ``570.133.20`` from ``Fabric Manager version is : 570.133.20``."""
    for line in lines_of(text):
        m = re.search(r"version.*?(\d+\.\d+(?:\.\d+)?)", line, re.IGNORECASE)
        if m:
            return m.group(1), []
    return None, (["nv-fabricmanager --version: no version"] if text and text.strip() else [])


def parse_service_state(text: str | None) -> str | None:
    """``systemctl is-active <unit>`` -> ``active`` / ``inactive`` / ``failed`` / ... (first word)."""
    for line in lines_of(text):
        if line.strip():
            return line.strip().split()[0]
    return None


def parse_osrelease(text: str | None) -> str | None:
    """``/proc/sys/kernel/osrelease`` or ``uname -r`` -> ``6.8.0-51-generic``."""
    return clean(text.strip()) if isinstance(text, str) else None


def package_version(packages: dict[str, str], *names: str) -> str | None:
    """The upstream version of the first installed package matching one of ``names`` (``fnmatch`` globs)."""
    for pattern in names:
        for name in sorted(packages):
            if fnmatch.fnmatchcase(name, pattern):
                return upstream_version(packages[name])
    return None
