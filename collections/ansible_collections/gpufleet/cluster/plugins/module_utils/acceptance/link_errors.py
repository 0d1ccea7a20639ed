# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Link error counters of a node's RDMA ports, read before and after the NCCL runs.

A cable or transceiver that corrupts symbols, retrains or drops its link can still carry an
all_reduce above its floor: the link layer retransmits, the busbw dips a little. Its port's error
counters say so. The acceptance reads them on every GPU node before its first NCCL run and again
after its last, and a counter that grew more than the brief tolerates names the node, the device
and the port (``LINK_ERRORS_GREW``).

Where the counters are (the kernel's sysfs ABI, Documentation/ABI/stable/sysfs-class-infiniband,
https://www.kernel.org/doc/Documentation/ABI/stable/sysfs-class-infiniband): one read-only file
per counter in ``/sys/class/infiniband/<device>/ports/<port>/counters/``, each holding a decimal
number (``symbol_error``: minor link errors detected on a physical lane; ``link_error_recovery``:
successful link retrainings; ``link_downed``: link error recoveries that failed and downed the
link; ``port_rcv_errors``; ``port_rcv_remote_physical_errors``: packets marked bad (EBP) by the
far end; ``local_link_integrity_errors``; ``excessive_buffer_overrun_errors``;
``port_xmit_discards``). RoCE ports of mlx5 adapters have the same directory (NVIDIA's MLNX_EN
documentation, "RoCE Counters": https://docs.nvidia.com/networking/display/mlnxenv23102131201lts/Ethernet+Interface).
Their ``hw_counters/`` directory holds the driver's queue and transport counters
(``out_of_buffer``, ``local_ack_timeout_err``, ``packet_seq_err``... drivers/infiniband/hw/mlx5/counters.c):
those grow on a healthy port under load and are not judged here.

These counters are the InfiniBand PortCounters attribute, whose fields are narrow and **saturate**
(stop at all ones, they do not wrap): ``struct ib_pma_portcounters`` in the kernel's
include/rdma/ib_pma.h gives 16 bits to symbol_error, port_rcv_errors, port_rcv_remote_physical_errors
and port_xmit_discards, 8 to link_error_recovery and link_downed, 4 each to
local_link_integrity_errors and excessive_buffer_overrun_errors (:data:`WIDTHS`). Hence:

* a counter that went **down** between the reads was reset (a reboot, a driver reload,
  ``perfquery -R``): its growth is unknown, never negative. What it reads after is what it counted
  since the reset, all of it during the acceptance: a lower bound, judged as such;
* a counter **at its maximum** before the acceptance cannot count any more (``saturated``): its
  growth is unknown and the port is named (clear it with ``perfquery -R``);
* a counter file that is **missing** (a driver that does not expose it) or unreadable is named;
  a port with none of the judged counters readable, or an expected port absent, is
  ``LINK_ERRORS_NOT_READ``: never a silent pass.

The thresholds are the brief's ``acceptance.link_errors.max_growth`` (:data:`DEFAULT_MAX_GROWTH`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import WARNING, violation
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.gate import fabric_ports

FIELD = "acceptance.link_errors"

# Width in bits of each counter (include/rdma/ib_pma.h, struct ib_pma_portcounters): a counter at
# 2**width - 1 is saturated. A counter not listed is taken as 64-bit (never saturated in practice).
WIDTHS = {
    "symbol_error": 16,
    "link_error_recovery": 8,
    "link_downed": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "port_rcv_switch_relay_errors": 16,
    "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8,
    "port_rcv_constraint_errors": 8,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
    "VL15_dropped": 16,
}

# The growth tolerated during one acceptance, per counter. infiniband-diags' ibqueryerrors reports a
# port counter above zero by default (its man page: "The default threshold is zero (0)"): the
# same here for every counter that means a link fault, with two of ours:
# - symbol_error 10: ours. A lane within its bit-error-rate specification can log a few symbol errors
#   over an acceptance of many terabytes; a bad cable or transceiver logs hundreds to thousands.
# - port_xmit_discards 100: ours. A port discards packets it could not send in time when the fabric
#   is congested (the head-of-queue lifetime), which an all-node all_reduce can cause on a healthy link.
DEFAULT_MAX_GROWTH = {
    "symbol_error": 10,
    "link_error_recovery": 0,
    "link_downed": 0,
    "port_rcv_errors": 0,
    "port_rcv_remote_physical_errors": 0,
    "local_link_integrity_errors": 0,
    "excessive_buffer_overrun_errors": 0,
    "port_xmit_discards": 100,
}
COUNTERS = tuple(DEFAULT_MAX_GROWTH)
DEFAULTS = {"enabled": True, "max_growth": {}}

# Link layer of the brief's fabric types (the hardware gate's mapping).
_LAYER_FOR_FABRIC = {"infiniband": "InfiniBand", "roce": "Ethernet"}

# Port statuses of a record.
MEASURED = "measured"
NOT_READ = "not read"
NOT_APPLICABLE = "not applicable"


class LinkErrorsError(ValueError):
    """A read result that is not what the reader returns."""


def settings(brief: Mapping | None) -> dict:
    """The brief's ``acceptance.link_errors`` with its defaults; ``max_growth`` complete."""
    given = ((brief or {}).get("acceptance") or {}).get("link_errors") or {}
    if not isinstance(given, Mapping):
        raise LinkErrorsError(f"{FIELD}: expected a mapping, found {type(given).__name__} {given!r}")
    out = {**DEFAULTS, **given}
    out["max_growth"] = {**DEFAULT_MAX_GROWTH, **(given.get("max_growth") or {})}
    return out


def saturation(counter: str) -> int:
    """The value at which the counter stops counting."""
    return (1 << WIDTHS.get(counter, 64)) - 1


# --- reading (runs on the node, from the link_counters module) ----------------------------------


def _read_value(path: str) -> tuple[int | None, str | None]:
    """(value, None), or (None, why) for a missing, unreadable or non-numeric file."""
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            text = fh.read().strip()
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        # Some drivers answer a read of a counter they do not support with EINVAL or EOPNOTSUPP.
        return None, f"unreadable ({exc.strerror or exc})"
    if not text.isdigit():
        return None, f"not a number ({text[:40]!r})"
    return int(text), None


def read_ports(sysfs_root: str, counters=COUNTERS) -> dict:
    """Every RDMA port under ``<sysfs_root>/class/infiniband`` and its counters, as read now.

    ``{"root": <dir>, "present": bool, "ports": [{"device", "port", "link_layer", "state",
    "counters": {name: int}, "missing": {name: why}}]}``. Reads only; never raises for what it
    cannot read (that is in ``missing``)."""
    base = os.path.join(sysfs_root, "class", "infiniband")
    out = {"root": base, "present": os.path.isdir(base), "ports": []}
    if not out["present"]:
        return out
    for dev in sorted(os.listdir(base)):
        pdir = os.path.join(base, dev, "ports")
        try:
            numbers = sorted(os.listdir(pdir), key=lambda p: (not p.isdigit(), int(p) if p.isdigit() else 0, p))
        except OSError:
            continue
        for num in numbers:
            port = os.path.join(pdir, num)
            entry = {"device": dev, "port": num, "counters": {}, "missing": {}}
            for name in ("link_layer", "state"):
                value = None
                try:
                    with open(os.path.join(port, name), encoding="ascii", errors="replace") as fh:
                        value = fh.read().strip()
                except OSError:
                    pass
                entry[name] = value
            cdir = os.path.join(port, "counters")
            if not os.path.isdir(cdir):
                entry["missing"] = dict.fromkeys(counters, "no counters/ directory")
            else:
                for name in counters:
                    value, why = _read_value(os.path.join(cdir, name))
                    if why is None:
                        entry["counters"][name] = value
                    else:
                        entry["missing"][name] = why
            out["ports"].append(entry)
    return out


# --- judging (on the controller) -----------------------------------------------------------------


def expected_ports(ports: list[dict], pool: Mapping, brief: Mapping) -> tuple[list[dict], int, str | None]:
    """(the ports that carry the pool's fabric, how many the brief expects, the fabric's link layer).

    The same choice as the hardware gate (hw/gate.py fabric_ports): ``pool.rdma_devices`` globs when
    given; else, bonded devices left out, the ports of the fabric's link layer when exactly
    ``nics_per_node`` of them have it; else every non-bonded port."""
    fabric = ((brief or {}).get("networks") or {}).get("fabric") or {}
    layer = _LAYER_FOR_FABRIC.get(str(fabric.get("type") or "none").lower())
    wanted = int(pool.get("nics_per_node") or 0) if layer else 0
    if not wanted:
        return [], 0, layer
    return fabric_ports(list(ports), dict(pool), layer), wanted, layer


def compare(counter: str, before: int | None, after: int | None, threshold: int) -> dict:
    """One counter's before -> after, judged: ``{counter, before, after, growth, threshold, status}``.

    ``status``: ``ok``; ``grew`` (growth above the threshold); ``reset`` (went down: growth unknown,
    ``growth`` is the lower bound ``after``, judged like a growth); ``saturated`` (at its maximum
    before: it cannot count); ``missing`` (not read before or after)."""
    out = {"counter": counter, "before": before, "after": after, "growth": None, "threshold": threshold}
    if before is None or after is None:
        return {**out, "status": "missing"}
    top = saturation(counter)
    if after < before:
        # Reset between the reads: what it counted since is the least it grew.
        return {**out, "growth": after, "status": "grew" if after > threshold else "reset", "reset": True}
    growth = after - before
    if growth > threshold:
        return {**out, "growth": growth, "status": "grew", "saturated": after >= top}
    if before >= top:
        return {**out, "growth": None, "status": "saturated"}
    return {**out, "growth": growth, "status": "ok"}


def _port_label(p: Mapping) -> str:
    return f"{p.get('device')} port {p.get('port')}"


def _reading(result) -> tuple[dict | None, str | None]:
    """(the reader's result, None) or (None, why it is unusable)."""
    if not isinstance(result, Mapping) or not result:
        return None, "not read (the task did not run on this node)"
    if result.get("unreachable"):
        return None, f"unreachable: {str(result.get('msg') or '')[:200]}"
    if result.get("failed") or result.get("skipped"):
        why = result.get("msg") or ("skipped" if result.get("skipped") else "failed")
        return None, str(why)[:300]
    if not isinstance(result.get("ports"), list):
        return None, "the result has no ports (not link_counters' output)"
    return dict(result), None


def judge(host: str, before, after, *, pool: Mapping | None, brief: Mapping | None) -> dict:
    """One node's link-error record and violations: ``{"record": {...}, "violations": [...]}``. Pure.

    ``before`` / ``after``: the link_counters results (registered) of the two reads.
    ``record.status``: ``measured``, ``not read`` (a read failed or an expected port had no
    counters: ``LINK_ERRORS_NOT_READ``) or ``not applicable`` (no RDMA fabric or no NIC expected)."""
    rule = settings(brief)
    pool = pool or {}
    thresholds = {k: int(v) for k, v in rule["max_growth"].items()}
    record: dict = {"host": host, "pool": pool.get("name"), "ports": [], "thresholds": thresholds}
    found: list[dict] = []

    def not_read(why: str, field: str = FIELD) -> dict:
        record.update(status=NOT_READ, reason=why)
        found.append(
            violation(
                "LINK_ERRORS_NOT_READ",
                field,
                f"{why}: the link error counters of this node could not be compared, so its links are not "
                "known to be clean. Check /sys/class/infiniband/<device>/ports/<port>/counters/ on the node",
                host=host,
            )
        )
        return {"record": record, "violations": found}

    fabric = ((brief or {}).get("networks") or {}).get("fabric") or {}
    layer = _LAYER_FOR_FABRIC.get(str(fabric.get("type") or "none").lower())
    if not layer or not int(pool.get("nics_per_node") or 0):
        record.update(
            status=NOT_APPLICABLE, reason="no RDMA fabric port expected (networks.fabric, pool.nics_per_node)"
        )
        return {"record": record, "violations": found}
    first, why_first = _reading(before)
    last, why_last = _reading(after)
    if first is None:
        return not_read(f"before the NCCL runs: {why_first}")
    if last is None:
        return not_read(f"after the NCCL runs: {why_last}")
    record["sysfs"] = last.get("root") or first.get("root")
    if not first.get("present") or not last.get("present"):
        return not_read(f"no {record['sysfs'] or 'class/infiniband'} directory")
    ports_before, wanted, _ = expected_ports(first["ports"], pool, brief or {})
    ports_after, _, _ = expected_ports(last["ports"], pool, brief or {})
    after_by = {(p["device"], str(p["port"])): p for p in ports_after}
    before_by = {(p["device"], str(p["port"])): p for p in ports_before}
    keys = sorted(set(before_by) | set(after_by))
    unread: list[str] = []
    for key in keys:
        b, a = before_by.get(key), after_by.get(key)
        label = f"{key[0]} port {key[1]}"
        port = {"device": key[0], "port": key[1], "link_layer": (a or b or {}).get("link_layer"), "counters": []}
        record["ports"].append(port)
        if b is None or a is None:
            port["status"] = NOT_READ
            unread.append(f"{label} ({'absent before' if b is None else 'gone after'} the NCCL runs)")
            continue
        rows = [compare(c, b["counters"].get(c), a["counters"].get(c), t) for c, t in thresholds.items()]
        port["counters"] = rows
        missing = [r["counter"] for r in rows if r["status"] == "missing"]
        if len(missing) == len(rows):
            port["status"] = NOT_READ
            why = (a.get("missing") or b.get("missing") or {}).get(missing[0], "missing")
            unread.append(f"{label} (no counter readable: {why})")
            continue
        port["status"] = MEASURED
        if missing:
            whys = {**(b.get("missing") or {}), **(a.get("missing") or {})}
            found.append(
                violation(
                    "LINK_ERRORS_COUNTER_MISSING",
                    f"{FIELD}.max_growth",
                    f"{label}: counter(s) not read ({', '.join(m + ': ' + whys.get(m, 'missing') for m in missing)}); "
                    "the others were compared. Its driver may not expose them",
                    host=host,
                    severity=WARNING,
                )
            )
        for r in rows:
            if r["status"] == "grew":
                how = (
                    f"{r['before']} -> {r['after']} (reset during the acceptance: at least {r['growth']} since)"
                    if r.get("reset")
                    else f"{r['before']} -> {r['after']} (+{r['growth']}"
                    + (f", now at its maximum {saturation(r['counter'])}" if r.get("saturated") else "")
                    + ")"
                )
                found.append(
                    violation(
                        "LINK_ERRORS_GREW",
                        f"{FIELD}.max_growth.{r['counter']}",
                        f"{label} {r['counter']} {how} during the acceptance, tolerated +{r['threshold']}: a bad "
                        "link (cable, transceiver or the switch port). Check it with mlxlink -d "
                        f"{key[0]} -c and the switch side, reseat or replace it",
                        host=host,
                    )
                )
            elif r["status"] == "reset":
                found.append(
                    violation(
                        "LINK_ERRORS_RESET",
                        f"{FIELD}.max_growth.{r['counter']}",
                        f"{label} {r['counter']} went down {r['before']} -> {r['after']} during the acceptance "
                        "(reset: a reboot, a driver reload or perfquery -R): its growth is not known, at least "
                        f"{r['after']}, within the tolerated +{r['threshold']}",
                        host=host,
                        severity=WARNING,
                    )
                )
            elif r["status"] == "saturated":
                found.append(
                    violation(
                        "LINK_ERRORS_SATURATED",
                        f"{FIELD}.max_growth.{r['counter']}",
                        f"{label} {r['counter']} was at its maximum {saturation(r['counter'])} before the "
                        "acceptance and cannot count: its growth is not known. Clear the port's counters "
                        f"(perfquery -R -C {key[0]} -P {key[1]}) and accept the node again",
                        host=host,
                        severity=WARNING,
                    )
                )
    if len(keys) < wanted:
        unread.append(
            f"{wanted - len(keys)} of the {wanted} fabric port(s) the brief expects (pool.nics_per_node) not found"
        )
    if unread:
        record["status"] = NOT_READ
        record["reason"] = "; ".join(unread)
        found.append(
            violation(
                "LINK_ERRORS_NOT_READ",
                FIELD,
                f"{'; '.join(unread)}: those ports' links are not known to be clean. Check "
                "/sys/class/infiniband/<device>/ports/<port>/counters/ on the node",
                host=host,
            )
        )
    else:
        record["status"] = MEASURED
    record["grew"] = [
        {"device": p["device"], "port": p["port"], **r}
        for p in record["ports"]
        for r in p["counters"]
        if r["status"] == "grew"
    ]
    return {"record": record, "violations": found}


def drain_entries(records, *, stamp: str | None = None) -> list[dict]:
    """``[{"host", "why"}]``: the nodes whose port counters grew, the why short for ``sinfo -R``."""
    out = []
    for rec in records or []:
        if not isinstance(rec, Mapping) or not rec.get("grew"):
            continue
        first = rec["grew"][0]
        more = f" and {len(rec['grew']) - 1} more" if len(rec["grew"]) > 1 else ""
        out.append(
            {
                "host": rec["host"],
                "why": f"link errors: {first['device']} port {first['port']} {first['counter']} "
                f"{first['before']}->{first['after']} (max +{first['threshold']}){more}",
            }
        )
    return out


def history_summary(record: Mapping | None) -> str | None:
    """One node's link errors in a word or a few, for its history (``gpufleet report history NODE``) and
    the CLI's summary: ``clean (8 ports)``, ``mlx5_2:1 symbol_error +40, link_downed +1``, ``not read``."""
    if not isinstance(record, Mapping) or not record.get("status"):
        return None
    if record["status"] == NOT_APPLICABLE:
        return None
    grew = record.get("grew") or []
    if grew:
        shown: dict[str, list[str]] = {}
        for g in grew:
            shown.setdefault(f"{g['device']}:{g['port']}", []).append(f"{g['counter']} +{g['growth']}")
        return "; ".join(f"{port} {', '.join(items)}" for port, items in shown.items())
    if record["status"] == MEASURED:
        return f"clean ({sum(1 for p in record.get('ports') or [] if p.get('status') == MEASURED)} ports)"
    return str(record["status"])


def render_markdown(report: Mapping) -> list[str]:
    """The report's "Link error counters" section; nothing when the gate did not run."""
    records = report.get("link_errors") or []
    if not records:
        return []
    out = [
        "## Link error counters",
        "",
        "Each node's fabric ports read before the first NCCL run and after the last "
        "(/sys/class/infiniband/<device>/ports/<port>/counters/); growth above the brief's "
        "acceptance.link_errors.max_growth is LINK_ERRORS_GREW.",
        "",
    ]
    rows = []
    for rec in records:
        ports = rec.get("ports") or []
        grew = rec.get("grew") or []
        odd = [
            f"{p['device']}:{p['port']} {r['counter']} {r['status']}"
            for p in ports
            for r in p.get("counters") or []
            if r["status"] in ("reset", "saturated", "missing")
        ]
        rows.append(
            [
                rec.get("host"),
                rec.get("status") + (f": {rec['reason']}" if rec.get("reason") else ""),
                sum(1 for p in ports if p.get("status") == MEASURED),
                ", ".join(
                    f"{g['device']}:{g['port']} {g['counter']} {g['before']}->{g['after']} (max +{g['threshold']})"
                    for g in grew
                )
                or ("none" if rec.get("status") == MEASURED else None),
                ", ".join(odd[:6]) + (f" and {len(odd) - 6} more" if len(odd) > 6 else "") or None,
            ]
        )
    header = ["host", "status", "ports read", "grew", "reset / saturated / missing"]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    for row in rows:
        out.append("| " + " | ".join("" if c is None else str(c).replace("|", "\\|") for c in row) + " |")
    out.append("")
    return out
