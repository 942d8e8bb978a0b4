"""The report page's boilerplate section (``dedupe --strip-boilerplate``): what was removed
before fingerprinting, and the most repeated units."""

from __future__ import annotations

import html
from typing import Any

COUNT_EXPLANATIONS = {
    "documents": "documents read",
    "documents_changed": "documents that lost at least one unit",
    "documents_emptied": "documents that were all boilerplate (fingerprinted whole)",
    "units": "units (lines or paragraphs) with words",
    "units_removed": "units removed before fingerprinting",
    "chars": "characters of the texts",
    "chars_removed": "characters removed",
    "boilerplate_units": "distinct units found to be boilerplate",
}


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def boilerplate_html(section: dict[str, Any] | None) -> str:
    """The section for ``report.json``'s ``boilerplate`` (empty without one)."""
    if not section:
        return ""
    settings, counts = section.get("settings", {}), section.get("counts", {})
    rule = (
        f"found in at least {settings.get('min_docs')} documents"
        if settings.get("mode") == "template"
        else "repeated after its first occurrence"
    )
    within = f" of one {_e(settings['group_col'])}" if settings.get("group_col") else ""
    count_rows = "".join(
        f"<tr><th>{_e(name)}</th><td class='num'>{int(counts[name]):,}</td>"
        f"<td class='explain'>{_e(meaning)}</td></tr>"
        for name, meaning in COUNT_EXPLANATIONS.items()
        if name in counts
    )
    grouped = any("group" in unit for unit in section.get("top_units", []))
    unit_rows = "".join(
        f"<tr><td class='num'>{int(unit['documents']):,}</td>"
        + (f"<td>{_e(unit.get('group'))}</td>" if grouped else "")
        + f"<td class='snippet'>{_e(unit.get('text') or '')}</td></tr>"
        for unit in section.get("top_units", [])
    )
    group_header = f"<th>{_e(settings.get('group_col'))}</th>" if grouped else ""
    return (
        '<section id="boilerplate"><h2>Boilerplate removed before fingerprinting</h2>'
        f"<p class='explain'>Each {_e(settings.get('unit', 'line'))} with at least "
        f"{_e(settings.get('min_words'))} words, {rule}{within}, was removed from the text "
        "the dedupe compared (shingles, sketches, verification, exact fingerprints); "
        "<code>deduplicated/</code> keeps the rows as they were.</p>"
        f"<table><tr><th>count</th><th>value</th><th>meaning</th></tr>{count_rows}</table>"
        f"<h3>Most repeated units</h3><table><tr><th>documents</th>{group_header}"
        f"<th>text</th></tr>{unit_rows}</table></section>"
    )
