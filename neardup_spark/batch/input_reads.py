"""Reading a row group of an input Parquet file with PyArrow, a damaged one named in one line.

The input's footers are read before a run (:mod:`neardup_spark.io.schemas`): a file cut short
or without a readable footer is refused, or skipped whole with ``--skip-corrupt``. A file whose
footer reads but whose data pages do not (bytes flipped or zeroed in a column chunk: a codec's
error, a page that does not decode) is found only when its rows are read, by Spark's reader or
by PyArrow's in this process's threads and in Spark tasks. Every PyArrow read of an input row
group goes through :func:`read_row_group`, which raises
:class:`~neardup_spark.errors.InputUnreadable` naming the file, its format, the row group and
the error: a user error (exit 2), whether raised here or in a Spark task (whose error reaches
the driver with its message after :data:`~neardup_spark.errors.INPUT_UNREADABLE_MARK`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from neardup_spark.errors import InputUnreadable

# What a run can no longer do once rows of a file were used: skip it whole.
NOT_SKIPPED = (
    "found while reading; --skip-corrupt skips files whose damage is found before the run "
    "(a file cut short, a footer that does not read), not one whose rows were already used: "
    "remove or fix the file"
)
MAX_ERROR_CHARS = 300


def first_line(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, its first line (at most :data:`MAX_ERROR_CHARS`).

    >>> first_line(OSError("Corrupt snappy compressed data.\\nmore"))
    'OSError: Corrupt snappy compressed data.'
    """
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line}".rstrip(": ")[:MAX_ERROR_CHARS]


def unreadable_input(path: str, fmt_name: str, what: str, error: str) -> InputUnreadable:
    """The error for input file ``path`` (format ``fmt_name``, as messages name it) whose
    ``what`` (``row group 2 of 4``) failed to read with ``error``.

    >>> str(unreadable_input("/in/a.parquet", "Parquet", "row group 1 of 4", "OSError: x"))[:80]
    'input file /in/a.parquet (Parquet) is damaged: reading row group 1 of 4 failed ('
    """
    return InputUnreadable(
        f"input file {path} ({fmt_name}) is damaged: reading {what} failed ({error}), {NOT_SKIPPED}"
    )


def read_row_group(
    parquet: pq.ParquetFile,
    path: str,
    group: int,
    columns: Sequence[str] | None = None,
    use_threads: bool = True,
) -> pa.Table:
    """Row group ``group`` of the open input file ``parquet`` (at ``path``), its ``columns``
    (None: all); a read that fails is :class:`~neardup_spark.errors.InputUnreadable`."""
    try:
        listed = list(columns) if columns is not None else None
        return parquet.read_row_group(group, columns=listed, use_threads=use_threads)
    except (OSError, pa.ArrowException) as exc:
        raise unreadable_input(
            path, "Parquet", row_group_named(parquet.metadata, group), first_line(exc)
        ) from None


def row_group_named(metadata: pq.FileMetaData, group: int) -> str:
    """``row group 2 of 4 (rows 500 to 999)``: row group ``group`` (from 0) of a file, counted
    from 1 for people, with the rows it holds (counted from 0, as Spark's row index)."""
    start = sum(metadata.row_group(i).num_rows for i in range(group))
    end = start + metadata.row_group(group).num_rows - 1
    return f"row group {group + 1} of {metadata.num_row_groups} (rows {start:,} to {end:,})"
