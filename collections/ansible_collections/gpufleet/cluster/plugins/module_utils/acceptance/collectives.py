# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Collectives beyond all_reduce: all_gather and alltoall, run and judged like all_reduce.

Mixture-of-experts training lives on alltoall and sharded data parallelism (FSDP, ZeRO) on
all_gather; a fabric can carry all_reduce at its floor and still be slow for alltoall (an
adaptive-routing or congestion-control fault hurts the all-pairs traffic most). The brief gives
their floors under ``acceptance.collectives.<collective>`` (and per pool under
``pools[].acceptance.collectives.<collective>``); a collective without a floor is not run.
The catalogue has no published all_gather / alltoall figure for any accelerator, so there is no
default: the gate is off until the brief sets a floor.

Busbw is what nccl-tests prints, normalised so that it compares with the hardware's link
bandwidth (nccl-tests' doc/PERFORMANCE.md,
https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):

* all_reduce: busbw = algbw x 2(n-1)/n (src/all_reduce.cu, ``AllReduceGetBw``)
* all_gather: busbw = algbw x (n-1)/n (src/all_gather.cu, ``AllGatherGetBw``)
* alltoall:   busbw = algbw x (n-1)/n (src/alltoall.cu, ``AlltoAllGetBw``)

so the physical limits of all_reduce (NVLink per GPU in one node, NICs x link speed across
nodes) bound them too, and preflight checks their floors against the same limits.

A collective's run is judged by :func:`run.evaluate_log` with the collective's own floors in the
spec; the same failure rules hold (a run that crashed, timed out or stopped early never passes,
whatever its busbw). Its violations name the collective in ``collective``, in ``field``
(``acceptance.collectives.alltoall.multi_node_busbw_gbps``) and in the message (the run's label).
A pool run below its floor is not bisected: its violation names the nodes of the run and fails
the verdict; the all_reduce bisect is what names a slow node (docs/nccl-acceptance.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl as acc
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance.run import (
    COMPLETED,
    SpecError,
    evaluate_log,
    parse_log,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.collectives import (
    COLLECTIVES,
    FLOOR_KEYS,
    busbw_factor,
    collective_floors,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import violation


def collective_specs(brief: dict, spec: dict, binaries: dict | None = None) -> list[dict]:
    """One spec per collective the pool gates: the pool's all_reduce spec with the collective's floors.

    ``spec`` is :func:`run.acceptance_spec`'s; ``binaries`` maps a collective to its path on the
    nodes. Each spec carries ``collective``, ``binary``, ``run_single`` / ``run_multi`` (a floor
    is set for that scope) and the brief fields of its floors.
    """
    if not isinstance(brief, dict) or not isinstance(spec, dict):
        raise SpecError("collective_specs needs the brief and the pool's spec (dicts)")
    pools = brief.get("pools") or []
    index = int(spec.get("pool_index") or 0)
    pool = pools[index] if index < len(pools) and isinstance(pools[index], dict) else {}
    out = []
    for name, floors in collective_floors(brief, pool, index).items():
        binary = (binaries or {}).get(name) or COLLECTIVES[name]["binary"]
        out.append(
            dict(
                spec,
                collective=name,
                binary=str(binary),
                run_single=floors["single_node_busbw_gbps"] is not None,
                run_multi=floors["multi_node_busbw_gbps"] is not None,
                **floors,
            )
        )
    return out


def _name_collective(violations: list[dict], spec: dict, single: bool, nodes: Sequence[str] | None) -> list[dict]:
    """The all_reduce wording of :func:`evaluate_log`'s violations made the collective's own."""
    name = spec["collective"]
    binary = COLLECTIVES[name]["binary"]
    field = spec["single_node_busbw_gbps_field" if single else "multi_node_busbw_gbps_field"]
    generic = acc.FIELD_SINGLE if single else acc.FIELD_MULTI
    out = []
    for v in violations:
        v = dict(v, collective=name)
        if v.get("field") == generic:
            v["field"] = field
        message = v["message"].replace("all_reduce_perf", binary).replace("all_reduce run", f"{name} run")
        if v["code"] == acc.NCCL_BUSBW_BELOW_FLOOR and not single:
            # No bisect for this collective: the run's nodes are what the report can name.
            message = (
                message.rsplit("; ", 1)[0] + f"; nodes of the run: {', '.join(nodes or [])}. {name} is not "
                "bisected: when all_reduce passes, check the fabric's all-to-all path (adaptive routing, "
                "congestion control, the spine's uplinks), then pair the nodes by hand"
            )
        v["message"] = message
        out.append(v)
    return out


def _aligned_size(violations: list[dict], run: dict | None, spec: dict) -> list[dict]:
    """Without the size warning/error of a run that stopped short of the brief's size by alignment only.

    all_gather and alltoall split the buffer between the ranks and round each rank's share down
    (nccl-tests' src/all_gather.cu: 4 elements per rank; src/alltoall.cu: 16 bytes per peer), so
    with 24 ranks ``-e 8G`` prints 8589934464, not 8589934592. A shortfall under 32 bytes per
    rank is that rounding, not a smaller run.
    """
    if not run or not run.get("rows"):
        return violations
    required = acc.parse_size(spec.get("required_max_bytes"))
    largest = max(r["size"] for r in run["rows"])
    ranks = int(run.get("ranks") or 0) or 1
    if required is None or not 0 < required - largest < 32 * ranks:
        return violations
    return [v for v in violations if v["code"] != acc.NCCL_SIZE_TOO_SMALL]


def records(
    results: Sequence[dict],
    specs: Sequence[dict],
    scope: str,
    *,
    host: str | None = None,
    nodes: Sequence[str] | None = None,
    pool: str | None = None,
) -> list[dict]:
    """The run records of the collectives' runs, as the report keeps them.

    ``results[i]`` is ``{rc, stdout, stderr}`` (a command task's loop result; a skipped one is
    left out) of the run of ``specs[i]``. ``scope``: ``single-node`` (the run on ``host``) or
    ``multi-node`` (the run across ``nodes``). Each record is an all_reduce record (label,
    scope, floor, run, ended, violations) plus ``collective``.
    """
    if scope not in ("single-node", "multi-node"):
        raise SpecError(f"scope must be single-node or multi-node, got {scope!r}")
    if len(results) != len(specs):
        raise SpecError(f"expected as many results as specs, found {len(results)} and {len(specs)}")
    single = scope == "single-node"
    out = []
    for result, spec in zip(results, specs, strict=True):
        result = result if isinstance(result, dict) else {}
        if result.get("skipped"):
            continue
        name = spec["collective"]
        label = f"single-node {name} {host}" if single else f"all-nodes {name} {pool or spec.get('pool')}"
        output = f"{result.get('stdout') or ''}\n{result.get('stderr') or ''}"
        rc = result.get("rc")
        parsed = parse_log(output, label, rc)
        violations = evaluate_log(
            parsed,
            spec,
            scope,
            host=host if single else None,
            label=label,
            nodes=None if single else list(nodes or []),
            rc=rc,
            output=output,
        )
        run = (parsed["runs"] or [None])[0]
        violations = _name_collective(_aligned_size(violations, run, spec), spec, single, nodes)
        found = (run or {}).get("collective")
        if run is not None and found and found != name:
            violations.append(
                dict(
                    violation(
                        acc.NCCL_RUN_FAILED,
                        spec[f"{'single' if single else 'multi'}_node_busbw_gbps_field"],
                        f"{label}: expected a run of {COLLECTIVES[name]['binary']}, found one of {found}_perf; "
                        f"set the role's path of {COLLECTIVES[name]['binary']} to that binary",
                        host if single else None,
                    ),
                    collective=name,
                )
            )
        record = {
            "label": label,
            "scope": scope,
            "collective": name,
            "pool": pool or spec.get("pool"),
            "floor_gbps": spec["single_node_busbw_gbps" if single else "multi_node_busbw_gbps"],
            "limit_gbps": spec["single_node_limit_gbps" if single else "multi_node_limit_gbps"],
            "run": run,
            "busbw": parsed["busbw"],
            "debug": parsed["debug"],
            "rc": rc,
            "output": output,
            "ended": parsed["ended"],
            "failed": parsed["ended"]["status"] != COMPLETED,
            "violations": violations,
        }
        if single:
            record["host"] = host
        else:
            record["nodes"] = list(nodes or [])
        out.append(record)
    return out


__all__ = ["COLLECTIVES", "FLOOR_KEYS", "busbw_factor", "collective_floors", "collective_specs", "records"]
