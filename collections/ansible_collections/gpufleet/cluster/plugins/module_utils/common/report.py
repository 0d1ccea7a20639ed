# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Safe text rendering of violations: escapes control characters, adds a summary line."""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.common.violation import ERROR, WARNING, format_text


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


def markdown_cell(value: object) -> str:
    """One Markdown table cell: ``-`` for nothing, yes/no, lists joined, ``|`` escaped, at most 400 characters."""
    if value is None or value == "" or value == []:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(markdown_cell(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={markdown_cell(v)}" for k, v in value.items())
    text = str(value)
    if not text.isprintable():
        text = text.encode("unicode_escape").decode("ascii")
    return text.replace("|", "\\|")[:400]


def markdown_table(headers: list[str], rows: list) -> list[str]:
    """A Markdown table's lines: the header, the rule, one line per row of cells."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows]
    return lines
