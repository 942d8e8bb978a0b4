"""A decontamination run's page: ``OUTPUT/report.html``, self-contained (no figures, no
network, no JavaScript), from its ``report.json``: the counts, items found per benchmark file,
the documents of each item, and the largest matches with their spans shown in context.

Only the texts of the largest matches' documents are read from the corpus (a PyArrow dataset
filter on their ids, :func:`~neardup_spark.report.largest_clusters.read_texts`); when ids repeat
in the corpus, a snippet is of the first document read with that id.
"""

from __future__ import annotations

import html
import json
from typing import Any

from neardup_spark.io.finished import child
from neardup_spark.io.output import REPORT_FILE, write_beside_run
from neardup_spark.io.storage import storage_for
from neardup_spark.report.html import CSS, REPORT_HTML
from neardup_spark.report.largest_clusters import read_texts, resolve_corpus

# Characters shown before and after a span; a longer span is shown by its two ends.
CONTEXT_CHARS = 80
SPAN_CHARS = 400
# Spans shown per match, and items listed under "documents per item".
SPANS_SHOWN = 3
ITEMS_SHOWN = 100


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _flat(text: str) -> str:
    return " ".join(text.split())


def span_snippet(text: str, start: int, end: int) -> str:
    """HTML of ``text[start:end]`` marked, with :data:`CONTEXT_CHARS` around it (spacing
    flattened; a span over :data:`SPAN_CHARS` shown by its ends around ``…``).

    >>> span_snippet("one two three four", 4, 9)
    'one <mark>two t</mark>hree four'
    """
    before = _flat(text[max(start - CONTEXT_CHARS, 0) : start])
    inside = text[start:end]
    if len(inside) > SPAN_CHARS:
        half = SPAN_CHARS // 2
        inside = _flat(inside[:half]) + " … " + _flat(inside[-half:])
    else:
        inside = _flat(inside)
    after = _flat(text[end : end + CONTEXT_CHARS])
    lead = "…" if start > CONTEXT_CHARS else ""
    tail = "…" if end + CONTEXT_CHARS < len(text) else ""
    gap_before = " " if text[max(start - 1, 0) : start].isspace() and before else ""
    gap_after = " " if text[end : end + 1].isspace() and after else ""
    return f"{lead}{_e(before)}{gap_before}<mark>{_e(inside)}</mark>{gap_after}{_e(after)}{tail}"


def _table(
    header: list[str], rows: list[list[str]], numeric: frozenset[int] | set[int] = frozenset()
) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{cell}</td>' if i in numeric else f"<td>{cell}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _summary(report: dict[str, Any]) -> str:
    rows = [[_e(k), f"{v:,}"] for k, v in report["counts"].items()]
    rows.append(["common n-grams dropped", f"{report.get('common_ngrams_dropped', 0):,}"])
    stages = [[_e(k), f"{v:.2f}"] for k, v in report.get("stage_seconds", {}).items()]
    plan = "; ".join(f"{k}: {v['where']} ({v['why']})" for k, v in report.get("plan", {}).items())
    return (
        "<h2>Summary</h2>"
        + _table(["count", "value"], rows, {1})
        + f'<p class="explain">Corpus pass: {_e(plan)}.</p>'
        + "<h3>Seconds per step</h3>"
        + _table(["step", "seconds"], stages, {1})
    )


def _benchmarks(report: dict[str, Any]) -> str:
    rows = [
        [
            _e(name),
            f"{b['items']:,}",
            f"{b['items_found']:,}",
            f"{b['items_found'] / max(b['items'], 1):.1%}",
        ]
        for name, b in sorted(report["benchmarks"].items())
    ]
    return "<h2>Items found per benchmark file</h2>" + _table(
        ["benchmark", "items", "found", "share found"], rows, {1, 2, 3}
    )


def _per_item(report: dict[str, Any]) -> str:
    found = report["documents_per_item"]
    rows = [
        [_e(r["benchmark"]), _e(r["item_id"]), f"{r['documents']:,}"] for r in found[:ITEMS_SHOWN]
    ]
    more = (
        f"<p class='muted'>{len(found) - ITEMS_SHOWN:,} more items.</p>"
        if len(found) > ITEMS_SHOWN
        else ""
    )
    return (
        "<h2>Documents per item</h2>"
        + (_table(["benchmark", "item", "documents"], rows, {2}) if rows else "<p>None found.</p>")
        + more
    )


def _largest(report: dict[str, Any], texts: dict[Any, str | None], problem: str | None) -> str:
    rows = []
    for m in report["largest_matches"]:
        text = texts.get(m["doc_id"])
        spans = m["spans"][:SPANS_SHOWN]
        if text is None:
            shown = f"<span class='muted'>{_e(problem or 'text not read')}</span>"
        else:
            shown = "<br>".join(span_snippet(text, s["start"], s["end"]) for s in spans)
            if len(m["spans"]) > SPANS_SHOWN:
                shown += (
                    f"<br><span class='muted'>{len(m['spans']) - SPANS_SHOWN} more spans</span>"
                )
        rows.append(
            [
                f"<span class='id'>{_e(m['doc_id'])}</span>",
                _e(m["benchmark"]),
                _e(m["item_id"]),
                f"{m['ngrams']:,}",
                f"{m['item_share']:.2f}",
                f'<div class="snippet">{shown}</div>',
            ]
        )
    return (
        "<h2>Largest matches</h2><p class='explain'>The matches with the most n-grams; each span "
        "marked in its document, with its context.</p>"
        + _table(["document", "benchmark", "item", "n-grams", "share", "spans"], rows, {3, 4})
    )


def render_page(report: dict[str, Any], texts: dict[Any, str | None], problem: str | None) -> str:
    """The page of a decontamination run's ``report``, the largest matches' ``texts`` by id."""
    title = f"Decontamination: {_e(report.get('input', ''))}"
    css = CSS + "mark { background: #fde7c8; }\n"
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{css}</style></head><body><h1>{title}</h1>"
        f"<p class='muted'>run {_e(report.get('run_id', ''))}, reference "
        f"{_e(', '.join(report.get('reference', [])))}</p>"
        + _summary(report)
        + _benchmarks(report)
        + _per_item(report)
        + _largest(report, texts, problem)
        + "</body></html>"
    )


def write_decontamination_report(output: str, input_path: str | None = None) -> str:
    """Write ``OUTPUT/report.html`` for the decontamination run in ``output``; its path."""
    storage = storage_for(None, output)
    raw = storage.read_text(child(output, REPORT_FILE))
    if raw is None:
        raise FileNotFoundError(f"no {REPORT_FILE} in {output}")
    report = json.loads(raw)
    config = report.get("config", {})
    ids = sorted({m["doc_id"] for m in report["largest_matches"]}, key=str)
    corpus = resolve_corpus(report, output, input_path)
    texts: dict[Any, str | None] = {}
    problem = None if corpus else "the corpus is not known"
    if corpus and ids:
        texts, problem = read_texts(
            corpus, config.get("id_col", "id"), config.get("text_col", "text"), ids
        )
    page = render_page(report, texts, problem)
    write_beside_run(storage, output, REPORT_HTML, page.encode("utf-8"))
    return child(output, REPORT_HTML)
