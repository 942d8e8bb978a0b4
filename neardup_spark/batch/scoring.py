"""Scoring candidate pairs on Arrow batches: exact Jaccard of the shingle-hash sets, the
MinHash estimate and the containment of the smaller set in the larger, from side rows that a
shuffle brought together."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark.batch.documents import shingle_sets_fn
from neardup_spark.columns import (
    CONTAINMENT,
    DOC_A,
    DOC_B,
    ESTIMATE,
    JACCARD,
    SHINGLES,
    SKETCH,
    TEXT,
)
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.arrow_buffers import csr_from_binary
from neardup_spark.kernels.jaccard import pair_scores

SIDE = "side"  # 0: the row carries doc_a's data, 1: doc_b's


def score_pairs(pairs: pa.Table) -> pa.RecordBatch:
    """Rows ``2i`` (doc_a's side) and ``2i + 1`` (doc_b's side) -> one scored pair each."""
    a = pairs.take(np.arange(0, pairs.num_rows, 2))
    b = pairs.take(np.arange(1, pairs.num_rows, 2))
    # Every pair has exactly one row per side (ids are unique): anything else is a bug.
    same_pair = pc.and_(
        pc.equal(a.column(DOC_A), b.column(DOC_A)), pc.equal(a.column(DOC_B), b.column(DOC_B))
    )
    if not pc.all(same_pair).as_py():
        raise RuntimeError("verification: a candidate pair did not find both documents")
    off_a, val_a = csr_from_binary(a.column(SHINGLES).combine_chunks(), np.uint64)
    off_b, val_b = csr_from_binary(b.column(SHINGLES).combine_chunks(), np.uint64)
    n = a.num_rows
    jaccard, containment = pair_scores(off_a, val_a, off_b, val_b)
    sk_off_a, sk_a = csr_from_binary(a.column(SKETCH).combine_chunks(), np.uint32)
    _, sk_b = csr_from_binary(b.column(SKETCH).combine_chunks(), np.uint32)
    width = int(sk_off_a[1] - sk_off_a[0]) if n else 0
    if n and width:
        estimate = (sk_a.reshape(n, width) == sk_b.reshape(n, width)).mean(axis=1)
    else:
        estimate = np.zeros(n, dtype=np.float64)
    return pa.RecordBatch.from_arrays(
        [
            a.column(DOC_A).combine_chunks(),
            a.column(DOC_B).combine_chunks(),
            pa.array(jaccard),
            pa.array(estimate),
            pa.array(containment),
        ],
        names=[DOC_A, DOC_B, JACCARD, ESTIMATE, CONTAINMENT],
    )


def score_sorted_sides(
    batches: Iterable[pa.RecordBatch], with_sets: Callable[[pa.Table], pa.Table] | None = None
) -> Iterator[pa.RecordBatch]:
    """Side rows sorted by (doc_a, doc_b, side) -> scored pairs. A pair's two rows may straddle
    two Arrow batches: an odd row out waits for the next batch. ``with_sets`` turns side rows
    that carry texts into rows that carry shingle sets and sketches."""
    pending: pa.Table | None = None
    for batch in batches:
        rows = pa.Table.from_batches([batch])
        if pending is not None:
            rows = pa.concat_tables([pending, rows])
        whole = rows.num_rows - rows.num_rows % 2
        pending = rows.slice(whole) if whole < rows.num_rows else None
        if whole:
            sides = rows.slice(0, whole)
            yield score_pairs(sides if with_sets is None else with_sets(sides))
    if pending is not None:
        raise RuntimeError("verification: a candidate pair did not find both documents")


def sets_from_texts_fn(
    config: DedupeConfig, normalized: bool = False
) -> Callable[[pa.Table], pa.Table]:
    """Side rows with ``doc_a``, ``doc_b``, ``text`` -> ``doc_a``, ``doc_b``, ``shingles``,
    ``sketch``, computed as the job's per-document pass computes them (so they are the sets it
    would have stored); ``normalized``: the texts are already normalised."""
    sets_of = shingle_sets_fn(config, normalized)

    def run(sides: pa.Table) -> pa.Table:
        shingles, sketches = sets_of(sides.column(TEXT).combine_chunks())
        return pa.table(
            [sides.column(DOC_A), sides.column(DOC_B), shingles, sketches],
            names=[DOC_A, DOC_B, SHINGLES, SKETCH],
        )

    return run
