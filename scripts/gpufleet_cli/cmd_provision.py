"""Playbook-running subcommands: ``provision`` (site.yml) and the stages that run alone."""

from __future__ import annotations

import os

from .common import ROOT
from .runner import add_run_arguments, options_from_args, run_playbook

# subcommand -> (playbook, one-line help, description)
COMMANDS = {
    "provision": (
        "site.yml",
        "run the whole site playbook: preflight, base OS, GPU stack, control plane, gates",
        "Run playbooks/site.yml through ansible-runner: every stage in order, with live progress per "
        "phase and host and a summary (hosts ok/changed/failed/unreachable, time per phase, failures).",
    ),
    "verify": (
        "verify.yml",
        "hardware gate: gather facts on every node and check them against the brief",
        "Run playbooks/verify.yml: gather GPU/NIC/CPU/memory/NVMe/version facts on each node, check them "
        "against the brief, write a per-node JSON record, fail only the nodes that violate.",
    ),
    "accept": (
        "acceptance.yml",
        "NCCL acceptance: per-node and all-node all_reduce against the brief's floors",
        "Run playbooks/acceptance.yml: NCCL all_reduce on every node and across the pool, compared with "
        "the brief's floors; bisect and drain a slow node; write the report.",
    ),
}


def register(sub) -> None:
    for name, (playbook, help_, desc) in COMMANDS.items():
        if name != "provision" and not os.path.exists(os.path.join(ROOT, "playbooks", playbook)):
            continue  # the stage has not landed yet
        p = sub.add_parser(name, help=help_, description=desc)
        add_run_arguments(p)
        p.set_defaults(func=_runner_for(playbook))


def _runner_for(playbook: str):
    def run(args) -> int:
        return run_playbook(playbook, options_from_args(args))

    return run
