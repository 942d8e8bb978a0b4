"""The persistent index of incremental runs (``--index DIR``): layout, manifest, commits, clean-up.

Layout (every table Parquet; ``S`` a segment name, ``K`` a bucket)::

    DIR/CURRENT                          the committed version's name, e.g. "v000012-3fa9c2d1"
    DIR/v000012-3fa9c2d1/manifest.json   settings, id type, segments, committed batches, counts
    DIR/v000012-3fa9c2d1/docs/           one row per indexed document (rewritten per version)
    DIR/bands/seg=S/bucket=K/            (band_key, exact_fp), sorted by band_key
    DIR/contents/seg=S/bucket=K/         (exact_fp, n_shingles, shingles), sorted by exact_fp
    DIR/pairs/seg=S/                     (fp_a, fp_b, jaccard, estimate): verified edges
    DIR/batches/b000012-RUNID-NONCE/     one batch's results: clusters/, pairs/,
                                         changed_clusters/, kept/, report.json

The index is *content-addressed*: a distinct normalised text (its 64-bit exact fingerprint,
``exact_fp``) is one node of the near-duplicate graph, stored once however many documents carry
it. ``bands`` and ``contents`` hold its band keys and its sorted shingle-hash set; ``pairs``
holds the verified edges between contents (facts about two texts, never invalidated). ``docs``
maps each indexed document to its content and its cluster; a content no document refers to any
more (all its pages were re-crawled with other text) is *dead*: its rows stay until compaction
and its edges no longer connect anything.

``bucket = pmod(key, buckets)`` (``key`` = ``band_key`` or ``exact_fp``), so a lookup of a few
keys reads only their buckets' files; segments are immutable (one per batch, one per
compaction) and a version lists the ones it reads.

Commit protocol (one writer at a time): a run writes its segment, its batch results and the new
version's ``docs`` and ``manifest.json`` under fresh names nothing refers to yet, then replaces
``CURRENT`` atomically (``os.replace`` locally, ``FileContext.rename(OVERWRITE)`` on Hadoop file
systems). A run killed at any point leaves the previous version current and intact; its debris
is deleted by the next run (:func:`collect_garbage`). The last :data:`KEEP_VERSIONS` versions
are kept, so a reader holding an older ``CURRENT`` keeps working for a while.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import re
import uuid
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark import __version__
from neardup_spark.columns import (
    BAND_KEY,
    CLUSTER_ID,
    DOC_ID,
    ESTIMATE,
    EXACT_FP,
    HAS_TEXT,
    JACCARD,
    N_SHINGLES,
    SHINGLES,
)
from neardup_spark.config import DedupeConfig
from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import LocalStorage, Storage, basename, is_local, join, storage_for
from neardup_spark.io.output import MANIFEST_FILE
from neardup_spark.kernels.shingles import SHINGLE_HASH_VERSION
from neardup_spark.nightly.settings import index_settings, settings_differences
from neardup_spark.pipeline.execution import BROADCAST_MAX_ROWS

log = logging.getLogger(__name__)

FORMAT = "neardup-index"
FORMAT_VERSION = 1
CURRENT_FILE = "CURRENT"
DEFAULT_BUCKETS = 32
KEEP_VERSIONS = 3

DOCS, BANDS, CONTENTS, PAIRS, BATCHES = "docs", "bands", "contents", "pairs", "batches"
SEGMENT_TABLES = (CONTENTS, BANDS, PAIRS)
SEG, BUCKET = "seg", "bucket"
FP_A, FP_B = "fp_a", "fp_b"
BATCH = "batch"  # docs: sequence number of the batch that indexed this version of the document

_VERSION_NAME = re.compile(r"^v(\d{6,})-([0-9a-f]+)$")


# --------------------------------------------------------------------------------------------
# Schemas


def docs_schema(id_type: T.DataType) -> T.StructType:
    return T.StructType(
        [
            T.StructField(DOC_ID, id_type, False),
            T.StructField(HAS_TEXT, T.BooleanType(), False),
            T.StructField(EXACT_FP, T.LongType(), False),
            T.StructField(CLUSTER_ID, id_type, False),
            T.StructField(BATCH, T.IntegerType(), False),
        ]
    )


BANDS_SCHEMA = T.StructType(
    [
        T.StructField(BAND_KEY, T.LongType(), False),
        T.StructField(EXACT_FP, T.LongType(), False),
        T.StructField(SEG, T.StringType(), False),
        T.StructField(BUCKET, T.IntegerType(), False),
    ]
)
CONTENTS_SCHEMA = T.StructType(
    [
        T.StructField(EXACT_FP, T.LongType(), False),
        T.StructField(N_SHINGLES, T.IntegerType(), False),
        T.StructField(SHINGLES, T.BinaryType(), False),
        T.StructField(SEG, T.StringType(), False),
        T.StructField(BUCKET, T.IntegerType(), False),
    ]
)
PAIRS_SCHEMA = T.StructType(
    [
        T.StructField(FP_A, T.LongType(), False),
        T.StructField(FP_B, T.LongType(), False),
        T.StructField(JACCARD, T.DoubleType(), False),
        T.StructField(ESTIMATE, T.DoubleType(), False),
        T.StructField(SEG, T.StringType(), False),
    ]
)
TABLE_SCHEMAS = {BANDS: BANDS_SCHEMA, CONTENTS: CONTENTS_SCHEMA, PAIRS: PAIRS_SCHEMA}


def id_type_from_name(name: str) -> T.DataType:
    return T.StringType() if name == "string" else T.LongType()


# --------------------------------------------------------------------------------------------
# The index


def maybe_broadcast(df: DataFrame, rows: int) -> DataFrame:
    """``df`` marked for broadcast when it has at most ``BROADCAST_MAX_ROWS`` rows."""
    return F.broadcast(df) if rows <= BROADCAST_MAX_ROWS else df


def new_nonce() -> str:
    return uuid.uuid4().hex[:8]


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def read_manifest(storage: Storage, root: str) -> dict[str, Any] | None:
    """The committed version's manifest of the index at ``root`` (None: no index there yet).

    Raises :class:`UserError` for a directory that is not an index, a damaged one, or an index
    written by an incompatible version of neardup.
    """
    pointer = storage.read_text(join(root, CURRENT_FILE))
    if pointer is None:
        foreign = [e for e in storage.list(root) if not _is_index_entry(e) and e != CURRENT_FILE]
        if foreign:
            raise UserError(
                f"index directory {root} exists but is not a neardup index (it holds "
                f"{', '.join(foreign[:5])}); choose an empty or new directory"
            )
        return None
    name = pointer.strip()
    text = storage.read_text(join(root, name, MANIFEST_FILE))
    if text is None:
        raise UserError(
            f"index {root}: CURRENT names {name!r} but {name}/{MANIFEST_FILE} is missing; "
            "the index is damaged (restore the directory or rebuild it)"
        )
    manifest: dict[str, Any] = json.loads(text)
    if manifest.get("format") != FORMAT:
        raise UserError(f"{root} is not a neardup index (format {manifest.get('format')!r})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise UserError(
            f"index {root} has format version {manifest.get('format_version')}; this "
            f"neardup reads version {FORMAT_VERSION}. Rebuild the index (README, "
            "'Compacting and rebuilding the index')."
        )
    return manifest


@dataclass
class Index:
    """An index directory and its committed version (``manifest`` is None for a new index)."""

    spark: SparkSession
    root: str
    storage: Storage
    manifest: dict[str, Any] | None

    # ---- opening

    @classmethod
    def open(cls, spark: SparkSession, root: str) -> Index:
        """Open ``root`` (absent or without ``CURRENT``: a new, empty index).

        Raises :class:`UserError` for a directory that is not an index, or an index written by
        an incompatible version of neardup.
        """
        storage = storage_for(spark, root)
        return cls(spark, root, storage, read_manifest(storage, root))

    # ---- manifest accessors

    @property
    def exists(self) -> bool:
        return self.manifest is not None

    @property
    def version(self) -> int:
        return int(self.manifest["version"]) if self.manifest else 0

    @property
    def name(self) -> str | None:
        return self.manifest["name"] if self.manifest else None

    @property
    def buckets(self) -> int:
        return int(self.manifest["buckets"]) if self.manifest else DEFAULT_BUCKETS

    @property
    def batches(self) -> list[dict[str, Any]]:
        return list(self.manifest["batches"]) if self.manifest else []

    @property
    def segments(self) -> list[dict[str, Any]]:
        return list(self.manifest["segments"]) if self.manifest else []

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.manifest["counts"]) if self.manifest else {}

    def batch(self, run_id: str) -> dict[str, Any] | None:
        """The committed batch with ``run_id``, if any."""
        return next((b for b in self.batches if b["run_id"] == run_id), None)

    def check_settings(self, config: DedupeConfig) -> None:
        """Refuse (:class:`UserError`) a run whose settings differ from the index's."""
        if self.manifest is None:
            return
        differences = settings_differences(self.manifest["settings"], index_settings(config))
        if differences:
            raise UserError(
                f"the index at {self.root} was built with other settings than this run: "
                + "; ".join(differences)
                + ". An index only serves runs with the settings it was built with: run with "
                "the index's settings (see its manifest.json), or rebuild the index "
                "(README, 'Compacting and rebuilding the index')."
            )

    def check_id_type(self, id_type: str) -> None:
        if self.manifest is not None and self.manifest["id_type"] != id_type:
            raise UserError(
                f"the index at {self.root} holds {self.manifest['id_type']} ids, this input "
                f"has {id_type} ids; use the same id column type for every batch"
            )

    # ---- tables

    def docs(self) -> DataFrame | None:
        """The committed ``docs`` table (None for a new index)."""
        if self.manifest is None:
            return None
        schema = docs_schema(id_type_from_name(self.manifest["id_type"]))
        return self.spark.read.schema(schema).parquet(join(self.root, self.manifest["name"], DOCS))

    def has_rows(self, name: str) -> bool:
        """Whether a segment of the committed version has rows in table ``name``."""
        return any(s["rows"].get(name, 0) > 0 for s in self.segments)

    def table(self, name: str, buckets: list[int] | None = None) -> DataFrame | None:
        """One segment table (``bands``, ``contents``, ``pairs``) over every segment of the
        committed version, or None when no segment has rows in it. ``buckets`` limits the read
        to those buckets' files (``bands`` and ``contents``)."""
        segments = [s["name"] for s in self.segments if s["rows"].get(name, 0) > 0]
        if not segments:
            return None
        base = join(self.root, name)
        df = (
            self.spark.read.schema(TABLE_SCHEMAS[name])
            .option("basePath", base)
            .parquet(*[join(base, f"{SEG}={s}") for s in segments])
        )
        if buckets is not None and name != PAIRS:
            df = df.where(F.col(BUCKET).isin(buckets))
        return df

    # ---- writing

    def segment_path(self, table: str, segment: str) -> str:
        return join(self.root, table, f"{SEG}={segment}")

    def commit(self, manifest: dict[str, Any]) -> None:
        """Write ``manifest`` into its version directory (whose ``docs/`` is written), then make
        it current by replacing ``CURRENT`` atomically."""
        name = manifest["name"]
        self.storage.write_text(
            join(self.root, name, MANIFEST_FILE), json.dumps(manifest, indent=2) + "\n"
        )
        self.storage.replace_text(join(self.root, CURRENT_FILE), name + "\n")
        self.manifest = manifest
        log.info("index %s: committed version %s", self.root, name)

    def collect_garbage(self, keep: int = KEEP_VERSIONS) -> list[str]:
        """Delete what no kept version refers to: debris of killed runs, versions older than the
        last ``keep``, segments and batch results only they used. Returns the deleted paths.

        Assumes no other run writes to the index meanwhile (one writer at a time).
        """
        kept_manifests = self._kept_manifests(keep)
        kept_versions = {m["name"] for m in kept_manifests}
        kept_segments = {s["name"] for m in kept_manifests for s in m["segments"]}
        kept_batches = {basename(b["results"]) for m in kept_manifests for b in m["batches"]}
        deleted: list[str] = []

        def drop(path: str) -> None:
            self.storage.delete(path)
            deleted.append(path)

        for entry in self.storage.list(self.root):
            path = join(self.root, entry)
            if (_VERSION_NAME.match(entry) and entry not in kept_versions) or (
                entry.startswith(f".{CURRENT_FILE}.") and entry.endswith(".tmp")
            ):
                drop(path)
            elif entry in SEGMENT_TABLES:
                for seg_dir in self.storage.list(path):
                    if (
                        (
                            seg_dir.startswith(f"{SEG}=")
                            and seg_dir[len(SEG) + 1 :] not in kept_segments
                        )
                        or seg_dir.startswith("_")
                        or seg_dir.startswith(".")
                    ):
                        drop(join(path, seg_dir))
            elif entry == BATCHES:
                for batch_dir in self.storage.list(path):
                    if batch_dir not in kept_batches:
                        drop(join(path, batch_dir))
        if deleted:
            log.info("index %s: removed %d unreferenced entries", self.root, len(deleted))
        return deleted

    def _kept_manifests(self, keep: int) -> list[dict[str, Any]]:
        kept: list[dict[str, Any]] = []
        manifest = self.manifest
        while manifest is not None and len(kept) < max(keep, 1):
            kept.append(manifest)
            previous = manifest.get("previous")
            text = (
                self.storage.read_text(join(self.root, previous, MANIFEST_FILE))
                if previous
                else None
            )
            manifest = json.loads(text) if text else None
        return kept


def _is_index_entry(name: str) -> bool:
    return (
        bool(_VERSION_NAME.match(name))
        or name in (*SEGMENT_TABLES, BATCHES)
        or (name.startswith(f".{CURRENT_FILE}.") and name.endswith(".tmp"))
    )


def new_manifest(
    index: Index,
    config: DedupeConfig,
    id_type: str,
    segments: list[dict[str, Any]],
    batches: list[dict[str, Any]],
    counts: dict[str, int],
    buckets: int,
    nonce: str,
) -> dict[str, Any]:
    """The manifest of the version that follows ``index``'s committed one."""
    version = index.version + 1
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "version": version,
        "name": f"v{version:06d}-{nonce}",
        "previous": index.name,
        "created_at": now_iso(),
        "neardup_spark_version": __version__,
        "settings": index_settings(config),
        "config": config.to_dict(),
        "config_fingerprint": config.settings_json(),
        "shingle_hash_version": SHINGLE_HASH_VERSION,
        "num_perm": config.num_perm,
        "seed": config.seed,
        "banding": {
            "bands": config.banding.bands,
            "rows": config.banding.rows,
            "threshold": config.threshold,
        },
        "normalize": dataclasses.asdict(config.normalize),
        "id_type": id_type,
        "buckets": buckets,
        "segments": segments,
        "batches": batches,
        "counts": counts,
    }


# --------------------------------------------------------------------------------------------
# Writing segment tables


# About 128 MB files: a content row holds ~4 KB of shingles at 500 words, a band row 16 bytes.
CONTENTS_ROWS_PER_FILE = 30_000
BANDS_ROWS_PER_FILE = 4_000_000


def write_bucketed(
    df: DataFrame, path: str, key: str, buckets: int, rows: int, rows_per_file: int
) -> None:
    """Write ``df`` (about ``rows`` rows) partitioned by ``bucket = pmod(key, buckets)``, each
    file's rows sorted by ``key``: one file per bucket, more when a bucket would hold over
    ``rows_per_file`` rows."""
    bucketed = df.withColumn(BUCKET, F.pmod(F.col(key), F.lit(buckets)).cast("int"))
    files = max(1, -(-rows // (rows_per_file * buckets)))
    if files == 1:
        parts = bucketed.repartition(buckets, BUCKET)
    else:
        salt = F.pmod(F.xxhash64(F.col(key)), F.lit(files))
        parts = bucketed.repartition(buckets * files, BUCKET, salt)
    parts.sortWithinPartitions(BUCKET, key).write.partitionBy(BUCKET).parquet(path)


def index_info(spark: SparkSession | None, index_dir: str) -> dict[str, Any]:
    """A summary of the committed version, read from its manifest (no Spark job; ``spark`` is
    needed only for a path outside the local file system): version, settings, counts,
    segments, batches."""
    if spark is None:
        if not is_local(index_dir):
            raise ValueError(f"{index_dir} is not a local path: pass a SparkSession")
        storage: Storage = LocalStorage()
    else:
        storage = storage_for(spark, index_dir)
    m = read_manifest(storage, index_dir)
    if m is None:
        raise UserError(f"no index at {index_dir} (no {CURRENT_FILE} file)")
    return {
        "index": index_dir,
        "version": m["name"],
        "created_at": m["created_at"],
        "neardup_spark_version": m.get("neardup_spark_version"),
        "settings": m["settings"],
        "id_type": m["id_type"],
        "buckets": m["buckets"],
        "segments": len(m["segments"]),
        "counts": m["counts"],
        "batches": [
            {k: b[k] for k in ("seq", "run_id", "committed_at", "counts") if k in b}
            for b in m["batches"]
        ],
    }
