"""Every preflight check: a failing case and a passing case, table-driven on the fixture sites."""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import check, effective_brief, size_bytes
from ansible_collections.gpufleet.cluster.tests.unit.preflight_helpers import DELETE, codes, set_path, site


def brief_set(*pairs):
    def mutate(brief, groups, hostvars):
        for path, value in pairs:
            set_path(brief, path, value)

    return mutate


def _hosts_set(host, **values):
    def mutate(brief, groups, hostvars):
        hostvars[host].update(values)

    return mutate


def host_set(host, key, value):
    def mutate(brief, groups, hostvars):
        if value is DELETE:
            hostvars[host].pop(key, None)
        else:
            hostvars[host][key] = value

    return mutate


def both(*fns):
    def mutate(brief, groups, hostvars):
        for fn in fns:
            fn(brief, groups, hostvars)

    return mutate


def add_to_group(group, host, **hvars):
    def mutate(brief, groups, hostvars):
        groups.setdefault(group, []).append(host)
        groups["all"].append(host) if host not in groups["all"] else None
        hostvars[host] = dict(hvars)

    return mutate


def rename_host(old, new):
    def mutate(brief, groups, hostvars):
        for g in groups.values():
            if old in g:
                g[g.index(old)] = new
        hostvars[new] = hostvars.pop(old)

    return mutate


FABRIC8 = [f"10.30.{r}.120" for r in range(8)]
CTL2 = {"ansible_host": "10.20.0.11", "bmc_ip": "10.20.4.11", "storage_ip": "10.20.8.11"}
CTL3 = {"ansible_host": "10.20.0.12", "bmc_ip": "10.20.4.12", "storage_ip": "10.20.8.12"}
K8S_CTL = {"ansible_host": "10.40.0.14", "bmc_ip": "10.40.4.14", "storage_ip": "10.40.8.14"}
K8S_CTL5 = {"ansible_host": "10.40.0.15", "bmc_ip": "10.40.4.15", "storage_ip": "10.40.8.15"}

NVL72_POOL = brief_set(
    ("pools.0.accelerator", "gb200-nvl72"), ("pools.0.topology", "nvl72"), ("pools.0.gpus_per_node", 4)
)

# (id, site, mutation, code, host, field) — the check must fire with that host and field.
FAILING = [
    # catalogue
    (
        "unknown accelerator",
        "slurm",
        brief_set(("pools.0.accelerator", "h900")),
        "CAT_UNKNOWN_ACCELERATOR",
        None,
        "pools[0].accelerator",
    ),
    (
        "topology vs gpus",
        "slurm",
        brief_set(("pools.0.gpus_per_node", 4)),
        "CAT_TOPOLOGY_GPUS",
        None,
        "pools[0].gpus_per_node",
    ),
    (
        "sxm card in pcie topology",
        "slurm",
        brief_set(("pools.0.topology", "pcie")),
        "CAT_TOPOLOGY_FORM_FACTOR",
        None,
        "pools[0].topology",
    ),
    (
        "bridge without nvlink",
        "k8s",
        brief_set(("pools.1.topology", "pcie-nvlink-bridge")),
        "CAT_TOPOLOGY_NVLINK",
        None,
        "pools[1].topology",
    ),
    (
        "mig without MIG",
        "k8s",
        brief_set(("pools.1.sharing", "mig"), ("pools.1.sharing_config", {"mig_profile": "1g.10gb"})),
        "CAT_MIG_UNSUPPORTED",
        None,
        "pools[1].sharing",
    ),
    (
        "mig without profile",
        "slurm",
        brief_set(("pools.0.sharing", "mig")),
        "CAT_MIG_PROFILE_MISSING",
        None,
        "pools[0].sharing_config.mig_profile",
    ),
    (
        "mig bad profile",
        "slurm",
        brief_set(("pools.0.sharing", "mig"), ("pools.0.sharing_config", {"mig_profile": "1g.18gb"})),
        "CAT_MIG_PROFILE_UNKNOWN",
        None,
        "pools[0].sharing_config.mig_profile",
    ),
    (
        "time-slicing replicas 1",
        "k8s",
        brief_set(("pools.1.sharing_config", {"replicas": 1})),
        "CAT_TIMESLICING_REPLICAS",
        None,
        "pools[1].sharing_config.replicas",
    ),
    (
        "time-slicing no replicas",
        "k8s",
        brief_set(("pools.1.sharing_config", DELETE)),
        "CAT_TIMESLICING_REPLICAS",
        None,
        "pools[1].sharing_config.replicas",
    ),
    (
        "unused sharing config",
        "slurm",
        brief_set(("pools.0.sharing_config", {"replicas": 4})),
        "CAT_SHARING_CONFIG_UNUSED",
        None,
        "pools[0].sharing_config.replicas",
    ),
    (
        "duplicate pool",
        "slurm",
        lambda b, g, h: b["pools"].append(dict(b["pools"][0], group="gpu_other")),
        "POOL_DUPLICATE_NAME",
        None,
        "pools[1].name",
    ),
    # versions
    (
        "cuda 12.8 driver too old",
        "slurm",
        brief_set(("software.driver", "565.57.01")),
        "VER_CUDA_DRIVER",
        None,
        "software.driver",
    ),
    (
        "cuda 13.0 driver too old",
        "slurm",
        brief_set(("software.cuda", "13.0"), ("software.nccl", "2.27.7")),
        "VER_CUDA_DRIVER",
        None,
        "software.driver",
    ),
    (
        "cuda unknown",
        "slurm",
        brief_set(("software.cuda", "13.7"), ("software.driver", "600.1.1"), ("software.nccl", "2.28.3")),
        "VER_CUDA_UNKNOWN",
        None,
        "software.cuda",
    ),
    (
        "b200 on r565",
        "slurm",
        brief_set(
            ("pools.0.accelerator", "b200-sxm-180gb"), ("software.driver", "565.57.01"), ("software.cuda", "12.6")
        ),
        "VER_DRIVER_BRANCH",
        None,
        "software.driver",
    ),
    (
        "b200 on cuda 12.6",
        "slurm",
        brief_set(("pools.0.accelerator", "b200-sxm-180gb"), ("software.cuda", "12.6")),
        "VER_CUDA_ACCELERATOR",
        None,
        "software.cuda",
    ),
    (
        "nccl for cuda 12 with cuda 13",
        "slurm",
        brief_set(("software.cuda", "13.0"), ("software.driver", "580.95.05")),
        "VER_NCCL_CUDA",
        None,
        "software.nccl",
    ),
    ("nccl unknown", "slurm", brief_set(("software.nccl", "1.3.4")), "VER_NCCL_UNKNOWN", None, "software.nccl"),
    (
        "nccl x cuda pair not built",
        "slurm",
        brief_set(("software.cuda", "13.0"), ("software.driver", "580.126.09"), ("software.nccl", "2.30.4")),
        "VER_NCCL_CUDA_NOT_BUILT",
        None,
        "software.nccl",
    ),
    (
        "nccl x cuda pair unconfirmed",
        "slurm",
        brief_set(("software.cuda", "13.0"), ("software.driver", "580.95.05"), ("software.nccl", "2.29.2")),
        "VER_NCCL_CUDA_UNCONFIRMED",
        None,
        "software.nccl",
    ),
    ("dcgm on debian 13", "slurm", brief_set(("cluster.os", "debian-13")), "VER_NOT_PUBLISHED", None, "cluster.os"),
    (
        "driver branch debian 13 lacked",
        "slurm",
        brief_set(("cluster.os", "debian-13")),
        "VER_NOT_PUBLISHED_UNCONFIRMED",
        None,
        "software.driver",
    ),
    (
        "blackwell proprietary",
        "slurm",
        brief_set(("pools.0.accelerator", "b200-sxm-180gb"), ("software.driver_flavor", "proprietary")),
        "VER_OPEN_MODULES_REQUIRED",
        None,
        "software.driver_flavor",
    ),
    (
        "doca without pin",
        "slurm",
        brief_set(("software.doca_ofed", DELETE)),
        "VER_DOCA_OFED_MISSING",
        None,
        "software.doca_ofed",
    ),
    # groups
    ("pool group missing", "slurm", brief_set(("pools.0.group", "gpu_b200")), "GROUP_MISSING", None, "pools[0].group"),
    ("pool group empty", "slurm", lambda b, g, h: g.__setitem__("gpu_h100", []), "GROUP_EMPTY", None, "pools[0].group"),
    (
        "controllers missing",
        "slurm",
        brief_set(("controllers.group", "ctl")),
        "GROUP_MISSING",
        None,
        "controllers.group",
    ),
    (
        "host in two pools",
        "slurm",
        both(
            lambda b, g, h: b["pools"].append(dict(b["pools"][0], name="second", group="extra")),
            lambda b, g, h: g.__setitem__("extra", ["gpu001"]),
        ),
        "GROUP_HOST_IN_TWO_POOLS",
        "gpu001",
        "pools[1].group",
    ),
    (
        "slurm 3 controllers",
        "slurm",
        both(add_to_group("slurm_controllers", "ctl02", **CTL2), add_to_group("slurm_controllers", "ctl03", **CTL3)),
        "GROUP_CONTROLLERS_SIZE",
        None,
        "controllers.group",
    ),
    (
        "slurm 0 controllers",
        "slurm",
        lambda b, g, h: g.__setitem__("slurm_controllers", []),
        "GROUP_CONTROLLERS_SIZE",
        None,
        "controllers.group",
    ),
    (
        "k8s 4 control planes",
        "k8s",
        add_to_group("k8s_control_plane", "cp04", **K8S_CTL),
        "GROUP_CONTROLLERS_SIZE",
        None,
        "controllers.group",
    ),
    (
        "k8s 2 control planes",
        "k8s",
        lambda b, g, h: g["k8s_control_plane"].pop(),
        "GROUP_CONTROLLERS_SIZE",
        None,
        "controllers.group",
    ),
    # hosts
    (
        "host name with shell",
        "slurm",
        rename_host("gpu002", "gpu002;rm -rf /"),
        "HOST_NAME_INVALID",
        "gpu002;rm -rf /",
        "inventory_hostname",
    ),
    (
        "host name jinja",
        "slurm",
        rename_host("gpu002", "{{ lookup('pipe','id') }}"),
        "HOST_NAME_INVALID",
        "{{ lookup('pipe','id') }}",
        "inventory_hostname",
    ),
    (
        "host name upper for k8s",
        "k8s",
        rename_host("h200-001", "H200-001"),
        "HOST_NAME_INVALID",
        "H200-001",
        "inventory_hostname",
    ),
    (
        "missing ansible_host",
        "slurm",
        host_set("gpu003", "ansible_host", DELETE),
        "HOST_VAR_MISSING",
        "gpu003",
        "ansible_host",
    ),
    ("missing bmc_ip", "slurm", host_set("ctl01", "bmc_ip", DELETE), "HOST_VAR_MISSING", "ctl01", "bmc_ip"),
    (
        "missing storage_ip",
        "slurm",
        host_set("gpu003", "storage_ip", DELETE),
        "HOST_VAR_MISSING",
        "gpu003",
        "storage_ip",
    ),
    (
        "missing fabric_ips",
        "slurm",
        host_set("gpu003", "fabric_ips", DELETE),
        "HOST_VAR_MISSING",
        "gpu003",
        "fabric_ips",
    ),
    (
        "jinja as address",
        "slurm",
        host_set("gpu003", "bmc_ip", "{{ lookup('pipe', 'touch /tmp/x') }}"),
        "HOST_ADDR_INVALID",
        "gpu003",
        "bmc_ip",
    ),
    (
        "address not a string",
        "slurm",
        host_set("gpu003", "ansible_host", ["10.20.0.103"]),
        "HOST_ADDR_INVALID",
        "gpu003",
        "ansible_host",
    ),
    (
        "fabric_ips not a list",
        "slurm",
        host_set("gpu003", "fabric_ips", "10.30.0.103"),
        "HOST_VAR_WRONG_TYPE",
        "gpu003",
        "fabric_ips",
    ),
    (
        "ansible_host outside",
        "slurm",
        host_set("gpu003", "ansible_host", "10.21.0.103"),
        "HOST_ADDR_OUTSIDE_NET",
        "gpu003",
        "ansible_host",
    ),
    (
        "storage_ip outside",
        "slurm",
        host_set("gpu003", "storage_ip", "10.20.0.200"),
        "HOST_ADDR_OUTSIDE_NET",
        "gpu003",
        "storage_ip",
    ),
    (
        "rail order swapped",
        "slurm",
        host_set("gpu003", "fabric_ips", [FABRIC8[1], FABRIC8[0], *FABRIC8[2:]]),
        "HOST_ADDR_OUTSIDE_NET",
        "gpu003",
        "fabric_ips[0]",
    ),
    (
        "network address used",
        "slurm",
        host_set("gpu003", "bmc_ip", "10.20.4.0"),
        "HOST_ADDR_RESERVED",
        "gpu003",
        "bmc_ip",
    ),
    (
        "duplicate across hosts",
        "slurm",
        host_set("gpu003", "ansible_host", "10.20.0.10"),
        "HOST_ADDR_DUPLICATE",
        "gpu003",
        "ansible_host",
    ),
    (
        "duplicate fabric",
        "slurm",
        host_set("gpu003", "fabric_ips", [f"10.30.{r}.101" for r in range(8)]),
        "HOST_ADDR_DUPLICATE",
        "gpu003",
        "fabric_ips[0]",
    ),
    (
        "fabric count",
        "slurm",
        host_set("gpu003", "fabric_ips", FABRIC8[:6]),
        "HOST_FABRIC_COUNT",
        "gpu003",
        "fabric_ips",
    ),
    (
        "huge fabric list",
        "slurm",
        host_set("gpu003", "fabric_ips", ["10.30.0.1"] * 200_000),
        "HOST_FABRIC_COUNT",
        "gpu003",
        "fabric_ips",
    ),
    (
        "unassigned host",
        "slurm",
        add_to_group("ungrouped", "stray", ansible_host="10.20.0.222"),
        "HOST_UNASSIGNED",
        "stray",
        "groups",
    ),
    # networks
    (
        "bad cidr",
        "slurm",
        brief_set(("networks.bmc.cidr", "10.20.4.0/33")),
        "NET_CIDR_INVALID",
        None,
        "networks.bmc.cidr",
    ),
    (
        "cidr without prefix",
        "slurm",
        brief_set(("networks.bmc.cidr", "10.20.4.0")),
        "NET_CIDR_INVALID",
        None,
        "networks.bmc.cidr",
    ),
    (
        "cidr host bits",
        "slurm",
        brief_set(("networks.bmc.cidr", "10.20.4.7/22")),
        "NET_CIDR_HOST_BITS",
        None,
        "networks.bmc.cidr",
    ),
    (
        "overlap mgmt/bmc",
        "slurm",
        brief_set(("networks.bmc.cidr", "10.20.0.0/21")),
        "NET_OVERLAP",
        None,
        "networks.management.cidr",
    ),
    (
        "overlap rails",
        "slurm",
        brief_set(("networks.fabric.rails.1", {"cidr": "10.30.0.128/25"})),
        "NET_OVERLAP",
        None,
        "networks.fabric.rails[1].cidr",
    ),
    (
        "overlap pod cidr",
        "k8s",
        brief_set(("networks.kubernetes.pod_cidr", "10.40.0.0/16")),
        "NET_OVERLAP",
        None,
        "networks.management.cidr",
    ),
    (
        "overlap service cidr",
        "k8s",
        brief_set(("networks.kubernetes.service_cidr", "10.96.16.0/20")),
        "NET_OVERLAP",
        None,
        "networks.kubernetes.service_cidr",
    ),
    (
        "too small mgmt",
        "slurm",
        brief_set(("networks.management.cidr", "10.20.0.0/29"), ("networks.management.gateway", "10.20.0.1")),
        "NET_TOO_SMALL",
        None,
        "networks.management.cidr",
    ),
    (
        "too small pod cidr",
        "k8s",
        brief_set(("networks.kubernetes.pod_cidr", "10.96.0.0/22")),
        "NET_TOO_SMALL",
        None,
        "networks.kubernetes.pod_cidr",
    ),
    (
        "service cidr too large",
        "k8s",
        brief_set(("networks.kubernetes.service_cidr", "10.128.0.0/10")),
        "NET_TOO_LARGE",
        None,
        "networks.kubernetes.service_cidr",
    ),
    (
        "k8s without cidrs",
        "k8s",
        brief_set(("networks.kubernetes", DELETE)),
        "NET_K8S_MISSING",
        None,
        "networks.kubernetes",
    ),
    (
        "slurm with k8s cidrs",
        "slurm",
        brief_set(("networks.kubernetes", {"pod_cidr": "10.96.0.0/16", "service_cidr": "10.97.0.0/20"})),
        "NET_K8S_UNUSED",
        None,
        "networks.kubernetes",
    ),
    (
        "mtu too big for ethernet",
        "slurm",
        brief_set(("networks.storage.mtu", 12000)),
        "NET_MTU_RANGE",
        None,
        "networks.storage.mtu",
    ),
    (
        "mtu too big for ib",
        "slurm",
        brief_set(("networks.fabric.mtu", 9000)),
        "NET_MTU_RANGE",
        None,
        "networks.fabric.mtu",
    ),
    (
        "gateway outside",
        "slurm",
        brief_set(("networks.management.gateway", "10.21.0.1")),
        "NET_GATEWAY_OUTSIDE",
        None,
        "networks.management.gateway",
    ),
    (
        "gateway broadcast",
        "slurm",
        brief_set(("networks.management.gateway", "10.20.3.255")),
        "NET_GATEWAY_OUTSIDE",
        None,
        "networks.management.gateway",
    ),
    (
        "gateway invalid",
        "slurm",
        brief_set(("networks.management.gateway", "gw")),
        "NET_GATEWAY_INVALID",
        None,
        "networks.management.gateway",
    ),
    # fabric
    (
        "gdr on ethernet",
        "slurm",
        brief_set(("networks.fabric.type", "ethernet"), ("networks.fabric.mtu", 9000)),
        "FABRIC_GPUDIRECT_NEEDS_RDMA",
        None,
        "pools[0].gpudirect_rdma",
    ),
    (
        "none with nics",
        "slurm",
        brief_set(("networks.fabric.type", "none"), ("pools.0.gpudirect_rdma", False)),
        "FABRIC_NONE_WITH_NICS",
        None,
        "pools[0].nics_per_node",
    ),
    (
        "none with rails",
        "slurm",
        brief_set(("networks.fabric.type", "none"), ("pools.0.gpudirect_rdma", False), ("pools.0.nics_per_node", 0)),
        "FABRIC_NONE_WITH_RAILS",
        None,
        "networks.fabric.rails",
    ),
    (
        "rails too few",
        "slurm",
        lambda b, g, h: b["networks"]["fabric"]["rails"].pop(),
        "FABRIC_RAILS_TOO_FEW",
        None,
        "networks.fabric.rails",
    ),
    (
        "no link speed",
        "slurm",
        brief_set(("networks.fabric.link_speed_gbps", DELETE)),
        "FABRIC_LINK_SPEED_MISSING",
        None,
        "networks.fabric.link_speed_gbps",
    ),
    (
        "roce qos on ib",
        "slurm",
        brief_set(("networks.fabric.roce", {"pfc_priority": 3})),
        "FABRIC_ROCE_UNUSED",
        None,
        "networks.fabric.roce",
    ),
    # acceptance
    (
        "single node above nvlink",
        "slurm",
        brief_set(("acceptance.single_node_busbw_gbps", 451)),
        "ACCEPT_SINGLE_NODE_ABOVE_LIMIT",
        None,
        "acceptance.single_node_busbw_gbps",
    ),
    (
        "pool floor above pcie",
        "k8s",
        brief_set(("pools.1.acceptance.single_node_busbw_gbps", 40)),
        "ACCEPT_SINGLE_NODE_ABOVE_LIMIT",
        None,
        "pools[1].acceptance.single_node_busbw_gbps",
    ),
    (
        "multi node above fabric",
        "slurm",
        brief_set(("acceptance.multi_node_busbw_gbps", 401)),
        "ACCEPT_MULTI_NODE_ABOVE_LIMIT",
        None,
        "acceptance.multi_node_busbw_gbps",
    ),
    (
        "multi node above fewer nics",
        "slurm",
        brief_set(("pools.0.nics_per_node", 4)),
        "ACCEPT_MULTI_NODE_ABOVE_LIMIT",
        None,
        "acceptance.multi_node_busbw_gbps",
    ),
    (
        "rdma pairs floor above the line rate",
        "slurm",
        brief_set(("acceptance.rdma_pairs", {"mode": "all", "min_gbps": 51})),
        "ACCEPT_RDMA_PAIRS_FLOOR",
        None,
        "acceptance.rdma_pairs.min_gbps",
    ),
    # all mode on a pool whose N-1 rounds take more than 30 minutes (400 nodes: about 53 minutes)
    (
        "rdma pairs all on 400 nodes",
        "slurm",
        both(
            brief_set(("acceptance.rdma_pairs", {"mode": "all"})),
            *[add_to_group("gpu_h100", f"extra{i:03d}") for i in range(400)],
        ),
        "ACCEPT_RDMA_PAIRS_ALL_LONG",
        None,
        "acceptance.rdma_pairs.mode",
    ),
    (
        "rdma pairs fraction zero",
        "slurm",
        brief_set(("acceptance.rdma_pairs", {"mode": "rail", "min_fraction": 0})),
        "ACCEPT_RDMA_PAIRS_FLOOR",
        None,
        "acceptance.rdma_pairs.min_fraction",
    ),
    ("max_wrong", "slurm", brief_set(("acceptance.max_wrong", 1)), "ACCEPT_MAX_WRONG", None, "acceptance.max_wrong"),
    (
        "max_wrong waived",
        "slurm",
        brief_set(("acceptance.max_wrong", 1), ("acceptance.max_wrong_waived", True)),
        "ACCEPT_MAX_WRONG_WAIVED",
        None,
        "acceptance.max_wrong",
    ),
    (
        "min above max bytes",
        "slurm",
        brief_set(("acceptance.min_bytes", "16G")),
        "ACCEPT_SIZE_RANGE",
        None,
        "acceptance.min_bytes",
    ),
    (
        "firmware minimum the gate cannot order",
        "slurm",
        brief_set(("pools.0.acceptance", {"firmware": {"min": {"vbios": "96.0.99"}}})),
        "ACCEPT_FIRMWARE_MIN",
        None,
        "pools[0].acceptance.firmware.min.vbios",
    ),
    # the GPU diagnostics on a node the dcgm role installs nothing on
    (
        "dcgm diag without dcgm packages",
        "slurm",
        both(brief_set(("acceptance.dcgm_diag.level", 2)), host_set("gpu002", "dcgm_packages", [])),
        "ACCEPT_DCGM_DIAG_NO_DCGM",
        "gpu002",
        "dcgm_packages",
    ),
    (
        "link error growth the counter cannot reach",
        "slurm",
        brief_set(("acceptance.link_errors", {"max_growth": {"link_downed": 255, "symbol_error": 65534}})),
        "ACCEPT_LINK_ERRORS_ABOVE_LIMIT",
        None,
        "acceptance.link_errors.max_growth.link_downed",
    ),
    # the acceptance launcher, as the first controller sees it (inventory or -e)
    (
        "launcher unknown",
        "slurm",
        host_set("ctl01", "acceptance_launcher", "pdsh"),
        "ACCEPT_LAUNCHER_INVALID",
        "ctl01",
        "acceptance_launcher",
    ),
    (
        "mpijob on slurm",
        "slurm",
        _hosts_set(
            "ctl01", acceptance_launcher="mpijob", acceptance_container_image="nvcr.io/nvidia/pytorch:25.01-py3"
        ),
        "ACCEPT_LAUNCHER_PLANE",
        "ctl01",
        "acceptance_launcher",
    ),
    (
        "srun on kubernetes",
        "k8s",
        host_set("cp01", "acceptance_launcher", "srun"),
        "ACCEPT_LAUNCHER_PLANE",
        "cp01",
        "acceptance_launcher",
    ),
    (
        "mpijob without an image",
        "k8s",
        both(host_set("cp01", "acceptance_launcher", "mpijob"), host_set("cp01", "acceptance_container_image", DELETE)),
        "ACCEPT_IMAGE_MISSING",
        None,
        "acceptance.workload.image",
    ),
    (
        "default launcher (mpijob) without an image anywhere",
        "k8s",
        host_set("cp01", "acceptance_container_image", DELETE),
        "ACCEPT_IMAGE_MISSING",
        None,
        "acceptance.workload.image",
    ),
    (
        "default launcher (mpijob), the brief's workload image empty",
        "k8s",
        both(host_set("cp01", "acceptance_container_image", DELETE), brief_set(("acceptance.workload.image", " "))),
        "ACCEPT_IMAGE_MISSING",
        None,
        "acceptance.workload.image",
    ),
    (
        "mpijob on slurm, the brief's workload image does not count",
        "slurm",
        both(host_set("ctl01", "acceptance_launcher", "mpijob"), brief_set(("acceptance.workload.image", "img:1"))),
        "ACCEPT_IMAGE_MISSING",
        "ctl01",
        "acceptance_container_image",
    ),
    (
        "mpijob with an empty image",
        "k8s",
        _hosts_set("cp01", acceptance_launcher="mpijob", acceptance_container_image=" "),
        "ACCEPT_IMAGE_MISSING",
        "cp01",
        "acceptance_container_image",
    ),
    # the API server's stable address with 3 control-plane nodes
    (
        "3 control-plane nodes without a VIP",
        "k8s",
        brief_set(("networks.kubernetes.api_vip", DELETE)),
        "K8S_API_VIP_MISSING",
        None,
        "networks.kubernetes.api_vip",
    ),
    (
        "VIP not an address",
        "k8s",
        brief_set(("networks.kubernetes.api_vip", "api.example")),
        "K8S_API_VIP_INVALID",
        None,
        "networks.kubernetes.api_vip",
    ),
    (
        "VIP outside the management network",
        "k8s",
        brief_set(("networks.kubernetes.api_vip", "10.40.4.10")),
        "K8S_API_VIP_OUTSIDE",
        None,
        "networks.kubernetes.api_vip",
    ),
    (
        "VIP the management network's broadcast",
        "k8s",
        brief_set(("networks.kubernetes.api_vip", "10.40.3.255")),
        "K8S_API_VIP_OUTSIDE",
        None,
        "networks.kubernetes.api_vip",
    ),
    (
        "VIP a control-plane node's own address",
        "k8s",
        brief_set(("networks.kubernetes.api_vip", "10.40.0.11")),
        "K8S_API_VIP_IN_USE",
        None,
        "networks.kubernetes.api_vip",
    ),
    (
        "VIP the gateway",
        "k8s",
        brief_set(("networks.kubernetes.api_vip", "10.40.0.1")),
        "K8S_API_VIP_IN_USE",
        None,
        "networks.kubernetes.api_vip",
    ),
    # Kubernetes topology labels from the inventory's rack / leaf_switch
    ("rack not a label value", "k8s", host_set("h200-001", "rack", "row 3"), "K8S_TOPOLOGY_LABEL", "h200-001", "rack"),
    (
        "leaf switch not a label value",
        "k8s",
        host_set("l40s-001", "leaf_switch", "-spine"),
        "K8S_TOPOLOGY_LABEL",
        "l40s-001",
        "leaf_switch",
    ),
    (
        "rack too long for its leaf label",
        "k8s",
        host_set("h200-001", "rack", "r" * 60),
        "K8S_TOPOLOGY_LABEL",
        "h200-001",
        "rack",
    ),
    # tenants
    ("quota above GPUs", "slurm", brief_set(("tenants.0.gpus", 49)), "TENANT_QUOTA_EXCEEDS", None, "tenants"),
    ("tenant twice", "slurm", brief_set(("tenants.1.name", "research")), "TENANT_DUPLICATE", None, "tenants[1].name"),
    (
        "tenant unknown pool",
        "k8s",
        brief_set(("tenants.0.pools", ["b200-train"])),
        "TENANT_UNKNOWN_POOL",
        None,
        "tenants[0].pools",
    ),
    # downloads
    (
        "nccl-tests unchecked",
        "slurm",
        host_set("gpu001", "nccl_tests_checksum", ""),
        "DOWNLOAD_NO_CHECKSUM",
        None,
        "nccl_tests_checksum",
    ),
    # --- topology/block for an NVL72 pool (preflight/slurm_topology.py): 4 GPUs a node, 18 a rack
    (
        "nvl72 on a slurm too old",
        "slurm",
        both(NVL72_POOL, brief_set(("software.slurm", "22.05"))),
        "SLURM_BLOCK_VERSION",
        None,
        "software.slurm",
    ),
    (
        "nvl72 node without its rack",
        "slurm",
        both(NVL72_POOL, host_set("gpu003", "rack", DELETE)),
        "SLURM_BLOCK_NO_RACK",
        "gpu003",
        "rack",
    ),
    (
        "nvl72 rack holding 19 nodes",
        "slurm",
        both(NVL72_POOL, *(add_to_group("gpu_h100", f"gpu{200 + i}", rack="a01") for i in range(15))),
        "SLURM_BLOCK_RACK_OVERFULL",
        None,
        "rack (a01)",
    ),
    ("nvl72 partial rack", "slurm", NVL72_POOL, "SLURM_BLOCK_RACK_PARTIAL", None, "rack (a01)"),
]


def _run(name, mutate):
    brief, groups, hostvars = site(name)
    mutate(brief, groups, hostvars)
    return check(brief, groups, hostvars)


@pytest.mark.parametrize(
    ("site_name", "mutate", "code", "host", "field"), [c[1:] for c in FAILING], ids=[c[0] for c in FAILING]
)
def test_check_fails(site_name, mutate, code, host, field):
    violations = _run(site_name, mutate)
    hits = [v for v in violations if v["code"] == code]
    assert hits, f"{code} not raised; got {violations}"
    assert any(v["host"] == host and v["field"] == field for v in hits), hits
    for v in hits:
        assert "expected" in v["message"] and "found" in v["message"], v
        assert len(v["message"]) < 600


# (id, site, mutation): valid variants near each check's boundary — no error (warnings allowed where noted).
PASSING = [
    ("slurm example", "slurm", brief_set()),
    ("k8s example", "k8s", brief_set()),
    (
        "mpijob with its image on kubernetes",
        "k8s",
        _hosts_set("cp01", acceptance_launcher="mpijob", acceptance_container_image="nvcr.io/nvidia/pytorch:25.01-py3"),
    ),
    ("mpirun on slurm", "slurm", host_set("ctl01", "acceptance_launcher", "mpirun")),
    ("mpirun on kubernetes", "k8s", host_set("cp01", "acceptance_launcher", "mpirun")),
    (
        "one control-plane node needs no VIP",
        "k8s",
        both(
            brief_set(("networks.kubernetes.api_vip", DELETE)),
            lambda brief, groups, hostvars: groups.update(k8s_control_plane=["cp01"]),
        ),
    ),
    (
        "a leaf switch beside a long rack",
        "k8s",
        both(host_set("h200-001", "rack", "r" * 60), host_set("h200-001", "leaf_switch", "sw1")),
    ),
    ("a templated rack", "k8s", host_set("h200-001", "rack", "{{ rack_of[inventory_hostname] }}")),
    ("a rack on slurm is not a label", "slurm", host_set("gpu001", "rack", "row 3")),
    (
        "mpirun on kubernetes needs no image",
        "k8s",
        both(host_set("cp01", "acceptance_launcher", "mpirun"), host_set("cp01", "acceptance_container_image", DELETE)),
    ),
    (
        "default launcher (mpijob) with the brief's workload image",
        "k8s",
        both(
            host_set("cp01", "acceptance_container_image", DELETE),
            brief_set(
                (
                    "acceptance.workload",
                    {
                        "command": "python train.py",
                        "checkpoint_dir": "/ckpt",
                        "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    },
                )
            ),
        ),
    ),
    ("a launcher template is left to the role", "slurm", host_set("ctl01", "acceptance_launcher", "{{ my_launcher }}")),
    ("mpijob on a controller other than the first", "k8s", host_set("cp02", "acceptance_launcher", "mpijob")),
    ("group_vars and host_vars", "gvars", brief_set(("tenants", []))),
    (
        "mig with a valid profile",
        "slurm",
        brief_set(("pools.0.sharing", "mig"), ("pools.0.sharing_config", {"mig_profile": "1g.10gb"})),
    ),
    ("time-slicing with 2 replicas", "k8s", brief_set(("pools.1.sharing_config", {"replicas": 2}))),
    (
        "4gpu topology with 4 GPUs",
        "slurm",
        brief_set(("pools.0.topology", "4gpu-sxm-nvlink"), ("pools.0.gpus_per_node", 4)),
    ),
    (
        "cuda 13 with its driver and nccl",
        "slurm",
        brief_set(("software.cuda", "13.0"), ("software.driver", "580.65.06"), ("software.nccl", "2.27.7")),
    ),
    ("cuda 12.8 at its minimum driver", "slurm", brief_set(("software.driver", "570.26"))),
    (
        "b200 on r570 open",
        "slurm",
        brief_set(("pools.0.accelerator", "b200-sxm-180gb"), ("acceptance.single_node_busbw_gbps", 800)),
    ),
    (
        "inbox rdma without doca pin",
        "slurm",
        brief_set(("software.rdma_stack", "inbox"), ("software.doca_ofed", DELETE)),
    ),
    ("slurm 2 controllers", "slurm", add_to_group("slurm_controllers", "ctl02", **CTL2)),
    ("k8s 1 control plane", "k8s", lambda b, g, h: [g["k8s_control_plane"].pop(), g["k8s_control_plane"].pop()]),
    (
        "k8s 5 control planes",
        "k8s",
        both(
            add_to_group("k8s_control_plane", "cp04", **K8S_CTL), add_to_group("k8s_control_plane", "cp05", **K8S_CTL5)
        ),
    ),
    (
        "no storage network, no storage_ip",
        "slurm",
        both(brief_set(("networks.storage", DELETE)), host_set("gpu003", "storage_ip", DELETE)),
    ),
    (
        "fabric none, no nics, no fabric_ips",
        "k8s",
        both(
            brief_set(
                ("networks.fabric.type", "none"),
                ("networks.fabric.rails", []),
                ("networks.fabric.roce", DELETE),
                ("networks.fabric.mtu", DELETE),
                ("pools.0.nics_per_node", 0),
                ("pools.0.gpudirect_rdma", False),
            ),
            *[host_set(f"h200-00{i}", "fabric_ips", DELETE) for i in range(1, 5)],
        ),
    ),
    (
        "ipv6 management",
        "slurm",
        both(
            brief_set(("networks.management.cidr", "fd00:20::/64"), ("networks.management.gateway", "fd00:20::1")),
            *[
                host_set(h, "ansible_host", f"fd00:20::{n}")
                for n, h in enumerate(["ctl01"] + [f"gpu00{i}" for i in range(1, 9)], start=10)
            ],
        ),
    ),
    (
        "floors at the ceiling",
        "slurm",
        brief_set(("acceptance.single_node_busbw_gbps", 450), ("acceptance.multi_node_busbw_gbps", 400)),
    ),
    (
        "floors derived from the catalogue",
        "slurm",
        brief_set(("acceptance.single_node_busbw_gbps", DELETE), ("acceptance.multi_node_busbw_gbps", DELETE)),
    ),
    ("quota equal to GPUs", "slurm", brief_set(("tenants.0.gpus", 48))),
    ("roce mtu 9000", "k8s", brief_set(("networks.fabric.mtu", 9000))),
    (
        "ethernet without gpudirect",
        "slurm",
        brief_set(
            ("networks.fabric.type", "ethernet"), ("networks.fabric.mtu", 9000), ("pools.0.gpudirect_rdma", False)
        ),
    ),
]


@pytest.mark.parametrize(("site_name", "mutate"), [c[1:] for c in PASSING], ids=[c[0] for c in PASSING])
def test_check_passes(site_name, mutate):
    violations = _run(site_name, mutate)
    assert codes(violations, "error") == set(), violations


def test_examples_are_clean_with_no_warnings():
    for name in ("slurm", "k8s"):
        assert _run(name, brief_set()) == []


def test_broken_fixture_reports_everything_at_once():
    violations = _run("broken", brief_set())
    assert codes(violations) >= {
        "VER_CUDA_DRIVER",
        "VER_NCCL_CUDA",
        "ACCEPT_MAX_WRONG",
        "ACCEPT_SINGLE_NODE_ABOVE_LIMIT",
        "HOST_NAME_INVALID",
        "HOST_ADDR_DUPLICATE",
        "HOST_ADDR_OUTSIDE_NET",
        "HOST_FABRIC_COUNT",
        "HOST_VAR_MISSING",
    }


@pytest.mark.parametrize(
    ("brief", "groups", "hostvars"),
    [
        (None, None, None),
        ("x", [], "y"),
        ({}, {"all": "notalist"}, {}),
        ({"pools": [{"group": ["x"]}]}, {"all": [1, None]}, {1: 2}),
    ],
)
def test_garbage_never_crashes(brief, groups, hostvars):
    violations = check(brief, groups, hostvars)
    assert violations and all(set(v) == {"severity", "code", "host", "field", "message"} for v in violations)


def test_effective_brief_fills_floors():
    brief, _g, _h = site("slurm")
    del brief["acceptance"]["single_node_busbw_gbps"], brief["acceptance"]["multi_node_busbw_gbps"]
    pool = effective_brief(brief)["pools"][0]
    assert pool["acceptance"] == {"single_node_busbw_gbps": 440.0, "multi_node_busbw_gbps": 340.0}


@pytest.mark.parametrize(
    ("text", "n"), [("8G", 8 * 1024**3), ("512M", 512 * 1024**2), (1024, 1024), ("8", 8), ("x", None)]
)
def test_size_bytes(text, n):
    assert size_bytes(text) == n


@pytest.mark.parametrize("kind", ["slurm", "k8s"])
def test_a_host_whose_variables_are_not_a_mapping_is_reported_not_a_crash(kind):
    # Ansible's hostvars are always mappings; the filter takes anything, and every phase that reads a
    # host's variables (the controller's launcher, the API VIP's users, the topology labels) must cope.
    brief, groups, hostvars = site(kind)
    for host in hostvars:
        hostvars[host] = "not a mapping"
    violations = check(brief, groups, hostvars)
    assert "HOST_VAR_MISSING" in codes(violations)
    assert {v["host"] for v in violations if v["code"] == "HOST_VAR_MISSING"} == set(hostvars)
