"""Clustering the documents a nightly batch touches, in Spark: on the driver
(:func:`cluster_on_driver`, which collects them for
:func:`~neardup_spark.nightly.stable_ids.cluster_members`) or, for graphs too large for one
process, distributed (:func:`cluster_with_spark`, the same rule in Spark jobs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from neardup_spark.columns import (
    CLUSTER_ID,
    COMPONENT,
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    EXACT_FP,
    HAMMING,
    HAS_TEXT,
    JACCARD,
    METHOD,
    SIMILARITY,
)
from neardup_spark.nightly.anchored_night import (
    KIND,
    STATS,
    anchored_cluster_members,
    components_fn,
    summed_stats,
)
from neardup_spark.nightly.edges import edges_within, incident_edges
from neardup_spark.nightly.stable_ids import (
    IS_OLD,
    KEPT,
    LIVE_BEFORE,
    NEW_CLUSTER_ID,
    OLD_CLUSTER,
    OLD_CLUSTER_ID,
    PREV_CLUSTER,
    PREV_FP,
    PREV_HAS_TEXT,
    cluster_members,
)
from neardup_spark.nightly.store import BATCH, FP_A, FP_B
from neardup_spark.pipeline.components import connected_components
from neardup_spark.pipeline.execution import (
    local_checkpoint,
    shuffle_partitions,
    single_task_edge_limit,
)
from neardup_spark.runtime.engine import from_arrow_batches
from neardup_spark.runtime.spark_compat import to_arrow
from neardup_spark.stages.clusters import exact_pairs, minhash_pairs

_ANCHOR, _ANCHOR_OLD = "anchor", "anchor_is_old"
_ANCHOR_A, _ANCHOR_B = "anchor_a", "anchor_b"
_HAS_OLD, _WINNER = "has_old", "winner"


@dataclass
class Clustered:
    """The touched documents' clusters, as Spark DataFrames."""

    assigned: DataFrame  # doc_id, has_text, exact_fp, cluster_id, batch, is_old, old_cluster, kept
    changed: DataFrame  # old_cluster_id, new_cluster_id
    pairs: DataFrame  # pairs/ rows the batch adds
    stats: dict[str, int]
    components: dict[str, Any]  # strategy, rounds


def unchanged_recrawl() -> Column:
    """A re-crawled document whose text did not change."""
    return (
        F.col(PREV_FP).isNotNull()
        & (F.col(PREV_FP) == F.col(EXACT_FP))
        & (F.col(PREV_HAS_TEXT) == F.col(HAS_TEXT))
    )


def cluster_on_driver(
    spark: SparkSession,
    history: DataFrame,
    new_edges: DataFrame,
    stored: DataFrame | None,
    anchored: bool = False,
) -> Clustered:
    """:func:`~neardup_spark.nightly.stable_ids.cluster_members` on the driver: the members and
    their edges are collected (one job each), the results come back as DataFrames of their
    Arrow batches (never local relations, which a 2 GB local driver could not hold at 1M
    members: :func:`~neardup_spark.runtime.spark_compat.from_arrow_batches`). ``anchored``:
    the anchored rule's :func:`~neardup_spark.nightly.anchored_night.anchored_cluster_members`
    instead."""
    members = to_arrow(history)
    edges = [to_arrow(new_edges.select(FP_A, FP_B, JACCARD, ESTIMATE))]
    if stored is not None:
        fps = np.unique(members.filter(members.column(HAS_TEXT)).column(EXACT_FP).to_numpy())
        wanted = from_arrow_batches(spark, pa.table({EXACT_FP: pa.array(fps, pa.int64())}))
        edges.append(to_arrow(edges_within(stored, wanted, len(fps))))
    rule = anchored_cluster_members if anchored else cluster_members
    result = rule(members, pa.concat_tables(edges, promote_options="permissive"))
    return Clustered(
        from_arrow_batches(spark, result.assigned),
        from_arrow_batches(spark, result.changed),
        from_arrow_batches(spark, result.pairs),
        result.stats,
        {"strategy": "driver", "rounds": 0},
    )


def _member_graph(
    members: DataFrame,
    new_edges: DataFrame,
    stored: DataFrame | None,
    n_members: int,
    keep: Callable[[DataFrame], DataFrame],
) -> DataFrame:
    """Members' exact-copy edges (copy -> its content's smallest document, the anchor) and near
    edges between anchors of live contents: ``doc_a``, ``doc_b``, ``fp_a``/``fp_b``/``jaccard``/
    ``estimate`` (near edges), ``is_old``/``anchor_is_old`` (exact edges)."""
    member_fps = keep(members.where(F.col(HAS_TEXT)).select(EXACT_FP).distinct())
    live_edges = new_edges
    if stored is not None:
        live_edges = live_edges.unionByName(edges_within(stored, member_fps, n_members))
        live_edges = live_edges.dropDuplicates([FP_A, FP_B])
    live_edges = edges_within(live_edges, member_fps, n_members)
    anchors = (
        members.where(F.col(HAS_TEXT))
        .groupBy(EXACT_FP)
        .agg(
            F.min(DOC_ID).alias(_ANCHOR),
            F.min_by(F.col(IS_OLD), F.col(DOC_ID)).alias(_ANCHOR_OLD),
        )
    )
    exact_edges = (
        members.where(F.col(HAS_TEXT))
        .join(anchors, EXACT_FP)
        .where(F.col(DOC_ID) != F.col(_ANCHOR))
        .select(F.col(_ANCHOR).alias(DOC_A), F.col(DOC_ID).alias(DOC_B), IS_OLD, _ANCHOR_OLD)
    )
    near_edges = live_edges.join(
        anchors.select(F.col(EXACT_FP).alias(FP_A), F.col(_ANCHOR).alias(_ANCHOR_A)), FP_A
    ).join(anchors.select(F.col(EXACT_FP).alias(FP_B), F.col(_ANCHOR).alias(_ANCHOR_B)), FP_B)
    return exact_edges.select(
        DOC_A,
        DOC_B,
        F.lit(None).cast("long").alias(FP_A),
        F.lit(None).cast("long").alias(FP_B),
        F.lit(None).cast("double").alias(JACCARD),
        F.lit(None).cast("double").alias(ESTIMATE),
        IS_OLD,
        _ANCHOR_OLD,
    ).unionByName(
        near_edges.select(
            F.least(_ANCHOR_A, _ANCHOR_B).alias(DOC_A),
            F.greatest(_ANCHOR_A, _ANCHOR_B).alias(DOC_B),
            FP_A,
            FP_B,
            JACCARD,
            ESTIMATE,
            F.lit(None).cast("boolean").alias(IS_OLD),
            F.lit(None).cast("boolean").alias(_ANCHOR_OLD),
        )
    )


def assign_ids(members: DataFrame, labels: DataFrame) -> DataFrame:
    """Members + component labels -> final cluster ids (the stable rule of
    :mod:`neardup_spark.nightly.stable_ids`) and whether each new document goes to
    ``deduplicated/``.

    Output columns: the members' columns, ``component``, ``cluster_id``, ``has_old``, ``kept``.
    """
    comp = members.join(labels, DOC_ID, "left").withColumn(
        COMPONENT, F.coalesce(F.col(COMPONENT), F.col(DOC_ID))
    )
    # An old cluster id may survive in a component only while its representative is in it.
    claims = comp.where(F.col(IS_OLD)).select(COMPONENT, F.col(OLD_CLUSTER).alias(_WINNER))
    present = comp.select(F.col(DOC_ID).alias(_WINNER), COMPONENT)
    winners = (
        claims.distinct()
        .join(present, [_WINNER, COMPONENT], "left_semi")
        .groupBy(COMPONENT)
        .agg(F.min(_WINNER).alias(_WINNER))
    )
    has_old = comp.groupBy(COMPONENT).agg(F.max(F.col(IS_OLD)).alias(_HAS_OLD))
    out = (
        comp.join(winners, COMPONENT, "left")
        .join(has_old, COMPONENT)
        .withColumn(CLUSTER_ID, F.coalesce(F.col(_WINNER), F.col(COMPONENT)))
    )
    kept = (
        ~F.col(IS_OLD)
        & (F.col(DOC_ID) == F.col(CLUSTER_ID))
        & ~F.col(_HAS_OLD)
        & ~unchanged_recrawl()
    )
    return out.withColumn(KEPT, kept)


def _cluster_stats(assigned: DataFrame) -> dict[str, int]:
    """The counts :func:`~neardup_spark.nightly.stable_ids.cluster_members` reports, in one
    Spark job."""
    new_text = ~F.col(IS_OLD) & F.col(HAS_TEXT)
    changed_row = F.col(IS_OLD) & (F.col(OLD_CLUSTER) != F.col(CLUSTER_ID))
    row = assigned.agg(
        F.sum((~F.col(IS_OLD) & F.col(_HAS_OLD)).cast("long")).alias("joined_existing"),
        F.sum(F.col(KEPT).cast("long")).alias("deduplicated"),
        F.sum(F.col(PREV_FP).isNotNull().cast("long")).alias("replaced"),
        F.sum(unchanged_recrawl().cast("long")).alias("replaced_unchanged"),
        F.sum(new_text.cast("long")).alias("text_docs"),
        F.countDistinct(F.when(new_text & F.col(LIVE_BEFORE).isNull(), F.col(EXACT_FP))).alias(
            "fresh_contents"
        ),
        F.countDistinct(F.when(new_text & F.col(LIVE_BEFORE), F.col(EXACT_FP))).alias(
            "live_before"
        ),
        F.countDistinct(CLUSTER_ID).alias("member_clusters"),
        F.countDistinct(F.when(~F.col(IS_OLD), F.col(CLUSTER_ID))).alias("clusters"),
        F.countDistinct(F.when(changed_row, F.struct(OLD_CLUSTER, CLUSTER_ID))).alias(
            "changed_clusters"
        ),
        F.countDistinct(F.when(changed_row, F.col(OLD_CLUSTER))).alias("merged_clusters"),
        F.sum(changed_row.cast("long")).alias("moved_docs"),
    ).first()
    assert row is not None  # an aggregate without grouping always has one row
    return {k: int(v or 0) for k, v in row.asDict().items()}


def _added_pairs(edges: DataFrame, assigned: DataFrame, n_new: int) -> DataFrame:
    """The edges the batch adds: near edges touching a content no document held before the
    batch, exact edges touching a new document."""
    new_text = ~F.col(IS_OLD) & F.col(HAS_TEXT)
    fresh = assigned.where(new_text & F.col(LIVE_BEFORE).isNull()).select(EXACT_FP).distinct()
    added_near = edges.where(F.col(FP_A).isNotNull())
    added_near = added_near.join(
        incident_edges(added_near.select(FP_A, FP_B), fresh, n_new), [FP_A, FP_B], "left_semi"
    )
    added_exact = edges.where(F.col(FP_A).isNull() & (~F.col(IS_OLD) | ~F.col(_ANCHOR_OLD)))
    return exact_pairs(added_exact).unionByName(minhash_pairs(added_near))


def anchored_with_spark(
    history: DataFrame,
    new_edges: DataFrame,
    stored: DataFrame | None,
    sizes: tuple[int, int],
    configured_max_edges: int | None,
    keep: Callable[[DataFrame], DataFrame],
) -> Clustered:
    """The distributed twin of
    :func:`~neardup_spark.nightly.anchored_night.anchored_cluster_members`: the members' graph
    (exact copies, near edges, and each indexed document's tie to the kept document it stood
    for) labelled as :func:`cluster_with_spark` labels it, each component's members and edges
    sent to one task, the same function run there."""
    n_members, _ = sizes
    members = keep(history)
    graph = _member_graph(members, new_edges, stored, n_members, keep)
    ties = members.select(
        F.coalesce(F.col(OLD_CLUSTER), F.col(PREV_CLUSTER)).alias(DOC_A), F.col(DOC_ID).alias(DOC_B)
    ).where(F.col(DOC_A).isNotNull() & (F.col(DOC_A) != F.col(DOC_B)))
    edges = keep(graph.select(DOC_A, DOC_B).unionByName(ties))
    n_graph = edges.count()
    limit = single_task_edge_limit(edges.sparkSession, configured_max_edges, n_graph, edges)
    labels, rounds = connected_components(edges, local_checkpoint, single_task=n_graph <= limit)
    labelled = members.join(labels, DOC_ID, "left").withColumn(
        COMPONENT, F.coalesce(F.col(COMPONENT), F.col(DOC_ID))
    )
    contents = labelled.where(F.col(HAS_TEXT)).select(EXACT_FP, COMPONENT).distinct()
    near = graph.where(F.col(FP_A).isNotNull()).select(FP_A, FP_B, JACCARD, ESTIMATE)
    near = near.join(contents.withColumnRenamed(EXACT_FP, FP_A), FP_A)
    rows = _tagged(labelled, 0).unionByName(_tagged(near, 1), allowMissingColumns=True)
    parts = max(1, shuffle_partitions(edges.sparkSession))
    schema = _anchored_schema(members)
    run = components_fn(list(history.columns), to_arrow_schema(schema))
    out = keep(rows.repartition(parts, COMPONENT).drop(COMPONENT).mapInArrow(run, schema))
    stats = summed_stats([r[STATS] for r in out.where(F.col(KIND) == 3).select(STATS).collect()])
    pick = lambda kind, *names: out.where(F.col(KIND) == kind).select(*names)  # noqa: E731
    strategy = "single_task" if n_graph <= limit else "distributed"
    return Clustered(
        pick(
            0, DOC_ID, HAS_TEXT, EXACT_FP, CLUSTER_ID, BATCH, IS_OLD, OLD_CLUSTER, KEPT, SIMILARITY
        ),
        pick(2, OLD_CLUSTER_ID, NEW_CLUSTER_ID),
        pick(1, DOC_A, DOC_B, METHOD, SIMILARITY, JACCARD, ESTIMATE, HAMMING),
        stats,
        {"strategy": strategy, "rounds": rounds},
    )


def _tagged(frame: DataFrame, kind: int) -> DataFrame:
    return frame.withColumn(KIND, F.lit(kind).cast("byte"))


def _anchored_schema(members: DataFrame) -> T.StructType:
    """The rows of :func:`~neardup_spark.nightly.anchored_night.components_fn`."""
    id_type = members.schema[DOC_ID].dataType
    typed = [
        (KIND, T.ByteType()),
        (DOC_ID, id_type),
        (HAS_TEXT, T.BooleanType()),
        (EXACT_FP, T.LongType()),
        (CLUSTER_ID, id_type),
        (BATCH, T.IntegerType()),
        (IS_OLD, T.BooleanType()),
        (OLD_CLUSTER, id_type),
        (KEPT, T.BooleanType()),
        (SIMILARITY, T.DoubleType()),
        (DOC_A, id_type),
        (DOC_B, id_type),
        (METHOD, T.StringType()),
        (JACCARD, T.DoubleType()),
        (ESTIMATE, T.DoubleType()),
        (HAMMING, T.IntegerType()),
        (OLD_CLUSTER_ID, id_type),
        (NEW_CLUSTER_ID, id_type),
        (STATS, T.StringType()),
    ]
    return T.StructType([T.StructField(name, t) for name, t in typed])


def cluster_with_spark(
    history: DataFrame,
    new_edges: DataFrame,
    stored: DataFrame | None,
    sizes: tuple[int, int],
    configured_max_edges: int | None,
    keep: Callable[[DataFrame], DataFrame],
) -> Clustered:
    """The distributed twin of :func:`~neardup_spark.nightly.stable_ids.cluster_members`, for
    graphs too large for the driver. ``sizes``: (members, new documents), for broadcasts;
    ``configured_max_edges``: the execution settings' ``components_single_task_max_edges``
    (the graph's labels in one task up to it, or what one task's memory holds);
    ``keep`` persists a DataFrame read more than once."""
    n_members, n_new = sizes
    members = keep(history)
    edges = keep(_member_graph(members, new_edges, stored, n_members, keep))
    n_graph = edges.count()
    limit = single_task_edge_limit(edges.sparkSession, configured_max_edges, n_graph, edges)
    labels, rounds = connected_components(
        edges.select(DOC_A, DOC_B), local_checkpoint, single_task=n_graph <= limit
    )
    if rounds == 0:  # one task's labels, read by several branches below: computed once
        labels = keep(labels)
    assigned = keep(assign_ids(members, labels))
    changed_row = F.col(IS_OLD) & (F.col(OLD_CLUSTER) != F.col(CLUSTER_ID))
    changed = (
        assigned.where(changed_row)
        .select(F.col(OLD_CLUSTER).alias(OLD_CLUSTER_ID), F.col(CLUSTER_ID).alias(NEW_CLUSTER_ID))
        .distinct()
    )
    strategy = "single_task" if n_graph <= limit else "distributed"
    return Clustered(
        assigned.select(DOC_ID, HAS_TEXT, EXACT_FP, CLUSTER_ID, BATCH, IS_OLD, OLD_CLUSTER, KEPT),
        changed,
        _added_pairs(edges, assigned, n_new),
        _cluster_stats(assigned),
        {"strategy": strategy, "rounds": rounds},
    )
