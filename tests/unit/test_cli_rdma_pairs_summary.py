"""The CLI's acceptance summary line names the per-rail RDMA pairs' verdict and what they found
(scripts/gpufleet_cli/cmd_provision.py), from records as acceptance/rdma_pairs.py judges them."""

from __future__ import annotations

import json
import sys

from lab_playbook import ROOT

sys.path.insert(0, str(ROOT / "collections"))
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import rdma_pairs as rp


def record(figure) -> dict:
    rows = []
    for a, b in (("a", "b"), ("a", "c"), ("b", "c")):
        value = figure(a, b)
        head = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
        rows.append(
            {
                "round": 1,
                "server": a,
                "client": b,
                "rail": 2,
                "server_device": "mlx5_2",
                "client_device": "mlx5_2",
                "rc": 0,
                "stdout": f"{head}\n 1048576  100  0.00  {value}  0.04\n",
            }
        )
    out = rp.judge(rows, 360.0, pool="h100")
    out.update(rounds=3, pool="h100")
    return out


def test_summary_names_a_slow_port_a_slow_link_and_a_pass(tmp_path):
    from gpufleet_cli.cmd_provision import acceptance_line, rdma_pairs_summary

    slow_port = record(lambda a, b: 150.0 if "c" in (a, b) else 392.0)
    assert rdma_pairs_summary({"rdma_pairs": [slow_port]}) == "; RDMA pairs: FAIL (slow port c mlx5_2 rail 2)"
    slow_link = record(lambda a, b: 150.0 if (a, b) == ("a", "b") else 392.0)
    assert rdma_pairs_summary({"rdma_pairs": [slow_link]}) == (
        "; RDMA pairs: FAIL (slow link b mlx5_2 (rail 2) -> a mlx5_2 (rail 2) in pool h100)"
    )
    clean = record(lambda a, b: 392.0)
    assert rdma_pairs_summary({"rdma_pairs": [clean]}) == "; RDMA pairs: PASS (3 rail runs, 3 round(s))"
    assert rdma_pairs_summary({"verdict": "pass"}) == ""

    run = tmp_path / "lab" / "20260101T000000Z"
    run.mkdir(parents=True)
    (run / "acceptance.json").write_text(json.dumps({"verdict": "fail", "rdma_pairs": [slow_port]}))
    assert acceptance_line(str(tmp_path)).endswith(
        "(scripts/gpufleet report); RDMA pairs: FAIL (slow port c mlx5_2 rail 2)"
    )
