"""Input formats: which one a corpus is in (given, or told by its file names) and how Spark
reads it. Outputs are always Parquet.

* ``parquet``: ``*.parquet`` (Spark's ``part-*.snappy.parquet`` too);
* ``json``: JSON lines, one object per line (``*.jsonl``, ``*.json``, ``*.ndjson``), plain or
  compressed (``.gz``, ``.bz2``, ``.zst``/``.zstd``, ...: the codec comes from the file name, as
  datatrove, Dolma and RedPajama write them). A malformed line is an input error (or, with
  ``--skip-corrupt``, left out and counted);
* ``orc``: ``*.orc``;
* ``csv``: ``*.csv`` with a header row, RFC 4180 quoting (``""`` inside quotes; texts may span
  lines), column types inferred (a numeric ``--prefer`` column stays numeric).
"""

from __future__ import annotations

import bz2
import csv
import gzip
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO

from pyspark.sql import DataFrame, DataFrameReader, SparkSession

from neardup_spark.errors import UserError
from neardup_spark.io.format_names import (
    COMPRESSION_SUFFIXES,
    INPUT_FORMATS,
    format_of,
)
from neardup_spark.io.paths import is_local_path, local_path
from neardup_spark.runtime.spark_compat import version_tuple
from neardup_spark.stages.names import column

ZSTD_SUFFIXES = (".zst", ".zstd")
# The first Spark that reads zstd-compressed text without a native Hadoop library (SPARK-52482).
ZSTD_TEXT_SPARK = (4, 1)
# The column Spark puts a malformed JSON line or CSV record into.
CORRUPT_RECORD = "_corrupt_record"
# Files named in a message at most.
MAX_FILES_IN_MESSAGE = 5


def guess_format(files: list[str], shown: str) -> str:
    """The one format ``files`` (the input's data files) are in, from their names; a
    :class:`UserError` when a name says none or two formats are mixed."""
    found: dict[str, list[str]] = {}
    for name in files:
        found.setdefault(format_of(name) or "?", []).append(name)
    choose = f"pass --input-format {'|'.join(INPUT_FORMATS)}"
    if "?" in found:
        named = ", ".join(found["?"][:MAX_FILES_IN_MESSAGE])
        raise UserError(
            f"cannot tell the format of {shown} from its file names ({named}); {choose}"
        )
    if len(found) > 1:
        kinds = "; ".join(f"{fmt}: {names[0]}" for fmt, names in sorted(found.items()))
        raise UserError(f"{shown} mixes file formats ({kinds}); read one format at a time")
    return next(iter(found)) if found else "parquet"


def check_format(name: str | None) -> str | None:
    if name is not None and name not in INPUT_FORMATS:
        raise UserError(f"--input-format must be one of {', '.join(INPUT_FORMATS)}, got {name!r}")
    return name


def zstd_needs_newer_spark(spark: SparkSession, files: Iterable[str]) -> str | None:
    """The first zstd-compressed file when this Spark cannot read it (None otherwise).

    Spark before 4.1 reads compressed text through Hadoop's codecs, whose zstd codec needs a
    native library the pip-installed Spark lacks; Spark 4.1 brought its own (SPARK-52482)."""
    first = next((f for f in files if f.lower().endswith(ZSTD_SUFFIXES)), None)
    if first is None:
        return None
    return None if version_tuple(spark.version) >= ZSTD_TEXT_SPARK else first


@dataclass(frozen=True)
class TextFormatRead:
    """How one non-Parquet format is read: the reader's options, and whether malformed
    records show up in :data:`CORRUPT_RECORD`."""

    options: dict[str, str]
    flags_malformed: bool


READS = {
    "json": TextFormatRead(
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD}, flags_malformed=True
    ),
    "csv": TextFormatRead(
        {
            "header": "true",
            "inferSchema": "true",
            "multiLine": "true",
            "escape": '"',
            "mode": "PERMISSIVE",
            "columnNameOfCorruptRecord": CORRUPT_RECORD,
        },
        flags_malformed=True,
    ),
    "orc": TextFormatRead({}, flags_malformed=False),
}


_HEADER_CODECS = (".gz", ".gzip", ".bz2")  # what csv_header decompresses (the standard library)


def _open_text(name: str, suffix: str | None) -> IO[str]:
    if suffix in (".gz", ".gzip"):
        return gzip.open(name, "rt", encoding="utf-8", errors="replace", newline="")
    if suffix == ".bz2":
        return bz2.open(name, "rt", encoding="utf-8", errors="replace", newline="")
    return open(name, encoding="utf-8", errors="replace", newline="")


def csv_header(path: str) -> list[str] | None:
    """The header row of a local CSV file (plain, gzip or bzip2), as Spark's reader splits it;
    None when it cannot be told here (another codec, an empty or unreadable file: Spark reports
    those)."""
    name = local_path(path)
    suffix = next((s for s in _HEADER_CODECS if name.lower().endswith(s)), None)
    if suffix is None and name.lower().endswith(COMPRESSION_SUFFIXES):
        return None
    try:
        with _open_text(name, suffix) as handle:
            return next(csv.reader(handle), None)
    except (OSError, EOFError, csv.Error):
        return None


def check_csv_headers(files: list[str], shown: str) -> None:
    """Refuse (:class:`UserError`) local CSV files whose header rows differ: Spark names the
    columns by the first file's header and reads every other file by position, so a file with
    its columns in another order would give its texts as ids (and its ids as texts) without a
    word."""
    headers = [(f, csv_header(f)) for f in files if is_local_path(f)]
    known = [(f, h) for f, h in headers if h is not None]
    if not known:
        return
    first_file, first = known[0]
    other = next(((f, h) for f, h in known[1:] if h != first), None)
    if other is not None:
        raise UserError(
            f"the CSV files under {shown} have different header rows: {first_file} has "
            f"{first}, {other[0]} has {other[1]}; Spark would read the second by the first's "
            "column positions. Give every file the same columns in the same order, or read "
            "them separately"
        )


def whole_file_reader(reader: DataFrameReader) -> DataFrameReader:
    """``reader`` failing on a file it cannot read to its end, whatever the session sets: with
    ``ignoreCorruptFiles`` Spark keeps the rows before the point it stopped at, without a word
    (:mod:`~neardup_spark.io.whole_files` finds such files first, to skip them whole)."""
    return reader.option("ignoreCorruptFiles", "false")


def format_reader(spark: SparkSession, fmt: str) -> DataFrameReader:
    """A reader of ``fmt`` (not Parquet) with its options (:func:`whole_file_reader`)."""
    return whole_file_reader(spark.read.format(fmt).options(**READS[fmt].options))


def without_malformed(df: DataFrame, skip: bool, shown: str) -> tuple[DataFrame, int]:
    """``df`` without the records Spark could not parse (``_corrupt_record`` set), and their
    number; a :class:`UserError` when there are some and ``skip`` is false. One job, only when
    the inferred schema has the column (Spark adds it only when a record was malformed)."""
    if CORRUPT_RECORD not in df.columns:
        return df, 0
    from pyspark.sql import functions as F

    others = [c for c in df.columns if c != CORRUPT_RECORD]
    if not others:
        raise UserError(f"no record of {shown} could be parsed: is it really JSON lines / CSV?")
    # Spark refuses a query on raw JSON/CSV files that reads only the corrupt-record column:
    # this one reads another one too (its unused maximum).
    found = (
        df.where(F.col(CORRUPT_RECORD).isNotNull())
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.min(CORRUPT_RECORD).alias("first"),
            F.max(column(others[0]).isNull()).alias("read_too"),
        )
        .first()
    )
    n_bad = int(found["n"]) if found else 0
    if n_bad and not skip:
        sample = str(found["first"] if found else "")[:80]
        raise UserError(
            f"{n_bad} malformed record(s) in {shown} (the first: {sample!r}); fix them, or pass "
            "--skip-corrupt to leave them out (counted in report.json)"
        )
    return df.where(F.col(CORRUPT_RECORD).isNull()).drop(CORRUPT_RECORD), n_bad
