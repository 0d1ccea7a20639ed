# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Run several commands at once, at most ``parallel`` at a time, and keep each one's output.

The acceptance role starts the nccl-tests runs of a bisect round (one ``srun`` or ``mpirun``
per group of nodes; the groups never share a node) and the NIC loopback runs of a pool's nodes
this way, from one Ansible task: a round then takes as long as its slowest group, not the sum
of its groups. Ansible's own ``async`` cannot do it here: under Mitogen (ansible.cfg's
strategy) fire-and-forget jobs never finish.

Each command runs in a thread of its own that waits on its process, so the number of commands
in flight is exactly the number of busy threads. A command that outlives ``timeout`` is sent
SIGTERM, then SIGKILL after ``kill_after`` seconds, and gets exit status 124, as ``timeout(1)``
gives (``srun`` cancels its job step on SIGTERM). Standard library only: it runs on the host
the task is delegated to.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

TIMED_OUT = 124  # timeout(1)'s exit status
NOT_FOUND = 127  # the shell's, for a command that does not exist


def run_one(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    kill_after: float = 30.0,
) -> dict:
    """Run one command to its end: ``{rc, stdout, stderr}`` (stdout and stderr as text)."""
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update({str(k): str(v) for k, v in env.items()})
    try:
        proc = subprocess.Popen(
            [str(a) for a in argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        return {"rc": NOT_FOUND, "stdout": "", "stderr": f"{argv[0] if argv else '?'}: {exc.strerror or exc}"}
    try:
        out, err = proc.communicate(timeout=timeout)
        return {"rc": proc.returncode, "stdout": out, "stderr": err}
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=kill_after)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        note = f"\nkilled after {timeout:g} s (timeout)"
        return {"rc": TIMED_OUT, "stdout": out, "stderr": (err or "") + note}


def run_all(
    runs: Sequence[Mapping],
    parallel: int = 0,
    *,
    timeout: float | None = None,
    kill_after: float = 30.0,
    runner=run_one,
) -> dict:
    """Run every ``{"argv": [...], "env": {...}}`` of ``runs``, at most ``parallel`` at once (0: all).

    Returns ``{"results": [...], "elapsed", "max_in_flight"}``; ``results`` are in the order of
    ``runs``, each ``{argv, rc, stdout, stderr, started, finished}`` with ``started`` / ``finished``
    in seconds since the batch began (which runs overlapped, and how long each took).
    ``runner(argv, env, timeout, kill_after)`` runs one command (a stand-in in the unit tests).
    """
    runs = list(runs)
    workers = len(runs) if parallel is None or int(parallel) <= 0 else min(int(parallel), len(runs))
    t0 = time.monotonic()
    lock = threading.Lock()
    in_flight = [0, 0]  # now, most seen

    def one(run: Mapping) -> dict:
        argv = [str(a) for a in run.get("argv") or []]
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        started = time.monotonic() - t0
        try:
            if not argv:
                result = {"rc": NOT_FOUND, "stdout": "", "stderr": "no command given"}
            else:
                result = runner(argv, run.get("env") or None, timeout, kill_after)
        finally:
            finished = time.monotonic() - t0
            with lock:
                in_flight[0] -= 1
        return {"argv": argv, **result, "started": round(started, 3), "finished": round(finished, 3)}

    if not runs:
        return {"results": [], "elapsed": 0.0, "max_in_flight": 0}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, runs))
    return {"results": results, "elapsed": round(time.monotonic() - t0, 3), "max_in_flight": in_flight[1]}


__all__ = ["NOT_FOUND", "TIMED_OUT", "run_all", "run_one"]
