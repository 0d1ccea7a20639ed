# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""GPU diagnostics of one node, from NVIDIA DCGM's ``dcgmi diag -r <level> -j``.

A GPU whose memory, power delivery or PCIe link is failing can pass an all_reduce floor for the
minutes the run takes. DCGM's diagnostics exercise each GPU on its own (deployment checks, then
memory, PCIe, stress and power tests as the level rises) and name the GPU and the test that failed.
The acceptance runs one ``dcgmi diag -r <level> -j`` on every GPU node at once and :func:`judge`
reads it.

The levels, as NVIDIA's dcgmi diag reference describes them
(https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-diag.html):
1 quick deployment checks, "seconds"; 2 medium, "approximately two minutes"; 3 long,
"approximately 15 minutes"; 4 extended, longer still (no figure published; AWS SageMaker HyperPod's
deep health checks run level 4). :data:`TIMEOUT_S` is the ceiling the role waits for each.

What ``dcgmi diag -j`` prints, as DCGM's source writes it (github.com/NVIDIA/DCGM, dcgmi/Diag.cpp,
nvvs/include/NvvsJsonStrings.h; read there, not guessed). Two layouts:

* **DCGM 4** (``HelperJsonBuildOutput``, schema testing/python3/dcgm_diag_schema.json)::

      {"entity_groups": [{"entity_group": "GPU", "entity_group_id": 1,
                          "entities": [{"entity_id": 0, "serial_num": "...", "device_id": "2330"}]}],
       "metadata": {"version": "4.2.3", "Driver Version Detected": "570.133.20"},
       "DCGM Diagnostic": {"test_categories": [
           {"category": "Hardware", "tests": [
               {"name": "memory",
                "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 3,
                             "status": "Fail",
                             "warnings": [{"warning": "...", "error_id": 83, "error_category": 3,
                                           "error_severity": 2}],
                             "info": ["..."]}],
                "test_summary": {"status": "Fail"}}]}]}}

  Test names are the plugins' (``software``, ``pcie``, ``memory``, ``diagnostic``,
  ``targeted_stress``, ``targeted_power``, ``memory_bandwidth``, ``memtest``, ``pulse_test``, ...:
  nvvs/include/PluginStrings.h), categories ``Deployment``, ``Hardware``, ``Integration``,
  ``Stress``. ``info`` is a list of strings. ``test_summary`` carries the test's overall result and
  every error of the test, those tied to no GPU among them.
* **DCGM 3** (DCGM 3.3's Diag.cpp): the root key is ``DCGM GPU Diagnostic``; ``version``,
  ``Driver Version Detected``, ``GPU Device IDs`` and ``GPU Device Serials`` sit at the top level;
  test names are display names (``GPU Memory``, ``PCIe``, ``Diagnostic``, ``Targeted Stress``,
  ...); a per-GPU result names its GPU as ``gpu_id``, a string; ``info`` is one string. The
  Deployment category's results carry no ``gpu_id`` unless one of its errors names a GPU (then an
  integer), and each of their warnings keeps its text under ``warnings``, not ``warning``.

``status`` is ``Pass``, ``Skip`` or ``Fail`` (both layouts print a *warning* result as ``Fail``:
``HelperDisplayDiagResult`` shows ``Warn`` only in the text table); ``Warn`` is read where it
appears. A run that could not start prints ``{"DCGM Diagnostic": {"version": ..., "runtime_error":
...}}`` (DCGM 3: under ``DCGM GPU Diagnostic``). dcgmi exits with the DCGM status as its exit
status: 0 when every test passed, 226 (``DCGM_ST_NVVS_ERROR``, -30) or 205
(``DCGM_ST_NVVS_ISOLATE_ERROR``, -51) when a test failed, with the JSON printed all the same.

Output that is not JSON, a runtime error, or JSON without its test categories raises
:class:`DcgmDiagError`: never read as a pass.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, violation

FIELD = "acceptance.dcgm_diag"
LEVELS = (1, 2, 3, 4)
# NVIDIA's published durations per level (the dcgmi diag reference above); level 4 has none.
DURATIONS = {
    1: "seconds",
    2: "about 2 minutes",
    3: "about 15 minutes",
    4: "longer than level 3 (no figure published)",
}
# Seconds the role waits for one run before it is killed: generous ceilings over the published
# durations (a node's GPUs run in parallel, but the plugins' own timeouts add up), not figures.
TIMEOUT_S = {1: 300, 2: 900, 3: 3600, 4: 10800}
# The statuses dcgmi prints per result; "not run" results are left out of the JSON by dcgmi itself.
PASS, FAIL, WARN, SKIP = "Pass", "Fail", "Warn", "Skip"
_STATUSES = {"pass": PASS, "fail": FAIL, "warn": WARN, "skip": SKIP}
# dcgmi's exit statuses when the diagnostic ran and a test failed (DCGM_ST_NVVS_ERROR -30,
# DCGM_ST_NVVS_ISOLATE_ERROR -51, as an 8-bit exit status).
FAILED_TEST_RCS = (226, 205)
# timeout(1)'s exit statuses: 124 timed out, 137 killed after --kill-after.
TIMEOUT_RCS = (124, 137)

_ROOT4 = "DCGM Diagnostic"
_ROOT3 = "DCGM GPU Diagnostic"


class DcgmDiagError(ValueError):
    """dcgmi's output is not a complete diagnostic result."""


def level_for(brief: Mapping | None, pool: str | None = None) -> int | None:
    """The diagnostic level the brief asks of ``pool``: its ``pools[].acceptance.dcgm_diag.level``,
    else ``acceptance.dcgm_diag.level``; None when neither sets one (the gate is off)."""
    brief = brief or {}
    level = None
    given = ((brief.get("acceptance") or {}).get("dcgm_diag")) or {}
    if isinstance(given, Mapping):
        level = given.get("level")
    for spec in brief.get("pools") or []:
        if isinstance(spec, Mapping) and spec.get("name") == pool:
            own = ((spec.get("acceptance") or {}).get("dcgm_diag")) or {}
            if isinstance(own, Mapping) and own.get("level") is not None:
                level = own["level"]
    if level is None:
        return None
    if isinstance(level, bool) or not isinstance(level, int) or level not in LEVELS:
        raise DcgmDiagError(f"{FIELD}.level: expected one of 1, 2, 3, 4, found {level!r}")
    return level


def _status(value, where: str) -> str:
    text = str(value or "").strip()
    found = _STATUSES.get(text.lower())
    if found is None:
        raise DcgmDiagError(f"{where}: status {text!r} is none of Pass, Fail, Warn, Skip")
    return found


def _warnings(entries, where: str) -> list[str]:
    """The texts of a result's warnings (DCGM 4: ``warning``; DCGM 3's Deployment: ``warnings``)."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise DcgmDiagError(f"{where}: warnings is not a list")
    out = []
    for entry in entries:
        if entry is None:
            # DCGM 3 fills its warnings array by error slot: an empty slot stays null.
            continue
        text = entry.get("warning", entry.get("warnings")) if isinstance(entry, Mapping) else entry
        if text is not None and str(text).strip():
            out.append(str(text).strip())
    return out


def _info(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v).strip() for v in value if v is not None and str(v).strip()]
    return [str(value).strip()] if str(value).strip() else []


def _gpu(result: Mapping, layout: str, where: str) -> int | None:
    """The GPU a result is about, or None (a node-wide result)."""
    if layout == "dcgm4":
        if "entity_id" not in result:
            return None
        group = str(result.get("entity_group", "GPU"))
        if group != "GPU":
            return None
        ident = result.get("entity_id")
    else:
        if "gpu_id" not in result:
            return None
        ident = result.get("gpu_id")
    try:
        return int(str(ident).strip())
    except ValueError as exc:
        raise DcgmDiagError(f"{where}: GPU id {ident!r} is not a number") from exc


def _parse_results(test: Mapping, layout: str, where: str) -> list[dict]:
    results = test.get("results")
    if results is None:
        return []
    if not isinstance(results, list):
        raise DcgmDiagError(f"{where}: results is not a list")
    out = []
    for i, result in enumerate(results):
        here = f"{where}, result {i}"
        if not isinstance(result, Mapping) or "status" not in result:
            raise DcgmDiagError(f"{here}: no status")
        entity = None
        if layout == "dcgm4" and "entity_group" in result:
            entity = f"{result.get('entity_group')} {result.get('entity_id')}"
        out.append(
            {
                "gpu": _gpu(result, layout, here),
                "entity": entity,
                "status": _status(result["status"], here),
                "warnings": _warnings(result.get("warnings"), here),
                "info": _info(result.get("info")),
            }
        )
    return out


def parse(output: str) -> dict:
    """``dcgmi diag -j``'s output -> ``{layout, version, driver, gpus, tests}``.

    ``tests``: ``[{category, name, status, results: [{gpu, entity, status, warnings, info}],
    summary_warnings}]``, ``status`` the test's overall result (DCGM 4's ``test_summary``, else the
    worst of its results: Fail over Warn over Pass over Skip). ``gpus``: the GPU ids the run named.
    Raises :class:`DcgmDiagError` naming what is wrong with anything that is not a finished run.
    """
    text = (output or "").strip()
    if not text:
        raise DcgmDiagError("no output")
    start = text.find("{")
    if start < 0:
        first = text.splitlines()[0][:160]
        raise DcgmDiagError(f"no JSON in the output (it begins {first!r})")
    try:
        doc, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as exc:
        raise DcgmDiagError(f"JSON output that does not parse ({exc}): cut short?") from exc
    if not isinstance(doc, Mapping):
        raise DcgmDiagError("JSON output that is not an object")
    if _ROOT4 in doc:
        layout, root = "dcgm4", doc[_ROOT4]
    elif _ROOT3 in doc:
        layout, root = "dcgm3", doc[_ROOT3]
    else:
        raise DcgmDiagError(f"JSON without a {_ROOT4!r} (DCGM 4) or {_ROOT3!r} (DCGM 3) object: not dcgmi diag's")
    if not isinstance(root, Mapping):
        raise DcgmDiagError(f"{layout}: the diagnostic object is not an object")
    if root.get("runtime_error"):
        raise DcgmDiagError(f"the diagnostic did not run: {str(root['runtime_error']).strip()}")
    categories = root.get("test_categories")
    if not isinstance(categories, list) or not categories:
        raise DcgmDiagError("no test_categories: the diagnostic ran no test (or the output is cut short)")
    if layout == "dcgm4":
        meta = doc.get("metadata") or {}
        version, driver = meta.get("version"), meta.get("Driver Version Detected")
        gpus = sorted(
            int(e["entity_id"])
            for g in doc.get("entity_groups") or []
            if isinstance(g, Mapping) and g.get("entity_group") == "GPU"
            for e in g.get("entities") or []
            if isinstance(e, Mapping) and "entity_id" in e
        )
    else:
        version, driver = doc.get("version"), doc.get("Driver Version Detected")
        gpus = list(range(len(doc.get("GPU Device IDs") or [])))
    tests = []
    for c, category in enumerate(categories):
        if not isinstance(category, Mapping):
            raise DcgmDiagError(f"test category {c} is not an object")
        cname = str(category.get("category") or f"category {c}")
        for t, test in enumerate(category.get("tests") or []):
            if test is None:
                continue
            where = f"{cname} test {t}"
            if not isinstance(test, Mapping) or not test.get("name"):
                raise DcgmDiagError(f"{where}: no name")
            where = f"{cname} test {test['name']!r}"
            results = _parse_results(test, layout, where)
            summary = test.get("test_summary")
            summary_warnings: list[str] = []
            if isinstance(summary, Mapping) and "status" in summary:
                status = _status(summary["status"], f"{where} test_summary")
                summary_warnings = _warnings(summary.get("warnings"), f"{where} test_summary")
            elif results:
                status = worst(r["status"] for r in results)
            else:
                raise DcgmDiagError(f"{where}: neither results nor a test_summary")
            tests.append(
                {
                    "category": cname,
                    "name": str(test["name"]),
                    "status": status,
                    "results": results,
                    "summary_warnings": summary_warnings,
                }
            )
    if not tests:
        raise DcgmDiagError("test_categories without a test: the output is cut short")
    named = {r["gpu"] for t in tests for r in t["results"] if r["gpu"] is not None}
    return {
        "layout": layout,
        "version": version,
        "driver": driver,
        "gpus": sorted(set(gpus) | named),
        "tests": tests,
    }


_ORDER = {FAIL: 3, WARN: 2, PASS: 1, SKIP: 0}


def worst(statuses) -> str:
    found = list(statuses)
    return max(found, key=lambda s: _ORDER[s]) if found else SKIP


def _short(texts: list[str], limit: int = 240) -> str:
    text = " | ".join(texts)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def judge(
    host: str,
    *,
    level: int,
    path: str,
    present: bool,
    rc: int | None = None,
    stdout: str = "",
    stderr: str = "",
    timeout_s: int | None = None,
) -> dict:
    """One node's DCGM diagnostic record and its violations: ``{"record": {...}, "violations": [...]}``.

    ``record.status``: ``passed`` (every test passed or was skipped; warnings allowed); ``failed``
    (a test failed on a GPU or the node: ``DCGM_DIAG_FAILED`` per GPU and test, naming the GPU
    index, the test and DCGM's warning text); ``error`` (dcgmi did not produce a result: not
    installed, timed out, exited without JSON, a runtime error or output that does not parse:
    ``DCGM_DIAG_RUN_FAILED``; never a pass). A warning result is ``DCGM_DIAG_WARNING`` (a warning).
    """
    field = f"{FIELD}.level"
    record: dict = {"host": host, "path": path, "level": level, "duration": DURATIONS.get(level)}
    found: list[dict] = []
    command = f"{path} diag -r {level} -j"

    def run_failed(reason: str) -> dict:
        record.update(status="error", reason=reason)
        found.append(
            violation(
                "DCGM_DIAG_RUN_FAILED",
                field,
                f"{command}: {reason}. A node whose GPU diagnostics did not run is not accepted; see the "
                "output in the report",
                host=host,
            )
        )
        return {"record": record, "violations": found}

    if not present:
        return run_failed(
            f"no executable dcgmi at {path} (DCGM is installed by the dcgm role: playbooks/gpu_stack.yml; "
            "or point acceptance_dcgmi at it)"
        )
    if rc in TIMEOUT_RCS:
        limit = f" after {timeout_s} s" if timeout_s else ""
        return run_failed(f"timed out{limit} (level {level} normally takes {DURATIONS.get(level)})")
    try:
        result = parse(stdout)
    except DcgmDiagError as exc:
        tail = " | ".join(ln.strip() for ln in f"{stdout}\n{stderr}".strip().splitlines()[-3:] if ln.strip())
        said = f"exited with status {rc}: " if rc not in (0, None) else ""
        return run_failed(f"{said}{exc}" + (f" (output: {tail[:200]})" if tail and rc not in (0, None) else ""))
    tests = result["tests"]
    failures = []
    warnings = []
    for test in tests:
        bad = [r for r in test["results"] if r["status"] in (FAIL, WARN)]
        for r in bad:
            entry = {
                "gpu": r["gpu"],
                "test": test["name"],
                "category": test["category"],
                "status": r["status"],
                "warnings": r["warnings"],
            }
            (failures if r["status"] == FAIL else warnings).append(entry)
        # A test that failed with no GPU's result failing: an error of the node (DCGM 4's test_summary).
        if test["status"] in (FAIL, WARN) and not [r for r in bad if r["status"] == test["status"]]:
            entry = {
                "gpu": None,
                "test": test["name"],
                "category": test["category"],
                "status": test["status"],
                "warnings": test["summary_warnings"],
            }
            (failures if test["status"] == FAIL else warnings).append(entry)
    counts = {s: sum(1 for t in tests for r in t["results"] if r["status"] == s) for s in (PASS, FAIL, WARN, SKIP)}
    record.update(
        status="failed" if failures else "passed",
        layout=result["layout"],
        version=result["version"],
        driver=result["driver"],
        gpus=result["gpus"],
        tests=[
            {
                "category": t["category"],
                "name": t["name"],
                "status": t["status"],
                "results": {("node" if r["gpu"] is None else str(r["gpu"])): r["status"] for r in t["results"]},
            }
            for t in tests
        ],
        counts=counts,
        failures=failures,
        warnings=warnings,
    )
    for f in failures:
        where = "the node" if f["gpu"] is None else f"GPU {f['gpu']}"
        text = _short(f["warnings"]) or "no warning text"
        found.append(
            violation(
                "DCGM_DIAG_FAILED",
                field,
                f"expected every test of {command} to pass; {where} failed test {f['test']} ({f['category']}): {text}",
                host=host,
            )
        )
    for w in warnings:
        where = "the node" if w["gpu"] is None else f"GPU {w['gpu']}"
        found.append(
            violation(
                "DCGM_DIAG_WARNING",
                field,
                f"{command}: {where} warned in test {w['test']} ({w['category']}): "
                f"{_short(w['warnings']) or 'no warning text'}",
                host=host,
                severity=WARNING,
            )
        )
    if not failures and rc not in (0, None):
        record.update(status="error", reason=f"exited with status {rc} although no test failed")
        found.append(
            violation(
                "DCGM_DIAG_RUN_FAILED",
                field,
                f"{command}: exited with status {rc} although its JSON names no failed test: the run is not "
                "trusted as a pass",
                host=host,
                severity=ERROR,
            )
        )
    return {"record": record, "violations": found}


def drain_reason(record: Mapping | None) -> str | None:
    """A short reason for ``scontrol ... Reason=``: the failed GPU(s) and test(s), or why dcgmi gave
    no result; None when the diagnostic passed or did not run."""
    if not isinstance(record, Mapping):
        return None
    level = record.get("level")
    if record.get("status") == "failed":
        named = []
        for f in record.get("failures") or []:
            gpu = "node" if f.get("gpu") is None else f"GPU {f['gpu']}"
            named.append(f"{gpu} {f.get('test')}")
        shown = ", ".join(dict.fromkeys(named[:4])) + (" ..." if len(named) > 4 else "")
        return f"dcgmi diag -r {level} failed: {shown}"
    if record.get("status") == "error":
        return f"dcgmi diag -r {level} gave no result: {str(record.get('reason') or '')[:80]}"
    return None


def summary(record: Mapping | None) -> str | None:
    """The record in a few words: ``-r 2 passed``, ``-r 2 failed: GPU 3 memory``, ``-r 2 gave no result: ...``."""
    if not isinstance(record, Mapping):
        return None
    if record.get("status") == "passed":
        return f"-r {record.get('level')} passed"
    reason = drain_reason(record) or ""
    return reason.replace("dcgmi diag ", "", 1) or f"-r {record.get('level')} {record.get('status')}"
