"""LSH candidates on Arrow batches: (band key, document) entries cut into key blocks, and the
candidate pairs of the buckets in a block (pure, no Spark)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark.columns import BAND_KEY, BAND_KEYS, DOC_A, DOC_B, DOC_ID
from neardup_spark.kernels.lsh import bucket_pairs, large_bucket_rows, shared_key_rows
from neardup_spark.kernels.spark_partitions import partition_keys

PART = "part"


KEYS = "keys"


IDS = "ids"


def key_blocks_fn(
    parts: int,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Batches of ``doc_id``, ``band_keys`` -> one row per key block: ``part`` (the key that
    Spark's ``repartition(parts, part)`` sends to the block's own partition), the batch's (key,
    doc id) entries whose key falls in that block, as two parallel lists."""
    routes = partition_keys(parts)

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
                    pa.array(routes[present]),
                    pa.ListArray.from_arrays(starts, pa.array(keys[order])),
                    pa.ListArray.from_arrays(starts, ids.take(pa.array(order))),
                ],
                names=[PART, KEYS, IDS],
            )

    return run


def pairs_in_blocks_fn(
    all_pairs_max: int, with_members: bool = False
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """All key blocks of one partition -> candidate pairs of their buckets (a block, hence a
    bucket, never spans two partitions). ``with_members``: a third column, ``band_key``, null
    on the pairs, and one more row per member of a bucket larger than ``all_pairs_max``:
    ``doc_a`` and ``doc_b`` the member, ``band_key`` its bucket's key."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        keys_parts: list[pa.Array] = []
        id_parts: list[pa.Array] = []
        for batch in batches:
            keys_parts.append(pc.list_flatten(batch.column(KEYS)))
            id_parts.append(pc.list_flatten(batch.column(IDS)))
        if not keys_parts:
            return
        all_keys = pa.chunked_array(keys_parts, pa.int64()).to_numpy()
        shared = shared_key_rows(all_keys)
        entries = pa.table(
            {
                BAND_KEY: all_keys[shared],
                DOC_ID: pa.chunked_array(id_parts).take(pa.array(shared)),
            }
        ).sort_by([(BAND_KEY, "ascending"), (DOC_ID, "ascending")])
        keys = entries.column(BAND_KEY).to_numpy()
        doc_a, doc_b = bucket_pairs(keys, entries.column(DOC_ID).combine_chunks(), all_pairs_max)
        distinct = pc.not_equal(doc_a, doc_b)  # a 64-bit key collision across two bands
        pairs = pa.table({DOC_A: doc_a.filter(distinct), DOC_B: doc_b.filter(distinct)})
        # Near-duplicates share many bands: each pair once per partition, before the shuffle
        # of the distinct() that follows (and before the anchored rule keeps them).
        pairs = pairs.group_by([DOC_A, DOC_B], use_threads=False).aggregate([])
        if with_members:
            large = pa.array(large_bucket_rows(keys, all_pairs_max))
            member = entries.column(DOC_ID).take(large)
            bands = pa.chunked_array(
                [pa.nulls(pairs.num_rows, pa.int64()), pa.array(keys).take(large)]
            )
            pairs = pa.concat_tables([pairs, pa.table({DOC_A: member, DOC_B: member})])
            pairs = pairs.append_column(BAND_KEY, bands)
        yield from pairs.to_batches()

    return run
