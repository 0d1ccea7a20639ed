"""nccl_debug: NCCL_DEBUG=INFO transport evidence, on our own fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_debug as nd

FIXTURES = Path(__file__).parent / "fixtures" / "nccl"

# fixture, version, network, kind, gdr, socket_fallback, link layers, nvls, transports subset
CASES = [
    (
        "debug_2node_h100_ib_gdrdma.txt",
        "2.26.2",
        "IB",
        "ib",
        True,
        False,
        ["IB"],
        True,
        {"NET/IB/GDRDMA": 4, "P2P/CUMEM": 1},
    ),
    (
        "debug_2node_socket_fallback.txt",
        "2.23.4",
        "Socket",
        "socket",
        False,
        True,
        [],
        None,
        {"NET/Socket": 2, "P2P/IPC": 1},
    ),
    (
        "debug_2node_plugin_ofi.txt",
        "2.22.3",
        "AWS Libfabric",
        "plugin",
        True,
        False,
        [],
        None,
        {"NET/AWS Libfabric/GDRDMA": 2},
    ),
    ("debug_2node_roce_no_gdr.txt", "2.27.5", "IB", "ib", False, False, ["RoCE"], False, {"NET/IB": 2, "SHM": 1}),
    (
        "allreduce_2node_gh200_srun_label_container.txt",
        "2.26.2",
        "IB",
        "ib",
        True,
        False,
        [],
        None,
        {"NET/IB/GDRDMA": 1},
    ),
]


@pytest.mark.parametrize(
    "name,version,network,kind,gdr,fallback,layers,nvls,transports", CASES, ids=[c[0] for c in CASES]
)
def test_fixture(name, version, network, kind, gdr, fallback, layers, nvls, transports):
    d = nd.parse_debug((FIXTURES / name).read_text(), name)
    assert d is not None
    assert d["file"] == name
    assert d["nccl_version"] == version
    assert d["network"] == network
    assert nd.network_kind(d) == kind
    assert d["gdr"] is gdr
    assert d["socket_fallback"] is fallback
    assert d["link_layers"] == layers
    assert d["nvls"] is nvls
    for key, count in transports.items():
        assert d["transports"].get(key) == count, key


def test_ib_devices_and_hosts():
    d = nd.parse_debug((FIXTURES / "debug_2node_h100_ib_gdrdma.txt").read_text())
    assert d["ib_devices"][:2] == ["mlx5_0:1/IB", "mlx5_3:1/IB"] and len(d["ib_devices"]) == 8
    assert d["hosts"] == ["gpu-a017", "gpu-a018"]
    assert d["nnodes"] == 2 and d["nranks"] == 16


def test_socket_devices_and_tagged_prefix():
    d = nd.parse_debug((FIXTURES / "debug_2node_socket_fallback.txt").read_text())
    assert d["socket_devices"] == ["eno1:172.20.3.3"]
    assert d["hosts"] == ["node-b03", "node-b04"]


@pytest.mark.parametrize(
    "lines,gdr",
    [
        (["h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA"], True),
        (
            [
                "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
                "h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/IB/1",
            ],
            False,
        ),
        (["h:1:1 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1"], True),
        (["h:1:1 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0"], False),
        (["h:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"], True),
        # channels beat the rings flag
        (
            [
                "h:1:1 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
                "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0",
            ],
            False,
        ),
        (["h:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>"], None),
    ],
)
def test_gdr_evidence(lines, gdr):
    assert nd.parse_debug("\n".join(lines))["gdr"] is gdr


@pytest.mark.parametrize(
    "via,expected",
    [
        ("NET/IB/0(4)/GDRDMA", "NET/IB/GDRDMA"),
        ("NET/NCCL RDMA Plugin v8/1/GDRDMA", "NET/NCCL RDMA Plugin v8/GDRDMA"),
        ("NET/Socket/0", "NET/Socket"),
        ("P2P/CUMEM/read", "P2P/CUMEM"),
        ("P2P/direct pointer", "P2P/direct"),
        ("SHM/direct/direct", "SHM"),
        ("CollNet/0", "CollNet"),
    ],
)
def test_normalise_transport(via, expected):
    assert nd._normalise_transport(via) == expected


def test_hpcx_rdma_plugin_counts_as_ib():
    text = "\n".join(
        [
            "n1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/IB/SHARP [RO]; OOB bond0:10.1.1.1<0>",
            "n1:1:2 [0] NCCL INFO Using network NCCL RDMA Plugin v8",
            "n1:1:2 [1] NCCL INFO Channel 01/0 : 9[1] -> 1[1] [receive] via NET/NCCL RDMA Plugin v8/1/GDRDMA",
        ]
    )
    d = nd.parse_debug(text)
    assert nd.network_kind(d) == "ib" and d["gdr"] is True and d["ib_devices"] == ["mlx5_0:1/IB", "mlx5_1:1/IB"]


def test_assigned_net_plugin_newer_nccl():
    d = nd.parse_debug("h:1:1 [0] NCCL INFO Assigned NET plugin Socket to comm\n")
    assert d["network"] == "Socket" and d["socket_fallback"] is True


def test_version_only_log():
    d = nd.parse_debug("NCCL version 2.26.2+cuda12.8\nh:1:1 [0] NCCL INFO cudaDriverVersion 12080\n")
    assert d["nccl_version"] == "2.26.2" and d["network"] is None and d["gdr"] is None
    assert nd.network_kind(d) is None


def test_warn_lines_collected():
    d = nd.parse_debug("h:1:1 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2 with error 12\n")
    assert d["warnings"] == ["NET/IB : Got completion from peer 10.0.0.2 with error 12"]


@pytest.mark.parametrize("text", ["", "no nccl here", "\x00\xff" * 50, "NCCL INFO", None, 42])
def test_no_info_lines_is_none(text):
    assert nd.parse_debug(text) is None
    assert nd.network_kind(None) is None
