"""``gpufleet lab up|down|status``: the embedded lab cluster.

The lab is the Molecule ``lab`` scenario's hosts (one Slurm controller and
two GPU nodes with GPU/NIC doubles, podman containers on the gpufleet-lab
network) kept running so a person can run playbooks against them with
``-i inventories/lab``. No test uses these hosts: the ``cluster`` scenario tests
the same cluster on hosts and a network of its own, so ``make test`` leaves a
running lab alone.
"""

from __future__ import annotations

import os
import re
import subprocess

from . import acceptance_reuse
from .common import EXIT_FAILED, FACT_CACHE, ROOT, CliError

SCENARIO = "lab"
INVENTORY = os.path.join(ROOT, "inventories", "lab")
LAB_HOSTS = ("lab-ctl01", "lab-gpu01", "lab-gpu02")


def register(sub) -> None:
    p = sub.add_parser(
        "lab",
        help="create, destroy or show the local lab cluster (podman containers)",
        description=(
            "The lab: three podman containers (lab-ctl01, lab-gpu01, lab-gpu02) with GPU and NIC "
            "test doubles, matching inventories/lab. `up` builds what is missing (test bed, image), "
            "creates and prepares them; `down` destroys them; `status` lists them. `up` and `down` forget "
            "the lab hosts' cached facts (.cache/facts) and the record of their last passing acceptance "
            "(.cache/acceptance). The hosts run the test-host image of "
            "GPUFLEET_TEST_SUITE (default bookworm: Debian's packages the roles install are in it already; "
            "bookworm-bare: only downloaded, so a first provision installs them as on a fresh server)."
        ),
    )
    p.add_argument(
        "action",
        choices=("up", "down", "status"),
        help="up: build what is missing and create + prepare the hosts; down: destroy them; status: list them",
    )
    p.set_defaults(func=run)


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + env.get("PATH", "")
    env.setdefault("ANSIBLE_CONFIG", os.path.join(ROOT, "ansible.cfg"))
    return env


def _run(cmd: list[str]) -> int:
    print("+ " + " ".join(cmd), flush=True)
    try:
        return subprocess.call(cmd, cwd=ROOT, env=_env())
    except FileNotFoundError as exc:
        raise CliError(f"{cmd[0]} not found: run `make venv` (and scripts/testbed) first") from exc


def forget_facts(cache_dir: str | None = None, hosts: tuple[str, ...] = LAB_HOSTS) -> list[str]:
    """Remove the lab hosts' cached facts; return the hosts whose facts were removed.

    A new lab is new hosts under the old names: with smart gathering, the first run would otherwise
    believe the cached facts of the last lab (its packages, its rails' addresses) for up to the cache's
    timeout (ansible.cfg).
    """
    cache_dir = cache_dir or FACT_CACHE
    try:
        names = os.listdir(cache_dir)
    except FileNotFoundError:
        return []
    removed = []
    for host in hosts:
        # ansible-core names a host's file <host>, or s<schema id>_<host> from 2.19 on.
        mine = [n for n in names if n == host or re.fullmatch(r"s\d+_" + re.escape(host), n)]
        for name in mine:
            try:
                os.remove(os.path.join(cache_dir, name))
            except FileNotFoundError:
                continue
        if mine:
            removed.append(host)
    return removed


def _status() -> list[tuple[str, str]]:
    try:
        out = subprocess.run(
            ["podman", "ps", "-a", "--format", "{{.Names}}\t{{.Status}}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    except FileNotFoundError as exc:
        raise CliError("podman is not installed: run scripts/testbed setup") from exc
    states = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    return [(h, states.get(h, "absent")) for h in LAB_HOSTS]


def run(args) -> int:
    if args.action == "status":
        rows = _status()
        for host, state in rows:
            print(f"{host:<12} {state}")
        return 0 if all(s.startswith("Up") for _, s in rows) else EXIT_FAILED
    if args.action == "down":
        rc = _run(["molecule", "destroy", "-s", SCENARIO])
        forget_facts()
        acceptance_reuse.forget(INVENTORY)
        return 0 if rc == 0 else EXIT_FAILED
    forget_facts()
    acceptance_reuse.forget(INVENTORY)  # new hosts under the old names: measure them
    suite = os.environ.get("GPUFLEET_TEST_SUITE", "bookworm")
    if _run([os.path.join(ROOT, "scripts", "testbed"), "all", suite]) != 0:
        return EXIT_FAILED
    # Molecule goes by its own state file: with a lab host gone or stopped (removed by hand, a
    # reboot of this machine) it would skip create and prepare and call the lab up. A lab that is
    # not wholly up is destroyed first and made anew.
    missing = [f"{host} ({state})" for host, state in _status() if not state.startswith("Up")]
    if missing:
        print(f"lab: not every host is up ({', '.join(missing)}): destroying what is left, then creating it anew")
        _run(["molecule", "destroy", "-s", SCENARIO])
    for step in ("create", "prepare"):
        if _run(["molecule", step, "-s", SCENARIO]) != 0:
            return EXIT_FAILED
    print("lab is up: run playbooks with -i inventories/lab (e.g. scripts/gpufleet provision -i inventories/lab)")
    return 0
