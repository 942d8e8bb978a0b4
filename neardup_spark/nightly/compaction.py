"""Compaction of an index (``neardup index compact DIR``): the weekly housekeeping that rewrites
the committed version's segments into one, dropping dead contents."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup_spark.columns import (
    BAND_KEY,
    ESTIMATE,
    EXACT_FP,
    HAS_TEXT,
    JACCARD,
    N_SHINGLES,
    SHINGLES,
)
from neardup_spark.config import DedupeConfig
from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import join
from neardup_spark.nightly.store import (
    BANDS,
    BANDS_ROWS_PER_FILE,
    CONTENTS,
    CONTENTS_ROWS_PER_FILE,
    CURRENT_FILE,
    DOCS,
    FP_A,
    FP_B,
    KEEP_VERSIONS,
    PAIRS,
    Index,
    maybe_broadcast,
    new_manifest,
    new_nonce,
    write_bucketed,
)


def _live_rows(index: Index, table: str, live: DataFrame) -> DataFrame | None:
    """The rows of ``table`` about live contents (``live``: their ``exact_fp``), each once."""
    rows = index.table(table)
    if rows is None:
        return None
    if table == CONTENTS:
        kept = rows.join(live, EXACT_FP, "left_semi").dropDuplicates([EXACT_FP])
        return kept.select(EXACT_FP, N_SHINGLES, SHINGLES)
    if table == BANDS:
        return rows.join(live, EXACT_FP, "left_semi").select(BAND_KEY, EXACT_FP).distinct()
    return (
        rows.join(live.withColumnRenamed(EXACT_FP, FP_A), FP_A, "left_semi")
        .join(live.withColumnRenamed(EXACT_FP, FP_B), FP_B, "left_semi")
        .dropDuplicates([FP_A, FP_B])
        .select(FP_A, FP_B, JACCARD, ESTIMATE)
    )


def _rewrite_segments(index: Index, segment: str, buckets: int, live: DataFrame) -> dict[str, int]:
    """Write the live rows of every segment table into the one new ``segment``; returns the
    rows written per table."""
    rows: dict[str, int] = {}
    for table in (CONTENTS, BANDS, PAIRS):
        kept = _live_rows(index, table, live)
        if kept is None:
            continue
        kept = kept.persist()
        rows[table] = kept.count()
        path = index.segment_path(table, segment)
        if table == CONTENTS:
            write_bucketed(kept, path, EXACT_FP, buckets, rows[table], CONTENTS_ROWS_PER_FILE)
        elif table == BANDS:
            write_bucketed(kept, path, BAND_KEY, buckets, rows[table], BANDS_ROWS_PER_FILE)
        else:
            kept.coalesce(max(1, rows[table] // 5_000_000 + 1)).write.parquet(path)
        kept.unpersist()
    return rows


def compact_index(
    spark: SparkSession,
    index_dir: str,
    buckets: int | None = None,
    keep_versions: int = KEEP_VERSIONS,
) -> dict[str, Any]:
    """Rewrite the committed version's segments into one: dead contents (no document refers to
    them any more), their band keys and their edges go; duplicates go; each bucket becomes one
    sorted file. ``buckets`` re-buckets the index. Commits a new version (documents, clusters
    and batches unchanged) and deletes what no kept version needs. Returns a summary.
    """
    index = Index.open(spark, index_dir)
    if index.manifest is None:
        raise UserError(f"no index at {index_dir} (no {CURRENT_FILE} file)")
    index.collect_garbage(keep_versions)
    n_buckets = buckets or index.buckets
    if n_buckets < 1:
        raise UserError(f"buckets must be >= 1, got {n_buckets}")
    nonce = new_nonce()
    segment = f"s{index.version + 1:06d}-{nonce}"
    docs = index.docs()
    assert docs is not None  # the index exists
    live = docs.where(F.col(HAS_TEXT)).select(EXACT_FP).distinct().persist()
    n_live = live.count()
    rows = _rewrite_segments(index, segment, n_buckets, maybe_broadcast(live, n_live))
    live.unpersist()
    docs.write.parquet(join(index_dir, f"v{index.version + 1:06d}-{nonce}", DOCS))
    before = len(index.segments)
    manifest = dict(index.manifest)
    new = new_manifest(
        index,
        DedupeConfig.from_dict(index.manifest["config"]),
        index.manifest["id_type"],
        [{"name": segment, "batch": None, "compacted_from": before, "rows": rows}],
        index.batches,
        {
            **index.counts,
            "contents": rows.get(CONTENTS, 0),
            "pairs": rows.get(PAIRS, 0),
            "live_contents": n_live,
        },
        n_buckets,
        nonce,
    )
    # Keep the settings exactly as recorded (the probe was checked when they were written).
    for key in ("settings", "config", "config_fingerprint"):
        new[key] = manifest[key]
    index.commit(new)
    deleted = index.collect_garbage(keep_versions)
    return {
        "index": index_dir,
        "version": new["name"],
        "segments_before": before,
        "rows": rows,
        "live_contents": n_live,
        "buckets": n_buckets,
        "deleted_entries": len(deleted),
    }
