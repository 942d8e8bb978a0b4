"""The anchored rule's large LSH buckets on Arrow tables: the members' sketches from their texts,
and the candidate pairs of each bucket's greedy over its kept members
(:mod:`neardup_spark.kernels.bucket_kept`). Pure: the driver path calls these on its tables, the
Spark path in its tasks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark.batch import BatchFn
from neardup_spark.batch.documents import shingle_sets_fn
from neardup_spark.columns import BAND_KEY, DOC_A, DOC_B, DOC_ID, N_SHINGLES, SKETCH, TEXT
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.arrow_buffers import csr_from_binary
from neardup_spark.kernels.bucket_kept import bucket_kept_pairs, estimate_bounds
from neardup_spark.kernels.jaccard import distinct_counts

COMPARISONS = "comparisons"
SKIPPED = "skipped"


def member_sketches_fn(config: DedupeConfig) -> BatchFn:
    """One batch of ``doc_id``, ``text`` -> ``doc_id``, ``sketch`` (the per-document pass's
    MinHash values, recomputed: the per-document table does not keep them), and under
    containment ``n_shingles``."""
    sets_of = shingle_sets_fn(config)
    sizes = config.similarity == "containment"

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        shingles, sketches = sets_of(batch.column(TEXT))
        columns, names = [batch.column(DOC_ID), sketches], [DOC_ID, SKETCH]
        if sizes:  # the keep order's first key under containment
            offsets, values = csr_from_binary(shingles, np.uint64)
            columns.append(pa.array(distinct_counts(offsets, values), pa.int32()))
            names.append(N_SHINGLES)
        return pa.RecordBatch.from_arrays(columns, names=names)

    return run


def kept_pairs(members: pa.Table, config: DedupeConfig) -> tuple[pa.Table, int, int]:
    """Rows ``band_key``, ``doc_id``, ``sketch`` of large buckets' members -> the greedy's
    candidate pairs ``doc_a < doc_b`` (each bucket's members in id order, the default keep
    order), its comparisons and the comparisons skipped over ``config.bucket_kept_max``."""
    # in keep order: under containment the container (more shingles) first
    by_size = [(N_SHINGLES, "descending")] if config.similarity == "containment" else []
    ordered = members.sort_by([(BAND_KEY, "ascending"), *by_size, (DOC_ID, "ascending")])
    ids = ordered.column(DOC_ID).combine_chunks()
    if ordered.num_rows < 2:
        return pa.table({DOC_A: ids.slice(0, 0), DOC_B: ids.slice(0, 0)}), 0, 0
    keys = ordered.column(BAND_KEY).to_numpy()
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    _, values = csr_from_binary(ordered.column(SKETCH).combine_chunks(), np.uint32)
    sketches = values.reshape(ordered.num_rows, config.num_perm)
    # (under containment, pairs are looked for down to the Jaccard the banding is tuned for;
    # a member is taken as removed at the threshold's Jaccard, which implies its containment)
    pair_bound = estimate_bounds(config.jaccard_floor, config.num_perm)[0]
    removal_bound = estimate_bounds(config.threshold, config.num_perm)[1]
    sizes, containment = None, 0.0
    if config.similarity == "containment":  # each pair's bound by its two sets' sizes
        sizes, containment = ordered.column(N_SHINGLES).to_numpy(), float(config.threshold)
    found = bucket_kept_pairs(
        starts, sketches, config.bucket_kept_max, pair_bound, removal_bound, sizes, containment
    )
    left, right = ids.take(pa.array(found.left)), ids.take(pa.array(found.right))
    # doc_a < doc_b: under containment the keep order is by size, not by id
    first = pc.less(left, right)
    doc_a, doc_b = pc.if_else(first, left, right), pc.if_else(first, right, left)
    distinct = pc.not_equal(doc_a, doc_b)  # a 64-bit key collision across two bands
    pairs = pa.table({DOC_A: doc_a.filter(distinct), DOC_B: doc_b.filter(distinct)})
    return pairs, found.comparisons, found.skipped


def kept_pairs_fn(
    config: DedupeConfig,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """All member rows of one partition (``band_key``, ``doc_id``, ``sketch``; a bucket never
    spans two partitions) -> :func:`kept_pairs`'s pairs (``doc_a``, ``doc_b``, ``comparisons``
    and ``skipped`` 0), then one row of the partition's counts (``doc_a``, ``doc_b`` null)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = [batch for batch in batches if batch.num_rows]
        if not rows:
            return
        pairs, comparisons, skipped = kept_pairs(pa.Table.from_batches(rows), config)
        id_type = pairs.schema.field(DOC_A).type
        zeros = pa.array(np.zeros(pairs.num_rows, np.int64))
        counts = pa.table(
            {
                DOC_A: pa.nulls(1, id_type),
                DOC_B: pa.nulls(1, id_type),
                COMPARISONS: pa.array([comparisons], pa.int64()),
                SKIPPED: pa.array([skipped], pa.int64()),
            }
        )
        found = pairs.append_column(COMPARISONS, zeros).append_column(SKIPPED, zeros)
        yield from pa.concat_tables([found, counts]).to_batches()

    return run
