# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Safe text rendering of violations: escapes control characters, adds a summary line."""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.violation import ERROR, WARNING, format_text


def safe_text(value: object, limit: int = 200) -> str | None:
    """Printable form of a host name / message: control characters escaped, length bounded."""
    if value is None:
        return None
    text = str(value)
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def summary_line(violations: list[dict]) -> str:
    errors = sum(1 for v in violations if v.get("severity") == ERROR)
    warnings = sum(1 for v in violations if v.get("severity") == WARNING)
    return f"{errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}"


def format_report(violations: list[dict], summary: bool = True) -> str:
    safe = [
        {
            **v,
            "host": safe_text(v.get("host"), 80),
            "field": safe_text(v.get("field"), 120) or "",
            "message": safe_text(v.get("message"), 400) or "",
            "code": safe_text(v.get("code"), 60) or "",
        }
        for v in violations
    ]
    text = format_text(safe)
    if summary:
        text = f"{text}\n{summary_line(violations)}" if text else summary_line(violations)
    return text


__all__ = ["format_report", "safe_text", "summary_line"]
