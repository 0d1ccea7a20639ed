# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The preflight violation codes: one table, the only place a code's severity and wording live.

Each entry gives a code's severity, the section (the phase, and the heading of the Codes section of
docs/preflight-checks.md) it belongs to, its message template (``str.format`` placeholders; a code
with several wordings has one template per variant), a one-line "what" for the docs, and through its
section the anchor of that heading. The checks build their violations with ``make(code, field,
host=..., **values)``; ``scripts/gen_preflight_doc`` writes the docs' tables from this table.

Codes whose message is built by another module (the brief schema's ``SCHEMA_*``, the CLI's inventory
reader's ``INPUT_VAULT_SKIPPED``) are listed with ``template=None`` and their ``producer``: their
severity here is the one those modules emit (a unit test holds them equal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING

DOC = "docs/preflight-checks.md"


@dataclass(frozen=True)
class Section:
    """One phase's table in the docs: its heading (GitHub derives the anchor from it) and any prose after it."""

    key: str
    heading: str
    anchor: str
    after: str = ""


@dataclass(frozen=True)
class Code:
    code: str
    severity: str
    section: str
    what: str
    template: str | Mapping[str, str] | None
    producer: str = "preflight"

    @property
    def anchor(self) -> str:
        return f"{DOC}#{SECTIONS[self.section].anchor}"


_FLOORS_NOTE = (
    "Floors are checked per pool (`pools[].acceptance` overrides `acceptance`); a global floor applies to every\n"
    "pool, so a cluster mixing SXM and PCIe pools should set floors per pool. Note: with NVLink SHARP (NVLS)\n"
    "on NVSwitch systems, measured single-node busbw can exceed the per-GPU NVLink figure (~480 GB/s on\n"
    "H100/H200); the gate follows the NVLink ceiling, so such floors are rejected today."
)

SECTIONS: dict[str, Section] = {
    s.key: s
    for s in (
        Section(
            "schema",
            "Schema (`brief.yml` shape) — [brief.md](brief.md) lists every field",
            "schema-briefyml-shape--briefmd-lists-every-field",
        ),
        Section(
            "catalogue",
            "Catalogue (accelerators and topologies: `module_utils/brief/catalogue.py`)",
            "catalogue-accelerators-and-topologies-module_utilsbriefcataloguepy",
        ),
        Section("versions", "Versions (`module_utils/brief/compat.py`)", "versions-module_utilsbriefcompatpy"),
        Section("groups", "Groups", "groups"),
        Section(
            "hosts",
            "Hosts (pool and controller hosts; duplicates across every inventory host)",
            "hosts-pool-and-controller-hosts-duplicates-across-every-inventory-host",
        ),
        Section("networks", "Networks", "networks"),
        Section("fabric", "Fabric", "fabric"),
        Section("acceptance", "Acceptance", "acceptance", after=_FLOORS_NOTE),
        Section("tenants", "Tenants", "tenants"),
        Section(
            "kubernetes",
            "Kubernetes (`control_plane: kubernetes` only; [kubernetes.md](kubernetes.md))",
            "kubernetes-control_plane-kubernetes-only-kubernetesmd",
        ),
        Section(
            "storage",
            "Storage, storage acceptance and cost (`storage:`, `acceptance.storage`, `cost:`; "
            "[storage.md](storage.md), [cost.md](cost.md))",
            "storage-storage-acceptance-and-cost-storage-acceptancestorage-cost-storagemd-costmd",
        ),
        Section(
            "downloads",
            "Downloads (what the roles fetch with `get_url`; [security.md](security.md#downloads))",
            "downloads-what-the-roles-fetch-with-get_url-securitymd",
        ),
    )
}

_SCHEMA = "module_utils/brief/schema.py"
_READER = "module_utils/inventory/reader.py"
_STORAGE = "module_utils/storage/preflight.py"
_IMAGE = "expected the production image the MPIJob runs (nccl-tests and Open MPI in it) for acceptance_launcher mpijob"

# (code, severity, section, what, template[, producer]); the order within a section is the docs' order.
_ROWS: tuple[tuple, ...] = (
    # --- schema: messages built by brief/schema.py
    ("SCHEMA_UNKNOWN_KEY", ERROR, "schema", "a key the format does not define (typos), with its path", None, _SCHEMA),
    ("SCHEMA_MISSING_KEY", ERROR, "schema", "a required key is absent or null", None, _SCHEMA),
    (
        "SCHEMA_WRONG_TYPE",
        ERROR,
        "schema",
        'wrong type (string for a number, `"yes"` for a boolean, ...)',
        None,
        _SCHEMA,
    ),
    (
        "SCHEMA_BAD_ENUM",
        ERROR,
        "schema",
        "value not among the allowed choices (control plane, fabric type, sharing, topology, ...)",
        None,
        _SCHEMA,
    ),
    ("SCHEMA_OUT_OF_RANGE", ERROR, "schema", "number or list length outside its bounds", None, _SCHEMA),
    (
        "SCHEMA_BAD_FORMAT",
        ERROR,
        "schema",
        "malformed version, size, name, path, label or taint (the whole value must match)",
        None,
        _SCHEMA,
    ),
    (
        "SCHEMA_CONTROL_CHAR",
        ERROR,
        "schema",
        "a control character (newline, tab, NUL, ...) in a string; only `cluster.description` and "
        "`acceptance.workload.command` may span lines",
        None,
        _SCHEMA,
    ),
    (
        "SCHEMA_TEMPLATE_SYNTAX",
        WARNING,
        "schema",
        "Jinja delimiters (`{{`, `{%`, `{#`) in a string: the brief is never templated, the text is written as is",
        None,
        _SCHEMA,
    ),
    (
        "SCHEMA_UNQUOTED_VERSION",
        WARNING,
        "schema",
        "a version written as a YAML number (`12.10` reads as 12.1): quote it",
        None,
        _SCHEMA,
    ),
    # --- catalogue
    (
        "CAT_UNKNOWN_ACCELERATOR",
        ERROR,
        "catalogue",
        "`pools[].accelerator` is not a catalogue key",
        "expected a catalogue key ({keys}), found {found}",
    ),
    (
        "CAT_TOPOLOGY_GPUS",
        ERROR,
        "catalogue",
        "`gpus_per_node` differs from what the topology implies (`8gpu-sxm-nvlink` → 8)",
        "expected {expected} GPUs per node (topology {topology}), found gpus_per_node {found}",
    ),
    (
        "CAT_TOPOLOGY_FORM_FACTOR",
        ERROR,
        "catalogue",
        "accelerator form factor does not fit the topology (SXM in `pcie`; `nvl72` other than GB200)",
        {
            "form_factor": "expected a {form_factors} accelerator for topology {topology}, found {acc} ({form_factor})",
            "nvl72": "expected gb200-nvl72 for topology nvl72, found {acc}",
        },
    ),
    (
        "CAT_TOPOLOGY_NVLINK",
        ERROR,
        "catalogue",
        "`pcie-nvlink-bridge` with a card that has no NVLink",
        "expected an NVLink accelerator for pcie-nvlink-bridge, found {acc} (no NVLink): use pcie",
    ),
    (
        "CAT_MIG_UNSUPPORTED",
        ERROR,
        "catalogue",
        "`sharing: mig` on an accelerator without MIG",
        "expected a MIG-capable accelerator for sharing mig, found {acc} (no MIG)",
    ),
    (
        "CAT_MIG_PROFILE_MISSING",
        ERROR,
        "catalogue",
        "`sharing: mig` without `sharing_config.mig_profile`",
        "expected sharing_config.mig_profile for sharing mig (e.g. {example}), found none",
    ),
    (
        "CAT_MIG_PROFILE_UNKNOWN",
        ERROR,
        "catalogue",
        "the MIG profile does not exist on that accelerator",
        "expected one of {acc}'s profiles ({profiles}), found {found!r}",
    ),
    (
        "CAT_TIMESLICING_REPLICAS",
        ERROR,
        "catalogue",
        "`sharing: time-slicing` without `sharing_config.replicas` >= 2",
        "expected sharing_config.replicas >= 2 for sharing time-slicing, found {found}",
    ),
    (
        "CAT_SHARING_CONFIG_UNUSED",
        WARNING,
        "catalogue",
        "`mig_profile` / `replicas` given for another sharing mode",
        "expected {key} only with sharing {mode}, found sharing {sharing}",
    ),
    (
        "POOL_DUPLICATE_NAME",
        ERROR,
        "catalogue",
        "two pools with the same name",
        "expected unique pool names, found {name!r} again (first at pools[{first}])",
    ),
    # --- versions
    (
        "VER_CUDA_DRIVER",
        ERROR,
        "versions",
        "driver below the CUDA toolkit's minimum (NVIDIA CUDA release notes, Table 3, Linux x86_64: 12.8 → 570.26, "
        "13.0 → 580.65.06, ...)",
        "expected driver >= {minimum} for CUDA {cuda}, found {driver}",
    ),
    (
        "VER_CUDA_UNKNOWN",
        WARNING,
        "versions",
        "CUDA minor not in the table: checked against the major's minor-compatibility floor only",
        {
            "unknown": "expected a CUDA release in NVIDIA's driver table (11.x-13.x), found {cuda!r}",
            "minor": "expected a CUDA release in gpufleet's copy of NVIDIA's Table 3, found {cuda}: checked against "
            "the CUDA {major}.x minor-compatibility floor {minimum} only",
        },
    ),
    (
        "VER_CUDA_PACKAGE_UNKNOWN",
        ERROR,
        "versions",
        "CUDA release the cuda role cannot install: not in its `cuda_package_versions` (the vendor matrix's CUDA "
        "rows, which give each minor's exact cuda-toolkit package version), unless every GPU host's inventory sets "
        "`cuda_package_version` or its own `cuda_package_versions` entry for it",
        "expected a CUDA release the cuda role can install ({known}: cuda_package_versions), found {cuda}: add it "
        "to the vendor matrix's CUDA rows with its cuda-toolkit package version, or set cuda_package_version in "
        "the GPU hosts' group_vars",
    ),
    (
        "VER_DRIVER_BRANCH",
        ERROR,
        "versions",
        "driver branch below the accelerator's minimum (B200 → R570, H200 → R550, H100 → R525, ...)",
        "expected driver branch >= R{minimum} for {pool} {acc}, found {driver} (R{branch})",
    ),
    (
        "VER_CUDA_ACCELERATOR",
        ERROR,
        "versions",
        "CUDA older than the accelerator needs (Blackwell → 12.8)",
        "expected CUDA >= {minimum} for {pool} {acc}, found {cuda}",
    ),
    (
        "VER_NCCL_CUDA",
        ERROR,
        "versions",
        "NCCL not built for the CUDA major in use (2.26.x: CUDA 12 only; CUDA 13 from 2.27.7)",
        "expected an NCCL built for CUDA {major}.x (NCCL {nccl} is built for CUDA {majors}.x), found CUDA {cuda}",
    ),
    (
        "VER_NCCL_CUDA_NOT_BUILT",
        ERROR,
        "versions",
        "NCCL x CUDA pair NVIDIA did not build: the repository listing of that NCCL release has no "
        "`+cuda<major.minor>` package for the brief's CUDA (vendor matrix, nccl built_for_cuda)",
        "expected a CUDA minor NVIDIA built NCCL {nccl} for ({built}), found CUDA {cuda}: NVIDIA publishes no "
        "libnccl {nccl}+cuda{cuda} (source: {source}, read {checked}); pin an NCCL release built for CUDA {cuda} "
        "or a CUDA minor listed",
    ),
    (
        "VER_NCCL_CUDA_UNCONFIRMED",
        WARNING,
        "versions",
        "NCCL x CUDA pair gpufleet cannot confirm NVIDIA built (the vendor matrix lists only part of that NCCL "
        "release's builds, or none)",
        {
            "partial": "expected a CUDA minor NCCL {nccl} is known to be built for ({built}), found CUDA {cuda}: "
            "not confirmed published (source: {source}, read {checked}; {note}); check NVIDIA's repository for "
            "libnccl {nccl}+cuda{cuda}",
            "unknown": "expected an NCCL release whose CUDA builds the vendor matrix lists, found NCCL {nccl}: "
            "whether NVIDIA built it for CUDA {cuda} is not known here; check NVIDIA's repository for "
            "libnccl {nccl}+cuda{cuda}",
        },
    ),
    (
        "VER_NOT_PUBLISHED",
        ERROR,
        "versions",
        "a component NVIDIA does not publish for the brief's OS or version (DCGM on debian-13, proprietary "
        "kernel modules from driver 620, ...: vendor matrix, `published` rows)",
        "expected {what} NVIDIA publishes, found {found}: {fact} (source: {source}, read {checked})",
    ),
    (
        "VER_NOT_PUBLISHED_UNCONFIRMED",
        WARNING,
        "versions",
        "a component NVIDIA probably does not publish for the brief's OS or version (a driver branch missing "
        "from debian13's repository, dcgm-exporter on debian-13): the vendor matrix's row is unconfirmed",
        "expected {what} NVIDIA publishes, found {found}: probably not published: {fact} (source: {source}, "
        "read {checked}); check NVIDIA's repository before the run",
    ),
    (
        "VER_NCCL_UNKNOWN",
        WARNING,
        "versions",
        "NCCL version outside gpufleet's table",
        "expected an NCCL release gpufleet knows (>= 2.8), found {nccl!r}",
    ),
    (
        "VER_OPEN_MODULES_REQUIRED",
        ERROR,
        "versions",
        "`driver_flavor: proprietary` on Blackwell (open kernel modules only)",
        "expected driver_flavor open: {pool} {acc} ({architecture}) runs only with the open kernel modules; "
        "found proprietary",
    ),
    (
        "VER_DOCA_OFED_MISSING",
        ERROR,
        "versions",
        "`rdma_stack: doca-ofed` without a `doca_ofed` pin",
        "expected a doca_ofed version pin with rdma_stack doca-ofed, found none",
    ),
    # --- groups
    (
        "GROUP_MISSING",
        ERROR,
        "groups",
        "a pool's group or the controllers' group is not in the inventory",
        "expected inventory group {group!r} for {owner}, found no such group",
    ),
    (
        "GROUP_EMPTY",
        ERROR,
        "groups",
        "a pool's group has no hosts",
        "expected at least one host in group {group!r}, found none",
    ),
    (
        "GROUP_HOST_IN_TWO_POOLS",
        ERROR,
        "groups",
        "a host belongs to two pools' groups (reported per host)",
        "expected each host in one pool, found it in {first} (group {first_group!r}) and {second} "
        "(group {second_group!r})",
    ),
    (
        "GROUP_CONTROLLERS_SIZE",
        ERROR,
        "groups",
        "Slurm: 1\u20132 controllers; Kubernetes: 1 or an odd number >= 3",
        {
            "slurm": "expected 1 Slurm controller (or 2: primary and backup), found {n} in group {group!r}",
            "kubernetes": "expected 1 Kubernetes control-plane node or an odd number >= 3 (etcd quorum), "
            "found {n} in group {group!r}",
        },
    ),
    (
        "SLURM_BLOCK_VERSION",
        ERROR,
        "groups",
        "a pool's topology is an NVLink domain (`nvl72`): topology/block, which needs Slurm 23.11 or later",
        "expected Slurm >= {minimum} for topology/block ({pool}, topology {topology}), found software.slurm "
        "{found}; pin a Slurm of 23.11 or later (Debian 13 ships 24.11)",
    ),
    (
        "SLURM_BLOCK_NO_RACK",
        ERROR,
        "groups",
        "a node of an NVLink-domain pool without its rack: topology/block places it in no block",
        "expected the host variable rack (the NVL72 rack of this node: its block in topology/block) for "
        "{pool}, topology {topology}, found none",
    ),
    (
        "SLURM_BLOCK_RACK_OVERFULL",
        ERROR,
        "groups",
        "more nodes in one rack than one NVLink domain holds",
        "expected at most {size} nodes in rack {rack} (one NVLink domain: {gpus} GPUs / {per_node} per node, "
        "{pool}), found {n}: {nodes}; give each rack its own name",
    ),
    (
        "SLURM_BLOCK_RACK_PARTIAL",
        ERROR,
        "groups",
        "a rack with fewer nodes than its NVLink domain: its block is smaller than `BlockSizes`, and Slurm's "
        "slurmctld (24.11) refuses to start on it (`Block configuration ... children count lower than "
        "bblock_node_cnt`)",
        "expected {size} nodes in rack {rack} (a whole NVLink domain, {pool}; slurmctld refuses a smaller block), "
        "found {n}",
    ),
    # --- hosts
    (
        "HOST_NAME_INVALID",
        ERROR,
        "hosts",
        "not an RFC 1123 label (lower case required for Kubernetes)",
        "expected an RFC 1123 label{extra}: letters, digits and '-', 1-63 characters, not starting or ending "
        "with '-'; found {found}",
    ),
    (
        "HOST_VAR_MISSING",
        ERROR,
        "hosts",
        "`ansible_host`, `bmc_ip`, `storage_ip` (when a storage network exists) or `fabric_ips` (when the pool has "
        "fabric NICs) absent",
        {
            "address": "expected {key} (an address in networks.{net}), found none",
            "fabric": "expected fabric_ips: {nics} addresses, address i in rails[i]; found none",
        },
    ),
    (
        "HOST_VAR_WRONG_TYPE",
        ERROR,
        "hosts",
        "`fabric_ips` is not a list",
        "expected a list of {nics} addresses, found {found}",
    ),
    (
        "HOST_ADDR_INVALID",
        ERROR,
        "hosts",
        "not an IPv4/IPv6 address (DNS names, templates, lists, ...)",
        "expected an IP address, found {found}",
    ),
    (
        "HOST_ADDR_OUTSIDE_NET",
        ERROR,
        "hosts",
        "address outside its network; `fabric_ips[i]` outside `rails[i]`",
        "expected an address in networks.{netname} {net}, found {value}",
    ),
    (
        "HOST_ADDR_RESERVED",
        ERROR,
        "hosts",
        "the network or broadcast address of its network",
        "expected a host address of {net}, found its {which} address {value}",
    ),
    (
        "HOST_ADDR_DUPLICATE",
        ERROR,
        "hosts",
        "the same address used twice anywhere in the inventory (names the first user)",
        "expected an address no other host or field uses, found {addr} already used by {other_host} {other_field}",
    ),
    (
        "HOST_FABRIC_COUNT",
        ERROR,
        "hosts",
        "`len(fabric_ips)` differs from the pool's `nics_per_node`",
        "expected {nics} addresses (nics_per_node), found {found}",
    ),
    (
        "HOST_UNASSIGNED",
        WARNING,
        "hosts",
        "an inventory host in no pool and not a controller (gpufleet will not configure it)",
        "expected every inventory host in a pool's group or the controllers group, found it in neither (it is not "
        "configured by gpufleet)",
    ),
    (
        "INPUT_VAULT_SKIPPED",
        WARNING,
        "hosts",
        "CLI only: a vault-encrypted vars file or `!vault` value was not read",
        None,
        _READER,
    ),
    (
        "INVENTORY_INVALID",
        ERROR,
        "hosts",
        "`groups` / `hostvars` passed to the filter are not mappings",
        "expected a mapping of {what}, found {found}",
    ),
    # --- networks
    (
        "NET_CIDR_INVALID",
        ERROR,
        "networks",
        "not a CIDR netaddr accepts (prefix required, dotted quad)",
        "expected a network such as 10.20.0.0/22, found {found} ({error})",
    ),
    (
        "NET_CIDR_HOST_BITS",
        ERROR,
        "networks",
        "host bits set (`10.20.0.5/22`: expected `10.20.0.0/22`)",
        "expected the network address {network}, found {found} (host bits set)",
    ),
    (
        "NET_OVERLAP",
        ERROR,
        "networks",
        "two of management, BMC, storage, every rail, pod and service CIDRs overlap",
        "expected networks that do not overlap, found {net} inside/overlapping {other} ({other_field})",
    ),
    (
        "NET_TOO_SMALL",
        ERROR,
        "networks",
        "fewer usable addresses than hosts (+ gateway); pod CIDR without one /24 per node",
        {
            "addresses": "expected room for {need} addresses, found {net} with {usable} usable",
            "pods": "expected one /{prefix} per node ({nodes} nodes), found {net} with room for {blocks}",
        },
    ),
    (
        "NET_TOO_LARGE",
        ERROR,
        "networks",
        "Kubernetes service CIDR larger than /12 (kube-apiserver limit)",
        "expected a service range of /{limit} or smaller (kube-apiserver limit), found {net}",
    ),
    (
        "NET_MTU_RANGE",
        ERROR,
        "networks",
        "MTU outside its type's range: Ethernet/RoCE 1280\u20139216, InfiniBand (IPoIB datagram) 256\u20134092",
        "expected an MTU of {lo}-{hi} for {kind}, found {mtu}",
    ),
    (
        "NET_GATEWAY_INVALID",
        ERROR,
        "networks",
        "gateway is not an IP address",
        "expected an IP address, found {found}",
    ),
    (
        "NET_GATEWAY_OUTSIDE",
        ERROR,
        "networks",
        "gateway outside its network, or its network/broadcast address",
        "expected a host address inside {net}, found {gateway}",
    ),
    (
        "NET_K8S_MISSING",
        ERROR,
        "networks",
        "`control_plane: kubernetes` without `networks.kubernetes`",
        "expected networks.kubernetes.pod_cidr and service_cidr for control_plane kubernetes, found none",
    ),
    (
        "NET_K8S_UNUSED",
        WARNING,
        "networks",
        "pod/service CIDRs on a Slurm cluster",
        "expected pod/service CIDRs only with control_plane kubernetes, found {plane}",
    ),
    # --- fabric
    (
        "FABRIC_GPUDIRECT_NEEDS_RDMA",
        ERROR,
        "fabric",
        "`gpudirect_rdma: true` on a fabric other than infiniband / roce",
        "expected fabric infiniband or roce for GPUDirect RDMA, found {fabric}",
    ),
    (
        "FABRIC_NONE_WITH_NICS",
        ERROR,
        "fabric",
        "`fabric: none` with `nics_per_node` > 0",
        "expected nics_per_node 0 with fabric none, found {nics}",
    ),
    (
        "FABRIC_RAILS_TOO_FEW",
        ERROR,
        "fabric",
        "fewer rails than a pool's `nics_per_node`",
        "{pool} has {nics} NICs per node: expected at least {nics} rails, found {rails}",
    ),
    (
        "FABRIC_LINK_SPEED_MISSING",
        ERROR,
        "fabric",
        "a fabric without `link_speed_gbps`",
        "expected link_speed_gbps for fabric {fabric} (acceptance derives its ceiling from it), found none",
    ),
    (
        "FABRIC_NONE_WITH_RAILS",
        WARNING,
        "fabric",
        "rails declared for `fabric: none`",
        "expected no rails with fabric none, found {rails}",
    ),
    (
        "FABRIC_ROCE_UNUSED",
        WARNING,
        "fabric",
        "RoCE QoS settings on a non-RoCE fabric",
        "expected RoCE QoS settings only with fabric roce, found fabric {fabric}",
    ),
    # --- acceptance
    (
        "ACCEPT_SINGLE_NODE_ABOVE_LIMIT",
        ERROR,
        "acceptance",
        "single-node floor above the physical ceiling: the accelerator's NVLink figure (per-GPU unidirectional, "
        "H100 SXM 450 GB/s), or PCIe x16 for `pcie`",
        "expected a floor <= {ceiling:g} GB/s, the most {acc} reaches in one node ({topology}, {pool}); "
        "found {floor:g}",
    ),
    (
        "ACCEPT_MULTI_NODE_ABOVE_LIMIT",
        ERROR,
        "acceptance",
        "multi-node floor above `nics_per_node \u00d7 link_speed_gbps / 8` (NVL72: NVLink too)",
        "expected a floor <= {ceiling:g} GB/s, the most the fabric carries ({how}, {pool}); found {floor:g}",
    ),
    (
        "ACCEPT_RDMA_PAIRS_FLOOR",
        ERROR,
        "acceptance",
        "`acceptance.rdma_pairs` floor not physical: `min_fraction` outside (0, 1], `min_gbps` above "
        "`link_speed_gbps / 8` (GB/s), both given, or a floor without a fabric",
        {
            "fraction": "expected a share of the port's line rate in (0, 1], found {found:g}",
            "absolute": "expected a per-port floor <= {ceiling:g} GB/s (networks.fabric.link_speed_gbps "
            "{speed:g} Gb/s / 8), found {found:g} GB/s ({gbit:g} Gb/s)",
            "both": "expected min_fraction or min_gbps, found both ({fraction:g} and {found:g} GB/s)",
            "no_fabric": "expected an RDMA fabric (networks.fabric.type infiniband or roce with link_speed_gbps) "
            "for ib_write_bw between nodes, found {fabric}",
        },
    ),
    (
        "ACCEPT_RDMA_PAIRS_ALL_LONG",
        WARNING,
        "acceptance",
        "`acceptance.rdma_pairs.mode: all` on a pool whose N-1 rounds would take more than 30 minutes (each about "
        "the brief's duration + 3 s; the dispatch itself is two calls per node)",
        "expected mode rail, or all on a pool whose rounds fit in {limit} minutes, found mode all on {nodes} nodes "
        "of {pool}: {rounds} rounds of about {per_round} s, about {minutes} minutes",
    ),
    (
        "ACCEPT_MAX_WRONG",
        ERROR,
        "acceptance",
        "`max_wrong` > 0 without `max_wrong_waived: true`",
        "expected 0 wrong values (set acceptance.max_wrong_waived: true to allow more), found {max_wrong}",
    ),
    (
        "ACCEPT_MAX_WRONG_WAIVED",
        WARNING,
        "acceptance",
        "wrong values tolerated by waiver",
        "expected 0 wrong values, found {max_wrong} tolerated by waiver",
    ),
    (
        "ACCEPT_SIZE_RANGE",
        ERROR,
        "acceptance",
        "`min_bytes` > `max_bytes`",
        "expected min_bytes <= max_bytes ({max_bytes}), found {min_bytes}",
    ),
    (
        "ACCEPT_FIRMWARE_MIN",
        ERROR,
        "acceptance",
        "an `acceptance.firmware.min` (or a pool's) the hardware gate cannot order: VBIOS five two-digit hex "
        "fields, NIC and BIOS dotted decimals",
        "expected {expected}, found {found!r}",
    ),
    (
        "ACCEPT_DCGM_DIAG_NO_DCGM",
        WARNING,
        "acceptance",
        "a node of a pool that runs GPU diagnostics (`acceptance.dcgm_diag.level`, or the pool's own) whose "
        "inventory gives the dcgm role no packages (`dcgm_packages: []`): gpufleet installs no dcgmi there",
        "expected DCGM installed on the nodes of {pool}, which runs dcgmi diag -r {level} in acceptance "
        "(the dcgm role's dcgm_packages), found {found}: the node fails DCGM_DIAG_RUN_FAILED unless the site "
        "installs DCGM itself",
    ),
    (
        "ACCEPT_LINK_ERRORS_ABOVE_LIMIT",
        ERROR,
        "acceptance",
        "a link error counter's tolerated growth (`acceptance.link_errors.max_growth`) is at or above the most the"
        " counter can count",
        "expected less than {top}, the most the {width}-bit {counter} counter counts before it stops (it saturates),"
        " found {value}: that counter could never fail the acceptance",
    ),
    (
        "ACCEPT_LAUNCHER_INVALID",
        ERROR,
        "acceptance",
        "the first controller's `acceptance_launcher` (inventory or `-e`) is not `srun`, `mpirun` or `mpijob`",
        "expected one of {launchers}, found {launcher!r}",
    ),
    (
        "ACCEPT_LAUNCHER_PLANE",
        ERROR,
        "acceptance",
        "`srun` on a Kubernetes brief, or `mpijob` on a Slurm brief",
        "expected a launcher the brief's control plane runs ({fits} for cluster.control_plane {plane}), "
        "found {launcher} (needs {needs})",
    ),
    (
        "ACCEPT_IMAGE_MISSING",
        ERROR,
        "acceptance",
        "`acceptance_launcher: mpijob` (the default on a Kubernetes brief) without the production image the MPIJob "
        "runs: the first controller's `acceptance_container_image` when set (empty), else the brief's "
        "`acceptance.workload.image` (host-free); on a Slurm brief only `acceptance_container_image` counts",
        {
            "host": _IMAGE + ", found {found}",
            "brief": _IMAGE + "{default}, in acceptance.workload.image or the first controller's "
            "acceptance_container_image, found {found}; or set acceptance_launcher: mpirun",
        },
    ),
    # --- tenants
    (
        "TENANT_QUOTA_EXCEEDS",
        WARNING,
        "tenants",
        "quotas sum past the cluster's physical GPUs (pool hosts \u00d7 `gpus_per_node`)",
        "expected quotas summing to at most the cluster's {gpus} GPUs, found {quota}",
    ),
    (
        "TENANT_DUPLICATE",
        ERROR,
        "tenants",
        "two tenants with the same name",
        "expected unique tenant names, found {name!r} again",
    ),
    (
        "TENANT_UNKNOWN_POOL",
        ERROR,
        "tenants",
        "`tenants[].pools` names a pool the brief does not define",
        "expected a pool name ({pools}), found {found}",
    ),
    # --- kubernetes
    (
        "K8S_VERSION_MISSING",
        ERROR,
        "kubernetes",
        "no `software.kubernetes` pin",
        "expected a Kubernetes version pin (e.g. '1.33.4') for control_plane kubernetes, found none",
    ),
    (
        "K8S_VERSION_UNSUPPORTED",
        ERROR,
        "kubernetes",
        "`software.kubernetes` older than 1.31 (kubeadm.k8s.io/v1beta4)",
        "expected Kubernetes >= {minimum} (kubeadm.k8s.io/v1beta4), found {version}",
    ),
    (
        "K8S_VERSION_UNTESTED",
        WARNING,
        "kubernetes",
        "`software.kubernetes` newer than 1.34, the newest gpufleet was tested with",
        "expected Kubernetes <= {tested} (the newest gpufleet was tested with), found {version}",
    ),
    (
        "K8S_GPU_OPERATOR_MISSING",
        ERROR,
        "kubernetes",
        "no `software.gpu_operator` chart pin",
        "expected a GPU Operator chart version pin (e.g. '25.3.4') for control_plane kubernetes, found none",
    ),
    (
        "K8S_VERSION_SKEW",
        ERROR,
        "kubernetes",
        "a host's `kubernetes_node_version`: on a control-plane node not exactly `software.kubernetes`; on a node "
        "newer than it or more than 3 minors older (kubelet skew policy)",
        {
            "malformed": "expected a version such as {version}, found {found}",
            "control_plane": "expected the control plane at software.kubernetes {version} (kubeadm, kubelet and the "
            "control-plane images move together), found {pin}",
            "kubelet": "expected a kubelet between {oldest} and software.kubernetes {version} (version skew "
            "policy), found {pin}",
        },
    ),
    (
        "K8S_POD_CIDR_CNI",
        ERROR,
        "kubernetes",
        "pod CIDR smaller than one CNI block (Calico: /26)",
        "expected a pod network of /{block} or larger ({cni} gives each node /{block} blocks), found {net}",
    ),
    (
        "K8S_MIG_STRATEGY_MIXED",
        WARNING,
        "kubernetes",
        "MIG pools ask for different MIG strategies (the GPU Operator has one: mixed is used)",
        "expected one MIG strategy across the MIG pools (the GPU Operator has one per cluster), found "
        "{strategies}: mixed is used for all",
    ),
    (
        "K8S_TENANT_NAMESPACE_RESERVED",
        ERROR,
        "kubernetes",
        "a tenant named like a system namespace (`default`, `kube-*`, `calico-*`, `gpu-operator`, `kueue-system`, "
        "`tigera-operator`, `gpufleet`)",
        "expected a tenant name that is not a system namespace ({reserved}, kube-*, calico-*), found {name!r}",
    ),
    (
        "K8S_TOPOLOGY_LABEL",
        ERROR,
        "kubernetes",
        "a pool node's `rack` or `leaf_switch` (host variables) is not a Kubernetes label value, or `leaf-<rack>` "
        "(its leaf without a `leaf_switch`) is over 63 characters: they become its `gpufleet.io/rack` / "
        "`gpufleet.io/leaf` labels (Kueue's topology)",
        "expected a Kubernetes label value for the node's gpufleet.io/{label} label (at most 63 letters, digits, "
        "'-', '_' or '.', a letter or digit at both ends), found {found}",
    ),
    (
        "K8S_API_VIP_MISSING",
        ERROR,
        "kubernetes",
        "more than one control-plane node and no `networks.kubernetes.api_vip` (the API server's stable address)",
        "expected a virtual IP in networks.management for the API server of the {n} control-plane nodes (kubeadm's "
        "controlPlaneEndpoint; one node's address stops the cluster with that node), found none",
    ),
    (
        "K8S_API_VIP_INVALID",
        ERROR,
        "kubernetes",
        "`networks.kubernetes.api_vip` is not an IP address",
        "expected an IP address, found {found}",
    ),
    (
        "K8S_API_VIP_OUTSIDE",
        ERROR,
        "kubernetes",
        "`networks.kubernetes.api_vip` outside `networks.management`, or its network or broadcast address",
        "expected a host address in networks.management {net}, found {vip}",
    ),
    (
        "K8S_API_VIP_IN_USE",
        ERROR,
        "kubernetes",
        "`networks.kubernetes.api_vip` is a host's `ansible_host`, `bmc_ip` or `storage_ip`, or the management gateway",
        "expected an address no host uses (the load balancer's own), found {vip} used by {users}",
    ),
    # --- storage, storage acceptance, workload acceptance, cost (storage/preflight.py)
    (
        "STORAGE_SCRATCH_DEVICES_INVALID",
        ERROR,
        "storage",
        "a host's `storage_scratch_devices` is not a list of `/dev/...` paths",
        "expected a list of block devices such as ['/dev/nvme0n1'], found {found}",
        _STORAGE,
    ),
    (
        "STORAGE_SCRATCH_DUPLICATE_DEVICE",
        ERROR,
        "storage",
        "a device named twice in `storage.scratch.devices`, `pools[].scratch_devices` or a host's "
        "`storage_scratch_devices`",
        "expected each scratch device once, found {device} more than once",
        _STORAGE,
    ),
    (
        "STORAGE_SCRATCH_WIPE_INVALID",
        ERROR,
        "storage",
        "a host's `storage_scratch_wipe` (consent to wipe) is not true/false",
        "expected true or false (consent to wipe the scratch devices: a YAML or JSON boolean, e.g. "
        "-e '{{\"storage_scratch_wipe\": true}}', not a string), found {found}",
        _STORAGE,
    ),
    (
        "STORAGE_SCRATCH_MORE_THAN_NVME",
        ERROR,
        "storage",
        "more scratch devices than the pool's `nvme.count`",
        "expected at most pools[{index}].nvme.count = {count} scratch devices for pool {pool}, found {found}",
        _STORAGE,
    ),
    (
        "STORAGE_PATH_SYSTEM",
        ERROR,
        "storage",
        "scratch or shared mount point is a system directory (`/`, `/usr`, `/var`, `/tmp`, ...)",
        "expected a dedicated mount point (such as /scratch/local or /shared), found the system directory {path}: "
        "mounting over it breaks the node",
        _STORAGE,
    ),
    (
        "STORAGE_PATH_DUPLICATE",
        ERROR,
        "storage",
        "two mounts (scratch, shared) on the same path",
        "expected a mount point of its own, found {path} ({other_field})",
        _STORAGE,
    ),
    (
        "STORAGE_PATH_NESTED",
        ERROR,
        "storage",
        "a shared mount inside the local scratch or around it",
        "expected the shared mount {shared} apart from the local scratch {scratch}: one would hide the other",
        _STORAGE,
    ),
    (
        "STORAGE_SHARED_SERVER",
        ERROR,
        "storage",
        "NFS server not a host name / IP; Lustre server not an MGS NID (`10.0.0.5@o2ib`)",
        {
            "lustre": "expected a Lustre MGS NID such as 10.0.0.5@o2ib (several joined by ':'), found {found}",
            "nfs": "expected an NFS server host name or IP address, found {found}",
        },
        _STORAGE,
    ),
    (
        "STORAGE_SHARED_EXPORT",
        ERROR,
        "storage",
        "NFS export not a clean absolute path; Lustre file system name not 1-8 of `A-Za-z0-9_-`",
        {
            "lustre": "expected a Lustre file system name (1-8 of A-Z a-z 0-9 _ -), found {found}",
            "nfs": "expected an absolute exported path such as /export/data (no whitespace, control character, "
            "'.' or '..' segment), found {found}",
        },
        _STORAGE,
    ),
    (
        "STORAGE_SHARED_OFF_NETWORK",
        WARNING,
        "storage",
        "NFS server IP outside `networks.storage`",
        "expected the NFS server inside networks.storage ({net}) so file traffic stays off the management network, "
        "found {server}",
        _STORAGE,
    ),
    (
        "STORAGE_CHECKPOINT_ON_SCRATCH",
        ERROR,
        "storage",
        "`storage.checkpoint_root` inside the local scratch (cleaned after jobs, lost with the node)",
        "expected checkpoints outside the local scratch {scratch} (it is cleaned after each job and lost with the "
        "node), found {root}",
        _STORAGE,
    ),
    (
        "STORAGE_CHECKPOINT_NOT_SHARED",
        WARNING,
        "storage",
        "`storage.checkpoint_root` not on a shared mount (a job cannot resume on another node)",
        "expected the checkpoint root on a shared mount (storage.shared[].path) so a job can resume on another "
        "node, found {root} on each node's own disk",
        _STORAGE,
    ),
    (
        "STORAGE_CHECKPOINT_NO_TENANTS",
        WARNING,
        "storage",
        "a checkpoint root but no tenants: only the root is created",
        "expected tenants[] to create one checkpoint directory per tenant under {root}, found no tenants: only the "
        "root is created",
        _STORAGE,
    ),
    (
        "ACC_STORAGE_NO_SHARED",
        ERROR,
        "storage",
        "shared FS floors without any `storage.shared` mount",
        "expected storage.shared[] to measure shared file system floors on, found no shared mount",
        _STORAGE,
    ),
    (
        "ACC_STORAGE_NO_SCRATCH",
        WARNING,
        "storage",
        "scratch floors but no scratch devices anywhere (they would measure the OS disk)",
        "expected scratch devices (storage.scratch.devices, pools[].scratch_devices or the host variable "
        "storage_scratch_devices) for the scratch floors, found none: the floors would be measured on the OS disk",
        _STORAGE,
    ),
    (
        "ACC_STORAGE_ABOVE_LIMIT",
        ERROR,
        "storage",
        "a scratch floor above devices \u00d7 15.75 GB/s (PCIe 5.0 x4 NVMe; RAID 1 writes at one device, RAID 10 "
        "at half)",
        "expected at most {ceiling:g} GB/s for pool {pool} ({n} device(s), RAID {level}, {per_device} GB/s per "
        "PCIe 5.0 x4 NVMe), found {floor:g}",
        _STORAGE,
    ),
    (
        "ACC_WORKLOAD_PARTITION_UNKNOWN",
        WARNING,
        "storage",
        "`acceptance.workload.partition` is not a pool's name (the Slurm roles make one partition per pool; on "
        "Kubernetes, the Job's pool)",
        "expected a pool's name (Slurm has one partition per pool; on Kubernetes the Job's pool: {pools}), "
        "found {found}",
        _STORAGE,
    ),
    (
        "ACC_WORKLOAD_NO_TENANT",
        ERROR,
        "storage",
        "Kubernetes: no tenant may use the workload's pool (its Job is queued through a tenant's Kueue LocalQueue)",
        "expected a tenant whose pools include {pool} (on Kubernetes the workload's Job is queued through that "
        "tenant's Kueue LocalQueue), found {tenants}",
        _STORAGE,
    ),
    (
        "ACC_WORKLOAD_SOURCE_INCOMPLETE",
        ERROR,
        "storage",
        "`acceptance.workload.<dataset|weights>_url` without the node path or the SHA-256 it is checked "
        "against (or a SHA-256 without a URL)",
        "expected the {what} download complete (URL, node path and SHA-256), found no {missing}",
        _STORAGE,
    ),
    (
        "ACC_WORKLOAD_GPUS_ABOVE_POOL",
        ERROR,
        "storage",
        "`acceptance.workload.gpus` above the partition's pool's `gpus_per_node` (the job is one node)",
        "expected at most {most} GPUs (one node of pool {pool}), found {gpus}",
        _STORAGE,
    ),
    (
        "ACC_WORKLOAD_CHECKPOINT_ON_JOB_SCRATCH",
        ERROR,
        "storage",
        "`acceptance.workload.checkpoint_dir` under `<scratch>/jobs` (removed after each job: nothing could resume)",
        "expected the checkpoints outside {scratch}/jobs (the epilog removes each job's directory when it ends, so "
        "nothing could resume), found {ckpt}",
        _STORAGE,
    ),
    (
        "ACC_WORKLOAD_CHECKPOINT_NOT_SHARED",
        WARNING,
        "storage",
        "`acceptance.workload.checkpoint_dir` not on a `storage.shared` mount: the resubmission is pinned to the "
        "first job's node",
        "expected the checkpoints on a shared mount (storage.shared[].path) so a job resumes on any node, found "
        "{ckpt} on each node's own disk: the resubmitted job is pinned to the first job's node",
        _STORAGE,
    ),
    (
        "COST_UNIT_RATE_MISSING",
        ERROR,
        "storage",
        "`cost.unit.measure: per_gpu_hour` without `per_gpu_hour`",
        "expected a positive per_gpu_hour (units one GPU-hour yields) for measure per_gpu_hour, found {found}",
        _STORAGE,
    ),
    (
        "COST_UNIT_RATE_UNUSED",
        WARNING,
        "storage",
        "`per_gpu_hour` given with another measure",
        "expected per_gpu_hour only with measure per_gpu_hour, found measure {measure}",
        _STORAGE,
    ),
    (
        "COST_MONTHLY_ZERO",
        ERROR,
        "storage",
        "every monthly cost item is 0",
        "expected the monthly cost of the cluster (compute at least), found 0 in every item",
        _STORAGE,
    ),
    (
        "COST_BASELINE_ZERO",
        WARNING,
        "storage",
        "the baseline costs 0 per unit: nothing can beat it",
        "expected the baseline's price per unit, found 0: no cluster can beat a free baseline",
        _STORAGE,
    ),
    # --- downloads
    (
        "DOWNLOAD_NO_CHECKSUM",
        WARNING,
        "downloads",
        "a file a role downloads (a package, a source tarball, a manifest) has no checksum on some host",
        "expected a checksum for {what} ({url}: get_url's 'sha256:<hex>' or 'sha256:<URL of a SHA256SUMS file>'), "
        "found none: role {role} downloads it unchecked on {count} host(s) ({hosts}); set it in the inventory, "
        "or name it in {accept} to accept that",
        "module_utils/preflight/downloads.py",
    ),
)

CODES: dict[str, Code] = {row[0]: Code(*row) for row in _ROWS}


def make(code: str, field: str, host: str | None = None, variant: str | None = None, **values) -> dict:
    """One violation of ``code`` (its severity from the table), the message its template with ``values``.

    ``variant`` picks the wording of a code that has several; a code or variant not in the table, or a
    code whose message another module builds, is a KeyError/TypeError here, so a typo cannot ship.
    """
    entry = CODES[code]
    template = entry.template
    if template is None:
        raise TypeError(f"{code}'s message is built by {entry.producer}, not from this table")
    if not isinstance(template, str):
        template = template[variant]
    elif variant is not None:
        raise KeyError(f"{code} has one wording, not variant {variant!r}")
    try:
        message = template.format(**values)
    except OverflowError:
        # An integer too large for a float ({floor:g} of a 4,000-digit number): shown as an infinity.
        message = template.format(**{k: _float_or_inf(v) for k, v in values.items()})
    return {
        "severity": entry.severity,
        "code": code,
        "host": host,
        "field": field,
        "message": message,
    }


def _float_or_inf(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            float(value)
        except OverflowError:
            return float("inf") if value > 0 else float("-inf")
    return value


def severity(code: str) -> str:
    return CODES[code].severity


__all__ = ["CODES", "SECTIONS", "Code", "Section", "make", "severity"]
