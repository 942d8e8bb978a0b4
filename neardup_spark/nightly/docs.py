"""The index's documents: the current row of each document, found without reading the table
into one place or rewriting it.

Every segment's ``docs`` holds the rows its batch wrote (new documents, re-crawled ones, and
indexed ones whose cluster id changed); a document's current row is the one with the largest
``written``. A night needs the current rows of a few documents only (its ids, the holders of
some contents, the members of some clusters), so a lookup is two filtered scans of the narrow
``docs`` rows: the rows matching the night's keys, then every version of the documents they
name, whose latest is kept and checked again (an older version may have matched)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from neardup_spark.columns import DOC_ID
from neardup_spark.nightly.index_filters import Filter, IsIn
from neardup_spark.nightly.index_scan import IndexTable
from neardup_spark.nightly.store import WRITTEN
from neardup_spark.pipeline.execution import maybe_broadcast

_LATEST = "latest"


def current_rows(rows: DataFrame, matching: Callable[[DataFrame], DataFrame]) -> DataFrame:
    """The current rows (latest ``written`` per ``doc_id``) of ``rows`` that ``matching``
    keeps; ``matching`` filters a DataFrame of docs rows (semi-joins on small keys). The ids
    of the matching rows are materialised (one scan; counted, to broadcast them when few)."""
    ids = matching(rows).select(DOC_ID).distinct().localCheckpoint(eager=True)
    versions = rows.join(maybe_broadcast(ids, ids.count()), DOC_ID, "left_semi")
    newest = Window.partitionBy(DOC_ID).orderBy(F.col(WRITTEN).desc())
    latest = (
        versions.withColumn(_LATEST, F.row_number().over(newest))
        .where(F.col(_LATEST) == 1)
        .drop(_LATEST)
    )
    return matching(latest)


def latest_rows(rows: DataFrame) -> DataFrame:
    """Every document's current row (compaction; a shuffle of the whole table)."""
    newest = Window.partitionBy(DOC_ID).orderBy(F.col(WRITTEN).desc())
    return (
        rows.withColumn(_LATEST, F.row_number().over(newest))
        .where(F.col(_LATEST) == 1)
        .drop(_LATEST)
    )


def current_rows_collected(rows: IndexTable, where: Filter, one_version: bool) -> pa.Table:
    """:func:`current_rows` for a night on the driver, collected: the rows ``where`` keeps
    (:class:`.IndexTable` reads them on the driver or in Spark, as the plan says); unless every
    document has one row (``one_version``: the index has one ``docs`` segment), every version
    of the documents they name comes back too (a second read), whose latest rows are kept
    where ``where`` holds."""
    matched = _distinct(rows.rows(where))
    if one_version or not matched.num_rows:
        return matched
    latest = _latest(rows.rows(IsIn(DOC_ID, pc.unique(matched.column(DOC_ID)))))
    return latest.filter(where.arrow())


def _distinct(table: pa.Table) -> pa.Table:
    return table.group_by(table.column_names, use_threads=False).aggregate([])


def _latest(versions: pa.Table) -> pa.Table:
    """The row with the largest ``written`` of each document."""
    ordered = versions.sort_by([(DOC_ID, "ascending"), (WRITTEN, "descending")])
    ids = ordered.column(DOC_ID).combine_chunks()
    if len(ids) < 2:
        return ordered
    changes = pc.not_equal(ids.slice(1), ids.slice(0, len(ids) - 1))
    first = np.r_[True, changes.to_numpy(zero_copy_only=False)]
    return ordered.filter(pa.array(first))
