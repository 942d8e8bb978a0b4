"""The per-document pass over Parquet row groups that the task reads itself, on Arrow batches.

Run as Spark tasks over a corpus of local Parquet files, the per-document pass pays the JVM
for decoding every text and handing it to the Python worker through Arrow, about a third of
the pass. A task given its row groups reads them with PyArrow instead (only the id and text
columns) and hands back the per-document rows alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from neardup_spark.batch.input_reads import read_row_group
from neardup_spark.columns import DOC_ID, TEXT

RowGroup = tuple[str, int]  # a local file's path, a row group's number in it


def row_groups_fn(
    tasks: Sequence[Sequence[RowGroup]],
    columns: tuple[str, str],
    types: tuple[pa.DataType, pa.DataType],
    per_batch: Callable[[pa.RecordBatch], pa.RecordBatch],
    batch_rows: int,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Task numbers -> ``per_batch`` of the documents in those tasks' row groups.

    Input column: ``id`` (a task's number: its row groups are ``tasks[id]``). Each row group's
    ``columns`` (the id and text columns) are read, cast to ``types`` and renamed ``doc_id``,
    ``text``, and go to ``per_batch`` in batches of at most ``batch_rows`` rows. Output: what
    ``per_batch`` returns.
    """

    def read(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for task in batch.column(0).to_pylist():
                for path, group in tasks[task]:
                    with pq.ParquetFile(path) as parquet:
                        rows = read_row_group(parquet, path, group, columns)
                    documents = pa.table(
                        {
                            DOC_ID: rows.column(0).cast(types[0]),
                            TEXT: rows.column(1).cast(types[1]),
                        }
                    )
                    for part in documents.to_batches(max_chunksize=batch_rows):
                        yield per_batch(part)

    return read


def tasks_of(row_groups: Sequence[tuple[RowGroup, int]], tasks: int) -> list[list[RowGroup]]:
    """Row groups (with their bytes) in order -> at most ``tasks`` runs of consecutive row
    groups of about equal bytes (a row group is never split)."""
    runs = tasks_of_sizes([size for _, size in row_groups], tasks)
    return [[row_groups[i][0] for i in run] for run in runs]


def tasks_of_sizes(sizes: Sequence[int], tasks: int) -> list[list[int]]:
    """Items ``0 .. len(sizes) - 1`` in order, cut into at most ``tasks`` runs of about equal
    total size (an item is never split).

    >>> tasks_of_sizes([5, 5, 10], 2)
    [[0, 1], [2]]
    """
    total = sum(sizes)
    runs: list[list[int]] = [[] for _ in range(max(1, tasks))]
    done = 0
    for item, size in enumerate(sizes):
        # the run whose share of the total this item's middle falls in
        index = min(len(runs) - 1, int((done + size / 2) * len(runs) / max(total, 1)))
        runs[index].append(item)
        done += size
    return [run for run in runs if run]
