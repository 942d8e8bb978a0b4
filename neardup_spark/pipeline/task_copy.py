"""``deduplicated/`` copied from the input files by Spark tasks, in local mode.

Written by Spark, ``deduplicated/`` costs the JVM's Parquet decoding and encoding of every
text kept (a 1M-page run: ~36 CPU-seconds of its ~18 s write, for 1.6 GB of text). When this
process would copy it itself (:mod:`.local_output`: local Parquet in, the files' own types
out, a local OUTPUT) but the removed documents are not a table of this process (their clusters
were found in Spark jobs), Spark tasks copy the files instead, whole files each, with PyArrow
(:mod:`neardup_spark.batch.row_copies`). The removed documents are located at their addresses
in a Spark join (nothing collected that grows with the corpus) and each task is sent those in
its files; the summaries (a row per file) are checked against the run's counts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_type

from neardup_spark.batch.addressed_texts import FILE_NO, ROW_INDEX
from neardup_spark.batch.row_copies import (
    COPIED,
    DROPPED,
    SUMMARY_SCHEMA,
    TASK,
    FileCopies,
    copy_files_fn,
)
from neardup_spark.batch.row_group_reads import tasks_of_sizes
from neardup_spark.columns import CLUSTER_ID, DOC_ID
from neardup_spark.io.output import OutputDir
from neardup_spark.io.paths import from_spark_uri, local_path
from neardup_spark.kernels.spark_partitions import partition_keys
from neardup_spark.pipeline.filtered_scans import AddressedInput
from neardup_spark.pipeline.local_output import RowsCopy
from neardup_spark.runtime.engine import default_parallelism, from_arrow
from neardup_spark.stages.names import column

_PART = "_neardup_part"
# Copying tasks per core: whole files each, so a few per core even out files of unlike sizes.
_TASKS_PER_CORE = 4


@dataclass(frozen=True)
class RemovedRows:
    """The documents a run removes (``members`` rows whose ``doc_id`` is not their
    ``cluster_id``), how many, of how many input rows, and the input with its addresses."""

    addressed: AddressedInput
    members: DataFrame
    removed: int
    input_rows: int


def copy_in_tasks(source: RemovedRows, copy: RowsCopy, staged: OutputDir, name: str) -> bool:
    """The input's rows less the removed documents' written under ``staged/name`` by Spark
    tasks (module docstring); False, having written nothing, when the input's files are fewer
    than the cores or cannot be read so."""
    files = source.addressed.readable_files
    spark = source.members.sparkSession
    cores = default_parallelism(spark)
    if files is None or len(files.paths) < cores:
        return False
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
    )
    id_type = source.addressed.scan.select(column(source.addressed.id_col)).schema[0].dataType
    parts = pa.array(routes[task_of_file], pa.int32())
    addresses = source.addressed.numbered_addresses(files, {_PART: parts})
    removed = source.members.where(F.col(DOC_ID) != F.col(CLUSTER_ID)).select(DOC_ID)
    columns = [_PART, TASK, FILE_NO, ROW_INDEX, DOC_ID]
    located = (
        removed.join(addresses, DOC_ID).withColumn(TASK, F.lit(None).cast("int")).select(*columns)
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
    return True


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
