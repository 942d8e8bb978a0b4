"""The chain of a night as Spark jobs (:mod:`.steps`): for batches above
``nightly_driver_max_docs``, where the batch's tables do not belong in one process. Same results
as the driver chain (:mod:`.driver_run`)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from neardup_spark.nightly.segment import write_batch
from neardup_spark.nightly.stable_ids_spark import (
    Clustered,
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
from neardup_spark.pipeline.execution import single_task_edge_limit


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
    with ctx.timer.stage("components") as counted:
        limit = single_task_edge_limit(
            ctx.spark, ctx.config.components_single_task_max_edges, touched.n_members, edges
        )
        if touched.n_members <= limit:
            clustered = cluster_on_driver(ctx.spark, history, edges, stored)
        else:
            sizes = (touched.n_members, ctx.n_new)
            clustered = cluster_with_spark(history, edges, stored, sizes, ctx.config, keep)
        counted["rows"] = touched.n_members
    return clustered
