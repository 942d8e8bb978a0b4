"""A small night's batch read and sketched in this process (the plan's ``sketch: driver`` for a
night, :func:`~neardup_spark.pipeline.plan.decide_night_sketch`): a night on the driver (up to
``nightly_driver_max_docs`` documents) whose batch is local Parquet files then runs no Python
task, and a fresh process, as cron starts one, starts no Python worker. Its texts stay here for
verification; the input is counted as the Spark path counts it. Its ``deduplicated/`` is copied
from its files by this process when the plan says ``driver_copy``."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from neardup_spark.batch.row_copies import duplicate_counts
from neardup_spark.columns import CLUSTER_ID, DOC_ID
from neardup_spark.io.filesystem import join, pyarrow_filesystem
from neardup_spark.nightly.stable_ids import KEPT
from neardup_spark.nightly.steps import BatchContext
from neardup_spark.pipeline.deduplicated_copy import RowsCopy, rows_copy
from neardup_spark.pipeline.plan import decide_deduplicated
from neardup_spark.pipeline.reporting import input_counts
from neardup_spark.pipeline.sketch import read_and_sketch


def features_in_process(ctx: BatchContext) -> pa.Table:
    """The batch's per-document table, read and computed here, its ids checked and its input
    counted into ``ctx.counts``; keeps its rows in ``ctx.documents``."""
    config, facts = ctx.config, ctx.plan.facts
    with ctx.timer.stage("sketch") as counted:
        id_type = pa.int64() if ctx.id_type == "bigint" else pa.string()
        threads = facts.engine.local_threads
        documents, features = read_and_sketch(facts.input.parquet, config, id_type, threads)
        counts = input_counts(features, config.ngram, config.char_ngram)
        counted["rows"] = counts["input_rows"]
    ctx.timer.documents = counts["input_rows"]
    ctx.timer.on_driver.append("sketch")
    ctx.counts.update(counts)
    ctx.documents = documents
    return features


@dataclass(frozen=True)
class DeduplicatedHere:
    """How this process writes a night's ``deduplicated/``: its input files copied by PyArrow
    (:mod:`~neardup_spark.pipeline.deduplicated_copy`) without the ``removed`` ids, each kept
    row with the ``counts`` of the night's documents removed in its favour."""

    copy: RowsCopy
    removed: pa.Array
    counts: pa.Table | None = None


def deduplicated_here(ctx: BatchContext, df: DataFrame, results: str) -> DeduplicatedHere | None:
    """For a night whose batch was read here (:func:`features_in_process`), ``results`` its
    committed results' directory: its ``deduplicated/`` copied from its files by this process,
    as a small full run's is, where the plan says (``driver_copy``: a local OUTPUT, the types
    Spark would write back); None when Spark writes it. Its ids not kept are the batch's ids
    less those of its results' ``kept`` rows. No Spark job: a fresh night's only one had been
    this publishing (1.2 s of a 4 s night at 300,000 indexed)."""
    here = ctx.documents is not None
    choice = ctx.plan.record(
        decide_deduplicated(ctx.plan.facts, ctx.plan.settings, 0, here, False, False)
    )
    if choice.where != "driver_copy" or ctx.documents is None:
        return None
    fs, kept_dir = pyarrow_filesystem(join(results, KEPT))
    kept = pq.read_table(kept_dir, filesystem=fs, columns=[DOC_ID]).column(DOC_ID)
    ids = ctx.documents.column(DOC_ID)
    removed = ids.filter(pc.invert(pc.is_in(ids, value_set=kept.cast(ids.type).combine_chunks())))
    name = ctx.config.duplicates_column
    extra = [T.StructField(name, T.LongType(), False)] if name else []
    schema = T.StructType([*df.schema.fields, *extra])
    fs, clusters_dir = pyarrow_filesystem(join(results, "clusters"))
    clusters = pq.read_table(clusters_dir, filesystem=fs, columns=[DOC_ID, CLUSTER_ID])
    moved = pc.not_equal(clusters.column(DOC_ID), clusters.column(CLUSTER_ID))
    counts = duplicate_counts(clusters.column(CLUSTER_ID).filter(moved))
    copy = rows_copy(ctx.plan.facts, schema, name)
    return DeduplicatedHere(copy, removed.combine_chunks(), counts)
