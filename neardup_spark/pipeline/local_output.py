"""``deduplicated/`` copied by this process, in local mode.

A run that read its input here (:mod:`.in_process`) and found its clusters here
(:mod:`.driver_pairs`) knows which rows ``deduplicated/`` leaves out without a Spark job; what
writing it as a Spark job costs on top of the copy is the JVM's Parquet decoding and encoding
of every text (100,000 pages: ~2.3 s alongside the other outputs, against ~1.2 s with PyArrow
on one core). So when Spark would write back exactly the files' own types, this process copies
the input's row groups less the removed rows with PyArrow, one thread per core. That is when
every column has a type Spark reads and writes unchanged (strings, binary, booleans, signed
integers, floats, dates) and the session's schema of the input is the files' schema (no
partition column from a directory name, no column a file lacks), and Spark's Parquet codec is
one PyArrow writes alike. Anything else, a cluster or a remote Spark Connect server, is written
by Spark.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema

from neardup_spark.batch.input_reads import read_row_group
from neardup_spark.io.filesystem import pyarrow_filesystem
from neardup_spark.io.output import OutputDir
from neardup_spark.pipeline.in_process import LocalInput, in_process_threads, map_in_threads

# Spark's spark.sql.parquet.compression.codec -> PyArrow's compression, for the codecs both
# write as the same Parquet codec.
_CODECS = {
    "snappy": "snappy",
    "gzip": "gzip",
    "zstd": "zstd",
    "uncompressed": "none",
    "none": "none",
}
_WIDE_TYPES = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}


def _copied_type(data_type: pa.DataType) -> bool:
    """A type Spark reads from Parquet and writes back as the same Parquet type."""
    return (
        pa.types.is_string(data_type)
        or pa.types.is_binary(data_type)
        or pa.types.is_boolean(data_type)
        or pa.types.is_signed_integer(data_type)
        or pa.types.is_floating(data_type)
        or pa.types.is_date32(data_type)
    )


def _plain(schema: pa.Schema) -> pa.Schema:
    """``schema`` as Spark writes it: every field nullable, wide strings and binaries narrow,
    no metadata."""
    return pa.schema([pa.field(f.name, _WIDE_TYPES.get(f.type, f.type), True) for f in schema])


@dataclass(frozen=True)
class RowsCopy:
    """The input files whose rows ``deduplicated/`` copies, in the output's schema."""

    paths: list[str]
    schema: pa.Schema
    compression: str
    threads: int


def rows_copy(df: DataFrame, local: LocalInput | None, id_col: str) -> RowsCopy | None:
    """How this process may write ``deduplicated/`` from ``df``'s files (module docstring;
    ``id_col`` as the files spell it), or None when Spark writes it."""
    if local is None or id_col not in df.columns:
        return None
    spark = df.sparkSession
    threads = in_process_threads(spark)
    codec = str(spark.conf.get("spark.sql.parquet.compression.codec", "snappy")).lower()
    if not threads or codec not in _CODECS:
        return None
    try:
        expected = _plain(to_arrow_schema(df.schema))
    except (TypeError, NotImplementedError):  # a type Arrow has no twin for
        return None
    if not all(_copied_type(field.type) for field in expected):
        return None
    for path in local.paths:
        if not _plain(pq.read_schema(path)).equals(expected):
            return None
    return RowsCopy(local.paths, expected, _CODECS[codec], threads)


def write_rows_without(
    copy: RowsCopy, id_col: str, removed: pa.Array, staged: OutputDir, name: str
) -> None:
    """The input's rows whose ``id_col`` is not in ``removed``, written under ``staged/name``
    (what a killed attempt left replaced), row group by row group, ``copy.threads`` files at
    a time."""
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
                writer.write_table(kept.cast(copy.schema))

    pieces = row_group_pieces(copy.paths, copy.threads)
    map_in_threads(write, list(enumerate(pieces)), copy.threads)


def row_group_pieces(paths: list[str], threads: int) -> list[tuple[str, list[int]]]:
    """The files' row groups in input order, cut into at least ``threads`` pieces when they
    have that many: a file each, or runs of a file's row groups when the files are fewer."""
    counts = []
    for path in paths:
        with pq.ParquetFile(path) as parquet:
            counts.append(parquet.metadata.num_row_groups)
    if len(paths) >= threads:
        return [(path, list(range(n))) for path, n in zip(paths, counts, strict=True)]
    step = max(1, math.ceil(sum(counts) / max(1, threads)))
    pieces = []
    for path, n in zip(paths, counts, strict=True):
        pieces += [(path, list(range(start, min(start + step, n)))) for start in range(0, n, step)]
    return pieces or [(paths[0], [])]
