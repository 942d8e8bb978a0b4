"""A small night's batch read and sketched in this process, in local mode.

In local mode a Spark task runs on this machine's cores, as a thread of this process would. For
a night on the driver (up to ``nightly_driver_max_docs`` documents) the Spark jobs of its
per-document pass cost more than their work in a fresh process, as cron starts one: the JVM's
and the Python workers' first queries (a 10,000-page night's pass took ~2.2 s in a fresh
process, 0.5 s in a warm session). So when the batch is Parquet files this process can read,
and their id and text columns are at most ``nightly_driver_read_max_bytes`` uncompressed, the
batch is read with PyArrow and run through the per-document function of the Spark path
(:func:`~neardup_spark.batch.documents.documents_columns_fn`) by a few threads (the compiled
kernels release the GIL); the ids are checked, and the input counted, as the Spark path does.
Its texts stay here for verification. The same features, counts and errors (tested against the
Spark path); anything else (another format, a cluster, Spark Connect, an input table, skipped
files, a column a file lacks) takes the Spark path.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from neardup_spark.batch.documents import documents_columns_fn
from neardup_spark.columns import DOC_ID, TEXT
from neardup_spark.config import DedupeConfig
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import CorpusSource, check_id_values, list_data_files
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.io.formats import guess_format
from neardup_spark.io.paths import local_path
from neardup_spark.io.storage import storage_for
from neardup_spark.nightly.steps import BatchContext
from neardup_spark.pipeline.reporting import input_counts
from neardup_spark.runtime.engine import CLASSIC, engine_of

# Rows per batch of the per-document function (the Spark path's Arrow batch size).
_BATCH_ROWS = 2000
_STRING_TYPES = {pa.string(): pa.string(), pa.large_string(): pa.string()}
_TEXT_TYPES = {**_STRING_TYPES, pa.binary(): pa.binary(), pa.large_binary(): pa.binary()}


def in_process_threads(spark: SparkSession) -> int:
    """Threads for a night's in-process work: the local master's cores; 0 when the session is
    not a classic local one (a cluster's tasks, or Spark Connect's server, do that work)."""
    engine = engine_of(spark)
    if engine.kind != CLASSIC or not engine.master().startswith("local"):
        return 0
    return max(1, engine.default_parallelism())


def may_read_in_process(spark: SparkSession, source: CorpusSource, config: DedupeConfig) -> bool:
    """Whether a night over ``source`` may read its batch here (local Parquet files in local
    mode): its Python workers are then not started ahead of its first Spark task."""
    if not (config.nightly_driver_max_docs and config.nightly_driver_read_max_bytes):
        return False
    if source.path is None or not in_process_threads(spark):
        return False
    if not isinstance(storage_for(spark, source.path), LocalStorage):
        return False
    if source.format is not None:
        return source.format == "parquet"
    try:
        files, _ = list_data_files(spark, source.path)
        return bool(files) and guess_format(files, source.path) == "parquet"
    except UserError:  # reported by the read, in its words
        return False


def _local_parquet_files(ctx: BatchContext) -> list[str] | None:
    """The batch's files as local paths, when the night may read them here."""
    config = ctx.config
    if not (config.nightly_driver_max_docs and config.nightly_driver_read_max_bytes):
        return None
    if ctx.skipped or ctx.input_format != "parquet" or not in_process_threads(ctx.spark):
        return None
    paths = []
    for entry in ctx.inputs:
        if not isinstance(storage_for(ctx.spark, entry["path"]), LocalStorage):
            return None
        paths.append(local_path(entry["path"]))
    return paths or None


def _fits(files: Iterable[pq.ParquetFile], columns: tuple[str, str], config: DedupeConfig) -> bool:
    """Every file holds both columns at its top level, of the types this reader handles, and
    the batch is within the night's limits (rows; the columns' uncompressed bytes)."""
    rows = size = 0
    types: set[tuple[pa.DataType, pa.DataType]] = set()
    for parquet in files:
        schema = parquet.schema_arrow
        if any(schema.get_field_index(name) < 0 for name in columns):
            return False
        id_type, text_type = (schema.field(name).type for name in columns)
        if not (pa.types.is_integer(id_type) or id_type in _STRING_TYPES):
            return False
        if text_type not in _TEXT_TYPES:
            return False
        types.add((id_type, _TEXT_TYPES[text_type]))
        metadata = parquet.metadata
        rows += metadata.num_rows
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for column in range(row_group.num_columns):
                chunk = row_group.column(column)
                if chunk.path_in_schema in columns:
                    size += chunk.total_uncompressed_size
    one_text_type = len({text for _, text in types}) <= 1
    return (
        one_text_type
        and 0 < rows <= config.nightly_driver_max_docs
        and size <= config.nightly_driver_read_max_bytes
    )


def read_documents(paths: list[str], config: DedupeConfig, id_type: str) -> pa.Table | None:
    """The batch's ``doc_id`` (bigint ids as int64) and ``text`` columns, as Spark reads them
    (:func:`~neardup_spark.nightly.steps.batch_documents`); None when :func:`_fits` says no."""
    columns = (config.id_col, config.text_col)
    files = [pq.ParquetFile(path) for path in paths]
    try:
        if not _fits(files, columns, config):
            return None
        tables = [parquet.read(columns=list(columns)) for parquet in files]
    finally:
        for parquet in files:
            parquet.close()
    target = pa.int64() if id_type == "bigint" else pa.string()
    ids = [table.column(0).cast(target) for table in tables]
    texts = [table.column(1).cast(_TEXT_TYPES[table.column(1).type]) for table in tables]
    return pa.table(
        {
            DOC_ID: pa.chunked_array([c for ids_of in ids for c in ids_of.chunks], target),
            TEXT: pa.chunked_array([c for texts_of in texts for c in texts_of.chunks]),
        }
    )


def sketch_documents(documents: pa.Table, config: DedupeConfig, threads: int) -> pa.Table:
    """The per-document pass's table (no shingle sets) of ``documents``, ``threads`` batches at
    a time, in row order."""
    per_batch = documents_columns_fn(config, with_sets=False)
    batches = documents.to_batches(max_chunksize=_BATCH_ROWS)
    with ThreadPoolExecutor(max(1, threads)) as pool:
        return pa.Table.from_batches(list(pool.map(per_batch, batches)))


def features_in_process(ctx: BatchContext) -> pa.Table | None:
    """The batch's per-document table, read and computed here (module docstring), its ids
    checked and its input counted into ``ctx.counts``; keeps its rows in ``ctx.documents``.
    None when the night takes the Spark path for it."""
    paths = _local_parquet_files(ctx)
    if paths is None:
        return None
    config = ctx.config
    with ctx.timer.stage("sketch") as counted:
        documents = read_documents(paths, config, ctx.id_type)
        if documents is None:
            return None
        check_id_values(documents.column(DOC_ID), config.id_col)
        features = sketch_documents(documents, config, in_process_threads(ctx.spark))
        counts = input_counts(features, config.ngram, config.char_ngram)
        counted["rows"] = counts["input_rows"]
    ctx.timer.documents = counts["input_rows"]
    ctx.timer.on_driver.append("sketch")
    ctx.counts.update(counts)
    ctx.documents = documents
    return features
