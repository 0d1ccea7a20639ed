# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The topology brief's schema: field types, enums, ranges and defaults.

``validate(brief)`` returns ``(violations, clean)``: every schema problem with
its path (``pools[0].sharing``), and a copy of the brief holding only the
values that passed, with defaults filled in. The preflight checks work on
``clean`` so that one bad field never hides the problems of the others and
never crashes a later check. docs/brief.md documents every field.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.catalogue import TOPOLOGIES
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.compat import parse_version
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import WARNING, violation

BRIEF_VERSIONS = (1,)
CONTROL_PLANES = ("slurm", "kubernetes")
OS_CHOICES = ("ubuntu-22.04", "ubuntu-24.04", "debian-12", "debian-13", "rocky-9")
DRIVER_FLAVORS = ("open", "proprietary")
RDMA_STACKS = ("inbox", "doca-ofed")
FABRIC_TYPES = ("infiniband", "roce", "ethernet", "none")
WORKLOADS = ("distributed-training", "inference", "batch")
SHARING = ("full-gpu", "mig", "time-slicing")
MIG_STRATEGIES = ("single", "mixed")
CNIS = ("calico",)

# Lists longer than these are reported, not walked: a hostile brief cannot make the gate slow.
MAX_POOLS = 256
MAX_RAILS = 64
MAX_TENANTS = 1024
MAX_LABELS = 256
MAX_STR = 1024

# Every pattern below is applied with fullmatch: the whole value must match (re's `$` would also
# match before a final newline, letting "name\n" through to the files the roles write).
_SIZE_RE = re.compile(r" *\d+(\.\d+)? *([KMGT]i?B?|B)? *", re.IGNORECASE)
_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_K8S_LABEL_KEY_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_K8S_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


# Characters that no file the roles write takes inside a value (slurm.conf, systemd units, fstab,
# YAML and TOML configs, shell): the C0 and C1 controls (newline, tab, NUL, escape, DEL, ...) and
# Unicode's line and paragraph separators. A multi-line field admits newline and tab only.
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_MULTILINE_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
# Jinja's delimiters. The brief is loaded as data and never templated, so such text reaches the
# roles literally; it is flagged because whoever wrote it likely expected it to be evaluated.
_TEMPLATE_RE = re.compile(r"\{[{%#]")


def show(value: Any, limit: int = 60) -> str:
    """A short, safe rendering of a found value for messages."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list | tuple):
        return "list"
    return type(value).__name__


# --- schema nodes ---------------------------------------------------------------------------------


@dataclass
class Node:
    doc: str = ""

    def check(self, value: Any, path: str, out: list[dict]) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


def control_char_violation(value: str, path: str, multiline: bool = False) -> dict | None:
    """SCHEMA_CONTROL_CHAR for the first control character in ``value`` (None when it has none)."""
    found = (_CONTROL_MULTILINE_RE if multiline else _CONTROL_RE).search(value)
    if found is None:
        return None
    expected = "text without control characters other than newline and tab" if multiline else "one line of text"
    return violation(
        "SCHEMA_CONTROL_CHAR",
        path,
        f"expected {expected}, found the control character {found.group()!r} at position {found.start()} "
        f"in {show(value)}",
    )


def template_syntax_violation(value: str, path: str) -> dict | None:
    """SCHEMA_TEMPLATE_SYNTAX (a warning) when ``value`` holds a Jinja delimiter (None otherwise)."""
    found = _TEMPLATE_RE.search(value)
    if found is None:
        return None
    return violation(
        "SCHEMA_TEMPLATE_SYNTAX",
        path,
        f"expected plain text (the brief is data: gpufleet never templates it), found {found.group()!r} "
        f"in {show(value)}, which the roles will write as is, unevaluated",
        severity=WARNING,
    )


@dataclass
class Str(Node):
    """A string: one line without control characters (``multiline``: newline and tab allowed), then
    one of ``choices`` or a whole-string match of ``pattern`` when given."""

    choices: tuple[str, ...] | None = None
    pattern: re.Pattern | None = None
    pattern_doc: str = ""
    multiline: bool = False

    def check(self, value, path, out):
        if not isinstance(value, str):
            out.append(
                violation("SCHEMA_WRONG_TYPE", path, f"expected a string, found {type_name(value)} {show(value)}")
            )
            return None
        if len(value) > MAX_STR:
            out.append(
                violation("SCHEMA_OUT_OF_RANGE", path, f"expected at most {MAX_STR} characters, found {len(value)}")
            )
            return None
        bad = control_char_violation(value, path, self.multiline)
        if bad is not None:
            out.append(bad)
            return None
        jinja = template_syntax_violation(value, path)
        if jinja is not None:
            out.append(jinja)
        if self.choices is not None and value not in self.choices:
            out.append(
                violation("SCHEMA_BAD_ENUM", path, f"expected one of {', '.join(self.choices)}; found {show(value)}")
            )
            return None
        if self.pattern is not None and not self.pattern.fullmatch(value):
            out.append(violation("SCHEMA_BAD_FORMAT", path, f"expected {self.pattern_doc}; found {show(value)}"))
            return None
        return value


@dataclass
class Int(Node):
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[int, ...] | None = None

    def check(self, value, path, out):
        if isinstance(value, bool) or not isinstance(value, int):
            out.append(
                violation("SCHEMA_WRONG_TYPE", path, f"expected an integer, found {type_name(value)} {show(value)}")
            )
            return None
        if self.choices is not None and value not in self.choices:
            out.append(
                violation(
                    "SCHEMA_BAD_ENUM", path, f"expected one of {', '.join(map(str, self.choices))}; found {value}"
                )
            )
            return None
        return _range(value, self.minimum, self.maximum, path, out)


@dataclass
class Num(Node):
    minimum: float | None = None
    maximum: float | None = None

    def check(self, value, path, out):
        if isinstance(value, bool) or not isinstance(value, int | float):
            out.append(
                violation("SCHEMA_WRONG_TYPE", path, f"expected a number, found {type_name(value)} {show(value)}")
            )
            return None
        # YAML's .inf, -.inf and .nan are floats: no count, size, floor or price is infinite.
        if isinstance(value, float) and not math.isfinite(value):
            out.append(violation("SCHEMA_WRONG_TYPE", path, f"expected a finite number, found {value!r}"))
            return None
        return _range(value, self.minimum, self.maximum, path, out)


def _range(value, lo, hi, path, out):
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = (
            f"between {lo} and {hi}"
            if lo is not None and hi is not None
            else (f">= {lo}" if lo is not None else f"<= {hi}")
        )
        out.append(violation("SCHEMA_OUT_OF_RANGE", path, f"expected a value {bounds}, found {value}"))
        return None
    return value


@dataclass
class Bool(Node):
    def check(self, value, path, out):
        if not isinstance(value, bool):
            out.append(
                violation("SCHEMA_WRONG_TYPE", path, f"expected true or false, found {type_name(value)} {show(value)}")
            )
            return None
        return value


@dataclass
class Version(Node):
    """A dotted version. Quoted strings are expected; an unquoted YAML number is accepted
    with a warning, since YAML reads ``12.10`` as 12.1."""

    def check(self, value, path, out):
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append(
                violation(
                    "SCHEMA_UNQUOTED_VERSION",
                    path,
                    f"expected a quoted version string, found the number {value!r}: quote it",
                    severity=WARNING,
                )
            )
            value = repr(value) if isinstance(value, float) else str(value)
        if not isinstance(value, str):
            out.append(
                violation(
                    "SCHEMA_WRONG_TYPE", path, f"expected a version string, found {type_name(value)} {show(value)}"
                )
            )
            return None
        if len(value) > 64 or parse_version(value) is None or not re.fullmatch(r"\d+(\.\d+)*([-+~][\w.+~-]*)?", value):
            out.append(
                violation("SCHEMA_BAD_FORMAT", path, f"expected a version like '570.133.20', found {show(value)}")
            )
            return None
        return value


@dataclass
class Size(Node):
    """A byte size: an integer or a string such as ``8G`` / ``512M`` (nccl-tests' -e syntax)."""

    def check(self, value, path, out):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        if isinstance(value, str) and len(value) < 32 and _SIZE_RE.fullmatch(value):
            return value
        out.append(violation("SCHEMA_BAD_FORMAT", path, f"expected a size such as 8G or 1048576, found {show(value)}"))
        return None


@dataclass
class Any_(Node):
    def check(self, value, path, out):
        return value


@dataclass
class Field:
    node: Node
    required: bool = False
    default: Any = None
    doc: str = ""


@dataclass
class Map(Node):
    fields: dict[str, Field] = field(default_factory=dict)

    def check(self, value, path, out):
        if not isinstance(value, dict):
            out.append(
                violation(
                    "SCHEMA_WRONG_TYPE",
                    path or "(brief)",
                    f"expected a mapping, found {type_name(value)} {show(value)}",
                )
            )
            return None
        clean: dict[str, Any] = {}
        for key in value:
            if not isinstance(key, str) or key not in self.fields:
                out.append(
                    violation(
                        "SCHEMA_UNKNOWN_KEY",
                        _join(path, key),
                        f"expected one of {', '.join(self.fields)}; found unknown key {show(key)}",
                    )
                )
        for name, spec in self.fields.items():
            sub = _join(path, name)
            if name not in value or value[name] is None:
                if spec.required:
                    out.append(
                        violation("SCHEMA_MISSING_KEY", sub, f"expected required key {name!r}, found it missing")
                    )
                elif spec.default is not None:
                    clean[name] = copy.copy(spec.default)
                continue
            checked = spec.node.check(value[name], sub, out)
            if checked is not None:
                clean[name] = checked
        return clean


@dataclass
class List(Node):
    item: Node = field(default_factory=Any_)
    min_items: int = 0
    max_items: int = 10_000

    def check(self, value, path, out):
        if not isinstance(value, list):
            out.append(violation("SCHEMA_WRONG_TYPE", path, f"expected a list, found {type_name(value)} {show(value)}"))
            return None
        if len(value) < self.min_items:
            out.append(
                violation(
                    "SCHEMA_OUT_OF_RANGE", path, f"expected at least {self.min_items} item(s), found {len(value)}"
                )
            )
            return None
        if len(value) > self.max_items:
            out.append(
                violation("SCHEMA_OUT_OF_RANGE", path, f"expected at most {self.max_items} items, found {len(value)}")
            )
            return None
        clean = []
        for i, item in enumerate(value):
            checked = self.item.check(item, f"{path}[{i}]", out)
            # Keep the position: rail i must stay rail i even when rail i-1 is bad.
            clean.append(checked)
        return clean


@dataclass
class StrMap(Node):
    """A mapping of strings to strings (labels)."""

    key_pattern: re.Pattern | None = None
    value_pattern: re.Pattern | None = None

    def check(self, value, path, out):
        if not isinstance(value, dict):
            out.append(
                violation("SCHEMA_WRONG_TYPE", path, f"expected a mapping, found {type_name(value)} {show(value)}")
            )
            return None
        if len(value) > MAX_LABELS:
            out.append(
                violation("SCHEMA_OUT_OF_RANGE", path, f"expected at most {MAX_LABELS} entries, found {len(value)}")
            )
            return None
        clean = {}
        for k, v in value.items():
            sub = _join(path, k)
            if not isinstance(k, str) or (self.key_pattern and not self.key_pattern.fullmatch(k)):
                out.append(
                    violation("SCHEMA_BAD_FORMAT", sub, f"expected a label key (DNS-style name), found {show(k)}")
                )
                continue
            if isinstance(v, bool | int | float) and not isinstance(v, bool):
                v = str(v)
            if not isinstance(v, str) or (self.value_pattern and not self.value_pattern.fullmatch(v)):
                out.append(
                    violation(
                        "SCHEMA_BAD_FORMAT",
                        sub,
                        f"expected a label value (<= 63 of A-Z a-z 0-9 - _ .), found {show(v)}",
                    )
                )
                continue
            clean[k] = v
        return clean


def _join(path: str, key: Any) -> str:
    key = key if isinstance(key, str) and len(key) <= 64 else show(key, 40)
    return f"{path}.{key}" if path else str(key)


# --- the brief ------------------------------------------------------------------------------------

_NAME = Str(pattern=_LABEL_RE, pattern_doc="a lower-case RFC 1123 label (a-z, 0-9, '-', at most 63)")
_GROUP = Str(
    pattern=re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"),
    pattern_doc="an Ansible group name (letters, digits, '_', not starting with a digit)",
)
_CIDR = Str(doc="an IPv4 or IPv6 network in CIDR notation")
_IP = Str(doc="an IP address")
# A block device path (storage scratch devices).
_DEVICE = Str(pattern=re.compile(r"^/dev/[A-Za-z0-9._/:-]+$"), pattern_doc="a block device such as /dev/nvme0n1")

NETWORK = Map(
    fields={
        "cidr": Field(_CIDR, True, doc="the network, e.g. 10.20.0.0/22"),
        "gateway": Field(_IP, doc="default gateway; must lie inside cidr"),
        "mtu": Field(Int(minimum=68, maximum=65520), doc="interface MTU (range per network type checked by preflight)"),
        "vlan": Field(Int(minimum=1, maximum=4094), doc="802.1Q VLAN id"),
    }
)

RAIL = Map(
    fields={
        "cidr": Field(_CIDR, True, doc="the rail's network"),
        "gateway": Field(_IP, doc="optional gateway, inside cidr"),
    }
)

ROCE = Map(
    fields={
        "pfc_priority": Field(Int(minimum=0, maximum=7), default=3, doc="PFC priority for RDMA traffic"),
        "dscp": Field(Int(minimum=0, maximum=63), default=26, doc="DSCP value trusted for RDMA traffic"),
        "ecn": Field(Bool(), default=True, doc="enable ECN (DCQCN)"),
    }
)

FABRIC = Map(
    fields={
        "type": Field(Str(choices=FABRIC_TYPES), True, doc="compute fabric"),
        "link_speed_gbps": Field(Num(minimum=1, maximum=3200), doc="per-port link speed in Gb/s"),
        "mtu": Field(Int(minimum=68, maximum=65520), doc="fabric MTU (range per fabric type checked by preflight)"),
        "rails": Field(List(item=RAIL, max_items=MAX_RAILS), default=[], doc="rail i of every node lives in rails[i]"),
        "roce": Field(ROCE, doc="RoCE QoS (type roce only)"),
    }
)

K8S_NET = Map(
    fields={
        "pod_cidr": Field(_CIDR, True, doc="pod network (CNI)"),
        "service_cidr": Field(_CIDR, True, doc="service network"),
        "cni": Field(Str(choices=CNIS), default="calico", doc="pod network plugin (Calico, through its operator)"),
        "api_vip": Field(
            _IP,
            doc="the API server's stable address with several control-plane nodes: a virtual IP in "
            "networks.management that no host uses, served by the site's load balancer (port 6443 of every "
            "control-plane node); required with more than one",
        ),
    }
)

NETWORKS = Map(
    fields={
        "management": Field(NETWORK, True, doc="where ansible_host lives"),
        "bmc": Field(NETWORK, True, doc="where bmc_ip lives"),
        "storage": Field(NETWORK, doc="where storage_ip lives; omit when there is no storage network"),
        "fabric": Field(FABRIC, True, doc="the compute fabric"),
        "kubernetes": Field(K8S_NET, doc="pod and service CIDRs (control_plane kubernetes)"),
    }
)

SOFTWARE = Map(
    fields={
        "driver": Field(Version(), True, doc="NVIDIA driver, exact version"),
        "driver_flavor": Field(Str(choices=DRIVER_FLAVORS), default="open", doc="kernel modules"),
        "cuda": Field(Version(), True, doc="CUDA toolkit major.minor"),
        "nccl": Field(Version(), True, doc="NCCL version"),
        "container_toolkit": Field(Version(), doc="NVIDIA container toolkit"),
        "rdma_stack": Field(Str(choices=RDMA_STACKS), default="inbox", doc="rdma-core from the OS or DOCA-OFED"),
        "doca_ofed": Field(Version(), doc="DOCA-OFED version (rdma_stack doca-ofed)"),
        "dcgm": Field(Version(), doc="DCGM version"),
        "slurm": Field(Version(), doc="Slurm version (control_plane slurm)"),
        "kubernetes": Field(Version(), doc="Kubernetes version (control_plane kubernetes)"),
        "gpu_operator": Field(Version(), doc="GPU Operator chart version (kubernetes)"),
        "rdma_core": Field(Version(), doc="rdma-core version (rdma_stack inbox); checked by the hardware gate"),
        "kernel": Field(Str(), doc="kernel release (uname -r) the nodes must run; checked by the hardware gate"),
    }
)

SHARING_CONFIG = Map(
    fields={
        "mig_profile": Field(
            Str(pattern=re.compile(r"^\d+g\.\d+gb$"), pattern_doc="a MIG profile like 1g.10gb"),
            doc="MIG profile every GPU is split into (sharing mig)",
        ),
        "mig_strategy": Field(Str(choices=MIG_STRATEGIES), default="single", doc="GPU Operator MIG strategy"),
        "replicas": Field(Int(minimum=1, maximum=64), doc="time-slicing replicas per GPU (sharing time-slicing)"),
    }
)

# Firmware judged by the hardware gate (module_utils/hw/firmware.py, docs/hardware-gate.md "Firmware"):
# the versions each GPU's VBIOS, each fabric NIC and the BIOS must reach. No published figure: none by default.
# preflight/firmware.py checks each is in its tool's format (a minimum the gate cannot order is an error).
FIRMWARE_MIN = Map(
    fields={
        "vbios": Field(Str(), doc="lowest GPU VBIOS, as nvidia-smi -q prints it ('96.00.99.00.01'; HW_FIRMWARE_OLD)"),
        "nic": Field(
            Str(), doc="lowest fabric NIC firmware of its family, as ibstat prints it ('28.39.1002'; HW_FIRMWARE_OLD)"
        ),
        "bios": Field(Str(), doc="lowest BIOS, dotted decimals only ('2.19.1'; HW_FIRMWARE_OLD)"),
    }
)

# A pool's own firmware rules, each key overriding acceptance.firmware's (no defaults: unset keys inherit).
POOL_FIRMWARE = Map(
    fields={
        "homogeneous": Field(Bool(), doc="overrides acceptance.firmware.homogeneous"),
        "min": Field(FIRMWARE_MIN, doc="overrides acceptance.firmware.min, key by key"),
    }
)

# GPU diagnostics: one `dcgmi diag -r <level> -j` on every GPU node (acceptance/dcgm_diag.py,
# docs/dcgm-diagnostics.md). Off unless a level is given: level 1 takes seconds, 2 about 2 minutes,
# 3 about 15 minutes, 4 longer (NVIDIA's dcgmi diag reference), a cost the brief chooses.
DCGM_DIAG = Map(
    fields={
        "level": Field(
            Int(minimum=1, maximum=4),
            doc="dcgmi diag -r level (1 quick, 2 medium ~2 min, 3 long ~15 min, 4 extended); a failed test "
            "fails and drains the node (DCGM_DIAG_FAILED); default off",
        ),
    }
)

# Floors of the collectives beyond all_reduce (acceptance/collectives.py, docs/nccl-acceptance.md):
# busbw as nccl-tests prints it; a collective without a floor is not run (no published default).
COLLECTIVE_FLOORS = Map(
    fields={
        "single_node_busbw_gbps": Field(Num(minimum=0), doc="floor inside one node, GB/s busbw"),
        "multi_node_busbw_gbps": Field(Num(minimum=0), doc="floor across every node of a pool, GB/s busbw"),
    }
)
COLLECTIVES = Map(
    fields={
        "all_gather": Field(COLLECTIVE_FLOORS, doc="all_gather_perf floors (sharded data parallelism)"),
        "alltoall": Field(COLLECTIVE_FLOORS, doc="alltoall_perf floors (mixture-of-experts)"),
    }
)

POOL_ACCEPTANCE = Map(
    fields={
        "single_node_busbw_gbps": Field(Num(minimum=0), doc="overrides acceptance.single_node_busbw_gbps"),
        "multi_node_busbw_gbps": Field(Num(minimum=0), doc="overrides acceptance.multi_node_busbw_gbps"),
        "firmware": Field(POOL_FIRMWARE, doc="overrides acceptance.firmware, key by key"),
        "dcgm_diag": Field(DCGM_DIAG, doc="overrides acceptance.dcgm_diag for this pool"),
        "collectives": Field(COLLECTIVES, doc="overrides acceptance.collectives, floor by floor"),
    }
)

NVME = Map(
    fields={
        "count": Field(Int(minimum=0, maximum=64), True, doc="NVMe drives per node"),
        "min_size_gb": Field(Num(minimum=1), doc="minimum size of each, GB"),
    }
)

# What the provider quoted for a pool (or, at the top level, for every pool that quotes nothing of its
# own). The acceptance report sets it beside the brief and the measurement (acceptance_quote.py).
QUOTE = Map(
    fields={
        "accelerator": Field(Str(), doc="GPU model quoted: a catalogue key (h100-sxm) or nvidia-smi's name"),
        "gpus_per_node": Field(Int(minimum=1, maximum=72), doc="GPUs per node quoted"),
        "topology": Field(Str(choices=tuple(TOPOLOGIES)), doc="intra-node topology quoted"),
        "nics_per_node": Field(Int(minimum=0, maximum=32), doc="compute-fabric NICs per node quoted"),
        "nic_speed_gbps": Field(Int(minimum=1, maximum=3200), doc="fabric port speed quoted, Gb/s"),
        "fabric": Field(Str(choices=FABRIC_TYPES), doc="compute fabric quoted"),
        "single_node_busbw_gbps": Field(Num(minimum=0), doc="all_reduce busbw in one node quoted, GB/s"),
        "multi_node_busbw_gbps": Field(Num(minimum=0), doc="all_reduce busbw across nodes quoted, GB/s"),
        "source": Field(Str(), doc="where the quote comes from (document, date)"),
    }
)

POOL = Map(
    fields={
        "name": Field(_NAME, True, doc="pool name"),
        "group": Field(_GROUP, True, doc="inventory group holding the pool's nodes"),
        "accelerator": Field(Str(), True, doc="catalogue key"),
        "gpus_per_node": Field(Int(minimum=1, maximum=72), True, doc="GPUs per node"),
        "topology": Field(Str(choices=tuple(TOPOLOGIES)), True, doc="intra-node topology"),
        "nics_per_node": Field(Int(minimum=0, maximum=32), default=0, doc="compute-fabric NICs (ports) per node"),
        "gpudirect_rdma": Field(Bool(), default=False, doc="GPUDirect RDMA (nvidia-peermem / DMA-BUF)"),
        "gds": Field(Bool(), default=False, doc="GPUDirect Storage (nvidia-fs)"),
        "memory_gib": Field(Int(minimum=1), doc="host memory per node, GiB"),
        "numa_nodes": Field(Int(minimum=1, maximum=64), doc="NUMA nodes per node"),
        "sockets": Field(Int(minimum=1, maximum=16), doc="CPU sockets per node"),
        "cpus": Field(Int(minimum=1, maximum=8192), doc="logical CPUs per node"),
        "cores_per_socket": Field(Int(minimum=1, maximum=1024), doc="physical cores per socket"),
        "threads_per_core": Field(Int(minimum=1, maximum=8), doc="hardware threads per core"),
        "nic_speed_gbps": Field(
            Int(minimum=1, maximum=3200), doc="fabric port speed, Gb/s (default networks.fabric.link_speed_gbps)"
        ),
        "rdma_devices": Field(
            List(
                item=Str(
                    pattern=re.compile(r"[A-Za-z0-9_.:*?\[\]-]{1,64}"),
                    pattern_doc="an RDMA device name or glob (letters, digits, _ . : - and * ? [ ])",
                ),
                max_items=64,
            ),
            doc="RDMA device names or globs (mlx5_*) that are the fabric ports; others are ignored by the gate",
        ),
        "rail_optimized": Field(
            Bool(), doc="each NIC sits next to one GPU (PIX/PXB); default: nics_per_node == gpus_per_node"
        ),
        "nvme": Field(NVME, doc="local NVMe"),
        "workload": Field(Str(choices=WORKLOADS), default="distributed-training", doc="what the pool runs"),
        "sharing": Field(Str(choices=SHARING), default="full-gpu", doc="how GPUs are shared"),
        "sharing_config": Field(SHARING_CONFIG, doc="MIG profile / time-slicing replicas"),
        "labels": Field(
            StrMap(key_pattern=_K8S_LABEL_KEY_RE, value_pattern=_K8S_LABEL_VALUE_RE),
            doc="Slurm features / Kubernetes node labels",
        ),
        "taints": Field(
            List(
                item=Str(
                    pattern=re.compile(r"^[^=:\s]+(=[^=:\s]*)?:(NoSchedule|PreferNoSchedule|NoExecute)$"),
                    pattern_doc="key[=value]:NoSchedule|PreferNoSchedule|NoExecute",
                ),
                max_items=64,
            ),
            doc="Kubernetes taints",
        ),
        "acceptance": Field(POOL_ACCEPTANCE, doc="per-pool acceptance floors"),
        "scratch_devices": Field(
            List(item=_DEVICE, max_items=64), doc="scratch devices of the pool's nodes (overrides storage.scratch)"
        ),
        "quote": Field(QUOTE, doc="what the provider quoted for this pool (overrides the top-level quote)"),
    }
)

CLUSTER = Map(
    fields={
        "name": Field(_NAME, True, doc="cluster name"),
        "control_plane": Field(Str(choices=CONTROL_PLANES), True, doc="scheduler"),
        "os": Field(Str(choices=OS_CHOICES), True, doc="target OS"),
        "description": Field(Str(multiline=True), doc="free text (may span lines)"),
    }
)

CONTROLLERS = Map(
    fields={
        "group": Field(_GROUP, True, doc="inventory group of the Slurm controllers / Kubernetes control plane"),
    }
)

# --- storage, storage acceptance and cost (checks in storage_checks.py) ----------------------------

_ABS_PATH = Str(
    pattern=re.compile(r"^/(?!.*(^|/)\.\.?(/|$))[A-Za-z0-9._/@+-]*$"),
    pattern_doc="an absolute path without '..' or spaces",
)
# A file the acceptance downloads (dataset sample, base weights): HTTP(S), or a file on each node.
_SOURCE_URL = Str(
    pattern=re.compile(r"^(https?://[^\s/]+/\S*|file:///\S+)$"),
    pattern_doc="an http://, https:// or file:/// URL without spaces",
)
_SHA256 = Str(pattern=re.compile(r"^[0-9a-f]{64}$"), pattern_doc="64 lower-case hex digits")
SCRATCH_RAID_LEVELS = (0, 1, 10)
SHARED_FS_TYPES = ("nfs", "nfs4", "lustre")

STORAGE_SCRATCH = Map(
    fields={
        "path": Field(_ABS_PATH, default="/scratch/local", doc="where the local scratch is mounted"),
        "devices": Field(
            List(item=_DEVICE, max_items=64),
            doc="scratch devices of every node (overridden by pools[].scratch_devices and the host variable "
            "storage_scratch_devices)",
        ),
        "raid_level": Field(
            Int(choices=SCRATCH_RAID_LEVELS), default=0, doc="mdadm RAID level when there are several devices"
        ),
        "filesystem": Field(Str(choices=("xfs", "ext4")), default="xfs", doc="filesystem made on the scratch"),
        "mount_options": Field(
            Str(pattern=re.compile(r"[^\s]+"), pattern_doc="comma-separated mount options without spaces"),
            default="noatime,nofail",
            doc="mount options of the scratch",
        ),
    }
)

SHARED_MOUNT = Map(
    fields={
        "server": Field(Str(), True, doc="file server host name or IP (Lustre: the MGS NID, e.g. 10.0.0.5@o2ib)"),
        "export": Field(Str(), True, doc="exported path (NFS) or file system name (Lustre)"),
        "path": Field(_ABS_PATH, True, doc="mount point on every node"),
        "type": Field(Str(choices=SHARED_FS_TYPES), default="nfs", doc="client file system type"),
        "options": Field(
            Str(pattern=re.compile(r"^[^\s]+$"), pattern_doc="comma-separated mount options without spaces"),
            doc="mount options (default: role storage's storage_shared_default_options for the type)",
        ),
    }
)

STORAGE = Map(
    fields={
        "scratch": Field(STORAGE_SCRATCH, doc="local NVMe scratch (wiped only with explicit consent)"),
        "shared": Field(List(item=SHARED_MOUNT, max_items=64), default=[], doc="shared file systems every node mounts"),
        "checkpoint_root": Field(
            _ABS_PATH, doc="directory holding one checkpoint directory per tenant (usually on a shared mount)"
        ),
    }
)

STORAGE_ACCEPTANCE = Map(
    fields={
        "scratch_write_gbps": Field(Num(minimum=0), doc="floor: sequential write to the scratch, GB/s per node"),
        "scratch_read_gbps": Field(Num(minimum=0), doc="floor: sequential read from the scratch, GB/s per node"),
        "shared_write_gbps": Field(Num(minimum=0), doc="floor: sequential write to the shared FS, GB/s per node"),
        "shared_read_gbps": Field(Num(minimum=0), doc="floor: sequential read from the shared FS, GB/s per node"),
        "checkpoint_size_gib": Field(Num(minimum=0.001, maximum=65536), default=4, doc="checkpoint written, GiB"),
        "checkpoint_max_restore_s": Field(Num(minimum=0.1), doc="ceiling: seconds to read the checkpoint back"),
    }
)

COST_MONTHLY = Map(
    fields={
        "compute": Field(Num(minimum=0), True, doc="GPU servers: lease, depreciation or rental, per month"),
        "network": Field(Num(minimum=0), default=0, doc="fabric, switches, transit, per month"),
        "storage": Field(Num(minimum=0), default=0, doc="shared storage and scratch, per month"),
        "support": Field(Num(minimum=0), default=0, doc="vendor support contracts, per month"),
        "operations": Field(Num(minimum=0), default=0, doc="people, power, space, per month"),
    }
)

COST_UNIT = Map(
    fields={
        "name": Field(Str(), True, doc="what one accepted unit is (a training run, 1M tokens, a job)"),
        "measure": Field(
            Str(choices=("completed_jobs", "gpu_hours", "per_gpu_hour")),
            default="completed_jobs",
            doc="how accepted units are counted from Slurm accounting: completed jobs, GPU-hours of completed "
            "jobs, or those GPU-hours times per_gpu_hour",
        ),
        "per_gpu_hour": Field(
            Num(minimum=0), doc="units one GPU-hour of accepted work yields (measure per_gpu_hour), e.g. tokens"
        ),
    }
)

COST_BASELINE = Map(
    fields={
        "name": Field(Str(), True, doc="the alternative priced (a model API, a GPU rental)"),
        "price_per_unit": Field(Num(minimum=0), True, doc="its price per accepted unit, in cost.currency"),
    }
)

COST = Map(
    fields={
        "currency": Field(
            Str(pattern=re.compile(r"^[A-Z]{3}$"), pattern_doc="an ISO 4217 code such as USD"),
            default="USD",
            doc="currency of every amount",
        ),
        "monthly": Field(COST_MONTHLY, True, doc="what the cluster costs per month"),
        "unit": Field(COST_UNIT, True, doc="the unit of accepted work"),
        "target_units_per_month": Field(Num(minimum=0), doc="work the buyer needs per month (sizes the GPUs)"),
        "baseline": Field(COST_BASELINE, doc="the price the cluster must beat per accepted unit"),
    }
)

# --- workload acceptance (checks in storage_checks.py, the judgement in module_utils/acceptance/workload.py) ------

WORKLOAD_ACCEPTANCE = Map(
    fields={
        "command": Field(
            Str(multiline=True),
            True,
            doc="shell command of the training job (sbatch --wrap; may span lines); it prints "
            "'gpufleet-workload step=N samples_per_s=X time=T' lines and resumes from $GPUFLEET_CHECKPOINT_DIR "
            "(docs/storage.md)",
        ),
        "checkpoint_dir": Field(
            _ABS_PATH, True, doc="where the job checkpoints; each acceptance run uses a fresh directory below it"
        ),
        "image": Field(
            Str(pattern=re.compile(r"[^\s]+"), pattern_doc="a container image reference without spaces"),
            doc="production container image (pyxis --container-image); default the host's stack",
        ),
        "dataset": Field(_ABS_PATH, doc="dataset sample the job reads ($GPUFLEET_DATASET)"),
        "dataset_url": Field(
            _SOURCE_URL, doc="where acceptance downloads the dataset sample to `dataset` on each GPU node first"
        ),
        "dataset_sha256": Field(_SHA256, doc="SHA-256 of the file at dataset_url (checked on each node)"),
        "weights": Field(_ABS_PATH, doc="initial weights the job reads ($GPUFLEET_WEIGHTS)"),
        "weights_url": Field(
            _SOURCE_URL, doc="where acceptance downloads the base weights to `weights` on each GPU node first"
        ),
        "weights_sha256": Field(_SHA256, doc="SHA-256 of the file at weights_url (checked on each node)"),
        "window_minutes": Field(
            Num(minimum=0.05, maximum=1440), default=10, doc="how long the job runs before it is killed, minutes"
        ),
        "partition": Field(Str(), doc="Slurm partition (default: the first pool's)"),
        "gpus": Field(Int(minimum=1, maximum=72), doc="GPUs of the job (--gres=gpu:N); default none"),
        "min_samples_per_s": Field(Num(minimum=0), doc="floor: the job's throughput (median samples_per_s)"),
        "max_restore_s": Field(
            Num(minimum=0.1), doc="ceiling: seconds from the resubmission to its first step after the restore"
        ),
    }
)

# --- end storage / cost / workload ----------------------------------------------------------------

# The judgement of each node against its own pool (acceptance_outliers.py, docs/nccl-acceptance.md);
# the figures it judges (acceptance/outliers.py METRICS, which a unit test keeps equal).
OUTLIER_METRICS = {
    "single_node_busbw": "GB/s, single-node all_reduce busbw",
    "latency_us": "us, single-node all_reduce time of the smallest size",
    "p2p_min": "GB/s, the weakest GPU pair's copy (nvbandwidth)",
    "p2p_sum": "GB/s, the sum of the GPU pairs' copies (nvbandwidth)",
    "scratch_write": "GB/s, fio write on the scratch",
    "scratch_read": "GB/s, fio read on the scratch",
    "shared_write": "GB/s, fio write on the shared file system",
    "shared_read": "GB/s, fio read on the shared file system",
    "checkpoint_restore": "s, the checkpoint read back",
}
OUTLIERS = Map(
    fields={
        "severity": Field(Str(choices=("warn", "fail")), default="warn", doc="an outlier warns (warn) or fails (fail)"),
        "min_deviation": Field(
            Num(minimum=0, maximum=1), default=0.05, doc="share below the pool's median a node must be to be named"
        ),
        "mad_threshold": Field(
            Num(minimum=0), default=3.5, doc="modified z-score (0.6745 x distance / MAD) a node must also pass"
        ),
        "min_pool_size": Field(
            Int(minimum=2), default=4, doc="smaller pools are judged against the other nodes and only warn"
        ),
        "min_abs": Field(
            Map(fields={m: Field(Num(minimum=0), doc=doc) for m, doc in OUTLIER_METRICS.items()}),
            default={},
            doc="per figure, the least distance from the pool's median (in its unit: GB/s, us, s) that names "
            "a node: the measurement's own noise at the site; default none",
        ),
    }
)

# GPU-to-GPU copies of each node (nvbandwidth; acceptance/p2p.py, docs/nccl-acceptance.md).
P2P = Map(
    fields={
        "required": Field(
            Bool(),
            default=False,
            doc="a node without nvbandwidth, or whose GPUs have no peer access, fails (P2P_NOT_GATHERED)",
        ),
        "min_gbps": Field(
            Num(minimum=0), doc="floor: the node's weakest GPU pair, GB/s (P2P_BELOW_FLOOR); default none"
        ),
    }
)

# Each node against its own first acceptance (acceptance_history.py, docs/nccl-acceptance.md "History").
HISTORY = Map(
    fields={
        "max_degradation_pct": Field(
            Num(minimum=0, maximum=100),
            default=10,
            doc="a node worse than at its own first acceptance by more than this share (%) is NODE_DEGRADED",
        ),
        "severity": Field(
            Str(choices=("warn", "fail")), default="warn", doc="NODE_DEGRADED warns (warn) or fails (fail)"
        ),
    }
)

# On by default: a pool whose GPUs or NICs run different firmware is a common cause of links that come up and
# misbehave, and comparing peers needs no site figure (the gate compares the drivers and kernels the same way).
FIRMWARE = Map(
    fields={
        "homogeneous": Field(
            Bool(),
            default=True,
            doc="every GPU VBIOS / NIC firmware / BIOS of a pool on one version (HW_FIRMWARE_MIXED)",
        ),
        "min": Field(FIRMWARE_MIN, doc="the lowest firmware accepted (HW_FIRMWARE_OLD); default none"),
    }
)

# Link error counters of each node's fabric ports, before and after the NCCL runs
# (acceptance/link_errors.py, docs/nccl-acceptance.md "Link error counters"). The defaults: 0 for the
# counters that mean a link fault (infiniband-diags' ibqueryerrors reports any count above 0 by default),
# and two of ours, each with its reason in link_errors.py.
LINK_ERRORS = Map(
    fields={
        "enabled": Field(
            Bool(),
            default=True,
            doc="read every fabric port's error counters before and after the NCCL runs (LINK_ERRORS_GREW)",
        ),
        "max_growth": Field(
            Map(
                fields={
                    "symbol_error": Field(
                        Int(minimum=0), default=10, doc="minor link errors on a lane (ours: a few within spec)"
                    ),
                    "link_error_recovery": Field(Int(minimum=0), default=0, doc="link retrainings"),
                    "link_downed": Field(Int(minimum=0), default=0, doc="links that went down"),
                    "port_rcv_errors": Field(Int(minimum=0), default=0, doc="packets received with errors"),
                    "port_rcv_remote_physical_errors": Field(
                        Int(minimum=0), default=0, doc="packets the far end marked bad (EBP)"
                    ),
                    "local_link_integrity_errors": Field(
                        Int(minimum=0), default=0, doc="local physical errors past the port's threshold"
                    ),
                    "excessive_buffer_overrun_errors": Field(
                        Int(minimum=0), default=0, doc="receive buffer overruns past the port's threshold"
                    ),
                    "port_xmit_discards": Field(
                        Int(minimum=0), default=100, doc="packets discarded on send (ours: congestion can cause some)"
                    ),
                }
            ),
            default={},
            doc="per counter, the growth tolerated during one acceptance",
        ),
    }
)

# Per-rail RDMA bandwidth between node pairs (perftest's ib_write_bw; acceptance/rdma_pairs.py,
# docs/nccl-acceptance.md "Per-rail RDMA pairs"). Off unless mode is given.
RDMA_PAIRS = Map(
    fields={
        "mode": Field(
            Str(choices=("all", "rail")),
            doc="all: every pair of a pool once, N-1 rounds (N odd: N); rail: neighbours only, 2-3 rounds; "
            "absent: the gate is off",
        ),
        "min_fraction": Field(
            Num(minimum=0, maximum=1),
            doc="floor per port: this share of networks.fabric.link_speed_gbps, in (0, 1] (RDMA_PORT_SLOW); "
            "default 0.9 when neither floor is given",
        ),
        "min_gbps": Field(
            Num(minimum=0),
            doc="floor per port in GB/s (x 8 = Gb/s, ib_write_bw's unit), at most link_speed_gbps / 8; "
            "instead of min_fraction",
        ),
        "size": Field(Size(), default="1M", doc="message size (ib_write_bw -s)"),
        "duration": Field(Int(minimum=1, maximum=600), default=5, doc="seconds per run (ib_write_bw -D)"),
        "iters": Field(Int(minimum=5), doc="iterations per run instead of a duration (ib_write_bw -n)"),
    }
)

ACCEPTANCE = Map(
    fields={
        "single_node_busbw_gbps": Field(Num(minimum=0), doc="floor for all_reduce inside one node"),
        "multi_node_busbw_gbps": Field(Num(minimum=0), doc="floor for all_reduce across every node of a pool"),
        "min_bytes": Field(Size(), default="8", doc="smallest message (nccl-tests -b)"),
        "max_bytes": Field(Size(), default="8G", doc="largest message (nccl-tests -e)"),
        "max_wrong": Field(Int(minimum=0), default=0, doc="tolerated #wrong values; 0 unless waived"),
        "max_wrong_waived": Field(Bool(), default=False, doc="allow max_wrong > 0"),
        "storage": Field(STORAGE_ACCEPTANCE, doc="storage acceptance floors (scratch, shared FS, checkpoint)"),
        "workload": Field(WORKLOAD_ACCEPTANCE, doc="workload acceptance: a training job killed and resumed (Slurm)"),
        "quote_differs": Field(
            Str(choices=("warn", "fail")), default="warn", doc="QUOTE_DIFFERS is a warning (warn) or an error (fail)"
        ),
        "quote_busbw_tolerance": Field(
            Num(minimum=0, maximum=1), default=0.05, doc="share a measured busbw may fall below the quoted one"
        ),
        "outliers": Field(OUTLIERS, default={}, doc="nodes judged against their pool's median (NCCL_OUTLIER)"),
        "history": Field(HISTORY, default={}, doc="nodes judged against their own first acceptance (NODE_DEGRADED)"),
        "p2p": Field(P2P, default={}, doc="GPU-to-GPU copies of each node, from nvbandwidth (P2P_OUTLIER)"),
        "firmware": Field(FIRMWARE, default={}, doc="GPU VBIOS, NIC firmware and BIOS in the hardware gate"),
        "dcgm_diag": Field(DCGM_DIAG, default={}, doc="GPU diagnostics on every node (dcgmi diag; DCGM_DIAG_FAILED)"),
        "collectives": Field(COLLECTIVES, default={}, doc="floors of all_gather and alltoall; none: not run"),
        "link_errors": Field(
            LINK_ERRORS, default={}, doc="fabric ports' error counters before and after the NCCL runs"
        ),
        "rdma_pairs": Field(RDMA_PAIRS, doc="per-rail RDMA bandwidth between node pairs (ib_write_bw); default off"),
        "valid_days": Field(
            Int(minimum=1, maximum=3650),
            default=90,
            doc="days an accepted node's acceptance is valid (its Slurm Extra accepted_until / Kubernetes label)",
        ),
    }
)

# A tenant's priority without one (Kubernetes: its PriorityClass / Kueue WorkloadPriorityClass value).
TENANT_PRIORITY_DEFAULT = 100

TENANT = Map(
    fields={
        "name": Field(_NAME, True, doc="tenant (team) name"),
        "gpus": Field(Int(minimum=0), True, doc="GPU quota"),
        "pools": Field(List(item=Str(), max_items=MAX_POOLS), doc="pools the quota applies to (default: all)"),
        "group": Field(
            Str(), doc="Kubernetes group bound to the edit role in the tenant's namespace (default: the name)"
        ),
        "priority": Field(
            # user-defined PriorityClass values are at most 1,000,000,000 (higher are the system's)
            Int(minimum=0, maximum=1_000_000_000),
            default=TENANT_PRIORITY_DEFAULT,
            doc="Kubernetes: the tenant's PriorityClass / Kueue WorkloadPriorityClass value; higher preempts "
            "lower in its queue and the cohort",
        ),
    }
)

BRIEF = Map(
    fields={
        "brief_version": Field(Int(choices=BRIEF_VERSIONS), True, doc="format version"),
        "cluster": Field(CLUSTER, True, doc="the cluster"),
        "software": Field(SOFTWARE, True, doc="version pins: drift is measured against these"),
        "networks": Field(NETWORKS, True, doc="management, BMC, storage, fabric, Kubernetes networks"),
        "controllers": Field(CONTROLLERS, True, doc="the control plane's group"),
        "pools": Field(
            List(item=POOL, min_items=1, max_items=MAX_POOLS),
            True,
            doc="one per node shape, bound to an inventory group",
        ),
        "acceptance": Field(ACCEPTANCE, default={}, doc="NCCL acceptance thresholds"),
        "tenants": Field(List(item=TENANT, max_items=MAX_TENANTS), default=[], doc="teams with GPU quotas (optional)"),
        "storage": Field(STORAGE, doc="local scratch, shared file systems, checkpoint root (role storage)"),
        "cost": Field(COST, doc="monthly cost, unit of accepted work, baseline (gpufleet report cost)"),
        "quote": Field(QUOTE, doc="what the provider quoted, for every pool without a quote of its own"),
    }
)


def validate(brief: Any) -> tuple[list[dict], dict]:
    """Check the brief against the schema. Returns (violations, clean brief with defaults).

    ``clean`` holds only values that passed; a missing section is an empty mapping, a missing
    list an empty list, and list items that failed are None (positions are kept).
    """
    out: list[dict] = []
    clean = BRIEF.check(brief, "", out)
    if clean is None:
        clean = {}
    for section in ("cluster", "software", "networks", "controllers", "acceptance"):
        clean.setdefault(section, {})
    clean["acceptance"] = dict(clean["acceptance"])
    for key, spec in ACCEPTANCE.fields.items():
        if spec.default is not None:
            clean["acceptance"].setdefault(key, spec.default)
    clean.setdefault("pools", [])
    clean.setdefault("tenants", [])
    return out, clean


__all__ = ["BRIEF", "CONTROL_PLANES", "FABRIC_TYPES", "SHARING", "show", "type_name", "validate"]
