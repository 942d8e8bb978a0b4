"""The persistent index of nightly runs (``--index DIR``): layout, manifest, commits, clean-up.

Layout (format version 2; ``S`` a segment, written once and never changed)::

    DIR/_commits/v000012                 the commit log: which version is number 12 (and the run
                                         that committed it), created once, never replaced
    DIR/CURRENT                          the committed version's name, e.g. "v000012-3fa9c2d1"
                                         (a hint: the log entries after it win)
    DIR/_lock                            who is writing (io/lease.py), with its heartbeat file
    DIR/v000012-3fa9c2d1/manifest.json   settings, id type, segments (and their parts),
                                         committed batches, counts
    DIR/segments/S/part-*.keys.arrow     the contents new in S: fingerprints and band keys
    DIR/segments/S/part-*.texts.arrow    ... and their normalised texts (see content_files)
    DIR/segments/S/docs/                 documents S added or changed: doc_id, has_text,
                                         exact_fp, cluster_id, batch, written
    DIR/segments/S/pairs/                (fp_a, fp_b, jaccard, estimate): verified edges S added
    DIR/batches/b000012-RUNID-NONCE/     one batch's results: clusters/, pairs/,
                                         changed_clusters/, kept/, report.json

The index is *content-addressed*: a distinct normalised text (its 64-bit exact fingerprint,
``exact_fp``) is one node of the near-duplicate graph, stored once however many documents carry
it, in the segment of the batch that first brought it. ``pairs`` holds the verified edges between
contents (facts about two texts, never invalidated). ``docs`` maps each document to its content
and its cluster: a batch writes a row for each document it indexes and for each indexed document
whose cluster id it changes (merges, splits), so a night writes what it changed, never the whole
table; a document's current row is its row of the latest segment (``written``). A content no
document refers to any more (all its pages were re-crawled with other text) is *dead*: its files
stay until compaction and its edges no longer connect anything.

Commit protocol: a writer holds the index's lease (``_lock``, :mod:`neardup_spark.io.lease`)
from before it reads the committed version until after its commit, so runs take turns. It writes
its segment and batch results under fresh names nothing refers to yet, then the new version's
``manifest.json``, then *commits* by creating the log entry ``_commits/vNNNNNN`` with
:meth:`Storage.put_if_absent`: of two writers of one version number (a lease broken by mistake,
a file system without atomic create) exactly one succeeds, and the other raises
:class:`IndexCommitConflict` having changed nothing. Then ``CURRENT`` is replaced atomically
(``os.replace`` locally, ``FileContext.rename(OVERWRITE)`` on Hadoop file systems); readers
roll forward from it along the log, so a run killed between the two is committed. A run killed
at any point before the log entry leaves the previous version current and intact; its debris is
deleted by the next run (:meth:`Index.collect_garbage`, under the lease). The last
:data:`KEEP_VERSIONS` versions are kept, so a reader holding an older ``CURRENT`` keeps working
for a while. An index written before the log existed has no ``_commits/`` and reads as before.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark import __version__
from neardup_spark.columns import (
    CLUSTER_ID,
    DOC_ID,
    ESTIMATE,
    EXACT_FP,
    HAS_TEXT,
    JACCARD,
)
from neardup_spark.config import DedupeConfig
from neardup_spark.errors import IndexDamaged, UserError
from neardup_spark.io.filesystem import LocalStorage, Storage, is_local, join
from neardup_spark.io.lease import Lease
from neardup_spark.io.output import MANIFEST_FILE
from neardup_spark.io.paths import for_hadoop
from neardup_spark.io.storage import storage_for
from neardup_spark.kernels.shingles import SHINGLE_HASH_VERSION
from neardup_spark.nightly.content_files import KEYS_SUFFIX
from neardup_spark.nightly.index_files import (
    check_new_index_dir,
    claim_entries,
    collect_garbage,
)
from neardup_spark.nightly.integrity import (
    FILES,
    Verification,
    check_before_reading,
    stamp_manifest,
    verify_files,
)
from neardup_spark.nightly.layout import (
    CURRENT_FILE,
    SEGMENTS,
    commit_entry_path,
    committed_name,
    version_number,
)
from neardup_spark.nightly.settings import index_settings, settings_differences
from neardup_spark.pipeline.execution import BROADCAST_MAX_ROWS

log = logging.getLogger(__name__)

FORMAT = "neardup-index"
FORMAT_VERSION = 2
DEFAULT_BUCKETS = 32
KEEP_VERSIONS = 3

DOCS, CONTENTS, PAIRS = "docs", "contents", "pairs"
SEGMENT_TABLES = (DOCS, PAIRS)  # Parquet tables of a segment (its contents are part files)
FP_A, FP_B = "fp_a", "fp_b"
BATCH = "batch"  # docs: sequence number of the batch that indexed this version of the document
WRITTEN = "written"  # docs: sequence number of the segment that wrote the row (latest wins)


class IndexCommitConflict(UserError):
    """Another run committed the version this run was about to commit (exit 2: a rerun adds the
    batch on top of it)."""


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
            T.StructField(WRITTEN, T.IntegerType(), False),
        ]
    )


PAIRS_SCHEMA = T.StructType(
    [
        T.StructField(FP_A, T.LongType(), False),
        T.StructField(FP_B, T.LongType(), False),
        T.StructField(JACCARD, T.DoubleType(), False),
        T.StructField(ESTIMATE, T.DoubleType(), False),
    ]
)


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
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def read_manifest(storage: Storage, root: str) -> dict[str, Any] | None:
    """The committed version's manifest of the index at ``root`` (None: no index there yet).

    Raises :class:`UserError` for a directory that is not an index, a damaged one, or an index
    written by an incompatible version of neardup.
    """
    name = committed_name(storage, root)
    if name is None:
        check_new_index_dir(storage, root)
        return None
    if version_number(name) is None:  # a CURRENT that names no version: not the job's
        raise UserError(
            f"index directory {root} exists but is not a neardup index (its {CURRENT_FILE} "
            f"names no version: {name[:60]!r}); nothing was changed: choose an empty or new "
            "directory"
        )
    text = storage.read_text(join(root, name, MANIFEST_FILE))
    if text is None:
        raise IndexDamaged(
            f"index {root}: its commit log names {name!r} but {name}/{MANIFEST_FILE} is "
            "missing; the index is damaged (restore the directory or rebuild it)"
        )
    try:
        manifest: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IndexDamaged(
            f"index {root}: {name}/{MANIFEST_FILE} is not valid JSON ({exc}); the index is "
            "damaged (restore the file from a copy of the index, or rebuild it)"
        ) from exc
    if manifest.get("format") != FORMAT:
        raise UserError(f"{root} is not a neardup index (format {manifest.get('format')!r})")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise UserError(
            f"index {root} has format version {manifest.get('format_version')}; this "
            f"neardup reads version {FORMAT_VERSION} (version 1 stored shingle sets, version 2 "
            "stores texts, so it cannot be converted in place). Rebuild the index by replaying "
            "the batches listed in its manifest into a new directory (docs/nightly.md, "
            "'Compacting and rebuilding the index'); nothing was changed."
        )
    return manifest


@dataclass
class Index:
    """An index directory and its committed version (``manifest`` is None for a new index)."""

    spark: SparkSession
    root: str
    storage: Storage
    manifest: dict[str, Any] | None
    # The writer's lease on the index, checked right before a commit (None: not held).
    lease: Lease | None = None
    # Every file's bytes checked against the manifest (check_files(full=True)) since opening.
    checked_in_full: bool = False

    # ---- opening

    @classmethod
    def open(cls, spark: SparkSession, root: str, read_only: bool = False) -> Index:
        """Open ``root`` (absent or without ``CURRENT``: a new, empty index); ``read_only``: a
        reader's, which leaves ``CURRENT`` as it finds it.

        Raises :class:`UserError` for a directory that is not an index, or an index written by
        an incompatible version of neardup.
        """
        root = for_hadoop(root)  # Spark reads and writes under it: a name Hadoop reads as given
        storage = storage_for(spark, root)
        manifest = read_manifest(storage, root)
        pointer = storage.read_text(join(root, CURRENT_FILE))
        if manifest is not None and (pointer or "").strip() != manifest["name"] and not read_only:
            try:  # a hint only: the log entry is the commit
                storage.replace_text(join(root, CURRENT_FILE), manifest["name"] + "\n")
            except Exception as exc:  # a read-only reader, a run replacing it meanwhile
                log.info("index %s: CURRENT not brought forward (%s)", root, exc)
        return cls(spark, root, storage, manifest)

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
                "(docs/nightly.md, 'Compacting and rebuilding the index')."
            )

    def check_id_type(self, id_type: str) -> None:
        if self.manifest is not None and self.manifest["id_type"] != id_type:
            raise UserError(
                f"the index at {self.root} holds {self.manifest['id_type']} ids, this input "
                f"has {id_type} ids; use the same id column type for every batch"
            )

    # ---- tables

    def docs_rows(self) -> DataFrame | None:
        """Every ``docs`` row of the committed version's segments (a document's current row is
        its latest by ``written``; :mod:`neardup_spark.nightly.docs` resolves it), or None."""
        return self._segment_table(DOCS, docs_schema(id_type_from_name(self.id_type)))

    def pairs(self) -> DataFrame | None:
        """The verified edges of every segment (``fp_a``, ``fp_b``, ``jaccard``, ``estimate``)."""
        return self._segment_table(PAIRS, PAIRS_SCHEMA)

    def _segment_table(self, table: str, schema: T.StructType) -> DataFrame | None:
        paths = [
            self.segment_path(s["name"], table)
            for s in self.segments
            if s["rows"].get(table, 0) > 0
        ]
        if not paths:
            return None
        return self.spark.read.schema(schema).parquet(*paths)

    def content_parts(self) -> list[str]:
        """The paths (without suffix) of every contents part of the committed version."""
        return [
            self.segment_path(s["name"], part["name"])
            for s in self.segments
            for part in s.get("parts", [])
        ]

    def keys_checksums(self) -> dict[str, str]:
        """The recorded SHA-256 of each part's keys file, by part path (without suffix), for the
        keys scan to check; none once :meth:`check_files` hashed every file already."""
        if self.checked_in_full:
            return {}
        checksums: dict[str, str] = {}
        for s in self.segments:
            files = s.get(FILES) or {}
            for part in s.get("parts", []):
                recorded = files.get(part["name"] + KEYS_SUFFIX)
                if recorded:
                    checksums[self.segment_path(s["name"], part["name"])] = recorded[1]
        return checksums

    def check_files(self, full: bool = True) -> None:
        """Raise :class:`IndexDamaged` if a file of the committed version is missing, resized,
        or changed (every file when ``full``, else ``docs`` and ``pairs``): what a writer
        checks before it reads the index."""
        check_before_reading(self.root, self.manifest, full)
        self.checked_in_full = full

    @property
    def id_type(self) -> str:
        return str(self.manifest["id_type"]) if self.manifest else "string"

    def has_rows(self, name: str) -> bool:
        """Whether a segment of the committed version has rows in table ``name``."""
        return any(s["rows"].get(name, 0) > 0 for s in self.segments)

    # ---- writing

    def segment_path(self, segment: str, *parts: str) -> str:
        return join(self.root, SEGMENTS, segment, *parts)

    def commit(self, manifest: dict[str, Any], run: str) -> None:
        """Write ``manifest`` into its version directory, commit it by creating its log entry
        (``run`` names the run there), then replace ``CURRENT``.

        Raises :class:`IndexCommitConflict` when another run committed this version number
        first: nothing of this run is then part of the index.
        """
        if self.lease is not None:
            self.lease.check()
        name, number = manifest["name"], int(manifest["version"])
        self.claim(name)
        stamp_manifest(self.root, manifest)
        self.storage.write_text(
            join(self.root, name, MANIFEST_FILE), json.dumps(manifest, indent=2) + "\n"
        )
        entry = {"name": name, "run": run, "committed_at": now_iso()}
        if not self.storage.put_if_absent(
            commit_entry_path(self.root, number), json.dumps(entry) + "\n"
        ):
            other = json.loads(self.storage.read_text(commit_entry_path(self.root, number)) or "{}")
            raise IndexCommitConflict(
                f"index {self.root}: another run ({other.get('run')}) committed version "
                f"{number} ({other.get('name')}) while this run was computing it from version "
                f"{number - 1}; nothing of this run was committed. Rerun it: it adds its "
                "documents on top of that version"
            )
        try:
            self.storage.replace_text(join(self.root, CURRENT_FILE), name + "\n")
        except Exception as exc:  # committed all the same: readers follow the log
            log.warning("index %s: committed %s but CURRENT not replaced: %s", self.root, name, exc)
        self.manifest = manifest
        log.info("index %s: committed version %s", self.root, name)

    def collect_garbage(self, keep: int = KEEP_VERSIONS) -> list[str]:
        """Delete what the job wrote here that no kept version refers to (the last ``keep``):
        debris of killed runs, older versions, segments and batch results only they used
        (:func:`~neardup_spark.nightly.index_files.collect_garbage`). Returns the deleted paths.

        Call it holding the index's lease: it would delete a concurrent writer's fresh
        segment. The lease is checked before each deletion (:class:`LeaseLost` once another
        run broke it: this run stalled past the stale limit, and its manifest may not know that
        run's new files).
        """
        return collect_garbage(self.storage, self.root, self.manifest, keep, self._check_lease)

    def claim(self, *entries: str) -> None:
        """Record ``entries`` (a version, ``segments/S``, ``batches/B``) as the job's before a
        run writes them (:func:`~neardup_spark.nightly.index_files.claim_entries`)."""
        claim_entries(self.storage, self.root, self.manifest, entries)

    def _check_lease(self) -> None:
        if self.lease is not None:
            self.lease.check()


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


def committed_manifest(spark: SparkSession | None, index_dir: str) -> dict[str, Any]:
    """The committed version's manifest (``spark`` is needed only for a path outside the local
    file system); :class:`UserError` where there is no index."""
    if spark is None:
        if not is_local(index_dir):
            raise ValueError(f"{index_dir} is not a local path: pass a SparkSession")
        storage: Storage = LocalStorage()
    else:
        storage = storage_for(spark, index_dir)
    m = read_manifest(storage, index_dir)
    if m is None:
        raise UserError(f"no index at {index_dir} (no {CURRENT_FILE} file)")
    return m


def verify_index(spark: SparkSession | None, index_dir: str) -> Verification:
    """Every file of the committed version checked against its recorded size and SHA-256
    (:func:`~neardup_spark.nightly.integrity.verify_files`)."""
    root = for_hadoop(index_dir)
    return verify_files(root, committed_manifest(spark, root))


def index_info(spark: SparkSession | None, index_dir: str) -> dict[str, Any]:
    """A summary of the committed version, read from its manifest (no Spark job; ``spark`` is
    needed only for a path outside the local file system): version, settings, counts,
    segments, batches."""
    m = committed_manifest(spark, index_dir)
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
