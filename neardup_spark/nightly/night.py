"""A night's chain of steps after its per-document pass, both implementations side by side,
the plan choosing (:func:`~neardup_spark.pipeline.plan.decide_night`): on the driver
(:func:`index_on_driver`, the steps of :mod:`.driver_night` on Arrow tables; what it writes: the
new segment's contents part, its ``docs`` rows, its edges, and the batch's results, as Parquet
and Arrow files written by this process; nothing the index already holds is rewritten), or as
Spark jobs (:func:`index_with_spark`, the steps of :mod:`.steps`) for batches above
``nightly_driver_max_docs``, where the batch's tables do not belong in one process. The same
index and outputs (tested)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from neardup_spark.columns import (
    BAND_KEYS,
    CLUSTER_ID,
    DOC_ID,
    EXACT_FP,
    HAS_TEXT,
    IS_REPRESENTATIVE,
    SIMILARITY,
    TEXT,
)
from neardup_spark.io.filesystem import join, write_parquet_file
from neardup_spark.nightly.content_files import write_part
from neardup_spark.nightly.driver_night import (
    candidates_on_driver,
    cluster_on_driver_night,
    fresh_contents,
    night_on_driver,
    probe_on_driver,
    texts_on_driver,
    touched_on_driver,
    verify_on_driver,
)
from neardup_spark.nightly.publish import CHANGED_CLUSTERS
from neardup_spark.nightly.segment import write_batch
from neardup_spark.nightly.stable_ids import IS_OLD, KEPT, OLD_CLUSTER, ClusterResult
from neardup_spark.nightly.stable_ids_spark import (
    Clustered,
    anchored_with_spark,
    cluster_on_driver,
    cluster_with_spark,
)
from neardup_spark.nightly.steps import (
    BatchContext,
    IndexedNight,
    Touched,
    batch_candidates,
    index_documents,
    keep,
    known_fingerprints,
    member_history,
    needs_stored_edges,
    new_contents,
    probe_index_keys,
    touched_members,
    verify_candidates,
)
from neardup_spark.nightly.store import BATCH, DOCS, PAIRS, WRITTEN
from neardup_spark.pipeline.execution import single_task_edge_limit
from neardup_spark.pipeline.plan import DRIVER, decide_night_components

PART_FILE = "part-00000.parquet"


def index_on_driver(ctx: BatchContext, features: DataFrame) -> IndexedNight:
    """The night after its per-document pass (``features``), its tables on the driver."""
    timer, counts = ctx.timer, ctx.counts
    with timer.stage("contents") as counted:
        night = night_on_driver(ctx, features)
        counted["rows"] = night.contents.num_rows
    with timer.stage("probe") as counted:
        probed = probe_on_driver(ctx, night)
        counts["known_contents"] = counted["rows"] = len(probed.known)
    fresh = fresh_contents(night, probed)
    counts["new_contents"] = fresh.num_rows
    with timer.stage("candidates") as counted:
        doc_a, doc_b, stored = candidates_on_driver(ctx, fresh, probed)
        counts["candidate_pairs"] = counted["rows"] = len(doc_a)
    with timer.stage("verify") as counted:
        texts = texts_on_driver(ctx, fresh, stored)
        edges = verify_on_driver(ctx, doc_a, doc_b, texts)
        counts["near_pairs"] = counted["verified"] = edges.num_rows
    with timer.stage("touched") as counted:
        touched = touched_on_driver(ctx, night, probed, edges)
        counts["touched_clusters"] = touched.n_clusters
        counted["rows"] = touched.history.num_rows
    with timer.stage("components") as counted:
        result = cluster_on_driver_night(ctx, touched, edges)
        counted["rows"] = touched.history.num_rows
    with timer.stage("write") as counted:
        segment = write_night(ctx, fresh, texts, edges, result)
        counted["rows"] = segment["rows"].get(DOCS, 0)
    components = {"strategy": "driver", "rounds": 0}
    return IndexedNight(segment, result.stats, components, touched.n_clusters)


def write_night(
    ctx: BatchContext, fresh: pa.Table, texts: pa.Table, edges: pa.Table, result: ClusterResult
) -> dict[str, Any]:
    """The segment (contents part, docs rows, edges) and the batch's results; returns the
    segment's manifest entry."""
    segment_dir = ctx.index.segment_path(ctx.segment)
    parts = []
    if fresh.num_rows:
        fresh = fresh.sort_by([(EXACT_FP, "ascending")])
        fps = fresh.column(EXACT_FP).to_numpy()
        keys = pc.list_flatten(fresh.column(BAND_KEYS)).to_numpy().reshape(len(fps), -1)
        where = pd.Index(texts.column(EXACT_FP).to_numpy()).get_indexer(fps)
        summary = write_part(segment_dir, fps, keys, texts.column(TEXT).take(pa.array(where)))
        parts.append(vars(summary))
    assigned = result.assigned
    is_old = assigned.column(IS_OLD).to_numpy(zero_copy_only=False).astype(bool)
    moved = is_old & pc.fill_null(
        pc.not_equal(assigned.column(OLD_CLUSTER), assigned.column(CLUSTER_ID)), False
    ).to_numpy(zero_copy_only=False)
    delta = assigned.filter(pa.array(~is_old | moved))
    docs = pa.table(
        {
            DOC_ID: delta.column(DOC_ID),
            HAS_TEXT: delta.column(HAS_TEXT),
            EXACT_FP: delta.column(EXACT_FP),
            CLUSTER_ID: delta.column(CLUSTER_ID),
            BATCH: delta.column(BATCH).cast(pa.int32()),
            WRITTEN: pa.array(np.full(delta.num_rows, ctx.seq, np.int32)),
        }
    )
    storage = ctx.index.storage
    write_parquet_file(join(segment_dir, DOCS, PART_FILE), docs, storage)
    if edges.num_rows:
        write_parquet_file(join(segment_dir, PAIRS, PART_FILE), edges, storage)
    write_results(ctx, result, ~is_old)
    rows = {"contents": fresh.num_rows, DOCS: docs.num_rows, PAIRS: edges.num_rows}
    return {
        "name": ctx.segment,
        "batch": ctx.seq,
        "parts": parts,
        "rows": {table: n for table, n in rows.items() if n},
    }


def write_results(ctx: BatchContext, result: ClusterResult, new: np.ndarray) -> None:
    """The batch's results (what a rerun publishes again): ``clusters/``, ``kept/``,
    ``pairs/``, ``changed_clusters/``."""
    rows = result.assigned.filter(pa.array(new))
    ids, clusters = rows.column(DOC_ID), rows.column(CLUSTER_ID)
    members = {DOC_ID: ids, CLUSTER_ID: clusters, IS_REPRESENTATIVE: pc.equal(ids, clusters)}
    if SIMILARITY in rows.column_names:  # the anchored rule's
        members[SIMILARITY] = rows.column(SIMILARITY)
    tables = {
        "clusters": pa.table(members),
        KEPT: pa.table({DOC_ID: rows.filter(rows.column(KEPT)).column(DOC_ID)}),
        "pairs": result.pairs,
        CHANGED_CLUSTERS: result.changed,
    }
    for name, table in tables.items():
        write_parquet_file(join(ctx.results_path, name, PART_FILE), table, ctx.index.storage)


def index_with_spark(ctx: BatchContext, features: DataFrame) -> IndexedNight:
    """The night after its per-document pass (``features``), every step a Spark job."""
    new = index_documents(ctx, features)
    probe = probe_index_keys(ctx, new)
    fresh = keep(new_contents(new, probe))
    n_fresh = ctx.counts["new_contents"] = new.n_contents - probe.n_known
    candidates = batch_candidates(ctx, fresh, n_fresh, probe)
    edges = verify_candidates(ctx, candidates, fresh)
    touched = touched_members(ctx, new, probe, edges)
    clustered = cluster_touched(ctx, touched, edges)
    with ctx.timer.stage("write") as counted:
        segment = write_batch(ctx, known_fingerprints(probe), n_fresh, edges, clustered)
        counted["rows"] = segment["rows"].get("docs", 0)
    return IndexedNight(segment, clustered.stats, clustered.components, touched.n_clusters)


def cluster_touched(ctx: BatchContext, touched: Touched, edges: DataFrame) -> Clustered:
    """Stable-id clusters of the touched documents: on the driver up to
    ``components_single_task_max_edges`` members, else in distributed Spark jobs; the stored
    edges come in only when an indexed cluster is touched or an indexed content comes back."""
    history = member_history(touched, ctx.n_new)
    stored = ctx.index.pairs() if needs_stored_edges(ctx, touched.n_clusters) else None
    configured = ctx.plan.settings.components_single_task_max_edges
    with ctx.timer.stage("components") as counted:
        limit = single_task_edge_limit(ctx.spark, configured, touched.n_members, edges)
        choice = ctx.plan.record(decide_night_components(touched.n_members, limit))
        anchored = ctx.config.cluster_rule == "anchored"
        if choice.where == DRIVER:
            clustered = cluster_on_driver(ctx.spark, history, edges, stored, anchored)
        else:
            sizes = (touched.n_members, ctx.n_new)
            twin = anchored_with_spark if anchored else cluster_with_spark
            clustered = twin(history, edges, stored, sizes, configured, keep)
        counted["rows"] = touched.n_members
    return clustered
