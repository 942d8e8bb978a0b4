"""From component labels to the output tables: representatives, clusters, deduplicated rows."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.columns import (
    CLUSTER_ID,
    COMPONENT,
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    HAMMING,
    IS_REPRESENTATIVE,
    JACCARD,
    METHOD,
    N_CHARS,
    SIMILARITY,
)


def representatives(rule: str, sketches: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Component labels -> each member's representative.

    ``smallest_id``: the component's smallest id (the label itself). ``longest_text``: the
    member with the most characters of raw text, ties to the smallest id.

    Input columns: ``doc_id``, ``component``; ``sketches`` gives ``doc_id``, ``n_chars``.
    Output columns: ``doc_id``, ``cluster_id``.
    """

    def transform(labels: DataFrame) -> DataFrame:
        if rule == "smallest_id":
            return labels.select(DOC_ID, F.col(COMPONENT).alias(CLUSTER_ID))
        if rule != "longest_text":
            raise ValueError(f"unknown representative rule {rule!r}")
        sized = labels.join(sketches.select(DOC_ID, N_CHARS), DOC_ID)
        # min over (-length, id) picks the longest text, then the smallest id.
        best = sized.groupBy(COMPONENT).agg(
            F.min(F.struct((-F.col(N_CHARS)).alias("neg_len"), F.col(DOC_ID).alias("id")))[
                "id"
            ].alias(CLUSTER_ID)
        )
        return labels.join(best, COMPONENT).select(DOC_ID, CLUSTER_ID)

    return transform


def cluster_table(members: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """All documents -> the ``clusters/`` table, singletons included.

    Input columns: ``doc_id`` (every input document); ``members``: ``doc_id``, ``cluster_id`` for
    documents in a non-trivial cluster. Output columns: ``doc_id``, ``cluster_id``,
    ``is_representative``.
    """

    def transform(docs: DataFrame) -> DataFrame:
        joined = docs.select(DOC_ID).join(members, DOC_ID, "left")
        cluster = F.coalesce(F.col(CLUSTER_ID), F.col(DOC_ID))
        return joined.select(
            F.col(DOC_ID),
            cluster.alias(CLUSTER_ID),
            (F.col(DOC_ID) == cluster).alias(IS_REPRESENTATIVE),
        )

    return transform


def pairs_table(method: str) -> Callable[[DataFrame], DataFrame]:
    """Verified pairs -> the ``pairs/`` table.

    Input columns: ``doc_a``, ``doc_b``, ``jaccard``, ``estimate``. Output columns: ``doc_a``,
    ``doc_b``, ``method``, ``similarity`` (= ``jaccard`` for MinHash), ``jaccard``, ``estimate``,
    ``hamming`` (null for MinHash).
    """

    def transform(pairs: DataFrame) -> DataFrame:
        return pairs.select(
            DOC_A,
            DOC_B,
            F.lit(method).alias(METHOD),
            F.col(JACCARD).alias(SIMILARITY),
            F.col(JACCARD).cast(T.DoubleType()).alias(JACCARD),
            F.col(ESTIMATE).cast(T.DoubleType()).alias(ESTIMATE),
            F.lit(None).cast(T.IntegerType()).alias(HAMMING),
        )

    return transform


def deduplicated_rows(id_col: str, clusters: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Input rows -> the representatives' rows, all input columns, one per cluster."""

    def transform(rows: DataFrame) -> DataFrame:
        reps = clusters.where(F.col(IS_REPRESENTATIVE)).select(F.col(DOC_ID).alias(id_col))
        return rows.join(reps, id_col, "left_semi")

    return transform
