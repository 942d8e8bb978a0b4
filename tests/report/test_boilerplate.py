"""The report page's boilerplate section: counts, the most repeated units (escaped), and no
section for a run without --strip-boilerplate."""

from __future__ import annotations

from neardup_spark.report.boilerplate import boilerplate_html
from neardup_spark.report.figures import figure_pngs
from neardup_spark.report.html import render_html

SECTION = {
    "settings": {"unit": "line", "mode": "template", "min_docs": 5, "min_words": 2},
    "counts": {"documents": 1200, "units_removed": 9000, "boilerplate_units": 41},
    "top_units": [
        {"text": "Home | News <b>Sport</b>", "documents": 1100},
        {"text": "© 2024 Example", "documents": 980},
    ],
}


def test_section_shows_counts_and_escaped_units():
    page = boilerplate_html(SECTION)
    assert "found in at least 5 documents" in page
    assert "<td class='num'>1,200</td>" in page and "9,000" in page
    assert "Home | News &lt;b&gt;Sport&lt;/b&gt;" in page and "<b>Sport" not in page
    assert page.index("1,100") < page.index("980")
    grouped = {**SECTION, "settings": {**SECTION["settings"], "group_col": "host"}}
    grouped["top_units"] = [{**u, "group": "a.example"} for u in SECTION["top_units"]]
    assert "of one host" in boilerplate_html(grouped) and "a.example" in boilerplate_html(grouped)


def test_page_has_the_section_only_with_stripping(data):
    pngs = figure_pngs(data)
    assert boilerplate_html(None) == "" and 'id="boilerplate"' not in render_html(data, pngs)
    page = render_html({**data, "boilerplate": SECTION}, pngs)
    assert page.index('id="boilerplate"') < page.index('id="stages"')
