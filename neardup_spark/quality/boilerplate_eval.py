"""Measuring the boilerplate defaults (unit, ``min_docs``, ``min_words``, grouping) on a
generated site-template corpus and on real crawled pages (``neardup eval-boilerplate``).

The template-mode rule is applied in-process with the job's own kernels (the same unit keys,
token counts and document counts as :mod:`neardup_spark.batch.boilerplate`; a test checks the
result equals the Spark job's), so a grid of settings costs one pass over the texts:

* generated pages (:mod:`~neardup_spark.quality.templates`): the share of planted template
  lines removed and of body characters kept;
* real pages, ingested twice (``neardup ingest --extract text`` and ``--extract main``): a line
  of the full visible text is *chrome* when the main-content extraction of the same page does
  not hold it, else *content*; the share of chrome lines removed and of content characters
  removed (the harm).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from neardup_spark.kernels.boilerplate import (
    UNIT_HASH_SEED,
    first_in_document,
    remove_units,
    unit_features,
    unit_keys,
)
from neardup_spark.kernels.compiled_words import string_hashes
from neardup_spark.kernels.jaccard import jaccard
from neardup_spark.kernels.normalize import normalize_texts
from neardup_spark.kernels.shingles import shingle_sets
from neardup_spark.quality.templates import generate_template_corpus, template_removal

MIN_DOCS = (2, 3, 5, 10, 20)
MIN_WORDS = (1, 2, 3, 4)
UNITS = ("line", "paragraph")


@dataclass(frozen=True)
class CountedUnits:
    """Every unit of a corpus with its key's document count (within its group, if any)."""

    texts: pa.Array
    features: Any  # kernels.boilerplate.UnitFeatures
    documents: np.ndarray  # int64 per unit: documents holding its key


def counted_units(texts: pa.Array, unit: str, groups: pa.Array | None = None) -> CountedUnits:
    """Split, hash and count (distinct documents per key, as the job counts them)."""
    features = unit_features(texts, unit)
    doc_of_unit = features.units.doc_of_unit()
    salts = None if groups is None else string_hashes(groups, UNIT_HASH_SEED)
    keys = unit_keys(features.hashes, doc_of_unit, salts)
    everything = np.ones(keys.size, dtype=bool)
    first = first_in_document(features.units, keys, everything)
    distinct, counts = np.unique(keys[first], return_counts=True)
    documents = counts[np.searchsorted(distinct, keys)] if keys.size else np.zeros(0, np.int64)
    return CountedUnits(texts, features, documents)


def cleaned_texts(counted: CountedUnits, min_docs: int, min_words: int) -> pa.Array:
    """The texts without the units template mode removes at these settings."""
    remove = (counted.documents >= min_docs) & (counted.features.tokens >= min_words)
    return remove_units(counted.features, remove).texts


def template_grid(
    n_docs: int = 10_800,
    seed: int = 1,
    min_docs: Sequence[int] = MIN_DOCS,
    min_words: Sequence[int] = MIN_WORDS,
) -> list[dict[str, Any]]:
    """Template lines removed and body kept on a generated template corpus, per setting."""
    corpus, _, lines = generate_template_corpus(n_docs, seed)
    texts = corpus.column("text").combine_chunks()
    rows = []
    for unit in UNITS:
        for grouped in (False, True):
            counted = counted_units(texts, unit, corpus.column("site") if grouped else None)
            for docs in min_docs:
                for words in min_words:
                    cleaned = pa.table(
                        {"id": corpus.column("id"), "text": cleaned_texts(counted, docs, words)}
                    )
                    scores = template_removal(cleaned, lines)
                    rows.append(
                        {
                            "unit": unit,
                            "grouped": grouped,
                            "min_docs": docs,
                            "min_words": words,
                            "template_removed": scores["template_removed_share"],
                            "body_kept": scores["body_kept_share"],
                        }
                    )
    return rows


def _lines(text: str | None) -> list[str]:
    return [line for line in (text or "").split("\n") if line.strip()]


def chrome_and_content(full: Iterable[str | None], main: Iterable[str | None]) -> list[list[bool]]:
    """Per page, per non-blank line of the full text: is it chrome (not in the page's main
    content, compared after normalisation)?"""
    labels = []
    for page, content in zip(full, main, strict=True):
        lines = _lines(page)
        normalized = normalize_texts(pa.array(lines, pa.string())).to_pylist() if lines else []
        kept = Counter(normalize_texts(pa.array(_lines(content), pa.string())).to_pylist())
        page_labels = []
        for line in normalized:
            in_main = bool(line) and kept[line] > 0
            if in_main:
                kept[line] -= 1
            page_labels.append(not in_main)
        labels.append(page_labels)
    return labels


def real_page_grid(
    text_corpus: str,
    main_corpus: str,
    min_docs: Sequence[int] = MIN_DOCS,
    min_words: Sequence[int] = MIN_WORDS,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Chrome lines removed and content characters removed on real pages, per setting (line
    units, no grouping: the samples hold one or two pages per site). Returns ``(totals, rows)``."""
    full = ds.dataset(text_corpus, format="parquet").to_table(columns=["id", "text"])
    main = ds.dataset(main_corpus, format="parquet").to_table(columns=["id", "text"])
    main_of = dict(zip(main.column("id").to_pylist(), main.column("text").to_pylist(), strict=True))
    ids = full.column("id").to_pylist()
    pages = [line for line in full.column("text").to_pylist()]
    # The lines themselves are the units: a page as its non-blank lines, one per line.
    texts = pa.array(["\n".join(_lines(p)) for p in pages], pa.string())
    labels = chrome_and_content(texts.to_pylist(), [main_of.get(i) for i in ids])
    counted = counted_units(texts, "line")
    flat = np.array([x for page in labels for x in page], dtype=bool)
    lengths = np.diff(counted.features.units.bounds)
    totals = {
        "pages": len(pages),
        "lines": int(flat.size),
        "chrome_lines": int(flat.sum()),
        "content_chars": int(lengths[~flat].sum()),
    }
    rows = []
    for docs in min_docs:
        for words in min_words:
            remove = (counted.documents >= docs) & (counted.features.tokens >= words)
            rows.append(
                {
                    "min_docs": docs,
                    "min_words": words,
                    "chrome_removed": float(remove[flat].sum() / max(flat.sum(), 1)),
                    "content_chars_removed": float(
                        lengths[remove & ~flat].sum() / max(totals["content_chars"], 1)
                    ),
                    "content_lines_removed": int((remove & ~flat).sum()),
                }
            )
    return totals, rows


def score_template_run(output: str, template_dir: str, threshold: float = 0.8) -> dict[str, Any]:
    """A dedupe run over a generated template corpus (``template_dir`` as ``neardup generate
    --templates`` writes it): the share of cross-site copies in one cluster, and of the run's
    pairs whose *bodies* (the pages without their templates) reach ``threshold`` (exact word
    5-shingle Jaccard, default normalisation)."""
    clusters = ds.dataset(f"{output}/clusters", format="parquet").to_table()
    pairs = ds.dataset(f"{output}/pairs", format="parquet").to_table(columns=["doc_a", "doc_b"])
    truth = ds.dataset(f"{template_dir}/truth", format="parquet").to_table()
    lines = ds.dataset(f"{template_dir}/lines", format="parquet").to_table(columns=["id", "body"])
    cluster_of = dict(
        zip(
            clusters.column("doc_id").to_pylist(),
            clusters.column("cluster_id").to_pylist(),
            strict=True,
        )
    )
    copies = list(
        zip(truth.column("doc_a").to_pylist(), truth.column("doc_b").to_pylist(), strict=True)
    )
    joined = sum(cluster_of[a] == cluster_of[b] for a, b in copies)
    row_of = {doc_id: i for i, doc_id in enumerate(lines.column("id").to_pylist())}
    sets = shingle_sets(normalize_texts(lines.column("body").combine_chunks()), 5, 42, True)
    a = [row_of[d] for d in pairs.column("doc_a").to_pylist()]
    b = [row_of[d] for d in pairs.column("doc_b").to_pylist()]
    similar = sum(jaccard(sets.doc(x), sets.doc(y)) >= threshold for x, y in zip(a, b, strict=True))
    return {
        "cross_site_copies": len(copies),
        "copies_joined": joined / len(copies) if copies else None,
        "pairs": pairs.num_rows,
        "pairs_similar_bodies": similar / pairs.num_rows if pairs.num_rows else None,
    }
