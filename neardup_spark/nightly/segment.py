"""What a nightly batch writes: its segment (the contents it brought, the documents it added or
changed, the edges it verified) and its results (what OUTPUT publishes, kept in the index so a
rerun can publish them again). Everything is new files under fresh names; nothing the index
already holds is rewritten."""

from __future__ import annotations

from typing import Any

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark.columns import (
    CLUSTER_ID,
    DOC_ID,
    EXACT_FP,
    HAS_TEXT,
    IS_REPRESENTATIVE,
    SIMILARITY,
)
from neardup_spark.io.filesystem import join
from neardup_spark.nightly.contents import parts_for, write_contents_from_stash
from neardup_spark.nightly.publish import CHANGED_CLUSTERS
from neardup_spark.nightly.stable_ids import IS_OLD, KEPT, OLD_CLUSTER
from neardup_spark.nightly.stable_ids_spark import Clustered
from neardup_spark.nightly.steps import BatchContext
from neardup_spark.nightly.store import BATCH, DOCS, PAIRS, WRITTEN
from neardup_spark.nightly.text_stash import STASH_BUCKETS
from neardup_spark.pipeline.execution import run_together


def docs_delta(ctx: BatchContext, clustered: Clustered) -> DataFrame:
    """The ``docs`` rows the batch writes: its documents, and indexed documents whose cluster
    id it changed (``written`` = the batch)."""
    assigned = clustered.assigned
    changed = F.col(IS_OLD) & (F.col(OLD_CLUSTER) != F.col(CLUSTER_ID))
    return assigned.where(~F.col(IS_OLD) | changed).select(
        DOC_ID,
        HAS_TEXT,
        EXACT_FP,
        CLUSTER_ID,
        BATCH,
        F.lit(ctx.seq).cast("int").alias(WRITTEN),
    )


def write_batch(
    ctx: BatchContext,
    known: np.ndarray,
    n_fresh: int,
    edges: DataFrame,
    clustered: Clustered,
) -> dict[str, Any]:
    """Write the segment and the results (concurrently); returns the segment's manifest entry:
    ``name``, ``batch``, ``parts`` (the contents parts), ``rows`` per table. The new contents
    come from the batch's stash: its contents but ``known`` (sorted fingerprints, those the
    index holds)."""
    segment_dir = ctx.index.segment_path(ctx.segment)
    n_docs = ctx.n_new + clustered.stats["moved_docs"]
    n_near = ctx.counts["near_pairs"]
    parts: list[dict[str, Any]] = []

    def contents() -> None:
        if n_fresh:
            assert ctx.stash is not None  # written by the per-document pass
            count = min(parts_for(n_fresh, ctx.buckets), STASH_BUCKETS)
            bands = ctx.config.banding.bands
            written = write_contents_from_stash(
                ctx.spark, ctx.stash, segment_dir, count, bands, known
            )
            held = sum(int(p["rows"]) for p in written)
            if held != n_fresh:
                raise RuntimeError(
                    f"the segment's parts hold {held} contents, not the batch's {n_fresh} new ones"
                )
            parts.extend(written)

    actions = [
        contents,
        lambda: docs_delta(ctx, clustered)
        .coalesce(max(1, n_docs // 2_000_000 + 1))
        .write.parquet(join(segment_dir, DOCS)),
        *result_writes(ctx, clustered),
    ]
    if n_near:
        actions.append(
            lambda: edges.coalesce(max(1, n_near // 5_000_000 + 1)).write.parquet(
                join(segment_dir, PAIRS)
            )
        )
    run_together(ctx.spark, actions)
    rows = {"contents": n_fresh, DOCS: n_docs, PAIRS: n_near}
    return {
        "name": ctx.segment,
        "batch": ctx.seq,
        "parts": parts,
        "rows": {table: n for table, n in rows.items() if n},
    }


def result_writes(ctx: BatchContext, clustered: Clustered) -> list[Any]:
    """The writes of the batch's results (what a rerun publishes again): ``clusters/``,
    ``kept/``, ``pairs/``, ``changed_clusters/``."""
    new_rows = clustered.assigned.where(~F.col(IS_OLD))
    one_file = max(1, ctx.n_new // 2_000_000 + 1)
    results = ctx.results_path
    anchored = [SIMILARITY] if SIMILARITY in new_rows.columns else []  # the anchored rule's
    clusters = new_rows.select(
        DOC_ID,
        CLUSTER_ID,
        (F.col(DOC_ID) == F.col(CLUSTER_ID)).alias(IS_REPRESENTATIVE),
        *anchored,
    )
    kept = new_rows.where(F.col(KEPT)).select(DOC_ID)
    return [
        lambda: clusters.coalesce(one_file).write.parquet(join(results, "clusters")),
        lambda: kept.coalesce(one_file).write.parquet(join(results, KEPT)),
        lambda: clustered.pairs.coalesce(one_file).write.parquet(join(results, "pairs")),
        lambda: clustered.changed.coalesce(1).write.parquet(join(results, CHANGED_CLUSTERS)),
    ]
