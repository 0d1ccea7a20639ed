from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import catalogue as cat

REQUIRED = [
    "a100-sxm-40gb",
    "a100-sxm-80gb",
    "a100-pcie-80gb",
    "h100-sxm-80gb",
    "h100-pcie-80gb",
    "h100-nvl-94gb",
    "h200-sxm-141gb",
    "h200-nvl-141gb",
    "gh200-96gb",
    "b200-sxm-180gb",
    "gb200-nvl72",
    "l40s",
    "l4",
]


@pytest.mark.parametrize("key", REQUIRED)
def test_required_entries_are_consistent(key):
    acc = cat.get_accelerator(key)
    assert acc is not None and acc.key == key
    assert acc.nvidia_smi_name.startswith("NVIDIA ")
    assert acc.memory_mib > 16000
    assert acc.architecture in cat.ARCHITECTURES and acc.form_factor in cat.FORM_FACTORS
    assert acc.mig == bool(acc.mig_profiles)
    assert (acc.nvlink_generation is None) == (acc.nvlink_busbw_gbps == 0)
    # The default floor never exceeds the physical ceiling in the accelerator's natural topology.
    assert acc.expected_single_node_busbw_gbps <= max(acc.nvlink_busbw_gbps, acc.pcie_gbps)
    assert acc.min_driver_branch >= 450


@pytest.mark.parametrize(
    ("key", "name", "mib", "branch"),
    [
        ("h100-sxm-80gb", "NVIDIA H100 80GB HBM3", 81559, 525),
        ("b200-sxm-180gb", "NVIDIA B200", 183359, 570),
    ],
)
def test_known_figures(key, name, mib, branch):
    acc = cat.get_accelerator(key)
    assert (acc.nvidia_smi_name, acc.memory_mib, acc.min_driver_branch) == (name, mib, branch)
    assert cat.get_accelerator("h100-sxm-80gb").nvlink_busbw_gbps == 450


@pytest.mark.parametrize("key", ["", None, "h100", 42, "H100-SXM-80GB"])
def test_unknown_keys(key):
    assert cat.get_accelerator(key) is None
    assert cat.accelerator_dict(key) == {}


def test_accelerator_dict_is_plain():
    d = cat.accelerator_dict("a100-sxm-80gb")
    assert d["mig_profiles"][0] == "1g.10gb" and isinstance(d["mig_profiles"], list)
    assert d["key"] == "a100-sxm-80gb"


def test_topologies():
    for name in ("8gpu-sxm-nvlink", "4gpu-sxm-nvlink", "pcie", "pcie-nvlink-bridge", "nvl72"):
        assert name in cat.TOPOLOGIES
    assert cat.TOPOLOGIES["8gpu-sxm-nvlink"].nvswitch and cat.TOPOLOGIES["8gpu-sxm-nvlink"].gpus == 8
    assert not cat.TOPOLOGIES["pcie"].all_pairs_nvlink


@pytest.mark.parametrize(
    ("key", "topo", "ceiling"),
    [
        ("h100-sxm-80gb", "8gpu-sxm-nvlink", 450),
        ("l40s", "pcie", 32),
        ("h100-nvl-94gb", "pcie-nvlink-bridge", 300),
    ],
)
def test_single_node_ceiling(key, topo, ceiling):
    assert cat.single_node_ceiling_gbps(cat.get_accelerator(key), cat.get_topology(topo)) == ceiling
