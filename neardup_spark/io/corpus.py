"""Reading the corpus and checking it: columns, types, ids, unreadable files.

Paths go through Hadoop's FileSystem API, so local paths, ``file://``, ``hdfs://`` and object
stores (with their connector on the classpath) all work the same way.
"""

from __future__ import annotations

import hashlib
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow.parquet as pq
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.columns import DOC_ID, TEXT
from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import hadoop_filesystem

log = logging.getLogger(__name__)

ID_TYPES = (T.StringType, T.LongType, T.IntegerType, T.ShortType, T.ByteType)
MAX_IDS_IN_MESSAGE = 5


def _read_parquet(spark: SparkSession, paths: list[str], shown: str) -> DataFrame:
    try:
        return spark.read.parquet(*paths)
    except AnalysisException as exc:
        text = str(exc)
        if "PATH_NOT_FOUND" in text or "Path does not exist" in text:
            raise UserError(f"input not found: {shown}") from None
        if "UNABLE_TO_INFER_SCHEMA" in text:
            raise UserError(f"no Parquet files found under {shown}") from None
        raise UserError(f"cannot read {shown} as Parquet: {text.splitlines()[0]}") from None
    except Exception as exc:  # a corrupt footer met while inferring the schema
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read {shown} as Parquet: {first}") from None


def _footer_problem(path: str) -> str | None:
    """Why a Parquet footer cannot be read (``None`` if it can, or if the path is not local)."""
    local = path[len("file:") :] if path.startswith("file:") else path
    if "://" in local or not local.startswith("/"):
        return None  # object stores and HDFS: left to Spark's own reader
    try:
        pq.read_metadata(local)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    return None


def unreadable_files(files: list[str]) -> list[tuple[str, str]]:
    """Local files whose Parquet footer cannot be read, with the reason.

    Footers are read on the driver (a few milliseconds each, threads for many files): no Spark
    job, so small runs do not pay for one.
    """
    with ThreadPoolExecutor(max_workers=8) as pool:
        problems = list(pool.map(_footer_problem, files))
    return sorted((f, why) for f, why in zip(files, problems, strict=True) if why is not None)


def list_data_files(spark: SparkSession, path: str) -> tuple[list[str], bool]:
    """The data files Spark would read under ``path`` (skipping ``_*`` and ``.*`` names, as
    Spark does): ``(files, path is a directory)``. A missing path is a :class:`UserError`."""
    fs, root = hadoop_filesystem(spark, path)
    if not fs.exists(root):
        raise UserError(f"input not found: {path}")
    if not fs.getFileStatus(root).isDirectory():
        return [str(fs.makeQualified(root).toString())], False
    files = []
    entries = fs.listFiles(root, True)
    while entries.hasNext():
        status = entries.next()
        relative = status.getPath().toString()[len(fs.makeQualified(root).toString()) :]
        if any(part.startswith(("_", ".")) for part in relative.split("/") if part):
            continue
        files.append(str(status.getPath().toString()))
    return sorted(files), True


def read_corpus(
    spark: SparkSession, path: str, skip_corrupt: bool = False
) -> tuple[DataFrame, list[dict[str, str]]]:
    """Read a Parquet file or directory: ``(DataFrame, skipped files)``.

    A missing path, a directory without Parquet files, or a file whose footer cannot be read is
    a :class:`UserError` naming it; with ``skip_corrupt`` unreadable files are left out instead
    and returned (path and reason) for the report.
    """
    files, is_dir = list_data_files(spark, path)
    if not files:
        raise UserError(f"no Parquet files found under {path}")
    bad = unreadable_files(files)
    if not bad:
        return _read_parquet(spark, [path], path), []
    if not skip_corrupt:
        listed = "; ".join(f"{p} ({why})" for p, why in bad[:MAX_IDS_IN_MESSAGE])
        raise UserError(
            f"{len(bad)} unreadable Parquet file(s) under {path}: {listed}. "
            "Fix or remove them, or pass --skip-corrupt to go on without them."
        )
    skipped = {p for p, _ in bad}
    good = [f for f in files if f not in skipped]
    if not good:
        raise UserError(f"every Parquet file under {path} is unreadable")
    log.warning("skipping %d unreadable Parquet file(s): %s", len(bad), ", ".join(sorted(skipped)))
    # basePath keeps partition columns (dir=value) discovered as if the whole path were read.
    reader = spark.read.option("basePath", path) if is_dir else spark.read
    try:
        df = reader.parquet(*good)
    except AnalysisException as exc:
        raise UserError(f"cannot read {path} as Parquet: {str(exc).splitlines()[0]}") from None
    return df, [{"path": p, "error": why} for p, why in bad]


def check_columns(df: DataFrame, id_col: str, text_col: str) -> None:
    """The id and text columns exist and have usable types; fails before any Spark job."""
    present = ", ".join(f"{f.name} ({f.dataType.simpleString()})" for f in df.schema.fields)
    for role, name in (("id", id_col), ("text", text_col)):
        if name not in df.columns:
            raise UserError(
                f"the {role} column {name!r} is not in the input; columns present: {present}. "
                f"Choose it with --{role}-col."
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


def check_ids(df: DataFrame, id_col: str) -> None:
    """No null and no repeated ids (one Spark job over the id column only, read in one task per
    core: ids are small, and each task of a scan has a fixed cost)."""
    cores = df.sparkSession.sparkContext.defaultParallelism
    bad = (
        df.select(id_col)
        .coalesce(max(1, cores))
        .groupBy(id_col)
        .count()
        .where(F.col(id_col).isNull() | (F.col("count") > 1))
        .orderBy(F.col(id_col).asc_nulls_first())
        .limit(MAX_IDS_IN_MESSAGE + 1)
        .collect()
    )
    if not bad:
        return
    nulls = [row["count"] for row in bad if row[id_col] is None]
    if nulls:
        raise UserError(
            f"{nulls[0]} rows have a null id in column {id_col!r}; every row needs an id"
        )
    shown = ", ".join(f"{row[id_col]!r} ({row['count']}x)" for row in bad[:MAX_IDS_IN_MESSAGE])
    more = " and more" if len(bad) > MAX_IDS_IN_MESSAGE else ""
    raise UserError(f"ids in column {id_col!r} are not unique: {shown}{more}")


def as_documents(df: DataFrame, id_col: str, text_col: str) -> DataFrame:
    """Input rows -> ``doc_id``, ``text`` (the stages' input)."""
    return df.select(F.col(id_col).alias(DOC_ID), F.col(text_col).alias(TEXT))


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def input_files(spark: SparkSession, path: str) -> list[dict[str, Any]]:
    """The input's data files: qualified path, size and content digest (SHA-256 of the bytes
    for local files; the file system's checksum, else size and modification time, elsewhere)."""
    files, _ = list_data_files(spark, path)
    out = []
    for name in files:
        fs, hpath = hadoop_filesystem(spark, name)
        status = fs.getFileStatus(hpath)
        size = int(status.getLen())
        if str(fs.getScheme()) == "file":
            digest = "sha256:" + sha256_file(str(hpath.toUri().getPath()))
        else:
            checksum = fs.getFileChecksum(hpath)
            digest = (
                f"{checksum.getAlgorithmName()}:{checksum.toString()}"
                if checksum is not None
                else f"mtime:{int(status.getModificationTime())}"
            )
        out.append({"path": name, "size": size, "digest": digest})
    return out


def check_paths_apart(names: dict[str, str]) -> None:
    """Refuse (:class:`UserError`) paths of which one is, or lies inside, another: e.g. an
    OUTPUT inside INPUT would be read as input by the next run. ``names``: role -> path."""
    trimmed = {k: v.rstrip("/") for k, v in names.items()}
    for a in names:
        for b in names:
            if a < b and (
                trimmed[a] == trimmed[b]
                or trimmed[a].startswith(trimmed[b] + "/")
                or trimmed[b].startswith(trimmed[a] + "/")
            ):
                raise UserError(f"the {a} and {b} paths must not overlap ({names[a]}, {names[b]})")
