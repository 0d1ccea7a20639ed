# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Are the scheduler's daemons running? Judged from ``systemctl is-active`` on each host.

The acceptance runs its multi-node tests through Slurm (srun) and drains through it (scontrol).
When one of Slurm's daemons is down - slurmctld, slurmdbd or munged on the controller, munged or
slurmd on a GPU node - srun fails or hangs through no fault of the GPU nodes, and a bisect of
those failures would name healthy nodes as slow. So the role asks systemd on every host before
the multi-node runs, before a bisect and before the drain; a daemon found down is an error
violation naming the host and the daemon, and the role then skips the bisect and the drain.

``systemctl is-active UNIT...`` prints one state per unit, in the order given (``active``,
``inactive``, ``failed``, ``activating``, ...), and exits 0 only when all are active.

Pure functions; :func:`targets` and :func:`check` are what the ``control_daemons`` filters call.
"""

from __future__ import annotations

from collections.abc import Iterable

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import violation

CODE = "ACCEPTANCE_CONTROL_DAEMON_DOWN"
# States in which the daemon serves requests ("reloading" re-reads its configuration, still up).
RUNNING = frozenset({"active", "reloading"})
# The process name an operator knows, where it is not the unit's name.
DAEMON_OF_UNIT = {"munge": "munged"}
# When the check ran, and what the role skipped because a daemon was down.
STAGES = {
    "multi-node": ("before the multi-node runs", "the multi-node runs, the bisect and the drain were skipped"),
    "bisect": ("before the bisect", "the bisect and the drain were skipped"),
    "drain": ("before the drain", "no node was drained"),
}


class DaemonCheckError(ValueError):
    """The inputs cannot be judged (the filters turn this into AnsibleFilterError)."""


def daemon_name(unit: str) -> str:
    base = unit[: -len(".service")] if unit.endswith(".service") else unit
    return DAEMON_OF_UNIT.get(base, base)


def _units(value, what: str) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise DaemonCheckError(f"{what} must be a list of systemd unit names, found {type(value).__name__}")
    return list(dict.fromkeys(str(u) for u in value if str(u)))


def targets(controller: str, controller_units, nodes: Iterable[str], node_units) -> list[dict]:
    """What to ask systemd where: the controller with its units first, then each node with the
    nodes' units (a controller that is also a node is asked for both, once). A host with no unit
    to ask is left out."""
    ctl_units, n_units = _units(controller_units, "controller_units"), _units(node_units, "node_units")
    out: list[dict] = []
    if controller:
        node_list = [str(n) for n in nodes or []]
        units = ctl_units + ([u for u in n_units if u not in ctl_units] if controller in node_list else [])
        if units:
            out.append({"host": str(controller), "units": units, "role": "controller"})
    for node in dict.fromkeys(str(n) for n in nodes or []):
        if node != controller and n_units:
            out.append({"host": node, "units": n_units, "role": "node"})
    return out


def states(units: list[str], stdout: str, rc=None, error: str = "") -> dict[str, str]:
    """Unit -> state from ``systemctl is-active``'s output. A unit with no line of its own
    (systemctl missing or failing) is ``unknown``, with the error when there is one."""
    lines = [line.strip() for line in (stdout or "").splitlines() if line.strip()]
    if len(lines) >= len(units):
        return dict(zip(units, lines, strict=False))
    # Exit 3 is systemctl's "not all active"; any other failure with lines missing is systemctl's own.
    why = f"systemctl exit {rc}" if rc not in (None, 0, 3) else "systemctl printed no state"
    detail = (error or "").strip()[:120]
    unknown = f"unknown ({why}{': ' + detail if detail else ''})"
    return {unit: (lines[i] if i < len(lines) else unknown) for i, unit in enumerate(units)}


def _message(host: str, unit: str, state: str, stage: str, label: str) -> str:
    when, skipped = STAGES[stage]
    if label:
        when = f"{when} of {label}"
    return (
        f"{daemon_name(unit)} is not running on {host} (systemd unit {unit}: {state}), found {when}; {skipped}. "
        "A Slurm daemon that is down fails srun through no fault of the GPU nodes, so no node is drained for it. "
        f"Start it (systemctl start {unit}; journalctl -u {unit} says why it stopped), then run acceptance again"
    )


def check(results: Iterable[dict], stage: str, seen: Iterable[dict] = (), label: str = "") -> dict:
    """Judge the registered results of ``systemctl is-active`` run over :func:`targets`.

    ``results``: each ``{item: {host, units, role}, stdout, rc, stderr | msg, unreachable?, skipped?}``
    (a loop's ``results``). ``stage``: ``multi-node``, ``bisect`` or ``drain``. ``seen``: what earlier
    checks of this run found down (no second violation for the same daemon on the same host).
    ``label``: what the stage concerns (e.g. ``pool h100``), for the message.

    Returns ``{"down": [{host, unit, daemon, state, stage}], "violations": [...]}``: ``down`` lists
    every daemon down now; ``violations`` only the ones not in ``seen``. An unreachable host gives no
    verdict here (the report names it as not tested).
    """
    if stage not in STAGES:
        raise DaemonCheckError(f"stage must be one of {', '.join(STAGES)}, found {stage!r}")
    known = {(d.get("host"), d.get("unit")) for d in seen or [] if isinstance(d, dict)}
    down: list[dict] = []
    found: list[dict] = []
    for result in results or []:
        if not isinstance(result, dict):
            raise DaemonCheckError(f"each result must be a dict (a loop's result), found {type(result).__name__}")
        item = result.get("item")
        if not isinstance(item, dict) or not item.get("host"):
            raise DaemonCheckError(f"a result has no item {{host, units}}: {str(result)[:120]}")
        if result.get("unreachable") or result.get("skipped"):
            continue
        host, units = str(item["host"]), _units(item.get("units") or [], "item.units")
        error = str(result.get("stderr") or result.get("msg") or "")
        for unit, state in states(units, str(result.get("stdout") or ""), result.get("rc"), error).items():
            if state in RUNNING:
                continue
            entry = {"host": host, "unit": unit, "daemon": daemon_name(unit), "state": state, "stage": stage}
            down.append(entry)
            if (host, unit) in known:
                continue
            known.add((host, unit))
            field = f"acceptance_control_daemons_{item.get('role') or 'node'}"
            found.append(violation(CODE, field, _message(host, unit, state, stage, label), host))
    return {"down": down, "violations": found}


__all__ = [
    "CODE",
    "DAEMON_OF_UNIT",
    "RUNNING",
    "STAGES",
    "DaemonCheckError",
    "check",
    "daemon_name",
    "states",
    "targets",
]
