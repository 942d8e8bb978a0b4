"""The ingest as a Spark job: WARC/WET files -> the Parquet corpus ``neardup dedupe`` reads.

``neardup ingest WARC_PATHS... OUTPUT`` (or ``spark-submit jobs/ingest_warc.py``) writes the
corpus itself at OUTPUT::

    OUTPUT/part-*.parquet  one row per document: the dedupe job's input
    OUTPUT/_skipped/       Parquet, one row per record that is not a document, with the reason
    OUTPUT/_summary.json   counts: records by type, documents, skipped by reason, charsets, ...
    OUTPUT/_SUCCESS        written last

then ``neardup dedupe OUTPUT DEDUPED`` (readers skip ``_*`` names). Like a dedupe run, the job
writes under
``OUTPUT/_staging/RUN_ID/`` and commits at the end (:class:`~neardup_spark.io.output.OutputDir`),
so an ingest killed at any point leaves a previous finished OUTPUT as it was. The output may be
any path Spark writes.

:func:`ingest` reads as its steps: list the files, read them into one record table
(:func:`read_records`), mark repeated ids (:func:`mark_duplicate_ids`), count
(:func:`tally_records`), write the tables (:func:`write_tables`), summarise
(:func:`build_summary`), commit. None of the records' problems fails the job (see
:mod:`.schema` for the skip reasons).
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from neardup_spark import __version__
from neardup_spark.errors import UserError
from neardup_spark.ingest.options import (
    DEFAULT_BATCH_ROWS,
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_RECORD_TYPES,
    HTML_TYPES,
    IngestOptions,
)
from neardup_spark.ingest.schema import (
    CONTENT_TYPE,
    CORPUS_COLUMNS,
    DUPLICATE_ID,
    FILE_ERROR,
    RECORD_SCHEMA,
    SKIP_REASONS,
    SKIPPED_COLUMNS,
)
from neardup_spark.ingest.warc import WarcFile, list_warc_files, read_files
from neardup_spark.io.corpus import check_paths_apart
from neardup_spark.io.lease import DEFAULT_LOCK_TIMEOUT
from neardup_spark.io.output import OutputDir, OutputLayout
from neardup_spark.runtime.session import keep_column_types, spark_section

log = logging.getLogger(__name__)

# Staged, then moved into OUTPUT itself: OUTPUT is the corpus.
CORPUS_DIR = "corpus"
SKIPPED_DIR = "_skipped"
SUMMARY_FILE = "_summary.json"
INGEST_LAYOUT = OutputLayout(
    committed=(SKIPPED_DIR, SUMMARY_FILE),
    kind="ingest",
    data_dir=CORPUS_DIR,
    legacy_proof=SUMMARY_FILE,
)
# Above this many repeated ids the join that marks them is not broadcast.
BROADCAST_MAX_IDS = 1_000_000
# The summary lists at most this many file errors and values per count.
MAX_FILE_ERRORS = 100
TOP_VALUES = 50


@dataclass
class IngestTally:
    """The summary's counters, filled from one aggregation over the record table."""

    records_by_type: Counter[str] = field(default_factory=Counter)
    documents_by_type: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_content_types: Counter[str] = field(default_factory=Counter)
    http_status: Counter[str] = field(default_factory=Counter)
    charsets: Counter[str] = field(default_factory=Counter)
    documents: int = 0
    empty_texts: int = 0
    with_replacements: int = 0
    replaced_chars: int = 0
    raw_bytes: int = 0
    text_bytes: int = 0
    content_decoding_failed: int = 0
    # Filled by the job, not by the aggregation.
    duplicate_ids: int = 0
    file_errors: list[dict[str, Any]] = field(default_factory=list)

    def add_group(self, g: Any) -> None:
        """Count one row of :func:`tally_records`' aggregation."""
        n = int(g["n"])
        if g["skip_reason"] != FILE_ERROR:
            self.records_by_type[g["record_type"] or "unknown"] += n
        if g["skip_reason"] is not None:
            self.skipped[g["skip_reason"]] += n
            if g["skip_reason"] == CONTENT_TYPE:
                self.skipped_content_types[g["content_type"] or "none"] += n
            return
        self.documents += n
        self.documents_by_type[g["record_type"]] += n
        status = g["http_status"]
        self.http_status["none" if status is None else str(status)] += n
        self.charsets[g["charset"] or "none"] += n
        self.empty_texts += n if g["empty"] else 0
        self.with_replacements += n if g["replaced"] else 0
        self.replaced_chars += int(g["replaced_chars"] or 0)
        self.raw_bytes += int(g["raw_bytes"] or 0)
        self.text_bytes += int(g["text_bytes"] or 0)
        self.content_decoding_failed += n if g["decode_failed"] else 0


def read_records(spark: SparkSession, files: list[WarcFile], options: IngestOptions) -> DataFrame:
    """The record table (:data:`~neardup_spark.ingest.schema.RECORD_SCHEMA`) of ``files``,
    persisted: one file per partition, the largest files first so they do not start last."""
    order = sorted(range(len(files)), key=lambda i: -files[i].size)
    file_df = spark.range(0, len(files), 1, len(files)).mapInArrow(
        functools.partial(file_of_slot, paths=[(i, files[i].path) for i in order]),
        "file_index int, path string",
    )
    return file_df.mapInArrow(
        functools.partial(read_files, options=options), from_arrow_schema(RECORD_SCHEMA)
    ).persist(StorageLevel.MEMORY_AND_DISK)


def file_of_slot(
    batches: Iterator[pa.RecordBatch], paths: list[tuple[int, str]]
) -> Iterator[pa.RecordBatch]:
    """``id`` (a slot of ``spark.range``, one a partition) -> ``file_index``, ``path`` of the
    file that slot reads: one file a task, without an RDD (Spark Connect has none)."""
    for batch in batches:
        slots = batch.column(0).to_pylist()
        yield pa.RecordBatch.from_pydict(
            {
                "file_index": pa.array([paths[s][0] for s in slots], pa.int32()),
                "path": pa.array([paths[s][1] for s in slots], pa.string()),
            }
        )


def mark_duplicate_ids(records: DataFrame) -> tuple[DataFrame, int, int]:
    """Mark every document whose id an earlier document (file order, then record order)
    already has as ``duplicate_id``. Returns (records, duplicated ids, rows marked)."""
    order = F.struct("file_index", "record_index")
    dups = (
        records.where(F.col("skip_reason").isNull())
        .groupBy("id")
        .agg(F.count(F.lit(1)).alias("copies"), F.min(order).alias("first"))
        .where(F.col("copies") > 1)
    )
    row = dups.agg(F.count(F.lit(1)).alias("ids"), F.sum("copies").alias("copies")).first()
    assert row is not None  # a global aggregation has one row
    n_ids, n_copies = int(row["ids"] or 0), int(row["copies"] or 0)
    if n_ids == 0:
        return records, 0, 0
    table = F.broadcast(dups) if n_ids <= BROADCAST_MAX_IDS else dups
    marked = records.join(table.select("id", "first"), "id", "left").withColumn(
        "skip_reason",
        F.when(
            F.col("skip_reason").isNull() & F.col("first").isNotNull() & (order != F.col("first")),
            F.lit(DUPLICATE_ID),
        ).otherwise(F.col("skip_reason")),
    )
    return marked, n_ids, n_copies - n_ids


def tally_records(records: DataFrame) -> IngestTally:
    """The summary's counters, from one aggregation over the (marked) record table."""
    groups = (
        records.groupBy(
            "record_type",
            "skip_reason",
            "content_type",
            "http_status",
            "charset",
            (F.col("replaced_chars") > 0).alias("replaced"),
            (F.col("text_bytes") == 0).alias("empty"),
            F.col("detail").startswith("content decoding failed").alias("decode_failed"),
        )
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("raw_bytes").alias("raw_bytes"),
            F.sum("text_bytes").alias("text_bytes"),
            F.sum("replaced_chars").alias("replaced_chars"),
        )
        .collect()
    )
    tally = IngestTally()
    for g in groups:
        tally.add_group(g)
    return tally


def file_errors(records: DataFrame) -> list[dict[str, Any]]:
    """The files that could not be read to the end (at most :data:`MAX_FILE_ERRORS`)."""
    return [
        {"file": r["source_file"], "records_read": r["record_index"], "error": r["detail"]}
        for r in records.where(F.col("skip_reason") == FILE_ERROR)
        .select("source_file", "record_index", "detail")
        .limit(MAX_FILE_ERRORS)
        .collect()
    ]


def write_tables(records: DataFrame, staged: OutputDir) -> None:
    """Write the documents to ``corpus/`` (moved into OUTPUT by the commit) and everything else
    to ``_skipped/`` under ``staged``."""
    keep_column_types(records.sparkSession)  # fetch_date: timestamp[us, tz=UTC], not INT96
    documents = records.where(F.col("skip_reason").isNull()).select(*CORPUS_COLUMNS)
    documents.write.parquet(staged.child(CORPUS_DIR))
    skipped = records.where(F.col("skip_reason").isNotNull()).select(*SKIPPED_COLUMNS)
    skipped.write.parquet(staged.child(SKIPPED_DIR))


def _top(counter: Counter[str]) -> dict[str, int]:
    return dict(counter.most_common(TOP_VALUES))


def _per_second(count: int, wall: float, digits: int) -> float | None:
    return round(count / wall, digits) if wall else None


def build_summary(
    spark: SparkSession,
    paths: Sequence[str],
    files: list[WarcFile],
    options: IngestOptions,
    tally: IngestTally,
    out: OutputDir,
    wall: float,
) -> dict[str, Any]:
    """What ``_summary.json`` holds (and :func:`ingest` returns)."""
    records = sum(tally.records_by_type.values())
    return {
        "neardup_spark_version": __version__,
        "inputs": list(paths),
        "files": len(files),
        "input_bytes": sum(f.size for f in files),
        "options": {
            "extract": options.extract,
            "record_types": list(options.record_types),
            "content_types": list(options.content_types),
            "max_payload_bytes": options.max_payload_bytes,
        },
        "records": records,
        "records_by_type": dict(sorted(tally.records_by_type.items())),
        "documents": tally.documents,
        "documents_by_type": dict(sorted(tally.documents_by_type.items())),
        "skipped": {reason: tally.skipped[reason] for reason in SKIP_REASONS},
        "skipped_content_types": _top(tally.skipped_content_types),
        "duplicate_ids": tally.duplicate_ids,
        "file_errors": tally.file_errors,
        "documents_http_status": _top(tally.http_status),
        "documents_charset": _top(tally.charsets),
        "empty_texts": tally.empty_texts,
        "decoding": {
            "documents_with_replacements": tally.with_replacements,
            "replaced_chars": tally.replaced_chars,
            "content_decoding_failed": tally.content_decoding_failed,
        },
        "payload_bytes": tally.raw_bytes,
        "text_bytes": tally.text_bytes,
        "output": {"corpus": out.path, "skipped": out.child(SKIPPED_DIR)},
        "spark": spark_section(spark),
        "wall_seconds": round(wall, 3),
        "files_per_second": _per_second(len(files), wall, 2),
        "records_per_second": _per_second(records, wall, 1),
    }


def list_inputs(paths: Sequence[str], output: str) -> list[WarcFile]:
    """The files to read; :class:`UserError` for no path, a missing one, or OUTPUT inside an
    input path (or one inside OUTPUT)."""
    if not paths:
        raise UserError("give at least one WARC or WET path")
    for path in paths:
        check_paths_apart({"input": path, "output": output})
    return list_warc_files(paths)


def _run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def ingest(
    spark: SparkSession,
    paths: list[str],
    output: str,
    extract: str = "main",
    overwrite: bool = False,
    *,
    record_types: Sequence[str] = DEFAULT_RECORD_TYPES,
    content_types: Sequence[str] = HTML_TYPES,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> dict[str, Any]:
    """Read WARC/WET ``paths`` with Spark and write ``output`` (see the module docstring),
    holding OUTPUT's lease (another run holding it is waited for up to ``lock_timeout`` s).

    Returns the summary (also written to ``OUTPUT/_summary.json``). Raises :class:`UserError`
    for bad options, missing inputs, an OUTPUT that is a file or holds foreign entries, an
    existing finished OUTPUT without ``overwrite``, or a lock held longer than the timeout.
    """
    started = time.perf_counter()
    options = IngestOptions(
        extract=extract,
        record_types=tuple(record_types),
        content_types=tuple(t.lower() for t in content_types),
        max_payload_bytes=max_payload_bytes,
        batch_rows=batch_rows,
    )
    options.validate()
    files = list_inputs(paths, output)
    out = OutputDir(spark, output, INGEST_LAYOUT)
    with out.locked(lock_timeout):
        out.prepare(overwrite)
        staged = out.claim_staging(_run_id())
        log.info("ingesting %d files (%d bytes)", len(files), sum(f.size for f in files))
        records = read_records(spark, files, options)
        try:
            # The first job: it parses the files.
            marked, duplicate_ids, _ = mark_duplicate_ids(records)
            tally = tally_records(marked)
            tally.duplicate_ids = duplicate_ids
            if tally.skipped[FILE_ERROR]:
                tally.file_errors = file_errors(records)
            write_tables(marked, staged)
        finally:
            records.unpersist()
        wall = time.perf_counter() - started
        summary = build_summary(spark, paths, files, options, tally, out, wall)
        staged.write_json(SUMMARY_FILE, summary)
        out.commit(staged, manifest=None)
        return summary
