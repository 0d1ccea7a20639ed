#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma_pairs_run
short_description: Run perftest's ib_write_bw on every rail of one node at once, as server or client
version_added: 0.1.0
description:
  - One side of one node pair of the acceptance's RDMA pair schedule (module_utils/acceptance/rdma_pairs.py,
    docs/nccl-acceptance.md "Per-rail RDMA pairs"). Each rail runs its own ib_write_bw process, all at once, each on
    its own TCP port (C(-p)); the module returns when all have ended or I(timeout) has passed (then the process is
    killed and C(timed_out) is true).
  - The server side (no address) waits for its client; start it with C(async) and C(poll 0) before the clients.
    A client that finds its server not listening yet (C(Couldn't connect)) is started again until
    I(connect_wait) seconds have passed.
  - In check mode nothing runs; each rail's command line is returned.
options:
  binary:
    description: The ib_write_bw binary.
    type: str
    default: ib_write_bw
  side:
    description: C(server) or C(client).
    type: str
    required: true
    choices: [server, client]
  ports:
    description: The rails of the pair, as P(gpufleet.cluster.rdma_pairs_plan#filter) gives them (C(rail), C(tcp_port),
      C(server_device), C(server_ib_port), C(server_gpu), C(client_device), C(client_ib_port), C(client_gpu)).
    type: list
    elements: dict
    required: true
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
    description: Seconds a client keeps trying to reach a server that is not listening yet.
    type: int
    default: 15
author: gpufleet developers
"""

EXAMPLES = r"""
- name: Start the servers of a pair
  gpufleet.cluster.rdma_pairs_run:
    side: server
    ports: "{{ pair.ports }}"
  async: 120
  poll: 0
"""

RETURN = r"""
results:
  description: One entry per rail - C(rail), C(tcp_port), C(argv), C(rc), C(stdout), C(stderr), C(timed_out),
    C(seconds).
  returned: always
  type: list
  elements: dict
"""

import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.rdma_pairs import RdmaPairsError, argv

NOT_LISTENING = ("Couldn't connect to", "Unable to open file descriptor for socket connection")


def _start(cmd):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_all(cmds, timeout, side, connect_wait):
    """Start every command at once; each one's result once all have ended (or been killed)."""
    started = time.monotonic()
    procs = []
    for cmd in cmds:
        try:
            procs.append(_start(cmd))
        except OSError as exc:
            procs.append(exc)
    out = [None] * len(cmds)
    while any(o is None for o in out):
        for i, proc in enumerate(procs):
            if out[i] is not None:
                continue
            if isinstance(proc, OSError):
                out[i] = {"rc": 127, "stdout": "", "stderr": f"{cmds[i][0]}: {proc}", "timed_out": False}
                continue
            if proc.poll() is None:
                if time.monotonic() - started > timeout:
                    proc.kill()
                    stdout, stderr = proc.communicate()
                    out[i] = {"rc": None, "stdout": stdout, "stderr": stderr, "timed_out": True}
                continue
            stdout, stderr = proc.communicate()
            text = f"{stdout}\n{stderr}"
            if (
                side == "client"
                and proc.returncode != 0
                and any(s in text for s in NOT_LISTENING)
                and time.monotonic() - started < connect_wait
            ):
                time.sleep(0.5)
                procs[i] = _start(cmds[i])
                continue
            out[i] = {"rc": proc.returncode, "stdout": stdout, "stderr": stderr, "timed_out": False}
        time.sleep(0.05)
    for o in out:
        o["seconds"] = round(time.monotonic() - started, 2)
    return out


def main():
    module = AnsibleModule(
        argument_spec={
            "binary": {"type": "str", "default": "ib_write_bw"},
            "side": {"type": "str", "required": True, "choices": ["server", "client"]},
            "ports": {"type": "list", "elements": "dict", "required": True},
            "address": {"type": "str"},
            "settings": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "default": 60},
            "connect_wait": {"type": "int", "default": 15},
        },
        required_if=[("side", "client", ["address"])],
        supports_check_mode=True,
    )
    p = module.params
    try:
        cmds = [argv(p["binary"], p["side"], port, p["settings"], p.get("address")) for port in p["ports"]]
    except (RdmaPairsError, KeyError, TypeError, ValueError) as exc:
        module.fail_json(msg=f"rdma_pairs_run: a port of the plan is incomplete: {exc}")
    if module.check_mode:
        results = [
            {"rail": port.get("rail"), "tcp_port": port.get("tcp_port"), "argv": cmd}
            for port, cmd in zip(p["ports"], cmds, strict=True)
        ]
        module.exit_json(changed=False, results=results, previewed=True)
    done = run_all(cmds, p["timeout"], p["side"], p["connect_wait"])
    results = [
        {"rail": port.get("rail"), "tcp_port": port.get("tcp_port"), "argv": cmd, **res}
        for port, cmd, res in zip(p["ports"], cmds, done, strict=True)
    ]
    module.exit_json(changed=False, results=results)


if __name__ == "__main__":
    main()
