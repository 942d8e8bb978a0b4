"""A small night's batch read and sketched in this process, in local mode
(:mod:`neardup_spark.pipeline.in_process`): a night on the driver (up to
``nightly_driver_max_docs`` documents) whose batch is local Parquet files then runs no Python
task, and a fresh process, as cron starts one, starts no Python worker. Its texts stay here for
verification; the input is counted as the Spark path counts it."""

from __future__ import annotations

import pyarrow as pa

from neardup_spark.nightly.steps import BatchContext
from neardup_spark.pipeline.in_process import (
    ReadLimits,
    in_process_threads,
    input_fits,
    local_parquet_paths,
    read_and_sketch,
)
from neardup_spark.pipeline.reporting import input_counts


def features_in_process(ctx: BatchContext) -> pa.Table | None:
    """The batch's per-document table, read and computed here, its ids checked and its input
    counted into ``ctx.counts``; keeps its rows in ``ctx.documents``. None when the night takes
    Spark tasks for it."""
    config = ctx.config
    if not (config.nightly_driver_max_docs and config.driver_read_max_bytes) or ctx.skipped:
        return None
    names = [entry["path"] for entry in ctx.inputs]
    paths = local_parquet_paths(ctx.spark, names, ctx.input_format)
    if paths is None:
        return None
    limits = ReadLimits(config.nightly_driver_max_docs, config.driver_read_max_bytes)
    if not input_fits(paths, config, limits):
        return None
    with ctx.timer.stage("sketch") as counted:
        id_type = pa.int64() if ctx.id_type == "bigint" else pa.string()
        threads = in_process_threads(ctx.spark)
        documents, features = read_and_sketch(paths, config, id_type, threads)
        counts = input_counts(features, config.ngram, config.char_ngram)
        counted["rows"] = counts["input_rows"]
    ctx.timer.documents = counts["input_rows"]
    ctx.timer.on_driver.append("sketch")
    ctx.counts.update(counts)
    ctx.documents = documents
    return features
