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
from neardup_spark.columns import (
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    JACCARD,
    SHINGLES,
    SKETCH,
    TEXT,
)
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.jaccard import pair_jaccards
from neardup_spark.stages.documents import shingle_sets_fn


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


def _score_sorted_sides(
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
            yield _score(sides if with_sets is None else with_sets(sides))
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
        sets = sketches.select(DOC_ID, SHINGLES, SKETCH)
        sides = _paired_sides(sets, candidates, broadcast_candidates)
        schema = scored_schema(candidates.schema[DOC_A].dataType)
        columns = [DOC_A, DOC_B, SHINGLES, SKETCH]
        return sides.select(*columns).mapInArrow(_score_sorted_sides, schema)

    return transform


def _paired_sides(docs: DataFrame, candidates: DataFrame, broadcast: bool) -> DataFrame:
    """``docs`` rows joined with the candidate pairs they are in, one row per (pair, side),
    each pair's two rows together in one partition and sorted by (doc_a, doc_b, side)."""
    requests = candidates.select(
        F.col(DOC_A).alias(DOC_ID), DOC_A, DOC_B, F.lit(0).alias(_SIDE)
    ).unionByName(
        candidates.select(F.col(DOC_B).alias(DOC_ID), DOC_A, DOC_B, F.lit(1).alias(_SIDE))
    )
    if broadcast:
        requests = F.broadcast(requests)
    return (
        docs.join(requests, DOC_ID)
        .repartition(DOC_A, DOC_B)
        .sortWithinPartitions(DOC_A, DOC_B, _SIDE)
    )


def _sets_from_texts(config: DedupeConfig) -> Callable[[pa.Table], pa.Table]:
    """Side rows with ``doc_a``, ``doc_b``, ``text`` -> ``doc_a``, ``doc_b``, ``shingles``,
    ``sketch``, computed as the job's per-document pass computes them (so they are the sets it
    would have stored)."""
    sets_of = shingle_sets_fn(config)

    def run(sides: pa.Table) -> pa.Table:
        shingles, sketches = sets_of(sides.column(TEXT).combine_chunks())
        return pa.table(
            [sides.column(DOC_A), sides.column(DOC_B), shingles, sketches],
            names=[DOC_A, DOC_B, SHINGLES, SKETCH],
        )

    return run


def score_candidate_texts(
    texts: DataFrame, config: DedupeConfig, broadcast_candidates: bool = True
) -> Callable[[DataFrame], DataFrame]:
    """Candidate pairs -> the same pairs scored as by :func:`score_candidates`, the shingle sets
    and sketches recomputed from ``texts`` (columns ``doc_id``, ``text``).

    Input columns: ``doc_a``, ``doc_b``. Output columns: :func:`scored_schema`.

    The texts are scanned once and joined with the pairs they are in; the texts (~2 KB a
    page, and compressible) travel in the one shuffle that brings a pair's sides together, not
    their shingle sets (~5 KB, incompressible), and the sets are computed right where they are
    compared. A document in ``k`` pairs is shingled ``k`` times: cheaper than a second shuffle.
    """
    with_sets = _sets_from_texts(config)

    def score(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return _score_sorted_sides(batches, with_sets)

    def transform(candidates: DataFrame) -> DataFrame:
        sides = _paired_sides(texts.select(DOC_ID, TEXT), candidates, broadcast_candidates)
        schema = scored_schema(candidates.schema[DOC_A].dataType)
        return sides.select(DOC_A, DOC_B, TEXT).mapInArrow(score, schema)

    return transform


def verified(threshold: float) -> Callable[[DataFrame], DataFrame]:
    """Scored pairs -> those whose exact Jaccard reaches ``threshold`` (same columns)."""

    def transform(scored: DataFrame) -> DataFrame:
        return scored.where(F.col(JACCARD) >= F.lit(threshold))

    return transform
