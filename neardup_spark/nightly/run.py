"""Incremental (nightly) runs against a persistent index: ``neardup dedupe NEW OUTPUT --index DIR``.

A run checks the batch of new documents against everything indexed before, and adds it:

1. **Exact copies.** Each new document is fingerprinted (normalised text, SHA-256-64). A
   fingerprint the index already holds is *known content*: the document is an exact copy and
   needs no sketch (the index stores each distinct text once, see
   :mod:`neardup_spark.nightly.store`).
2. **Near-duplicates.** Each *new content* is shingled and MinHashed; its band keys are looked up
   among the new contents (LSH buckets, as in a full run) and in the index's ``bands`` table
   (only the buckets of the new keys are read). Every candidate pair is verified exactly: the
   old side's shingle-hash set comes from the index's ``contents`` table.
3. **Clusters.** The clusters the batch touches (those holding a copy or a verified neighbour of
   a new document, or a re-crawled document) are re-computed as connected components over their
   live documents and the stored plus new verified edges; all other clusters stay as they are.
4. **Commit.** The new segment, the new ``docs`` table and the batch's results are written under
   fresh names, then ``CURRENT`` is replaced atomically; finally the outputs are published to
   OUTPUT through a staging directory swapped into place.

Cluster ids (the ``smallest_id`` rule, made stable):

* a cluster's id is the id of one of its documents, its representative;
* a cluster that gains documents **keeps its id**, even when a new document has a smaller id;
* clusters merged by a batch take the **smallest** of their ids (``changed_clusters/`` maps each
  merged id to the surviving one);
* a cluster made only of new documents gets its smallest id;
* when a re-crawl splits a cluster, the part holding the old representative keeps the id and
  every other part gets its smallest id (also listed in ``changed_clusters/``).

So when new documents have larger ids than old ones (ids that grow with crawl time), ids are
exactly those of one full run over all documents; the partition is the same in any case.

Re-crawled pages: a new row whose id is already indexed replaces that document. Its old content
loses a document; a content no document refers to is dead and its edges connect nothing any
more, so the cluster it held together may split.

Outputs for the batch under OUTPUT: ``clusters/`` (the new documents: ``doc_id``,
``cluster_id``, ``is_representative``), ``pairs/`` (the edges this batch adds: near-duplicate
edges of contents that were not live in the index before, between each content's smallest
document, and exact-copy edges of new documents), ``changed_clusters/`` (``old_cluster_id``,
``new_cluster_id``), ``deduplicated/`` (input rows of the new documents that are their
cluster's representative in a cluster with no document indexed before, minus re-crawls whose
text did not change), ``report.json``, ``manifest.json`` and ``_SUCCESS``.

Idempotence: the run id is a hash of the input files (qualified paths, sizes, content SHA-256)
and the id and text columns. A run id the index has already committed adds nothing: its stored
results are published again (or the OUTPUT holding them is kept).

Clustering: the documents of the touched clusters plus the new ones (and their edges) are
collected and clustered on the driver (:func:`cluster_members`, NumPy and SciPy) when they are
at most ``components_single_task_max_edges`` (2,000,000 by default); above that, the same rule
runs as distributed Spark jobs (:func:`_cluster_with_spark`).

One writer at a time: two runs must not update one index concurrently (schedule nightly runs
without overlap, e.g. Airflow ``max_active_runs=1``); readers are never disturbed.

Limits: MinHash only (``--method simhash``/``exact`` with ``--index`` is a :class:`UserError`);
representatives by ``smallest_id`` only; exact copies are grouped by their 64-bit fingerprint
(``exact_compare_text`` is refused). Candidates stay linear in the batch as in a full run: a
new content is paired with every new content of an LSH bucket up to ``bucket_all_pairs_max``
members (a larger bucket is a star from its smallest fingerprint), and with the indexed contents
of the bucket, up to ``bucket_all_pairs_max`` of them (the smallest fingerprints). So an
incremental run finds the pairs a full run finds except where a bucket is larger than that
(where a full run also keeps only a star, centred on the smallest id), the only case in which the
two can differ.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components as graph_components

from neardup_spark import __version__
from neardup_spark.columns import (
    BAND_KEY,
    BAND_KEYS,
    CLUSTER_ID,
    COMPONENT,
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    EXACT_FP,
    HAMMING,
    HAS_TEXT,
    IS_REPRESENTATIVE,
    JACCARD,
    METHOD,
    N_SHINGLES,
    SHINGLES,
    SIMILARITY,
    SKETCH,
    TEXT,
)
from neardup_spark.config import DedupeConfig, SessionSettings
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import (
    check_columns,
    check_ids,
    list_data_files,
    read_corpus,
)
from neardup_spark.io.filesystem import (
    Storage,
    basename,
    copy_tree,
    join,
    parent,
    sibling,
    storage_for,
)
from neardup_spark.io.output import DEDUPE_LAYOUT, REPORT_FILE, SUCCESS_MARKER
from neardup_spark.kernels.arrow_buffers import binary_from_csr, binary_from_rows, csr_from_binary
from neardup_spark.kernels.minhash import MultiplyShiftFamily, signatures
from neardup_spark.nightly.store import (
    BANDS,
    BANDS_ROWS_PER_FILE,
    BATCH,
    BATCHES,
    CONTENTS,
    CONTENTS_ROWS_PER_FILE,
    DEFAULT_BUCKETS,
    DOCS,
    FP_A,
    FP_B,
    KEEP_VERSIONS,
    PAIRS,
    Index,
    maybe_broadcast,
    new_manifest,
    new_nonce,
    now_iso,
    write_bucketed,
)
from neardup_spark.pipeline.components import connected_components
from neardup_spark.pipeline.execution import BROADCAST_MAX_ROWS
from neardup_spark.pipeline.reporting import StageTimer, banding_section, input_counts
from neardup_spark.stages.candidates import bucket_members, candidate_pairs
from neardup_spark.stages.clusters import exact_pairs, minhash_pairs
from neardup_spark.stages.documents import minhash_sketch, text_features
from neardup_spark.stages.verify import score_candidates

log = logging.getLogger(__name__)

OUTPUT_MANIFEST = "manifest.json"
CHANGED_CLUSTERS = "changed_clusters"
OLD_CLUSTER_ID = "old_cluster_id"
NEW_CLUSTER_ID = "new_cluster_id"
KEPT = "kept"  # batch results: the row goes to deduplicated/

_ANCHOR, _ANCHOR_OLD = "anchor", "anchor_is_old"
_ANCHOR_A, _ANCHOR_B = "anchor_a", "anchor_b"
_IS_OLD, _HAS_OLD, _WINNER = "is_old", "has_old", "winner"
_OLD_CLUSTER = "old_cluster"
_PREV_FP, _PREV_HAS_TEXT = "prev_exact_fp", "prev_has_text"
_NEW_FP = "new_fp"
_LIVE_BEFORE = "live_before"
_RANK = "rank"

DISK = StorageLevel.DISK_ONLY
MEMORY = StorageLevel.MEMORY_AND_DISK
# Above this many rows a lookup reads every bucket (and skips the job finding which it needs).
BUCKET_PRUNE_MAX_KEYS_PER_BUCKET = 2


# --------------------------------------------------------------------------------------------
# Arrow kernels


def _set_schema() -> T.StructType:
    return T.StructType(
        [
            T.StructField(DOC_ID, T.LongType(), False),
            T.StructField(SHINGLES, T.BinaryType(), False),
            T.StructField(N_SHINGLES, T.IntegerType(), False),
            T.StructField(SKETCH, T.BinaryType(), False),
            T.StructField(BAND_KEYS, T.ArrayType(T.LongType(), False), False),
        ]
    )


def sorted_sets(offsets: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort and de-duplicate each CSR row at once: ``(offsets, values)`` of the sets.

    >>> o, v = sorted_sets(np.array([0, 3, 3, 5]), np.array([5, 1, 5, 2, 2], dtype=np.uint64))
    >>> o.tolist(), v.tolist()
    ([0, 2, 2, 3], [1, 5, 2])
    """
    n = len(offsets) - 1
    doc = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    order = np.lexsort((values, doc))
    v, d = values[order], doc[order]
    keep = np.ones(len(v), dtype=bool)
    if len(v) > 1:
        keep[1:] = (v[1:] != v[:-1]) | (d[1:] != d[:-1])
    v, d = v[keep], d[keep]
    new_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(d, minlength=n), out=new_offsets[1:])
    return new_offsets, v.astype(np.uint64, copy=False)


def _compact_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Sketch rows -> the same with the shingles as a sorted set and their number."""
    for batch in batches:
        offsets, values = csr_from_binary(batch.column(SHINGLES), np.dtype(np.uint64))
        set_offsets, set_values = sorted_sets(offsets, values)
        yield pa.RecordBatch.from_arrays(
            [
                batch.column(DOC_ID),
                binary_from_csr(set_offsets, set_values).cast(pa.binary()),
                pa.array(np.diff(set_offsets).astype(np.int32)),
                batch.column(SKETCH),
                batch.column(BAND_KEYS),
            ],
            names=[DOC_ID, SHINGLES, N_SHINGLES, SKETCH, BAND_KEYS],
        )


def _sketch_sets_fn(
    num_perm: int, seed: int
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Stored shingle sets -> the same with their MinHash sketch (for the ``estimate``)."""
    family = MultiplyShiftFamily.from_seed(num_perm, seed)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            offsets, values = csr_from_binary(batch.column(SHINGLES), np.dtype(np.uint64))
            sketches = signatures(offsets, values, family)
            yield pa.RecordBatch.from_arrays(
                [batch.column(DOC_ID), batch.column(SHINGLES), binary_from_rows(sketches)],
                names=[DOC_ID, SHINGLES, SKETCH],
            )

    return run


_SIDES_SCHEMA = T.StructType(
    [
        T.StructField(DOC_ID, T.LongType(), False),
        T.StructField(SHINGLES, T.BinaryType(), False),
        T.StructField(SKETCH, T.BinaryType(), False),
    ]
)


# --------------------------------------------------------------------------------------------
# Small helpers


def check_incremental_config(config: DedupeConfig) -> DedupeConfig:
    """Resolve ``config`` and refuse what an indexed run does not support (:class:`UserError`)."""
    if config.method != "minhash":
        raise UserError(
            f"--index works with --method minhash only (got {config.method!r}); run "
            "--method simhash or exact without --index"
        )
    if config.representative != "smallest_id":
        raise UserError(
            "--index keeps cluster ids stable with the smallest_id representative rule only "
            f"(got representative={config.representative!r})"
        )
    if config.exact_compare_text:
        raise UserError(
            "--index groups exact copies by their 64-bit fingerprint; exact_compare_text=true "
            "is not supported with --index"
        )
    return config


def _id_type_name(dtype: T.DataType) -> str:
    return "string" if isinstance(dtype, T.StringType) else "bigint"


def _documents(df: DataFrame, config: DedupeConfig) -> DataFrame:
    """Input rows -> ``doc_id`` (string, or integer ids as bigint), ``text``."""
    id_col = F.col(config.id_col)
    if not isinstance(df.schema[config.id_col].dataType, T.StringType):
        id_col = id_col.cast(T.LongType())
    return df.select(id_col.alias(DOC_ID), F.col(config.text_col).alias(TEXT))


def _ends(edges: DataFrame, a: str, b: str) -> DataFrame:
    """The distinct endpoints of ``edges`` as one ``exact_fp`` column."""
    return (
        edges.select(F.col(a).alias(EXACT_FP))
        .unionByName(edges.select(F.col(b).alias(EXACT_FP)))
        .distinct()
    )


def _incident(edges: DataFrame, fps: DataFrame, rows: int) -> DataFrame:
    """Edges (``fp_a``, ``fp_b``) with at least one end in ``fps`` (``exact_fp``)."""
    side = maybe_broadcast(fps, rows)
    return (
        edges.join(side.withColumnRenamed(EXACT_FP, FP_A), FP_A, "left_semi")
        .unionByName(edges.join(side.withColumnRenamed(EXACT_FP, FP_B), FP_B, "left_semi"))
        .dropDuplicates([FP_A, FP_B])
    )


def _within(edges: DataFrame, fps: DataFrame, rows: int) -> DataFrame:
    """Edges (``fp_a``, ``fp_b``) with both ends in ``fps`` (``exact_fp``)."""
    side = maybe_broadcast(fps, rows)
    return edges.join(side.withColumnRenamed(EXACT_FP, FP_A), FP_A, "left_semi").join(
        side.withColumnRenamed(EXACT_FP, FP_B), FP_B, "left_semi"
    )


def _buckets_needed(keys: DataFrame, column: str, rows: int, buckets: int) -> list[int] | None:
    """The buckets holding ``keys[column]``, or None (read them all) when there are many keys."""
    if rows > BUCKET_PRUNE_MAX_KEYS_PER_BUCKET * buckets:
        return None
    found = keys.select(F.pmod(F.col(column), F.lit(buckets)).cast("int").alias("b")).distinct()
    return sorted(int(r["b"]) for r in found.collect())


def _local_checkpoint(df: DataFrame) -> DataFrame:
    return df.localCheckpoint(eager=True)


def _sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def input_files(spark: SparkSession, path: str) -> list[dict[str, Any]]:
    """The input's data files: qualified path, size and content digest (SHA-256 of the bytes
    for local files; the file system's checksum, else size and modification time, elsewhere)."""
    files, _ = list_data_files(spark, path)
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    out = []
    for name in files:
        hpath = jvm.org.apache.hadoop.fs.Path(name)
        fs = hpath.getFileSystem(conf)
        status = fs.getFileStatus(hpath)
        size = int(status.getLen())
        if str(fs.getScheme()) == "file":
            digest = "sha256:" + _sha256_file(str(hpath.toUri().getPath()))
        else:
            checksum = fs.getFileChecksum(hpath)
            digest = (
                f"{checksum.getAlgorithmName()}:{checksum.toString()}"
                if checksum is not None
                else f"mtime:{int(status.getModificationTime())}"
            )
        out.append({"path": name, "size": size, "digest": digest})
    return out


def make_run_id(inputs: list[dict[str, Any]], config: DedupeConfig) -> str:
    """A batch's identity: the same files with the same content (and columns) -> the same id."""
    payload = {
        "inputs": [[f["path"], f["size"], f["digest"]] for f in inputs],
        "id_col": config.id_col,
        "text_col": config.text_col,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def _check_paths(new_input: str, output: str, index_dir: str) -> None:
    names = {"input": new_input, "output": output, "index": index_dir}
    trimmed = {k: v.rstrip("/") for k, v in names.items()}
    for a in names:
        for b in names:
            if a < b and (
                trimmed[a] == trimmed[b]
                or trimmed[a].startswith(trimmed[b] + "/")
                or trimmed[b].startswith(trimmed[a] + "/")
            ):
                raise UserError(f"the {a} and {b} paths must not overlap ({names[a]}, {names[b]})")


# --------------------------------------------------------------------------------------------
# Publishing the outputs


class _Output:
    """OUTPUT, written through a staging directory next to it and swapped into place."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.path = path.rstrip("/")
        self.storage: Storage = storage_for(spark, path)
        self.name = basename(self.path)
        self.parent = parent(self.path)

    def _siblings(self, kind: str) -> list[str]:
        prefix = f".{self.name}.{kind}-"
        return [e for e in self.storage.list(self.parent) if e.startswith(prefix)]

    def recover(self) -> None:
        """A run killed between the two renames of a publish left OUTPUT moved aside: put it
        back. Staging directories of killed runs are removed."""
        if not self.storage.exists(self.path):
            previous = sorted(self._siblings("previous"))
            if previous:
                self.storage.rename(sibling(self.path, previous[-1]), self.path)
                log.info("restored the previous output at %s", self.path)
        for entry in self._siblings("staging") + self._siblings("previous"):
            self.storage.delete(sibling(self.path, entry))

    def finished_manifest(self) -> dict[str, Any] | None:
        """The ``manifest.json`` of a finished output (``{}`` if it has none), else None."""
        if not self.storage.exists(join(self.path, SUCCESS_MARKER)):
            return None
        text = self.storage.read_text(join(self.path, OUTPUT_MANIFEST))
        return json.loads(text) if text else {}

    def check_foreign(self) -> None:
        foreign = sorted(set(self.storage.list(self.path)) - DEDUPE_LAYOUT.known_entries)
        if foreign:
            raise UserError(
                f"output {self.path} exists and holds files this job did not write "
                f"({', '.join(foreign[:5])}); choose an empty or new directory"
            )

    def publish(self, write: Callable[[str], None]) -> None:
        """``write(staging)`` the whole output, then swap it into place."""
        nonce = new_nonce()
        staging = sibling(self.path, f".{self.name}.staging-{nonce}")
        write(staging)
        previous = None
        if self.storage.exists(self.path):
            previous = sibling(self.path, f".{self.name}.previous-{nonce}")
            self.storage.rename(self.path, previous)
        self.storage.rename(staging, self.path)
        if previous is not None:
            self.storage.delete(previous)


def _write_output(
    spark: SparkSession,
    df: DataFrame,
    index: Index,
    batch: dict[str, Any],
    config: DedupeConfig,
    output: str,
    dest: str,
) -> dict[str, Any]:
    """Write a committed batch's outputs (from its stored results) into ``dest``."""
    results = join(index.root, batch["results"])
    storage = storage_for(spark, dest)
    for name in ("clusters", "pairs", CHANGED_CLUSTERS):
        copy_tree(spark, join(results, name), join(dest, name))
    kept = spark.read.parquet(join(results, KEPT)).select(F.col(DOC_ID).alias(config.id_col))
    n_kept = int(batch["counts"]["deduplicated"])
    df.join(maybe_broadcast(kept, n_kept), config.id_col, "left_semi").write.parquet(
        join(dest, "deduplicated")
    )
    text = index.storage.read_text(join(results, REPORT_FILE))
    report = json.loads(text) if text else {}
    report["output"] = output
    storage.write_text(join(dest, REPORT_FILE), json.dumps(report, indent=2, default=str) + "\n")
    manifest = {
        "run_id": batch["run_id"],
        "mode": "incremental",
        "batch": batch["seq"],
        "inputs": batch["inputs"],
        "config_hash": hashlib.sha256(config.settings_json().encode()).hexdigest()[:16],
        "index": {"path": index.root, "version": batch["version"]},
        "committed_at": batch["committed_at"],
        "counts": batch["counts"],
    }
    storage.write_text(join(dest, OUTPUT_MANIFEST), json.dumps(manifest, indent=2) + "\n")
    storage.write_text(join(dest, SUCCESS_MARKER), "")
    return report


# --------------------------------------------------------------------------------------------
# The run


def run_incremental(
    spark: SparkSession,
    new_input: str,
    output: str,
    index_dir: str,
    config: DedupeConfig,
    overwrite: bool = False,
    *,
    buckets: int | None = None,
    keep_versions: int = KEEP_VERSIONS,
    session: SessionSettings | None = None,
) -> dict[str, Any]:
    """Dedupe the batch at ``new_input`` against the index at ``index_dir`` (created when
    absent), add it to the index and write the batch's outputs under ``output``.

    ``buckets`` (default :data:`~neardup_spark.nightly.store.DEFAULT_BUCKETS`) applies when the
    index
    is created; an existing index keeps its own (``compact_index`` re-buckets). Returns the batch
    report (``report.json``), with ``already_committed`` true when the batch was in the index
    before this call.

    Raises :class:`UserError` (exit 2) for unsupported settings, an index built with other
    settings, a finished OUTPUT without ``overwrite``, and the input errors of ``dedupe``.
    """
    started = time.perf_counter()
    timer = StageTimer()
    config = check_incremental_config(config)
    if buckets is not None and buckets < 1:
        raise UserError(f"--index-buckets must be >= 1, got {buckets}")
    _check_paths(new_input, output, index_dir)
    index = Index.open(spark, index_dir)
    index.check_settings(config)
    if index.exists and buckets is not None and buckets != index.buckets:
        log.warning(
            "the index at %s has %d buckets; --index-buckets %d applies to a new index only "
            "(`neardup index compact %s --buckets %d` re-buckets it)",
            index_dir,
            index.buckets,
            buckets,
            index_dir,
            buckets,
        )
    out = _Output(spark, output)
    out.recover()
    with timer.stage("read"):
        df, skipped = read_corpus(spark, new_input, config.skip_corrupt)
        check_columns(df, config.id_col, config.text_col)
        inputs = input_files(spark, new_input)
        run_id = make_run_id(inputs, config)
    id_type = _id_type_name(df.schema[config.id_col].dataType)
    index.check_id_type(id_type)
    batch = index.batch(run_id)
    finished = out.finished_manifest()
    if finished is not None:
        if batch is not None and finished.get("run_id") == run_id:
            log.info("batch %s is committed and published at %s: nothing to do", run_id, output)
            text = out.storage.read_text(join(out.path, REPORT_FILE))
            return {**(json.loads(text) if text else {}), "already_committed": True}
        if not overwrite:
            raise UserError(
                f"output {output} already holds a finished run; pass --overwrite to replace it"
            )
    out.check_foreign()
    index.collect_garbage(keep_versions)
    already = batch is not None
    if batch is None:
        batch = _index_batch(
            spark,
            df,
            index,
            config,
            run_id,
            inputs,
            id_type,
            buckets,
            timer,
            started,
            skipped,
            session,
        )
        index.collect_garbage(keep_versions)
        log.info("batch %s committed as index version %s", run_id, index.name)
    else:
        log.info("batch %s was committed before (batch %d): publishing it", run_id, batch["seq"])
    committed = batch
    with timer.stage("publish"):
        report: dict[str, Any] = {}

        def write(dest: str) -> None:
            report.update(_write_output(spark, df, index, committed, config, output, dest))

        out.publish(write)
    report["already_committed"] = already
    return report


def _index_batch(
    spark: SparkSession,
    df: DataFrame,
    index: Index,
    config: DedupeConfig,
    run_id: str,
    inputs: list[dict[str, Any]],
    id_type: str,
    buckets: int | None,
    timer: StageTimer,
    started: float,
    skipped: list[dict[str, str]],
    session: SessionSettings | None,
) -> dict[str, Any]:
    """Find the batch's clusters, write and commit the next index version; returns its batch
    entry of the manifest."""
    n_buckets = index.buckets if index.exists else (buckets or DEFAULT_BUCKETS)
    seq = len(index.batches) + 1
    nonce = new_nonce()
    version = index.version + 1
    version_name = f"v{version:06d}-{nonce}"
    segment = f"s{version:06d}-{nonce}"
    results = f"{BATCHES}/b{seq:06d}-{run_id}-{nonce}"
    results_path = join(index.root, results)
    id_dtype = T.StringType() if id_type == "string" else T.LongType()

    def keep(frame: DataFrame, level: StorageLevel = MEMORY) -> DataFrame:
        # Kept on the executors at its first action, lineage cut: later plans stay small (a
        # persisted DataFrame still drags its whole lineage into every plan built on it).
        return frame.localCheckpoint(eager=False, storageLevel=level)

    with timer.stage("check_ids"):
        check_ids(df, config.id_col)

    # ---- fingerprints of the new documents
    fps = keep(
        _documents(df, config).transform(text_features(config.normalize, config.shingle_unit)), DISK
    )
    with timer.stage("fingerprint") as counted:
        counts = input_counts(fps, config.ngram, config.char_ngram)
        counted["rows"] = n_new = counts["input_rows"]
    new_docs = fps.select(DOC_ID, HAS_TEXT, EXACT_FP)
    batch_fps = keep(new_docs.where(F.col(HAS_TEXT)).select(EXACT_FP).distinct())

    # ---- what the index already holds about them (n_new bounds every batch-side table)
    old = index.docs()
    live_old: DataFrame | None = None
    replaced: DataFrame | None = None
    live_before: DataFrame | None = None
    known: DataFrame | None = None
    n_known = 0
    contents_table = index.table(CONTENTS)
    with timer.stage("lookup") as counted:
        if old is not None:
            new_ids = maybe_broadcast(new_docs.select(DOC_ID), n_new)
            replaced = keep(
                old.join(new_ids, DOC_ID, "left_semi").select(
                    DOC_ID,
                    F.col(EXACT_FP).alias(_PREV_FP),
                    F.col(HAS_TEXT).alias(_PREV_HAS_TEXT),
                    CLUSTER_ID,
                )
            )
            live_old = keep(old.join(new_ids, DOC_ID, "left_anti"))
            # Contents of the batch that some document held before it (replaced ones included).
            live_before = keep(
                old.where(F.col(HAS_TEXT))
                .select(EXACT_FP)
                .join(maybe_broadcast(batch_fps, n_new), EXACT_FP, "left_semi")
                .distinct()
            )
        if contents_table is not None:
            fp_buckets = _buckets_needed(batch_fps, EXACT_FP, n_new, n_buckets)
            table = index.table(CONTENTS, fp_buckets)
            assert table is not None
            known = keep(
                table.select(EXACT_FP)
                .join(maybe_broadcast(batch_fps, n_new), EXACT_FP, "left_semi")
                .distinct()
            )
            counted["rows"] = n_known = known.count()
    counts["known_contents"] = n_known

    # ---- sketches of the new contents (one document per distinct text)
    text_docs = fps.where(F.col(HAS_TEXT))
    if known is not None and n_known:
        text_docs = text_docs.join(maybe_broadcast(known, n_known), EXACT_FP, "left_anti")
    # Each content's smallest document: only ids and fingerprints move, never the texts.
    rep_ids = text_docs.groupBy(EXACT_FP).agg(F.min(DOC_ID).alias(DOC_ID))
    reps = (
        text_docs.join(maybe_broadcast(rep_ids, n_new), [EXACT_FP, DOC_ID], "left_semi")
        .drop(DOC_ID)
        .withColumnRenamed(EXACT_FP, DOC_ID)
    )
    sketches = keep(
        reps.transform(minhash_sketch(config)).mapInArrow(_compact_batches, _set_schema()), DISK
    )
    with timer.stage("sketch") as counted:
        n_new_contents = counted["rows"] = sketches.count()
    counts["new_contents"] = n_new_contents
    n_keys = n_new_contents * config.banding.bands

    # ---- candidates: new x new (LSH buckets), new x indexed (band-key lookup)
    bands_table = index.table(BANDS)
    with timer.stage("candidates") as counted:
        candidates = sketches.select(DOC_ID, BAND_KEYS).transform(bucket_members)
        candidates = candidates.transform(candidate_pairs(config.bucket_all_pairs_max))
        if bands_table is not None and n_new_contents:
            keys = sketches.select(
                F.col(DOC_ID).alias(_NEW_FP), F.explode(BAND_KEYS).alias(BAND_KEY)
            )
            key_buckets = _buckets_needed(keys, BAND_KEY, n_keys, n_buckets)
            table = index.table(BANDS, key_buckets)
            assert table is not None
            # Per band key, the indexed contents up to bucket_all_pairs_max (the smallest
            # fingerprints): a large bucket costs each new content a few candidates, not one
            # per indexed member (which would grow with the index, night after night).
            first = Window.partitionBy(BAND_KEY).orderBy(EXACT_FP)
            old_pairs = (
                table.select(BAND_KEY, EXACT_FP)
                .join(maybe_broadcast(keys.select(BAND_KEY), n_keys), BAND_KEY, "left_semi")
                .withColumn(_RANK, F.row_number().over(first))
                .where(F.col(_RANK) <= config.bucket_all_pairs_max)
                .join(maybe_broadcast(keys, n_keys), BAND_KEY)
                .select(
                    F.least(_NEW_FP, EXACT_FP).alias(DOC_A),
                    F.greatest(_NEW_FP, EXACT_FP).alias(DOC_B),
                )
            )
            candidates = candidates.unionByName(old_pairs).distinct()
        candidates = keep(candidates)
        counts["candidate_pairs"] = counted["rows"] = n_candidates = candidates.count()

    # ---- exact verification (old sides' shingle sets from the index)
    with timer.stage("verify") as counted:
        sides = sketches.select(DOC_ID, SHINGLES, SKETCH)
        if contents_table is not None and n_candidates:
            ends = _ends(candidates, DOC_A, DOC_B)
            end_buckets = _buckets_needed(ends, EXACT_FP, 2 * n_candidates, n_buckets)
            table = index.table(CONTENTS, end_buckets)
            assert table is not None
            # Materialised once: scoring joins the sides twice (one per end of a pair), which
            # would otherwise scan the index's shingle sets twice.
            old_sides = keep(
                table.select(EXACT_FP, SHINGLES)
                .join(maybe_broadcast(ends, 2 * n_candidates), EXACT_FP, "left_semi")
                .select(F.col(EXACT_FP).alias(DOC_ID), SHINGLES)
                .mapInArrow(_sketch_sets_fn(config.num_perm, config.seed), _SIDES_SCHEMA)
            )
            counted["indexed_sides"] = old_sides.count()
            sides = sides.unionByName(old_sides)
        scored = candidates.transform(
            score_candidates(sides, n_candidates <= BROADCAST_MAX_ROWS)
        ).where(F.col(JACCARD) >= F.lit(config.threshold))
        new_edges = keep(
            scored.select(F.col(DOC_A).alias(FP_A), F.col(DOC_B).alias(FP_B), JACCARD, ESTIMATE)
        )
        counts["near_pairs"] = counted["verified"] = n_near = new_edges.count()

    # ---- the documents whose cluster may change: the new ones and the touched old clusters
    pairs_table = index.table(PAIRS)
    with timer.stage("touched") as counted:
        members = new_docs.select(
            DOC_ID,
            HAS_TEXT,
            EXACT_FP,
            F.lit(None).cast(id_dtype).alias(_OLD_CLUSTER),
            F.lit(False).alias(_IS_OLD),
            F.lit(seq).cast("int").alias(BATCH),
        )
        n_touched = 0
        touched: DataFrame | None = None
        if live_old is not None and replaced is not None:
            neighbours = batch_fps.unionByName(_ends(new_edges, FP_A, FP_B))
            if pairs_table is not None and n_known:
                assert known is not None
                incident = _incident(pairs_table.select(FP_A, FP_B), known, n_known)
                neighbours = neighbours.unionByName(_ends(incident, FP_A, FP_B))
            touched = keep(
                live_old.where(F.col(HAS_TEXT))
                .join(neighbours.distinct(), EXACT_FP, "left_semi")
                .select(CLUSTER_ID)
                .unionByName(replaced.select(CLUSTER_ID))
                .distinct()
            )
            n_touched = touched.count()
            if n_touched:
                old_members = live_old.join(
                    maybe_broadcast(touched, n_touched), CLUSTER_ID, "left_semi"
                )
                members = members.unionByName(
                    old_members.select(
                        DOC_ID,
                        HAS_TEXT,
                        EXACT_FP,
                        F.col(CLUSTER_ID).alias(_OLD_CLUSTER),
                        F.lit(True).alias(_IS_OLD),
                        BATCH,
                    )
                )
        members = keep(members)
        counted["rows"] = n_members = members.count() if n_touched else n_new
        counts["touched_clusters"] = n_touched

    # ---- clusters of the touched documents
    history = (
        members.join(replaced.select(DOC_ID, _PREV_FP, _PREV_HAS_TEXT), DOC_ID, "left")
        if replaced is not None
        else members.select(
            "*",
            F.lit(None).cast("long").alias(_PREV_FP),
            F.lit(None).cast("boolean").alias(_PREV_HAS_TEXT),
        )
    )
    if live_before is not None:
        flags = live_before.withColumn(_LIVE_BEFORE, F.lit(True))
        history = history.join(maybe_broadcast(flags, n_new), EXACT_FP, "left")
    else:
        history = history.withColumn(_LIVE_BEFORE, F.lit(None).cast("boolean"))
    stored = pairs_table.select(FP_A, FP_B, JACCARD, ESTIMATE) if pairs_table is not None else None
    with timer.stage("components") as counted:
        if n_members <= config.components_single_task_max_edges:
            clustered = _cluster_on_driver(spark, history, new_edges, stored if n_touched else None)
        else:
            clustered = _cluster_with_spark(
                history, new_edges, stored if n_touched else None, n_members, n_new, config, keep
            )
        assigned, changed, batch_pairs, member_stats, components = clustered
        counted["rows"] = n_members

    # ---- write: segment, batch results, docs; then commit
    with timer.stage("write") as counted:
        segment_rows: dict[str, int] = {}
        if n_new_contents:
            write_bucketed(
                sketches.select(F.col(DOC_ID).alias(EXACT_FP), N_SHINGLES, SHINGLES),
                index.segment_path(CONTENTS, segment),
                EXACT_FP,
                n_buckets,
                n_new_contents,
                CONTENTS_ROWS_PER_FILE,
            )
            write_bucketed(
                sketches.select(
                    F.explode(BAND_KEYS).alias(BAND_KEY), F.col(DOC_ID).alias(EXACT_FP)
                ),
                index.segment_path(BANDS, segment),
                BAND_KEY,
                n_buckets,
                n_keys,
                BANDS_ROWS_PER_FILE,
            )
            segment_rows[CONTENTS] = n_new_contents
            segment_rows[BANDS] = n_keys
        if n_near:
            new_edges.coalesce(max(1, n_near // 5_000_000 + 1)).write.parquet(
                index.segment_path(PAIRS, segment)
            )
            segment_rows[PAIRS] = n_near
        new_rows = assigned.where(~F.col(_IS_OLD))
        one_file = max(1, n_new // 2_000_000 + 1)
        new_rows.select(
            DOC_ID, CLUSTER_ID, (F.col(DOC_ID) == F.col(CLUSTER_ID)).alias(IS_REPRESENTATIVE)
        ).coalesce(one_file).write.parquet(join(results_path, "clusters"))
        new_rows.where(F.col(KEPT)).select(DOC_ID).coalesce(one_file).write.parquet(
            join(results_path, KEPT)
        )
        batch_pairs.coalesce(one_file).write.parquet(join(results_path, "pairs"))
        changed.coalesce(1).write.parquet(join(results_path, CHANGED_CLUSTERS))
        docs_after = assigned.select(DOC_ID, HAS_TEXT, EXACT_FP, CLUSTER_ID, BATCH)
        if live_old is not None:
            rest = live_old.select(DOC_ID, HAS_TEXT, EXACT_FP, CLUSTER_ID, BATCH)
            if touched is not None and n_touched:
                rest = rest.join(maybe_broadcast(touched, n_touched), CLUSTER_ID, "left_anti")
            docs_after = rest.unionByName(docs_after)
        before = index.counts
        n_replaced = member_stats["replaced"]
        n_docs_after = int(before.get("documents", 0)) - n_replaced + n_new
        (
            docs_after.repartition(max(1, n_docs_after // 1_000_000 + 1), DOC_ID)
            .sortWithinPartitions(DOC_ID)
            .write.parquet(join(index.root, version_name, DOCS))
        )
        counted["rows"] = n_docs_after

    counts.update(
        replaced=n_replaced,
        replaced_unchanged=member_stats["replaced_unchanged"],
        revived_contents=n_known - member_stats["live_before"],
        # Documents with text, less one per content no document held before the batch.
        exact_copies=member_stats["text_docs"] - member_stats["fresh_contents"],
        joined_existing=member_stats["joined_existing"],
        changed_clusters=member_stats["changed_clusters"],
        merged_clusters=member_stats["merged_clusters"],
        deduplicated=member_stats["deduplicated"],
        removed=n_new - member_stats["deduplicated"],
        clusters=member_stats["clusters"],
    )
    index_counts = {
        "documents": n_docs_after,
        "clusters": int(before.get("clusters", 0)) - n_touched + member_stats["member_clusters"],
        "contents": int(before.get("contents", 0)) + n_new_contents,
        "pairs": int(before.get("pairs", 0)) + n_near,
        "batches": seq,
    }
    wall = time.perf_counter() - started
    report = {
        "neardup_spark_version": __version__,
        "method": config.method,
        "mode": "incremental",
        "run_id": run_id,
        "batch": seq,
        "inputs": inputs,
        "skipped_files": skipped,
        "config": {**config.to_dict(), **(session.to_dict() if session else {})},
        "counts": counts,
        "index": {
            "path": index.root,
            "version_before": index.name,
            "version": version_name,
            "segments": len(index.segments) + (1 if segment_rows else 0),
            **index_counts,
        },
        "components": components,
        "banding": banding_section(config),
        "spark": {"version": spark.version, "master": spark.sparkContext.master},
        "stage_seconds": timer.seconds,
        "wall_seconds": round(wall, 3),
        "docs_per_second": round(n_new / wall, 1) if wall else None,
    }
    index.storage.write_text(
        join(results_path, REPORT_FILE), json.dumps(report, indent=2, default=str) + "\n"
    )
    entry = {
        "seq": seq,
        "run_id": run_id,
        "committed_at": now_iso(),
        "version": version_name,
        "inputs": inputs,
        "results": results,
        "counts": counts,
    }
    segments = index.segments
    if segment_rows:
        segments.append({"name": segment, "batch": seq, "rows": segment_rows})
    manifest = new_manifest(
        index,
        config,
        id_type,
        segments,
        [*index.batches, entry],
        index_counts,
        n_buckets,
        nonce,
    )
    with timer.stage("commit"):
        index.commit(manifest)
    return entry


def _unchanged() -> Column:
    """A re-crawled document whose text did not change."""
    return (
        F.col(_PREV_FP).isNotNull()
        & (F.col(_PREV_FP) == F.col(EXACT_FP))
        & (F.col(_PREV_HAS_TEXT) == F.col(HAS_TEXT))
    )


def _cluster_on_driver(
    spark: SparkSession, history: DataFrame, new_edges: DataFrame, stored: DataFrame | None
) -> tuple[DataFrame, DataFrame, DataFrame, dict[str, int], dict[str, Any]]:
    """:func:`cluster_members` on the driver: the members and their edges are collected (one
    job each), the results come back as small DataFrames."""
    members = history.toArrow()
    edges = [new_edges.select(FP_A, FP_B, JACCARD, ESTIMATE).toArrow()]
    if stored is not None:
        fps = np.unique(members.filter(members.column(HAS_TEXT)).column(EXACT_FP).to_numpy())
        wanted = spark.createDataFrame(pa.table({EXACT_FP: pa.array(fps, pa.int64())}))
        edges.append(_within(stored, wanted, len(fps)).toArrow())
    result = cluster_members(members, pa.concat_tables(edges, promote_options="permissive"))
    return (
        spark.createDataFrame(result.assigned),
        spark.createDataFrame(result.changed),
        spark.createDataFrame(result.pairs),
        result.stats,
        {"strategy": "driver", "rounds": 0},
    )


def _cluster_with_spark(
    history: DataFrame,
    new_edges: DataFrame,
    stored: DataFrame | None,
    n_members: int,
    n_new: int,
    config: DedupeConfig,
    keep: Callable[[DataFrame], DataFrame],
) -> tuple[DataFrame, DataFrame, DataFrame, dict[str, int], dict[str, Any]]:
    """The distributed twin of :func:`cluster_members`, for graphs too large for the driver."""
    members = keep(history)
    member_fps = keep(members.where(F.col(HAS_TEXT)).select(EXACT_FP).distinct())
    live_edges = new_edges
    if stored is not None:
        live_edges = live_edges.unionByName(_within(stored, member_fps, n_members))
        live_edges = live_edges.dropDuplicates([FP_A, FP_B])
    live_edges = _within(live_edges, member_fps, n_members)
    anchors = (
        members.where(F.col(HAS_TEXT))
        .groupBy(EXACT_FP)
        .agg(
            F.min(DOC_ID).alias(_ANCHOR),
            F.min_by(F.col(_IS_OLD), F.col(DOC_ID)).alias(_ANCHOR_OLD),
        )
    )
    exact_edges = (
        members.where(F.col(HAS_TEXT))
        .join(anchors, EXACT_FP)
        .where(F.col(DOC_ID) != F.col(_ANCHOR))
        .select(F.col(_ANCHOR).alias(DOC_A), F.col(DOC_ID).alias(DOC_B), _IS_OLD, _ANCHOR_OLD)
    )
    near_edges = live_edges.join(
        anchors.select(F.col(EXACT_FP).alias(FP_A), F.col(_ANCHOR).alias(_ANCHOR_A)), FP_A
    ).join(anchors.select(F.col(EXACT_FP).alias(FP_B), F.col(_ANCHOR).alias(_ANCHOR_B)), FP_B)
    edges = keep(
        exact_edges.select(
            DOC_A,
            DOC_B,
            F.lit(None).cast("long").alias(FP_A),
            F.lit(None).cast("long").alias(FP_B),
            F.lit(None).cast("double").alias(JACCARD),
            F.lit(None).cast("double").alias(ESTIMATE),
            _IS_OLD,
            _ANCHOR_OLD,
        ).unionByName(
            near_edges.select(
                F.least(_ANCHOR_A, _ANCHOR_B).alias(DOC_A),
                F.greatest(_ANCHOR_A, _ANCHOR_B).alias(DOC_B),
                FP_A,
                FP_B,
                JACCARD,
                ESTIMATE,
                F.lit(None).cast("boolean").alias(_IS_OLD),
                F.lit(None).cast("boolean").alias(_ANCHOR_OLD),
            )
        )
    )
    n_graph = edges.count()
    labels, rounds = connected_components(
        edges.select(DOC_A, DOC_B),
        _local_checkpoint,
        n_edges=n_graph,
        single_task_max_edges=config.components_single_task_max_edges,
    )
    if rounds == 0:  # one task's labels, read by several branches below: computed once
        labels = keep(labels)
    assigned = keep(_assign_ids(members, labels))
    new_text = ~F.col(_IS_OLD) & F.col(HAS_TEXT)
    changed_row = F.col(_IS_OLD) & (F.col(_OLD_CLUSTER) != F.col(CLUSTER_ID))
    row = assigned.agg(
        F.sum((~F.col(_IS_OLD) & F.col(_HAS_OLD)).cast("long")).alias("joined_existing"),
        F.sum(F.col(KEPT).cast("long")).alias("deduplicated"),
        F.sum(F.col(_PREV_FP).isNotNull().cast("long")).alias("replaced"),
        F.sum(_unchanged().cast("long")).alias("replaced_unchanged"),
        F.sum(new_text.cast("long")).alias("text_docs"),
        F.countDistinct(F.when(new_text & F.col(_LIVE_BEFORE).isNull(), F.col(EXACT_FP))).alias(
            "fresh_contents"
        ),
        F.countDistinct(F.when(new_text & F.col(_LIVE_BEFORE), F.col(EXACT_FP))).alias(
            "live_before"
        ),
        F.countDistinct(CLUSTER_ID).alias("member_clusters"),
        F.countDistinct(F.when(~F.col(_IS_OLD), F.col(CLUSTER_ID))).alias("clusters"),
        F.countDistinct(F.when(changed_row, F.struct(_OLD_CLUSTER, CLUSTER_ID))).alias(
            "changed_clusters"
        ),
        F.countDistinct(F.when(changed_row, F.col(_OLD_CLUSTER))).alias("merged_clusters"),
    ).first()
    assert row is not None
    stats = {k: int(v or 0) for k, v in row.asDict().items()}
    changed = (
        assigned.where(changed_row)
        .select(F.col(_OLD_CLUSTER).alias(OLD_CLUSTER_ID), F.col(CLUSTER_ID).alias(NEW_CLUSTER_ID))
        .distinct()
    )
    # The edges the batch adds: near edges touching a content no document held before the
    # batch, exact edges touching a new document.
    fresh = assigned.where(new_text & F.col(_LIVE_BEFORE).isNull()).select(EXACT_FP).distinct()
    added_near = edges.where(F.col(FP_A).isNotNull())
    added_near = added_near.join(
        _incident(added_near.select(FP_A, FP_B), fresh, n_new), [FP_A, FP_B], "left_semi"
    )
    added_exact = edges.where(F.col(FP_A).isNull() & (~F.col(_IS_OLD) | ~F.col(_ANCHOR_OLD)))
    pairs = exact_pairs(added_exact).unionByName(minhash_pairs(added_near))
    strategy = (
        "single_task" if n_graph <= config.components_single_task_max_edges else "distributed"
    )
    return (
        assigned.select(DOC_ID, HAS_TEXT, EXACT_FP, CLUSTER_ID, BATCH, _IS_OLD, KEPT),
        changed,
        pairs,
        stats,
        {"strategy": strategy, "rounds": rounds},
    )


def _assign_ids(members: DataFrame, labels: DataFrame) -> DataFrame:
    """Members + component labels -> final cluster ids (the stable rule of the module docstring)
    and whether each new document goes to ``deduplicated/``.

    Output columns: the members' columns, ``component``, ``cluster_id``, ``has_old``, ``kept``.
    """
    comp = members.join(labels, DOC_ID, "left").withColumn(
        COMPONENT, F.coalesce(F.col(COMPONENT), F.col(DOC_ID))
    )
    # An old cluster id may survive in a component only while its representative is in it.
    claims = comp.where(F.col(_IS_OLD)).select(COMPONENT, F.col(_OLD_CLUSTER).alias(_WINNER))
    present = comp.select(F.col(DOC_ID).alias(_WINNER), COMPONENT)
    winners = (
        claims.distinct()
        .join(present, [_WINNER, COMPONENT], "left_semi")
        .groupBy(COMPONENT)
        .agg(F.min(_WINNER).alias(_WINNER))
    )
    has_old = comp.groupBy(COMPONENT).agg(F.max(F.col(_IS_OLD)).alias(_HAS_OLD))
    out = (
        comp.join(winners, COMPONENT, "left")
        .join(has_old, COMPONENT)
        .withColumn(CLUSTER_ID, F.coalesce(F.col(_WINNER), F.col(COMPONENT)))
    )
    kept = ~F.col(_IS_OLD) & (F.col(DOC_ID) == F.col(CLUSTER_ID)) & ~F.col(_HAS_OLD) & ~_unchanged()
    return out.withColumn(KEPT, kept)


# --------------------------------------------------------------------------------------------
# Clustering the touched documents on the driver (graphs up to a few million nodes)


@dataclass
class ClusterResult:
    """What :func:`cluster_members` computes (Arrow tables, ids of the members' type)."""

    assigned: pa.Table  # doc_id, has_text, exact_fp, cluster_id, batch, is_old, kept
    changed: pa.Table  # old_cluster_id, new_cluster_id
    pairs: pa.Table  # PAIRS_COLUMNS: the edges the batch adds
    stats: dict[str, int]


def _present(mapped: np.ndarray) -> np.ndarray:
    """Which values of a ``Series.reindex`` result were found (missing ones are NaN)."""
    return ~np.isnan(mapped) if mapped.dtype.kind == "f" else np.ones(len(mapped), dtype=bool)


def _nunique(values: np.ndarray) -> int:
    return int(np.unique(values).size)


def cluster_members(members: pa.Table, edges: pa.Table) -> ClusterResult:
    """Final clusters of the touched documents, in one process (NumPy and SciPy).

    ``members``: ``doc_id``, ``has_text``, ``exact_fp``, ``old_cluster`` (the cluster id of an
    indexed document, null for a new one), ``is_old``, ``batch``, ``prev_exact_fp`` and
    ``prev_has_text`` (the replaced version of a re-crawled document, else null),
    ``live_before`` (true when a document held this content before the batch, else null).
    ``edges``: ``fp_a``, ``fp_b``, ``jaccard``, ``estimate``: verified edges between contents;
    those with an end no member holds (a dead content) are ignored.

    Each content's documents are joined to its smallest one (its anchor), edges join anchors;
    components then get ids by the stable rule of the module docstring. Same results as the
    distributed path of :func:`_index_batch`.
    """
    ids_all = members.column(DOC_ID).to_numpy(zero_copy_only=False)
    codes, _ = pd.factorize(ids_all, sort=True)
    order = np.argsort(codes)
    m = members.take(pa.array(order))
    n = m.num_rows
    ids = m.column(DOC_ID).to_numpy(zero_copy_only=False)  # sorted: a node is its rank
    id_type = m.schema.field(DOC_ID).type

    def col(name: str, fill: Any = None) -> np.ndarray:
        column = m.column(name)
        if fill is not None:
            column = pc.fill_null(column, fill)
        return column.to_numpy(zero_copy_only=False)

    has_text, is_old = col(HAS_TEXT).astype(bool), col(_IS_OLD).astype(bool)
    fp = col(EXACT_FP).astype(np.int64)
    rank = np.arange(n)
    text = np.flatnonzero(has_text)
    # Anchors: each content's smallest document.
    by_fp = pd.Series(rank[text]).groupby(fp[text]).min()
    anchor = np.full(n, -1, dtype=np.int64)
    anchor[text] = by_fp.reindex(fp[text]).to_numpy()
    copies = text[anchor[text] != text]
    # Near edges between live contents, as anchor pairs.
    e_a = by_fp.reindex(edges.column(FP_A).to_numpy(zero_copy_only=False)).to_numpy()
    e_b = by_fp.reindex(edges.column(FP_B).to_numpy(zero_copy_only=False)).to_numpy()
    near = np.flatnonzero(_present(e_a) & _present(e_b))
    near_a, near_b = e_a[near].astype(np.int64), e_b[near].astype(np.int64)
    graph = coo_matrix(
        (
            np.ones(copies.size + near.size, dtype=np.int8),
            (np.concatenate([anchor[copies], near_a]), np.concatenate([copies, near_b])),
        ),
        shape=(n, n),
    )
    k, labels = graph_components(graph, directed=False)
    smallest = np.full(k, n, dtype=np.int64)
    np.minimum.at(smallest, labels, rank)
    # An old id survives while its representative is in the component: smallest such id wins.
    old_ids = m.column(_OLD_CLUSTER)
    claimed = is_old & old_ids.is_valid().to_numpy(zero_copy_only=False).astype(bool)
    claim = np.full(n, -1, dtype=np.int64)
    claim[claimed] = pd.Index(ids).get_indexer(
        old_ids.filter(pa.array(claimed)).to_numpy(zero_copy_only=False)
    )
    valid = np.flatnonzero((claim >= 0) & (labels[np.maximum(claim, 0)] == labels))
    winner = np.full(k, n, dtype=np.int64)
    np.minimum.at(winner, labels[valid], claim[valid])
    cluster = np.where(winner[labels] < n, winner[labels], smallest[labels])
    has_old = np.zeros(k, dtype=bool)
    has_old[labels[is_old]] = True
    prev_fp = m.column(_PREV_FP)
    replaced = prev_fp.is_valid().to_numpy(zero_copy_only=False).astype(bool)
    unchanged = replaced & (col(_PREV_FP, 0) == fp) & (col(_PREV_HAS_TEXT, False) == has_text)
    kept = ~is_old & (cluster == rank) & ~has_old[labels] & ~unchanged
    cluster_ids = pa.array(ids[cluster], id_type)

    moved = np.flatnonzero(is_old & (claim != cluster))
    changed = (
        pa.table(
            {
                OLD_CLUSTER_ID: old_ids.take(pa.array(moved)),
                NEW_CLUSTER_ID: cluster_ids.take(pa.array(moved)),
            }
        )
        .group_by([OLD_CLUSTER_ID, NEW_CLUSTER_ID])
        .aggregate([])
    )
    # The edges the batch adds: exact edges touching a new document, near edges touching a
    # content no document held before the batch.
    added_exact = copies[~(is_old[copies] & is_old[anchor[copies]])]
    new_text = ~is_old & has_text
    fresh = np.unique(fp[new_text & ~col(_LIVE_BEFORE, False).astype(bool)])
    edge_fp_a = edges.column(FP_A).to_numpy(zero_copy_only=False)[near]
    edge_fp_b = edges.column(FP_B).to_numpy(zero_copy_only=False)[near]
    added = np.flatnonzero(np.isin(edge_fp_a, fresh) | np.isin(edge_fp_b, fresh))
    lo = np.minimum(near_a[added], near_b[added])
    hi = np.maximum(near_a[added], near_b[added])
    jaccard = edges.column(JACCARD).to_numpy(zero_copy_only=False)[near][added]
    estimate = edges.column(ESTIMATE).to_numpy(zero_copy_only=False)[near][added]
    n_exact, n_near = added_exact.size, added.size
    pairs = pa.table(
        {
            DOC_A: pa.array(np.concatenate([ids[anchor[added_exact]], ids[lo]]), id_type),
            DOC_B: pa.array(np.concatenate([ids[added_exact], ids[hi]]), id_type),
            METHOD: pa.array(["exact"] * n_exact + ["minhash"] * n_near, pa.string()),
            SIMILARITY: pa.array(np.concatenate([np.ones(n_exact), jaccard]), pa.float64()),
            JACCARD: pa.array(np.concatenate([np.ones(n_exact), jaccard]), pa.float64()),
            ESTIMATE: pa.array(
                np.concatenate([np.full(n_exact, np.nan), estimate]), pa.float64(), from_pandas=True
            ),
            HAMMING: pa.nulls(n_exact + n_near, pa.int32()),
        }
    )
    assigned = pa.table(
        {
            DOC_ID: m.column(DOC_ID),
            HAS_TEXT: m.column(HAS_TEXT),
            EXACT_FP: m.column(EXACT_FP),
            CLUSTER_ID: cluster_ids,
            BATCH: m.column(BATCH),
            _IS_OLD: m.column(_IS_OLD),
            KEPT: pa.array(kept),
        }
    )
    stats = {
        "joined_existing": int((~is_old & has_old[labels]).sum()),
        "deduplicated": int(kept.sum()),
        "replaced": int(replaced.sum()),
        "replaced_unchanged": int(unchanged.sum()),
        "text_docs": int(new_text.sum()),
        "fresh_contents": int(fresh.size),
        "live_before": _nunique(fp[new_text & col(_LIVE_BEFORE, False).astype(bool)]),
        "member_clusters": _nunique(cluster),
        "clusters": _nunique(cluster[~is_old]),
        "changed_clusters": changed.num_rows,
        "merged_clusters": _nunique(claim[moved]),
    }
    return ClusterResult(assigned, changed, pairs, stats)
