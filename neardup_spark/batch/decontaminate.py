"""Contamination on one Arrow batch of documents (pure: NumPy, PyArrow, the kernels).

Three per-batch functions share the words and hits of
:mod:`neardup_spark.kernels.contamination`: the reference grams each document holds (counted
over the corpus to drop common grams), the (document, item) matches, and the corpus rows
cleaned (contaminated documents dropped, or their spans cut out). The Spark stages
(:mod:`neardup_spark.stages.decontaminate`) run them in ``mapInArrow``; a small run calls them
here, on the same batches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from neardup_spark.kernels.contamination import (
    Matches,
    ReferenceGrams,
    cut_ranges,
    distinct_doc_grams,
    find_hits,
    item_matches,
    reference_grams,
)
from neardup_spark.kernels.contamination_words import cut_texts, text_words

# Seed of the word hashes (mmh3), the reference's and the corpus's alike.
WORD_SEED = 0
# Output columns of matches/ and of the gram counting pass.
DOC_ID, ITEM_ID, BENCHMARK, NGRAMS, ITEM_SHARE, SPANS = (
    "doc_id",
    "item_id",
    "benchmark",
    "ngrams",
    "item_share",
    "spans",
)
GRAM = "gram"
SPAN_TYPE = pa.list_(pa.struct([("start", pa.int64()), ("end", pa.int64())]))
# The pieces of a cut document are joined by this.
CUT_SEPARATOR = "\n"


@dataclass(frozen=True)
class Reference:
    """The benchmark items as a run ships them to its tasks: their grams, ids and benchmark
    file names (strings, in item order)."""

    grams: ReferenceGrams
    item_ids: pa.Array
    benchmarks: pa.Array

    @property
    def items(self) -> int:
        return len(self.item_ids)


def build_reference(texts: pa.Array, item_ids: pa.Array, benchmarks: pa.Array, n: int) -> Reference:
    """The :class:`Reference` of items (one text each); an item without words is a
    :class:`ValueError` naming its position."""
    grams = reference_grams(text_words(texts, WORD_SEED), n)
    return Reference(grams, item_ids.cast(pa.string()), benchmarks.cast(pa.string()))


def gram_docs_fn(ref: Reference, text_col: str) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """Batch -> ``gram`` (int64): one row per document and distinct reference gram it holds."""

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        words = text_words(batch.column(text_col), WORD_SEED)
        _, gram = distinct_doc_grams(find_hits(words, ref.grams))
        hashes = ref.grams.hashes[gram].view(np.int64)
        return pa.RecordBatch.from_arrays([pa.array(hashes, pa.int64())], names=[GRAM])

    return run


def batch_matches(batch: pa.RecordBatch, text_col: str, ref: Reference) -> Matches:
    """The (document, item) matches of one batch's texts."""
    words = text_words(batch.column(text_col), WORD_SEED)
    return item_matches(words, ref.grams, find_hits(words, ref.grams))


def matches_fn(
    ref: Reference, id_col: str, text_col: str
) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """Batch -> matches/ rows: ``doc_id`` (the document's id), ``item_id``, ``benchmark``,
    ``ngrams``, ``item_share`` and ``spans`` (list of ``start``, ``end``)."""

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        found = batch_matches(batch, text_col, ref)
        share = found.ngrams / np.maximum(ref.grams.item_grams[found.item], 1)
        spans = pa.ListArray.from_arrays(
            pa.array(found.span_offsets.astype(np.int32)),
            pa.StructArray.from_arrays(
                [pa.array(found.starts, pa.int64()), pa.array(found.ends, pa.int64())],
                names=["start", "end"],
            ),
        )
        columns = [
            batch.column(id_col).take(pa.array(found.doc)),
            ref.item_ids.take(pa.array(found.item)),
            ref.benchmarks.take(pa.array(found.item)),
            pa.array(found.ngrams, pa.int64()),
            pa.array(share, pa.float64()),
            spans,
        ]
        return pa.RecordBatch.from_arrays(
            columns, names=[DOC_ID, ITEM_ID, BENCHMARK, NGRAMS, ITEM_SHARE, SPANS]
        )

    return run


def clean_fn(
    ref: Reference, text_col: str, cut: bool, margin: int, min_chars: int
) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """Batch -> the same columns, less its contaminated documents; with ``cut``, those keep
    their text less each span widened by ``margin`` characters each side (merged; the pieces
    joined by :data:`CUT_SEPARATOR`) and are dropped only when fewer than ``min_chars``
    characters are left."""

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        texts = batch.column(text_col)
        words = text_words(texts, WORD_SEED)
        found = item_matches(words, ref.grams, find_hits(words, ref.grams))
        contaminated = np.zeros(batch.num_rows, dtype=bool)
        contaminated[found.doc] = True
        if not cut:
            return batch.filter(pa.array(~contaminated))
        doc, start, end = cut_ranges(found, words.doc_chars, margin)
        offsets = np.zeros(batch.num_rows + 1, dtype=np.int64)
        np.cumsum(np.bincount(doc, minlength=batch.num_rows), out=offsets[1:])
        cut_text, chars = cut_texts(texts, offsets, start, end, CUT_SEPARATOR)
        keep = ~contaminated | (chars >= min_chars)
        index = batch.schema.get_field_index(text_col)
        return batch.set_column(index, batch.schema.field(index), cut_text).filter(pa.array(keep))

    return run
