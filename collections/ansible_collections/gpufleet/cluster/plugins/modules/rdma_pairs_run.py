#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_pairs_run
short_description: Run perftest's ib_write_bw on every rail of one node at once, one round or a node's whole agenda
version_added: 0.1.0
description:
  - One side of one node pair of the acceptance's RDMA pair schedule (module_utils/acceptance/rdma_pairs.py,
    docs/nccl-acceptance.md "Per-rail RDMA pairs").
  - C(action=start) starts one ib_write_bw per rail, all at once, each on its own TCP port (C(-p)), detached from the
    task (their own session, output to files under I(run_dir)/I(run_id)), and returns at once - so that a loop over
    the pairs of a round starts them all before any is waited for. Each runs under C(timeout(1)) with I(timeout)
    seconds; a client that finds its server not listening yet (C(Couldn't connect)) is started again until
    I(connect_wait) seconds have passed.
  - C(action=collect) waits until every rail of I(run_id) has ended (at most I(timeout) + I(connect_wait) + 15 seconds
    after the start; a process still running then is killed and reported C(timed_out)), returns each one's output
    and exit status, and removes the files.
  - Ansible's C(async) is not used, as Mitogen (the lab's and the scenarios' strategy) never finishes fire-and-forget
    jobs.
  - With I(agenda), C(action=start) starts the node's whole agenda of RDMA pair rounds instead, detached, in one call
    (each round - its side, partner and rails - run in order, every rail of a round at once; under C(timeout(1)) with
    a budget of rounds x (I(connect_wait) + I(timeout) + 5) seconds, plus the wait for I(begin_at)); C(action=collect)
    waits for it (at most that budget after the start; I(run_id) alone says it is an agenda) and returns every
    round's results. The first controller's
    dispatch is then two calls per node (docs/nccl-acceptance.md, "Per-rail RDMA pairs").
  - In check mode nothing runs; each rail's command line is returned.
options:
  action:
    description: C(start) or C(collect).
    type: str
    required: true
    choices: [start, collect]
  run_id:
    description: Names this side's runs (a directory under I(run_dir)); the same for its start and its collect.
    type: str
    required: true
  run_dir:
    description: Where the runs' output is kept between start and collect (created mode 0700).
    type: path
    default: /var/tmp/gpufleet-rdma-pairs
  binary:
    description: The ib_write_bw binary.
    type: str
    default: ib_write_bw
  side:
    description: C(server) or C(client).
    type: str
    choices: [server, client]
    default: server
  ports:
    description: The rails of the pair, as P(gpufleet.cluster.rdma_pairs_plan#filter) gives them (C(rail), C(tcp_port),
      C(server_device), C(server_ib_port), C(server_gpu), C(client_device), C(client_ib_port), C(client_gpu)).
    type: list
    elements: dict
    default: []
  address:
    description: The server's address (client side).
    type: str
  agenda:
    description: The node's rounds, as the C(gpufleet.cluster.rdma_pairs_agendas) filter gives them (C(round), C(side),
      C(partner), C(server), C(client), C(address) - the server's, for a client - and C(ports)); replaces I(side),
      I(ports) and I(address).
    type: list
    elements: dict
  begin_at:
    description: With I(agenda), the time (seconds since the epoch) its first round begins at, so that every node of
      the pool begins together once the controller has started them all; a time past begins at once.
    type: float
  settings:
    description: The brief's C(acceptance.rdma_pairs) (C(size), C(duration), C(iters)).
    type: dict
    default: {}
  timeout:
    description: Seconds each process may run.
    type: int
    default: 60
  connect_wait:
    description: Seconds a client keeps trying a server that is not listening yet.
    type: int
    default: 15
author: gpufleet developers
"""

EXAMPLES = r"""
- name: Start the servers of a pair
  gpufleet.cluster.rdma_pairs_run:
    action: start
    run_id: 20260101T000000Z-r1-gpu01-server
    side: server
    ports: "{{ pair.ports }}"
"""

RETURN = r"""
rounds:
  description: With I(agenda), one entry per round - C(round), C(side), C(partner), C(server), C(client) and
    C(results), each rail as below (C(reason) for a round the agenda did not reach within its budget).
  returned: with agenda
  type: list
  elements: dict
budget:
  description: With I(agenda), after start - the seconds the agenda may run in all.
  returned: with agenda, on start
  type: int
results:
  description: One entry per rail - C(rail), C(tcp_port), C(argv); after collect also C(rc) (null when killed at the
    deadline), C(stdout), C(stderr), C(timed_out), C(seconds).
  returned: without agenda
  type: list
  elements: dict
"""

import contextlib
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.rdma_pairs import RdmaPairsError, argv

# One rail: run under timeout(1); a client whose server is not listening yet is started again until
# its connect wait has passed; the exit status is written last (its file says the rail has ended).
RAIL_SCRIPT = r"""
d=$1; r=$2; t=$3; w=$4; side=$5; shift 5
end=$(( $(date +%s) + w ))
while :; do
  timeout -k 5 "$t" "$@" >"$d/rail$r.out" 2>"$d/rail$r.err"; rc=$?
  if [ "$side" = client ] && [ "$rc" -ne 0 ] && [ "$(date +%s)" -lt "$end" ] \
     && grep -q -e "Couldn't connect" -e "Unable to open file descriptor" "$d/rail$r.out" "$d/rail$r.err"; then
    sleep 1; continue
  fi
  break
done
echo "$rc" >"$d/rail$r.rc.tmp" && mv "$d/rail$r.rc.tmp" "$d/rail$r.rc"
"""
KILLED_BY_TIMEOUT = (124, 137)  # timeout(1): the command timed out / was killed after -k


def _private_dir(path: str) -> None:
    """``path`` as a directory of ours, mode 0700; refuses a link or someone else's directory."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise OSError(f"{path} is not a directory of this user (a link, or another user's)")
    os.chmod(path, 0o700)


def start(run: str, cmds: list[list[str]], rails: list, timeout: int, side: str, connect_wait: int) -> None:
    """Start every rail's command, detached; write the start time and each one's session id."""
    if os.path.isdir(run):
        shutil.rmtree(run)
    _private_dir(run)
    with open(os.path.join(run, "started"), "w", encoding="utf-8") as fh:
        json.dump({"time": time.time(), "timeout": timeout, "connect_wait": connect_wait, "rails": rails}, fh)
    for rail, cmd in zip(rails, cmds, strict=True):
        try:
            proc = subprocess.Popen(
                ["sh", "-c", RAIL_SCRIPT, "sh", run, str(rail), str(timeout), str(connect_wait), side, *cmd],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            with open(os.path.join(run, f"rail{rail}.err"), "w", encoding="utf-8") as fh:
                fh.write(f"{cmd[0]}: {exc}\n")
            with open(os.path.join(run, f"rail{rail}.rc"), "w", encoding="utf-8") as fh:
                fh.write("127\n")
            continue
        with open(os.path.join(run, f"rail{rail}.pid"), "w", encoding="utf-8") as fh:
            fh.write(f"{proc.pid}\n")


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def collect(run: str, grace: int = 15) -> list[dict]:
    """Wait for every rail of ``run`` (see :func:`start`) to end, at most until its deadline; their results."""
    info = json.loads(_read(os.path.join(run, "started")) or "{}")
    if not info:
        raise OSError(f"{run}: no runs were started under this name")
    deadline = float(info["time"]) + int(info["timeout"]) + int(info["connect_wait"]) + grace
    rails = info["rails"]
    while time.time() < deadline and not all(os.path.exists(os.path.join(run, f"rail{r}.rc")) for r in rails):
        time.sleep(0.2)
    out = []
    for rail in rails:
        base = os.path.join(run, f"rail{rail}")
        rc_text = _read(f"{base}.rc").strip()
        if not rc_text:
            # Still running at the deadline: its whole session is killed.
            pid = _read(f"{base}.pid").strip()
            if pid.isdigit():
                with contextlib.suppress(OSError):
                    os.killpg(int(pid), signal.SIGKILL)
        rc = int(rc_text) if rc_text.lstrip("-").isdigit() else None
        out.append(
            {
                "rail": rail,
                "rc": rc,
                "stdout": _read(f"{base}.out"),
                "stderr": _read(f"{base}.err"),
                "timed_out": rc is None or rc in KILLED_BY_TIMEOUT,
                "seconds": round(time.time() - float(info["time"]), 2),
            }
        )
    shutil.rmtree(run, ignore_errors=True)
    return out


# --- agenda: every round of one node, run by the node itself -------------------------------------
#
# The first controller sends each node its whole agenda in one call and collects it in one more, so
# the dispatch is 2 calls per node whatever the pool's size (one call per side, pair and round would
# be about 2 N^2 calls for the all schedule). The node runs its rounds in order, each round's rails at
# once (RAIL_SCRIPT), the next round when every rail of this one has ended.
#
# Why the agendas cannot deadlock, and how long they take: in the plan's schedule a round's pairs are
# disjoint, so a node's round k waits on one node only, its round-k partner, and on nothing else.
# Every round of every node is bounded on its own, whatever its partner does: a server runs under
# timeout(1) with connect_wait + timeout seconds (it waits for its client, then measures); a client
# tries to connect until connect_wait seconds after its round began, each try under timeout(1) with
# timeout seconds, so it too ends within connect_wait + timeout. A partner that is still in round k-1
# reaches round k within its own bound, so the connect wait meets a partner lagging behind by up to
# connect_wait seconds (a round of ib_write_bw runs about duration + 3 s on real hardware: the default
# 15 s meets a partner a round or more behind); a partner that never comes (unreachable, no
# ib_write_bw, stuck behind a dead node) fails that round only (the client's "Couldn't connect", or a
# server without a client: RDMA_PAIR_FAILED) and the agenda goes on. The whole agenda runs under
# timeout(1) too: its budget is the wait for the common start plus rounds x (connect_wait + timeout +
# 5) seconds, and collect waits at most that long after the start.
ROUND_GRACE = 5  # timeout(1)'s -k after a rail's own limit


def agenda_budget(rounds: int, timeout: int, connect_wait: int, begin_in: float = 0) -> int:
    """Seconds an agenda of ``rounds`` rounds may run in all (see the comment above)."""
    return int(max(0, begin_in)) + rounds * (int(connect_wait) + int(timeout) + ROUND_GRACE) + ROUND_GRACE


def agenda_script(run: str, rounds: list[dict], timeout: int, connect_wait: int, begin_at: float | None) -> str:
    """The node's agenda as one sh script: wait for the common start, then each round's rails at once,
    the next round when they have all ended. ``rounds``: ``[{round, side, cmds: [argv], rails: [int]}]``."""
    q = shlex.quote
    lines = ["set -u", f"rail_script={q(RAIL_SCRIPT)}"]
    if begin_at:
        # Every node of the pool begins round 1 at the same time, once the controller has started them all.
        lines.append(f'now=$(date +%s); [ {int(begin_at)} -gt "$now" ] && sleep $(( {int(begin_at)} - now ))')
    for rnd in rounds:
        rdir = os.path.join(run, f"round{int(rnd['round'])}")
        limit = int(timeout) + int(connect_wait) if rnd["side"] == "server" else int(timeout)
        lines.append(f"date +%s >{q(rdir)}/began")
        for rail, cmd in zip(rnd["rails"], rnd["cmds"], strict=True):
            args = [rdir, str(rail), str(limit), str(connect_wait), rnd["side"], *cmd]
            lines.append('sh -c "$rail_script" sh ' + " ".join(q(a) for a in args) + " &")
        lines.append("wait")
        lines.append(f"date +%s >{q(rdir)}/ended")
    return "\n".join(lines) + "\n"


def start_agenda(run: str, rounds: list[dict], timeout: int, connect_wait: int, begin_at: float | None = None) -> dict:
    """Start the node's agenda detached (its own session) under timeout(1) with its whole budget."""
    if os.path.isdir(run):
        shutil.rmtree(run)
    _private_dir(run)
    now = time.time()
    budget = agenda_budget(len(rounds), timeout, connect_wait, (begin_at - now) if begin_at else 0)
    for rnd in rounds:
        os.mkdir(os.path.join(run, f"round{int(rnd['round'])}"), 0o700)
    info = {
        "time": now,
        "budget": budget,
        "rounds": [{k: v for k, v in rnd.items() if k != "cmds"} for rnd in rounds],
    }
    with open(os.path.join(run, "agenda.json"), "w", encoding="utf-8") as fh:
        json.dump(info, fh)
    with open(os.path.join(run, "agenda.sh"), "w", encoding="utf-8") as fh:
        fh.write(agenda_script(run, rounds, timeout, connect_wait, begin_at))
    proc = subprocess.Popen(
        ["sh", "-c", 'timeout -k 5 "$1" sh "$2/agenda.sh"; echo $? >"$2/agenda.rc"', "sh", str(budget), run],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    with open(os.path.join(run, "agenda.pid"), "w", encoding="utf-8") as fh:
        fh.write(f"{proc.pid}\n")
    return {"budget": budget, "rounds": len(rounds)}


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (the agenda's: timeout(1) puts each command in a process
    group of its own, so killing the leader's group would leave the rails running)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat_text = _read(f"/proc/{entry}/stat")
        fields = stat_text.rpartition(")")[2].split()
        if len(fields) > 3 and fields[3] == str(sid):
            with contextlib.suppress(OSError):
                os.kill(int(entry), signal.SIGKILL)


def collect_agenda(run: str, grace: int = 15, poll: float = 0.5) -> list[dict]:
    """Wait for the agenda of ``run`` (see :func:`start_agenda`) to end, at most its budget after its start;
    each round as ``{round, side, partner, server, client, results: [per rail]}``. A rail that had not
    ended (the agenda killed at its budget) is ``timed_out`` with rc None; a round never begun has
    rails with rc None and ``reason``."""
    info = json.loads(_read(os.path.join(run, "agenda.json")) or "{}")
    if not info:
        raise OSError(f"{run}: no agenda was started under this name")
    deadline = float(info["time"]) + int(info["budget"]) + grace
    while time.time() < deadline and not os.path.exists(os.path.join(run, "agenda.rc")):
        time.sleep(poll)
    if not os.path.exists(os.path.join(run, "agenda.rc")):
        pid = _read(os.path.join(run, "agenda.pid")).strip()
        if pid.isdigit():
            _kill_session(int(pid))
    out = []
    for rnd in info["rounds"]:
        rdir = os.path.join(run, f"round{int(rnd['round'])}")
        began = _read(os.path.join(rdir, "began")).strip()
        ended = _read(os.path.join(rdir, "ended")).strip()
        results = []
        for rail, tcp_port in zip(rnd["rails"], rnd.get("tcp_ports") or [None] * len(rnd["rails"]), strict=True):
            base = os.path.join(rdir, f"rail{rail}")
            rc_text = _read(f"{base}.rc").strip()
            rc = int(rc_text) if rc_text.lstrip("-").isdigit() else None
            row = {
                "rail": rail,
                "tcp_port": tcp_port,
                "rc": rc,
                "stdout": _read(f"{base}.out"),
                "stderr": _read(f"{base}.err"),
                "timed_out": bool(began) and (rc is None or rc in KILLED_BY_TIMEOUT),
                "seconds": (int(ended) - int(began)) if began.isdigit() and ended.isdigit() else None,
            }
            if not began:
                row["reason"] = "the node's agenda did not reach this round within its budget"
            results.append(row)
        out.append({k: rnd.get(k) for k in ("round", "side", "partner", "server", "client")} | {"results": results})
    shutil.rmtree(run, ignore_errors=True)
    return out


def _agenda_rounds(module, p) -> list[dict]:
    """The agenda's rounds with each rail's command line (a client writes to its partner's address)."""
    out = []
    for rnd in p["agenda"]:
        side = rnd.get("side")
        if side not in ("server", "client") or rnd.get("round") is None:
            module.fail_json(msg=f"rdma_pairs_run: an agenda round needs round and side server|client, found {rnd!r}")
        try:
            cmds = [argv(p["binary"], side, port, p["settings"], rnd.get("address")) for port in rnd.get("ports") or []]
        except (RdmaPairsError, KeyError, TypeError, ValueError) as exc:
            module.fail_json(msg=f"rdma_pairs_run: round {rnd.get('round')}: a port of the plan is incomplete: {exc}")
        out.append(
            {
                "round": int(rnd["round"]),
                "side": side,
                "partner": rnd.get("partner"),
                "server": rnd.get("server"),
                "client": rnd.get("client"),
                "rails": [port.get("rail") for port in rnd.get("ports") or []],
                "tcp_ports": [port.get("tcp_port") for port in rnd.get("ports") or []],
                "cmds": cmds,
            }
        )
    return out


def main():
    module = AnsibleModule(
        argument_spec={
            "action": {"type": "str", "required": True, "choices": ["start", "collect"]},
            "run_id": {"type": "str", "required": True},
            "run_dir": {"type": "path", "default": "/var/tmp/gpufleet-rdma-pairs"},
            "binary": {"type": "str", "default": "ib_write_bw"},
            "side": {"type": "str", "default": "server", "choices": ["server", "client"]},
            "ports": {"type": "list", "elements": "dict", "default": []},
            "address": {"type": "str"},
            "agenda": {"type": "list", "elements": "dict"},
            "begin_at": {"type": "float"},
            "settings": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "default": 60},
            "connect_wait": {"type": "int", "default": 15},
        },
        required_if=[("side", "client", ["address"])],
        mutually_exclusive=[("agenda", "ports")],
        supports_check_mode=True,
    )
    p = module.params
    if "/" in p["run_id"] or p["run_id"] in ("", ".", ".."):
        module.fail_json(msg=f"rdma_pairs_run: run_id must be a plain name, found {p['run_id']!r}")
    run = os.path.join(p["run_dir"], p["run_id"])
    if p["action"] == "collect" and p["agenda"] is None and os.path.exists(os.path.join(run, "agenda.json")):
        # What was started under this name is an agenda: collect needs nothing else to know it.
        p["agenda"] = []
    if p["agenda"] is not None:
        rounds = _agenda_rounds(module, p)
        shown = [
            {k: r[k] for k in ("round", "side", "partner", "server", "client")}
            | {
                "results": [
                    {"rail": a, "tcp_port": t, "argv": c}
                    for a, t, c in zip(r["rails"], r["tcp_ports"], r["cmds"], strict=True)
                ]
            }
            for r in rounds
        ]
        if module.check_mode:
            module.exit_json(changed=False, rounds=shown, previewed=True)
        try:
            if p["action"] == "start":
                _private_dir(p["run_dir"])
                info = start_agenda(run, rounds, p["timeout"], p["connect_wait"], p["begin_at"])
                module.exit_json(changed=False, rounds=shown, budget=info["budget"])
            done = collect_agenda(run)
        except OSError as exc:
            module.fail_json(msg=f"rdma_pairs_run: {exc}")
        module.exit_json(changed=False, rounds=done)
    try:
        cmds = [argv(p["binary"], p["side"], port, p["settings"], p.get("address")) for port in p["ports"]]
    except (RdmaPairsError, KeyError, TypeError, ValueError) as exc:
        module.fail_json(msg=f"rdma_pairs_run: a port of the plan is incomplete: {exc}")
    shown = [
        {"rail": port.get("rail"), "tcp_port": port.get("tcp_port"), "argv": cmd}
        for port, cmd in zip(p["ports"], cmds, strict=True)
    ]
    if module.check_mode:
        module.exit_json(changed=False, results=shown, previewed=True)
    try:
        if p["action"] == "start":
            _private_dir(p["run_dir"])
            start(run, cmds, [port.get("rail") for port in p["ports"]], p["timeout"], p["side"], p["connect_wait"])
            module.exit_json(changed=False, results=shown)
        done = collect(run)
    except OSError as exc:
        module.fail_json(msg=f"rdma_pairs_run: {exc}")
    by_rail = {s["rail"]: s for s in shown}
    module.exit_json(changed=False, results=[{**by_rail.get(d["rail"], {}), **d} for d in done])


if __name__ == "__main__":
    main()
