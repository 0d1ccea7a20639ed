"""Per-rail RDMA pairs (ib_write_bw): the schedule, the parser, the narrowing to a port or a link, the
plan and drain reasons, the preflight of the brief's floor and the test double
(module_utils/acceptance/rdma_pairs.py, filter/rdma_pairs.py, preflight/acceptance.py, doubles/bin/ib_write_bw)."""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.rdma_pairs import rdma_pairs_judge, rdma_pairs_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import rdma_pairs as rp
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief import schema
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.acceptance import check_rdma_pairs
from hw_helpers import DOUBLES_BIN, profile_path

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "ib_write_bw")
DOUBLE = os.path.join(DOUBLES_BIN, "ib_write_bw")


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as fh:
        return fh.read()


# --- schedule ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", range(2, 12))
def test_all_mode_covers_every_pair_exactly_once_in_disjoint_rounds(n):
    nodes = [f"gpu{i:02d}" for i in range(n)]
    rounds = rp.schedule(nodes, "all")
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = [frozenset(p) for rnd in rounds for p in rnd]
    assert len(seen) == len(set(seen)) == n * (n - 1) // 2
    assert set(seen) == {frozenset(p) for p in itertools.combinations(nodes, 2)}
    for rnd in rounds:
        members = [x for p in rnd for x in p]
        assert len(members) == len(set(members)), rnd  # disjoint: a node in one pair per round
        # Even N: every node every round; odd N: exactly one sits out.
        assert len(members) == (n if n % 2 == 0 else n - 1)


def test_odd_pool_gives_each_node_one_bye():
    nodes = ["a", "b", "c", "d", "e"]
    rounds = rp.schedule(nodes, "all")
    out = [next(x for x in nodes if all(x not in p for p in rnd)) for rnd in rounds]
    assert sorted(out) == nodes


def test_rail_mode_pairs_neighbours_in_a_ring():
    assert rp.schedule(["a", "b"], "rail") == [[("a", "b")]]
    four = rp.schedule(["a", "b", "c", "d"], "rail")
    assert four == [[("a", "b"), ("c", "d")], [("b", "c"), ("d", "a")]]
    five = rp.schedule(list("abcde"), "rail")
    assert len(five) == 3
    pairs = {frozenset(p) for rnd in five for p in rnd}
    assert pairs == {frozenset(p) for p in [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "a")]}
    for rnd in five:
        members = [x for p in rnd for x in p]
        assert len(members) == len(set(members))


def test_schedule_edge_cases():
    assert rp.schedule(["a"], "all") == [] and rp.schedule([], "rail") == []
    assert rp.schedule(["a", "a", "b"], "all") == [[("a", "b")]]
    with pytest.raises(rp.RdmaPairsError, match="mode"):
        rp.schedule(["a", "b"], "ring")


# --- parser --------------------------------------------------------------------------------------


def test_parse_gbits_with_gpudirect_lines():
    got = rp.parse(fixture("client_gdr_gbits.txt"))
    assert got == {
        "bytes": 1048576,
        "iterations": 233704,
        "peak_gbit": 0.0,
        "average_gbit": 391.87,
        "msg_rate_mpps": 0.046715,
        "unit": "Gb/sec",
    }


def test_parse_mbytes_converts_with_perftests_megabyte_and_skips_warnings():
    got = rp.parse(fixture("client_mbytes_warning.txt"))
    # perftest's MB is 2^20 bytes: 23302.11 MB/sec x 8 x 1048576 / 10^9.
    assert got["unit"] == "MB/sec" and got["average_gbit"] == round(23302.11 * 8 * 1048576 / 1e9, 2) == 195.47
    assert got["bytes"] == 65536 and got["iterations"] == 5000


def test_parse_all_sizes_takes_the_largest_message():
    got = rp.parse(fixture("client_all_sizes.txt"))
    assert got["bytes"] == 8388608 and got["average_gbit"] == 392.95


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("client_cut_short.txt", "no result table"),
        ("client_no_server.txt", "no result table"),
        ("server_waiting.txt", "no result table"),
    ],
)
def test_parse_refuses_output_without_a_table(name, why):
    with pytest.raises(rp.RdmaPairsError, match=why):
        rp.parse(fixture(name))


def test_parse_refuses_a_header_without_figures_and_empty_output():
    head = fixture("client_all_sizes.txt").split(" 2          5000")[0]
    with pytest.raises(rp.RdmaPairsError, match="without figures"):
        rp.parse(head)
    with pytest.raises(rp.RdmaPairsError, match="no output"):
        rp.parse("  \n")


# --- narrowing -----------------------------------------------------------------------------------


def result(server, client, rail, gbit=None, rc=0, **extra):
    head = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
    out = f"{head}\n 1048576    1000   0.00   {gbit}   0.04\n"
    return {
        "round": 1,
        "server": server,
        "client": client,
        "rail": rail,
        "server_device": f"mlx5_{rail}",
        "client_device": f"mlx5_{rail}",
        "rc": rc,
        "stdout": out if gbit is not None else "",
        **extra,
    }


def pool_results(nodes, rails, figure):
    """Every pair of ``nodes`` once on every rail, each figure from ``figure(a, b, rail)``."""
    out = []
    for a, b in itertools.combinations(nodes, 2):
        for r in range(rails):
            value = figure(a, b, r)
            out.append(result(a, b, r, None if value is None else value, rc=0 if value is not None else 1))
    return out


def test_a_rail_slow_with_every_partner_is_the_port():
    nodes = ["gpu01", "gpu02", "gpu03", "gpu04"]
    got = rp.judge(pool_results(nodes, 2, lambda a, b, r: 196.0 if r == 1 and "gpu03" in (a, b) else 392.0), 360.0)
    assert [(v["code"], v["host"]) for v in got["violations"]] == [("RDMA_PORT_SLOW", "gpu03")]
    assert "gpu03 mlx5_1 (rail 1)" in got["violations"][0]["message"] and "360" in got["violations"][0]["message"]
    port = next(p for p in got["ports"] if p["host"] == "gpu03" and p["rail"] == 1)
    assert port["verdict"] == "slow" and port["slow_with"] == ["gpu01", "gpu02", "gpu04"] and port["min_gbit"] == 196.0
    # The partners of the slow port are not blamed: each is fast with its other partners.
    assert {p["verdict"] for p in got["ports"] if p["host"] != "gpu03" and p["rail"] == 1} == {"suspect"}
    assert rp.drain_reasons([got]) == {"gpu03": ["rdma port slow mlx5_1 rail 1, 196.0 < 360 Gb/s"]}


def test_a_rail_slow_with_one_partner_only_is_the_link():
    nodes = ["gpu01", "gpu02", "gpu03"]
    got = rp.judge(pool_results(nodes, 1, lambda a, b, r: 250.0 if {a, b} == {"gpu01", "gpu02"} else 392.0), 360.0)
    assert [(v["code"], v["host"]) for v in got["violations"]] == [("RDMA_LINK_SLOW", None)]
    message = got["violations"][0]["message"]
    assert "gpu01 mlx5_0 (rail 0)" in message and "gpu02 mlx5_0 (rail 0)" in message and "250.00" in message
    assert rp.drain_reasons([got]) == {}


def test_a_failed_run_is_a_failure_never_a_pass():
    nodes = ["gpu01", "gpu02", "gpu03"]
    got = rp.judge(pool_results(nodes, 1, lambda a, b, r: None if {a, b} == {"gpu02", "gpu03"} else 392.0), 360.0)
    assert [(v["code"], v["host"]) for v in got["violations"]] == [("RDMA_PAIR_FAILED", None)]
    assert "exited with status 1" in got["violations"][0]["message"]
    row = next(p for p in got["pairs"] if {p["server"], p["client"]} == {"gpu02", "gpu03"})
    assert row["status"] == "failed" and "average_gbit" not in row


def test_a_rail_failing_with_every_partner_is_that_nodes_port():
    nodes = ["gpu01", "gpu02", "gpu03"]
    got = rp.judge(pool_results(nodes, 1, lambda a, b, r: None if "gpu01" in (a, b) else 392.0), 360.0)
    assert [(v["code"], v["host"]) for v in got["violations"]] == [("RDMA_PAIR_FAILED", "gpu01")]
    assert rp.drain_reasons([got]) == {"gpu01": ["rdma port failed mlx5_0 rail 0 with every partner"]}


def test_a_run_that_timed_out_or_printed_no_table_fails():
    rows = [
        result("a", "b", 0, 392.0, timed_out=True, timeout=60),
        {**result("a", "b", 1, None), "stdout": fixture("client_cut_short.txt")},
        {**result("a", "b", 2, None), "rc": None, "reason": "the client's run reported nothing"},
    ]
    got = rp.judge(rows, 360.0)
    assert [v["code"] for v in got["violations"]] == ["RDMA_PAIR_FAILED"] * 3
    reasons = [p["reason"] for p in got["pairs"]]
    assert (
        "did not finish within 60 s" in reasons[0]
        and "no result table" in reasons[1]
        and "reported nothing" in reasons[2]
    )


def test_everything_at_the_floor_passes_and_no_floor_judges_nothing_slow():
    nodes = ["a", "b", "c", "d"]
    ok = rp.judge(pool_results(nodes, 8, lambda a, b, r: 360.0), 360.0)
    assert ok["violations"] == [] and {p["verdict"] for p in ok["ports"]} == {"ok"}
    assert rp.judge(pool_results(nodes, 1, lambda a, b, r: 10.0), None)["violations"] == []


# --- floor, rails, plan, argv, drain -------------------------------------------------------------


def test_floor_from_fraction_or_absolute_gbytes():
    assert rp.floor_gbit({"min_fraction": 0.95}, 400)["gbit_s"] == 380
    assert rp.floor_gbit({}, 400)["gbit_s"] == 360  # the default share, 0.9
    absolute = rp.floor_gbit({"min_gbps": 45}, 400)
    assert absolute["gbit_s"] == 360 and "45 GB/s x 8" in absolute["how"]
    assert rp.floor_gbit({"min_fraction": 0.9}, None)["gbit_s"] is None


def hw_from_profile(name: str) -> dict:
    with open(profile_path(name), encoding="utf-8") as fh:
        profile = json.load(fh)
    nics = profile["nics"]
    return {
        "rdma": {
            "ports": [
                {
                    "device": n["name"],
                    "port": 1,
                    "link_layer": n["link_layer"],
                    "rate_gbps": n["rate_gbps"],
                    "state": n["state"],
                }
                for n in nics
            ]
        },
        "topology": {
            "nics": [{"label": f"NIC{k}", "name": n["name"]} for k, n in enumerate(reversed(nics))],
            "gpu_nic": [["PIX" if n.get("gpu") == g else "SYS" for n in reversed(nics)] for g in range(8)],
        },
    }


BRIEF = {
    "networks": {"fabric": {"type": "infiniband", "link_speed_gbps": 400}},
    "pools": [{"name": "h100", "group": "gpu", "nics_per_node": 8, "gpudirect_rdma": True}],
    "acceptance": {"rdma_pairs": {"mode": "all"}},
}


def test_node_rails_follow_device_order_and_the_pix_gpu():
    hw = hw_from_profile("h100-hgx-healthy")
    hw["rdma"]["ports"].append({"device": "mlx5_10", "port": 1, "link_layer": "Ethernet"})  # a front-end port
    hw["rdma"]["ports"].append({"device": "mlx5_bond_0", "port": 1, "link_layer": "Ethernet"})
    rails = rp.node_rails(hw, BRIEF, BRIEF["pools"][0])
    assert [r["device"] for r in rails] == [f"mlx5_{i}" for i in range(8)]
    assert [r["gpu"] for r in rails] == list(range(8))  # topo -m columns in another order: matched by name


def test_plan_runs_rail_to_rail_on_distinct_tcp_ports_with_gpudirect():
    rails = {n: rp.node_rails(hw_from_profile("h100-hgx-healthy"), BRIEF, BRIEF["pools"][0]) for n in "abcd"}
    plan = rdma_pairs_plan(list("abcd"), BRIEF, "h100", rails, {"a": "10.0.0.1"})
    assert plan["enabled"] and plan["gpudirect"] and plan["floor_gbit"] == 360 and len(plan["rounds"]) == 3
    first = plan["rounds"][0]
    # A node is in one pair per round: rail r listens on 18515 + r on every server.
    assert [[p["tcp_port"] for p in pair["ports"]] for pair in first["pairs"]] == [list(range(18515, 18523))] * 2
    spread = rdma_pairs_plan(list("abcd"), BRIEF, "h100", rails, spread=True)["rounds"][0]
    ports = [p["tcp_port"] for pair in spread["pairs"] for p in pair["ports"]]
    assert ports == list(range(18515, 18531))  # nodes behind one address: every rail of the round its own
    pair = first["pairs"][0]
    assert pair["address"] == "10.0.0.1" and all(p["server_device"] == p["client_device"] for p in pair["ports"])
    cmd = rp.argv("ib_write_bw", "client", pair["ports"][4], plan["settings"], pair["address"])
    assert cmd == [
        "ib_write_bw",
        "-d",
        "mlx5_4",
        "-i",
        "1",
        "-p",
        str(pair["ports"][4]["tcp_port"]),
        "-s",
        "1048576",
        "--report_gbits",
        "-F",
        "-D",
        "5",
        "--use_cuda=4",
        "10.0.0.1",
    ]
    server = rp.argv("ib_write_bw", "server", pair["ports"][0], {"iters": 5000, "size": "64K"})
    assert server[-4:] == ["-F", "-n", "5000", "--use_cuda=0"]


def test_plan_skips_a_rail_one_node_lacks_and_is_off_without_a_mode():
    rails = {
        "a": [{"rail": 0, "device": "mlx5_0"}, {"rail": 1, "device": "mlx5_1"}],
        "b": [{"rail": 0, "device": "mlx5_0"}],
    }
    plan = rdma_pairs_plan(["a", "b"], BRIEF, "h100", rails)
    assert [p["rail"] for p in plan["rounds"][0]["pairs"][0]["ports"]] == [0]
    assert plan["rounds"][0]["skipped"] == [{"server": "a", "client": "b", "rail": 1, "why": "b has no rail 1"}]
    off = rdma_pairs_plan(["a", "b"], {**BRIEF, "acceptance": {}}, "h100", rails)
    assert off["enabled"] is False and off["rounds"] == []
    with pytest.raises(AnsibleFilterError, match="mode"):
        rdma_pairs_plan(["a", "b"], {**BRIEF, "acceptance": {"rdma_pairs": {"mode": "ring"}}}, "h100", rails)


def test_judge_filter_matches_clients_and_servers_and_fails_a_client_that_never_reported():
    rails = {n: [{"rail": 0, "device": "mlx5_0"}] for n in "abc"}
    plan = rdma_pairs_plan(list("abc"), BRIEF, "h100", rails)
    table = fixture("client_gdr_gbits.txt")
    runs = []
    for rnd in plan["rounds"]:
        for pair in rnd["pairs"]:
            if {pair["server"], pair["client"]} == {"b", "c"}:
                continue  # that client's task failed: nothing came back
            for side in ("server", "client"):
                runs.append(
                    {
                        "round": rnd["round"],
                        "server": pair["server"],
                        "client": pair["client"],
                        "side": side,
                        "results": [{"rail": 0, "tcp_port": 18515, "rc": 0, "stdout": table, "timed_out": False}],
                    }
                )
    record = rdma_pairs_judge(runs, plan)
    assert record["rounds"] == 3 and len(record["pairs"]) == 3
    assert [v["code"] for v in record["violations"]] == ["RDMA_PAIR_FAILED"]
    assert "reported nothing" in record["violations"][0]["message"]


def test_with_drain_adds_reasons_to_a_listed_node_or_a_new_one():
    record = rp.judge(pool_results(list("abc"), 1, lambda a, b, r: 100.0 if "c" in (a, b) else 392.0), 360.0)
    listed = [{"host": "c", "reason": "gpufleet acceptance: slow node, 89.5 GB/s (report S1)"}]
    assert rp.with_drain(listed, [record], stamp="S1") == [
        {
            "host": "c",
            "reason": "gpufleet acceptance: slow node, 89.5 GB/s; rdma port slow mlx5_0 rail 0, 100.0 < 360 Gb/s "
            "(report S1)",
        }
    ]
    assert rp.with_drain([], [record], stamp="S1") == [
        {"host": "c", "reason": "gpufleet acceptance: rdma port slow mlx5_0 rail 0, 100.0 < 360 Gb/s (report S1)"}
    ]


# --- brief and preflight -------------------------------------------------------------------------


def lab_brief(rule: dict, fabric: dict | None = None) -> dict:
    return {
        "networks": {"fabric": fabric if fabric is not None else {"type": "infiniband", "link_speed_gbps": 400}},
        "acceptance": {"rdma_pairs": rule},
    }


def test_schema_knows_the_section_and_its_fields():
    out = []
    schema.RDMA_PAIRS.check({"mode": "ring", "min_fraction": 1.5, "duration": 0}, "acceptance.rdma_pairs", out)
    assert {v["field"] for v in out} == {
        "acceptance.rdma_pairs.mode",
        "acceptance.rdma_pairs.min_fraction",
        "acceptance.rdma_pairs.duration",
    }
    assert "rdma_pairs" in schema.ACCEPTANCE.fields


@pytest.mark.parametrize(
    ("rule", "fabric", "field", "words"),
    [
        ({"mode": "all", "min_fraction": 0}, None, "acceptance.rdma_pairs.min_fraction", "in (0, 1], found 0"),
        ({"mode": "all", "min_gbps": 51}, None, "acceptance.rdma_pairs.min_gbps", "<= 50 GB/s"),
        ({"mode": "all", "min_gbps": 40, "min_fraction": 0.9}, None, "acceptance.rdma_pairs.min_gbps", "found both"),
        ({"mode": "rail"}, {"type": "none"}, "acceptance.rdma_pairs.mode", "type none, no link_speed_gbps"),
    ],
)
def test_preflight_names_the_field_and_the_physical_limit(rule, fabric, field, words):
    found = check_rdma_pairs(lab_brief(rule, fabric))
    assert [(v["code"], v["field"]) for v in found] == [("ACCEPT_RDMA_PAIRS_FLOOR", field)]
    assert words in found[0]["message"]


def test_preflight_passes_physical_floors_and_an_absent_section():
    assert check_rdma_pairs(lab_brief({"mode": "all", "min_gbps": 50})) == []
    assert check_rdma_pairs(lab_brief({"mode": "all", "min_fraction": 1})) == []
    assert check_rdma_pairs({"networks": {}, "acceptance": {}}) == []


# --- the test double -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pair(server_profile: str, client_profile: str, device: str, *extra: str) -> tuple[str, str]:
    port = str(free_port())
    args = [sys.executable, DOUBLE, "-d", device, "-p", port, "-s", "1048576", "-D", "5", "--report_gbits", *extra]
    env = dict(os.environ, GPUFLEET_DOUBLE_IB_SECONDS="0", GPUFLEET_DOUBLE_IB_SERVER_WAIT="20")
    server = subprocess.Popen(
        args, env={**env, "GPUFLEET_HW_PROFILE": profile_path(server_profile)}, stdout=subprocess.PIPE, text=True
    )
    client = subprocess.run(
        [*args, "127.0.0.1"],
        env={**env, "GPUFLEET_HW_PROFILE": profile_path(client_profile)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    out, _ = server.communicate(timeout=60)
    assert client.returncode == 0 and server.returncode == 0, client.stderr
    return client.stdout, out


def test_double_answers_from_both_ends_profiles_in_perftests_format():
    healthy, server = run_pair("h100-hgx-healthy", "h100-hgx-healthy", "mlx5_4", "--use_cuda=4")
    assert 388 < rp.parse(healthy)["average_gbit"] < 396 and "Picking device No. 4" in healthy
    assert rp.parse(server)["average_gbit"] == rp.parse(healthy)["average_gbit"]
    # The slow end caps the pair, whichever side it is on.
    slow, _ = run_pair("h100-slow-rail", "h100-hgx-healthy", "mlx5_4")
    assert 190 < rp.parse(slow)["average_gbit"] < 200
    other, _ = run_pair("h100-hgx-healthy", "h100-slow-rail", "mlx5_3")
    assert rp.parse(other)["average_gbit"] > 388


def test_double_fails_as_the_tool_does():
    env = dict(
        os.environ,
        GPUFLEET_HW_PROFILE=profile_path("h100-hgx-healthy"),
        GPUFLEET_DOUBLE_IB_CONNECT_WAIT="0.3",
        GPUFLEET_DOUBLE_PEERS_DIR=HERE,
    )
    nodev = subprocess.run(
        [sys.executable, DOUBLE, "-d", "mlx5_9"], env=env, capture_output=True, text=True, check=False
    )
    assert nodev.returncode == 1 and "IB device mlx5_9 not found" in nodev.stderr
    alone = subprocess.run(
        [sys.executable, DOUBLE, "-d", "mlx5_0", "-p", str(free_port()), "nowhere.invalid"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert alone.returncode == 1 and "Couldn't connect to nowhere.invalid" in alone.stderr
    down_env = dict(env, GPUFLEET_HW_PROFILE=profile_path("h100-rdma-port-down"))
    down = subprocess.run(
        [sys.executable, DOUBLE, "-d", "mlx5_3"], env=down_env, capture_output=True, text=True, check=False
    )
    assert down.returncode == 1 and "state is Down" in down.stderr


# --- history ------------------------------------------------------------------------------------


def test_history_keeps_each_nodes_weakest_port_and_its_trend():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history

    before = rp.judge(pool_results(list("abc"), 2, lambda a, b, r: 392.0), 360.0)
    after = rp.judge(pool_results(list("abc"), 2, lambda a, b, r: 300.0 if r == 1 and "c" in (a, b) else 392.0), 360.0)
    # A node's port figure is its best partner's: a and b are not marked by c's slow port.
    assert history.rdma_port_figures([after]) == {"a": 392.0, "b": 392.0, "c": 300.0}
    records = []
    for stamp, rec in (("20260101T000000Z", before), ("20260201T000000Z", after)):
        report = {
            "timestamp": stamp,
            "cluster": "lab",
            "nodes": [{"host": h, "pool": "p"} for h in "abc"],
            "rdma_pairs": [rec],
        }
        records += history.acceptance_records(report, accepted=list("abc"), valid_days=90)
    headers, rows = history.node_table([r for r in records if r["host"] == "c"])
    assert "rdma_port_min" in headers and [row[headers.index("rdma_port_min")] for row in rows] == [392.0, 300.0]
    trends, degraded = history.trends(records, {"acceptance": {"history": {"max_degradation_pct": 10}}})
    assert [(t["host"], t["figure"]) for t in trends if t["degraded"]] == [("c", "rdma_port_min")]
    assert [(v["code"], v["host"]) for v in degraded] == [("NODE_DEGRADED", "c")]


# --- the runner module ---------------------------------------------------------------------------


def test_runner_starts_every_rail_detached_and_collects_each_at_its_end(tmp_path):
    import time

    from ansible_collections.gpufleet.cluster.plugins.modules import rdma_pairs_run

    flag = tmp_path / "listening"
    late = tmp_path / "late.sh"
    # A client whose server listens only from its second try on: the first try fails as perftest does.
    late.write_text(
        f"#!/bin/sh\nif [ -e {flag} ]; then echo table; exit 0; fi\n"
        f'touch {flag}; echo "Couldn\'t connect to 10.0.0.1:18515" >&2; exit 1\n'
    )
    late.chmod(0o755)
    run = str(tmp_path / "runs" / "r1-gpu01-client")
    started = time.monotonic()
    cmds = [["sleep", "2"], ["sleep", "2"], ["sleep", "60"], [str(late)], [str(tmp_path / "absent")]]
    rdma_pairs_run.start(run, cmds, [0, 1, 2, 3, 4], timeout=4, side="client", connect_wait=10)
    assert time.monotonic() - started < 1.5  # returns at once: the runs go on detached
    out = rdma_pairs_run.collect(run)
    elapsed = time.monotonic() - started
    assert 3.5 < elapsed < 15  # the two 2 s runs at once; the 60 s one killed by timeout(1) at 4 s
    assert [o["rc"] for o in out[:2]] == [0, 0] and not out[0]["timed_out"]
    assert out[2]["timed_out"] and out[2]["rc"] == 124
    assert out[3]["rc"] == 0 and out[3]["stdout"].strip() == "table"  # started again once its server listened
    assert out[4]["rc"] == 127 and not out[4]["timed_out"]
    assert not os.path.exists(run)  # collected: the files are gone
    # A server is not started again: "Couldn't connect" is a client's message.
    flag.unlink()
    rdma_pairs_run.start(run, [[str(late)]], [0], timeout=5, side="server", connect_wait=10)
    (server,) = rdma_pairs_run.collect(run)
    assert server["rc"] == 1 and "Couldn't connect" in server["stderr"]
    with pytest.raises(OSError, match="no runs were started"):
        rdma_pairs_run.collect(run)


@pytest.mark.parametrize(
    ("size", "expected"),
    [("1M", 1 << 20), ("1MiB", 1 << 20), ("64 KB", 65536), ("1.5G", 3 << 29), (4096, 4096), ("8B", 8)],
)
def test_sizes_read_as_the_brief_writes_them(size, expected):
    assert rp.size_bytes(size) == expected


def test_a_size_that_is_not_one_is_refused():
    with pytest.raises(rp.RdmaPairsError, match="size"):
        rp.size_bytes("big")


def test_a_rail_one_node_lacks_or_a_pool_without_rails_is_not_a_pass():
    rails = {
        "a": [{"rail": 0, "device": "mlx5_0"}, {"rail": 1, "device": "mlx5_1"}],
        "b": [{"rail": 0, "device": "mlx5_0"}],
        "c": [{"rail": 0, "device": "mlx5_0"}, {"rail": 1, "device": "mlx5_1"}],
    }
    plan = rdma_pairs_plan(list("abc"), BRIEF, "h100", rails)
    record = rdma_pairs_judge([], plan)
    lacking = [(v["code"], v["host"]) for v in record["violations"] if "has no rail" in v["message"]]
    assert lacking == [("RDMA_PAIR_FAILED", "b")]
    assert "a, c have: rail 1 was not measured" in next(
        v["message"] for v in record["violations"] if "has no rail" in v["message"]
    )
    empty = rdma_pairs_plan(list("ab"), BRIEF, "h100", {"a": [], "b": []})
    assert [(v["code"], v["host"]) for v in rdma_pairs_judge([], empty)["violations"]] == [("RDMA_PAIR_FAILED", None)]


def test_double_client_reads_the_peers_profile_when_the_server_cannot_be_reached(tmp_path):
    # The lab's containers may not reach each other's ports: the client then answers from the
    # server's profile under peers/<address>.json, as the all_reduce_perf double does.
    with open(profile_path("h100-slow-rail"), encoding="utf-8") as fh:
        (tmp_path / "127.0.0.1.json").write_text(fh.read())
    env = dict(
        os.environ,
        GPUFLEET_HW_PROFILE=profile_path("h100-hgx-healthy"),
        GPUFLEET_DOUBLE_IB_CONNECT_WAIT="0.3",
        GPUFLEET_DOUBLE_PEERS_DIR=str(tmp_path),
        GPUFLEET_DOUBLE_IB_SECONDS="0",
    )
    args = [sys.executable, DOUBLE, "-d", "mlx5_4", "-p", str(free_port()), "--report_gbits", "-D", "5", "127.0.0.1"]
    slow = subprocess.run(args, env=env, capture_output=True, text=True, check=False, timeout=60)
    assert slow.returncode == 0 and 190 < rp.parse(slow.stdout)["average_gbit"] < 200
    args[3] = "mlx5_3"
    fast = subprocess.run(args, env=env, capture_output=True, text=True, check=False, timeout=60)
    assert fast.returncode == 0 and rp.parse(fast.stdout)["average_gbit"] > 388


def test_all_mode_warns_only_where_its_rounds_would_take_more_than_half_an_hour():
    """225 rounds of 8 s is the last `all` taken without a word; one round more is warned, rail never is."""
    from types import SimpleNamespace

    from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.acceptance import (
        RDMA_PAIRS_ALL_MAX_SECONDS,
        check_rdma_pairs_scale,
        rdma_pairs_all_seconds,
    )

    def members(n):
        return [SimpleNamespace(hosts=tuple(f"n{i}" for i in range(n)), pool=SimpleNamespace(label="pools[0] (h100)"))]

    brief = {"acceptance": {"rdma_pairs": {"mode": "all"}}}
    assert RDMA_PAIRS_ALL_MAX_SECONDS == 1800 and rdma_pairs_all_seconds(226, {}) == 225 * 8
    assert check_rdma_pairs_scale(brief, members(226)) == []
    (warned,) = check_rdma_pairs_scale(brief, members(228))
    assert warned["code"] == "ACCEPT_RDMA_PAIRS_ALL_LONG" and warned["severity"] == "warning"
    assert "227 rounds of about 8 s, about 30 minutes" in warned["message"] and "228 nodes" in warned["message"]
    # 256 nodes: about 34 minutes, the figure of docs/nccl-acceptance.md.
    (big,) = check_rdma_pairs_scale(brief, members(256))
    assert "255 rounds" in big["message"] and "about 34 minutes" in big["message"]
    # A longer duration makes a smaller pool warned; iterations mode (about a second per run) a larger one.
    assert check_rdma_pairs_scale({"acceptance": {"rdma_pairs": {"mode": "all", "duration": 20}}}, members(100))
    assert not check_rdma_pairs_scale({"acceptance": {"rdma_pairs": {"mode": "all", "iters": 5000}}}, members(400))
    assert check_rdma_pairs_scale({"acceptance": {"rdma_pairs": {"mode": "rail"}}}, members(5000)) == []


# --- agendas: each node runs its own rounds -------------------------------------------------------


def test_agendas_give_each_node_its_rounds_in_order_with_its_side_and_partner():
    rails = {n: [{"rail": 0, "device": "mlx5_0", "port": 1}] for n in "abcd"}
    planned = rp.plan(rp.schedule(list("abcd"), "all"), rails, {n: f"10.0.0.{i}" for i, n in enumerate("abcd")})
    agendas = rp.agendas(planned)
    assert sorted(agendas) == list("abcd")
    for node, entries in agendas.items():
        # Every round once, in order, one pair per round; every other node once as partner.
        assert [e["round"] for e in entries] == [1, 2, 3]
        assert sorted(e["partner"] for e in entries) == sorted(set("abcd") - {node})
        for e in entries:
            assert node == e[e["side"]] and e["partner"] == e["client" if e["side"] == "server" else "server"]
            assert (e.get("address") == f"10.0.0.{'abcd'.index(e['server'])}") == (e["side"] == "client")
    # An odd pool: each node sits one round out (its bye), which its agenda leaves out.
    odd = rp.agendas(rp.plan(rp.schedule(list("abc"), "all"), dict.fromkeys("abc", rails["a"])))
    assert all(len(entries) == 2 for entries in odd.values())


def test_consecutive_rounds_listen_on_different_port_banks():
    rails = {n: [{"rail": r, "device": f"mlx5_{r}", "port": 1} for r in range(8)] for n in "abcdef"}
    planned = rp.plan(rp.schedule(list("abcdef"), "all"), rails, port_count=128)
    first = [[p["tcp_port"] for p in pair["ports"]] for rnd in planned for pair in rnd["pairs"][:1]]
    # 8 rails: 16 banks of 8 ports in 18515-18642; five rounds in five banks.
    assert first == [list(range(18515 + 8 * k, 18523 + 8 * k)) for k in range(5)]
    assert max(p["tcp_port"] for rnd in planned for pair in rnd["pairs"] for p in pair["ports"]) <= 18642
    # Behind one address, no port is used twice in the whole plan.
    spread = rp.plan(rp.schedule(list("abcd"), "all"), rails, spread=True)
    ports = [p["tcp_port"] for rnd in spread for pair in rnd["pairs"] for p in pair["ports"]]
    assert len(ports) == len(set(ports)) == 48


def _script(path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_agenda_runs_its_rounds_in_order_absorbs_a_late_partner_and_fails_only_the_round_of_an_absent_one(tmp_path):
    import threading
    import time

    from ansible_collections.gpufleet.cluster.plugins.modules import rdma_pairs_run

    log, flag = tmp_path / "log", tmp_path / "partner-listening"
    # Round 1: the partner's server listens only 1.5 s after the round began (a partner a round behind).
    late = _script(
        tmp_path / "late.sh",
        f'echo "r1 $1" >>{log}; [ -e {flag} ] && {{ echo table; exit 0; }}\n'
        'echo "Couldn\'t connect to 10.0.0.2:18515" >&2; exit 1\n',
    )
    # Round 2: the partner never comes.
    never = _script(tmp_path / "never.sh", f'echo "r2 $1" >>{log}; echo "Couldn\'t connect to x:1" >&2; exit 1\n')
    # Round 3: a server whose client never connects hangs: killed at its round's bound.
    hang = _script(tmp_path / "hang.sh", f'echo "r3 $1" >>{log}; exec sleep 60\n')
    # Round 4: runs although rounds 2 and 3 failed.
    fine = _script(tmp_path / "fine.sh", f'echo "r4 $1" >>{log}; echo table\n')
    rounds = [
        {"round": 1, "side": "client", "partner": "b", "rails": [0], "cmds": [[late, "0"]]},
        {"round": 2, "side": "client", "partner": "c", "rails": [0, 1], "cmds": [[never, "0"], [never, "1"]]},
        {"round": 3, "side": "server", "partner": "d", "rails": [0], "cmds": [[hang, "0"]]},
        {"round": 4, "side": "server", "partner": "e", "rails": [0], "cmds": [[fine, "0"]]},
    ]
    threading.Timer(1.5, flag.touch).start()
    run = str(tmp_path / "runs" / "pool-a")
    started = time.monotonic()
    info = rdma_pairs_run.start_agenda(run, rounds, timeout=2, connect_wait=3)
    assert time.monotonic() - started < 1.5  # returns at once: the agenda goes on detached
    # The whole budget: rounds x (connect wait + timeout + 5) + 5.
    assert info == {"budget": 4 * (3 + 2 + 5) + 5, "rounds": 4}
    out = rdma_pairs_run.collect_agenda(run)
    elapsed = time.monotonic() - started
    # Round 1 about 1.5 s, round 2 its 3 s connect wait, round 3 killed at 2 + 3 s, round 4 at once.
    assert 9 < elapsed < 20, elapsed
    assert [r["round"] for r in out] == [1, 2, 3, 4] and [r["partner"] for r in out] == list("bcde")
    r1, r2, r3, r4 = (r["results"] for r in out)
    assert r1[0]["rc"] == 0 and r1[0]["stdout"].strip() == "table"  # the late partner was met
    assert [x["rc"] for x in r2] == [1, 1] and all("Couldn't connect" in x["stderr"] for x in r2)
    assert r3[0]["timed_out"] and r3[0]["rc"] == 124
    assert r4[0]["rc"] == 0 and not r4[0]["timed_out"]
    # Each round began after the previous one had ended: the log holds them in order.
    seen = [line.split()[0] for line in log.read_text().splitlines()]
    assert seen == sorted(seen) and seen[0] == "r1" and seen[-1] == "r4" and seen.count("r1") >= 2
    assert not os.path.exists(run)
    with pytest.raises(OSError, match="no agenda was started"):
        rdma_pairs_run.collect_agenda(run)


def test_agenda_waits_for_the_common_start_and_collect_stops_at_its_budget(tmp_path):
    import time

    from ansible_collections.gpufleet.cluster.plugins.modules import rdma_pairs_run

    log = tmp_path / "log"
    stamp = _script(tmp_path / "stamp.sh", f"echo $(date +%s.%N) $$ >>{log}; exec sleep 30\n")
    rounds = [
        {"round": 1, "side": "server", "partner": "b", "rails": [0], "cmds": [[stamp]]},
        {"round": 2, "side": "client", "partner": "c", "rails": [0], "cmds": [[stamp]]},
    ]
    run = str(tmp_path / "pool-a")
    begin = time.time() + 2
    info = rdma_pairs_run.start_agenda(run, rounds, timeout=20, connect_wait=5, begin_at=begin)
    assert info["budget"] >= 2 * (20 + 5 + 5) + 5 + 1  # the wait for the common start is in the budget
    # The collect gives up at the budget (here shortened) and kills what still runs.
    meta = os.path.join(run, "agenda.json")
    with open(meta, encoding="utf-8") as fh:
        data = json.load(fh)
    data["budget"] = 3
    with open(meta, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    out = rdma_pairs_run.collect_agenda(run, grace=0)
    assert time.time() - begin < 5
    stamped, pid = log.read_text().split()
    assert float(stamped) >= begin - 1  # round 1 began at the common start, not before
    # Nothing of the agenda is left running: its rail, in a process group of timeout(1)'s, was killed too.
    time.sleep(0.3)
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            state = fh.read().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("Z", "X", "gone")
    first, second = (r["results"][0] for r in out)
    assert first["rc"] is None and first["timed_out"]  # killed with its agenda
    assert second["rc"] is None and not second["timed_out"] and "did not reach this round" in second["reason"]
    # The judge reads both as failures, never as a pass.
    assert rp.measure(first)["status"] == rp.measure(second)["status"] == "failed"


def test_three_agendas_meet_over_tcp_with_the_double_though_one_node_starts_late(tmp_path):
    import time

    from ansible_collections.gpufleet.cluster.plugins.modules import rdma_pairs_run

    nodes = {"a": "h100-hgx-healthy", "b": "h100-slow-rail", "c": "h100-hgx-healthy"}
    rails = {n: [{"rail": r, "device": f"mlx5_{r * 4}", "port": 1} for r in range(2)] for n in nodes}
    planned = rp.plan(
        rp.schedule(list(nodes), "all"), rails, dict.fromkeys(nodes, "127.0.0.1"), base_port=free_port(), spread=True
    )
    settings = {"size": "1M", "duration": 5}
    runs = []
    for delay, node in zip((0, 0, 2), nodes, strict=True):  # c begins its agenda 2 s after the others
        time.sleep(delay)
        wrap = ["env", f"GPUFLEET_HW_PROFILE={profile_path(nodes[node])}", "GPUFLEET_DOUBLE_IB_SECONDS=0"]
        wrap += ["GPUFLEET_DOUBLE_IB_CONNECT_WAIT=0.5", "GPUFLEET_DOUBLE_IB_SERVER_WAIT=20", sys.executable, DOUBLE]
        rounds = [
            {
                **{k: e[k] for k in ("round", "side", "partner", "server", "client")},
                "rails": [p["rail"] for p in e["ports"]],
                "cmds": [wrap + rp.argv("x", e["side"], p, settings, e.get("address"))[1:] for p in e["ports"]],
            }
            for e in rp.agendas(planned)[node]
        ]
        run = str(tmp_path / node)
        rdma_pairs_run.start_agenda(run, rounds, timeout=20, connect_wait=10)
        runs.append(run)
    collected = [{"rounds": rdma_pairs_run.collect_agenda(run)} for run in runs]
    from ansible_collections.gpufleet.cluster.plugins.filter.rdma_pairs import rdma_pairs_runs

    plan = {"rounds": planned, "floor_gbit": 360, "floor_how": "test", "pool": "p"}
    record = rdma_pairs_judge(rdma_pairs_runs(collected), plan)
    # Three pairs x two rails, each measured from both ends' profiles; b's mlx5_4 is its slow port.
    assert len(record["pairs"]) == 6 and {p["status"] for p in record["pairs"]} == {"measured"}
    assert [(v["code"], v["host"]) for v in record["violations"]] == [("RDMA_PORT_SLOW", "b")]
