"""The ``driver`` implementation of the pairs step (:mod:`.pairs`): after the per-document pass,
a corpus of up to ``driver_max_docs`` documents gets its exact copies, LSH candidates and
verified pairs in this process, on Arrow tables, with the batch functions the Spark stages run
in their tasks (:mod:`neardup_spark.batch.candidates`, :mod:`neardup_spark.batch.scoring`). The
per-document table comes back in one Spark job and the candidates' texts in one more, instead of
the three stages' shuffles, writes and reads back: at 5,000 pages each stage's fixed cost was
most of it.

Same pairs as the Spark path (:mod:`.pairs`): the same grouping of copies (smallest id by the
ids' own order: Arrow and Spark both order strings by their UTF-8 bytes), the same buckets and
stars, the same scoring function and threshold; tested against it on the same corpora. These
stages are not kept for a resumed run: below this size, redoing them costs less than staging.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark.batch.bucket_kept import kept_pairs, member_sketches_fn
from neardup_spark.batch.scoring import score_pairs, sets_from_texts_fn
from neardup_spark.columns import (
    BAND_KEY,
    BAND_KEYS,
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    EXACT_FP,
    HAMMING,
    HAS_TEXT,
    JACCARD,
    METHOD,
    NORMALIZED,
    SIMHASH,
    SIMILARITY,
    TEXT,
)
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.lsh import bucket_pairs, large_bucket_rows
from neardup_spark.pipeline.context import RunContext
from neardup_spark.pipeline.reporting import record_bucket_comparisons
from neardup_spark.pipeline.sketch import SketchedHere, map_in_threads
from neardup_spark.runtime.engine import from_arrow_batches
from neardup_spark.runtime.spark_compat import to_arrow
from neardup_spark.stages.clusters import exact_pairs, minhash_pairs, simhash_pairs

_PAIRS_PER_BLOCK = 2048  # pairs scored at once (by one thread)


@dataclass
class DriverTables:
    """What a run that found its pairs on the driver holds in this process: every document's
    id, the ``pairs/`` edges (``doc_a``, ``doc_b``) and, once found here, the members
    (``doc_id``, ``cluster_id`` of the documents in a cluster)."""

    ids: pa.ChunkedArray
    edges: pa.Table
    members: pa.Table | None = None
    # The pairs/ rows as a table of this process (exact copies and MinHash pairs; None with
    # SimHash, whose similarity Spark computes), in the layout of stages/clusters.py's _pairs.
    pair_rows: pa.Table | None = None
    # The anchored rule's pairs/ rows added to justify its removals, found here.
    added: pa.Table | None = None


def driver_pair_parts(
    ctx: RunContext,
    features: DataFrame,
    texts: DataFrame | Callable[[DataFrame, bool], DataFrame],
    here: SketchedHere | None = None,
) -> tuple[list[DataFrame], DriverTables]:
    """The ``pairs/`` rows of :func:`~neardup_spark.pipeline.pairs.verified_edges`, found on
    the driver: exact-copy rows (when copies are collapsed first) and verified near-duplicate
    rows, each a DataFrame of the driver's table, and the :class:`DriverTables` of the run;
    ``ctx.counts`` filled as the Spark path does. ``here``: the per-document table (and
    texts) this process computed, read instead of fetching them from Spark."""
    spark, config, timer, counts = ctx.spark, ctx.config, ctx.timer, ctx.counts
    counts["exact_copies"] = counts["candidate_pairs"] = counts["near_pairs"] = 0
    exact_first = config.method == "exact" or config.exact_first
    parts: list[DataFrame] = []
    found: dict[str, pa.Table] = {}  # method -> the edges it found
    threads = ctx.facts.engine.local_threads  # 0 on a cluster: one thread then

    fetched: list[pa.Table] = []  # the candidates' texts, once fetched

    def texts_for(candidates: pa.Table) -> pa.Table:
        if not fetched:
            if here is not None and here.documents is not None:
                fetched.append(texts_of_candidates(candidates, here.documents))
            else:
                fetched.append(candidate_texts(spark, candidates, texts))
        return fetched[0]

    def find_candidates(unique: pa.Table, counted: dict[str, int]) -> pa.Table:
        found = candidate_pairs(unique, config.bucket_all_pairs_max, threads)
        if config.cluster_rule == "anchored" and config.method == "minhash":
            found = with_bucket_kept_pairs(found, unique, texts_for, config, counts)
        counts["candidate_pairs"] = counted["rows"] = found.num_rows
        return found

    # The collect belongs to the first stage that runs: one progress line per stage.
    with timer.stage("exact" if exact_first else "candidates") as counted:
        columns = _feature_columns(config)
        docs = unique = (
            here.features.select(columns) if here else to_arrow(features.select(*columns))
        )
        if exact_first:
            copies = exact_copy_edges(docs, config.exact_compare_text)
            counts["exact_copies"] = counted["rows"] = copies.num_rows
            unique = docs.filter(pc.invert(pc.is_in(docs.column(DOC_ID), copies.column(DOC_B))))
            # doc_a nullable, as the Spark path's (a window's min)
            parts.append(exact_pairs(from_arrow_batches(spark, _nullable(copies))))
            found["exact"] = copies
        else:
            candidates = find_candidates(unique, counted)
    if config.method == "exact":
        return parts, _driver_tables(docs, found, config.measure)
    if exact_first:
        with timer.stage("candidates") as counted:
            candidates = find_candidates(unique, counted)
    with timer.stage("verify") as counted:
        if config.method == "minhash":
            kept = verified_minhash(candidates, texts_for(candidates), config, threads)
            part = minhash_pairs(from_arrow_batches(spark, _nullable(kept)), config.measure)
        else:
            kept = verified_simhash(candidates, unique, config.hamming_k)
            part = simhash_pairs(from_arrow_batches(spark, _nullable(kept)))
        counts["near_pairs"] = counted["rows"] = kept.num_rows
    parts.append(part)
    found[config.method] = kept
    return parts, _driver_tables(docs, found, config.measure)


def _driver_tables(docs: pa.Table, found: dict[str, pa.Table], measure: str) -> DriverTables:
    edges = _edge_table(list(found.values()), docs)
    return DriverTables(docs.column(DOC_ID), edges, pair_rows=_pair_rows(found, measure))


def _pair_rows(found: dict[str, pa.Table], measure: str) -> pa.Table | None:
    """The ``pairs/`` rows of exact-copy edges and verified MinHash pairs, as
    :func:`~neardup_spark.stages.clusters.exact_pairs` and ``minhash_pairs`` make them (the
    column types of their DataFrames; the caller casts to their union's schema); None with
    SimHash pairs."""
    if "simhash" in found:
        return None
    tables = []
    for method, edges in found.items():
        n = edges.num_rows
        ones = pa.array(np.ones(n), pa.float64())
        jaccard = ones if method == "exact" else edges.column(JACCARD)
        similarity = ones if method == "exact" else edges.column(measure)
        estimate = pa.nulls(n, pa.float64()) if method == "exact" else edges.column(ESTIMATE)
        columns = {
            DOC_A: edges.column(DOC_A),
            DOC_B: edges.column(DOC_B),
            METHOD: pa.array([method] * n, pa.string()),
            SIMILARITY: similarity,
            JACCARD: jaccard,
            ESTIMATE: estimate,
            HAMMING: pa.nulls(n, pa.int32()),
        }
        tables.append(pa.table(columns))
    return pa.concat_tables(tables) if tables else None


def _edge_table(parts: list[pa.Table], docs: pa.Table) -> pa.Table:
    """The pair tables' ``doc_a``, ``doc_b`` as one table (of ``docs``' id type)."""
    id_type = docs.schema.field(DOC_ID).type
    return pa.table(
        {
            end: pa.chunked_array([c for part in parts for c in part.column(end).chunks], id_type)
            for end in (DOC_A, DOC_B)
        }
    )


def _feature_columns(config: DedupeConfig) -> list[str]:
    columns = [DOC_ID, HAS_TEXT, EXACT_FP]
    if config.exact_compare_text:
        columns.append(NORMALIZED)
    if config.method != "exact":
        columns.append(BAND_KEYS)
    if config.method == "simhash":
        columns.append(SIMHASH)
    return columns


def exact_copy_edges(docs: pa.Table, compare_text: bool = False) -> pa.Table:
    """Per-document rows (``doc_id``, ``has_text``, ``exact_fp``, and ``normalized`` with
    ``compare_text``) -> ``doc_a`` (a group's smallest id), ``doc_b`` (another member): one
    edge per copy, as :func:`neardup_spark.stages.exact_copies.exact_copy_edges`."""
    keys = [EXACT_FP, NORMALIZED] if compare_text else [EXACT_FP]
    with_text = docs.filter(docs.column(HAS_TEXT)).select([*keys, DOC_ID])
    ordered = with_text.sort_by([(key, "ascending") for key in [*keys, DOC_ID]])
    n = ordered.num_rows
    if n < 2:
        return _id_pairs(ordered.column(DOC_ID).type)
    same = ordered.column(EXACT_FP).to_numpy()
    starts = np.r_[True, same[1:] != same[:-1]]
    if compare_text:
        text = ordered.column(NORMALIZED).combine_chunks()
        differs = pc.not_equal(text.slice(1), text.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        starts[1:] |= differs
    first = np.flatnonzero(starts)
    group_first = np.repeat(first, np.diff(np.r_[first, n]))
    copy = np.flatnonzero(~starts)
    ids = ordered.column(DOC_ID).combine_chunks()
    return pa.table({DOC_A: ids.take(pa.array(group_first[copy])), DOC_B: ids.take(pa.array(copy))})


def candidate_pairs(docs: pa.Table, all_pairs_max: int, threads: int = 1) -> pa.Table:
    """``doc_id``, ``band_keys`` -> distinct candidate pairs ``doc_a < doc_b``: the buckets of
    the Spark path (:func:`~neardup_spark.kernels.lsh.bucket_pairs` over entries sorted by
    key, then id), with each id replaced by its rank in id order (Arrow and Spark both order
    strings by their UTF-8 bytes) so that the sort is numeric: a stable sort by key of entries
    laid out in id order. The entries are cut by key into ``threads`` blocks sorted at once (a
    bucket lies in one block)."""
    ids = docs.column(DOC_ID).combine_chunks()
    by_id = pc.sort_indices(ids)
    lists = docs.column(BAND_KEYS).combine_chunks().take(by_id)
    keys = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
    if keys.size < 2:
        return _id_pairs(ids.type)
    ranks = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    n = np.int64(len(ids))
    blocks = max(1, threads)

    def block_codes(block: int) -> np.ndarray:
        mine = np.flatnonzero(keys.view(np.uint64) % np.uint64(blocks) == block)
        order = mine[np.argsort(keys[mine], kind="stable")]  # (ranks ascending within a key)
        rank_a, rank_b = bucket_pairs(keys[order], pa.array(ranks[order]), all_pairs_max)
        a = rank_a.to_numpy(zero_copy_only=False)
        b = rank_b.to_numpy(zero_copy_only=False)
        # a == b: a document with one 64-bit key in two bands
        return a[a != b] * n + b[a != b]

    found = map_in_threads(block_codes, range(blocks), blocks)
    codes = np.unique(np.concatenate(found))  # a pair found in several buckets, once
    ranked = ids.take(by_id)
    return pa.table(
        {DOC_A: ranked.take(pa.array(codes // n)), DOC_B: ranked.take(pa.array(codes % n))}
    )


def large_buckets(docs: pa.Table, all_pairs_max: int) -> pa.Table:
    """``doc_id``, ``band_keys`` -> ``band_key``, ``doc_id`` of the members of the buckets
    larger than ``all_pairs_max`` (those :func:`candidate_pairs` gives a star only)."""
    lists = docs.column(BAND_KEYS).combine_chunks()
    keys = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
    ids = docs.column(DOC_ID).combine_chunks().take(pc.list_parent_indices(lists))
    order = np.argsort(keys, kind="stable")
    rows = order[large_bucket_rows(keys[order], all_pairs_max)]
    return pa.table({BAND_KEY: keys[rows], DOC_ID: ids.take(pa.array(rows))})


def with_bucket_kept_pairs(
    candidates: pa.Table,
    unique: pa.Table,
    texts_for: Callable[[pa.Table], pa.Table],
    config: DedupeConfig,
    counts: dict[str, Any],
) -> pa.Table:
    """The anchored rule's candidates: ``candidates`` and the pairs of each large bucket's
    greedy over its kept members (:func:`~neardup_spark.batch.bucket_kept.kept_pairs`), the
    members' sketches recomputed from their texts (``texts_for(candidates)``: every member of
    a large bucket is in its star), distinct; the greedy's comparisons counted in ``counts``."""
    members = large_buckets(unique, config.bucket_all_pairs_max)
    counts["bucket_comparisons"] = counts["bucket_comparisons_skipped"] = 0
    if not members.num_rows:
        return candidates
    sketch_of = member_sketches_fn(config)
    member_ids = pc.unique(members.column(DOC_ID).combine_chunks())
    side_texts = texts_for(candidates)
    wanted = side_texts.filter(pc.is_in(side_texts.column(DOC_ID), value_set=member_ids))
    sketches = pa.Table.from_batches(
        [sketch_of(batch) for batch in wanted.select([DOC_ID, TEXT]).to_batches()]
    )
    joined = members.join(sketches, DOC_ID)
    pairs, comparisons, skipped = kept_pairs(joined, config)
    record_bucket_comparisons(counts, comparisons, skipped, config.bucket_kept_max)
    if not pairs.num_rows:
        return candidates
    both = pa.concat_tables([candidates, pairs.cast(candidates.schema)])
    return (
        both.group_by([DOC_A, DOC_B], use_threads=False)
        .aggregate([])
        .sort_by([(DOC_A, "ascending"), (DOC_B, "ascending")])
    )


def candidate_texts(
    spark: Any,
    candidates: pa.Table,
    texts: DataFrame | Callable[[DataFrame, bool], DataFrame],
) -> pa.Table:
    """``doc_id``, ``text`` of every document in a candidate pair (one Spark job): from
    ``texts``, or from what ``texts`` gives for the candidates (the boilerplate step's cleaned
    texts)."""
    if not candidates.num_rows:
        return pa.table(
            {DOC_ID: candidates.column(DOC_A).slice(0, 0), TEXT: pa.array([], pa.string())}
        )
    if callable(texts):
        rows = texts(from_arrow_batches(spark, candidates), True)
    else:
        wanted = from_arrow_batches(spark, pa.table({DOC_ID: candidate_ids(candidates)}))
        rows = texts.join(F.broadcast(wanted), DOC_ID, "left_semi")
    return to_arrow(rows.select(DOC_ID, TEXT))


def texts_of_candidates(candidates: pa.Table, documents: pa.Table) -> pa.Table:
    """``doc_id``, ``text`` of every document in a candidate pair, from ``documents`` (the
    texts this process read)."""
    if not candidates.num_rows:
        return documents.slice(0, 0)
    wanted = candidate_ids(candidates)
    return documents.filter(pc.is_in(documents.column(DOC_ID), value_set=wanted))


def candidate_ids(candidates: pa.Table) -> pa.Array:
    """Every document of a candidate pair, once."""
    ends = pa.chunked_array([*candidates.column(DOC_A).chunks, *candidates.column(DOC_B).chunks])
    return pc.unique(ends)


def verified_minhash(
    candidates: pa.Table, texts: pa.Table, config: DedupeConfig, threads: int = 1
) -> pa.Table:
    """Candidate pairs and their documents' texts -> the pairs whose exact Jaccard reaches the
    threshold: ``doc_a``, ``doc_b``, ``jaccard``, ``estimate`` (:func:`verified_here`)."""
    n = candidates.num_rows
    if not n:
        return _scored(candidates, pa.array([], pa.float64()), pa.array([], pa.float64()))
    candidates = candidates.combine_chunks()
    where = pc.index_in(
        pa.chunked_array([candidates.column(DOC_A), candidates.column(DOC_B)]).combine_chunks(),
        value_set=texts.column(DOC_ID).combine_chunks(),
    ).to_numpy(zero_copy_only=False)
    doc_a, doc_b = candidates.column(DOC_A), candidates.column(DOC_B)
    return verified_here(doc_a, doc_b, where[:n], where[n:], texts.column(TEXT), config, threads)


def verified_here(
    doc_a: pa.Array | pa.ChunkedArray,
    doc_b: pa.Array | pa.ChunkedArray,
    rows_a: np.ndarray,
    rows_b: np.ndarray,
    texts: pa.ChunkedArray,
    config: DedupeConfig,
    threads: int,
    normalized: bool = False,
) -> pa.Table:
    """Verification in this process, for full runs and nights alike: candidate pairs
    ``(doc_a[i], doc_b[i])`` whose sides' texts are ``texts[rows_a[i]]`` and
    ``texts[rows_b[i]]`` (already ``normalized``, or raw) -> those whose exact Jaccard reaches
    the threshold: ``doc_a``, ``doc_b``, ``jaccard``, ``estimate``, scored as the Spark path
    scores them (:func:`~neardup_spark.batch.scoring.score_pairs`), in blocks of pairs,
    ``threads`` blocks at a time."""
    n = len(doc_a)
    with_sets = sets_from_texts_fn(config, normalized=normalized)

    def score_block(start: int) -> pa.RecordBatch:
        pairs = np.arange(start, min(start + _PAIRS_PER_BLOCK, n))
        sides = np.repeat(pairs, 2)  # rows 2i and 2i + 1: doc_a's and doc_b's side of pair i
        side_rows = np.empty(sides.size, dtype=np.int64)
        side_rows[0::2], side_rows[1::2] = rows_a[pairs], rows_b[pairs]
        table = pa.table(
            {DOC_A: doc_a.take(sides), DOC_B: doc_b.take(sides), TEXT: texts.take(side_rows)}
        )
        return score_pairs(with_sets(table))

    blocks = map_in_threads(score_block, range(0, n, _PAIRS_PER_BLOCK), max(1, threads))
    scored = pa.Table.from_batches(blocks)
    return scored.filter(pc.greater_equal(scored.column(config.measure), config.threshold))


def verified_simhash(candidates: pa.Table, docs: pa.Table, hamming_k: int) -> pa.Table:
    """Candidate pairs -> those whose SimHash fingerprints differ in at most ``hamming_k``
    bits: ``doc_a``, ``doc_b``, ``hamming`` (int32)."""
    fps = docs.column(SIMHASH).to_numpy().astype(np.int64)
    ids = docs.column(DOC_ID).combine_chunks()
    side_a = pc.index_in(candidates.column(DOC_A), value_set=ids).to_numpy(zero_copy_only=False)
    side_b = pc.index_in(candidates.column(DOC_B), value_set=ids).to_numpy(zero_copy_only=False)
    xor = (fps[side_a] ^ fps[side_b]).view(np.uint64)
    bits = np.unpackbits(xor.view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1).astype(np.int32)
    table = candidates.append_column(HAMMING, pa.array(bits, pa.int32()))
    return table.filter(pa.array(bits <= hamming_k))


def _scored(pairs: pa.Table, jaccard: pa.Array, estimate: pa.Array) -> pa.Table:
    return pairs.append_column(JACCARD, jaccard).append_column(ESTIMATE, estimate)


def _nullable(table: pa.Table) -> pa.Table:
    """``table`` with every column declared nullable: ``pairs/`` is written in one schema
    whatever the path that found its rows (the Spark stages' kept results read back from
    Parquet are all nullable; ``method`` alone is not)."""
    return table.cast(pa.schema([f.with_nullable(True) for f in table.schema]))


def _id_pairs(id_type: pa.DataType) -> pa.Table:
    return pa.table({DOC_A: pa.array([], id_type), DOC_B: pa.array([], id_type)})
