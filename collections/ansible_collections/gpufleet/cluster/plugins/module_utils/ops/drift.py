# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Driver and GPU-stack drift: what each node runs now against the brief's pins, its pool and its holds.

``drift_check(records, brief, hold_patterns)`` builds the drift report the ``drift`` and ``remediate``
playbooks write (``reports/<cluster>/<stamp>/drift.json``); ``drift_markdown`` and
``remediation_markdown`` render the drift and the remediation reports. Pure functions, no I/O.

Three bases, in this order for each node:

``pin``
    each component against ``brief.software`` (driver exact; driver_flavor; cuda, nccl, dcgm,
    container_toolkit, doca_ofed, rdma_core, kernel when pinned: equal or a refinement of the pin, as
    the hardware gate compares them, ``hwfacts_common.version_matches``).
``pool``
    each component against the value a strict majority of the node's pool holds (of its readable
    nodes). This catches the unpinned ones (kernel, OFED, DCGM). A component already reported against
    its pin, or whose value is exactly the pin, is not compared with the pool: the pin decides.
``hold``
    every installed package matching the hold patterns (the packages gpufleet's roles
    ``apt-mark hold`` / ``dnf versionlock``) that is not held.

The component names, their facts and their bases are documented in docs/drift.md.
"""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from dataclasses import dataclass

from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import history as acceptance_history
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.report import markdown_table
from ansible_collections.gpufleet.cluster.plugins.module_utils.hw.parsing import upstream_version, version_matches
from ansible_collections.gpufleet.cluster.plugins.module_utils.ops import xid_catalogue

SCHEMA_VERSION = 1
BASES = ("pin", "pool", "hold")
STATUSES = ("clean", "drifted", "unknown")
OUTCOMES = ("resumed", "drained", "unreachable", "skipped")

# Driver packages: every one installed must carry the pinned driver version (the fabric manager is its own
# component). Debian (NVIDIA's CUDA repository), Ubuntu (branch-named) and RHEL (module streams) names.
DRIVER_PACKAGES = (
    "nvidia-driver*",
    "nvidia-kernel-*",
    "nvidia-dkms-*",
    "kmod-nvidia*",
    "nvidia-persistenced",
    "nvidia-compute-utils-*",
    "nvidia-utils-*",
    "libnvidia-compute-*",
    "libcuda1",
)
# Packages those globs reach that do not carry the driver's version.
DRIVER_PACKAGES_EXCLUDED = ("*-local-repo-*", "nvidia-driver-assistant")
DCGM_PACKAGES = ("datacenter-gpu-manager*",)

# The packages gpufleet's roles hold (apt-mark hold / dnf versionlock), exactly:
#   nvidia_driver     nvidia_driver_packages per OS and flavour (vars/main.yml _nvidia_driver_os_vars):
#                     Debian nvidia-driver-cuda + nvidia-kernel-open-dkms | nvidia-kernel-dkms,
#                     Ubuntu nvidia-driver-<branch>[-open] + nvidia-dkms-<branch>[-open],
#                     RHEL kmod-nvidia-open-dkms | kmod-nvidia-latest-dkms; nvidia-persistenced;
#                     the fabric manager nvidia-fabricmanager-<branch> | nvidia-fabric-manager below 580,
#                     nvidia-fabricmanager from 580 (every OS)
#   cuda              cuda_packages: cuda-toolkit-<major>-<minor>
#   nccl              nccl_packages: libnccl2, libnccl-dev
#   dcgm              dcgm_packages: datacenter-gpu-manager-<N>-core, datacenter-gpu-manager-<N>-cuda<major>
#   container_runtime container_runtime_toolkit_packages
# Broader globs (nvidia-*, libnvidia-*) would also catch the dependencies the roles pin with apt preferences
# but do not hold (nvidia-driver-cuda-libs, cuda-toolkit-12-8-config-common), and report them every run.
DEFAULT_HOLD_PATTERNS = (
    "nvidia-driver-cuda",
    "nvidia-kernel-open-dkms",
    "nvidia-kernel-dkms",
    "nvidia-driver-[0-9][0-9][0-9]",
    "nvidia-driver-[0-9][0-9][0-9]-open",
    "nvidia-dkms-[0-9][0-9][0-9]",
    "nvidia-dkms-[0-9][0-9][0-9]-open",
    "kmod-nvidia-open-dkms",
    "kmod-nvidia-latest-dkms",
    "nvidia-persistenced",
    "nvidia-fabricmanager-[0-9][0-9][0-9]",
    "nvidia-fabricmanager",
    "nvidia-fabric-manager",
    "cuda-toolkit-[0-9][0-9]-[0-9]",
    "cuda-toolkit-[0-9][0-9]-[0-9][0-9]",
    "libnccl2",
    "libnccl-dev",
    "datacenter-gpu-manager-[0-9]-core",
    "datacenter-gpu-manager-[0-9]-cuda[0-9][0-9]",
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
)

_REMEDIATE = "run `gpufleet remediate` (reinstalls the pinned packages, holds them, reboots where needed)"
_AN_ARCH = re.compile(r":[a-z0-9_]+$")


@dataclass(frozen=True)
class Component:
    """One thing compared: where its value comes from, which pin it is held to, how."""

    name: str
    label: str  # what the messages call it
    source: str  # the gpufleet_hw fact (documentation and docs/drift.md)
    pin: str | None  # brief.software key
    exact: bool  # pin compared for equality; else version_matches (pin 12.8 accepts 12.8.1)
    runtime: bool  # a missing value means "could not tell" (not compared); else "not installed"
    todo: str


COMPONENTS = (
    Component(
        "driver-package",
        "installed driver packages",
        "packages: nvidia-driver* / nvidia-kernel-* / nvidia-dkms-* / kmod-nvidia* ... (upstream version)",
        "driver",
        True,
        False,
        f"{_REMEDIATE}; the new module loads at the reboot",
    ),
    Component(
        "driver-loaded",
        "loaded kernel module",
        "versions.driver_loaded (/proc/driver/nvidia/version)",
        "driver",
        True,
        True,
        f"the node runs a module other than the pinned driver: {_REMEDIATE} — it needs a reboot",
    ),
    Component(
        "driver-running",
        "running driver (nvidia-smi)",
        "versions.driver (nvidia-smi, else /proc/driver/nvidia/version)",
        "driver",
        True,
        True,
        f"{_REMEDIATE}; 'Driver/library version mismatch' from nvidia-smi means the packages changed under a "
        "loaded module: reboot",
    ),
    Component(
        "driver-flavor",
        "kernel module flavour",
        "versions.driver_flavor (/proc/driver/nvidia/version)",
        "driver_flavor",
        True,
        True,
        f"install the pinned flavour's kernel module package: {_REMEDIATE} — it needs a reboot",
    ),
    Component(
        "fabric-manager",
        "fabric manager",
        "versions.fabric_manager (nv-fabricmanager --version, else its package)",
        "driver",
        True,
        False,
        f"the fabric manager must be the driver's exact build: {_REMEDIATE}",
    ),
    Component(
        "cuda", "CUDA toolkit", "versions.cuda (version.json / nvcc / package)", "cuda", False, False, _REMEDIATE
    ),
    Component("nccl", "NCCL (libnccl)", "versions.nccl (libnccl2 / libnccl package)", "nccl", False, False, _REMEDIATE),
    Component(
        "dcgm",
        "DCGM package(s)",
        "packages: datacenter-gpu-manager* (upstream version)",
        "dcgm",
        False,
        False,
        _REMEDIATE,
    ),
    Component(
        "container-toolkit",
        "NVIDIA container toolkit",
        "versions.container_toolkit (nvidia-ctk --version, else its package)",
        "container_toolkit",
        False,
        False,
        _REMEDIATE,
    ),
    Component(
        "doca-ofed", "DOCA-OFED", "versions.doca_ofed (doca-ofed package)", "doca_ofed", False, False, _REMEDIATE
    ),
    Component(
        "ofed",
        "OFED (ofed_info -s)",
        "versions.ofed (ofed_info -s)",
        None,
        False,
        False,
        "bring the node's OFED in line with its pool (rdma role, or reimage)",
    ),
    Component(
        "rdma-core",
        "rdma-core",
        "versions.rdma_core (rdma-core / libibverbs package)",
        "rdma_core",
        False,
        False,
        "re-run the rdma role, or reimage",
    ),
    Component(
        "kernel",
        "running kernel",
        "versions.kernel (/proc/sys/kernel/osrelease)",
        "kernel",
        False,
        True,
        "boot the pinned kernel (and rebuild the driver's DKMS modules for it); unpinned: pin it in the brief "
        "or bring the node in line with its pool",
    ),
)
COMPONENT_NAMES = tuple(c.name for c in COMPONENTS)
_BY_NAME = {c.name: c for c in COMPONENTS}
_ORDER = {name: i for i, name in enumerate((*COMPONENT_NAMES, "hold"))}


# ------------------------------------------------------------------ reading facts


def _matching(packages: dict, patterns: tuple[str, ...], excluded: tuple[str, ...] = ()) -> dict[str, str]:
    """Installed packages matching ``patterns`` (and none of ``excluded``): name -> upstream version."""
    out: dict[str, str] = {}
    for name in sorted(packages or {}):
        if any(fnmatch.fnmatchcase(name, p) for p in patterns) and not any(
            fnmatch.fnmatchcase(name, p) for p in excluded
        ):
            version = upstream_version(packages[name])
            if version:
                out[name] = version
    return out


def _package_set(facts: dict, component: str) -> dict[str, str]:
    packages = facts.get("packages") or {}
    if component == "driver-package":
        return _matching(packages, DRIVER_PACKAGES, DRIVER_PACKAGES_EXCLUDED)
    return _matching(packages, DCGM_PACKAGES)


def _text(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    return text or None


def node_versions(facts: dict) -> dict[str, str | None]:
    """The value of every component on one node (None: not installed / not known). Package sets give
    their distinct upstream versions, comma-separated."""
    v = facts.get("versions") or {}
    out: dict[str, str | None] = {}
    for c in COMPONENTS:
        if c.name in ("driver-package", "dcgm"):
            found = sorted(set(_package_set(facts, c.name).values()))
            out[c.name] = ", ".join(found) or None
        else:
            key = {
                "driver-loaded": "driver_loaded",
                "driver-running": "driver",
                "driver-flavor": "driver_flavor",
                "container-toolkit": "container_toolkit",
                "doca-ofed": "doca_ofed",
                "rdma-core": "rdma_core",
                "fabric-manager": "fabric_manager",
            }.get(c.name, c.name)
            out[c.name] = _text(v.get(key))
    return out


# ------------------------------------------------------------------ comparisons


def _pins(brief: dict) -> dict[str, str]:
    """The pin of each component, for the components the brief pins (strings)."""
    sw = (brief or {}).get("software") or {}
    stack = sw.get("rdma_stack") or "inbox"
    out: dict[str, str] = {}
    for c in COMPONENTS:
        if not c.pin:
            continue
        pin = _text(sw.get(c.pin))
        if pin is None:
            continue
        # The OFED pins apply to the stack the brief chose (as in the hardware gate): the other is not installed.
        if (c.name == "doca-ofed" and stack != "doca-ofed") or (c.name == "rdma-core" and stack == "doca-ofed"):
            continue
        out[c.name] = pin
    return out


def _matches(c: Component, found: str, pin: str) -> bool:
    return found == pin if c.exact else version_matches(found, pin)


def _item(component: str, expected: str, found: str, basis: str, message: str) -> dict:
    return {"component": component, "expected": expected, "found": found, "basis": basis, "message": message}


def _shown(value: str | None, c: Component) -> str:
    if value is not None:
        return value
    return "unknown" if c.runtime else "not installed"


def _pin_drift(host: str, facts: dict, versions: dict, pins: dict) -> list[dict]:
    out: list[dict] = []
    for c in COMPONENTS:
        pin = pins.get(c.name)
        if pin is None:
            continue
        found = versions.get(c.name)
        where = f"software.{c.pin}"
        if c.name in ("driver-package", "dcgm"):
            if found is None and c.name == "driver-package":
                # None recorded: the facts may not list this OS's driver packages (the running driver and the
                # pool still tell).
                continue
            if found is None:
                message = f"{host}: {c.label}: not installed, brief pins {pin} ({where}): {c.todo}"
                out.append(_item(c.name, pin, "not installed", "pin", message))
                continue
            wrong = {n: ver for n, ver in _package_set(facts, c.name).items() if not _matches(c, ver, pin)}
            if wrong:
                listed = ", ".join(f"{n} {ver}" for n, ver in sorted(wrong.items()))
                message = f"{host}: {c.label}: {listed}, brief pins {pin} ({where}): {c.todo}"
                out.append(_item(c.name, pin, ", ".join(sorted(set(wrong.values()))), "pin", message))
            continue
        if found is None:
            if c.name == "driver-running":
                message = (
                    f"{host}: {c.label}: no driver version (module not loaded, or nvidia-smi failed), brief "
                    f"pins {pin} ({where}): check `nvidia-smi` and `dmesg`; {c.todo}"
                )
                out.append(_item(c.name, pin, "unknown", "pin", message))
            elif not c.runtime and c.name != "fabric-manager":  # the fabric manager only where installed
                message = f"{host}: {c.label}: not installed, brief pins {pin} ({where}): {c.todo}"
                out.append(_item(c.name, pin, "not installed", "pin", message))
            continue
        if not _matches(c, found, pin):
            message = f"{host}: {c.label}: {found}, brief pins {pin} ({where}): {c.todo}"
            out.append(_item(c.name, pin, found, "pin", message))
    return out


def _pool_drift(
    host: str, pool: str, versions: dict, pins: dict, peers: dict[str, dict], reported: set[str]
) -> list[dict]:
    """``peers``: host -> versions of every readable node of the pool (this one included)."""
    out: list[dict] = []
    total = len(peers)
    if total < 2:
        return out
    for c in COMPONENTS:
        found = versions.get(c.name)
        if c.name in reported or (found is not None and found == pins.get(c.name)):
            continue
        if found is None and c.runtime:
            continue  # not known here: nothing to compare
        values = [p.get(c.name) for p in peers.values()]
        counts = Counter(v for v in values if v is not None or not c.runtime)
        if not counts:
            continue
        ((ref, n_ref),) = counts.most_common(1)
        if n_ref * 2 <= total or found == ref:
            continue
        expected = _shown(ref, c)
        shown = _shown(found, c)
        message = (
            f"{host}: {c.label}: {shown}, {n_ref} of {total} readable nodes in pool {pool} have {expected}: {c.todo}"
        )
        out.append(_item(c.name, expected, shown, "pool", message))
    return out


def _is_held(name: str, holds: set[str]) -> bool:
    """``apt-mark showhold`` names (``libnccl2`` or ``libnccl2:amd64``) or dnf versionlock entries
    (``libnccl2-0:2.26.2-1+cuda12.8.*``)."""
    if name in holds:
        return True
    for held in holds:
        if _AN_ARCH.sub("", held) == name:
            return True
        if held.startswith(name + "-") and re.match(r"(\d+:)?\d", held[len(name) + 1 :]):
            return True
    return False


def _hold_drift(host: str, facts: dict, holds: list, patterns: tuple[str, ...]) -> list[dict]:
    held = {str(h).strip() for h in holds if str(h).strip()}
    out: list[dict] = []
    for name, version in sorted((facts.get("packages") or {}).items()):
        if not any(fnmatch.fnmatchcase(name, p) for p in patterns) or _is_held(name, held):
            continue
        message = (
            f"{host}: package {name} {version} is installed but not held (apt-mark showhold / dnf versionlock "
            f"list): the next upgrade can move it off the pin — `gpufleet remediate` holds it again"
        )
        out.append({**_item("hold", "held", "not held", "hold", message), "package": name})
    return out


def _needs_reboot(versions: dict, drift: list[dict]) -> bool:
    """The loaded module is not the pinned driver (or flavour); when the loaded module is unknown, the
    installed driver packages are not the pin."""
    pinned = {d["component"] for d in drift if d["basis"] == "pin"}
    if "driver-loaded" in pinned or "driver-flavor" in pinned:
        return True
    return versions.get("driver-loaded") is None and "driver-package" in pinned


# ------------------------------------------------------------------ the report


def _pool_name(value: object) -> str:
    if isinstance(value, dict):
        value = value.get("name")
    return str(value) if value else ""


def _natural(name: str) -> tuple:
    # Runs of ASCII digits compare as numbers, by length then digits: no int(), however long the run.
    return tuple(
        (0, len(p.lstrip("0")), p.lstrip("0")) if p.isdigit() else (1, 0, p) for p in re.split(r"([0-9]+)", name) if p
    )


def _patterns(hold_patterns: object) -> tuple[str, ...]:
    if hold_patterns is None:
        return DEFAULT_HOLD_PATTERNS
    if isinstance(hold_patterns, str):
        return (hold_patterns,)
    if isinstance(hold_patterns, (list, tuple)) and all(isinstance(p, str) for p in hold_patterns):
        return tuple(hold_patterns)
    raise TypeError(f"hold_patterns must be a list of package globs, got {type(hold_patterns).__name__}")


def _summary(host: str, status: str, drift: list[dict], reboot: bool) -> str:
    if status == "clean":
        return f"{host}: matches the brief's pins, its pool and its holds"
    names = []
    for d in drift:
        name = f"hold {d['package']}" if d["component"] == "hold" else d["component"]
        if name not in names:
            names.append(name)
    return f"{host}: drifted: {', '.join(names)}" + ("; a reboot is needed" if reboot else "")


def _gpu_errors(facts: dict) -> list[dict]:
    """The node's GPU errors since boot that need an action (NVIDIA's XID catalogue, see xid_catalogue.py):
    ``[{what, action}]``, one per XID code or memory event and GPU, the most severe first. They do not make
    a node drifted (remediation reinstalls packages; it does not mend a GPU) but the report names them, since
    a node is often re-imaged because of them."""
    errors = _dict(facts.get("gpu_errors"))
    found: dict[str, str] = {}
    for ev in [*(errors.get("xids") or []), *(errors.get("memory") or [])]:
        if isinstance(ev, dict) and ev.get("action", "none") != "none":
            found.setdefault(xid_catalogue.describe(ev), ev["action"])
    rank = {a: i for i, a in enumerate(xid_catalogue.ACTIONS)}
    return [{"what": w, "action": a} for w, a in sorted(found.items(), key=lambda kv: -rank.get(kv[1], 0))]


def drift_check(
    records: dict,
    brief: dict,
    hold_patterns: object = None,
    pools: dict | None = None,
    acceptance: dict | None = None,
    today: str | None = None,
) -> dict:
    """The drift report of every node in ``records`` (host -> ``{pool, facts, holds}``, or None for a host that
    could not be read; see the module doc). ``pools`` (host -> pool name) names the pool of a host whose record
    is None or has no pool. ``acceptance`` (host -> the date its acceptance is valid until, or None for a node
    with no mark; acceptance_history.py): each node's ``acceptance`` and the report's ``acceptance_expired``
    and ``acceptance_missing``, a finding that does not change any node's drift status; ``today`` (ISO date,
    default today in UTC) is what a mark is compared with."""
    if not isinstance(records, dict):
        raise TypeError(f"records must be a dict of host -> {{pool, facts, holds}}, got {type(records).__name__}")
    if not isinstance(brief, dict):
        raise TypeError(f"brief must be the topology brief (a dict), got {type(brief).__name__}")
    patterns = _patterns(hold_patterns)
    if pools is not None and not isinstance(pools, dict):
        raise TypeError(f"pools must be a dict of host -> pool name, got {type(pools).__name__}")
    pins = _pins(brief)
    hosts = sorted((str(h) for h in records), key=_natural)
    entries: dict[str, dict] = {}
    for host in hosts:
        rec = records.get(host)
        if rec is not None and not isinstance(rec, dict):
            raise TypeError(f"records[{host!r}] must be a dict {{pool, facts, holds}}, got {type(rec).__name__}")
        rec = rec or {}
        facts = rec.get("facts")
        holds = rec.get("holds")
        if facts is not None and not isinstance(facts, dict):
            raise TypeError(f"records[{host!r}].facts must be the gpufleet_hw dict or None")
        if holds is not None and not isinstance(holds, (list, tuple)):
            raise TypeError(f"records[{host!r}].holds must be a list of package names or None")
        pool = _pool_name(rec.get("pool")) or _pool_name((pools or {}).get(host))
        entries[host] = {"pool": pool, "facts": facts or None, "holds": holds}

    versions = {h: node_versions(e["facts"]) for h, e in entries.items() if e["facts"]}
    pools: dict[str, dict[str, dict]] = {}
    for h, e in entries.items():
        if e["facts"] and e["pool"]:
            pools.setdefault(e["pool"], {})[h] = versions[h]

    nodes: dict[str, dict] = {}
    for host, e in entries.items():
        if not e["facts"]:
            nodes[host] = {
                "pool": e["pool"],
                "status": "unknown",
                "drift": [],
                "versions": {},
                "reboot": False,
                "message": f"{host}: could not be read (unreachable, or gpu_facts failed): its drift is unknown — "
                "check the node and run `gpufleet drift` again",
            }
            continue
        mine = versions[host]
        drift = _pin_drift(host, e["facts"], mine, pins)
        reported = {d["component"] for d in drift}
        if e["pool"]:
            drift += _pool_drift(host, e["pool"], mine, pins, pools[e["pool"]], reported)
        if e["holds"] is not None:
            drift += _hold_drift(host, e["facts"], list(e["holds"]), patterns)
        drift.sort(key=lambda d: (_ORDER.get(d["component"], len(_ORDER)), d.get("package", "")))
        reboot = _needs_reboot(mine, drift)
        status = "drifted" if drift else "clean"
        nodes[host] = {
            "pool": e["pool"],
            "status": status,
            "drift": drift,
            "versions": mine,
            "reboot": reboot,
            "message": _summary(host, status, drift, reboot),
            "gpu_errors": _gpu_errors(e["facts"]),
        }
    by_status = {s: [h for h in hosts if nodes[h]["status"] == s] for s in STATUSES}
    expiry: dict = {}
    if acceptance is not None:
        if not isinstance(acceptance, dict):
            raise TypeError(f"acceptance must be a dict of host -> date or None, got {type(acceptance).__name__}")
        expiry = acceptance_history.expiry({h: acceptance.get(h) for h in hosts}, today)
        for h in hosts:
            nodes[h]["acceptance"] = expiry[h]
    report = {
        "kind": "drift",
        "schema": SCHEMA_VERSION,
        "cluster": str(((brief.get("cluster") or {}).get("name")) or ""),
        "pins": {c.pin: pins[c.name] for c in COMPONENTS if c.name in pins and c.pin},
        "hold_patterns": list(patterns),
        "nodes": nodes,
        "drifted": by_status["drifted"],
        "unknown": by_status["unknown"],
        "clean": by_status["clean"],
        "reboot": [h for h in hosts if nodes[h]["reboot"]],
        "gpu_errors": [h for h in hosts if nodes[h].get("gpu_errors")],
        "counts": {
            "nodes": len(hosts),
            **{s: len(by_status[s]) for s in STATUSES},
            "reboot": sum(1 for h in hosts if nodes[h]["reboot"]),
            "items": sum(len(n["drift"]) for n in nodes.values()),
        },
    }
    if acceptance is not None:
        report["acceptance_expired"] = [h for h in hosts if expiry[h]["status"] == "expired"]
        report["acceptance_missing"] = [h for h in hosts if expiry[h]["status"] == "none"]
    return report


# ------------------------------------------------------------------ Markdown


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def drift_markdown(report: dict) -> str:
    """The drift report as Markdown: verdict and counts, one table per drifted node, the unknown and clean nodes."""
    if not isinstance(report, dict) or not isinstance(report.get("nodes"), dict):
        raise TypeError("expected a drift report (a dict with nodes: {host: record}), as drift_check returns")
    nodes = report["nodes"]
    hosts = sorted(nodes, key=lambda h: _natural(str(h)))

    def status(h: str) -> str:
        return str(_dict(nodes[h]).get("status") or "unknown")

    drifted = [h for h in hosts if status(h) == "drifted"]
    unknown = [h for h in hosts if status(h) not in ("drifted", "clean")]
    clean = [h for h in hosts if status(h) == "clean"]
    verdict = "CLEAN" if not drifted and not unknown else "DRIFTED" if drifted else "UNKNOWN"
    out = [f"# Drift: {report.get('cluster') or '?'}", ""]
    out.append(
        f"**Verdict: {verdict}** ({len(drifted)} drifted, {len(unknown)} unknown, {len(clean)} clean of "
        f"{len(hosts)} nodes)" + (f", {report['timestamp']}" if report.get("timestamp") else "")
    )
    out.append("")
    pins = _dict(report.get("pins"))
    if pins:
        out += ["Pins: " + ", ".join(f"{k} {v}" for k, v in pins.items()), ""]
    reboot = [h for h in drifted if _dict(nodes[h]).get("reboot")]
    if reboot:
        out += [f"Reboot needed to remediate: {', '.join(reboot)}", ""]
    for h in drifted:
        node = _dict(nodes[h])
        pool = node.get("pool") or "no pool"
        out += [f"## {h} ({pool}){' — reboot needed' if node.get('reboot') else ''}", ""]
        rows = []
        for d in node.get("drift") or []:
            if not isinstance(d, dict):
                continue
            component = d.get("component")
            if component == "hold" and d.get("package"):
                component = f"hold: {d['package']}"
            rows.append([component, d.get("expected"), d.get("found"), d.get("basis"), d.get("message")])
        out += [*markdown_table(["component", "expected", "found", "basis", "message"], rows), ""]
    if unknown:
        out += ["## Unknown", ""]
        out += [f"- {_dict(nodes[h]).get('message') or f'{h}: could not be read'}" for h in unknown]
        out.append("")
    errors = [h for h in hosts if _dict(nodes[h]).get("gpu_errors")]
    if errors:
        out += ["## GPU errors since boot", "", "Actions from NVIDIA's XID catalogue (docs/xid-catalogue.md).", ""]
        rows = [[h, e.get("what"), e.get("action")] for h in errors for e in _dict(nodes[h])["gpu_errors"]]
        out += [*markdown_table(["node", "error", "action"], rows), ""]
    if "acceptance_expired" in report:
        late = [h for h in hosts if _dict(_dict(nodes[h]).get("acceptance")).get("status") in ("expired", "none")]
        out += ["## Acceptance expired or missing", ""]
        if late:
            out += ['Run `gpufleet accept` on these nodes (docs/nccl-acceptance.md, "Valid until").', ""]
            rows = [
                [h, _dict(nodes[h]["acceptance"]).get("valid_until"), nodes[h]["acceptance"]["status"]] for h in late
            ]
            out += [*markdown_table(["node", "valid until", "status"], rows), ""]
        else:
            out += ["None: every node's acceptance is valid.", ""]
    out += ["## Clean", ""]
    out.append(", ".join(clean) if clean else "None.")
    return "\n".join(out).rstrip() + "\n"


def _acceptance_cell(node: dict):
    """A remediated node's re-acceptance result, with what ran within it where the brief asks: the GPU
    diagnostics (dcgmi diag) and the collectives beyond all_reduce (all_gather, alltoall)."""
    within = [
        text
        for text in (
            f"GPU diagnostics {node['dcgm_diag']}" if node.get("dcgm_diag") else None,
            f"collectives: {node['collectives']}" if node.get("collectives") else None,
        )
        if text
    ]
    return f"{node.get('acceptance')} ({'; '.join(within)})" if within else node.get("acceptance")


def remediation_markdown(report: dict) -> str:
    """The remediation report (built by playbooks/remediate.yml) as Markdown."""
    if not isinstance(report, dict) or not isinstance(report.get("nodes"), dict):
        raise TypeError("expected a remediation report (a dict with nodes: {host: record})")
    nodes = report["nodes"]
    hosts = sorted(nodes, key=lambda h: _natural(str(h)))
    outcomes = Counter(str(_dict(nodes[h]).get("outcome") or "?") for h in hosts)
    left = [h for h in hosts if _dict(nodes[h]).get("outcome") in ("drained", "unreachable")]
    breaker = _dict(report.get("breaker"))
    blocked = bool(breaker.get("tripped")) and not breaker.get("forced")
    out = [f"# Remediation: {report.get('cluster') or '?'}", ""]
    verdict = "FAILED" if left or blocked else "OK"
    counts = ", ".join(f"{n} {o}" for o, n in sorted(outcomes.items())) or "no nodes"
    out += [f"**Verdict: {verdict}** ({counts})", ""]
    out.append(
        f"Started {report.get('started') or '?'}, finished {report.get('finished') or '?'}; "
        f"serial {report.get('serial') if report.get('serial') not in (None, '') else '?'}"
    )
    out.append("")
    if left:
        out += [f"Still out of service: {', '.join(left)}", ""]
    # The drain breaker (module_utils/ops/drain_breaker.py): tripped, nothing was drained; forced, it was overridden.
    if breaker.get("tripped"):
        title = "Drain breaker overridden by force" if breaker.get("forced") else "Drain breaker TRIPPED"
        out += [f"**{title}**: {breaker.get('message') or ''}", ""]
    batches = [b for b in report.get("batches") or [] if isinstance(b, list)]
    if batches:
        out += ["## Batches", ""]
        out += [f"{i}. {', '.join(str(h) for h in b) or '(empty)'}" for i, b in enumerate(batches, 1)]
        out.append("")
    out += ["## Nodes", ""]
    rows = []
    for h in hosts:
        node = _dict(nodes[h])
        before = []
        for d in node.get("before") or []:
            if isinstance(d, dict):
                name = (
                    f"hold {d['package']}" if d.get("component") == "hold" and d.get("package") else d.get("component")
                )
                if name not in before:
                    before.append(name)
        if not before and node.get("left_drained"):
            before.append(f"left drained by an earlier run ({node['left_drained']})")
        rows.append(
            [
                h,
                before,
                node.get("outcome"),
                node.get("rebooted"),
                node.get("gate"),
                _acceptance_cell(node),
                node.get("reason"),
            ]
        )
    out += (
        markdown_table(["host", "drift before", "outcome", "rebooted", "gate", "acceptance", "reason"], rows)
        if rows
        else ["No node needed remediation."]
    )
    return "\n".join(out).rstrip() + "\n"


__all__ = [
    "BASES",
    "COMPONENTS",
    "COMPONENT_NAMES",
    "DEFAULT_HOLD_PATTERNS",
    "DRIVER_PACKAGES",
    "OUTCOMES",
    "SCHEMA_VERSION",
    "drift_check",
    "drift_markdown",
    "node_versions",
    "remediation_markdown",
]
