"""Contamination on Arrow batches of documents (pure: NumPy, PyArrow, the kernels).

The corpus's texts are tokenised once, by :func:`hit_rows`: one small row per occurrence of a
reference gram in a document (its row key, id, gram, first and last word, characters), and per
batch one row counting its documents. The rest works on those rows and never reads a text again:
the documents holding each gram (:func:`common_grams`, to drop the common ones), the (document,
item) matches with merged spans (:func:`hit_matches`). The cleaned corpus
(:func:`clean_rows_fn`) reads the rows again but tokenises only those whose id is a
contaminated document's. The Spark stages (:mod:`neardup_spark.stages.decontaminate`) run these
in ``mapInArrow``; a small run calls them here, on the same batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neardup_spark.batch.input_reads import read_row_group
from neardup_spark.kernels.contamination import (
    Hits,
    Matches,
    ReferenceGrams,
    cut_ranges,
    distinct_doc_grams,
    find_hits,
    item_matches,
    reference_grams,
    span_matches,
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
# Columns of the hit rows (:func:`hit_rows`) besides ``doc_id`` and ``gram``.
ROW, FIRST, LAST, START, END, ROWS = "row", "first", "last", "start", "end", "rows"
HIT_COLUMNS = [ROW, DOC_ID, GRAM, FIRST, LAST, START, END, ROWS]
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


def hit_rows(
    ref: Reference, batch: pa.RecordBatch, rows: np.ndarray, id_col: str, text_col: str
) -> pa.RecordBatch:
    """The hit rows of one batch whose documents have the unique int64 keys ``rows``: one per
    occurrence of a reference gram in a document, ``row`` (its key), ``doc_id`` (its id),
    ``gram`` (the gram's index in the reference), ``first`` and ``last`` (its words' indices in
    the document), ``start`` and ``end`` (characters, as a span's) and ``rows`` 0; then one
    row counting the batch's documents: ``gram`` -1, ``rows`` the batch's rows, the rest 0 or
    null."""
    words = text_words(batch.column(text_col), WORD_SEED)
    hits = find_hits(words, ref.grams)
    base = words.doc_offsets[hits.doc]
    count = len(hits.doc)
    taken = np.append(hits.doc, 0)
    summary = np.zeros(count + 1, dtype=bool)
    summary[-1] = True
    ids = batch.column(id_col).take(pa.array(taken, mask=summary))
    columns = [
        pa.array(np.append(np.asarray(rows, dtype=np.int64)[hits.doc], -1)),
        ids,
        pa.array(np.append(hits.gram, -1)),
        pa.array(np.append(hits.first - base, 0)),
        pa.array(np.append(hits.last - base, 0)),
        pa.array(np.append(words.starts[hits.first], 0)),
        pa.array(np.append(words.ends[hits.last], 0)),
        pa.array(np.append(np.zeros(count, dtype=np.int64), batch.num_rows)),
    ]
    return pa.RecordBatch.from_arrays(columns, names=HIT_COLUMNS)


def hit_rows_fn(
    ref: Reference, row_col: str, id_col: str, text_col: str
) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """Batch (``row_col``: a unique int64 key per document) -> :func:`hit_rows`."""

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        rows = batch.column(row_col).to_numpy(zero_copy_only=False)
        return hit_rows(ref, batch, rows, id_col, text_col)

    return run


# A local Parquet file's path, a row group's number in it, and the row key of its first row.
KeyedRowGroup = tuple[str, int, int]
# Row keys of row group g (in the order of all of them) start at g << ROW_GROUP_KEY_BITS.
ROW_GROUP_KEY_BITS = 32


def row_group_hits_fn(
    ref: Reference,
    tasks: Sequence[Sequence[KeyedRowGroup]],
    columns: tuple[str, str],
    id_type: pa.DataType,
    batch_rows: int,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Task numbers -> the :func:`hit_rows` of those tasks' row groups, which the task reads
    itself (the id and text ``columns`` only; ``doc_id`` cast to ``id_type``), each document
    keyed by its row group's first key plus its row in it. Input column: a task's number."""

    def read(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column(0).to_pylist():
                for path, group, base in tasks[task]:
                    with pq.ParquetFile(path) as parquet:
                        rows = read_row_group(parquet, path, group, columns)
                    start = base
                    for part in rows.to_batches(max_chunksize=batch_rows):
                        keys = start + np.arange(part.num_rows, dtype=np.int64)
                        start += part.num_rows
                        found = hit_rows(ref, part, keys, columns[0], columns[1])
                        ids = found.column(1).cast(id_type)
                        yield found.set_column(1, pa.field(DOC_ID, id_type), ids)

    return read


def documents_of(hits: pa.Table) -> int:
    """The documents that hit rows were found in (their batches' count rows summed)."""
    return int(pc.sum(hits.column(ROWS)).as_py() or 0)


def common_grams(hits: pa.Table, limit: int) -> np.ndarray:
    """The grams (reference indices) of hit rows held by more than ``limit`` documents."""
    gram = hits.column(GRAM).to_numpy()
    row = hits.column(ROW).to_numpy()
    found = gram >= 0
    _, held = distinct_doc_grams(Hits(row[found], gram[found], gram[found], gram[found]))
    counted, docs = np.unique(held, return_counts=True)
    return counted[docs > limit].astype(np.int64)


def hit_matches(ref: Reference, hits: pa.Table, dropped: np.ndarray) -> pa.RecordBatch:
    """matches/ rows from hit rows (every hit of each document they hold; the count rows and
    the grams ``dropped`` left out): ``doc_id``, ``item_id``, ``benchmark``, ``ngrams``,
    ``item_share`` and ``spans`` (list of ``start``, ``end``), by row key, then item."""
    gram = hits.column(GRAM).to_numpy()
    keep = (gram >= 0) & ~np.isin(gram, dropped)
    kept = hits.filter(pa.array(keep))
    row = kept.column(ROW).to_numpy()
    cols = [kept.column(c).to_numpy() for c in (GRAM, FIRST, LAST, START, END)]
    found = span_matches(ref.grams, Hits(row, *cols[:3]), cols[3], cols[4])
    keys, at = np.unique(row, return_index=True)
    doc_ids = kept.column(DOC_ID).take(pa.array(at[np.searchsorted(keys, found.doc)]))
    return matches_batch(ref, found, doc_ids.combine_chunks())


def matches_batch(ref: Reference, found: Matches, doc_ids: pa.Array) -> pa.RecordBatch:
    """matches/ rows of ``found``, its documents' ids ``doc_ids`` (one per match)."""
    share = found.ngrams / np.maximum(ref.grams.item_grams[found.item], 1)
    spans = pa.ListArray.from_arrays(
        pa.array(found.span_offsets.astype(np.int32)),
        pa.StructArray.from_arrays(
            [pa.array(found.starts, pa.int64()), pa.array(found.ends, pa.int64())],
            names=["start", "end"],
        ),
    )
    columns = [
        doc_ids,
        ref.item_ids.take(pa.array(found.item)),
        ref.benchmarks.take(pa.array(found.item)),
        pa.array(found.ngrams, pa.int64()),
        pa.array(share, pa.float64()),
        spans,
    ]
    return pa.RecordBatch.from_arrays(
        columns, names=[DOC_ID, ITEM_ID, BENCHMARK, NGRAMS, ITEM_SHARE, SPANS]
    )


def matches_fn(
    ref: Reference, id_col: str, text_col: str
) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """Batch -> matches/ rows (:func:`hit_matches` of its :func:`hit_rows`)."""

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        hits = hit_rows(ref, batch, np.arange(batch.num_rows), id_col, text_col)
        return hit_matches(ref, pa.Table.from_batches([hits]), np.zeros(0, dtype=np.int64))

    return run


def cleaned(
    batch: pa.RecordBatch, ref: Reference, text_col: str, cut: bool, margin: int, min_chars: int
) -> tuple[np.ndarray, pa.Array | None]:
    """Which rows of ``batch`` stay (bool), and with ``cut`` its texts with their spans cut."""
    texts = batch.column(text_col)
    words = text_words(texts, WORD_SEED)
    found = item_matches(words, ref.grams, find_hits(words, ref.grams))
    contaminated = np.zeros(batch.num_rows, dtype=bool)
    contaminated[found.doc] = True
    if not cut:
        return ~contaminated, None
    doc, start, end = cut_ranges(found, words.doc_chars, margin)
    offsets = np.zeros(batch.num_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(doc, minlength=batch.num_rows), out=offsets[1:])
    cut_text, chars = cut_texts(texts, offsets, start, end, CUT_SEPARATOR)
    return ~contaminated | (chars >= min_chars), cut_text


def clean_fn(
    ref: Reference, text_col: str, cut: bool, margin: int, min_chars: int
) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """Batch -> the same columns, less its contaminated documents; with ``cut``, those keep
    their text less each span widened by ``margin`` characters each side (merged; the pieces
    joined by :data:`CUT_SEPARATOR`) and are dropped only when fewer than ``min_chars``
    characters are left."""

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        keep, cut_text = cleaned(batch, ref, text_col, cut, margin, min_chars)
        if cut_text is not None:
            index = batch.schema.get_field_index(text_col)
            batch = batch.set_column(index, batch.schema.field(index), cut_text)
        return batch.filter(pa.array(keep))

    return run


def suspects(ids: pa.Array, contaminated: pa.Array) -> np.ndarray:
    """Which ``ids`` are among the ``contaminated`` ones (every row when the id type cannot
    be looked up)."""
    try:
        found = pc.is_in(ids, value_set=contaminated.cast(ids.type))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return np.ones(len(ids), dtype=bool)
    return found.to_numpy(zero_copy_only=False).astype(bool)


def clean_rows_fn(
    ref: Reference,
    id_col: str,
    text_col: str,
    cut: bool,
    margin: int,
    min_chars: int,
    contaminated: pa.Array,
) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """:func:`clean_fn`, tokenising only the rows whose id is among the ``contaminated``
    documents' ids (the rest pass as they are). A row is judged on its own text, so a clean
    document sharing its id with a contaminated one stays."""

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        if not len(contaminated) or not batch.num_rows:
            return batch
        at = np.flatnonzero(suspects(batch.column(id_col), contaminated))
        if not len(at):
            return batch
        keep = np.ones(batch.num_rows, dtype=bool)
        keep[at], cut_text = cleaned(batch.take(at), ref, text_col, cut, margin, min_chars)
        if cut_text is not None:
            index = batch.schema.get_field_index(text_col)
            position = np.arange(batch.num_rows)
            position[at] = batch.num_rows + np.arange(len(at))
            texts = pa.concat_arrays([batch.column(index), cut_text]).take(pa.array(position))
            batch = batch.set_column(index, batch.schema.field(index), texts)
        return batch.filter(pa.array(keep))

    return run
