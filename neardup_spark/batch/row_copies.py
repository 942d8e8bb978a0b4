"""Copying input files less some rows, on Arrow batches: ``deduplicated/`` written by Spark
tasks that each copy whole input files with PyArrow (no text decoded and encoded again by the
JVM), dropping the rows of the documents a run removes.

A task receives the addresses (file number, row) of the removed documents in its files, those
of the kept documents that stand for removed ones with their count (``deduplicated/``'s
duplicates column: :func:`with_duplicates`), and one marker row naming the task; it writes one
Parquet file per input file and returns a summary row per file. The id at each address must be
the document's the run located there: a file changed under the run is an error, not a wrong row
dropped or counted.
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
# An address row's count of removed documents for a kept one (null: the row is dropped).
DUPLICATES = "_neardup_duplicates"
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
    file numbers, the id column's name in the files, the output's schema and codec, the
    directory the copies go to (``part-NNNNN.parquet``, the input file's number), and the
    duplicates column's name ("": none)."""

    paths: tuple[str, ...]
    tasks: tuple[tuple[int, ...], ...]
    id_col: str
    schema: pa.Schema
    compression: str
    target: str
    duplicates_col: str = ""


def duplicate_counts(cluster_ids: pa.Array | pa.ChunkedArray) -> pa.Table:
    """The removed documents' cluster ids -> each kept document's count of them (``doc_id``,
    ``_neardup_duplicates``; kept documents standing for none are absent).

    >>> duplicate_counts(pa.array([4, 9, 4])).to_pylist()
    [{'doc_id': 4, '_neardup_duplicates': 2}, {'doc_id': 9, '_neardup_duplicates': 1}]
    """
    if isinstance(cluster_ids, pa.ChunkedArray):
        cluster_ids = cluster_ids.combine_chunks()
    counts = pc.value_counts(cluster_ids)
    return pa.table({DOC_ID: counts.field("values"), DUPLICATES: counts.field("counts")})


def with_duplicates(rows: pa.Table, id_col: str, counts: pa.Table | None, name: str) -> pa.Table:
    """``rows`` with a last column ``name``: the count ``counts`` gives each row's id
    (``doc_id``, ``_neardup_duplicates``), 0 where it gives none; ``rows`` as they are when
    ``name`` is "" (no duplicates column).

    >>> rows = pa.table({"id": [1, 2, 3]})
    >>> counts = pa.table({"doc_id": [3, 1], DUPLICATES: [2, 5]})
    >>> with_duplicates(rows, "id", counts, "duplicates").column("duplicates").to_pylist()
    [5, 0, 2]
    """
    if not name:
        return rows
    values = pa.nulls(rows.num_rows, pa.int64())
    if counts is not None and counts.num_rows:
        ids = counts.column(DOC_ID).combine_chunks()
        where = pc.index_in(rows.column(id_col), value_set=ids.cast(rows.schema.field(id_col).type))
        values = counts.column(DUPLICATES).combine_chunks().cast(pa.int64()).take(where)
    return rows.append_column(name, pc.fill_null(values, 0))


def copy_files_fn(
    copies: FileCopies,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """One task's rows -> its files copied less the rows addressed, and a summary per file.

    Input columns: ``_neardup_task`` (set on one marker row), ``_neardup_file_no``,
    ``_neardup_row``, ``doc_id`` (the removed documents' addresses and ids, and those of the
    kept documents standing for removed ones), ``_neardup_duplicates`` (null for a removed
    document, else the kept one's count). Output columns: :data:`SUMMARY_SCHEMA` (file number,
    rows copied, rows dropped).
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
                dropped = mine.filter(pc.is_null(mine.column(DUPLICATES)))
                counted = mine.filter(pc.is_valid(mine.column(DUPLICATES)))
                copied = _copy_file(copies, file_no, dropped, counted)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([file_no], pa.int32()),
                        pa.array([copied]),
                        pa.array([dropped.num_rows]),
                    ],
                    schema=SUMMARY_SCHEMA,
                )

    return run


def _copy_file(copies: FileCopies, file_no: int, dropped: pa.Table, counted: pa.Table) -> int:
    """Input file ``file_no`` less the rows ``dropped`` addresses (``_neardup_row``, ``doc_id``),
    with the counts ``counted`` gives its rows (``_neardup_row``, ``doc_id``,
    ``_neardup_duplicates``), written to the target directory, row group by row group; returns
    the rows written."""
    path = copies.paths[file_no]
    drops, counts = _by_row(dropped), _by_row(counted)
    out = f"{copies.target.rstrip('/')}/part-{file_no:05d}.parquet"
    written = start = 0
    with (
        pq.ParquetFile(path) as source,
        pq.ParquetWriter(out, copies.schema, compression=copies.compression) as writer,
    ):
        rows = source.metadata.num_rows
        if any(t.num_rows and t.column(ROW_INDEX)[-1].as_py() >= rows for t in (drops, counts)):
            raise InputChanged(f"{path} has fewer rows than Spark read: the input changed")
        for group in range(source.metadata.num_row_groups):
            table = read_row_group(source, path, group)
            stop = start + table.num_rows
            local = _rows_in(drops, table, copies.id_col, (start, stop), (path, group))
            keep = np.ones(table.num_rows, dtype=bool)
            keep[local] = False
            if copies.duplicates_col:
                here = _rows_in(counts, table, copies.id_col, (start, stop), (path, group))
                values = np.zeros(table.num_rows, dtype=np.int64)
                lo, hi = np.searchsorted(counts.column(ROW_INDEX).to_numpy(), [start, stop])
                values[here] = counts.column(DUPLICATES).to_numpy()[lo:hi]
                table = table.append_column(copies.duplicates_col, pa.array(values))
            kept = table.filter(pa.array(keep)).cast(copies.schema)
            writer.write_table(kept)
            written += kept.num_rows
            start = stop
    return written


def _by_row(addresses: pa.Table) -> pa.Table:
    """Address rows in row order."""
    return addresses.sort_by(ROW_INDEX) if addresses.num_rows else addresses


def _rows_in(
    addresses: pa.Table,
    table: pa.Table,
    id_col: str,
    span: tuple[int, int],
    where: tuple[str, int],
) -> np.ndarray:
    """The rows of ``table`` (a row group of the file, its rows ``span``) that ``addresses``
    (row order) name, as indices into it; the ids there must be the addresses' ids."""
    rows = addresses.column(ROW_INDEX).to_numpy()
    lo, hi = np.searchsorted(rows, list(span))
    local = rows[lo:hi] - span[0]
    if not len(local):
        return local
    ids = addresses.column(DOC_ID).slice(lo, hi - lo)
    found = table.column(id_col).take(pa.array(local))
    if not pc.all(pc.equal(found.cast(ids.type), ids)).as_py():
        raise InputChanged(
            f"row group {where[1]} of {where[0]} does not hold the documents Spark read "
            "there: the input changed during the run"
        )
    return local
