"""Candidate pairs from LSH buckets, with work linear in each bucket's size."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.batch.candidates import IDS, KEYS, PART, key_blocks_fn, pairs_in_blocks_fn
from neardup_spark.columns import BAND_KEY, BAND_KEYS, DOC_A, DOC_B, DOC_ID

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
        id_type = docs.schema[DOC_ID].dataType
        block_schema = T.StructType(
            [
                T.StructField(PART, T.IntegerType(), False),
                T.StructField(KEYS, T.ArrayType(T.LongType(), False), False),
                T.StructField(IDS, T.ArrayType(id_type, False), False),
            ]
        )
        pair_schema = T.StructType(
            [T.StructField(DOC_A, id_type, False), T.StructField(DOC_B, id_type, False)]
        )
        return (
            docs.select(DOC_ID, BAND_KEYS)
            .mapInArrow(key_blocks_fn(parts), block_schema)
            .repartition(parts, PART)
            .mapInArrow(pairs_in_blocks_fn(all_pairs_max), pair_schema)
            .distinct()
        )

    return transform
