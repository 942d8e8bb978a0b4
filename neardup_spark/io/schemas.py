"""The input files' own schemas, read from their footers on the driver, and whether they agree.

Spark takes a Parquet (or ORC) input's schema from one file's footer: a file whose column has
another type fails in the middle of a job (a Java stack trace), and a column some files lack is
kept or dropped depending on the file Spark happened to look at. Here every local file's footer
is read first (a few milliseconds each, on threads; the footers are read anyway to find
unreadable files), so that:

* a column whose type differs between two files is a :class:`UserError` naming both files and
  both types (the id, the text, or any other column: ``deduplicated/`` keeps every column);
* a column some files lack is read as null in their rows (Spark's ``mergeSchema``), unless it is
  one the run needs (the id and text columns): then the error names a file without it.

Files on other file systems (HDFS, object stores) are left to Spark's reader.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from neardup_spark.errors import UserError
from neardup_spark.io.paths import is_local_path, local_path

# Threads reading footers: file opens and small reads, mostly waiting on the OS.
FOOTER_THREADS = 8


@dataclass(frozen=True)
class Footer:
    """One data file's footer: its Arrow ``schema`` and the ``rows`` it says the file holds,
    or the ``problem`` that kept it from being read (all ``None`` for a file not on the local
    file system: not read here)."""

    path: str
    schema: pa.Schema | None = None
    problem: str | None = None
    rows: int | None = None
    # A Parquet file's whole footer (row groups, column chunks): read once per run, kept for
    # the run's facts (pipeline/facts.py) and its readers of row groups.
    metadata: pq.FileMetaData | None = None


def read_footer(path: str, fmt: str = "parquet") -> Footer:
    """The footer of a local Parquet or ORC file (``path`` as Hadoop lists it: ``file:/x``)."""
    if not is_local_path(path) or not local_path(path).startswith("/"):
        return Footer(path)
    local = local_path(path)
    try:
        if fmt == "orc":
            import pyarrow.orc as orc

            found = orc.ORCFile(local)
            schema, rows = found.schema, found.nrows
        else:
            metadata = pq.read_metadata(local)
            schema, rows = metadata.schema.to_arrow_schema(), metadata.num_rows
            return Footer(path, schema=schema, rows=rows, metadata=metadata)
    except Exception as exc:
        return Footer(path, problem=f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
    return Footer(path, schema=schema, rows=rows)


def read_footers(files: list[str], fmt: str = "parquet") -> list[Footer]:
    """:func:`read_footer` of each file, :data:`FOOTER_THREADS` at a time, in ``files``' order."""
    with ThreadPoolExecutor(max_workers=FOOTER_THREADS) as pool:
        return list(pool.map(lambda f: read_footer(f, fmt), files))


def comparable_type(dtype: pa.DataType) -> str:
    """A column type as Spark reads it, for comparing files: large and small strings (and
    binaries) alike, dictionary-encoded columns as their values, timestamps of any unit alike.

    >>> comparable_type(pa.large_string()), comparable_type(pa.dictionary(pa.int8(), pa.string()))
    ('string', 'string')
    >>> comparable_type(pa.timestamp("ns")), comparable_type(pa.int64())
    ('timestamp', 'int64')
    """
    if pa.types.is_dictionary(dtype):
        return comparable_type(dtype.value_type)
    if pa.types.is_large_string(dtype) or pa.types.is_string(dtype):
        return "string"
    if pa.types.is_large_binary(dtype) or pa.types.is_binary(dtype):
        return "binary"
    if pa.types.is_timestamp(dtype):
        return "timestamp" if dtype.tz is None else f"timestamp[{dtype.tz}]"
    return str(dtype)


def check_schemas(footers: list[Footer], shown: str, required: tuple[str, ...] = ()) -> bool:
    """Refuse (:class:`UserError`) files whose schemas disagree: a column typed differently in
    two files, or a ``required`` column missing from a file that has other columns. Returns
    whether the files' column sets differ (read them with ``mergeSchema``: nulls where a file
    lacks a column)."""
    read = [f for f in footers if f.schema is not None]
    first_seen: dict[str, tuple[str, str]] = {}  # column -> (type, first file with it)
    for footer in read:
        assert footer.schema is not None
        for field in footer.schema:
            if pa.types.is_null(field.type):  # an all-null column: Spark reads it as any type
                continue
            kind = comparable_type(field.type)
            seen = first_seen.setdefault(field.name, (kind, footer.path))
            if seen[0] != kind:
                raise UserError(
                    f"the files of {shown} disagree on column {field.name!r}: it is {seen[0]} "
                    f"in {seen[1]} but {kind} in {footer.path}; rewrite one of them with the "
                    "other's type (or read them separately)"
                )
    column_sets = {tuple(sorted(f.schema.names)) for f in read if f.schema is not None}
    for name in required:
        lacking = next(
            (f for f in read if f.schema is not None and name not in f.schema.names), None
        )
        holding = next((f for f in read if f.schema is not None and name in f.schema.names), None)
        if lacking is not None and holding is not None:
            raise UserError(
                f"column {name!r} is in {holding.path} but missing from {lacking.path} (both "
                f"under {shown}); every file needs it"
            )
    return len(column_sets) > 1
