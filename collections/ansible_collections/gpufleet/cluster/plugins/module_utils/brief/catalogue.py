# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The accelerator catalogue and the node topologies a brief may name.

Shared by the preflight gate (brief vs inventory), the hardware gate (facts vs
brief) and acceptance (NCCL floors). Pure data: no I/O, no third-party imports,
so modules running on targets can import it too.

Units: memory in MiB as ``nvidia-smi --query-gpu=memory.total`` prints it;
bandwidth in GB/s (10^9 bytes/s) as nccl-tests prints busbw.

``nvlink_busbw_gbps`` is the physical ceiling of single-node all_reduce busbw:
the per-GPU *unidirectional* NVLink bandwidth (NVIDIA quotes the bidirectional
figure: 900 GB/s for NVLink 4 → 450 GB/s). ``pcie_gbps`` is the unidirectional
x16 figure (Gen4 32 GB/s, Gen5 64 GB/s), the ceiling when GPUs talk over PCIe.
Cards without NVLink have ``nvlink_generation=None`` and ``nvlink_busbw_gbps=0``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

ARCHITECTURES = ("ampere", "ada", "hopper", "blackwell")
FORM_FACTORS = ("sxm", "pcie", "superchip")


@dataclass(frozen=True)
class Accelerator:
    key: str
    nvidia_smi_name: str
    memory_mib: int
    architecture: str
    form_factor: str
    mig: bool
    mig_profiles: tuple[str, ...]
    nvlink_generation: int | None
    nvlink_busbw_gbps: float
    expected_single_node_busbw_gbps: float
    min_driver_branch: int
    min_cuda: str
    # Additions beyond the shared interface (defaults keep older callers working).
    pcie_gbps: float = 64.0
    open_kernel_modules_required: bool = False
    # Other names nvidia-smi has been seen printing (drivers without the marketing name).
    nvidia_smi_aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Topology:
    name: str
    gpus: int | None  # GPUs per node the topology implies; None = any
    nvswitch: bool  # NVSwitch in the node (or rack): fabric manager / NVLink subnet manager required
    all_pairs_nvlink: bool  # every GPU pair talks over NVLink
    form_factors: tuple[str, ...]
    description: str = ""


# Common MIG profile sets (NVIDIA MIG User Guide, "Supported MIG Profiles" tables).
_MIG_A100_40 = ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
_MIG_80 = ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")
_MIG_H100_NVL = ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb")
_MIG_H200 = ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")
_MIG_GH200_96 = ("1g.12gb", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb")
_MIG_B200 = ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb")
_MIG_GB200 = ("1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb")

_ENTRIES = (
    # --- Ampere (sm_80): CUDA 11.0, R450 (CUDA 11.0 release notes; A100 launch driver 450.36.06).
    # NVLink 3: 600 GB/s bidirectional per GPU → 300 unidirectional (A100 datasheet).
    # Expected busbw: Azure aznhc NDv4 (8x A100 SXM) all_reduce threshold ~228 GB/s.
    # Memory: nvidia-smi reports 40960 MiB / 81920 MiB on A100 SXM4 40GB / 80GB.
    Accelerator(
        "a100-sxm-40gb",
        "NVIDIA A100-SXM4-40GB",
        40960,
        "ampere",
        "sxm",
        True,
        _MIG_A100_40,
        3,
        300.0,
        228.0,
        450,
        "11.0",
        pcie_gbps=32.0,
    ),
    Accelerator(
        "a100-sxm-80gb",
        "NVIDIA A100-SXM4-80GB",
        81920,
        "ampere",
        "sxm",
        True,
        _MIG_80,
        3,
        300.0,
        228.0,
        450,
        "11.0",
        pcie_gbps=32.0,
    ),
    # A100 80GB PCIe: NVLink bridge (3rd gen, 600 GB/s bidirectional between a pair), PCIe Gen4.
    # Supported from R460 (A100 80GB PCIe launch, 460.73.01).
    Accelerator(
        "a100-pcie-80gb",
        "NVIDIA A100 80GB PCIe",
        81920,
        "ampere",
        "pcie",
        True,
        _MIG_80,
        3,
        300.0,
        24.0,
        460,
        "11.0",
        pcie_gbps=32.0,
    ),
    # --- Ada (sm_89): CUDA 11.8, R525 (first production data-center branch listing L4 / L40S).
    # No NVLink; PCIe Gen4 x16. Single-node all_reduce over PCIe ~20-25 GB/s.
    Accelerator("l40s", "NVIDIA L40S", 46068, "ada", "pcie", False, (), None, 0.0, 20.0, 525, "11.8", pcie_gbps=32.0),
    Accelerator("l4", "NVIDIA L4", 23034, "ada", "pcie", False, (), None, 0.0, 20.0, 525, "11.8", pcie_gbps=32.0),
    # --- Hopper (sm_90): CUDA 11.8; H100 supported from R525 (data-center driver support matrix).
    # NVLink 4: 900 GB/s bidirectional per GPU on SXM → 450 (H100 datasheet). nvidia-smi -q of an
    # HGX H100 (shared/samples/12): "NVIDIA H100 80GB HBM3", 81559 MiB.
    # Expected: Azure aznhc ND H100 v5 uses 460 GB/s; CoreWeave/OCI report 440-480; 440 is our default.
    Accelerator(
        "h100-sxm-80gb", "NVIDIA H100 80GB HBM3", 81559, "hopper", "sxm", True, _MIG_80, 4, 450.0, 440.0, 525, "11.8"
    ),
    # H100 PCIe: optional NVLink bridge 600 GB/s bidirectional → 300 (H100 PCIe product brief).
    Accelerator(
        "h100-pcie-80gb", "NVIDIA H100 PCIe", 81559, "hopper", "pcie", True, _MIG_80, 4, 300.0, 40.0, 525, "11.8"
    ),
    # H100 NVL: 94 GB, NVLink bridge 600 GB/s bidirectional (H100 NVL product brief), from R535.
    Accelerator(
        "h100-nvl-94gb", "NVIDIA H100 NVL", 95830, "hopper", "pcie", True, _MIG_H100_NVL, 4, 300.0, 40.0, 535, "12.2"
    ),
    # H200: 141 GB HBM3e, NVLink 4 900 GB/s bidirectional (H200 datasheet); supported from R550
    # (550.54.14, data-center driver release notes "Added support for H200"). 143771 MiB reported.
    # Same NVLink as H100, so the same default floor (NVLS can exceed 450 in practice; see docs).
    Accelerator(
        "h200-sxm-141gb", "NVIDIA H200", 143771, "hopper", "sxm", True, _MIG_H200, 4, 450.0, 440.0, 550, "12.4"
    ),
    # H200 NVL: 2- or 4-way NVLink bridge at 900 GB/s bidirectional (H200 NVL product brief), R560+.
    Accelerator(
        "h200-nvl-141gb", "NVIDIA H200 NVL", 143771, "hopper", "pcie", True, _MIG_H200, 4, 450.0, 40.0, 560, "12.6"
    ),
    # GH200 superchip (96 GB HBM3): one GPU per superchip, NVLink-C2C to Grace; GPU-GPU NVLink 4 in NVL32.
    # "NVIDIA GH200 480GB" is the name nvidia-smi prints for the 96 GB part (480 GB = LPDDR5X + HBM3);
    # supported from R535 (535.129.03 added GH200).
    Accelerator(
        "gh200-96gb",
        "NVIDIA GH200 480GB",
        97871,
        "hopper",
        "superchip",
        True,
        _MIG_GH200_96,
        4,
        450.0,
        0.0,
        535,
        "12.2",
    ),
    # --- Blackwell (sm_100): CUDA 12.8 and driver R570 (CUDA 12.8 release notes; B200 needs 570.x).
    # Blackwell is supported by the open GPU kernel modules only (NVIDIA driver installation guide).
    # NVLink 5: 1.8 TB/s bidirectional per GPU → 900.
    Accelerator(
        "b200-sxm-180gb",
        "NVIDIA B200",
        183359,
        "blackwell",
        "sxm",
        True,
        _MIG_B200,
        5,
        900.0,
        720.0,
        570,
        "12.8",
        open_kernel_modules_required=True,
    ),
    # GB200 NVL72: 72 GPUs in one NVLink domain (MNNVL). CoreWeave reports ~835-847 GB/s busbw on one
    # rack with NCCL 2.26.2 (shared/samples/14); some drivers print "NVIDIA Graphics Device".
    Accelerator(
        "gb200-nvl72",
        "NVIDIA GB200",
        189471,
        "blackwell",
        "superchip",
        True,
        _MIG_GB200,
        5,
        900.0,
        800.0,
        570,
        "12.8",
        open_kernel_modules_required=True,
        nvidia_smi_aliases=("NVIDIA Graphics Device",),
    ),
)

ACCELERATORS: dict[str, Accelerator] = {a.key: a for a in _ENTRIES}

TOPOLOGIES: dict[str, Topology] = {
    t.name: t
    for t in (
        Topology("8gpu-sxm-nvlink", 8, True, True, ("sxm",), "HGX/DGX 8-GPU baseboard, NVSwitch: fabric manager"),
        Topology("4gpu-sxm-nvlink", 4, False, True, ("sxm",), "HGX 4-GPU board, direct NVLink between all GPUs"),
        Topology("pcie", None, False, False, ("pcie",), "PCIe cards, no NVLink: peer traffic over PCIe"),
        Topology("pcie-nvlink-bridge", None, False, False, ("pcie",), "PCIe cards paired by NVLink bridges"),
        Topology("superchip", None, False, False, ("superchip",), "Grace Hopper superchip nodes (1-4 GPUs)"),
        Topology("nvl72", 4, True, True, ("superchip",), "GB200 NVL72 compute tray: 4 GPUs in a 72-GPU NVLink rack"),
    )
}


def get_accelerator(key: str) -> Accelerator | None:
    if not isinstance(key, str):
        return None
    return ACCELERATORS.get(key)


def accelerator_dict(key: str) -> dict:
    """The catalogue entry as a plain dict (tuples become lists), ``{}`` when unknown or empty."""
    acc = get_accelerator(key)
    if acc is None:
        return {}
    data = asdict(acc)
    for k, v in data.items():
        if isinstance(v, tuple):
            data[k] = list(v)
    return data


def get_topology(name: str) -> Topology | None:
    if not isinstance(name, str):
        return None
    return TOPOLOGIES.get(name)


def single_node_ceiling_gbps(acc: Accelerator, topology: Topology | None) -> float:
    """Upper bound of single-node all_reduce busbw for this accelerator in this topology.

    NVLink between all pairs (or bridges, generously) → the NVLink figure; otherwise PCIe.
    """
    if topology is not None and not topology.all_pairs_nvlink and topology.name == "pcie":
        return acc.pcie_gbps
    return max(acc.nvlink_busbw_gbps, acc.pcie_gbps)


def default_single_node_floor_gbps(acc: Accelerator, topology: Topology | None) -> float:
    """The realistic floor used when a brief gives none: the catalogue figure, or ~60 % of PCIe."""
    if topology is not None and not topology.all_pairs_nvlink:
        return min(acc.expected_single_node_busbw_gbps or acc.pcie_gbps, round(acc.pcie_gbps * 0.6, 1))
    return acc.expected_single_node_busbw_gbps


__all__ = [
    "ACCELERATORS",
    "ARCHITECTURES",
    "FORM_FACTORS",
    "TOPOLOGIES",
    "Accelerator",
    "Topology",
    "accelerator_dict",
    "default_single_node_floor_gbps",
    "get_accelerator",
    "get_topology",
    "single_node_ceiling_gbps",
]
