"""Markdown tables of the tools' printed results: cell formats and column alignment."""

from __future__ import annotations

import doctest

from neardup_spark.quality import tables
from neardup_spark.quality.tables import format_cell, markdown_table


def test_the_docstring_example_holds():
    results = doctest.testmod(tables)
    assert results.attempted > 0 and results.failed == 0


def test_format_cell():
    assert format_cell(None) == "-"
    assert format_cell(1 / 3) == "0.3333" and format_cell(2.0, digits=1) == "2.0"
    assert format_cell(1234567) == "1,234,567"
    assert format_cell("0.9-1.0") == "0.9-1.0"


def test_numeric_columns_align_right_and_others_left():
    text = markdown_table(["band", "pairs", "recall"], [["0.8-0.9", 12, 0.5], ["0.9-1.0", 3, None]])
    assert text.splitlines() == [
        "| band    | pairs | recall |",
        "|---------|------:|-------:|",
        "| 0.8-0.9 |    12 | 0.5000 |",
        "| 0.9-1.0 |     3 |      - |",
    ]
    forced = markdown_table(["a", "b"], [["x", 1]], right={0})
    assert forced.splitlines()[1:] == ["|--:|---|", "| x | 1 |"]
    assert markdown_table(["a"], []).splitlines() == ["| a |", "|---|"]
