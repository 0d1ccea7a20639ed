# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Hardware facts of a GPU node: the one structure the facts module returns and the gate reads.

``build_facts(raw)`` turns the raw outputs gathered on a node (command texts, file contents, and the
port / namespace lists read from sysfs) into ``gpufleet_hw``; it is pure and never raises. The parsers
it uses live in ``hwfacts_nvidia``, ``hwfacts_rdma`` and ``hwfacts_host`` and are re-exported here.

``raw`` keys (each optional; None or absent = not available)::

    query_gpu      nvidia-smi --query-gpu=<QUERY_GPU_FIELDS> --format=csv,noheader,nounits
    topo           nvidia-smi topo -m
    smi_q          nvidia-smi -q
    driver_proc    /proc/driver/nvidia/version
    rdma_sysfs     list of port records from hwfacts_rdma.read_rdma_sysfs (None: no class/infiniband)
    ibstat         ibstat (fallback when rdma_sysfs is None or empty)
    lscpu          LC_ALL=C lscpu          cpuinfo   /proc/cpuinfo (fallback)
    numa_nodes     int from hwfacts_host.count_numa_nodes (fallback for lscpu's 'NUMA node(s)')
    meminfo        /proc/meminfo
    nvme_sysfs     list from hwfacts_host.read_nvme_sysfs (None: no class/nvme)
    lsblk          lsblk -J -b -d -o NAME,SIZE,TYPE,MODEL,SERIAL,TRAN (fallback)
    osrelease      /proc/sys/kernel/osrelease
    cuda_version_json  <cuda_home>/version.json     nvcc  <cuda_home>/bin/nvcc --version (fallback)
    dpkg           dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' <PACKAGE_PATTERNS>
    rpm            rpm -q --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n' <RPM_PACKAGES>
    ofed_info      ofed_info -s
    nvidia_ctk     nvidia-ctk --version
    fabricmanager_version   nv-fabricmanager --version
    fabricmanager_service   systemctl is-active nvidia-fabricmanager
    kernel_log     the kernel messages of this boot (journalctl -k -b): its Xid lines become ``gpu_errors``
    dmi_bios_version, dmi_bios_vendor, dmi_bios_date
                   <sysfs>/class/dmi/id/bios_{version,vendor,date} (world-readable: the kernel's dmi-id.c
                   prints each SMBIOS string and a newline)
    dmidecode_bios_version  dmidecode -s bios-version (fallback when sysfs has no dmi/id: needs root)
    sources        {name: 'ok' | 'not found' | 'rc=N: <first line of stderr>'} (copied as is)
    problems       list of strings found while gathering (copied as is)
"""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.host import (
    count_numa_nodes,
    package_version,
    parse_cpuinfo,
    parse_cuda_version_json,
    parse_dpkg_query,
    parse_fabricmanager_version,
    parse_lsblk,
    parse_lscpu,
    parse_meminfo,
    parse_nvcc_version,
    parse_nvidia_ctk_version,
    parse_ofed_info,
    parse_osrelease,
    parse_rpm_query,
    parse_service_state,
    read_nvme_sysfs,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.nvidia import (
    QUERY_GPU_FIELDS,
    link_kind,
    nvlink_count,
    parse_driver_proc,
    parse_query_gpu,
    parse_smi_q,
    parse_topo_matrix,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.parsing import (
    lines_of,
    parse_cpu_list,
    upstream_version,
    version_matches,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.rdma import (
    parse_ibstat,
    parse_rate,
    parse_rdma_port,
    read_rdma_sysfs,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import xid_catalogue

SCHEMA_VERSION = 1

# Packages whose versions are recorded (dpkg-query accepts globs; missing ones are simply absent).
# Every package of the driver (nvidia-*, libnvidia-*, libcuda*) is listed, so that drift
# detection sees each one that moved off the pin or lost its hold.
DPKG_PACKAGES = (
    "libnccl2",
    "libnccl-dev",
    "nvidia-*",
    "libnvidia-*",
    "libcuda*",
    "rdma-core",
    "libibverbs1",
    "doca-ofed",
    "mlnx-ofed-kernel-utils",
    "nvidia-container-toolkit",
    "nvidia-fabricmanager*",
    "cuda-toolkit-*",
    "nvidia-driver-*",
    "datacenter-gpu-manager*",
)
RPM_PACKAGES = (
    "nvidia-driver",
    "nvidia-driver-cuda",
    "nvidia-driver-libs",
    "kmod-nvidia-open-dkms",
    "kmod-nvidia-latest-dkms",
    "nvidia-persistenced",
    "libnccl",
    "rdma-core",
    "libibverbs",
    "doca-ofed",
    "nvidia-container-toolkit",
    "nvidia-fabric-manager",
    "cuda-toolkit",
    "datacenter-gpu-manager",
)


def _cuda_from_packages(packages: dict[str, str]) -> str | None:
    """``cuda-toolkit-12-8 12.8.1-1`` -> ``12.8.1``."""
    return package_version(packages, "cuda-toolkit-[0-9]*", "cuda-toolkit")


def parse_dmi_string(text: str | None) -> str | None:
    """One SMBIOS string as ``/sys/class/dmi/id/<field>`` or ``dmidecode -s <keyword>`` prints it: the
    first line that is not one of dmidecode's ``#`` comments (``# No SMBIOS nor DMI entry point found``);
    an empty value is None."""
    for line in lines_of(text):
        if line.strip() and not line.lstrip().startswith("#"):
            return line.strip()
    return None


def _with_vbios(gpus: list[dict], smi_q: dict | None) -> list[dict]:
    """Each GPU's ``vbios_version`` from ``nvidia-smi -q`` (its ``VBIOS Version``), matched by bus id."""
    by_bus = {str(g.get("bus_id")).lower(): g.get("vbios_version") for g in (smi_q or {}).get("gpus") or []}
    out = []
    for g in gpus:
        vbios = g.get("vbios_version") or by_bus.get(str(g.get("bus_id")).lower())
        out.append(dict(g, vbios_version=vbios))
    return out


def build_facts(raw: dict) -> dict:
    """The ``gpufleet_hw`` fact from raw outputs (see the module docstring for keys and for the result)."""
    problems: list[str] = list(raw.get("problems") or [])
    sources: dict = dict(raw.get("sources") or {})

    def take(result: tuple) -> object:
        value, found = result
        problems.extend(found)
        return value

    # GPUs: --query-gpu first; -q blocks when the CSV could not be read.
    gpus = take(parse_query_gpu(raw.get("query_gpu"))) if raw.get("query_gpu") is not None else []
    smi_q = take(parse_smi_q(raw.get("smi_q"))) if raw.get("smi_q") is not None else None
    if not gpus and smi_q and smi_q["gpus"]:
        gpus = [
            {
                "index": i,
                "name": g["name"],
                "uuid": g["uuid"],
                "bus_id": g["bus_id"],
                "memory_mib": g["memory_mib"],
                "driver_version": smi_q["driver_version"],
            }
            for i, g in enumerate(smi_q["gpus"])
        ]
    gpus = _with_vbios(gpus, smi_q)
    topology = take(parse_topo_matrix(raw.get("topo"))) if raw.get("topo") is not None else None
    driver_proc = take(parse_driver_proc(raw.get("driver_proc")))

    fabric = None
    if smi_q is not None:
        fabric = {
            "driver_version": smi_q["driver_version"],
            "cuda_version": smi_q["cuda_version"],
            "attached_gpus": smi_q["attached_gpus"],
            "gpus": [
                dict({"bus_id": g["bus_id"], "uuid": g["uuid"], "mig_mode": g["mig_mode"]}, **(g["fabric"] or {}))
                for g in smi_q["gpus"]
            ],
            "reported": any(g["fabric"] is not None for g in smi_q["gpus"]),
        }

    # RDMA: sysfs when it has devices, ibstat otherwise.
    rdma_ports: list[dict] = []
    rdma_source = None
    if raw.get("rdma_sysfs"):
        rdma_ports, rdma_source = list(raw["rdma_sysfs"]), "sysfs"
    elif raw.get("ibstat"):
        rdma_ports, rdma_source = take(parse_ibstat(raw.get("ibstat"))), "ibstat"
    elif raw.get("rdma_sysfs") is not None:
        rdma_source = "sysfs"

    # CPU / NUMA / memory.
    cpu = take(parse_lscpu(raw["lscpu"])) if raw.get("lscpu") else take(parse_cpuinfo(raw.get("cpuinfo")))
    if cpu.get("numa_nodes") is None and raw.get("numa_nodes"):
        cpu["numa_nodes"] = raw["numa_nodes"]
    memory = take(parse_meminfo(raw.get("meminfo")))

    nvme = list(raw["nvme_sysfs"]) if raw.get("nvme_sysfs") is not None else take(parse_lsblk(raw.get("lsblk")))

    packages: dict[str, str] = {}
    if raw.get("dpkg"):
        packages.update(take(parse_dpkg_query(raw["dpkg"])))
    if raw.get("rpm"):
        packages.update(take(parse_rpm_query(raw["rpm"])))

    driver = next((g.get("driver_version") for g in gpus if g.get("driver_version")), None)
    driver = driver or (smi_q or {}).get("driver_version") or driver_proc["version"]
    cuda = None
    if raw.get("cuda_version_json"):
        cuda = take(parse_cuda_version_json(raw["cuda_version_json"]))
    if cuda is None and raw.get("nvcc"):
        cuda = take(parse_nvcc_version(raw["nvcc"]))
    cuda = cuda or _cuda_from_packages(packages)
    versions = {
        "driver": driver,
        "driver_flavor": driver_proc["flavor"],
        "driver_loaded": driver_proc["version"],
        "cuda": cuda,
        "cuda_driver": (smi_q or {}).get("cuda_version"),
        "nccl": package_version(packages, "libnccl2", "libnccl"),
        "rdma_core": package_version(packages, "rdma-core", "libibverbs1", "libibverbs"),
        "ofed": take(parse_ofed_info(raw.get("ofed_info"))),
        "doca_ofed": package_version(packages, "doca-ofed"),
        "container_toolkit": take(parse_nvidia_ctk_version(raw.get("nvidia_ctk")))
        or package_version(packages, "nvidia-container-toolkit"),
        "fabric_manager": take(parse_fabricmanager_version(raw.get("fabricmanager_version")))
        or package_version(packages, "nvidia-fabricmanager*", "nvidia-fabric-manager"),
        "kernel": parse_osrelease(raw.get("osrelease")),
    }
    # GPU errors since boot, classified by NVIDIA's XID catalogue: the kernel log's Xid lines and the
    # row-remap / ECC state of nvidia-smi -q. "kernel_log_read" is False when no log was gathered.
    gpu_errors = {
        "kernel_log_read": raw.get("kernel_log") is not None,
        "xids": xid_catalogue.parse_kernel_log(raw.get("kernel_log")),
        "memory": xid_catalogue.gpu_events((smi_q or {}).get("gpus")),
    }
    # Firmware beside the GPUs' VBIOS (gpus[].vbios_version) and the NICs' (rdma.ports[].fw_ver).
    firmware = {
        "bios": {
            "version": parse_dmi_string(raw.get("dmi_bios_version"))
            or parse_dmi_string(raw.get("dmidecode_bios_version")),
            "vendor": parse_dmi_string(raw.get("dmi_bios_vendor")),
            "date": parse_dmi_string(raw.get("dmi_bios_date")),
        }
    }
    return {
        "schema": SCHEMA_VERSION,
        "gpu_count": len(gpus),
        "gpus": gpus,
        "topology": topology,
        "fabric": fabric,
        "fabric_manager": {
            "service": parse_service_state(raw.get("fabricmanager_service")),
            "version": versions["fabric_manager"],
        },
        "rdma": {"source": rdma_source, "ports": rdma_ports},
        "cpu": cpu,
        "memory": memory,
        "nvme": nvme,
        "kernel": versions["kernel"],
        "versions": versions,
        "gpu_errors": gpu_errors,
        "firmware": firmware,
        "packages": packages,
        "sources": sources,
        "problems": problems,
    }


__all__ = [
    "DPKG_PACKAGES",
    "QUERY_GPU_FIELDS",
    "RPM_PACKAGES",
    "SCHEMA_VERSION",
    "build_facts",
    "count_numa_nodes",
    "link_kind",
    "nvlink_count",
    "parse_cpu_list",
    "parse_cpuinfo",
    "parse_cuda_version_json",
    "parse_dmi_string",
    "parse_dpkg_query",
    "parse_driver_proc",
    "parse_fabricmanager_version",
    "parse_ibstat",
    "parse_lsblk",
    "parse_lscpu",
    "parse_meminfo",
    "parse_nvcc_version",
    "parse_nvidia_ctk_version",
    "parse_ofed_info",
    "parse_osrelease",
    "parse_query_gpu",
    "parse_rate",
    "parse_rdma_port",
    "parse_rpm_query",
    "parse_service_state",
    "parse_smi_q",
    "parse_topo_matrix",
    "read_nvme_sysfs",
    "read_rdma_sysfs",
    "upstream_version",
    "version_matches",
]
