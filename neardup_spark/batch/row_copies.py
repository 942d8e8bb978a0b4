"""Copying input files less some rows, on Arrow batches: ``deduplicated/`` written by Spark
tasks that each copy whole input files with PyArrow (no text decoded and encoded again by the
JVM), dropping the rows of the documents a run removes.

A task receives the addresses (file number, row) of the removed documents in its files and one
marker row naming the task; it writes one Parquet file per input file and returns a summary
row per file. The id at each dropped address must be the removed document's: a file changed
under the run is an error, not a wrong row dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neardup_spark.batch.addressed_texts import FILE_NO, ROW_INDEX
from neardup_spark.batch.input_reads import read_row_group
from neardup_spark.columns import DOC_ID
from neardup_spark.errors import InputChanged

TASK = "_neardup_task"  # the marker row's task number (null on address rows)
COPIED = "copied"  # summary: rows written
DROPPED = "dropped"  # summary: rows left out
SUMMARY_SCHEMA = pa.schema(
    [
        pa.field(FILE_NO, pa.int32(), False),
        pa.field(COPIED, pa.int64(), False),
        pa.field(DROPPED, pa.int64(), False),
    ]
)


@dataclass(frozen=True)
class FileCopies:
    """What the copying tasks share: the input files (local paths, by number), each task's
    file numbers, the id column's name in the files, the output's schema and codec, and the
    directory the copies go to (``part-NNNNN.parquet``, the input file's number)."""

    paths: tuple[str, ...]
    tasks: tuple[tuple[int, ...], ...]
    id_col: str
    schema: pa.Schema
    compression: str
    target: str


def copy_files_fn(
    copies: FileCopies,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """One task's rows -> its files copied less the rows addressed, and a summary per file.

    Input columns: ``_neardup_task`` (set on one marker row), ``_neardup_file_no``,
    ``_neardup_row``, ``doc_id`` (the removed documents' addresses and ids). Output columns:
    :data:`SUMMARY_SCHEMA` (file number, rows copied, rows dropped).
    """

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = pa.Table.from_batches(list(batches))
        if not rows.num_rows:
            return
        tasks = pc.drop_null(rows.column(TASK)).to_numpy()
        addresses = rows.filter(pc.is_null(rows.column(TASK)))
        file_nos = addresses.column(FILE_NO).to_numpy()
        for task in tasks:
            for file_no in copies.tasks[int(task)]:
                mine = addresses.filter(pa.array(file_nos == file_no))
                dropped_rows = mine.column(ROW_INDEX).to_numpy()
                copied = _copy_file(copies, file_no, dropped_rows, mine.column(DOC_ID))
                yield pa.RecordBatch.from_arrays(
                    [pa.array([file_no], pa.int32()), pa.array([copied]), pa.array([len(mine)])],
                    schema=SUMMARY_SCHEMA,
                )

    return run


def _copy_file(copies: FileCopies, file_no: int, dropped: np.ndarray, ids: pa.ChunkedArray) -> int:
    """Input file ``file_no`` less the rows at ``dropped`` (whose ids must be ``ids``) written
    to the target directory, row group by row group; returns the rows written."""
    path = copies.paths[file_no]
    order = np.argsort(dropped, kind="stable")
    dropped, ids = dropped[order], ids.take(pa.array(order))
    out = f"{copies.target.rstrip('/')}/part-{file_no:05d}.parquet"
    written = start = 0
    with (
        pq.ParquetFile(path) as source,
        pq.ParquetWriter(out, copies.schema, compression=copies.compression) as writer,
    ):
        if len(dropped) and dropped[-1] >= source.metadata.num_rows:
            raise InputChanged(f"{path} has fewer rows than Spark read: the input changed")
        for group in range(source.metadata.num_row_groups):
            table = read_row_group(source, path, group)
            stop = start + table.num_rows
            lo, hi = np.searchsorted(dropped, [start, stop])
            local = dropped[lo:hi] - start
            found = table.column(copies.id_col).take(pa.array(local))
            same = pc.equal(found.cast(ids.type), ids.slice(lo, hi - lo))
            if len(local) and not pc.all(same).as_py():
                raise InputChanged(
                    f"row group {group} of {path} does not hold the documents Spark read "
                    "there: the input changed during the run"
                )
            keep = np.ones(table.num_rows, dtype=bool)
            keep[local] = False
            kept = table.filter(pa.array(keep)).cast(copies.schema)
            writer.write_table(kept)
            written += kept.num_rows
            start = stop
    return written
