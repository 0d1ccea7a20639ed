# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""NVIDIA's XIDs (and the GPU memory and recovery events beside them) mapped to what an operator does.

One table, read by everything in gpufleet that meets an XID: the Slurm node health check (its drain
list and the words of its drain reason are rendered from here by the ``xid_drain_reasons`` filter),
the hardware gate (``GPU_XID`` / ``GPU_MEMORY`` violations from the facts module's kernel log and
``nvidia-smi -q``), and the drift report (the GPU errors of each node since its boot).
docs/xid-catalogue.md is generated from it (scripts/gen_xid_catalogue_doc).

Each entry says:

* ``action``: the least an operator must do before the GPU takes work again, one of ``ACTIONS``
  (ordered from mild to severe):

  ``none``       the application's fault or an informational event: the node stays in service
  ``drain``      take the node out of service and look (NVIDIA does not expect it on these GPUs,
                 or asks to check power and cooling)
  ``reset_gpu``  drain, then reset the GPU (``nvidia-smi -r``) or reboot the node
  ``reboot``     drain, then reboot the node (the GPU cannot be reset in place)
  ``replace``    drain and open an RMA: the part is worn out

* ``nvidia``: NVIDIA's own words for it: the "Resolution Bucket (Immediate Action)" column of the
  XID catalogue (``RESET_GPU``, ``RESTART_BM`` = reboot the bare-metal node, ``RESTART_APP``,
  ``IGNORE``, ``WORKFLOW_*`` = follow the named workflow, ``UNEXPECTED_ERR_REPORT_ISSUE``), or the
  NVML field / flag for the non-XID events.
* ``source``: a key of ``SOURCES``, the document the row was checked against; ``confirmed`` is
  False where NVIDIA's documents disagree or the row rests on our reading, and ``note`` says why.

How NVIDIA's buckets become actions: ``RESTART_APP`` and ``IGNORE`` are ``none`` (the job dies or
nothing happens; the node is fine); ``RESET_GPU`` and the ECC (``WORKFLOW_XID_48``) and NVLink
(``WORKFLOW_NVLINK_ERR``, ``WORKFLOW_NVLINK5_ERR``) workflows, which end in a GPU reset, are
``reset_gpu``; ``RESTART_BM`` is ``reboot``; ``UNEXPECTED_ERR_REPORT_ISSUE`` and
``CHECK_MECHANICALS`` are ``drain``.

Xid 154 ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)") carries the
driver's own recovery action in its text: ``parse_kernel_log`` reads it, and the line's action is the
more severe of the row's and the text's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, violation

ACTIONS = ("none", "drain", "reset_gpu", "reboot", "replace")
_RANK = {a: i for i, a in enumerate(ACTIONS)}

# What each action asks of the operator, as drain reasons and violation messages say it.
ACTION_TODO = {
    "none": "nothing on the node (an application's fault or an informational event)",
    "drain": "drain the node and look into it (NVIDIA does not expect this event on a healthy GPU)",
    "reset_gpu": "drain the node, then reset the GPU (`nvidia-smi -r -i <bus id>`) or reboot",
    "reboot": "drain the node and reboot it (the GPU cannot be reset in place)",
    "replace": "drain the node and open an RMA for the GPU",
}

# The documents the rows were checked against.
SOURCES = {
    # NVIDIA's XID catalogue for Ampere and newer GPUs, "Resolution Bucket (Immediate Action)".
    "xid-catalog": "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html",
    # The same catalogue as NVIDIA ships it as data in NVSentinel (code, mnemonic, immediate action,
    # fatal or not); read for the rows whose part of the web page could not be displayed here.
    "nvsentinel": (
        "https://github.com/NVIDIA/NVSentinel/blob/6f8b0fcfa8e502bdda78fabf96facef729a9285b/"
        "distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv"
    ),
    # NVIDIA GPU memory error management: which XIDs report ECC and row-remapping events.
    "mem-errors": "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/user-visible-statistics.html",
    # The row-remapping pending / failure flags and NVML's recovery actions (none, reset, reboot, drain P2P).
    "recovery-flags": "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/error-recovery-and-response-flags.html",
    # Row remapping takes effect at the next GPU reset.
    "row-remap": "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/row-remapping.html",
}


@dataclass(frozen=True)
class Entry:
    key: str  # the XID code as text ("79"), or the name of a non-XID event ("row_remap_failure")
    name: str  # NVIDIA's mnemonic, or the nvidia-smi / NVML field the event is read from
    meaning: str  # one line, as a drain reason names it
    action: str
    nvidia: str  # NVIDIA's immediate action or flag, verbatim
    source: str
    confirmed: bool = True
    note: str = ""

    @property
    def is_xid(self) -> bool:
        return self.key.isdigit()


def _xid(code, name, meaning, action, nvidia, source="nvsentinel", confirmed=True, note=""):
    return Entry(str(code), name, meaning, action, nvidia, source, confirmed, note)


# XIDs: NVIDIA's catalogue rows for the codes a data-centre GPU logs. Codes NVIDIA marks unused on
# A100 / H100 / B100 / GB200 are left out; an XID not listed here is reported as unknown (action
# drain: look it up before the node takes work again).
_XIDS = (
    # Application faults and their teardown: RESTART_APP / IGNORE / WORKFLOW_XID_45.
    _xid(
        8,
        "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT",
        "GPU stopped processing (application)",
        "none",
        "RESTART_APP",
        "xid-catalog",
    ),
    _xid(
        13,
        "ROBUST_CHANNEL_GR_EXCEPTION",
        "graphics engine exception (application)",
        "none",
        "RESTART_APP",
        "xid-catalog",
    ),
    _xid(31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault (application)", "none", "RESTART_APP"),
    _xid(32, "ROBUST_CHANNEL_PBDMA_ERROR", "invalid or corrupted push buffer stream", "none", "RESTART_APP"),
    _xid(
        43,
        "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
        "GPU stopped processing (application's channel reset)",
        "none",
        "IGNORE",
    ),
    _xid(
        45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "channels torn down after an earlier error", "none", "WORKFLOW_XID_45"
    ),
    _xid(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "graphics engine class error (application)", "none", "RESTART_APP"),
    _xid(
        94, "ROBUST_CHANNEL_CONTAINED_ERROR", "contained memory error (the job that met it dies)", "none", "RESTART_APP"
    ),
    # Memory events the GPU handled itself: IGNORE.
    _xid(
        63, "INFOROM_DRAM_RETIREMENT_EVENT", "row remapping recorded (applied at the next GPU reset)", "none", "IGNORE"
    ),
    _xid(92, "EXCESSIVE_SBE_INTERRUPTS", "high single-bit (corrected) ECC error rate", "none", "IGNORE"),
    _xid(121, "C2C_ERROR", "C2C link corrected error", "none", "IGNORE"),
    # The driver's recovery action changed: it follows another XID (the line's text names the action).
    _xid(
        154,
        "GPU_RECOVERY_ACTION_CHANGED",
        "recovery action changed (follows another XID)",
        "none",
        "follow the other XID's guidance",
    ),
    # Not expected on these GPUs, or power / cooling: UNEXPECTED_ERR_REPORT_ISSUE / CHECK_MECHANICALS.
    _xid(
        54,
        "SILENT_RUNNING_PWR_REDUCED_CLOCKING",
        "clocks reduced for power (check power and cooling)",
        "drain",
        "CHECK_MECHANICALS",
    ),
    _xid(61, "PMU_BREAKPOINT", "internal micro-controller breakpoint", "drain", "UNEXPECTED_ERR_REPORT_ISSUE"),
    # GPU faults that need a reset: RESET_GPU and the ECC / NVLink workflows.
    _xid(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "reset_gpu", "RESET_GPU"),
    _xid(48, "ROBUST_CHANNEL_GPU_ECC_DBE", "double-bit ECC error", "reset_gpu", "WORKFLOW_XID_48"),
    _xid(62, "PMU_HALT_ERROR", "internal micro-controller halt", "reset_gpu", "RESET_GPU"),
    _xid(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "reset_gpu", "RESET_GPU"),
    _xid(74, "NVLINK_ERROR", "NVLink error", "reset_gpu", "WORKFLOW_NVLINK_ERR"),
    _xid(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "uncontained memory error", "reset_gpu", "RESET_GPU"),
    _xid(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "context switch timeout", "reset_gpu", "RESET_GPU"),
    _xid(110, "SEC_FAULT_ERROR", "security fault", "reset_gpu", "RESET_GPU"),
    _xid(119, "GSP_RPC_TIMEOUT", "GSP RPC timeout", "reset_gpu", "RESET_GPU"),
    _xid(120, "GSP_ERROR", "GSP error", "reset_gpu", "RESET_GPU"),
    _xid(136, "ALI_TRAINING_FAIL", "NVLink training failed", "reset_gpu", "RESET_GPU"),
    _xid(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "unrecovered ECC error", "reset_gpu", "RESET_GPU"),
    _xid(143, "GPU_INIT_ERROR", "GPU initialization error", "reset_gpu", "RESET_GPU"),
    _xid(144, "NVLINK_SAW_ERROR", "NVLink SAW error", "reset_gpu", "WORKFLOW_NVLINK5_ERR"),
    _xid(145, "NVLINK_RLW_ERROR", "NVLink RLW error", "reset_gpu", "WORKFLOW_NVLINK5_ERR"),
    _xid(146, "NVLINK_TLW_ERROR", "NVLink TLW error", "reset_gpu", "WORKFLOW_NVLINK5_ERR"),
    _xid(147, "NVLINK_TREX_ERROR", "NVLink TREX error", "reset_gpu", "WORKFLOW_NVLINK5_ERR"),
    _xid(148, "NVLINK_NVLPW_CTRL_ERROR", "NVLink NVLPW_CTRL error", "reset_gpu", "WORKFLOW_NVLINK5_ERR"),
    _xid(149, "NVLINK_NETIR_ERROR", "NVLink NETIR error", "reset_gpu", "WORKFLOW_NVLINK5_ERR"),
    _xid(150, "NVLINK_MSE_ERROR", "NVLink MSE error", "reset_gpu", "WORKFLOW_NVLINK5_ERR"),
    _xid(155, "NVLINK_SW_DEFINED_ERROR", "NVLink SW defined error", "reset_gpu", "RESET_GPU"),
    _xid(156, "RESOURCE_RETIREMENT_EVENT", "resource retirement event", "reset_gpu", "RESET_GPU"),
    _xid(158, "GPU_FATAL_TIMEOUT", "GPU fatal timeout", "reset_gpu", "RESET_GPU"),
    # The node must reboot: RESTART_BM.
    _xid(79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "reboot", "RESTART_BM"),
    _xid(
        160,
        "CHANNEL_RETIREMENT_EVENT",
        "GPU memory marked for repair",
        "reboot",
        "RESTART_BM",
        "nvsentinel",
        confirmed=False,
        note="NVSentinel's data names it CHANNEL_RETIREMENT_EVENT; the memory error page says memory marked for repair",
    ),
)

# Events read from nvidia-smi -q (NVML), not from the kernel log.
_EVENTS = (
    Entry(
        "row_remap_pending",
        "Remapped Rows / Pending",
        "row remapping pending (applied at the next GPU reset)",
        "reset_gpu",
        "row-remapping pending flag",
        "recovery-flags",
        note="NVIDIA: work continues meanwhile; gpufleet accepts a GPU only with no remap pending",
    ),
    Entry(
        "row_remap_failure",
        "Remapped Rows / Remapping Failure Occurred",
        "row remapping failed",
        "replace",
        "row-remapping failure flag (RMA policy thresholds)",
        "recovery-flags",
    ),
    Entry(
        "ecc_uncorrectable",
        "ECC Errors / Volatile / DRAM and SRAM Uncorrectable",
        "uncorrectable ECC errors since the last GPU reset",
        "reset_gpu",
        "volatile uncorrectable ECC count",
        "mem-errors",
        confirmed=False,
        note="gpufleet's reading: NVIDIA routes uncorrectable errors to row remapping, which needs a reset",
    ),
    Entry(
        "recovery_reset",
        "GPU recovery action: GPU Reset Required",
        "the driver asks for a GPU reset",
        "reset_gpu",
        "NVML_GPU_RECOVERY_ACTION_GPU_RESET",
        "recovery-flags",
    ),
    Entry(
        "recovery_reboot",
        "GPU recovery action: Node Reboot Required",
        "the driver asks for a node reboot",
        "reboot",
        "NVML_GPU_RECOVERY_ACTION_NODE_REBOOT",
        "recovery-flags",
    ),
    Entry(
        "recovery_drain_p2p",
        "GPU recovery action: Drain P2P",
        "the driver asks to quiesce peer-to-peer traffic",
        "drain",
        "NVML_GPU_RECOVERY_ACTION_DRAIN_P2P",
        "recovery-flags",
    ),
)

CATALOGUE: dict[str, Entry] = {e.key: e for e in (*_XIDS, *_EVENTS)}

# Xid 154's text: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)".
_RECOVERY_TO_RE = re.compile(r"recovery action changed from .*? to (0x[0-9A-Fa-f]+)\s*\(([^)]*)\)")
_RECOVERY_EVENT = {1: "recovery_reset", 2: "recovery_reboot", 3: "recovery_drain_p2p"}

# "NVRM: Xid (PCI:0000:1b:00): 79, pid=51377, name=python3, GPU has fallen off the bus."
# Variants: no "PCI:" (older drivers), " GPU-I:05" after the address (a MIG instance), a function.
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"
    r"(?: GPU-I:(?P<gi>\d+))?\): (?P<code>\d+)(?:,\s*(?P<text>.*))?$"
)
# journalctl -o short-iso-precise / dmesg --time-format=iso stamps at the start of a line.
_STAMP_RE = re.compile(r"^(\d{4}-\d\d-\d\dT[0-9:.,]+(?:[+-]\d\d:?\d\d|Z)?)\s")


class CatalogueError(ValueError):
    """A caller asked for an action or a key the catalogue does not have."""


def entry(key: object) -> Entry | None:
    return CATALOGUE.get(str(key).strip())


def xids() -> list[Entry]:
    return sorted((e for e in CATALOGUE.values() if e.is_xid), key=lambda e: int(e.key))


def events() -> list[Entry]:
    return [e for e in CATALOGUE.values() if not e.is_xid]


def severer(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


def check_actions(actions: object, field: str = "actions") -> list[str]:
    """The actions as a list, each one of ``ACTIONS``; raises CatalogueError naming the bad one."""
    if isinstance(actions, str):
        actions = [actions]
    if not isinstance(actions, (list, tuple)):
        raise CatalogueError(f"{field}: expected a list of actions from {list(ACTIONS)}, found {actions!r}")
    bad = [a for a in actions if a not in ACTIONS]
    if bad:
        raise CatalogueError(f"{field}: expected actions from {list(ACTIONS)}, found {bad!r}")
    return list(actions)


def drain_reasons(actions: object = ("drain", "reset_gpu", "reboot", "replace")) -> dict[int, str]:
    """XID code -> the words of a drain reason ("GPU has fallen off the bus; action: reboot").

    Every XID whose action is one of ``actions``; what the Slurm health check renders as its list.
    """
    wanted = set(check_actions(actions))
    return {int(e.key): f"{e.meaning}; action: {e.action}" for e in xids() if e.action in wanted}


def parse_kernel_log(text: str | None) -> list[dict]:
    """Every Xid line of a kernel log (journalctl -k, dmesg), in order, classified by the catalogue.

    Each event: ``{code, pci, gpu_instance, stamp, text, line, name, meaning, action, known, source}``.
    ``pci`` is domain:bus:device.function in lower case (a GPU is function 0). Lines that are not
    Xid lines are skipped; nothing raises.
    """
    found: list[dict] = []
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        m = _XID_RE.search(line)
        if not m:
            continue
        pci = m.group("pci").lower()
        if "." not in pci:
            pci += ".0"
        stamp = _STAMP_RE.match(line)
        found.append(
            classify(
                int(m.group("code")),
                pci=pci,
                text=(m.group("text") or "").strip(),
                gpu_instance=int(m.group("gi")) if m.group("gi") else None,
                stamp=stamp.group(1) if stamp else None,
                line=line,
            )
        )
    return found


def classify(code: int, pci: str | None = None, text: str = "", **extra) -> dict:
    """One XID as an event dict: the catalogue's row, or an unknown XID (action drain)."""
    e = CATALOGUE.get(str(code))
    action = e.action if e else "drain"
    meaning = e.meaning if e else "XID not in gpufleet's catalogue: look it up in NVIDIA's"
    m = _RECOVERY_TO_RE.search(text or "")
    if m:
        recovery = CATALOGUE.get(_RECOVERY_EVENT.get(int(m.group(1), 16), ""))
        if recovery:
            action = severer(action, recovery.action)
            meaning = f"recovery action changed to {m.group(2).strip()}"
    return {
        "code": code,
        "pci": pci,
        "text": text,
        "name": e.name if e else None,
        "meaning": meaning,
        "action": action,
        "known": e is not None,
        "source": SOURCES[e.source] if e else None,
        **extra,
    }


def gpu_events(gpus: list[dict] | None) -> list[dict]:
    """The non-XID events of ``nvidia-smi -q``'s GPUs (hwfacts' ``smi_q.gpus``): remap and ECC state.

    Reads each GPU's ``row_remap`` ``{pending, failure}`` and ``ecc`` ``{volatile_uncorrectable}``;
    a value that is None (not printed by this driver or GPU) is not an event.
    """
    found: list[dict] = []
    for gpu in gpus or []:
        if not isinstance(gpu, dict):
            continue
        remap = gpu.get("row_remap") or {}
        ecc = gpu.get("ecc") or {}
        keys = []
        if remap.get("failure"):
            keys.append("row_remap_failure")
        if remap.get("pending"):
            keys.append("row_remap_pending")
        if (ecc.get("volatile_uncorrectable") or 0) > 0:
            keys.append("ecc_uncorrectable")
        for key in keys:
            e = CATALOGUE[key]
            found.append(
                {
                    "event": key,
                    "pci": (gpu.get("bus_id") or "").lower() or None,
                    "name": e.name,
                    "meaning": e.meaning,
                    "action": e.action,
                    "source": SOURCES[e.source],
                }
            )
    return found


def describe(event: dict) -> str:
    """One line: "XID 79 (GPU has fallen off the bus; action: reboot) on 0000:1b:00.0"."""
    what = f"XID {event['code']}" if "code" in event else event.get("name") or event.get("event")
    where = f" on {event['pci']}" if event.get("pci") else ""
    return f"{what} ({event['meaning']}; action: {event['action']}){where}"


def violations(
    host: str | None,
    xid_events: list[dict],
    memory_events: list[dict],
    field: str = "gpu_errors",
    codes: tuple[str, str] = ("GPU_XID", "GPU_MEMORY_ERROR"),
    warn_on: tuple[str, ...] = (),
) -> list[dict]:
    """Violations for the events whose action is not ``none``: ``codes[0]`` for XIDs, ``codes[1]`` for the
    row-remap / ECC events of ``nvidia-smi -q``.

    One violation per XID code (or event) and GPU, counting repeats. Actions in ``warn_on`` are
    warnings; the others errors.
    """
    grouped: dict[tuple, list] = {}
    for code, key, evs in ((codes[0], "code", xid_events), (codes[1], "event", memory_events)):
        for ev in evs or []:
            if ev.get("action", "none") != "none":
                grouped.setdefault((code, ev.get(key), ev.get("pci")), []).append(ev)
    out: list[dict] = []
    for (code, _key, _pci), group in grouped.items():
        first = group[0]
        action = first["action"]
        times = f" ({len(group)} times)" if len(group) > 1 else ""
        where = "this boot's kernel log" if code == codes[0] else "nvidia-smi -q"
        name = first.get("name") or "no row (an XID unknown to gpufleet's catalogue)"
        message = (
            f"{describe(first)}{times} in {where}; expected no GPU error that needs an action. "
            f"NVIDIA's catalogue: {name}. To do: {ACTION_TODO[action]} (docs/xid-catalogue.md)"
        )
        out.append(violation(code, field, message, host=host, severity=WARNING if action in warn_on else ERROR))
    return out
