"""A night on the driver: after the full run's per-document pass (Spark), a batch of up to
``nightly_driver_max_docs`` documents does its own work in this process, on Arrow tables, with
the kernels and batch functions the Spark path runs in its tasks: its contents, their candidates,
exact verification, stable cluster ids, the new segment. Spark scans the contents keys and
returns the few rows that concern the night; the rows of ``docs`` and ``pairs`` it needs come
from filtered reads (:mod:`.index_scan`: in this process up to ``nightly_driver_scan_max_rows``
rows, else Spark jobs), so a night costs a few Spark jobs, not one per step.

Same results as the Spark path (:mod:`.steps`), tested on the same history."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from neardup_spark.batch.documents import normalized_texts_fn
from neardup_spark.columns import (
    BAND_KEY,
    BAND_KEYS,
    CLUSTER_ID,
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    EXACT_FP,
    HAS_TEXT,
    JACCARD,
    TEXT,
)
from neardup_spark.kernels.lsh import bucket_pairs
from neardup_spark.nightly.anchored_night import anchored_cluster_members
from neardup_spark.nightly.content_files import TEXTS_SUFFIX, read_texts
from neardup_spark.nightly.contents import (
    KIND,
    KNOWN,
    MATCH,
    PART,
    ROW,
    probe_in_process,
    probe_index,
)
from neardup_spark.nightly.docs import current_rows_collected
from neardup_spark.nightly.index_filters import AllOf, AnyOf, IsIn, NotIn
from neardup_spark.nightly.index_scan import IndexTable
from neardup_spark.nightly.stable_ids import (
    IS_OLD,
    LIVE_BEFORE,
    OLD_CLUSTER,
    PREV_CLUSTER,
    PREV_FP,
    PREV_HAS_TEXT,
    ClusterResult,
    cluster_members,
)
from neardup_spark.nightly.steps import BatchContext, batch_documents, needs_stored_edges
from neardup_spark.nightly.store import BATCH, DOCS, FP_A, FP_B, PAIRS
from neardup_spark.pipeline.driver_pairs import verified_here
from neardup_spark.pipeline.execution import maybe_broadcast
from neardup_spark.pipeline.plan import DRIVER, decide_probe
from neardup_spark.pipeline.sketch import map_in_threads
from neardup_spark.runtime.engine import from_arrow
from neardup_spark.runtime.spark_compat import to_arrow

_TEXTS_PER_BLOCK = 4096  # new contents' texts normalised at once, a block per thread
# Parts whose stored texts are read at once. A read may hold a whole part's texts decompressed
# (read_texts: when a quarter of its batches are wanted) before it keeps its rows: two bound the
# driver's peak at twice a serial read's, and overlap the input's Spark read as well as four.
_READ_THREADS = 2


@dataclass
class Night:
    """The batch on the driver."""

    docs: pa.Table  # doc_id, has_text, exact_fp: every new document
    contents: pa.Table  # exact_fp, doc_id (its smallest document), band_keys: distinct texts


def night_on_driver(ctx: BatchContext, features: DataFrame | pa.Table) -> Night:
    """The per-document table of the batch, collected (one row per document, no texts) unless
    this process computed it, and its distinct contents, each with its smallest document."""
    columns = [DOC_ID, HAS_TEXT, EXACT_FP, BAND_KEYS]
    if isinstance(features, pa.Table):
        table = features.select(columns)
    else:
        table = to_arrow(features.select(*columns))
    docs = table.select([DOC_ID, HAS_TEXT, EXACT_FP])
    texts = table.filter(table.column(HAS_TEXT))
    order = pc.sort_indices(texts, [(EXACT_FP, "ascending"), (DOC_ID, "ascending")])
    texts = texts.take(order)
    fps = texts.column(EXACT_FP).to_numpy()
    first = np.flatnonzero(np.r_[True, fps[1:] != fps[:-1]]) if len(fps) else np.zeros(0, int)
    contents = texts.take(pa.array(first)).select([EXACT_FP, DOC_ID, BAND_KEYS])
    return Night(docs, contents)


@dataclass
class Probed:
    known: np.ndarray  # batch fingerprints the index holds
    matches: pa.Table  # band_key, exact_fp, part, row: the smallest fps per key of each part


def probe_on_driver(ctx: BatchContext, night: Night) -> Probed:
    """The one scan of every contents part: by threads of this process in local mode, else a
    Spark job (its few rows come back)."""
    parts = ctx.index.content_parts()
    empty = pa.table(
        {
            BAND_KEY: pa.array([], pa.int64()),
            EXACT_FP: pa.array([], pa.int64()),
            PART: pa.array([], pa.string()),
            ROW: pa.array([], pa.int64()),
        }
    )
    if not parts or not night.contents.num_rows:
        return Probed(np.zeros(0, np.int64), empty)
    fps = np.sort(night.contents.column(EXACT_FP).to_numpy())
    keys = np.unique(pc.list_flatten(night.contents.column(BAND_KEYS)).to_numpy())
    top, checksums = ctx.config.bucket_all_pairs_max, ctx.index.keys_checksums()
    if ctx.plan.record(decide_probe(ctx.plan.facts)).where == DRIVER:
        threads = max(1, ctx.plan.facts.engine.local_threads)
        hits = probe_in_process(parts, fps, keys, top, checksums, threads)
        ctx.timer.on_driver.append("probe")
    else:
        hits = to_arrow(probe_index(ctx.spark, parts, fps, keys, top, checksums))
    kind = hits.column(KIND).to_numpy()
    known = np.unique(hits.column(EXACT_FP).to_numpy()[kind == KNOWN])
    matches = hits.filter(pa.array(kind == MATCH)).select([BAND_KEY, EXACT_FP, PART, ROW])
    return Probed(known, matches)


def fresh_contents(night: Night, probed: Probed) -> pa.Table:
    """The batch's contents the index does not hold."""
    held = pc.is_in(night.contents.column(EXACT_FP), pa.array(probed.known, pa.int64()))
    return night.contents.filter(pc.invert(held))


def _key_entries(contents: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(band key, fingerprint) of every key of ``contents``."""
    lists = contents.column(BAND_KEYS).combine_chunks()
    keys = pc.list_flatten(lists).to_numpy()
    fps = contents.column(EXACT_FP).to_numpy()[pc.list_parent_indices(lists).to_numpy()]
    return keys, fps


def _distinct_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = a != b  # two keys of one content that collide in 64 bits
    pairs = np.unique(np.stack([np.minimum(a, b)[keep], np.maximum(a, b)[keep]], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]


def candidates_on_driver(
    ctx: BatchContext, fresh: pa.Table, probed: Probed
) -> tuple[np.ndarray, np.ndarray, pa.Table]:
    """Candidate pairs of contents (``doc_a < doc_b`` fingerprints): new x new from the LSH
    buckets of the new contents (all pairs of a small bucket, a star from its smallest
    fingerprint in a large one, as the full run), new x indexed from the probe (per key, the
    ``bucket_all_pairs_max`` smallest indexed fingerprints); and where the indexed sides are
    (``exact_fp``, ``part``, ``row``)."""
    top = ctx.config.bucket_all_pairs_max
    keys, fps = _key_entries(fresh)
    order = np.lexsort((fps, keys))
    a, b = bucket_pairs(keys[order], pa.array(fps[order], pa.int64()), top)
    new_a, new_b = a.to_numpy(), b.to_numpy()
    old_a, old_b, stored = indexed_candidates(ctx, fresh, probed)
    doc_a, doc_b = _distinct_pairs(np.r_[new_a, old_a], np.r_[new_b, old_b])
    return doc_a, doc_b, stored


def indexed_candidates(
    ctx: BatchContext, fresh: pa.Table, probed: Probed
) -> tuple[np.ndarray, np.ndarray, pa.Table]:
    """The new x indexed candidate pairs of the ``fresh`` contents (new fingerprint, indexed
    fingerprint), from the probe: per band key, the ``bucket_all_pairs_max`` smallest indexed
    fingerprints; and where the indexed sides are (``exact_fp``, ``part``, ``row``)."""
    top = ctx.config.bucket_all_pairs_max
    keys, fps = _key_entries(fresh)
    matches = probed.matches.sort_by([(BAND_KEY, "ascending"), (EXACT_FP, "ascending")])
    m_keys = matches.column(BAND_KEY).to_numpy()
    starts = np.flatnonzero(np.r_[True, m_keys[1:] != m_keys[:-1]]) if len(m_keys) else m_keys
    rank = np.arange(len(m_keys)) - np.repeat(starts, np.diff(np.r_[starts, len(m_keys)]))
    matches = matches.filter(pa.array(rank < top))
    entries = pa.table({BAND_KEY: pa.array(keys, pa.int64()), "new_fp": pa.array(fps, pa.int64())})
    joined = entries.join(matches, BAND_KEY, join_type="inner")
    stored = joined.select([EXACT_FP, PART, ROW]).group_by([EXACT_FP, PART, ROW]).aggregate([])
    return joined.column("new_fp").to_numpy(), joined.column(EXACT_FP).to_numpy(), stored


def texts_on_driver(ctx: BatchContext, fresh: pa.Table, stored: pa.Table) -> pa.Table:
    """Normalised texts of every candidate side: the new contents' from the input (their
    smallest documents' rows, normalised as the per-document pass does), the indexed ones'
    from their parts (only the record batches holding them). Columns ``exact_fp``, ``text``.
    The parts are read by a few threads while Spark reads the input (decompression and the
    fingerprint check run outside the GIL)."""
    by_part = [
        (
            str(part),
            np.sort(stored.filter(pc.equal(stored.column(PART), part)).column(ROW).to_numpy()),
        )
        for part in np.unique(stored.column(PART).to_numpy(zero_copy_only=False))
    ]
    with ThreadPoolExecutor(_READ_THREADS) as pool:
        reads = [pool.submit(read_texts, part + TEXTS_SUFFIX, rows) for part, rows in by_part]
        rows = _new_texts(ctx, fresh)
        normalize = normalized_texts_fn(ctx.config)
        raw = rows.column(TEXT).combine_chunks()
        blocks = [raw.slice(a, _TEXTS_PER_BLOCK) for a in range(0, len(raw), _TEXTS_PER_BLOCK)]
        threads = max(1, ctx.plan.facts.engine.local_threads)
        fp_parts = [rows.column(EXACT_FP).combine_chunks()]
        text_parts = [pa.array([], pa.large_string())] + [
            block.cast(pa.large_string()) for block in map_in_threads(normalize, blocks, threads)
        ]
        for read in reads:  # in part order: the same table whatever finishes first
            fps, texts = read.result()
            fp_parts.append(pa.array(fps, pa.int64()))
            text_parts.append(texts.cast(pa.large_string()))
    return pa.table(
        {
            EXACT_FP: pa.chunked_array(fp_parts, pa.int64()),
            TEXT: pa.chunked_array(text_parts, pa.large_string()),
        }
    )


def _new_texts(ctx: BatchContext, fresh: pa.Table) -> pa.Table:
    """``exact_fp``, ``text`` (as read) of the ``fresh`` contents' documents: from the batch
    this process read, else from the input by a Spark join."""
    if ctx.documents is not None:
        where = pc.index_in(fresh.column(DOC_ID), value_set=ctx.documents.column(DOC_ID))
        return pa.table(
            {EXACT_FP: fresh.column(EXACT_FP), TEXT: ctx.documents.column(TEXT).take(where)}
        )
    reps = from_arrow(ctx.spark, fresh.select([DOC_ID, EXACT_FP]))
    return to_arrow(
        batch_documents(ctx.df, ctx.config)
        .join(maybe_broadcast(reps, fresh.num_rows), DOC_ID)
        .select(EXACT_FP, TEXT)
    )


def verify_on_driver(
    ctx: BatchContext, doc_a: np.ndarray, doc_b: np.ndarray, texts: pa.Table
) -> pa.Table:
    """Exact Jaccard (and MinHash estimate) of every candidate pair, as a full run's driver
    verifies (:func:`~neardup_spark.pipeline.driver_pairs.verified_here`) -> verified edges
    ``fp_a``, ``fp_b``, ``jaccard``, ``estimate``; in one thread per core in local mode."""
    index = pd.Index(texts.column(EXACT_FP).to_numpy())
    side_a, side_b = index.get_indexer(doc_a), index.get_indexer(doc_b)
    if not len(doc_a):
        return _edges(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    fps_a, fps_b = pa.array(doc_a, pa.int64()), pa.array(doc_b, pa.int64())
    threads = ctx.plan.facts.engine.local_threads
    table = verified_here(
        fps_a, fps_b, side_a, side_b, texts.column(TEXT), ctx.config, threads, normalized=True
    )
    return _edges(
        table.column(DOC_A).to_numpy(),
        table.column(DOC_B).to_numpy(),
        table.column(JACCARD).to_numpy(),
        table.column(ESTIMATE).to_numpy(),
    )


def _edges(a: np.ndarray, b: np.ndarray, jaccard: np.ndarray, estimate: np.ndarray) -> pa.Table:
    return pa.table(
        {
            FP_A: pa.array(a, pa.int64()),
            FP_B: pa.array(b, pa.int64()),
            JACCARD: pa.array(jaccard, pa.float64()),
            ESTIMATE: pa.array(estimate, pa.float64()),
        }
    )


@dataclass
class TouchedOnDriver:
    history: pa.Table  # the members with prev_exact_fp, prev_has_text, live_before
    n_clusters: int  # old clusters touched


def touched_on_driver(
    ctx: BatchContext, night: Night, probed: Probed, edges: pa.Table
) -> TouchedOnDriver:
    """The members whose cluster may change (the new documents and the live members of the old
    clusters the batch touches), with what the stable-id rule needs; the rows about the night
    come from filtered reads of ``docs`` (:class:`.IndexTable`: in this process, or Spark jobs)."""
    new_members = _new_members(ctx, night)
    rows = IndexTable(ctx.index, DOCS, ctx.plan)
    if rows.empty:
        return TouchedOnDriver(_history(new_members, None, None), 0)
    new_ids = night.docs.column(DOC_ID).combine_chunks()
    fps_array = pa.array(
        np.unique(
            np.r_[
                night.contents.column(EXACT_FP).to_numpy(),
                edges.column(FP_A).to_numpy(),
                edges.column(FP_B).to_numpy(),
                _stored_neighbours(ctx, probed.known),
            ]
        ),
        pa.int64(),
    )
    one_version = sum(1 for s in ctx.index.segments if s["rows"].get(DOCS)) <= 1

    near = AnyOf(IsIn(DOC_ID, new_ids), IsIn(EXACT_FP, fps_array))
    nearby = current_rows_collected(rows, near, one_version)
    is_new = pc.is_in(nearby.column(DOC_ID), new_ids)
    replaced = nearby.filter(is_new)
    with_text = nearby.filter(nearby.column(HAS_TEXT))
    batch_fps = night.contents.column(EXACT_FP).combine_chunks()
    live_before = np.unique(
        with_text.filter(pc.is_in(with_text.column(EXACT_FP), batch_fps))
        .column(EXACT_FP)
        .to_numpy()
    )
    touched = np.unique(
        np.r_[
            with_text.filter(pc.invert(pc.is_in(with_text.column(DOC_ID), new_ids)))
            .column(CLUSTER_ID)
            .to_numpy(zero_copy_only=False),
            replaced.column(CLUSTER_ID).to_numpy(zero_copy_only=False),
        ]
    )
    members = new_members
    if len(touched):
        touched_ids = pa.array(touched, new_ids.type)
        old_member = AllOf(IsIn(CLUSTER_ID, touched_ids), NotIn(DOC_ID, new_ids))
        old = current_rows_collected(rows, old_member, one_version)
        members = pa.concat_tables([new_members, _old_members(old)])
    return TouchedOnDriver(_history(members, replaced, live_before), len(touched))


def _new_members(ctx: BatchContext, night: Night) -> pa.Table:
    docs = night.docs
    id_type = docs.schema.field(DOC_ID).type
    return pa.table(
        {
            DOC_ID: docs.column(DOC_ID),
            HAS_TEXT: docs.column(HAS_TEXT),
            EXACT_FP: docs.column(EXACT_FP),
            OLD_CLUSTER: pa.nulls(docs.num_rows, id_type),
            IS_OLD: pa.array(np.zeros(docs.num_rows, bool)),
            BATCH: pa.array(np.full(docs.num_rows, ctx.seq, np.int32)),
        }
    )


def _old_members(old: pa.Table) -> pa.Table:
    return pa.table(
        {
            DOC_ID: old.column(DOC_ID),
            HAS_TEXT: old.column(HAS_TEXT),
            EXACT_FP: old.column(EXACT_FP),
            OLD_CLUSTER: old.column(CLUSTER_ID),
            IS_OLD: pa.array(np.ones(old.num_rows, bool)),
            BATCH: old.column(BATCH).cast(pa.int32()),
        }
    )


def _history(
    members: pa.Table, replaced: pa.Table | None, live_before: np.ndarray | None
) -> pa.Table:
    """The members with their replaced version and whether their content was live before."""
    n = members.num_rows
    prev_fp = pa.nulls(n, pa.int64())
    prev_has_text = pa.nulls(n, pa.bool_())
    prev_cluster = pa.nulls(n, members.schema.field(DOC_ID).type)
    if replaced is not None and replaced.num_rows:
        where = pc.index_in(members.column(DOC_ID), replaced.column(DOC_ID))
        prev_fp = pc.take(replaced.column(EXACT_FP), where)
        prev_has_text = pc.take(replaced.column(HAS_TEXT), where)
        prev_cluster = pc.take(replaced.column(CLUSTER_ID), where)
    live = pa.nulls(n, pa.bool_())
    if live_before is not None and len(live_before):
        held = pc.is_in(members.column(EXACT_FP), pa.array(live_before, pa.int64()))
        live = pc.if_else(held, True, pa.scalar(None, pa.bool_()))
    return (
        members.append_column(PREV_FP, prev_fp)
        .append_column(PREV_HAS_TEXT, prev_has_text)
        .append_column(PREV_CLUSTER, prev_cluster)
        .append_column(LIVE_BEFORE, live)
    )


def _stored_neighbours(ctx: BatchContext, known: np.ndarray) -> np.ndarray:
    """Ends of the stored edges incident to the batch contents the index holds."""
    stored = IndexTable(ctx.index, PAIRS, ctx.plan)
    if stored.empty or not len(known):
        return np.zeros(0, np.int64)
    held = pa.array(known, pa.int64())
    ends = stored.rows(AnyOf(IsIn(FP_A, held), IsIn(FP_B, held)))
    return np.r_[ends.column(FP_A).to_numpy(), ends.column(FP_B).to_numpy()]


def cluster_on_driver_night(
    ctx: BatchContext, touched: TouchedOnDriver, edges: pa.Table
) -> ClusterResult:
    """Stable ids of the members over the new edges and, when an old cluster is touched or a
    content the index holds comes back, the stored edges between the members' contents (a
    filtered read of ``pairs``)."""
    all_edges = [edges]
    stored = IndexTable(ctx.index, PAIRS, ctx.plan)
    if needs_stored_edges(ctx, touched.n_clusters) and not stored.empty:
        history = touched.history
        member_fps = pa.array(
            np.unique(history.filter(history.column(HAS_TEXT)).column(EXACT_FP).to_numpy()),
            pa.int64(),
        )
        both = AllOf(IsIn(FP_A, member_fps), IsIn(FP_B, member_fps))
        all_edges.append(stored.rows(both).select([FP_A, FP_B, JACCARD, ESTIMATE]))
    joined = pa.concat_tables(all_edges, promote_options="permissive")
    if ctx.config.cluster_rule == "anchored":
        return anchored_cluster_members(touched.history, joined)
    return cluster_members(touched.history, joined)
