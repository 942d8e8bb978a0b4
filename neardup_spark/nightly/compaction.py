"""Compaction of an index (``neardup index compact DIR``): the weekly housekeeping that rewrites
the committed version's segments into one, dropping dead contents."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from neardup_spark.columns import ESTIMATE, EXACT_FP, HAS_TEXT, JACCARD
from neardup_spark.config import DedupeConfig
from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import join
from neardup_spark.io.lease import DEFAULT_LOCK_TIMEOUT, hold_lease
from neardup_spark.io.paths import check_writable
from neardup_spark.io.storage import storage_for
from neardup_spark.nightly.contents import parts_for, read_contents, write_contents
from neardup_spark.nightly.docs import latest_rows
from neardup_spark.nightly.layout import SEGMENTS
from neardup_spark.nightly.store import (
    CURRENT_FILE,
    DOCS,
    FP_A,
    FP_B,
    KEEP_VERSIONS,
    PAIRS,
    Index,
    new_manifest,
    new_nonce,
    read_manifest,
)
from neardup_spark.pipeline.execution import maybe_broadcast


def _rewrite_segment(index: Index, segment: str, buckets: int) -> dict[str, Any]:
    """Write one segment holding the index's current state: every document's current row, the
    live contents (texts a current document holds) and the edges between them; returns its
    manifest entry (without ``compacted_from``)."""
    segment_dir = index.segment_path(segment)
    rows = index.docs_rows()
    assert rows is not None  # the index exists
    current = latest_rows(rows).persist()
    n_docs = current.count()
    live = current.where(F.col(HAS_TEXT)).select(EXACT_FP).distinct().persist()
    n_live = live.count()
    live_side = maybe_broadcast(live, n_live)
    bands = index.manifest["settings"]["bands"] if index.manifest else 0
    contents = (
        read_contents(index.spark, index.content_parts(), bands, index.keys_checksums())
        .join(live_side, EXACT_FP, "left_semi")
        .dropDuplicates([EXACT_FP])
    )
    parts = write_contents(contents, segment_dir, parts_for(n_live, buckets), bands)
    current.coalesce(max(1, n_docs // 2_000_000 + 1)).write.parquet(join(segment_dir, DOCS))
    n_pairs = 0
    pairs = index.pairs()
    if pairs is not None:
        kept = (
            pairs.join(live_side.withColumnRenamed(EXACT_FP, FP_A), FP_A, "left_semi")
            .join(live_side.withColumnRenamed(EXACT_FP, FP_B), FP_B, "left_semi")
            .dropDuplicates([FP_A, FP_B])
            .select(FP_A, FP_B, JACCARD, ESTIMATE)
            .persist()
        )
        n_pairs = kept.count()
        if n_pairs:
            kept.coalesce(max(1, n_pairs // 5_000_000 + 1)).write.parquet(join(segment_dir, PAIRS))
        kept.unpersist()
    current.unpersist()
    live.unpersist()
    counts = {"contents": sum(int(p["rows"]) for p in parts), DOCS: n_docs, PAIRS: n_pairs}
    return {
        "name": segment,
        "batch": None,
        "parts": parts,
        "rows": {table: n for table, n in counts.items() if n},
        "live_contents": n_live,
    }


def compact_index(
    spark: SparkSession,
    index_dir: str,
    buckets: int | None = None,
    keep_versions: int = KEEP_VERSIONS,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> dict[str, Any]:
    """Rewrite the committed version's segments into one: every document's current row, the
    live contents (dead ones, which no document holds any more, and their edges go) in
    ``buckets`` parts at most (default: the index's; re-buckets it). Commits a new version
    (documents, clusters and batches unchanged) and deletes what no kept version needs.
    Holds the index's lease throughout, waiting up to ``lock_timeout`` seconds for a nightly
    run that holds it. Returns a summary."""
    if buckets is not None and buckets < 1:
        raise UserError(f"buckets must be >= 1, got {buckets}")
    storage = storage_for(spark, index_dir)
    if read_manifest(storage, index_dir) is None:  # before the lease creates the directory
        raise UserError(f"no index at {index_dir} (no {CURRENT_FILE} file)")
    check_writable(index_dir, "index")
    with hold_lease(storage, index_dir, "compaction", lock_timeout) as lease:
        index = Index.open(spark, index_dir)
        index.lease = lease
        return compact_locked(index, buckets, keep_versions)


def compact_locked(index: Index, buckets: int | None, keep_versions: int) -> dict[str, Any]:
    """:func:`compact_index` holding the index's lease."""
    index_dir = index.root
    if index.manifest is None:
        raise UserError(f"no index at {index_dir} (no {CURRENT_FILE} file)")
    index.check_files()
    index.collect_garbage(keep_versions)
    n_buckets = buckets or index.buckets
    if n_buckets < 1:
        raise UserError(f"buckets must be >= 1, got {n_buckets}")
    nonce = new_nonce()
    before = len(index.segments)
    segment = f"s{index.version + 1:06d}-{nonce}"
    index.claim(f"v{index.version + 1:06d}-{nonce}", f"{SEGMENTS}/{segment}")
    entry = _rewrite_segment(index, segment, n_buckets)
    n_live = entry.pop("live_contents")
    entry["compacted_from"] = before
    manifest = dict(index.manifest)
    new = new_manifest(
        index,
        DedupeConfig.from_dict(index.manifest["config"]),
        index.manifest["id_type"],
        [entry],
        index.batches,
        {
            **index.counts,
            "contents": entry["rows"].get("contents", 0),
            "pairs": entry["rows"].get(PAIRS, 0),
            "live_contents": n_live,
        },
        n_buckets,
        nonce,
    )
    # Keep the settings exactly as recorded (the probe was checked when they were written).
    for key in ("settings", "config", "config_fingerprint"):
        new[key] = manifest[key]
    index.commit(new, run="compaction")
    deleted = index.collect_garbage(keep_versions)
    return {
        "index": index_dir,
        "version": new["name"],
        "segments_before": before,
        "rows": entry["rows"],
        "live_contents": n_live,
        "buckets": n_buckets,
        "deleted_entries": len(deleted),
    }
