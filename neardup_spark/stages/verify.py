"""Verification: exact Jaccard (and the MinHash estimate) of each candidate pair, or the
Hamming distance of its SimHash fingerprints."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.batch.scoring import SIDE, score_sorted_sides, sets_from_texts_fn
from neardup_spark.columns import (
    CONTAINMENT,
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    HAMMING,
    JACCARD,
    SHINGLES,
    SIMHASH,
    SKETCH,
    TEXT,
)
from neardup_spark.config import DedupeConfig


def scored_schema(id_type: T.DataType) -> T.StructType:
    """Output schema of :func:`score_candidates`."""
    return T.StructType(
        [
            T.StructField(DOC_A, id_type, False),
            T.StructField(DOC_B, id_type, False),
            T.StructField(JACCARD, T.DoubleType(), False),
            T.StructField(ESTIMATE, T.DoubleType(), False),
            T.StructField(CONTAINMENT, T.DoubleType(), False),
        ]
    )


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
        return sides.select(*columns).mapInArrow(score_sorted_sides, schema)

    return transform


def side_requests(candidates: DataFrame) -> DataFrame:
    """Candidate pairs -> one row per (pair, side): ``doc_id`` (the side's document),
    ``doc_a``, ``doc_b``, ``side`` (0 for ``doc_a``, 1 for ``doc_b``)."""
    return candidates.select(
        F.col(DOC_A).alias(DOC_ID), DOC_A, DOC_B, F.lit(0).alias(SIDE)
    ).unionByName(candidates.select(F.col(DOC_B).alias(DOC_ID), DOC_A, DOC_B, F.lit(1).alias(SIDE)))


def _paired_sides(docs: DataFrame, candidates: DataFrame, broadcast: bool) -> DataFrame:
    """``docs`` rows joined with the candidate pairs they are in, one row per (pair, side),
    each pair's two rows together and sorted by (doc_a, doc_b, side). Without ``broadcast``,
    the join's own shuffle takes the session's shuffle partitions."""
    requests = side_requests(candidates)
    joined = docs.join(F.broadcast(requests) if broadcast else requests, DOC_ID)
    return _paired_up(joined, None)


def _paired_up(sides: DataFrame, partitions: int | None) -> DataFrame:
    """Side rows -> each pair's two rows together in one of ``partitions`` partitions (default:
    the shuffle partitions), sorted by (doc_a, doc_b, side)."""
    paired = (
        sides.repartition(partitions, DOC_A, DOC_B)
        if partitions
        else sides.repartition(DOC_A, DOC_B)
    )
    return paired.sortWithinPartitions(DOC_A, DOC_B, SIDE)


def score_candidate_texts(
    texts: DataFrame,
    config: DedupeConfig,
    broadcast_candidates: bool = True,
    normalized: bool = False,
    partitions: int | None = None,
) -> Callable[[DataFrame], DataFrame]:
    """Candidate pairs -> the same pairs scored as by :func:`score_candidates`, the shingle sets
    and sketches recomputed from ``texts`` (columns ``doc_id``, ``text``).

    Input columns: ``doc_a``, ``doc_b``. Output columns: :func:`scored_schema`.

    The texts are scanned once and joined with the pairs they are in; the texts (~2 KB a
    page, and compressible) travel in the one shuffle that brings a pair's sides together, not
    their shingle sets (~5 KB, incompressible), and the sets are computed right where they are
    compared. A document in ``k`` pairs is shingled ``k`` times: cheaper than a second shuffle.
    ``normalized``: the texts are already normalised (the nightly index's). ``partitions``:
    of the shuffle that pairs the sides up (default: the session's shuffle partitions).
    """
    score = scored_side_texts(config, normalized, partitions)

    def transform(candidates: DataFrame) -> DataFrame:
        requests = side_requests(candidates)
        if broadcast_candidates:
            requests = F.broadcast(requests)
        sides = texts.select(DOC_ID, TEXT).join(requests, DOC_ID)
        return sides.select(DOC_A, DOC_B, SIDE, TEXT).transform(score)

    return transform


def scored_side_texts(
    config: DedupeConfig, normalized: bool = False, partitions: int | None = None
) -> Callable[[DataFrame], DataFrame]:
    """Side rows carrying texts -> their pairs scored as by :func:`score_candidate_texts`.

    Input columns: ``doc_a``, ``doc_b``, ``side`` (0: the row holds ``doc_a``'s text, 1:
    ``doc_b``'s), ``text``; one row per side of each pair. Output columns:
    :func:`scored_schema`. The one shuffle brings each pair's two rows together, in one of
    ``partitions`` partitions (default: the session's shuffle partitions), sorted so a scan
    pairs them up, and their sets are computed there."""
    with_sets = sets_from_texts_fn(config, normalized)

    def score(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return score_sorted_sides(batches, with_sets)

    def transform(sides: DataFrame) -> DataFrame:
        schema = scored_schema(sides.schema[DOC_A].dataType)
        paired = _paired_up(sides, partitions).select(DOC_A, DOC_B, TEXT)
        return paired.mapInArrow(score, schema)

    return transform


def verified(threshold: float, measure: str = JACCARD) -> Callable[[DataFrame], DataFrame]:
    """Scored pairs -> those whose exact ``measure`` (``jaccard``, or ``containment``) reaches
    ``threshold`` (same columns)."""

    def transform(scored: DataFrame) -> DataFrame:
        return scored.where(F.col(measure) >= F.lit(threshold))

    return transform


def hamming_scored(sketches: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Candidate pairs -> the same pairs with the Hamming distance of their fingerprints.

    Input columns: ``doc_a``, ``doc_b``; ``sketches`` gives ``doc_id``, ``simhash``.
    Output columns: ``doc_a``, ``doc_b``, ``hamming`` (int). Built-in Spark functions only.
    """

    def transform(candidates: DataFrame) -> DataFrame:
        fp = sketches.select(DOC_ID, SIMHASH)
        side_a = fp.select(F.col(DOC_ID).alias(DOC_A), F.col(SIMHASH).alias("fp_a"))
        side_b = fp.select(F.col(DOC_ID).alias(DOC_B), F.col(SIMHASH).alias("fp_b"))
        joined = candidates.join(side_a, DOC_A).join(side_b, DOC_B)
        distance = F.bit_count(F.col("fp_a").bitwiseXOR(F.col("fp_b"))).cast(T.IntegerType())
        return joined.select(DOC_A, DOC_B, distance.alias(HAMMING))

    return transform
