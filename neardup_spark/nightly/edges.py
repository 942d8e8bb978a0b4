"""Joins on the index's content-keyed tables: endpoints of edges, edges around a set of contents,
and which buckets a lookup must read."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark.columns import EXACT_FP
from neardup_spark.nightly.store import FP_A, FP_B
from neardup_spark.pipeline.execution import maybe_broadcast

# Above this many keys per bucket a lookup reads every bucket (and skips the job finding which
# it needs).
BUCKET_PRUNE_MAX_KEYS_PER_BUCKET = 2


def edge_ends(edges: DataFrame, a: str, b: str) -> DataFrame:
    """The distinct endpoints of ``edges`` as one ``exact_fp`` column."""
    return (
        edges.select(F.col(a).alias(EXACT_FP))
        .unionByName(edges.select(F.col(b).alias(EXACT_FP)))
        .distinct()
    )


def incident_edges(edges: DataFrame, fps: DataFrame, rows: int) -> DataFrame:
    """Edges (``fp_a``, ``fp_b``) with at least one end in ``fps`` (``exact_fp``, about
    ``rows`` rows)."""
    side = maybe_broadcast(fps, rows)
    return (
        edges.join(side.withColumnRenamed(EXACT_FP, FP_A), FP_A, "left_semi")
        .unionByName(edges.join(side.withColumnRenamed(EXACT_FP, FP_B), FP_B, "left_semi"))
        .dropDuplicates([FP_A, FP_B])
    )


def edges_within(edges: DataFrame, fps: DataFrame, rows: int) -> DataFrame:
    """Edges (``fp_a``, ``fp_b``) with both ends in ``fps`` (``exact_fp``)."""
    side = maybe_broadcast(fps, rows)
    return edges.join(side.withColumnRenamed(EXACT_FP, FP_A), FP_A, "left_semi").join(
        side.withColumnRenamed(EXACT_FP, FP_B), FP_B, "left_semi"
    )
