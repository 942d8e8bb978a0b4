"""From component labels to the output tables: representatives, clusters, deduplicated rows."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.batch.row_copies import DUPLICATES
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
from neardup_spark.stages.names import column

_COUNTED = "_neardup_counted"  # the counted kept document's id, beside the input's
PAIRS_COLUMNS = (DOC_A, DOC_B, METHOD, SIMILARITY, JACCARD, ESTIMATE, HAMMING)


def representatives(rule: str, lengths: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Component labels -> each member's representative.

    ``smallest_id``: the component's smallest id (the label itself). ``longest_text``: the
    member with the most characters of raw text, ties to the smallest id.

    Input columns: ``doc_id``, ``component``; ``lengths`` gives ``doc_id``, ``n_chars``.
    Output columns: ``doc_id``, ``cluster_id``.
    """

    def transform(labels: DataFrame) -> DataFrame:
        if rule == "smallest_id":
            return labels.select(DOC_ID, F.col(COMPONENT).alias(CLUSTER_ID))
        if rule != "longest_text":
            raise ValueError(f"unknown representative rule {rule!r}")
        sized = labels.join(lengths.select(DOC_ID, N_CHARS), DOC_ID)
        # min over (-length, id) picks the longest text, then the smallest id.
        best = sized.groupBy(COMPONENT).agg(
            F.min(F.struct((-F.col(N_CHARS)).alias("neg_len"), F.col(DOC_ID).alias("id")))[
                "id"
            ].alias(CLUSTER_ID)
        )
        return labels.join(best, COMPONENT).select(DOC_ID, CLUSTER_ID)

    return transform


def preferred_representatives(
    keys: Sequence[tuple[str, bool]], ranking: DataFrame, broadcast_labels: bool
) -> Callable[[DataFrame], DataFrame]:
    """Component labels -> each member's representative by a keep policy: the member first in
    the order of ``keys`` (``(column of ranking, descending)``), nulls last whatever the
    direction, ties to the smallest id; deterministic whatever the partitioning.

    Input columns: ``doc_id``, ``component``; ``ranking`` gives ``doc_id`` and the key columns
    (every document; ``broadcast_labels``: the labels are small enough to be broadcast to it).
    Output columns: ``doc_id``, ``cluster_id``.
    """
    values = [(nan_as_null(ranking, c), desc) for c, desc in keys]
    order = [v.desc_nulls_last() if desc else v.asc_nulls_last() for v, desc in values]
    first = Window.partitionBy(COMPONENT).orderBy(*order, F.col(DOC_ID).asc())

    def transform(labels: DataFrame) -> DataFrame:
        small = F.broadcast(labels) if broadcast_labels else labels
        ranked = ranking.join(small, DOC_ID).withColumn("_place", F.row_number().over(first))
        best = ranked.where(F.col("_place") == 1).select(COMPONENT, F.col(DOC_ID).alias(CLUSTER_ID))
        return labels.join(best, COMPONENT).select(DOC_ID, CLUSTER_ID)

    return transform


def nan_as_null(frame: DataFrame, name: str) -> Column:
    """Column ``name`` of ``frame`` with NaN as null, to order by: Spark orders NaN above every
    number, so a score missing as NaN (CSV's "NaN", a failed division) would rank first under
    ``desc``; as null it ranks last in either direction, as a missing score should."""
    value = column(name)
    if isinstance(frame.schema[name].dataType, (T.FloatType, T.DoubleType)):
        return F.when(F.isnan(value), F.lit(None)).otherwise(value)
    return value


def cluster_table(members: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """All documents -> the ``clusters/`` table, singletons included.

    Input columns: ``doc_id`` (every input document); ``members``: ``doc_id``, ``cluster_id``
    (and, under the anchored rule, ``similarity``) for documents in a non-trivial cluster.
    Output columns: ``doc_id``, ``cluster_id``, ``is_representative`` (and ``similarity``: the
    member's measure against its kept document, 1.0 for the kept one and a singleton).
    """

    def transform(docs: DataFrame) -> DataFrame:
        joined = docs.select(DOC_ID).join(members, DOC_ID, "left")
        cluster = F.coalesce(F.col(CLUSTER_ID), F.col(DOC_ID))
        measure = (
            [F.coalesce(F.col(SIMILARITY), F.lit(1.0)).alias(SIMILARITY)]
            if SIMILARITY in members.columns
            else []
        )
        return joined.select(
            F.col(DOC_ID),
            cluster.alias(CLUSTER_ID),
            (F.col(DOC_ID) == cluster).alias(IS_REPRESENTATIVE),
            *measure,
        )

    return transform


def duplicate_counts(members: DataFrame) -> DataFrame:
    """Members -> each kept document's count of removed documents (``deduplicated/``'s
    duplicates column; kept documents standing for none are absent).

    Input columns: ``doc_id``, ``cluster_id`` (the members of non-trivial clusters, or every
    document). Output columns: ``doc_id`` (the kept document), ``_neardup_duplicates`` (long).
    """
    removed = members.where(F.col(DOC_ID) != F.col(CLUSTER_ID))
    return removed.groupBy(F.col(CLUSTER_ID).alias(DOC_ID)).agg(F.count(F.lit(1)).alias(DUPLICATES))


def with_duplicates(
    counts: DataFrame, id_col: str, name: str, broadcast: bool
) -> Callable[[DataFrame], DataFrame]:
    """Input rows -> the same with a last column ``name``: the count :func:`duplicate_counts`
    gives the row's ``id_col`` (0 where it gives none; ``counts`` broadcast to the rows when
    ``broadcast``). The rows as they are when ``name`` is "" (no duplicates column).

    Input columns: any, with ``id_col``. Output columns: the same, then ``name`` (long, never
    null).
    """

    def transform(rows: DataFrame) -> DataFrame:
        if not name:
            return rows
        keyed = counts.select(F.col(DOC_ID).alias(_COUNTED), DUPLICATES)
        small = F.broadcast(keyed) if broadcast else keyed
        joined = rows.join(small, column(id_col) == F.col(_COUNTED), "left")
        value = F.coalesce(F.col(DUPLICATES), F.lit(0).cast("long"))
        return joined.select(*(column(c) for c in rows.columns), value.alias(name))

    return transform


def kept_with_duplicates(
    members: DataFrame, id_col: str, name: str, broadcast: bool
) -> Callable[[DataFrame], DataFrame]:
    """Input rows -> those of the documents ``members`` keeps, with a last column ``name``: how
    many removed documents each stands for (0 where none). One join of the rows with the
    removed documents and the counts together (``broadcast``: they are small enough), where an
    anti-join and then :func:`with_duplicates` would shuffle rows too large to broadcast to
    twice.

    Input columns: any, with ``id_col``; ``members``: ``doc_id``, ``cluster_id``. Output
    columns: the same, then ``name`` (long, never null).
    """

    def transform(rows: DataFrame) -> DataFrame:
        removed = members.where(F.col(DOC_ID) != F.col(CLUSTER_ID)).select(
            F.col(DOC_ID).alias(_COUNTED), F.lit(None).cast("long").alias(DUPLICATES)
        )
        counts = duplicate_counts(members).select(F.col(DOC_ID).alias(_COUNTED), DUPLICATES)
        marks = removed.unionByName(counts)  # an id is removed (null count) or kept, not both
        small = F.broadcast(marks) if broadcast else marks
        joined = rows.join(small, column(id_col) == F.col(_COUNTED), "left")
        kept = joined.where(F.col(_COUNTED).isNull() | F.col(DUPLICATES).isNotNull())
        value = F.coalesce(F.col(DUPLICATES), F.lit(0).cast("long"))
        return kept.select(*(column(c) for c in rows.columns), value.alias(name))

    return transform


def _pairs(
    edges: DataFrame,
    method: str,
    similarity: Column,
    jaccard: Column | None = None,
    estimate: Column | None = None,
    hamming: Column | None = None,
) -> DataFrame:
    def typed(col: Column | None, dtype: T.DataType) -> Column:
        return (F.lit(None) if col is None else col).cast(dtype)

    return edges.select(
        DOC_A,
        DOC_B,
        F.lit(method).alias(METHOD),
        similarity.cast(T.DoubleType()).alias(SIMILARITY),
        typed(jaccard, T.DoubleType()).alias(JACCARD),
        typed(estimate, T.DoubleType()).alias(ESTIMATE),
        typed(hamming, T.IntegerType()).alias(HAMMING),
    )


def minhash_pairs(verified: DataFrame, measure: str = JACCARD) -> DataFrame:
    """Verified MinHash pairs -> ``pairs/`` rows (``similarity`` = the exact ``measure``:
    Jaccard, or the containment of the smaller set in the larger).

    Input columns: ``doc_a``, ``doc_b``, ``jaccard``, ``estimate``, ``containment``. Output:
    :data:`PAIRS_COLUMNS`.
    """
    return _pairs(verified, "minhash", F.col(measure), F.col(JACCARD), F.col(ESTIMATE))


def simhash_pairs(verified: DataFrame) -> DataFrame:
    """Verified SimHash pairs -> ``pairs/`` rows (``similarity`` = ``cos(pi * hamming / 64)``).

    Input columns: ``doc_a``, ``doc_b``, ``hamming``. Output: :data:`PAIRS_COLUMNS`.
    """
    cosine = F.cos(F.lit(math.pi) * F.col(HAMMING) / F.lit(64.0))
    return _pairs(verified, "simhash", cosine, hamming=F.col(HAMMING))


def exact_pairs(edges: DataFrame) -> DataFrame:
    """Exact-copy edges -> ``pairs/`` rows (``similarity`` = ``jaccard`` = 1.0).

    Input columns: ``doc_a``, ``doc_b``. Output: :data:`PAIRS_COLUMNS`.
    """
    return _pairs(edges, "exact", F.lit(1.0), jaccard=F.lit(1.0))
