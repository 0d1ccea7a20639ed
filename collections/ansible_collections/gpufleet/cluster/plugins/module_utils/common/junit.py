# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""JUnit XML for CI systems (Jenkins, GitLab, GitHub): a gate's result as a test run.

Standard library only (``xml.etree``). A case is a plain dict::

    {"suite": "gpu01",            # one <testsuite> per suite (a node, or "cluster")
     "name": "single-node all_reduce",   # the check
     "failures": ["message", ...],       # empty: the case passed
     "skipped": "why" | None,            # the check was not made for this suite
     "output": "text" | None}            # <system-out>: warnings, figures

:func:`junit_xml` renders them, in the order given, as ``<testsuites>`` with one
``<testsuite>`` per suite; a failure's ``message`` attribute is its first line, the
whole text is the element's body. Every case takes the classname ``<prefix>.<suite>``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable

# XML 1.0 cannot carry most control characters, and a log line may hold any of them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(value) -> str:
    return _NOT_XML.sub("?", str(value))


def case(suite: str, name: str, failures: Iterable[str] = (), skipped: str | None = None, output=None) -> dict:
    return {
        "suite": str(suite),
        "name": str(name),
        "failures": [str(f) for f in failures],
        "skipped": skipped,
        "output": output,
    }


def junit_xml(name: str, cases: Iterable[dict], *, prefix: str = "gpufleet", timestamp: str | None = None) -> str:
    """The cases as a JUnit XML document (a string with its XML declaration)."""
    cases = list(cases)
    root = ET.Element("testsuites", name=_text(name))
    suites: dict[str, ET.Element] = {}
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    counts: dict[str, dict[str, int]] = {}
    for c in cases:
        suite_name = _text(c.get("suite") or "cluster")
        suite = suites.get(suite_name)
        if suite is None:
            suite = ET.SubElement(root, "testsuite", name=suite_name)
            if timestamp:
                suite.set("timestamp", _text(timestamp))
            suites[suite_name] = suite
            counts[suite_name] = {"tests": 0, "failures": 0, "skipped": 0}
        element = ET.SubElement(
            suite, "testcase", classname=f"{_text(prefix)}.{suite_name}", name=_text(c.get("name") or "check")
        )
        counts[suite_name]["tests"] += 1
        failures = [str(f) for f in c.get("failures") or []]
        if failures:
            body = "\n".join(failures)
            fail = ET.SubElement(element, "failure", message=_text(failures[0].splitlines()[0][:500]), type="failure")
            fail.text = _text(body)
            counts[suite_name]["failures"] += 1
        elif c.get("skipped"):
            ET.SubElement(element, "skipped", message=_text(c["skipped"]))
            counts[suite_name]["skipped"] += 1
        if c.get("output"):
            out = ET.SubElement(element, "system-out")
            out.text = _text(c["output"])
    for suite_name, suite in suites.items():
        for key, value in counts[suite_name].items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("errors", "0")
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


__all__ = ["case", "junit_xml"]
