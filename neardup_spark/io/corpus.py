"""Reading the corpus and checking it: columns, types, ids, unreadable files.

A corpus is a path (a file, a directory or a glob) in one of the formats of
:mod:`neardup_spark.io.formats`, or a table of the session's catalog (:class:`CorpusSource`).
The driver lists and hashes the input through :mod:`neardup_spark.io.filesystem` (the OS for
local paths; Hadoop's file systems in a classic session, PyArrow's over Spark Connect), so local
paths, ``file:``, ``hdfs://`` and object stores all work the same way.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.columns import DOC_ID, TEXT
from neardup_spark.config import prefer_hint
from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import LocalStorage, basename, glob_status, visible_files
from neardup_spark.io.footer_rows import with_footer_rows
from neardup_spark.io.format_names import FORMAT_NAMES
from neardup_spark.io.formats import (
    check_csv_headers,
    check_format,
    format_reader,
    guess_format,
    whole_file_reader,
    without_malformed,
    zstd_needs_newer_spark,
)
from neardup_spark.io.globs import has_glob
from neardup_spark.io.parquet_types import illegal_type_message
from neardup_spark.io.paths import for_hadoop, from_spark_uri, is_local_path, local_path
from neardup_spark.io.schemas import Footer, check_schemas, read_footers
from neardup_spark.io.storage import storage_for
from neardup_spark.io.whole_files import (
    check_text_files,
    footer_check,
    refuse_or_skip,
    spark_error_text,
)
from neardup_spark.runtime.engine import default_parallelism
from neardup_spark.stages.names import as_given_hint, column

log = logging.getLogger(__name__)

ID_TYPES = (T.StringType, T.LongType, T.IntegerType, T.ShortType, T.ByteType)
MAX_IDS_IN_MESSAGE = 5
# Column types a keep policy (--prefer) cannot order by.
UNORDERED_TYPES = (T.ArrayType, T.MapType, T.StructType, T.BinaryType)


@dataclass(frozen=True)
class CorpusSource:
    """Where the corpus is: a ``path`` (file, directory or glob) in ``format`` (``None``: told
    by the file names), or a ``table`` of the session's catalog."""

    path: str | None = None
    table: str | None = None
    format: str | None = None

    def __post_init__(self) -> None:
        if self.path is None and self.table is None:
            raise UserError("give the input: a path (INPUT) or --input-table NAME")
        if self.path is not None and self.table is not None:
            raise UserError("give the input as a path (INPUT) or as --input-table NAME, not both")
        if self.table is not None and self.format is not None:
            raise UserError("--input-format applies to an input path, not to --input-table")
        check_format(self.format)

    @classmethod
    def of(cls, source: str | CorpusSource) -> CorpusSource:
        return source if isinstance(source, CorpusSource) else cls(path=source)

    @property
    def shown(self) -> str:
        """The source as messages and reports name it."""
        return self.path if self.path is not None else f"table {self.table}"


def _read_parquet(
    spark: SparkSession,
    paths: list[str],
    shown: str,
    merge: bool,
    files: list[str] | None = None,
) -> DataFrame:
    try:
        reader = whole_file_reader(spark.read)
        reader = reader.option("mergeSchema", "true") if merge else reader
        return reader.parquet(*paths)
    except AnalysisException as exc:
        text = str(exc)
        if "PATH_NOT_FOUND" in text or "Path does not exist" in text:
            raise UserError(f"input not found: {shown}") from None
        if "UNABLE_TO_INFER_SCHEMA" in text:
            raise UserError(f"no Parquet files found under {shown}") from None
        if "PARQUET_TYPE_ILLEGAL" in text:  # timestamp[ns], time, float16: name the columns
            first = text.splitlines()[0]
            raise UserError(illegal_type_message(shown, files or paths, first)) from None
        raise UserError(f"cannot read {shown} as Parquet: {spark_error_text(exc)}") from None
    except Exception as exc:  # a corrupt footer met while inferring the schema
        raise UserError(f"cannot read {shown} as Parquet: {spark_error_text(exc)}") from None


def list_data_files(spark: SparkSession | None, path: str) -> tuple[list[str], bool]:
    """The data files Spark would read under ``path`` (skipping ``_*`` and ``.*`` names, as
    Spark does; a glob's matches, directories read whole): ``(files, path is a directory)``;
    listed through ``spark``'s file systems, or PyArrow's without a session.
    A missing path, or a glob matching nothing, is a :class:`UserError`."""
    storage = storage_for(spark, path)
    if has_glob(path):
        matches = glob_status(storage, path)
        if not matches:
            raise UserError(f"input not found: nothing matches {path}")
        files = sorted({f for status in matches for f in visible_files(storage, status)})
        return refuse_colon_names(files), False
    status = storage.status(path)
    if status is None:
        raise UserError(f"input not found: {path}")
    return refuse_colon_names(visible_files(storage, status)), status.is_dir


def refuse_colon_names(files: list[str]) -> list[str]:
    """``files``, unless a local file's own name holds a ``:``: Hadoop's local file system
    cannot open it (the name of its checksum file, ``.NAME.crc``, parses as a URI: "Relative
    path in absolute URI"); directories may hold one."""
    for name in files:
        if is_local_path(name) and ":" in basename(name):
            raise UserError(
                f"cannot read {name}: Hadoop cannot open a local file whose name holds ':' "
                "(directories may); rename the file"
            )
    return files


@dataclass(frozen=True)
class ListedInput:
    """An input as listed once per run: its data files (as Hadoop names them), whether its
    path is a directory, their format and, for local Parquet and ORC files, their footers
    (read once: :func:`~neardup_spark.io.schemas.read_footers`). A catalog table has none."""

    source: CorpusSource
    files: list[str] = field(default_factory=list)
    is_dir: bool = False
    format: str | None = None
    footers: list[Footer] = field(default_factory=list)

    @property
    def path(self) -> str:
        return for_hadoop(str(self.source.path))


def list_input(spark: SparkSession | None, source: str | CorpusSource) -> ListedInput:
    """List ``source`` and read its local footers, once for the run (:class:`ListedInput`).
    A missing path or a directory without data files is a :class:`UserError`."""
    source = CorpusSource.of(source)
    if source.table is not None:
        return ListedInput(source)
    path = for_hadoop(str(source.path))
    files, is_dir = list_data_files(spark, path)
    if not files:
        raise UserError(f"no data files found under {path}")
    fmt = source.format or guess_format(files, path)
    footers = read_footers(files, fmt) if fmt in ("parquet", "orc") else []
    return ListedInput(source, files, is_dir, fmt, footers)


def read_corpus(
    spark: SparkSession,
    source: str | CorpusSource,
    skip_corrupt: bool = False,
    columns: tuple[str, ...] = (),
    listed: ListedInput | None = None,
) -> tuple[DataFrame, list[dict[str, Any]]]:
    """Read the corpus (a path, or a :class:`CorpusSource`): ``(DataFrame, skipped)``;
    ``listed``: its listing and footers when the run has them (:func:`list_input`), else
    listed here.

    A missing path, a directory without data files, a file whose footer cannot be read, a
    malformed JSON or CSV record are :class:`UserError`\\ s naming them; with ``skip_corrupt``
    they are left out instead and returned (path and reason, records) for the report. Parquet
    and ORC files whose schemas disagree are refused (:mod:`~neardup_spark.io.schemas`;
    ``columns``: those every file must hold, e.g. the id and text columns).
    """
    listed = listed or list_input(spark, source)
    if listed.source.table is not None:
        return read_table(spark, listed.source.table), []
    if listed.format != "parquet":
        return read_other_format(spark, listed, skip_corrupt, columns)
    return read_parquet_files(spark, listed, skip_corrupt, columns)


def read_table(spark: SparkSession, name: str) -> DataFrame:
    """A table (or view) of the session's catalog."""
    try:
        return spark.table(name)
    except AnalysisException as exc:
        raise UserError(f"cannot read table {name}: {str(exc).splitlines()[0]}") from None


def read_other_format(
    spark: SparkSession,
    listed: ListedInput,
    skip_corrupt: bool,
    columns: tuple[str, ...] = (),
) -> tuple[DataFrame, list[dict[str, Any]]]:
    """Read JSON lines, ORC or CSV (:mod:`neardup_spark.io.formats`) with the checks Parquet
    gets: files that cannot be read whole (ORC footers; JSON and CSV files checked to their end
    by :mod:`~neardup_spark.io.whole_files`), refused or skipped whole, schemas that disagree
    (ORC footers; JSON and CSV files while Spark infers their schema, which reads them all and
    widens types) and malformed records."""
    path, fmt, files, footers = listed.path, str(listed.format), listed.files, listed.footers
    zstd = zstd_needs_newer_spark(spark, files)
    if zstd is not None:
        raise UserError(
            f"{zstd} is zstd-compressed, which Spark {spark.version} cannot read (Spark 4.1 and "
            "newer can); decompress it (zstd -d) or recompress it with gzip"
        )
    if fmt == "csv":
        check_csv_headers(files, path)
    checks = (
        [footer_check(f, fmt) for f in footers]
        if fmt == "orc"
        else check_text_files(spark, files, fmt)
    )
    skipped = refuse_or_skip(checks, path, fmt, skip_corrupt)
    left_out = {s["path"] for s in skipped}
    good = [f for f in files if f not in left_out] if left_out else [path]
    if not good:
        raise UserError(f"every {FORMAT_NAMES[fmt]} file under {path} is unreadable")
    merge = check_schemas([f for f in footers if f.problem is None], path, columns)
    try:
        reader = format_reader(spark, fmt)
        df = (reader.option("mergeSchema", "true") if merge else reader).load(good)
    except Exception as exc:  # a file Spark cannot read, met while inferring the schema
        raise UserError(
            f"cannot read {path} as {FORMAT_NAMES[fmt]}: {spark_error_text(exc)}. Fix or remove "
            "the file, or pass --skip-corrupt to go on without it."
        ) from None
    df, n_malformed = without_malformed(with_footer_rows(df, footers), skip_corrupt, path)
    if n_malformed:
        skipped.append(
            {
                "path": path,
                "reason": "malformed records",
                "error": "malformed records",
                "records": n_malformed,
            }
        )
    return df, skipped


def read_parquet_files(
    spark: SparkSession,
    listed: ListedInput,
    skip_corrupt: bool,
    columns: tuple[str, ...] = (),
) -> tuple[DataFrame, list[dict[str, Any]]]:
    """Read Parquet ``listed.files`` (all of its path), checking every footer first: files cut
    short or unreadable (refused, or skipped whole), schemas that disagree
    (:func:`~neardup_spark.io.schemas.check_schemas`)."""
    path, files, footers = listed.path, listed.files, listed.footers
    skipped = refuse_or_skip(
        [footer_check(f, "parquet") for f in footers], path, "parquet", skip_corrupt
    )
    merge = check_schemas([f for f in footers if f.problem is None], path, columns)
    if not skipped:
        return with_footer_rows(_read_parquet(spark, [path], path, merge, files), footers), []
    left_out = {s["path"] for s in skipped}
    good = [f for f in files if f not in left_out]
    if not good:
        raise UserError(f"every Parquet file under {path} is unreadable")
    # basePath keeps partition columns (dir=value) discovered as if the whole path were read.
    reader = spark.read.option("basePath", path) if listed.is_dir else spark.read
    reader = whole_file_reader(reader)
    reader = reader.option("mergeSchema", "true") if merge else reader
    try:
        df = reader.parquet(*good)
    except AnalysisException as exc:
        if "PARQUET_TYPE_ILLEGAL" in str(exc):
            first = str(exc).splitlines()[0]
            raise UserError(illegal_type_message(path, good, first)) from None
        raise UserError(f"cannot read {path} as Parquet: {spark_error_text(exc)}") from None
    return with_footer_rows(df, footers), skipped


def check_columns(df: DataFrame, id_col: str, text_col: str) -> None:
    """The id and text columns exist and have usable types; fails before any Spark job."""
    present = ", ".join(f"{f.name} ({f.dataType.simpleString()})" for f in df.schema.fields)
    for role, name in (("id", id_col), ("text", text_col)):
        if name not in df.columns:
            raise UserError(
                f"the {role} column {name!r} is not in the input; columns present: {present}. "
                f"Choose it with --{role}-col{as_given_hint(name, df.columns, f'--{role}-col')}."
            )
    id_type = df.schema[id_col].dataType
    if not isinstance(id_type, ID_TYPES):
        raise UserError(
            f"the id column {id_col!r} has type {id_type.simpleString()}; "
            "it must be a string or an integer"
        )
    text_type = df.schema[text_col].dataType
    if not isinstance(text_type, T.StringType | T.BinaryType):
        raise UserError(
            f"the text column {text_col!r} has type {text_type.simpleString()}; it must be a "
            "string (or binary, decoded as UTF-8)"
        )


def check_duplicates_column(columns: list[str], name: str) -> None:
    """``deduplicated/``'s ``duplicates_column`` (``name``; "" for none) is not an input column
    (compared as Spark does by default, ignoring case): a clash is refused, not overwritten."""
    clash = [c for c in columns if name and c.lower() == name.lower()]
    if clash:
        raise UserError(
            f"the input has a column {clash[0]!r}, the name deduplicated/ gives its count of "
            f"removed documents (setting duplicates_column={name!r}): choose another with "
            '--set duplicates_column=NAME, or --set duplicates_column="" to leave it out'
        )


def check_ids(df: DataFrame, id_col: str) -> None:
    """No null and no repeated ids (one Spark job over the id column only, read in one task per
    core: ids are small, and each task of a scan has a fixed cost)."""
    cores = default_parallelism(df.sparkSession)
    bad = (
        df.select(column(id_col).alias(DOC_ID))
        .coalesce(max(1, cores))
        .groupBy(DOC_ID)
        .count()
        .where(F.col(DOC_ID).isNull() | (F.col("count") > 1))
        .orderBy(F.col(DOC_ID).asc_nulls_first())
        .limit(MAX_IDS_IN_MESSAGE + 1)
        .collect()
    )
    refuse_bad_ids([(row[DOC_ID], row["count"]) for row in bad], id_col)


def check_id_values(ids: pa.Array | pa.ChunkedArray, id_col: str) -> None:
    """:func:`check_ids` over ids this process holds (the same errors, the same ids named)."""
    if ids.null_count:
        refuse_bad_ids([(None, ids.null_count)], id_col)
    counts = pc.value_counts(ids)
    repeats = counts.field("counts").to_numpy() > 1
    found = pa.table(
        {"id": counts.field("values").filter(repeats), "n": counts.field("counts").filter(repeats)}
    )
    found = found.sort_by([("id", "ascending")]).slice(0, MAX_IDS_IN_MESSAGE + 1)
    refuse_bad_ids(list(zip(*found.to_pydict().values(), strict=True)), id_col)


def refuse_bad_ids(bad: list[tuple[Any, int]], id_col: str) -> None:
    """The :class:`UserError` for ``bad`` ids (``(id, count)``: null ids first, then repeated
    ids in order, at most :data:`MAX_IDS_IN_MESSAGE` + 1 of them); nothing when empty."""
    if not bad:
        return
    nulls = [count for value, count in bad if value is None]
    if nulls:
        raise UserError(
            f"{nulls[0]} rows have a null id in column {id_col!r}; every row needs an id"
        )
    shown = ", ".join(f"{value!r} ({count}x)" for value, count in bad[:MAX_IDS_IN_MESSAGE])
    more = " and more" if len(bad) > MAX_IDS_IN_MESSAGE else ""
    raise UserError(f"ids in column {id_col!r} are not unique: {shown}{more}")


def preference_table(
    df: DataFrame, id_col: str, preference: tuple[tuple[str, bool], ...]
) -> tuple[DataFrame, list[tuple[str, bool]]]:
    """Input rows -> ``doc_id`` and the keep policy's columns (renamed ``prefer_0``, ...), and
    the keys as named there; a missing or unorderable column is a :class:`UserError`."""
    present = ", ".join(f"{f.name} ({f.dataType.simpleString()})" for f in df.schema.fields)
    for name, _ in preference:
        if name not in df.columns:
            raise UserError(
                f"--prefer: no column {name!r} in the input; columns present: {present}"
                f"{prefer_hint(name, df.columns)}"
            )
        if isinstance(df.schema[name].dataType, UNORDERED_TYPES):
            raise UserError(
                f"--prefer: column {name!r} has type {df.schema[name].dataType.simpleString()}; "
                "choose numbers, strings, dates, timestamps or booleans"
            )
    keys = [(f"prefer_{i}", desc) for i, (_, desc) in enumerate(preference)]
    named = zip(preference, keys, strict=True)
    columns = [column(name).alias(key) for (name, _), (key, _) in named]
    return df.select(column(id_col).alias(DOC_ID), *columns), keys


def as_documents(df: DataFrame, id_col: str, text_col: str) -> DataFrame:
    """Input rows -> ``doc_id``, ``text`` (the stages' input)."""
    return df.select(column(id_col).alias(DOC_ID), column(text_col).alias(TEXT))


def files_read(df: DataFrame) -> list[str]:
    """The files ``df`` reads, as paths Hadoop opens: ``inputFiles()`` gives percent-encoded
    URIs (``my%20corpus``), which Hadoop's ``Path`` would take literally."""
    return [from_spark_uri(name) for name in df.inputFiles()]


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# Threads hashing local input files (hashlib releases the GIL): a 1.6 GB corpus of 50 files
# hashed in 1.3 s on one core here, 0.5 s on four threads.
HASH_THREADS = 4


def input_files(spark: SparkSession, files: list[str]) -> list[dict[str, Any]]:
    """The input's data ``files`` (as listed once, :func:`list_input`): qualified path, size
    and content digest (SHA-256 of the bytes for local files, hashed :data:`HASH_THREADS` at a
    time; the file system's checksum, else size and modification time, elsewhere)."""
    out: list[dict[str, Any]] = []
    local: dict[int, str] = {}  # position in out -> local path to hash
    for name in files:
        storage = storage_for(spark, name)
        status = storage.status(name)
        if status is None:
            raise UserError(f"input file {name} disappeared while it was listed")
        digest = ""
        if isinstance(storage, LocalStorage):
            local[len(out)] = local_path(name)
        else:
            digest = storage.checksum(name) or f"mtime:{status.mtime_ms}"
        out.append({"path": name, "size": status.size, "digest": digest})
    with ThreadPoolExecutor(max_workers=HASH_THREADS) as pool:
        for position, digest in zip(local, pool.map(sha256_file, local.values()), strict=True):
            out[position]["digest"] = "sha256:" + digest
    return out


def comparable_path(path: str) -> str:
    """``path`` in a form two paths can be compared in: local paths (plain or ``file:``)
    absolute, no trailing ``/``; URIs as given."""
    if path.startswith("file:"):
        path = path[len("file:") :]
        path = "/" + path.lstrip("/") if path.startswith("//") else path
    if "://" not in path:
        path = os.path.abspath(os.path.expanduser(path))
    return path.rstrip("/") or "/"


def _may_read_under(pattern: str, path: str) -> bool:
    """A run reading ``pattern`` (a path or a glob; a matched directory is read whole) may read
    a file at or under ``path``."""
    wanted, given = comparable_path(pattern).split("/"), comparable_path(path).split("/")
    if given == [""]:  # path is "/": everything is under it
        return True
    return all(fnmatch.fnmatchcase(g, w) for w, g in zip(wanted, given, strict=False))


def check_paths_apart(names: dict[str, str]) -> None:
    """Refuse (:class:`UserError`) paths of which one is, or lies inside, another (globs
    included: what they may match): e.g. an OUTPUT inside INPUT would be read as input by the
    next run, an INPUT inside OUTPUT deleted by the commit. ``names``: role -> path."""
    for a in names:
        for b in names:
            if a < b and (
                _may_read_under(names[a], names[b]) or _may_read_under(names[b], names[a])
            ):
                raise UserError(f"the {a} and {b} paths must not overlap ({names[a]}, {names[b]})")
