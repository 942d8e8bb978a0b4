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
import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import pyarrow as pa
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
from neardup_spark.kernels.shingles import SHINGLE_HASH_VERSION
from neardup_spark.pipeline import BROADCAST_MAX_ROWS

log = logging.getLogger(__name__)

FORMAT = "neardup-index"
FORMAT_VERSION = 1
CURRENT_FILE = "CURRENT"
MANIFEST_FILE = "manifest.json"
DEFAULT_BUCKETS = 32
KEEP_VERSIONS = 3

DOCS, BANDS, CONTENTS, PAIRS, BATCHES = "docs", "bands", "contents", "pairs", "batches"
SEGMENT_TABLES = (CONTENTS, BANDS, PAIRS)
SEG, BUCKET = "seg", "bucket"
FP_A, FP_B = "fp_a", "fp_b"
BATCH = "batch"  # docs: sequence number of the batch that indexed this version of the document

_VERSION_NAME = re.compile(r"^v(\d{6,})-([0-9a-f]+)$")

# Settings that never change what an index holds, so a run may differ from the index in them.
# Everything else in DedupeConfig.fingerprint() must match (new settings are compared by default).
NEUTRAL_SETTINGS = frozenset(
    {
        "id_col",
        "text_col",
        "exact_first",
        "components_single_task_max_edges",
        "bucket_all_pairs_max",
        "min_recall",  # only derives bands/rows, which are compared themselves
        "hamming_k",
        "blocks",
        "simhash_features",
        "simhash_hash",
        "simhash_weighting",
    }
)
SETTING_LABELS = {
    "normalize": "normalisation",
    "ngram": "shingling (ngram)",
    "char_ngram": "shingling (char_ngram)",
    "shingle_unit": "shingling (shingle_unit)",
    "num_perm": "num_perm",
    "seed": "seed",
    "bands": "banding (bands)",
    "rows": "banding (rows)",
    "threshold": "threshold",
    "shingle_hash_version": "shingle hash version",
    "method": "method",
    "representative": "representative",
    "exact_compare_text": "exact_compare_text",
}


# --------------------------------------------------------------------------------------------
# Storage: local paths through the OS (atomic os.replace), anything else through Hadoop


def is_local(path: str) -> bool:
    """True for a plain path or a ``file:`` URI."""
    scheme = urlparse(path).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")


def join(root: str, *parts: str) -> str:
    """``root/part/...`` for paths and URIs alike."""
    return "/".join([root.rstrip("/"), *(p.strip("/") for p in parts)])


def sibling(path: str, name: str) -> str:
    """A path next to ``path`` called ``name``."""
    trimmed = path.rstrip("/")
    parent, _, _ = trimmed.rpartition("/")
    if not parent and not trimmed.startswith("/"):
        return name
    return f"{parent}/{name}"


def basename(path: str) -> str:
    return path.rstrip("/").rpartition("/")[2]


def parent(path: str) -> str:
    """The directory holding ``path`` (``.`` for a bare relative name)."""
    trimmed = path.rstrip("/")
    head, sep, _ = trimmed.rpartition("/")
    if not sep:
        return "."
    return head or "/"


class Storage(Protocol):
    """The few file-system operations the index and the published outputs need."""

    def exists(self, path: str) -> bool: ...

    def list(self, path: str) -> list[str]: ...

    def read_text(self, path: str) -> str | None: ...

    def write_text(self, path: str, text: str) -> None: ...

    def replace_text(self, path: str, text: str) -> None: ...

    def rename(self, src: str, dst: str) -> None: ...

    def delete(self, path: str) -> None: ...


class LocalStorage:
    """Local paths (``/x``, ``x``, ``file:/x``) through the OS."""

    @staticmethod
    def _p(path: str) -> Path:
        parsed = urlparse(path)
        return Path(parsed.path if parsed.scheme == "file" else path)

    def exists(self, path: str) -> bool:
        return self._p(path).exists()

    def list(self, path: str) -> list[str]:
        p = self._p(path)
        return sorted(os.listdir(p)) if p.is_dir() else []

    def read_text(self, path: str) -> str | None:
        try:
            return self._p(path).read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write_text(self, path: str, text: str) -> None:
        p = self._p(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    def replace_text(self, path: str, text: str) -> None:
        """Write ``text`` to a temporary file, then rename it over ``path`` (atomic)."""
        p = self._p(path)
        tmp = p.with_name(f".{p.name}.{uuid.uuid4().hex[:8]}.tmp")
        self.write_text(str(tmp), text)
        os.replace(tmp, p)
        dir_fd = os.open(p.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def rename(self, src: str, dst: str) -> None:
        os.rename(self._p(src), self._p(dst))

    def delete(self, path: str) -> None:
        p = self._p(path)
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        elif p.exists() or p.is_symlink():
            p.unlink()


class HadoopStorage:
    """Any Hadoop-supported file system (HDFS, object stores) through the JVM."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        gateway = spark.sparkContext._gateway
        assert gateway is not None
        self._gateway = gateway
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._fs = jvm.org.apache.hadoop.fs.Path(root).getFileSystem(self._conf)

    def _path(self, path: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(path)

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def list(self, path: str) -> list[str]:
        if not self.exists(path):
            return []
        return sorted(str(s.getPath().getName()) for s in self._fs.listStatus(self._path(path)))

    def read_text(self, path: str) -> str | None:
        if not self.exists(path):
            return None
        stream = self._fs.open(self._path(path))
        try:
            reader = self._jvm.java.io.BufferedReader(
                self._jvm.java.io.InputStreamReader(stream, "UTF-8")
            )
            lines = []
            line = reader.readLine()
            while line is not None:
                lines.append(line)
                line = reader.readLine()
            return "\n".join(lines) + ("\n" if lines else "")
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        stream = self._fs.create(self._path(path), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def replace_text(self, path: str, text: str) -> None:
        tmp = sibling(path, f".{basename(path)}.{uuid.uuid4().hex[:8]}.tmp")
        self.write_text(tmp, text)
        fs_pkg = self._jvm.org.apache.hadoop.fs
        context = fs_pkg.FileContext.getFileContext(self._path(path).toUri(), self._conf)
        options = self._gateway.new_array(fs_pkg.Options.Rename, 1)
        options[0] = fs_pkg.Options.Rename.OVERWRITE
        context.rename(self._path(tmp), self._path(path), options)

    def rename(self, src: str, dst: str) -> None:
        if not self._fs.rename(self._path(src), self._path(dst)):
            raise OSError(f"cannot rename {src} to {dst}")

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)


def storage_for(spark: SparkSession, path: str) -> Storage:
    """The :class:`Storage` serving ``path``."""
    return LocalStorage() if is_local(path) else HadoopStorage(spark, path)


def copy_tree(spark: SparkSession, src: str, dst: str) -> None:
    """Copy a file or directory tree (across file systems too)."""
    if is_local(src) and is_local(dst):
        s, d = LocalStorage._p(src), LocalStorage._p(dst)
        d.parent.mkdir(parents=True, exist_ok=True)
        if s.is_dir():
            shutil.copytree(s, d)
        else:
            shutil.copy2(s, d)
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    src_path, dst_path = jvm.org.apache.hadoop.fs.Path(src), jvm.org.apache.hadoop.fs.Path(dst)
    src_fs, dst_fs = src_path.getFileSystem(conf), dst_path.getFileSystem(conf)
    if not jvm.org.apache.hadoop.fs.FileUtil.copy(src_fs, src_path, dst_fs, dst_path, False, conf):
        raise OSError(f"cannot copy {src} to {dst}")


# --------------------------------------------------------------------------------------------
# Settings an index is bound to


def probe_digest(config: DedupeConfig) -> str:
    """SHA-256 (16 hex digits) of what the job's own fingerprint and sketch stages make of a few
    fixed texts under ``config``: exact fingerprints, shingle hashes, MinHash sketches, band keys.

    Recorded in the manifest and recomputed by every run, so a change of the normalisation,
    shingling, MinHash or banding *code* (not only of a setting) is caught as well.
    """
    from neardup_spark.columns import BAND_KEYS, SKETCH, TEXT
    from neardup_spark.stages.fingerprint import _fingerprint_fn
    from neardup_spark.stages.sketch import sketch_batch_fn

    texts = [
        "The quick brown fox jumps over the lazy dog, twice: the QUICK brown fox!",
        "Crawlers fetch pages; near-duplicate pages waste the index.  Straße ﬁle",
        "short",
        "日本語のテキストはスペースなしで書かれます",
        "",
    ]
    batch = pa.RecordBatch.from_arrays(
        [pa.array(range(len(texts)), pa.int64()), pa.array(texts, pa.string())],
        names=[DOC_ID, TEXT],
    )
    fingerprinted = pa.Table.from_batches(
        list(_fingerprint_fn(config.normalize, config.shingle_unit)(iter([batch])))
    ).combine_chunks()
    sketched = pa.Table.from_batches(
        list(sketch_batch_fn(config)(iter(fingerprinted.to_batches())))
    ).combine_chunks()
    digest = hashlib.sha256()
    for column in (
        fingerprinted.column(EXACT_FP),
        sketched.column(SHINGLES),
        sketched.column(SKETCH),
        sketched.column(BAND_KEYS),
    ):
        digest.update(str(column.to_pylist()).encode())
    return digest.hexdigest()[:16]


def index_settings(config: DedupeConfig) -> dict[str, Any]:
    """The settings an index is bound to: every result-deciding setting of
    ``config.fingerprint()`` but :data:`NEUTRAL_SETTINGS`, plus the shingle hash version and the
    hashing probe (:func:`probe_digest`)."""
    settings = {
        k: v for k, v in json.loads(config.fingerprint()).items() if k not in NEUTRAL_SETTINGS
    }
    settings["shingle_hash_version"] = SHINGLE_HASH_VERSION
    settings["hash_probe"] = probe_digest(config)
    return settings


def settings_differences(built: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """Human-readable differences between an index's settings and a run's."""
    out = []
    for key in sorted(set(built) | set(wanted)):
        if key == "hash_probe":
            continue
        a, b = built.get(key), wanted.get(key)
        if a == b:
            continue
        label = SETTING_LABELS.get(key, key)
        if isinstance(a, dict) and isinstance(b, dict):
            subs = ", ".join(
                f"{key}.{s}: index {a.get(s)!r}, this run {b.get(s)!r}"
                for s in sorted(set(a) | set(b))
                if a.get(s) != b.get(s)
            )
            out.append(f"{label} ({subs})")
        else:
            out.append(f"{label} (index {a!r}, this run {b!r})")
    if not out and built.get("hash_probe") != wanted.get("hash_probe"):
        out.append(
            "hashing code (the normalisation, shingle, MinHash or band-key code changed since "
            f"the index was built: probe {built.get('hash_probe')} != {wanted.get('hash_probe')})"
        )
    return out


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
        "config_fingerprint": config.fingerprint(),
        "shingle_hash_version": SHINGLE_HASH_VERSION,
        "num_perm": config.num_perm,
        "seed": config.seed,
        "banding": {"bands": config.bands, "rows": config.rows, "threshold": config.threshold},
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
    assert docs is not None
    live = docs.where(F.col(HAS_TEXT)).select(EXACT_FP).distinct().persist()
    n_live = live.count()
    live_side = maybe_broadcast(live, n_live)
    rows: dict[str, int] = {}
    contents = index.table(CONTENTS)
    if contents is not None:
        kept = (
            contents.join(live_side, EXACT_FP, "left_semi")
            .dropDuplicates([EXACT_FP])
            .select(EXACT_FP, N_SHINGLES, SHINGLES)
            .persist()
        )
        rows[CONTENTS] = kept.count()
        write_bucketed(
            kept,
            index.segment_path(CONTENTS, segment),
            EXACT_FP,
            n_buckets,
            rows[CONTENTS],
            CONTENTS_ROWS_PER_FILE,
        )
        kept.unpersist()
    bands = index.table(BANDS)
    if bands is not None:
        kept = (
            bands.join(live_side, EXACT_FP, "left_semi")
            .select(BAND_KEY, EXACT_FP)
            .distinct()
            .persist()
        )
        rows[BANDS] = kept.count()
        write_bucketed(
            kept,
            index.segment_path(BANDS, segment),
            BAND_KEY,
            n_buckets,
            rows[BANDS],
            BANDS_ROWS_PER_FILE,
        )
        kept.unpersist()
    pairs = index.table(PAIRS)
    if pairs is not None:
        kept = (
            pairs.join(live_side.withColumnRenamed(EXACT_FP, FP_A), FP_A, "left_semi")
            .join(live_side.withColumnRenamed(EXACT_FP, FP_B), FP_B, "left_semi")
            .dropDuplicates([FP_A, FP_B])
            .select(FP_A, FP_B, JACCARD, ESTIMATE)
            .persist()
        )
        rows[PAIRS] = kept.count()
        kept.coalesce(max(1, rows[PAIRS] // 5_000_000 + 1)).write.parquet(
            index.segment_path(PAIRS, segment)
        )
        kept.unpersist()
    live.unpersist()
    version_name = f"v{index.version + 1:06d}-{nonce}"
    docs.write.parquet(join(index_dir, version_name, DOCS))
    before = len(index.segments)
    manifest = dict(index.manifest)
    new = new_manifest(
        index,
        _config_from_manifest(index.manifest),
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


def _config_from_manifest(manifest: dict[str, Any]) -> DedupeConfig:
    from neardup_spark.kernels.normalize import NormalizeOptions

    data = dict(manifest["config"])
    data["normalize"] = NormalizeOptions(**data["normalize"])
    known = {f.name for f in dataclasses.fields(DedupeConfig)}
    return DedupeConfig(**{k: v for k, v in data.items() if k in known})


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
