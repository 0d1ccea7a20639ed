# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""What the ``acceptance`` role needs around the NCCL core: pure functions, plain dicts.

* :func:`acceptance_spec` — one pool's effective gate: floors (pool > brief > catalogue),
  physical limits, message sizes, fabric and GPUDirect, GPUs per node.
* :func:`parse_log` — a launcher's output (nccl-tests text or ``-J`` JSON, with or
  without NCCL_DEBUG=INFO lines) -> ``{runs, debug, warnings, busbw, failures, ended}``.
* :func:`run_end` — how a run ended (``completed``, ``failed``, ``timed out``, ``killed``,
  ``incomplete``, ``no table``), from the launcher's exit status and the log.
* :func:`evaluate_log` — the violations of one parsed log for a scope
  (``single-node``, ``multi-node``, ``loopback``, ``bisect``).
* :func:`launch_argv` — the argv of a run: the binary alone, ``srun --mpi=pmix``
  (with pyxis' ``--container-image``) or ``mpirun`` over the management network.
* :func:`run_records` — the records of launcher results (the all-node run, bisect groups,
  NIC loopback runs): parsed, judged, as the report keeps them.
* :func:`bisect_step` — :func:`acceptance.plan_bisect` plus the tests so far.
* :func:`node_record` — what the report shows per node, from ``gpufleet_hw``.
* :func:`drain_reason` — the Slurm reason of a node acceptance drains.

Standard library only (the role calls these through filters on the controller).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import dcgm_diag, nccl_debug, nccl_tests
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl as acc
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.catalogue import (
    get_accelerator,
    get_topology,
    single_node_ceiling_gbps,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, violation
from ansible_collections.gpufleet.cluster.plugins.module_utils.preflight.gate import (
    effective_brief,
    multi_node_ceiling_gbps,
)

SCOPES = ("single-node", "multi-node", "loopback", "bisect")
LAUNCHERS = ("local", "srun", "mpirun")
DRAIN_REASON_PREFIX = "gpufleet acceptance"
_LOOPBACK_HINT = (
    "NCCL through this node's own NICs (P2P and SHM off) is slow, whatever the peer: check its ports "
    "(ibstat: state, rate), cables, the NICs' PCIe links and GPUDirect (nvidia-peermem)"
)


class SpecError(ValueError):
    """The brief or the pool cannot give an acceptance spec (the filters turn it into AnsibleFilterError)."""


# --- the gate of one pool -------------------------------------------------------------


def _pool_entry(brief: dict, pool) -> tuple[int, dict]:
    pools = brief.get("pools") or []
    name = pool.get("name") if isinstance(pool, dict) else pool
    for i, entry in enumerate(pools):
        if isinstance(entry, dict) and entry.get("name") == name:
            return i, entry
    known = ", ".join(str(p.get("name")) for p in pools if isinstance(p, dict)) or "none"
    raise SpecError(f"no pool named {name!r} in the brief (pools: {known})")


def acceptance_spec(brief: dict, pool, *, min_bytes=None, max_bytes=None) -> dict:
    """One pool's acceptance gate, everything the role and the report need.

    Floors are the effective ones (``pools[].acceptance`` > ``acceptance`` > derived from the
    catalogue, as :func:`preflight.effective_brief` computes them); ``min_bytes`` / ``max_bytes``
    override the brief's message sizes for the run (the brief's ``max_bytes`` stays the size the
    gate expects, ``required_max_bytes``).
    """
    if not isinstance(brief, dict):
        raise SpecError(f"brief must be a dict, got {type(brief).__name__}")
    index, raw_pool = _pool_entry(brief, pool)
    eff = effective_brief(brief)
    eff_pool = next((p for p in eff.get("pools") or [] if p.get("name") == raw_pool.get("name")), raw_pool)
    floors = eff_pool.get("acceptance") or {}
    top = brief.get("acceptance") or {}
    fabric = (brief.get("networks") or {}).get("fabric") or {}
    management = (brief.get("networks") or {}).get("management") or {}
    accel = get_accelerator(raw_pool.get("accelerator"))
    topo = get_topology(raw_pool.get("topology"))
    nics = raw_pool.get("nics_per_node") or 0
    speed = raw_pool.get("nic_speed_gbps") or fabric.get("link_speed_gbps")
    fabric_type = str(fabric.get("type") or "none").lower()
    single_limit = single_node_ceiling_gbps(accel, topo) if accel is not None else None
    multi_limit = multi_node_ceiling_gbps(nics, speed, accel, topo) if fabric_type != "none" else None
    required_max = top.get("max_bytes", "8G")
    return {
        "pool": raw_pool.get("name"),
        "pool_index": index,
        "group": raw_pool.get("group"),
        "accelerator": raw_pool.get("accelerator"),
        "gpus_per_node": int(raw_pool.get("gpus_per_node") or 0),
        "nics_per_node": int(nics),
        "single_node_busbw_gbps": floors.get("single_node_busbw_gbps"),
        "multi_node_busbw_gbps": floors.get("multi_node_busbw_gbps"),
        "single_node_limit_gbps": float(single_limit) if single_limit else None,
        "multi_node_limit_gbps": float(multi_limit) if multi_limit else None,
        "min_bytes": str(min_bytes if min_bytes not in (None, "") else top.get("min_bytes", 8)),
        "max_bytes": str(max_bytes if max_bytes not in (None, "") else required_max),
        "required_max_bytes": str(required_max),
        "max_wrong": int(top.get("max_wrong", 0) or 0),
        "fabric": fabric_type,
        "gpudirect_rdma": bool(raw_pool.get("gpudirect_rdma")),
        "management_cidr": management.get("cidr"),
    }


# --- one log ---------------------------------------------------------------------------


def parse_log(text, label: str | None = None, rc: int | None = None) -> dict:
    """A launcher's output -> ``{"runs", "no_table", "debug", "warnings", "busbw", "failures", "ended"}``.

    ``debug`` is the NCCL_DEBUG=INFO evidence (or None), its ``file`` set to ``label``;
    ``busbw`` is the gated figure (out-of-place at the largest size) of the slowest run, None
    when no run printed a table; ``failures`` every failure line of the output (see
    :func:`nccl_tests.find_failures`; without a table and without such a line, the first NCCL WARN
    or UCX ERROR line); ``no_table`` the runs that printed a header but no result row;
    ``ended`` how the run ended (:func:`run_end`), with
    ``rc`` the launcher's exit status when it is known.
    """
    text = text if isinstance(text, str) else ""
    every, warnings = nccl_tests.parse(text, label, keep_empty=True)
    runs = [r for r in every if r["rows"]]
    debug = None if nccl_tests.looks_like_json(text) else nccl_debug.parse_debug(text, label)
    figures = [acc.summarize_run(r)["busbw_largest"] for r in runs]
    figures = [f for f in figures if f is not None]
    rank_hosts = next((r.get("rank_hosts") for r in every if r.get("rank_hosts")), None)
    if nccl_tests.looks_like_json(text):
        failures = [f for r in runs for f in r.get("failures") or []]
    else:
        failures = nccl_tests.find_failures(text, rank_hosts)
        if not failures and not runs:
            # No table and no failure line: what NCCL or UCX reported is the cause.
            failures = nccl_tests.find_failures(text, rank_hosts, weak=True)[:1]
    parsed = {
        "runs": runs,
        # Runs that printed their header and devices but no table: who took part, for the messages.
        "no_table": [r for r in every if not r["rows"]],
        "debug": debug,
        "warnings": warnings,
        "busbw": min(figures) if figures else None,
        "failures": failures,
    }
    parsed["ended"] = run_end(parsed, rc)
    return parsed


# How a run ended. Only "completed" may pass: the others are failed groups for the bisect.
COMPLETED = "completed"
FAILED = "failed"
TIMED_OUT = "timed out"
KILLED = "killed"
INCOMPLETE = "incomplete"
NO_TABLE = "no table"
_TIMEOUT_RC = 124  # timeout(1) and nccl_run_batch
_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


def run_end(parsed: dict, rc=None) -> dict:
    """How a run ended: ``{"status", "rc", "signal", "failure", "hosts", "detail"}``.

    ``status``: ``timed out`` (exit 124), ``killed`` (a signal: a negative status as Python
    reports it, or 128 + N as a shell does), ``failed`` (any other non-zero exit, or a failure
    line anywhere in the output), ``incomplete`` (a table that stops before the largest size
    its run asked for), ``no table`` (nothing printed a result row), else ``completed``.
    ``failure`` is the first failure line (None when there is none), ``hosts`` the node(s) the
    failure lines name, ``detail`` the whole in words for a message.
    """
    parsed = parsed or {}
    try:
        code = None if rc is None or rc == "" else int(rc)
    except (TypeError, ValueError):
        code = None
    runs = parsed.get("runs") or []
    failures = parsed.get("failures")
    if failures is None:
        failures = [f for r in runs for f in r.get("failures") or []]
    hosts = sorted({h for f in failures for h in f.get("hosts") or []})
    signal = None
    if code == _TIMEOUT_RC:
        status, said = TIMED_OUT, f"timed out (exit {code})"
    elif code is not None and (code < 0 or code > 128):
        signal = -code if code < 0 else code - 128
        status, said = KILLED, f"killed by signal {signal} ({_SIGNALS.get(signal, 'signal')}, exit {code})"
    elif code:
        status, said = FAILED, f"exit {code}"
    elif failures:
        status, said = FAILED, "a failure line in its output"
    elif any(r.get("truncated") for r in runs):
        status, said = INCOMPLETE, "its table stopped before the largest size it asked for"
    elif not runs:
        status, said = NO_TABLE, "no result table"
    else:
        status, said = COMPLETED, "exit 0" if code == 0 else "its footer"
    truncated = [r for r in runs if r.get("truncated")]
    if truncated and status != INCOMPLETE:
        said += "; its table stopped before the largest size it asked for"
    if truncated:
        run = truncated[0]
        largest = max(row["size"] for row in run["rows"])
        said += f" (at {acc.human_size(largest)} of {acc.human_size(run.get('max_bytes'))})"
    first = failures[0]["text"] if failures else None
    if first:
        said += f": '{first}'" + (f" (and {len(failures) - 1} more failure line(s))" if len(failures) > 1 else "")
    return {"status": status, "rc": code, "signal": signal, "failure": first, "hosts": hosts, "detail": said}


def _end_violation(ended: dict, what: str, field: str, host: str | None, nodes: Sequence[str] | None) -> dict:
    """The violation of a run that printed a table but did not end cleanly."""
    named = ended.get("hosts") or ([host] if host else list(nodes or []))
    where = f" on {', '.join(named)}" if named else ""
    if ended["status"] == INCOMPLETE:
        code = acc.NCCL_RUN_INCOMPLETE
        todo = "the job was cut short: read the job's log and the nodes' kernel logs (XID), then re-run"
    else:
        code = acc.NCCL_RUN_FAILED
        todo = (
            "whatever its busbw, a run that fails is no pass: read the failure line and the job's log "
            "(NCCL_DEBUG=INFO, dmesg for XID errors), fix the node(s), then re-run"
        )
    return violation(
        code,
        field,
        f"{what}: expected the run to end cleanly (exit 0, every size, no failure line), found it "
        f"{ended['status']}{where}: {ended['detail']}; {todo}",
        host,
    )


def evaluate_log(
    parsed: dict,
    spec: dict,
    scope: str,
    *,
    host: str | None = None,
    label: str | None = None,
    nodes: Sequence[str] | None = None,
    rc: int | None = None,
    output: str | None = None,
) -> list[dict]:
    """Violations of one parsed log (:func:`parse_log`) against a pool's spec.

    ``rc`` and ``output`` (the launcher's exit status and output) complete the message of a
    run that printed no table with what the launcher said last.

    ``single-node``: the single-node floor, no transport gate. ``multi-node``: the multi-node
    floor, ``nodes`` must all hold ranks (``gpus_per_node`` each), the transport must be the
    brief's fabric (GDRDMA when ``gpudirect_rdma``). ``loopback`` (one node, NCCL's network
    path forced): the multi-node floor and the transport gate. ``bisect``: floor and #wrong only.
    """
    if scope not in SCOPES:
        raise SpecError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    parsed = parsed or {}
    runs = parsed.get("runs") or []
    single = scope == "single-node"
    floor = spec.get("single_node_busbw_gbps") if single else spec.get("multi_node_busbw_gbps")
    field = acc.FIELD_SINGLE if single else acc.FIELD_MULTI
    gpus = spec.get("gpus_per_node") or None
    kwargs: dict = {"host": host, "label": label, "field": field, "min_size": spec.get("required_max_bytes")}
    if scope == "multi-node" and nodes:
        kwargs["expected_hosts"] = list(nodes)
        if gpus:
            kwargs["expected_ranks"] = gpus * len(nodes)
    elif scope in ("single-node", "loopback") and gpus:
        kwargs["expected_ranks"] = gpus
    out = acc.evaluate_runs(runs, floor, int(spec.get("max_wrong") or 0), **kwargs)
    # What the run was asked for: its own parameter line, else the spec's size.
    asked = max((r["max_bytes"] for r in runs if r.get("max_bytes")), default=None)
    asked = asked or acc.parse_size(spec.get("max_bytes"))
    required = acc.parse_size(spec.get("required_max_bytes"))
    if asked and required and asked >= required:
        # The run was asked for the brief's size and stopped below it (nccl-tests lowers maxBytes
        # to what the GPU memory holds, or the run was cut): the brief's size was not measured.
        # A smaller size asked on purpose (acceptance_max_bytes) stays a warning.
        out = [
            dict(v, severity=ERROR, message=v["message"] + f" (it was asked for {acc.human_size(asked)})")
            if v["code"] == acc.NCCL_SIZE_TOO_SMALL
            else v
            for v in out
        ]
    if "failures" not in parsed and isinstance(output, str):
        parsed = dict(parsed, failures=nccl_tests.find_failures(output))
    ended = run_end(parsed, rc if rc is not None else (parsed.get("ended") or {}).get("rc"))
    if not runs:
        said = _last_words(parsed, rc, output)
        if said:
            out = [dict(v, message=f"{v['message']} ({said})") if v["code"] == acc.NCCL_NO_RUN else v for v in out]
    elif ended["status"] != COMPLETED:
        what = label or (f"single-node run on {host}" if host else "all_reduce run")
        out.insert(0, _end_violation(ended, what, field, host, nodes))
    if scope == "loopback":
        out = [
            dict(v, message=v["message"].rsplit("; ", 1)[0] + "; " + _LOOPBACK_HINT)
            if v["code"] == acc.NCCL_BUSBW_BELOW_FLOOR
            else v
            for v in out
        ]
    if scope in ("multi-node", "loopback"):
        transport = acc.evaluate_transport(
            parsed.get("debug"), spec.get("fabric"), bool(spec.get("gpudirect_rdma")), host=host, multi_node=True
        )
        if label:
            transport = [dict(v, message=f"{label}: {v['message']}") for v in transport]
        out.extend(transport)
    return out


def _last_words(parsed: dict, rc: int | None, output: str | None) -> str:
    """What a launcher that printed no table said: its exit status and its last error line."""
    parts = []
    if rc == 124:
        parts.append("timed out (exit 124)")
    elif rc not in (None, 0):
        parts.append(f"exit {rc}")
    lines = [ln.strip() for ln in (output or "").splitlines() if ln.strip() and "NCCL INFO" not in ln]
    errors = [ln for ln in lines if any(w in ln.lower() for w in ("error", "fail", "invalid", "cannot", "unable"))]
    failures = parsed.get("failures") or []
    if failures:
        # The first failure line is the cause; what follows it is mostly the launcher tearing down.
        parts.append(f"failure: {failures[0]['text'][:200]}")
        return "; ".join(parts)
    last = (parsed.get("warnings") or [None])[-1] or (errors or lines or [None])[-1]
    if last:
        parts.append(f"last words: {last[:200]}")
    return "; ".join(parts)


def run_records(
    results: Sequence[dict],
    spec: dict,
    scope: str,
    *,
    groups: Sequence[Sequence[str]],
    labels: Sequence[str],
    pool: str | None = None,
    round_no=None,
) -> list[dict]:
    """One run record per launcher result, as the report keeps them (``_acceptance_runs``).

    ``results[i]`` is ``{rc, stdout, stderr}`` (a command task's result, or one of
    ``nccl_run_batch``'s) of the run on ``groups[i]``, labelled ``labels[i]``. ``scope`` is how
    the output is judged (:func:`evaluate_log`): ``multi-node``, ``bisect``, or ``loopback``
    (one node, NCCL's network path forced; the record names its ``host``). The record's own
    scope is ``multi-node`` for the all-node run and ``bisect`` for the others, loopback included.
    """
    if scope not in ("multi-node", "bisect", "loopback"):
        raise SpecError(f"scope must be multi-node, bisect or loopback, got {scope!r}")
    if not (len(results) == len(groups) == len(labels)):
        raise SpecError(
            f"expected as many results, groups and labels, found {len(results)}, {len(groups)} and {len(labels)}"
        )
    out = []
    for result, group, label in zip(results, groups, labels, strict=True):
        result = result if isinstance(result, dict) else {}
        nodes = [str(n) for n in group]
        output = f"{result.get('stdout') or ''}\n{result.get('stderr') or ''}"
        rc = result.get("rc")
        parsed = parse_log(output, label, rc)
        record = {
            "label": label,
            "scope": "multi-node" if scope == "multi-node" else "bisect",
            "pool": pool,
            "nodes": nodes,
            "round": round_no,
            "floor_gbps": spec.get("multi_node_busbw_gbps"),
            "limit_gbps": spec.get("multi_node_limit_gbps"),
            "run": (parsed["runs"] or [None])[0],
            "busbw": parsed["busbw"],
            "debug": parsed["debug"],
            "rc": rc,
            "output": output,
            "ended": parsed["ended"],
            # A run that did not end cleanly is a failed group for the bisect, whatever its busbw.
            "failed": parsed["ended"]["status"] != COMPLETED,
        }
        if scope == "loopback":
            record["host"] = nodes[0] if nodes else None
            record["violations"] = evaluate_log(
                parsed, spec, "loopback", host=record["host"], label=label, rc=rc, output=output
            )
        else:
            record["violations"] = evaluate_log(parsed, spec, scope, label=label, nodes=nodes, rc=rc, output=output)
        out.append(record)
    return out


# --- launching -------------------------------------------------------------------------


def perf_args(
    spec: dict,
    gpus_per_process: int,
    *,
    step_factor: int = 2,
    iters: int = 20,
    warmup_iters: int = 5,
    check: int = 1,
    extra: Iterable[str] = (),
) -> list[str]:
    """all_reduce_perf's own arguments."""
    return [
        "-b",
        str(spec["min_bytes"]),
        "-e",
        str(spec["max_bytes"]),
        "-f",
        str(int(step_factor)),
        "-g",
        str(int(gpus_per_process)),
        "-n",
        str(int(iters)),
        "-w",
        str(int(warmup_iters)),
        "-c",
        str(int(check)),
        *[str(a) for a in extra],
    ]


def launch_argv(
    launcher: str,
    binary: str,
    nodes: Sequence[str],
    spec: dict,
    *,
    partition: str | None = None,
    srun_mpi: str = "pmix",
    container_image: str = "",
    container_mounts: str = "",
    launcher_args: Iterable[str] = (),
    test_extra_args: Iterable[str] = (),
    env_names: Iterable[str] = (),
    step_factor: int = 2,
    iters: int = 20,
    warmup_iters: int = 5,
    check: int = 1,
    gpus_per_task: int = 1,
) -> list[str]:
    """The argv that runs all_reduce_perf on ``nodes`` with ``spec['gpus_per_node']`` GPUs each.

    ``gpus_per_task`` (srun / mpirun): GPUs each rank drives (``-g``); the node runs
    ``gpus_per_node / gpus_per_task`` ranks. 1 (a rank per GPU) is the usual layout; a
    whole node per rank needs only one CPU per node.

    ``local``: the binary alone, one process driving every GPU (``-g N``), run on the node itself.
    ``srun``: one task per GPU (``-g 1``) on each node, ``--gres=gpu:N``, exclusive, ``--mpi``;
    pyxis ``--container-image`` when ``container_image`` is set. ``mpirun``: Open MPI over the
    management network (``oob``/``btl_tcp_if_include`` = the brief's management CIDR), one rank
    per GPU, every ``env_names`` variable exported with ``-x``.
    """
    if launcher not in LAUNCHERS:
        raise SpecError(f"launcher must be one of {', '.join(LAUNCHERS)}, got {launcher!r}")
    nodes = [str(n) for n in nodes]
    if not nodes:
        raise SpecError("launch_argv needs at least one node")
    gpus = int(spec.get("gpus_per_node") or 0)
    if gpus < 1:
        raise SpecError(f"pool {spec.get('pool')!r}: gpus_per_node must be >= 1 to run nccl-tests, found {gpus}")
    knobs = {"step_factor": step_factor, "iters": iters, "warmup_iters": warmup_iters, "check": check}
    if launcher == "local":
        if len(nodes) != 1:
            raise SpecError(f"launcher 'local' runs on one node, got {len(nodes)}")
        return [binary, *perf_args(spec, gpus, extra=test_extra_args, **knobs)]
    per = int(gpus_per_task)
    if per < 1 or gpus % per:
        raise SpecError(f"gpus_per_task must divide gpus_per_node ({gpus}), got {gpus_per_task!r}")
    tasks = gpus // per
    per_task = perf_args(spec, per, extra=test_extra_args, **knobs)
    if launcher == "srun":
        argv = ["srun", f"--mpi={srun_mpi}"] if srun_mpi else ["srun"]
        if partition:
            argv += ["--partition", str(partition)]
        argv += [
            "--nodes",
            str(len(nodes)),
            "--nodelist",
            ",".join(nodes),
            "--ntasks-per-node",
            str(tasks),
            f"--gres=gpu:{gpus}",
            "--exclusive",
            "--job-name",
            "gpufleet-acceptance",
        ]
        if container_image:
            argv.append(f"--container-image={container_image}")
            if container_mounts:
                argv.append(f"--container-mounts={container_mounts}")
        return [*argv, *[str(a) for a in launcher_args], binary, *per_task]
    argv = ["mpirun", "-np", str(tasks * len(nodes)), "-H", ",".join(f"{n}:{tasks}" for n in nodes)]
    argv += ["--map-by", f"ppr:{tasks}:node"]
    cidr = spec.get("management_cidr")
    if cidr:
        argv += ["--mca", "oob_tcp_if_include", str(cidr), "--mca", "btl_tcp_if_include", str(cidr)]
    for name in env_names:
        argv += ["-x", str(name)]
    return [*argv, *[str(a) for a in launcher_args], binary, *per_task]


# --- bisect and drain ------------------------------------------------------------------


def bisect_step(
    results: Sequence[dict],
    nodes: Sequence[str],
    floor_gbps: float,
    *,
    strategy: str = "pairs",
    known_good: Iterable[str] = (),
) -> dict:
    """:func:`acceptance.plan_bisect` with ``tests`` (the results so far) and ``known_good`` added."""
    known = list(dict.fromkeys(str(n) for n in known_good or ()))
    plan = acc.plan_bisect(list(nodes), float(floor_gbps), list(results or []), strategy=strategy, known_good=known)
    plan["tests"] = [dict(r) for r in results or []]
    plan["known_good"] = known
    return plan


def _seen_with(plan: dict, node: str) -> str:
    for test in reversed(plan.get("tests") or []):
        group = test.get("nodes") or []
        if node in group and len(group) == 2:
            other = next(n for n in group if n != node)
            busbw = test.get("busbw")
            figure = "no result" if busbw is None else f"{float(busbw):.1f} GB/s"
            if test.get("failed"):
                figure = f"run failed ({figure})" if busbw is not None else "run failed"
            return f"{figure} with {other}"
    return "slow in every group"


def drain_reason(host: str, why: str, plan: dict | None = None, floor_gbps=None, stamp: str | None = None) -> str:
    """``gpufleet acceptance: <why> ...`` — short enough for ``sinfo -R``; names the report timestamp."""
    if why == "slow-node" and plan is not None:
        text = f"slow node, {_seen_with(plan, host)}"
        if floor_gbps is not None:
            text += f" < {float(floor_gbps):g} GB/s floor"
    else:
        text = why
    if stamp:
        text += f" (report {stamp})"
    return f"{DRAIN_REASON_PREFIX}: {text}"


def _single_failure(record: dict) -> str | None:
    errors = [v for v in record.get("violations") or [] if v.get("severity") == "error"]
    if not errors:
        return None
    # The GPU diagnostics' failures say which GPU failed which test (acceptance/dcgm_diag.py).
    diag = [v for v in errors if str(v.get("code") or "").startswith("DCGM_DIAG_")]
    said = []
    if len(diag) < len(errors):
        said.append(_single_run_failure(record, [v for v in errors if v not in diag]))
    if diag:
        said.append(dcgm_diag.drain_reason(record.get("dcgm_diag")) or "GPU diagnostics failed")
    return "; ".join(said)


def _single_run_failure(record: dict, errors: list[dict]) -> str:
    codes = sorted({v.get("code") for v in errors})
    # A run of all_gather / alltoall (acceptance/collectives.py) names its collective.
    what = f"single-node {record['collective']}" if record.get("collective") else "single-node"
    busbw, floor = record.get("busbw"), record.get("floor_gbps")
    ended = record.get("ended") or {}
    if ended.get("status") not in (None, COMPLETED, NO_TABLE):
        said = f"{what} run {ended['status']}"
        if ended.get("failure"):
            said += f": {ended['failure'][:80]}"
        elif ended.get("rc"):
            said += f" (exit {ended['rc']})"
        return said
    if codes == [acc.NCCL_BUSBW_BELOW_FLOOR] and busbw is not None and floor is not None:
        return f"{what} {float(busbw):.1f} GB/s < {float(floor):g} GB/s floor"
    return f"{what} run failed: " + ", ".join(c for c in codes if c)


def drain_list(
    plans: Iterable[dict], singles: Iterable[dict] = (), *, stamp: str | None = None, failed_single: bool = True
) -> list[dict]:
    """``[{"host", "reason"}]``: the slow nodes of each finished bisect plan (its ``floor``) and,
    with ``failed_single``, the nodes whose single-node record has an error violation."""
    found: dict[str, list[str]] = {}
    for plan in plans or []:
        if not isinstance(plan, dict):
            continue
        for node in plan.get("slow_nodes") or []:
            text = drain_reason(node, "slow-node", plan, plan.get("floor")).split(": ", 1)[1]
            found.setdefault(node, []).append(text)
    if failed_single:
        for record in singles or []:
            if not isinstance(record, dict) or not record.get("host"):
                continue
            why = _single_failure(record)
            if why:
                found.setdefault(record["host"], []).append(why)
    out = []
    for host, reasons in found.items():
        text = "; ".join(dict.fromkeys(reasons))
        out.append({"host": host, "reason": drain_reason(host, text, stamp=stamp)})
    return out


# --- per node --------------------------------------------------------------------------


def node_record(
    hw, host: str, *, hostname: str | None = None, pool: str | None = None, container_image: str = ""
) -> dict:
    """What the report shows of one node, from its ``gpufleet_hw`` fact (``gpu_facts``).

    ``versions`` is what the report's node table prints (one column per key, the brief's pins
    beside it): the GPUs, driver, CUDA, NCCL, OFED (DOCA-OFED, MLNX_OFED or inbox rdma-core),
    container toolkit, the container image the runs used, the kernel.
    """
    hw = hw if isinstance(hw, dict) else {}
    gpus = hw.get("gpus") or []
    versions = hw.get("versions") or {}
    names = sorted({str(g.get("name")) for g in gpus if g.get("name")})
    if versions.get("doca_ofed"):
        ofed = f"DOCA-OFED {versions['doca_ofed']}"
    elif versions.get("ofed"):
        ofed = str(versions["ofed"])
    elif versions.get("rdma_core"):
        ofed = f"rdma-core {versions['rdma_core']} (inbox)"
    else:
        ofed = None
    return {
        "host": host,
        "hostname": hostname or host,
        "pool": pool,
        "gpu_model": names[0] if len(names) == 1 else (", ".join(names) or None),
        "gpu_count": len(gpus),
        "gpu_uuids": [g.get("uuid") for g in gpus if g.get("uuid")],
        "versions": {
            "gpus": f"{len(gpus)}x {names[0]}" if len(names) == 1 else (", ".join(names) or None),
            "driver": versions.get("driver"),
            "cuda": versions.get("cuda"),
            "nccl": versions.get("nccl"),
            "ofed": ofed,
            "container_toolkit": versions.get("container_toolkit"),
            "container_image": container_image or None,
            "kernel": versions.get("kernel") or hw.get("kernel"),
        },
        "sources": hw.get("sources") or {},
    }


__all__ = [
    "DRAIN_REASON_PREFIX",
    "LAUNCHERS",
    "SCOPES",
    "SpecError",
    "acceptance_spec",
    "bisect_step",
    "drain_list",
    "drain_reason",
    "evaluate_log",
    "launch_argv",
    "node_record",
    "parse_log",
    "perf_args",
    "run_end",
    "run_records",
]
