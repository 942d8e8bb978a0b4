"""Candidate pairs from LSH buckets, with work linear in each bucket's size."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

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


_PART = "part"
_KEYS = "keys"
_IDS = "ids"


def _key_blocks_fn(
    parts: int,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Batches of ``doc_id``, ``band_keys`` -> one row per key block ``part``: the batch's
    (key, doc id) entries whose key falls in that block, as two parallel lists."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            lists = batch.column(BAND_KEYS)
            keys = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
            if keys.size == 0:
                continue
            ids = batch.column(DOC_ID).take(pc.list_parent_indices(lists))
            block = (keys.view(np.uint64) % np.uint64(parts)).astype(np.int64)
            order = np.argsort(block, kind="stable")
            offsets = np.zeros(parts + 1, dtype=np.int32)
            np.cumsum(np.bincount(block, minlength=parts), out=offsets[1:])
            present = np.flatnonzero(np.diff(offsets) > 0)
            # One row per present block: block p's entries end where the next present one starts.
            starts = pa.array(np.append(offsets[present], offsets[-1]).astype(np.int32))
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(present.astype(np.int32)),
                    pa.ListArray.from_arrays(starts, pa.array(keys[order])),
                    pa.ListArray.from_arrays(starts, ids.take(pa.array(order))),
                ],
                names=[_PART, _KEYS, _IDS],
            )

    return run


def _bucket_pairs(keys: np.ndarray, ids: pa.Array, all_pairs_max: int) -> tuple[pa.Array, pa.Array]:
    """Entries sorted by (key, id) -> candidate pairs ``(doc_a, doc_b)`` of each key's run."""
    if keys.size < 2:
        return ids.slice(0, 0), ids.slice(0, 0)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    sizes = np.diff(np.append(starts, keys.size))
    left: list[np.ndarray] = []
    right: list[np.ndarray] = []
    for size in np.unique(sizes[(sizes >= 2) & (sizes <= all_pairs_max)]):
        first = starts[sizes == size]
        i, j = np.triu_indices(int(size), 1)
        left.append((first[:, None] + i[None, :]).reshape(-1))
        right.append((first[:, None] + j[None, :]).reshape(-1))
    star = sizes > all_pairs_max
    if star.any():  # a bucket too large for all pairs: a star from its smallest id
        members = np.flatnonzero(np.repeat(star, sizes))
        first = np.repeat(starts[star], sizes[star])
        others = members != first
        left.append(first[others])
        right.append(members[others])
    if not left:
        return ids.slice(0, 0), ids.slice(0, 0)
    a = pa.array(np.concatenate(left))
    b = pa.array(np.concatenate(right))
    return ids.take(a), ids.take(b)


def _pairs_in_blocks_fn(
    all_pairs_max: int,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """All key blocks of one partition -> candidate pairs of their buckets (a block, hence a
    bucket, never spans two partitions)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keys_parts: list[pa.Array] = []
        id_parts: list[pa.Array] = []
        for batch in batches:
            keys_parts.append(pc.list_flatten(batch.column(_KEYS)))
            id_parts.append(pc.list_flatten(batch.column(_IDS)))
        if not keys_parts:
            return
        entries = pa.table(
            {BAND_KEY: pa.chunked_array(keys_parts), DOC_ID: pa.chunked_array(id_parts)}
        ).sort_by([(BAND_KEY, "ascending"), (DOC_ID, "ascending")])
        keys = entries.column(BAND_KEY).to_numpy()
        doc_a, doc_b = _bucket_pairs(keys, entries.column(DOC_ID).combine_chunks(), all_pairs_max)
        distinct = pc.not_equal(doc_a, doc_b)  # a 64-bit key collision across two bands
        yield pa.RecordBatch.from_arrays(
            [doc_a.filter(distinct), doc_b.filter(distinct)], names=[DOC_A, DOC_B]
        )

    return run


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
                T.StructField(_PART, T.IntegerType(), False),
                T.StructField(_KEYS, T.ArrayType(T.LongType(), False), False),
                T.StructField(_IDS, T.ArrayType(id_type, False), False),
            ]
        )
        pair_schema = T.StructType(
            [T.StructField(DOC_A, id_type, False), T.StructField(DOC_B, id_type, False)]
        )
        return (
            docs.select(DOC_ID, BAND_KEYS)
            .mapInArrow(_key_blocks_fn(parts), block_schema)
            .repartition(parts, _PART)
            .mapInArrow(_pairs_in_blocks_fn(all_pairs_max), pair_schema)
            .distinct()
        )

    return transform
