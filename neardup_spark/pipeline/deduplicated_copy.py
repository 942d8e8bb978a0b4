"""``deduplicated/`` copied from the input files with PyArrow instead of written by Spark, in
local mode: the plan's ``driver_copy`` and ``task_copy``
(:func:`~neardup_spark.pipeline.plan.decide_deduplicated`).

Written by Spark, ``deduplicated/`` costs the JVM's Parquet decoding and encoding of every text
kept (100,000 pages: ~2.3 s alongside the other outputs, against ~1.2 s with PyArrow on one
core; a 1M-page run: ~36 CPU-seconds of its ~18 s write). When Spark would write back exactly
the files' own types (every column of a type Spark reads and writes unchanged, the session's
schema of the input the files' own, a codec PyArrow writes alike: the facts'
``copy_problem``), the input's row groups are copied less the removed rows:

* ``driver_copy``: by this process, one thread per core, when the clusters were found here
  and the removed ids are a table of this process;
* ``task_copy``: by Spark tasks, whole files each (:mod:`neardup_spark.batch.row_copies`), when
  the clusters were found in Spark jobs: the removed documents are located at their addresses
  in a Spark join (nothing collected that grows with the corpus) and each task is sent those
  in its files; the summaries (a row per file) are checked against the run's counts.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema, to_arrow_type

from neardup_spark.batch.addressed_texts import FILE_NO, ROW_INDEX
from neardup_spark.batch.input_reads import read_row_group
from neardup_spark.batch.row_copies import (
    COPIED,
    DROPPED,
    DUPLICATES,
    SUMMARY_SCHEMA,
    TASK,
    FileCopies,
    copy_files_fn,
    with_duplicates,
)
from neardup_spark.batch.row_group_reads import tasks_of_sizes
from neardup_spark.columns import CLUSTER_ID, DOC_ID
from neardup_spark.io.filesystem import pyarrow_filesystem
from neardup_spark.io.output import OutputDir
from neardup_spark.io.paths import from_spark_uri, local_path
from neardup_spark.kernels.spark_partitions import partition_keys
from neardup_spark.pipeline.addressed_input import AddressedInput
from neardup_spark.pipeline.facts import PARQUET_CODECS, ParquetFileFacts, RunFacts, plain_schema
from neardup_spark.pipeline.sketch import map_in_threads
from neardup_spark.runtime.engine import default_parallelism, from_arrow
from neardup_spark.stages.clusters import duplicate_counts
from neardup_spark.stages.names import column

_PART = "_neardup_part"
# Copying tasks per core: whole files each, so a few per core even out files of unlike sizes.
_TASKS_PER_CORE = 4


@dataclass(frozen=True)
class RowsCopy:
    """The input files whose rows ``deduplicated/`` copies, in the output's schema (its last
    column the duplicates column, ``duplicates_col``, unless that is "")."""

    files: tuple[ParquetFileFacts, ...]
    schema: pa.Schema
    compression: str
    threads: int
    duplicates_col: str = ""


def rows_copy(facts: RunFacts, schema: T.StructType, duplicates_col: str = "") -> RowsCopy:
    """How the input's rows are copied (the plan chose a copy: the facts allow it) into
    ``schema`` (the input's, then ``duplicates_col`` unless that is "")."""
    plain = plain_schema(to_arrow_schema(schema))
    if duplicates_col:  # never null, as Spark writes it
        last = len(plain) - 1
        plain = plain.set(last, plain.field(last).with_nullable(False))
    return RowsCopy(
        facts.input.parquet,
        plain,
        PARQUET_CODECS[facts.engine.parquet_codec],
        max(1, facts.engine.local_threads),
        duplicates_col,
    )


def copy_here(
    copy: RowsCopy,
    id_col: str,
    removed: pa.Array,
    staged: OutputDir,
    name: str,
    counts: pa.Table | None = None,
) -> None:
    """``driver_copy``: the input's rows whose ``id_col`` is not in ``removed``, with the
    duplicates column (``counts``' count for the row, else 0: :func:`with_duplicates`), written
    under ``staged/name`` (what a killed attempt left replaced) by this process, row group by
    row group, ``copy.threads`` files at a time."""
    staged.delete(name)
    fs, target = pyarrow_filesystem(staged.child(name))
    fs.create_dir(target, recursive=True)
    removed = removed.cast(copy.schema.field(id_col).type)

    def write(numbered: tuple[int, tuple[str, list[int]]]) -> None:
        number, (path, groups) = numbered
        out = f"{target.rstrip('/')}/part-{number:05d}.parquet"
        with (
            pq.ParquetFile(path) as source,
            pq.ParquetWriter(
                out, copy.schema, filesystem=fs, compression=copy.compression
            ) as writer,
        ):
            for group in groups:
                rows = read_row_group(source, path, group)
                kept = rows.filter(pc.invert(pc.is_in(rows.column(id_col), value_set=removed)))
                kept = with_duplicates(kept, id_col, counts, copy.duplicates_col)
                writer.write_table(kept.cast(copy.schema))

    pieces = row_group_pieces(copy.files, copy.threads)
    map_in_threads(write, list(enumerate(pieces)), copy.threads)


def row_group_pieces(
    files: tuple[ParquetFileFacts, ...], threads: int
) -> list[tuple[str, list[int]]]:
    """The files' row groups in input order, cut into at least ``threads`` pieces when they
    have that many: a file each, or runs of a file's row groups when the files are fewer."""
    paths = [f.path for f in files]
    counts = [len(f.row_group_rows) for f in files]
    if len(paths) >= threads:
        return [(path, list(range(n))) for path, n in zip(paths, counts, strict=True)]
    step = max(1, math.ceil(sum(counts) / max(1, threads)))
    pieces = []
    for path, n in zip(paths, counts, strict=True):
        pieces += [(path, list(range(start, min(start + step, n)))) for start in range(0, n, step)]
    return pieces or [(paths[0], [])]


@dataclass(frozen=True)
class RemovedRows:
    """The documents a run removes (``members`` rows whose ``doc_id`` is not their
    ``cluster_id``), how many, of how many input rows, and the input with its addresses."""

    addressed: AddressedInput
    members: DataFrame
    removed: int
    input_rows: int


def copy_in_tasks(source: RemovedRows, copy: RowsCopy, staged: OutputDir, name: str) -> None:
    """``task_copy``: the input's rows less the removed documents' written under
    ``staged/name`` by Spark tasks, whole files each."""
    files = source.addressed.readable_files
    if files is None:
        raise RuntimeError("the input's files cannot be copied by tasks (plan: task_copy)")
    spark = source.members.sparkSession
    cores = default_parallelism(spark)
    paths = [local_path(from_spark_uri(uri)) for uri in files.paths]
    runs = tasks_of_sizes([os.path.getsize(path) for path in paths], _TASKS_PER_CORE * cores)
    routes = partition_keys(len(runs))
    task_of_file = np.zeros(len(paths), np.int64)
    for task, run in enumerate(runs):
        task_of_file[run] = task
    target = staged.child(name)
    staged.delete(name)
    os.makedirs(local_path(target), exist_ok=True)
    copies = FileCopies(
        tuple(paths),
        tuple(tuple(run) for run in runs),
        source.addressed.id_col,  # as the files spell it (rows_copy checked)
        copy.schema,
        copy.compression,
        local_path(target),
        copy.duplicates_col,
    )
    id_type = source.addressed.scan.select(column(source.addressed.id_col)).schema[0].dataType
    parts = pa.array(routes[task_of_file], pa.int32())
    addresses = source.addressed.numbered_addresses(files, {_PART: parts})
    removed = source.members.where(F.col(DOC_ID) != F.col(CLUSTER_ID)).select(DOC_ID)
    dropped = removed.withColumn(DUPLICATES, F.lit(None).cast("long"))
    if copy.duplicates_col:  # the kept documents standing for removed ones, with their count
        dropped = dropped.unionByName(duplicate_counts(source.members))
    columns = [_PART, TASK, FILE_NO, ROW_INDEX, DOC_ID, DUPLICATES]
    located = (
        dropped.join(addresses, DOC_ID).withColumn(TASK, F.lit(None).cast("int")).select(*columns)
    )
    # One row per task naming it: a task whose files lose no row still copies them.
    markers = from_arrow(
        spark,
        pa.table(
            {
                _PART: pa.array(routes, pa.int32()),
                TASK: pa.array(range(len(runs)), pa.int32()),
                FILE_NO: pa.array([-1] * len(runs), pa.int32()),
                ROW_INDEX: pa.array([-1] * len(runs), pa.int64()),
                DOC_ID: pa.nulls(len(runs), to_arrow_type(id_type)),
                DUPLICATES: pa.nulls(len(runs), pa.int64()),
            }
        ),
    )
    summary = (
        located.unionByName(markers)
        .repartition(len(runs), _PART)
        .select(*columns[1:])
        .mapInArrow(copy_files_fn(copies), from_arrow_schema(SUMMARY_SCHEMA))
        .collect()
    )
    _check_copies(summary, len(paths), source)


def _check_copies(summary: list, files: int, source: RemovedRows) -> None:
    """Every input file copied once, the removed rows dropped and every other row copied."""
    copied = sum(row[COPIED] for row in summary)
    dropped = sum(row[DROPPED] for row in summary)
    done = sorted(row[FILE_NO] for row in summary)
    if done != list(range(files)) or dropped != source.removed:
        raise RuntimeError(
            f"deduplicated/: {len(done)} of {files} input files copied, {dropped} of "
            f"{source.removed} removed rows dropped"
        )
    if copied != source.input_rows - source.removed:
        raise RuntimeError(
            f"deduplicated/: {copied} rows copied, expected {source.input_rows - source.removed}"
        )
