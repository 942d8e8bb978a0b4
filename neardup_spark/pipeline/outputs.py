"""The outputs of a dedupe: ``clusters/`` (every document), ``pairs/`` and ``deduplicated/``
(the input rows of the representatives and singletons, with the duplicates column: how many
removed documents each stands for, ``duplicates_column``), as DataFrames (:func:`output_tables`,
the Python API's result) and written into a run's staging directory (:func:`write_outputs`).

``deduplicated/`` is written where the plan says
(:func:`~neardup_spark.pipeline.plan.decide_deduplicated`): copied from the input files by this
process or by Spark tasks (:mod:`.deduplicated_copy`), or by Spark from a broadcast anti-join or
the bitmap scan of a Parquet input (:mod:`.addressed_input`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from neardup_spark.batch.row_copies import duplicate_counts as duplicate_counts_here
from neardup_spark.columns import CLUSTER_ID, DOC_ID, IS_REPRESENTATIVE
from neardup_spark.io.filesystem import join, write_parquet_file
from neardup_spark.io.output import OutputDir
from neardup_spark.pipeline.addressed_input import AddressedInput
from neardup_spark.pipeline.components import driver_clusters
from neardup_spark.pipeline.context import RunContext
from neardup_spark.pipeline.deduplicated_copy import (
    RemovedRows,
    copy_here,
    copy_in_tasks,
    rows_copy,
)
from neardup_spark.pipeline.driver_pairs import DriverTables
from neardup_spark.pipeline.execution import maybe_broadcast, run_together
from neardup_spark.pipeline.plan import decide_deduplicated
from neardup_spark.pipeline.tables import OutputTables
from neardup_spark.runtime.engine import from_arrow_batches
from neardup_spark.stages.clusters import cluster_table, duplicate_counts, kept_with_duplicates


@dataclass
class Found:
    """What the steps found that the writers need beyond the result's DataFrames: the tables
    computed in this process (``clusters/`` and ``pairs/`` rows when the members were found
    here), the pairs' write left to the outputs, and the removed documents with the input's
    addresses (a copy by tasks)."""

    clusters_table: pa.Table | None = None
    pairs_table: pa.Table | None = None
    write_pairs: Callable[[], object] | None = None
    removed_rows: RemovedRows | None = None


def output_tables(
    ctx: RunContext,
    df: DataFrame,
    features: DataFrame,
    members: DataFrame,
    addressed: AddressedInput | None = None,
    driver: DriverTables | None = None,
) -> tuple[DataFrame, DataFrame, pa.Table | None]:
    """The ``clusters/`` table (every document) and ``deduplicated/`` (input rows of the
    representatives and singletons, with the duplicates column: one join with the removed
    documents and the counts, or the bitmap scan where the plan says); and
    ``clusters/`` as a table of this process when the members were found here (``driver``),
    which the DataFrame then reads."""
    counts, limit = ctx.counts, ctx.settings.broadcast_max_rows
    n_members = 2 * counts["verified_pairs"]  # an upper bound on the documents in clusters
    clusters = features.transform(cluster_table(maybe_broadcast(members, n_members, limit)))
    clusters_here = None
    if driver is not None and driver.members is not None:
        schema = to_arrow_schema(clusters.schema)
        clusters_here = driver_clusters(driver.ids, driver.members, schema)
        clusters = from_arrow_batches(features.sparkSession, clusters_here)
    words_fit = addressed is not None and addressed.words_fit(counts["input_rows"], limit)
    here, located = clusters_here is not None, addressed is not None and bool(addressed.schemas)
    choice = ctx.plan.record(
        decide_deduplicated(ctx.facts, ctx.settings, counts["removed"], here, located, words_fit)
    )
    removed = members.where(F.col(DOC_ID) != F.col(CLUSTER_ID)).select(DOC_ID)
    name = ctx.config.duplicates_column
    if choice.where == "spark_bitmap":
        assert addressed is not None  # the plan's condition
        standing = duplicate_counts(members)  # at most one row per removed document
        return clusters, addressed.rows_without(removed, standing, name), clusters_here
    if name:  # the removed documents and the counts in one join (each at most `removed` rows)
        small = counts["removed"] <= limit
        kept = df.transform(kept_with_duplicates(members, ctx.config.id_col, name, small))
        return clusters, kept, clusters_here
    removed_ids = removed.select(F.col(DOC_ID).alias(ctx.config.id_col))
    anti = maybe_broadcast(removed_ids, counts["removed"], limit)
    return clusters, df.join(anti, ctx.config.id_col, "left_anti"), clusters_here


def write_outputs(
    ctx: RunContext,
    clusters: DataFrame,
    deduplicated: DataFrame,
    found: Found,
    staged: OutputDir,
    tables: OutputTables | None,
) -> None:
    """``clusters/`` and ``deduplicated/`` staged as Parquet (and ``pairs/`` when the pairs'
    write was left to the outputs), or the three tables written (pairs from the staged
    Parquet). ``deduplicated/`` where the plan says."""
    if tables is not None:
        if found.write_pairs:
            found.write_pairs()
        tables.write("pairs", ctx.spark.read.parquet(staged.child("pairs")))
        tables.write("clusters", clusters)
        tables.write("deduplicated", deduplicated)
        return
    where = ctx.plan.where("deduplicated")

    def write_deduplicated() -> None:
        name = "deduplicated"
        column = ctx.config.duplicates_column
        if where == "driver_copy":
            assert found.clusters_table is not None  # the plan's condition
            copy = rows_copy(ctx.facts, deduplicated.schema, column)
            table = found.clusters_table
            standing = duplicate_counts_here(table.column(CLUSTER_ID).filter(removed_mask(table)))
            copy_here(copy, ctx.config.id_col, removed_ids(table), staged, name, standing)
        elif where == "task_copy":
            assert found.removed_rows is not None  # the plan's condition
            copy = rows_copy(ctx.facts, deduplicated.schema, column)
            copy_in_tasks(found.removed_rows, copy, staged, name)
        else:
            deduplicated.write.mode("overwrite").parquet(staged.child(name))

    def write_clusters() -> None:
        if found.clusters_table is not None:
            write_table_here(staged, "clusters", found.clusters_table)
        else:
            clusters.write.mode("overwrite").parquet(staged.child("clusters"))

    def write_pairs() -> None:
        if found.pairs_table is not None:
            write_table_here(staged, "pairs", found.pairs_table)
        elif found.write_pairs:
            found.write_pairs()

    # The last action runs in this thread: the Spark jobs start first, in the background.
    pending = [write_pairs] if found.write_pairs else []
    run_together(ctx.spark, [*pending, write_deduplicated, write_clusters])


def removed_mask(clusters: pa.Table) -> pa.ChunkedArray:
    """Which rows of a ``clusters/`` table it does not keep (not representatives)."""
    return pc.invert(clusters.column(IS_REPRESENTATIVE))


def removed_ids(clusters: pa.Table) -> pa.Array:
    """The ids of the documents a ``clusters/`` table does not keep (not representatives)."""
    return clusters.column(DOC_ID).filter(removed_mask(clusters)).combine_chunks()


def write_table_here(staged: OutputDir, name: str, table: pa.Table) -> None:
    """A staged output computed in this process, written by it as one Parquet file (replacing
    what a killed attempt left)."""
    staged.delete(name)
    write_parquet_file(join(staged.child(name), "part-00000.parquet"), table, staged.storage)
