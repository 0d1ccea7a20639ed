"""The one renderer of the plain-text tables the CLI prints on a terminal (column-aligned lines).

Markdown tables, in the reports and in ``gpufleet report``'s output, are the collection's
``common.report.markdown_table``, the renderer the report files are written with.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence


def columns(
    rows: Iterable[Sequence],
    head: Sequence | None = None,
    *,
    right: Collection[int] = (),
    min_widths: Sequence[int] = (),
    indent: str = "",
    gap: str | Sequence[str] = "  ",
) -> list[str]:
    """Each row (the header first, when given) as one line of aligned columns.

    ``right``: the indexes of the right-aligned columns (figures); the others are left-aligned, and a
    left-aligned last column is not padded (it holds free text). ``min_widths``: the least width of
    each column (a fixed layout, widened by a longer value rather than pushed out of line).
    ``indent``: before every line. ``gap``: between two columns, or one gap per column boundary.
    """
    lines = [[str(c) for c in r] for r in ([head] if head is not None else []) + [list(r) for r in rows]]
    if not lines:
        return []
    count = max(len(r) for r in lines)
    widths = [max([len(r[i]) for r in lines if i < len(r)] + list(min_widths[i : i + 1])) for i in range(count)]
    gaps = [gap] * (count - 1) if isinstance(gap, str) else list(gap)
    out = []
    for r in lines:
        cells = [
            c.rjust(widths[i]) if i in right else c if i == len(r) - 1 else c.ljust(widths[i]) for i, c in enumerate(r)
        ]
        out.append(indent + cells[0] + "".join(g + c for g, c in zip(gaps, cells[1:], strict=False)))
    return out
