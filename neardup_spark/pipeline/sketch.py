"""The per-document pass (``sketch``): every document's features, counts and band keys, its
ids checked. Three implementations, the same rows (tested against each other); the plan
(:func:`~neardup_spark.pipeline.plan.decide_sketch`) picks one:

* ``driver``: local Parquet files read with PyArrow and run through the Spark path's
  per-document function (:func:`~neardup_spark.batch.documents.documents_columns_fn`) by one
  thread per core of this process (the compiled kernels release the GIL). In local mode a
  Spark task runs on this machine's cores as a thread would; what it pays on top is the JVM's
  Parquet decoding, the Arrow exchange with the Python workers and, in a fresh process, their
  first queries (100,000 pages: 5.9 s as tasks, ~2.1 s of it the function itself).
* ``tasks``: Spark tasks that read their runs of row groups themselves with PyArrow (only the
  id and text columns), for local Parquet files too large for this process: no text decoded
  by the JVM and handed to Python.
* ``spark``: Spark reads the input (any format, a table, a cluster's storage) and the Python
  tasks compute the features from Arrow batches; also the boilerplate step's cleaning pass.

Files are read as their footers (:mod:`.facts`, read once per run) describe them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type

from neardup_spark.batch.documents import documents_columns_fn
from neardup_spark.batch.input_reads import read_row_group
from neardup_spark.batch.row_group_reads import tasks_of
from neardup_spark.columns import DOC_ID, TEXT
from neardup_spark.config import DedupeConfig
from neardup_spark.io.corpus import as_documents, check_id_values, check_ids
from neardup_spark.pipeline.context import RunContext
from neardup_spark.pipeline.execution import run_alongside, spread
from neardup_spark.pipeline.facts import TEXT_TYPES, ParquetFileFacts
from neardup_spark.pipeline.plan import DRIVER, TASKS, decide_sketch
from neardup_spark.pipeline.reporting import input_count_columns, input_counts
from neardup_spark.runtime.faults import batch_faults, wait_for_a_busy_batch_if_asked
from neardup_spark.stages.documents import (
    document_features,
    documents_schema,
    features_of_row_groups,
)

# Rows per batch of the per-document function (the Spark path's Arrow batch size).
BATCH_ROWS = 2000
# The per-document table is cached on local disk, not on the JVM heap: a 2 GB heap then serves
# corpora of millions of documents, and the OS page cache keeps re-reads fast.
BULK_STORAGE = StorageLevel.DISK_ONLY
_In = TypeVar("_In")
_Out = TypeVar("_Out")


@dataclass(frozen=True)
class SketchedHere:
    """The per-document pass done in this process: its table (the Spark path's schema) and the
    ``doc_id``, ``text`` rows it read, for a verification on the driver (None when let go)."""

    features: pa.Table
    documents: pa.Table | None


def document_table(
    ctx: RunContext,
    df: DataFrame,
    parts: int,
    documents: DataFrame | None = None,
    features_of: Callable[[DataFrame], DataFrame] | None = None,
) -> tuple[DataFrame, SketchedHere | None]:
    """The one per-document pass, where the plan says (kept in ``ctx.results``; no shingle
    sets: verification recomputes those of the candidates only), its input counts into
    ``ctx.counts``, with the id check (alongside the Spark pass: a bad id cancels it and is the
    error raised). ``documents`` (``doc_id``, ``text``; default: ``df``'s id and text columns)
    and ``features_of`` replace what the Spark pass reads and does (the boilerplate step's
    cleaning pass). The second value: the table (and texts, kept when the pairs may be found
    here) computed in this process, else None."""
    done = ctx.results.finished("sketch")
    choice = ctx.plan.choices.get("sketch") or ctx.plan.record(
        decide_sketch(ctx.facts, ctx.settings)
    )
    if done is not None:  # its ids were checked by the run that finished it
        ctx.counts.update(done["counts"])
        ctx.timer.documents = ctx.counts["input_rows"]
        return ctx.results.load("sketch"), None
    if choice.where == DRIVER:
        return sketched_here(ctx, df, parts)
    wait_for_id_check = run_alongside(ctx.spark, lambda: checked_ids(df, ctx.config.id_col))
    config = ctx.config
    if choice.where == TASKS:
        read = features_in_tasks(df, ctx.facts.input.parquet, config, parts)
    else:
        documents = (
            as_documents(df, config.id_col, config.text_col) if documents is None else documents
        )
        features_of = features_of or document_features(config, False, before_batch=batch_faults)
        read = spread(documents, parts).transform(features_of)
    metrics = input_count_columns(config.ngram, config.char_ngram)
    try:
        with ctx.timer.stage("sketch") as counted:
            features, counts = ctx.results.keep("sketch", read, metrics, BULK_STORAGE)
            counted["rows"] = counts["input_rows"]
    except Exception:  # (an interrupt is not waited on: it stops the process)
        wait_for_id_check()  # a bad id, which cancelled the pass, is the error to report
        raise
    with ctx.timer.stage("check_ids"):
        wait_for_id_check()
    finish_sketch(ctx, counts)
    return features, None


def finish_sketch(ctx: RunContext, counts: dict[str, int]) -> None:
    ctx.counts.update(counts)
    ctx.timer.documents = counts["input_rows"]
    ctx.results.finish("sketch", {"counts": counts})


def sketched_here(ctx: RunContext, df: DataFrame, parts: int) -> tuple[DataFrame, SketchedHere]:
    """The ``driver`` pass: read and sketched in this process's threads, kept as the stage's
    result; the texts kept while the pairs may be found here (``driver_max_docs``)."""
    config = ctx.config
    with ctx.timer.stage("sketch") as counted:
        here = features_table(df, ctx.facts.input.parquet, config, ctx.facts.engine.local_threads)
        features = ctx.results.keep_table("sketch", ctx.spark, here.features, parts)
        counts = input_counts(here.features, config.ngram, config.char_ngram)
        counted["rows"] = counts["input_rows"]
    ctx.timer.on_driver.append("sketch")
    finish_sketch(ctx, counts)
    if counts["input_rows"] > ctx.settings.driver_max_docs:  # its pairs will not be found here
        here = SketchedHere(here.features, None)
    return features, here


def checked_ids(df: DataFrame, id_col: str) -> None:
    """:func:`check_ids`, after the test hook that holds it until a slow batch is busy."""
    wait_for_a_busy_batch_if_asked()
    check_ids(df, id_col)


def read_and_sketch(
    files: tuple[ParquetFileFacts, ...],
    config: DedupeConfig,
    id_type: pa.DataType,
    threads: int,
) -> tuple[pa.Table, pa.Table]:
    """The rows of local Parquet ``files`` as Spark reads them (``doc_id`` as ``id_type``, the
    type Spark gives the pass, and ``text``), and their per-document table (no shingle sets),
    in row order: each row group read and sketched by one of ``threads`` threads, so that
    reading overlaps the work (100,000 pages: the reads alone took 0.9 s one file after
    another). The ids are checked at the end (:class:`~neardup_spark.errors.UserError`)."""
    columns = [config.id_col, config.text_col]
    sketch = documents_columns_fn(config, with_sets=False)
    units = [(f.path, group) for f in files for group in range(len(f.row_group_rows))]

    def per_unit(unit: tuple[str, int]) -> tuple[pa.Table, list[pa.RecordBatch]]:
        path, group = unit
        with pq.ParquetFile(path) as parquet:
            rows = read_row_group(parquet, path, group, columns, use_threads=False)
        text = rows.column(1)
        documents = pa.table(
            {DOC_ID: rows.column(0).cast(id_type), TEXT: text.cast(TEXT_TYPES[text.type])}
        )
        batches = []
        for batch in documents.to_batches(max_chunksize=BATCH_ROWS):
            batch_faults()  # the test hooks a Spark task's batch runs (runtime/faults.py)
            batches.append(sketch(batch))
        return documents, batches

    done = map_in_threads(per_unit, units, threads)
    documents = pa.concat_tables([documents for documents, _ in done])
    check_id_values(documents.column(DOC_ID), config.id_col)
    return documents, pa.Table.from_batches([b for _, batches in done for b in batches])


def features_table(
    df: DataFrame, files: tuple[ParquetFileFacts, ...], config: DedupeConfig, threads: int
) -> SketchedHere:
    """The per-document table of ``df``'s rows (read from its local Parquet ``files``) computed
    here, in the Spark path's schema, with the rows read."""
    id_type = df.schema[config.id_col].dataType
    documents, features = read_and_sketch(files, config, to_arrow_type(id_type), threads)
    schema = documents_schema(config, id_type, with_sets=False)
    return SketchedHere(features.cast(to_arrow_schema(schema)), documents)


def features_in_tasks(
    df: DataFrame, files: tuple[ParquetFileFacts, ...], config: DedupeConfig, tasks: int
) -> DataFrame:
    """The per-document table of ``df``'s rows as ``tasks`` Spark tasks that read its local
    Parquet ``files`` themselves, each a run of consecutive row groups of about equal bytes."""
    row_groups = [
        ((f.path, group), size) for f in files for group, size in enumerate(f.row_group_bytes)
    ]
    spark = df.sparkSession
    runs = tasks_of(row_groups, tasks)
    columns = (config.id_col, config.text_col)
    types = (df.schema[config.id_col].dataType, df.schema[config.text_col].dataType)
    batch_rows = int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") or 10_000)
    read = features_of_row_groups(config, runs, columns, types, batch_rows, batch_faults)
    return spark.range(0, len(runs), 1, len(runs)).transform(read)


def map_in_threads(fn: Callable[[_In], _Out], items: Iterable[_In], threads: int) -> list[_Out]:
    """``[fn(item) for item in items]``, ``threads`` at a time (work on compiled kernels, which
    release the GIL), in order."""
    pool = ThreadPoolExecutor(max(1, threads))
    try:
        return list(pool.map(fn, items))
    finally:  # a signal stops the work within the items being done, not all of them
        pool.shutdown(wait=True, cancel_futures=True)
