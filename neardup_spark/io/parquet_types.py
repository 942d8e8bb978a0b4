"""Parquet column types Spark cannot read, named by column for the message a user gets.

Spark 4.0 refuses a Parquet file holding a nanosecond timestamp, a time of day or a
half-precision float with ``[PARQUET_TYPE_ILLEGAL] Illegal Parquet type: INT64
(TIMESTAMP(NANOS,true))``, which names no column. When that happens, the footers of the local
input files are read here (pyarrow, on the driver) to say which columns hold such a type and
what to do about them (docs/operations/types-and-security.md).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

# Read as int64 nanoseconds instead of refused (Spark's own legacy setting).
NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"
# Footers read at most to find the columns (a corpus of thousands of files: the first ones
# tell, as Spark needs every file's columns to agree anyway).
MAX_FOOTERS = 20


def spark_cannot_read(arrow_type: pa.DataType) -> bool:
    """Types Spark 4.0 refuses in a Parquet file: timestamp[ns], time32/time64, float16.

    >>> spark_cannot_read(pa.timestamp("ns", tz="UTC")), spark_cannot_read(pa.timestamp("us"))
    (True, False)
    """
    if pa.types.is_timestamp(arrow_type):
        return bool(arrow_type.unit == "ns")
    return bool(pa.types.is_time(arrow_type) or pa.types.is_float16(arrow_type))


def _children(arrow_type: pa.DataType) -> list[tuple[str, pa.DataType]]:
    if pa.types.is_struct(arrow_type):
        return [(f.name, f.type) for f in arrow_type]
    if pa.types.is_map(arrow_type):
        return [("key", arrow_type.key_type), ("value", arrow_type.item_type)]
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [("element", arrow_type.value_type)]
    if pa.types.is_fixed_size_list(arrow_type):
        return [("element", arrow_type.value_type)]
    return []


def unreadable_columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    """``(column, type)`` of every field Spark cannot read, nested ones as ``a.b.element``."""
    found: list[tuple[str, pa.DataType]] = []
    pending = [(field.name, field.type) for field in schema]
    while pending:
        name, arrow_type = pending.pop(0)
        if spark_cannot_read(arrow_type):
            found.append((name, arrow_type))
        pending.extend((f"{name}.{child}", t) for child, t in _children(arrow_type))
    return found


def _local(path: str) -> str | None:
    local = path[len("file:") :] if path.startswith("file:") else path
    return local if local.startswith("/") and "://" not in local else None


def unreadable_columns_of_files(files: list[str]) -> list[tuple[str, pa.DataType]]:
    """:func:`unreadable_columns` of the first local files' footers (none for remote files)."""
    found: dict[str, pa.DataType] = {}
    for path in [p for p in map(_local, files) if p is not None][:MAX_FOOTERS]:
        try:
            schema = pq.read_schema(path)
        except Exception:  # a footer Spark's reader reports on its own
            continue
        for name, arrow_type in unreadable_columns(schema):
            found.setdefault(name, arrow_type)
    return list(found.items())


def illegal_type_message(shown: str, files: list[str], spark_error: str) -> str:
    """The message for Spark's PARQUET_TYPE_ILLEGAL: the columns and the ways out."""
    columns = unreadable_columns_of_files(files)
    if columns:
        listed = ", ".join(f"{name!r} ({arrow_type})" for name, arrow_type in columns)
        what = f"column(s) {listed} of {shown} have a type Spark cannot read"
    else:
        what = f"{shown} has a column type Spark cannot read ({spark_error})"
    return (
        f"{what}. Timestamps: write them in microseconds (pyarrow: pq.write_table(..., "
        f"coerce_timestamps='us')) or pass --set {NANOS_AS_LONG}=true to carry "
        "nanosecond timestamps as int64 nanoseconds; times of day and float16: cast them "
        "(to string or int64, float32)"
    )
