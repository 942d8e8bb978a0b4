"""report.json of a decontamination run: counts, items found per benchmark file, documents per
item, and the largest matches (from matches/ as an Arrow table)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark.batch.decontaminate import (
    BENCHMARK,
    DOC_ID,
    ITEM_ID,
    ITEM_SHARE,
    NGRAMS,
    Reference,
)
from neardup_spark.config.decontaminate import TOP_MATCHES, DecontaminateConfig
from neardup_spark.io.reference import ReferenceItems


def per_item(matches: pa.Table) -> list[dict[str, Any]]:
    """Documents holding each item found, the most first."""
    grouped = matches.group_by([BENCHMARK, ITEM_ID]).aggregate([(DOC_ID, "count_distinct")])
    rows = grouped.rename_columns([BENCHMARK, ITEM_ID, "documents"]).to_pylist()
    return sorted(rows, key=lambda r: (-r["documents"], r[BENCHMARK], r[ITEM_ID]))


def per_benchmark(items: ReferenceItems, found: list[dict[str, Any]]) -> dict[str, Any]:
    """Items and items found per benchmark file."""
    totals = pc.value_counts(items.benchmarks).to_pylist()
    out = {t["values"]: {"items": t["counts"], "items_found": 0} for t in totals}
    for row in found:
        out[row[BENCHMARK]]["items_found"] += 1
    return out


def largest_matches(matches: pa.Table, top: int = TOP_MATCHES) -> list[dict[str, Any]]:
    """The ``top`` matches with the most n-grams (ties: larger share, then by names)."""
    order = [(NGRAMS, "descending"), (ITEM_SHARE, "descending"), (BENCHMARK, "ascending")]
    order += [(ITEM_ID, "ascending"), (DOC_ID, "ascending")]
    return matches.sort_by(order).slice(0, top).to_pylist()


def report_section(
    matches: pa.Table,
    items: ReferenceItems,
    ref: Reference,
    documents: int,
    clean_rows: int,
    config: DecontaminateConfig,
) -> dict[str, Any]:
    """The report's counts and tables."""
    contaminated = len(pc.unique(matches.column(DOC_ID))) if matches.num_rows else 0
    found = per_item(matches) if matches.num_rows else []
    removed = documents - clean_rows
    counts = {
        "documents": documents,
        "contaminated": contaminated,
        "removed": removed,
        "cut": contaminated - removed if config.cut_spans else 0,
        "clean": clean_rows,
        "items": ref.items,
        "items_found": len(found),
        "matches": matches.num_rows,
    }
    return {
        "counts": counts,
        "benchmarks": per_benchmark(items, found),
        "documents_per_item": found,
        "largest_matches": largest_matches(matches) if matches.num_rows else [],
    }
