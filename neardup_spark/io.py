"""Reading the corpus, checking it, and writing outputs: the only module that touches storage.

Paths go through Hadoop's FileSystem API, so local paths, ``file://``, ``hdfs://`` and object
stores (with their connector on the classpath) all work the same way.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.columns import DOC_ID, TEXT
from neardup_spark.errors import UserError

log = logging.getLogger(__name__)

SUCCESS_MARKER = "_SUCCESS"
REPORT_FILE = "report.json"
CHECKPOINT_DIR = "_checkpoints"
STAGING_DIR = "_staging"
MANIFEST_FILE = "manifest.json"
# What a commit moves from the staging directory into OUTPUT, in this order.
COMMITTED_ENTRIES = ("clusters", "pairs", "deduplicated", "changed_clusters", REPORT_FILE)
# What a run of ours may leave in OUTPUT; anything else there means the path is someone else's.
OUTPUT_ENTRIES = frozenset(
    {
        "clusters",
        "pairs",
        "deduplicated",
        REPORT_FILE,
        SUCCESS_MARKER,
        CHECKPOINT_DIR,
        STAGING_DIR,
        MANIFEST_FILE,
        "report.html",
        "changed_clusters",
    }
)
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
    import pyarrow.parquet as pq

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
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=8) as pool:
        problems = list(pool.map(_footer_problem, files))
    return sorted((f, why) for f, why in zip(files, problems, strict=True) if why is not None)


def list_data_files(spark: SparkSession, path: str) -> tuple[list[str], bool]:
    """The data files Spark would read under ``path`` (skipping ``_*`` and ``.*`` names, as
    Spark does): ``(files, path is a directory)``. A missing path is a :class:`UserError`."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    root = jvm.org.apache.hadoop.fs.Path(path)
    fs = root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
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


class OutputDir:
    """An output directory on any Hadoop-supported file system."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.path = path
        self._spark = spark
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self._root = jvm.org.apache.hadoop.fs.Path(path)
        self._fs = self._root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def child(self, name: str) -> str:
        return self.path.rstrip("/") + "/" + name

    def _path(self, name: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(self.child(name))

    def exists(self, name: str | None = None) -> bool:
        return bool(self._fs.exists(self._root if name is None else self._path(name)))

    def delete(self, name: str | None = None) -> None:
        self._fs.delete(self._root if name is None else self._path(name), True)

    def entries(self) -> list[str]:
        if not self.exists():
            return []
        return [status.getPath().getName() for status in self._fs.listStatus(self._root)]

    def prepare(self, overwrite: bool) -> None:
        """Check OUTPUT may be written: refuse a finished run unless ``overwrite``, refuse a
        directory holding files a run of ours would not write, and clear a stale staging area.

        Nothing of a previous run is deleted here: new outputs are staged and replace the old
        ones only at :meth:`commit`, so a run killed at any point leaves them as they were.
        """
        if self.exists() and not self._fs.getFileStatus(self._root).isDirectory():
            raise UserError(f"output {self.path} exists and is a file")
        foreign = sorted(set(self.entries()) - OUTPUT_ENTRIES)
        if foreign:
            raise UserError(
                f"output {self.path} exists and holds files this job did not write "
                f"({', '.join(foreign[:5])}); choose an empty or new directory"
            )
        if self.exists(SUCCESS_MARKER) and not overwrite:
            raise UserError(
                f"output {self.path} already holds a finished run; pass --overwrite to replace it"
            )
        for stale in (STAGING_DIR, CHECKPOINT_DIR):
            if self.exists(stale):
                log.info("removing %s left by an unfinished run", self.child(stale))
                self.delete(stale)

    def staging(self, run_id: str) -> OutputDir:
        """The directory a run writes into before :meth:`commit`."""
        return OutputDir(self._spark, self.child(f"{STAGING_DIR}/{run_id}"))

    def commit(self, staged: OutputDir, manifest: dict[str, Any]) -> None:
        """Replace OUTPUT's contents by the staged run: ``_SUCCESS`` goes first and comes back
        last, so a reader (or a rerun) never takes a half-replaced OUTPUT for a finished one."""
        if self.exists(SUCCESS_MARKER):
            self.delete(SUCCESS_MARKER)
        for name in (*COMMITTED_ENTRIES, MANIFEST_FILE, "report.html"):
            if self.exists(name):
                self.delete(name)
        for name in COMMITTED_ENTRIES:
            if staged.exists(name):
                self._fs.rename(staged._path(name), self._path(name))
        self.write_json(MANIFEST_FILE, manifest)
        self.mark_success()
        self.delete(STAGING_DIR)

    def write_text(self, name: str, text: str) -> None:
        stream = self._fs.create(self._path(name), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def file_listing(self, paths: list[str]) -> list[dict[str, Any]]:
        """Size and modification time of each path (for manifests)."""
        jvm = self._jvm
        out = []
        for path in paths:
            status = self._fs.getFileStatus(jvm.org.apache.hadoop.fs.Path(path))
            out.append(
                {
                    "path": path,
                    "bytes": int(status.getLen()),
                    "mtime": int(status.getModificationTime()),
                }
            )
        return out

    def write_json(self, name: str, data: dict[str, Any]) -> None:
        self.write_text(name, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")

    def mark_success(self) -> None:
        self.write_text(SUCCESS_MARKER, "")
