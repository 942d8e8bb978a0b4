"""The per-document pass in this process, in local mode.

In local mode a Spark task runs on this machine's cores, as a thread of this process would; what
the per-document pass pays as Spark tasks on top of its work is the JVM's Parquet decoding, the
Arrow exchange with the Python workers and, in a fresh process, their first queries (a
10,000-page night's pass: ~2.2 s in a fresh process, 0.5 s warm; 100,000 pages: 5.9 s of which
~2.1 s is the per-document function on two cores). So when the input is Parquet files on the
local file system whose id and text columns are at most ``driver_read_max_bytes`` uncompressed,
they are read with PyArrow and run through the Spark path's per-document function
(:func:`~neardup_spark.batch.documents.documents_columns_fn`) by one thread per core (the
compiled kernels release the GIL), the ids checked as the Spark path checks them. The same
features, counts and errors (tested against the Spark path); anything else (another format, a
cluster, Spark Connect, an input table, skipped files, a column a file lacks, a cleaning pass)
takes Spark tasks. The runs (:mod:`.dedupe`) and nights (:mod:`neardup_spark.nightly.driver_read`)
decide when.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type

from neardup_spark.batch.documents import documents_columns_fn
from neardup_spark.batch.input_reads import read_row_group
from neardup_spark.batch.row_group_reads import tasks_of
from neardup_spark.columns import DOC_ID, TEXT
from neardup_spark.config import DedupeConfig
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import CorpusSource, check_id_values, list_data_files
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.io.formats import guess_format
from neardup_spark.io.paths import local_path
from neardup_spark.io.storage import storage_for
from neardup_spark.runtime.engine import CLASSIC, engine_of, local_cores
from neardup_spark.runtime.faults import batch_faults
from neardup_spark.stages.documents import documents_schema, features_of_row_groups

# Rows per batch of the per-document function (the Spark path's Arrow batch size).
_BATCH_ROWS = 2000
_STRING_TYPES = {pa.string(): pa.string(), pa.large_string(): pa.string()}
_TEXT_TYPES = {**_STRING_TYPES, pa.binary(): pa.binary(), pa.large_binary(): pa.binary()}
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}
_NO_LIMIT = 1 << 62
_In = TypeVar("_In")
_Out = TypeVar("_Out")


def in_process_threads(spark: SparkSession) -> int:
    """Threads for in-process work: the local master's cores; 0 when the session's tasks do
    not run on this machine (a cluster's, or a remote Spark Connect server's). A Connect server
    in local mode reached at a loopback address runs its tasks on this machine's cores, on the
    files this process sees: its client does that work as a classic driver would."""
    engine = engine_of(spark)
    master = engine.master()
    if not master.startswith("local"):
        return 0
    if engine.kind == CLASSIC:
        return max(1, engine.default_parallelism())
    return local_cores(master) if connect_host(spark) in _LOOPBACK else 0


def connect_host(spark: SparkSession) -> str | None:
    """The host a Spark Connect session's client talks to (None when it cannot be told)."""
    try:  # the client's host (PySpark 3.5 to 4.x); a custom channel builder may not tell it
        host = getattr(spark, "client").host  # noqa: B009 (not on the classic type)
    except Exception:  # any failure means: not known
        return None
    return str(host).strip("[]").lower() if host else None


def may_read_in_process(
    spark: SparkSession, source: CorpusSource, config: DedupeConfig, max_rows: int = 0
) -> bool:
    """Whether ``source`` may be read here (:func:`local_parquet_paths`, :func:`input_fits`
    with at most ``max_rows`` rows, 0: any number), judged from its listing and footers
    before a run lists and hashes its files."""
    if not config.driver_read_max_bytes or source.path is None:
        return False
    try:
        files, _ = list_data_files(spark, source.path)
        paths = local_parquet_paths(spark, files, files_format(source, files))
        limits = ReadLimits(max_rows, config.driver_read_max_bytes)
        return paths is not None and input_fits(paths, config, limits)
    except (UserError, OSError, pa.ArrowException):  # the read reports these, in its words
        return False


def files_format(source: CorpusSource, names: list[str]) -> str | None:
    """The format of ``source``'s files (``names``): as given, else told by their names."""
    if source.format is not None or not names or source.path is None:
        return source.format
    return guess_format(names, source.path)


def local_parquet_paths(
    spark: SparkSession, names: list[str], input_format: str | None
) -> list[str] | None:
    """The input's files (``names``, as listed) as local paths when they may be read here:
    Parquet on the local file system, in local mode; else None."""
    if input_format != "parquet" or not names or not in_process_threads(spark):
        return None
    if not all(isinstance(storage_for(spark, name), LocalStorage) for name in names):
        return None
    return [local_path(name) for name in names]


@dataclass(frozen=True)
class ReadLimits:
    """What a read here may take: rows (0: any number) and the id and text columns' bytes."""

    max_rows: int
    max_bytes: int


@dataclass(frozen=True)
class LocalInput:
    """A run's input files, local Parquet this process may read, and how much of it."""

    paths: list[str]
    limits: ReadLimits


def local_input(
    spark: SparkSession,
    source: CorpusSource,
    inputs: list[dict[str, Any]],
    config: DedupeConfig,
    skipped: list[dict[str, Any]],
) -> LocalInput | None:
    """The run's :class:`LocalInput` (``inputs``: its files as listed for the run id), or None
    when its per-document pass runs as Spark tasks (module docstring)."""
    if not config.driver_read_max_bytes or skipped or config.strip_boilerplate:
        return None
    names = [entry["path"] for entry in inputs]
    paths = local_parquet_paths(spark, names, files_format(source, names))
    if paths is None:
        return None
    return LocalInput(paths, ReadLimits(0, config.driver_read_max_bytes))


def _fits(files: Iterable[pq.ParquetFile], columns: tuple[str, str], limits: ReadLimits) -> bool:
    """Every file holds both columns at its top level, of the types read here, and the input
    is within ``limits``."""
    rows = size = 0
    text_types = set()
    for parquet in files:
        schema = parquet.schema_arrow
        if any(schema.get_field_index(name) < 0 for name in columns):
            return False
        id_type, text_type = (schema.field(name).type for name in columns)
        if not (pa.types.is_integer(id_type) or id_type in _STRING_TYPES):
            return False
        if text_type not in _TEXT_TYPES:
            return False
        text_types.add(_TEXT_TYPES[text_type])
        metadata = parquet.metadata
        rows += metadata.num_rows
        for group in range(metadata.num_row_groups):
            size += _columns_bytes(metadata.row_group(group), columns)
    return (
        len(text_types) == 1
        and rows > 0
        and (not limits.max_rows or rows <= limits.max_rows)
        and size <= limits.max_bytes
    )


def input_fits(paths: list[str], config: DedupeConfig, limits: ReadLimits) -> bool:
    """Whether the files at ``paths`` may be read here (:func:`_fits`, by their footers)."""
    files = [pq.ParquetFile(path) for path in paths]
    try:
        return _fits(files, (config.id_col, config.text_col), limits)
    finally:
        for parquet in files:
            parquet.close()


def read_and_sketch(
    paths: list[str], config: DedupeConfig, id_type: pa.DataType, threads: int
) -> tuple[pa.Table, pa.Table]:
    """The rows of files :func:`input_fits` accepted, as Spark reads them (``doc_id`` as
    ``id_type``, the type Spark gives the pass, and ``text``), and their per-document table
    (no shingle sets), in row order: each row group read and sketched by one of ``threads``
    threads, so that reading overlaps the work (100,000 pages: the reads alone took 0.9 s
    one file after another). The ids are checked at the end (:class:`UserError`)."""
    columns = [config.id_col, config.text_col]
    sketch = documents_columns_fn(config, with_sets=False)
    units = []
    for path in paths:
        with pq.ParquetFile(path) as parquet:
            units += [(path, group) for group in range(parquet.metadata.num_row_groups)]

    def per_unit(unit: tuple[str, int]) -> tuple[pa.Table, list[pa.RecordBatch]]:
        path, group = unit
        with pq.ParquetFile(path) as parquet:
            rows = read_row_group(parquet, path, group, columns, use_threads=False)
        text = rows.column(1)
        documents = pa.table(
            {DOC_ID: rows.column(0).cast(id_type), TEXT: text.cast(_TEXT_TYPES[text.type])}
        )
        batches = []
        for batch in documents.to_batches(max_chunksize=_BATCH_ROWS):
            batch_faults()  # the test hooks a Spark task's batch runs (runtime/faults.py)
            batches.append(sketch(batch))
        return documents, batches

    done = map_in_threads(per_unit, units, threads)
    documents = pa.concat_tables([documents for documents, _ in done])
    check_id_values(documents.column(DOC_ID), config.id_col)
    return documents, pa.Table.from_batches([b for _, batches in done for b in batches])


@dataclass(frozen=True)
class SketchedHere:
    """The per-document pass done in this process: its table (the Spark path's schema) and the
    ``doc_id``, ``text`` rows it read, for a verification on the driver (None when let go)."""

    features: pa.Table
    documents: pa.Table | None


def features_table(
    df: DataFrame, local: LocalInput, config: DedupeConfig, keep_texts: bool = False
) -> SketchedHere:
    """The per-document table of ``df``'s rows (read from ``local``'s files, which
    :func:`input_fits` accepted) computed here, in the Spark path's schema. The texts are kept
    with ``keep_texts`` (the pairs are then found on the driver), else let go once it is done
    (verification reads its candidates' own)."""
    id_type = df.schema[config.id_col].dataType
    threads = in_process_threads(df.sparkSession)
    documents, features = read_and_sketch(local.paths, config, to_arrow_type(id_type), threads)
    schema = documents_schema(config, id_type, with_sets=False)
    return SketchedHere(features.cast(to_arrow_schema(schema)), documents if keep_texts else None)


def features_in_tasks(
    df: DataFrame, local: LocalInput, config: DedupeConfig, tasks: int
) -> DataFrame | None:
    """The per-document table of ``df``'s rows as ``tasks`` Spark tasks that read ``local``'s
    files themselves, each a run of consecutive row groups of about equal bytes (no text
    decoded by the JVM and handed to Python); None when the files cannot be read so
    (:func:`_fits` without a size limit)."""
    files = [pq.ParquetFile(path) for path in local.paths]
    try:
        columns = (config.id_col, config.text_col)
        if not _fits(files, columns, ReadLimits(0, _NO_LIMIT)):
            return None
        row_groups = [
            ((path, group), _columns_bytes(parquet.metadata.row_group(group), columns))
            for path, parquet in zip(local.paths, files, strict=True)
            for group in range(parquet.metadata.num_row_groups)
        ]
    finally:
        for parquet in files:
            parquet.close()
    spark = df.sparkSession
    runs = tasks_of(row_groups, tasks)
    types = (df.schema[config.id_col].dataType, df.schema[config.text_col].dataType)
    batch_rows = int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") or 10_000)
    read = features_of_row_groups(config, runs, columns, types, batch_rows, batch_faults)
    return spark.range(0, len(runs), 1, len(runs)).transform(read)


def _columns_bytes(row_group: pq.RowGroupMetaData, columns: tuple[str, str]) -> int:
    """The uncompressed bytes of ``columns`` in ``row_group``."""
    chunks = (row_group.column(i) for i in range(row_group.num_columns))
    return sum(c.total_uncompressed_size for c in chunks if c.path_in_schema in columns)


def map_in_threads(fn: Callable[[_In], _Out], items: Iterable[_In], threads: int) -> list[_Out]:
    """``[fn(item) for item in items]``, ``threads`` at a time (work on compiled kernels, which
    release the GIL), in order."""
    pool = ThreadPoolExecutor(max(1, threads))
    try:
        return list(pool.map(fn, items))
    finally:  # a signal stops the work within the items being done, not all of them
        pool.shutdown(wait=True, cancel_futures=True)
