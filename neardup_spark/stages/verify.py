"""Verification: exact Jaccard (and the MinHash estimate) of each candidate pair."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.arrow_utils import csr_from_binary
from neardup_spark.columns import DOC_A, DOC_B, DOC_ID, ESTIMATE, JACCARD, SHINGLES, SKETCH
from neardup_spark.kernels.jaccard import pair_jaccards


def scored_schema(id_type: T.DataType) -> T.StructType:
    """Output schema of :func:`score_candidates`."""
    return T.StructType(
        [
            T.StructField(DOC_A, id_type, False),
            T.StructField(DOC_B, id_type, False),
            T.StructField(JACCARD, T.DoubleType(), False),
            T.StructField(ESTIMATE, T.DoubleType(), False),
        ]
    )


_SIDE = "side"  # 0: the row carries doc_a's data, 1: doc_b's


def _score(pairs: pa.Table) -> pa.RecordBatch:
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
    jaccard = pair_jaccards(off_a, val_a, off_b, val_b)
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
        ],
        names=[DOC_A, DOC_B, JACCARD, ESTIMATE],
    )


def _score_sorted_sides(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Side rows sorted by (doc_a, doc_b, side) -> scored pairs. A pair's two rows may straddle
    two Arrow batches: an odd row out waits for the next batch."""
    pending: pa.Table | None = None
    for batch in batches:
        rows = pa.Table.from_batches([batch])
        if pending is not None:
            rows = pa.concat_tables([pending, rows])
        whole = rows.num_rows - rows.num_rows % 2
        pending = rows.slice(whole) if whole < rows.num_rows else None
        if whole:
            yield _score(rows.slice(0, whole))
    if pending is not None:
        raise RuntimeError("verification: a candidate pair did not find both documents")


def score_candidates(
    sketches: DataFrame, broadcast_candidates: bool = True
) -> Callable[[DataFrame], DataFrame]:
    """Candidate pairs -> the same pairs with exact Jaccard and MinHash estimate.

    Input columns: ``doc_a``, ``doc_b``; ``sketches`` gives ``doc_id``, ``shingles``, ``sketch``.
    Output columns: ``doc_a``, ``doc_b``, ``jaccard`` (exact, of the shingle-hash sets),
    ``estimate`` (fraction of agreeing MinHash values). Nothing is filtered here.

    The sketch table is scanned once: each candidate document's row is joined with the pairs it
    is in (with ``broadcast_candidates`` the small candidate list is broadcast, so the sketch table
    is never shuffled), then one shuffle on the pair brings its two side rows together, sorted, so
    a scan pairs them up.
    """

    def transform(candidates: DataFrame) -> DataFrame:
        requests = candidates.select(
            F.col(DOC_A).alias(DOC_ID), DOC_A, DOC_B, F.lit(0).alias(_SIDE)
        ).unionByName(
            candidates.select(F.col(DOC_B).alias(DOC_ID), DOC_A, DOC_B, F.lit(1).alias(_SIDE))
        )
        if broadcast_candidates:
            requests = F.broadcast(requests)
        sides = (
            sketches.select(DOC_ID, SHINGLES, SKETCH)
            .join(requests, DOC_ID)
            .repartition(DOC_A, DOC_B)
            .sortWithinPartitions(DOC_A, DOC_B, _SIDE)
        )
        schema = scored_schema(candidates.schema[DOC_A].dataType)
        columns = [DOC_A, DOC_B, SHINGLES, SKETCH]
        return sides.select(*columns).mapInArrow(_score_sorted_sides, schema)

    return transform


def verified(threshold: float) -> Callable[[DataFrame], DataFrame]:
    """Scored pairs -> those whose exact Jaccard reaches ``threshold`` (same columns)."""

    def transform(scored: DataFrame) -> DataFrame:
        return scored.where(F.col(JACCARD) >= F.lit(threshold))

    return transform
