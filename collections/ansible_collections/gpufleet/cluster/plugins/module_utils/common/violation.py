# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""The one shape every gpufleet gate reports in.

A violation is a plain dict ``{severity, code, host, field, message}`` so it
crosses the Ansible boundary (filters, module results, JSON reports) as is.
``message`` says what was expected and what was found.
"""

from __future__ import annotations

ERROR = "error"
WARNING = "warning"
SEVERITIES = (ERROR, WARNING)


def violation(code: str, field: str, message: str, host: str | None = None, severity: str = ERROR) -> dict:
    """Build one violation; ``host`` is None for brief-wide problems."""
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, got {severity!r}")
    return {"severity": severity, "code": code, "host": host, "field": field, "message": message}


def has_errors(violations: list[dict]) -> bool:
    return any(v.get("severity") == ERROR for v in violations)


def sort_key(v: dict) -> tuple:
    """Errors first, then by host (brief-wide first), field and code: a stable report order."""
    return (v.get("severity") != ERROR, v.get("host") or "", v.get("field") or "", v.get("code") or "")


def format_text(violations: list[dict]) -> str:
    """One line per violation, as operators read them in a terminal or a failed assert."""
    lines = []
    for v in sorted(violations, key=sort_key):
        where = f"{v['host']}: " if v.get("host") else ""
        lines.append(f"{v['severity'].upper():7} {v['code']:<28} {where}{v['field']}: {v['message']}")
    return "\n".join(lines)
