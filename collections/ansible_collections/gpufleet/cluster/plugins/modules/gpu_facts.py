#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather the hardware facts of a GPU node for the gpufleet hardware gate
version_added: 0.1.0
description:
  - Runs C(nvidia-smi) (C(--query-gpu), C(topo -m), C(-q)), reads the RDMA ports from
    C(/sys/class/infiniband) (or C(ibstat) when sysfs has none), CPU / NUMA (C(lscpu)), memory
    (C(/proc/meminfo)), NVMe (C(/sys/class/nvme) or C(lsblk)), the kernel and the installed versions of
    the driver, CUDA, NCCL, rdma-core / DOCA-OFED, the container toolkit and the fabric manager, and the
    firmware - each GPU's VBIOS (C(nvidia-smi -q)), each NIC's (C(fw_ver)) and the BIOS
    (C(/sys/class/dmi/id/bios_version), else C(dmidecode -s bios-version)).
  - Returns them as the fact C(gpufleet_hw), which the C(gpufleet.cluster.hardware_gate) filter checks
    against the topology brief.
  - Read-only. A missing tool is recorded in C(gpufleet_hw.sources) (C(not found)) and the facts it
    would give are empty; the module itself fails only on bad options.
  - Paths are options so test doubles can answer (a fake sysfs tree, a stand-in C(nvidia-smi));
    the module never behaves differently for them.
options:
  nvidia_smi:
    description: Name (looked up in C(PATH)) or absolute path of C(nvidia-smi).
    type: str
    default: nvidia-smi
  ibstat:
    description: Name or absolute path of C(ibstat), used only when sysfs lists no RDMA device.
    type: str
    default: ibstat
  sysfs_root:
    description: >-
      Root of sysfs; C(class/infiniband), C(class/nvme), C(class/dmi/id) and C(devices/system/node) are read
      below it.
    type: path
    default: /sys
  procfs_root:
    description:
      - Root of procfs; C(meminfo), C(cpuinfo), C(driver/nvidia/version) and C(sys/kernel/osrelease)
        are read below it.
    type: path
    default: /proc
  cuda_home:
    description: CUDA toolkit directory; C(version.json) (or C(bin/nvcc --version)) gives the installed CUDA.
    type: path
    default: /usr/local/cuda
  command_timeout:
    description:
      - Seconds each tool may run (through coreutils C(timeout) when present) before it is killed
        and recorded in C(sources) as timed out; C(0) waits forever. nvidia-smi can hang on a sick GPU.
    type: int
    default: 120
  fabric_manager_unit:
    description: systemd unit of the NVSwitch fabric manager, asked with C(systemctl is-active).
    type: str
    default: nvidia-fabricmanager
  kernel_log_command:
    description:
      - >-
        Command (program and arguments) printing the kernel messages of the current boot; its C(NVRM: Xid) lines
        become C(gpufleet_hw.gpu_errors.xids), each classified by NVIDIA's XID catalogue (docs/xid-catalogue.md).
      - An empty list skips it (C(gpu_errors.kernel_log_read) is then false).
    type: list
    elements: str
    default: [journalctl, -k, -b, -o, short-iso-precise, --no-pager]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
  - gpufleet.cluster.attributes
attributes:
  check_mode:
    details: The module only reads; it gathers the same facts in check mode.
  facts:
    support: full
seealso:
  - name: Hardware gate
    description: What each check compares, its code and what to do when it fails (docs/hardware-gate.md).
    link: https://example.invalid/gpufleet/docs/hardware-gate.md
"""

EXAMPLES = r"""
- name: Gather GPU node hardware facts
  gpufleet.cluster.gpu_facts:

- name: Gather facts from the test doubles of the lab (fake sysfs tree, stand-in nvidia-smi in PATH)
  gpufleet.cluster.gpu_facts:
    sysfs_root: /opt/gpufleet-doubles/sysfs

- name: Check the node against its pool
  ansible.builtin.assert:
    that: _violations | length == 0
    fail_msg: "{{ _violations | map(attribute='message') | list }}"
  vars:
    _violations: >-
      {{ ansible_facts.gpufleet_hw
         | gpufleet.cluster.hardware_gate(gpufleet_brief, gpufleet_pool, inventory_hostname) }}
"""

RETURN = r"""
ansible_facts:
  description: The fact C(gpufleet_hw).
  returned: always
  type: dict
  contains:
    gpufleet_hw:
      description: Hardware facts of the node (schema 1). Unknown values are null.
      returned: always
      type: dict
      contains:
        schema:
          description: Version of this structure.
          type: int
          sample: 1
        gpu_count:
          description: Number of GPUs nvidia-smi lists.
          type: int
          sample: 8
        gpus:
          description: >-
            One entry per GPU from C(--query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version), with
            C(vbios_version) from C(nvidia-smi -q) (null when not printed).
          type: list
          elements: dict
          sample:
            - {index: 0, name: NVIDIA H100 80GB HBM3, uuid: GPU-7d0c5e1a-..., bus_id: "00000000:18:00.0",
               memory_mib: 81559, driver_version: 570.133.20, vbios_version: 96.00.99.00.01}
        topology:
          description: >-
            C(nvidia-smi topo -m): C(gpus) (index, label, cpu_affinity, numa_affinity, gpu_numa_id),
            C(nics) (label C(NIC0), name C(mlx5_0)), C(gpu_links) (GPU x GPU tokens, C(X) on the diagonal),
            C(gpu_nic) (GPU rows x NIC columns). Null when topo could not be run.
          type: dict
        fabric:
          description: >-
            From C(nvidia-smi -q): driver_version, cuda_version (the driver's CUDA), attached_gpus,
            C(reported) (whether any Fabric section was printed) and per GPU bus_id, uuid, mig_mode, state,
            status, clique_id, cluster_uuid, bandwidth. Null when C(-q) could not be run.
          type: dict
        gpu_errors:
          description: >-
            GPU errors since boot, each with NVIDIA's catalogue row (C(meaning), C(action) none, drain, reset_gpu,
            reboot or replace): C(xids) (the kernel log's Xid lines: code, pci, gpu_instance, stamp, text, name,
            known, source), C(memory) (row remapping pending or failed, uncorrectable ECC errors, from
            C(nvidia-smi -q)) and C(kernel_log_read).
          type: dict
          sample: {kernel_log_read: true, memory: [], xids: [{code: 79, pci: "0000:1b:00.0", action: reboot,
                   meaning: GPU has fallen off the bus}]}
        fabric_manager:
          description: C(service) (systemctl is-active of I(fabric_manager_unit)) and C(version).
          type: dict
          sample: {service: active, version: 570.133.20}
        rdma:
          description: >-
            C(source) (sysfs, ibstat or null) and C(ports), each device, port, state (ACTIVE, DOWN, INIT, ARMED),
            phys_state (LinkUp, Disabled, Polling...), rate_gbps, rate, link_layer (InfiniBand or Ethernet),
            ca_type, fw_ver, node_guid, numa_node, netdevs.
          type: dict
        cpu:
          description: >-
            model, architecture, sockets, cores_per_socket, threads_per_core, logical_cpus, numa_nodes,
            numa_cpus.
          type: dict
        memory:
          description: total_kib and total_gib (MemTotal), hugepages_total, hugepage_size_kib.
          type: dict
        nvme:
          description: NVMe namespaces / disks with name, size_bytes, model, serial.
          type: list
          elements: dict
        kernel:
          description: Running kernel release.
          type: str
          sample: 6.8.0-51-generic
        versions:
          description: >-
            driver (running), driver_flavor (open or proprietary), driver_loaded (/proc), cuda (toolkit),
            cuda_driver (highest CUDA the driver supports), nccl, rdma_core, ofed (ofed_info -s), doca_ofed,
            container_toolkit, fabric_manager, kernel.
          type: dict
        firmware:
          description: >-
            C(bios) (C(version), C(vendor), C(date) from C(/sys/class/dmi/id), the version from
            C(dmidecode -s bios-version) where sysfs has none; null when unknown). The GPUs' VBIOS is in
            C(gpus[].vbios_version), the NICs' firmware in C(rdma.ports[].fw_ver).
          type: dict
          sample: {bios: {version: 2.3.5, vendor: Dell Inc., date: 03/18/2024}}
        packages:
          description: Installed versions of the GPU stack's packages (dpkg or rpm), by package name.
          type: dict
        sources:
          description: Per tool, C(ok), C(not found) or C(rc=N) with the first line of its error.
          type: dict
          sample: {nvidia_smi: ok, ibstat: not found}
        problems:
          description: What the parsers could not read (the facts they did read are still returned).
          type: list
          elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.facts import (
    DPKG_PACKAGES,
    QUERY_GPU_FIELDS,
    RPM_PACKAGES,
    build_facts,
    count_numa_nodes,
    read_nvme_sysfs,
    read_rdma_sysfs,
)

_ENV = {"LC_ALL": "C", "LANG": "C"}


def _find(module: AnsibleModule, name: str) -> str | None:
    if os.sep in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return module.get_bin_path(name)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


class Gatherer:
    """Runs the tools and reads the files; every outcome is recorded in ``sources``."""

    def __init__(self, module: AnsibleModule):
        self.module = module
        self.sources: dict[str, str] = {}

    def run(self, key: str, tool: str, args: list[str], ok_rcs: tuple[int, ...] = (0,)) -> str | None:
        path = _find(self.module, tool)
        if path is None:
            self.sources[key] = "not found"
            return None
        argv = [path, *args]
        limit = int(self.module.params.get("command_timeout") or 0)
        killer = _find(self.module, "timeout") if limit > 0 else None
        if killer:
            # nvidia-smi can hang on a sick GPU, a daemon can ignore --version: never hang the gate.
            argv = [killer, "--kill-after=5", str(limit), *argv]
        rc, out, err = self.module.run_command(argv, environ_update=_ENV)
        if killer and rc in (124, 137):
            self.sources[key] = f"timed out after {limit}s"
            return None
        if rc not in ok_rcs:
            first = next((line.strip() for line in (err or out or "").splitlines() if line.strip()), "")
            self.sources[key] = f"rc={rc}: {first}" if first else f"rc={rc}"
            return None
        self.sources[key] = "ok"
        return out

    def gather(self) -> dict:
        p = self.module.params
        smi = p["nvidia_smi"]
        raw: dict = {}
        raw["query_gpu"] = self.run(
            "nvidia_smi", smi, [f"--query-gpu={','.join(QUERY_GPU_FIELDS)}", "--format=csv,noheader,nounits"]
        )
        if self.sources["nvidia_smi"] != "not found":
            raw["topo"] = self.run("nvidia_smi_topo", smi, ["topo", "-m"])
            raw["smi_q"] = self.run("nvidia_smi_q", smi, ["-q"])
        raw["driver_proc"] = _read(os.path.join(p["procfs_root"], "driver", "nvidia", "version"))

        problems: list[str] = []
        ports, found = read_rdma_sysfs(p["sysfs_root"])
        problems.extend(found)
        raw["rdma_sysfs"] = ports
        self.sources["rdma_sysfs"] = "ok" if ports else ("empty" if ports is not None else "not found")
        if not ports:
            raw["ibstat"] = self.run("ibstat", p["ibstat"], [])

        raw["lscpu"] = self.run("lscpu", "lscpu", [])
        if raw["lscpu"] is None:
            raw["cpuinfo"] = _read(os.path.join(p["procfs_root"], "cpuinfo"))
        raw["numa_nodes"] = count_numa_nodes(p["sysfs_root"])
        raw["meminfo"] = _read(os.path.join(p["procfs_root"], "meminfo"))
        raw["osrelease"] = _read(os.path.join(p["procfs_root"], "sys", "kernel", "osrelease"))

        nvme, found = read_nvme_sysfs(p["sysfs_root"])
        problems.extend(found)
        raw["nvme_sysfs"] = nvme
        if nvme is None:
            raw["lsblk"] = self.run("lsblk", "lsblk", ["-J", "-b", "-d", "-o", "NAME,SIZE,TYPE,MODEL,SERIAL,TRAN"])

        raw["cuda_version_json"] = _read(os.path.join(p["cuda_home"], "version.json"))
        if raw["cuda_version_json"] is None:
            raw["nvcc"] = self.run("nvcc", os.path.join(p["cuda_home"], "bin", "nvcc"), ["--version"])

        if _find(self.module, "dpkg-query"):
            raw["dpkg"] = self.run(
                "dpkg",
                "dpkg-query",
                ["-W", "-f=${Package}\\t${Version}\\t${db:Status-Abbrev}\\n", *DPKG_PACKAGES],
                ok_rcs=(0, 1),
            )
        elif _find(self.module, "rpm"):
            raw["rpm"] = self.run(
                "rpm",
                "rpm",
                ["-q", "--qf", "%{NAME}\\t%{VERSION}-%{RELEASE}\\n", *RPM_PACKAGES],
                ok_rcs=(0, 1, 2, 3, 4, 5, 6, 7, 8),
            )
        raw["ofed_info"] = self.run("ofed_info", "ofed_info", ["-s"])
        raw["nvidia_ctk"] = self.run("nvidia_ctk", "nvidia-ctk", ["--version"])
        raw["fabricmanager_version"] = self.run("nv_fabricmanager", "nv-fabricmanager", ["--version"])
        # is-active exits 3 for inactive / unknown units and still prints the state.
        raw["fabricmanager_service"] = self.run(
            "systemctl", "systemctl", ["is-active", p["fabric_manager_unit"]], ok_rcs=(0, 1, 2, 3, 4)
        )
        # The BIOS from the kernel's DMI export (world-readable); dmidecode (root) only where it has none.
        dmi = os.path.join(p["sysfs_root"], "class", "dmi", "id")
        for key in ("version", "vendor", "date"):
            raw[f"dmi_bios_{key}"] = _read(os.path.join(dmi, f"bios_{key}"))
        self.sources["dmi"] = "ok" if raw["dmi_bios_version"] is not None else "not found"
        if raw["dmi_bios_version"] is None:
            raw["dmidecode_bios_version"] = self.run("dmidecode", "dmidecode", ["-s", "bios-version"])
        if p["kernel_log_command"]:
            tool, *args = p["kernel_log_command"]
            raw["kernel_log"] = self.run("kernel_log", tool, args)
        raw["sources"] = self.sources
        raw["problems"] = problems
        return raw


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "ibstat": {"type": "str", "default": "ibstat"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "procfs_root": {"type": "path", "default": "/proc"},
            "cuda_home": {"type": "path", "default": "/usr/local/cuda"},
            "fabric_manager_unit": {"type": "str", "default": "nvidia-fabricmanager"},
            "command_timeout": {"type": "int", "default": 120},
            "kernel_log_command": {
                "type": "list",
                "elements": "str",
                "default": ["journalctl", "-k", "-b", "-o", "short-iso-precise", "--no-pager"],
            },
        },
        supports_check_mode=True,
    )
    facts = build_facts(Gatherer(module).gather())
    module.exit_json(changed=False, ansible_facts={"gpufleet_hw": facts})


if __name__ == "__main__":
    main()
