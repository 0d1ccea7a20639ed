#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_pairs_run
short_description: Start perftest's ib_write_bw on every rail of one node at once, as server or client, and collect it
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
results:
  description: One entry per rail - C(rail), C(tcp_port), C(argv); after collect also C(rc) (null when killed at the
    deadline), C(stdout), C(stderr), C(timed_out), C(seconds).
  returned: always
  type: list
  elements: dict
"""

import contextlib
import json
import os
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
            "settings": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "default": 60},
            "connect_wait": {"type": "int", "default": 15},
        },
        required_if=[("side", "client", ["address"])],
        supports_check_mode=True,
    )
    p = module.params
    if "/" in p["run_id"] or p["run_id"] in ("", ".", ".."):
        module.fail_json(msg=f"rdma_pairs_run: run_id must be a plain name, found {p['run_id']!r}")
    run = os.path.join(p["run_dir"], p["run_id"])
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
