"""Candidate pairs from LSH buckets, with work linear in each bucket's size."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.batch import over_batches
from neardup_spark.batch.bucket_kept import (
    COMPARISONS,
    SKIPPED,
    kept_pairs_fn,
    member_sketches_fn,
)
from neardup_spark.batch.candidates import IDS, KEYS, PART, key_blocks_fn, pairs_in_blocks_fn
from neardup_spark.columns import (
    BAND_KEY,
    BAND_KEYS,
    DOC_A,
    DOC_B,
    DOC_ID,
    N_SHINGLES,
    SKETCH,
    TEXT,
)
from neardup_spark.config import DedupeConfig

_MEMBERS = "members"
_POS = "pos"
_MEMBER = "member"


def bucket_members(sketches: DataFrame) -> DataFrame:
    """Sketches -> LSH buckets with at least two documents.

    Input columns: ``doc_id``, ``band_keys``. Output columns: ``band_key`` (int64), ``members``
    (array of ``doc_id``, ascending).
    """
    exploded = sketches.select(DOC_ID, F.explode(BAND_KEYS).alias(BAND_KEY))
    return (
        exploded.groupBy(BAND_KEY)
        .agg(F.sort_array(F.collect_list(DOC_ID)).alias(_MEMBERS))
        .where(F.size(_MEMBERS) >= 2)
    )


def candidate_pairs(all_pairs_max: int) -> Callable[[DataFrame], DataFrame]:
    """Buckets -> distinct candidate pairs, for ``df.transform``.

    A bucket of up to ``all_pairs_max`` documents emits all its pairs; a larger one emits a star
    from its smallest id to every other member, so a bucket of ``n`` documents costs ``O(n)``
    edges, never ``O(n**2)``. Verification and connected components then recover clusters.

    Input columns: ``band_key``, ``members``. Output columns: ``doc_a < doc_b`` (id type).
    """

    def transform(buckets: DataFrame) -> DataFrame:
        size = F.size(_MEMBERS)
        starts = buckets.select(_MEMBERS, F.posexplode(_MEMBERS).alias(_POS, DOC_A)).where(
            (size <= all_pairs_max) | (F.col(_POS) == 0)
        )
        # Members after position pos (arrays are 1-based in slice).
        later = F.slice(_MEMBERS, F.col(_POS) + 2, size - F.col(_POS) - 1)
        return starts.select(DOC_A, F.explode(later).alias(DOC_B)).distinct()

    return transform


def banded_candidate_pairs(all_pairs_max: int, parts: int) -> Callable[[DataFrame], DataFrame]:
    """Documents' band keys -> distinct candidate pairs, for ``df.transform``; the same pairs
    as :func:`bucket_members` then :func:`candidate_pairs`, for a fraction of the cost.

    The (key, document) entries travel in ``parts`` blocks by key, a few large rows per input
    batch instead of one row per entry, and each block's buckets are found by one Arrow sort.

    Input columns: ``doc_id``, ``band_keys``. Output columns: ``doc_a < doc_b``.
    """

    def transform(docs: DataFrame) -> DataFrame:
        return _pairs_in_blocks(docs, all_pairs_max, parts, with_members=False).distinct()

    return transform


def banded_pairs_and_members(all_pairs_max: int, parts: int) -> Callable[[DataFrame], DataFrame]:
    """Documents' band keys -> the candidate pairs of :func:`banded_candidate_pairs` (not yet
    distinct), ``band_key`` null, and the members of the buckets larger than
    ``all_pairs_max``: ``doc_a = doc_b`` the member, ``band_key`` its bucket, for
    ``df.transform`` (the anchored rule's large buckets, found in the same pass).

    Input columns: ``doc_id``, ``band_keys``. Output columns: ``doc_a``, ``doc_b``,
    ``band_key``.
    """

    def transform(docs: DataFrame) -> DataFrame:
        return _pairs_in_blocks(docs, all_pairs_max, parts, with_members=True)

    return transform


def _pairs_in_blocks(
    docs: DataFrame, all_pairs_max: int, parts: int, with_members: bool
) -> DataFrame:
    id_type = docs.schema[DOC_ID].dataType
    block_schema = T.StructType(
        [
            T.StructField(PART, T.IntegerType(), False),
            T.StructField(KEYS, T.ArrayType(T.LongType(), False), False),
            T.StructField(IDS, T.ArrayType(id_type, False), False),
        ]
    )
    fields = [T.StructField(DOC_A, id_type, False), T.StructField(DOC_B, id_type, False)]
    if with_members:
        fields.append(T.StructField(BAND_KEY, T.LongType(), True))
    return (
        docs.select(DOC_ID, BAND_KEYS)
        .mapInArrow(key_blocks_fn(parts), block_schema)
        .repartition(parts, PART)
        .mapInArrow(pairs_in_blocks_fn(all_pairs_max, with_members), T.StructType(fields))
    )


def member_sketches(config: DedupeConfig) -> Callable[[DataFrame], DataFrame]:
    """Texts -> their MinHash sketches, as the per-document pass computes them, for
    ``df.transform``.

    Input columns: ``doc_id``, ``text``. Output columns: ``doc_id``, ``sketch``.
    """

    def transform(texts: DataFrame) -> DataFrame:
        fields = [
            T.StructField(DOC_ID, texts.schema[DOC_ID].dataType, False),
            T.StructField(SKETCH, T.BinaryType(), False),
        ]
        if config.similarity == "containment":
            fields.append(T.StructField(N_SHINGLES, T.IntegerType(), False))
        schema = T.StructType(fields)
        per_batch = over_batches(member_sketches_fn(config))
        return texts.select(DOC_ID, TEXT).mapInArrow(per_batch, schema)

    return transform


def bucket_kept_candidates(config: DedupeConfig, parts: int) -> Callable[[DataFrame], DataFrame]:
    """Large buckets' members with their sketches -> the candidate pairs of each bucket's
    greedy over its kept members (:func:`~neardup_spark.batch.bucket_kept.kept_pairs`), one
    bucket per task, for ``df.transform``; with each task's counts on one more row.

    Input columns: ``band_key``, ``doc_id``, ``sketch``. Output columns: ``doc_a``, ``doc_b``
    (null on a counts row), ``comparisons``, ``skipped`` (0 on a pair's row).
    """

    def transform(members: DataFrame) -> DataFrame:
        id_type = members.schema[DOC_ID].dataType
        schema = T.StructType(
            [
                T.StructField(DOC_A, id_type, True),
                T.StructField(DOC_B, id_type, True),
                T.StructField(COMPARISONS, T.LongType(), False),
                T.StructField(SKIPPED, T.LongType(), False),
            ]
        )
        sizes = [N_SHINGLES] if config.similarity == "containment" else []
        return (
            members.select(BAND_KEY, DOC_ID, SKETCH, *sizes)
            .repartition(parts, BAND_KEY)
            .mapInArrow(kept_pairs_fn(config), schema)
        )

    return transform
