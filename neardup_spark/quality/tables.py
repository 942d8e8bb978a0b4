"""Markdown tables for the tools' printed results (evaluate, bench, eval-extract)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any


def format_cell(value: Any, digits: int = 4) -> str:
    """``None`` as ``-``, floats with ``digits`` decimals, integers with thousands separators."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Collection[int] | None = None
) -> str:
    """A Markdown table with aligned columns. Cells are formatted by :func:`format_cell`;
    columns in ``right`` are right-aligned (default: the columns holding only numbers).

    >>> print(markdown_table(["name", "n"], [["a", 1200], ["bb", None]]))
    | name |     n |
    |------|------:|
    | a    | 1,200 |
    | bb   |     - |
    """
    cells = [[format_cell(c) for c in row] for row in rows]
    if right is None:
        right = {
            i
            for i in range(len(headers))
            if rows and all(isinstance(row[i], int | float) or row[i] is None for row in rows)
        }
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if i in right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return "| " + " | ".join(parts) + " |"

    rule = "|" + "|".join(
        "-" * (w + 1) + ":" if i in right else "-" * (w + 2) for i, w in enumerate(widths)
    )
    return "\n".join([line(headers), rule + "|", *(line(r) for r in cells)])
