"""A decontamination run's Spark pass over local Parquet files that its tasks read (and write)
themselves with PyArrow: the texts never go through the JVM.

Feasible where a dedupe's per-document pass reads row groups in its tasks: local mode (or a
Spark Connect server in local mode on loopback), the corpus local Parquet files without
partition directories. Each task takes a run of consecutive row groups of about equal bytes;
each row group's documents are keyed by the group's number (``<< ROW_GROUP_KEY_BITS``) plus
their row in it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_type

from neardup_spark.batch import BatchFn
from neardup_spark.batch.decontaminate import (
    ROW_GROUP_KEY_BITS,
    ROWS,
    KeyedRowGroup,
    Reference,
    row_group_hits_fn,
)
from neardup_spark.batch.input_reads import read_row_group
from neardup_spark.batch.row_group_reads import tasks_of_sizes
from neardup_spark.config.decontaminate import DecontaminateConfig
from neardup_spark.io.corpus import ListedInput
from neardup_spark.io.paths import local_path
from neardup_spark.runtime.spark_compat import to_arrow
from neardup_spark.stages.decontaminate import hits_schema


def keyed_row_groups(
    listed: ListedInput, tasks: int
) -> tuple[list[list[KeyedRowGroup]], list[KeyedRowGroup]]:
    """The local Parquet corpus's row groups, each with the key of its first row, in at most
    ``tasks`` runs of about equal bytes; and all of them."""
    groups: list[KeyedRowGroup] = []
    sizes: list[int] = []
    for f in listed.files:
        path = local_path(f)
        metadata = pq.ParquetFile(path).metadata
        for g in range(metadata.num_row_groups):
            groups.append((path, g, len(groups) << ROW_GROUP_KEY_BITS))
            sizes.append(metadata.row_group(g).total_byte_size)
    runs = tasks_of_sizes(sizes, min(tasks, max(len(groups), 1)))
    return [[groups[i] for i in run] for run in runs if run], groups


def batch_rows_of(spark: SparkSession) -> int:
    return int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") or 10_000)


def hits_in_tasks(
    spark: SparkSession,
    df: DataFrame,
    ref: Reference,
    config: DecontaminateConfig,
    runs: list[list[KeyedRowGroup]],
) -> DataFrame:
    """The hit rows of ``df``'s local Parquet row groups, ``runs`` of them read by each task
    with PyArrow (no text through the JVM)."""
    id_type = df.schema[config.id_col].dataType
    read = row_group_hits_fn(
        ref, runs, (config.id_col, config.text_col), to_arrow_type(id_type), batch_rows_of(spark)
    )
    return spark.range(0, len(runs), 1, len(runs)).mapInArrow(read, hits_schema(id_type))


def clean_writer_fn(
    runs: Sequence[Sequence[KeyedRowGroup]], clean: BatchFn, directory: str, batch_rows: int
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Task numbers -> ``rows``: the rows each task wrote to ``directory/part-NNNNN.parquet``,
    its row groups read whole and passed through ``clean`` batch by batch (the first file's
    schema)."""

    def write(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column(0).to_pylist():
                schema = pq.read_schema(runs[task][0][0])
                written = 0
                target = os.path.join(directory, f"part-{task:05d}.parquet")
                with pq.ParquetWriter(target, schema) as writer:
                    for path, group, _ in runs[task]:
                        with pq.ParquetFile(path) as parquet:
                            table = read_row_group(parquet, path, group)
                        for part in table.to_batches(max_chunksize=batch_rows):
                            cleaned = clean(part)
                            if cleaned.schema != schema:
                                cleaned = cleaned.cast(schema)
                            written += cleaned.num_rows
                            writer.write_batch(cleaned)
                yield pa.record_batch([pa.array([written], pa.int64())], names=[ROWS])

    return write


def clean_in_tasks(
    spark: SparkSession, runs: list[list[KeyedRowGroup]], clean: BatchFn, directory: str
) -> int:
    """clean/ written by the tasks themselves (one Parquet file each, rows passed through
    ``clean``) into the local ``directory``; the rows written."""
    target = local_path(directory)
    os.makedirs(target, exist_ok=True)
    write = clean_writer_fn(runs, clean, target, batch_rows_of(spark))
    counted = spark.range(0, len(runs), 1, len(runs)).mapInArrow(write, f"{ROWS} long")
    return int(np.sum(to_arrow(counted).column(ROWS).to_numpy()))
