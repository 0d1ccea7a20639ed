# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
name: rdma_pairs_plan
short_description: The per-rail RDMA pair schedule of a pool (ib_write_bw), its judgement and drain reasons
version_added: 0.1.0
author: gpufleet developers
description:
  - Plans the acceptance's per-rail RDMA pairs (module_utils/acceptance/rdma_pairs.py; docs/nccl-acceptance.md,
    "Per-rail RDMA pairs") - rounds of disjoint node pairs (C(all) - every pair once in N-1 rounds, circle method;
    C(rail) - neighbours only), each pair rail r to rail r, with the floor in Gb/s and the GPU each NIC is PIX to
    (GPUDirect C(--use_cuda) when the pool has C(gpudirect_rdma)).
  - Also C(rdma_pairs_rails) (a node's rails from its C(gpufleet_hw) facts), C(rdma_pairs_judge) (the runs of
    every round -> the pool's record, C(RDMA_PORT_SLOW) / C(RDMA_LINK_SLOW) / C(RDMA_PAIR_FAILED)) and
    C(rdma_pairs_drain) (adds the slow ports' nodes to the drain list), C(rdma_pairs_agendas) (each node's rounds, which
    the node runs itself) and C(rdma_pairs_runs) (the agendas' collected rounds as the judge reads them).
options:
  _input:
    description: The pool's nodes, in inventory order.
    type: list
    elements: str
    required: true
  brief:
    description: The topology brief (C(acceptance.rdma_pairs), C(networks.fabric), the pool's C(gpudirect_rdma)).
    type: dict
    required: true
  pool:
    description: The pool's name.
    type: str
    required: true
  rails:
    description: Each node's rails (C(rdma_pairs_rails)), by inventory name.
    type: dict
    required: true
  addresses:
    description: The address a client reaches each node's server at, by inventory name (default the name).
    type: dict
  base_port:
    description: Rail r's server listens on this TCP port + r (perftest's default 18515).
    type: int
    default: 18515
  spread:
    description: Every rail of every round on its own TCP port from I(base_port) up, for nodes that share one address.
    type: bool
    default: false
  port_count:
    description: The TCP ports open from I(base_port) up (the firewall role's C(firewall_perftest_ports)); consecutive
      rounds then listen on different banks of them, as the nodes run their agendas at their own pace.
    type: int
"""

EXAMPLES = r"""
- name: Plan the pairs
  ansible.builtin.set_fact:
    _plan: "{{ nodes | gpufleet.cluster.rdma_pairs_plan(gpufleet_brief, 'h100', rails=_rails) }}"
"""

RETURN = r"""
_value:
  description: C({enabled, mode, settings, floor_gbit, floor_how, gpudirect, rounds}); C(enabled) false when the brief
    has no C(acceptance.rdma_pairs.mode).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import rdma_pairs as rp


def _pool(brief, name):
    return next((p for p in (brief or {}).get("pools") or [] if p.get("name") == name), None) or {}


def rdma_pairs_rails(hw, brief, pool):
    return rp.node_rails(hw or {}, brief or {}, _pool(brief, pool))


def rdma_pairs_plan(
    nodes, brief, pool, rails, addresses=None, base_port=rp.BASE_TCP_PORT, spread=False, port_count=None
):
    try:
        rule = rp.settings(brief)
        spec = _pool(brief, pool)
        speed = (((brief or {}).get("networks") or {}).get("fabric") or {}).get("link_speed_gbps")
        floor = rp.floor_gbit(rule, speed)
        gpudirect = bool(spec.get("gpudirect_rdma"))
        if not rule.get("mode"):
            return {"enabled": False, "mode": None, "settings": rule, "rounds": [], **floor, "gpudirect": gpudirect}
        rounds = rp.schedule(list(nodes or []), rule["mode"])
        planned = rp.plan(
            rounds,
            rails or {},
            addresses or {},
            base_port=int(base_port),
            gpudirect=gpudirect,
            spread=bool(spread),
            port_count=int(port_count) if port_count else None,
        )
    except rp.RdmaPairsError as exc:
        raise AnsibleFilterError(f"rdma_pairs_plan: {pool}: {exc}") from exc
    return {
        "enabled": True,
        "pool": pool,
        "mode": rule["mode"],
        "settings": rule,
        "floor_gbit": floor["gbit_s"],
        "floor_how": floor["how"],
        "gpudirect": gpudirect,
        "rounds": planned,
    }


def rdma_pairs_judge(runs, plan):
    """``runs``: per pair and side the module's results, as the role collects them
    (``[{round, server, client, side, results: [...]}]``)."""
    if not isinstance(runs, list):
        raise AnsibleFilterError(f"rdma_pairs_judge: input must be a list of runs, got {type(runs).__name__}")
    plan = plan or {}
    servers = {}
    clients = []
    for run in runs:
        for res in run.get("results") or []:
            key = (run.get("round"), run.get("server"), run.get("client"), res.get("rail"))
            if run.get("side") == "server":
                servers[key] = res
            else:
                clients.append((key, res))
    index = {}
    for rnd in plan.get("rounds") or []:
        for pair in rnd.get("pairs") or []:
            for port in pair["ports"]:
                index[(rnd["round"], pair["server"], pair["client"], port["rail"])] = port
    seen = set()
    merged = []
    for key, res in clients:
        seen.add(key)
        port = index.get(key) or {}
        server = servers.get(key) or {}
        merged.append(
            {
                "round": key[0],
                "server": key[1],
                "client": key[2],
                "rail": key[3],
                "tcp_port": res.get("tcp_port"),
                "server_device": port.get("server_device"),
                "client_device": port.get("client_device"),
                "rc": res.get("rc"),
                "stdout": res.get("stdout"),
                "stderr": res.get("stderr"),
                "timed_out": res.get("timed_out"),
                "timeout": res.get("seconds"),
                "reason": res.get("reason"),
                "server_rc": server.get("rc"),
                "server_timed_out": server.get("timed_out"),
            }
        )
    # A planned rail whose client never reported (its task failed or never started) is a failure too.
    for key, port in index.items():
        if key not in seen:
            merged.append(
                {
                    "round": key[0],
                    "server": key[1],
                    "client": key[2],
                    "rail": key[3],
                    "server_device": port.get("server_device"),
                    "client_device": port.get("client_device"),
                    "rc": None,
                    "reason": "the client's run reported nothing (its task failed or did not start)",
                }
            )
    merged.sort(key=lambda r: (r["round"] or 0, r["server"], r["client"], r["rail"]))
    record = rp.judge(merged, plan.get("floor_gbit"), how=plan.get("floor_how") or "", pool=plan.get("pool"))
    record["violations"] += rp.not_run(plan)
    record.update(
        pool=plan.get("pool"),
        mode=plan.get("mode"),
        gpudirect=plan.get("gpudirect"),
        rounds=len(plan.get("rounds") or []),
        skipped=[s for rnd in plan.get("rounds") or [] for s in rnd.get("skipped") or []],
    )
    return record


def rdma_pairs_agendas(plan):
    """Each node's rounds of the plan (``{node: [{round, side, partner, server, client, address, ports}]}``)."""
    return rp.agendas((plan or {}).get("rounds") or [])


def rdma_pairs_runs(collected):
    """The agendas' collect results (``[{item: node, rounds: [...]}]``, a loop's registered results) as the
    judge reads them: ``[{round, server, client, side, results}]``. A node that was not collected (its
    start or collect failed, or it was unreachable) gives nothing: the judge fails its rails as not reported."""
    out = []
    for res in collected or []:
        for rnd in (res or {}).get("rounds") or []:
            out.append(
                {k: rnd.get(k) for k in ("round", "server", "client", "side")} | {"results": rnd.get("results") or []}
            )
    return out


def rdma_pairs_drain(to_drain, records, stamp=None):
    return rp.with_drain(to_drain or [], records or [], stamp=stamp)


class FilterModule:
    def filters(self):
        return {
            "rdma_pairs_rails": rdma_pairs_rails,
            "rdma_pairs_plan": rdma_pairs_plan,
            "rdma_pairs_judge": rdma_pairs_judge,
            "rdma_pairs_drain": rdma_pairs_drain,
            "rdma_pairs_agendas": rdma_pairs_agendas,
            "rdma_pairs_runs": rdma_pairs_runs,
        }
