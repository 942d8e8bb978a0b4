"""The batch's normalised texts as its per-document pass computed them (the *stash*), for a
night indexed in Spark jobs: verification reads its new contents' texts from here and the new
segment's parts are written from here, instead of the input being read and normalised twice
more and every text shuffled by fingerprint (the segment write of a 1M-document build: 65.7 s
of its 166.7 s, a plain run's whole write 15.4 s).

Each task of the pass writes one Arrow IPC file into the stash directory: a row per
document with text (``fp``, ``doc_id``, ``band_keys``, ``text``), in :data:`STASH_BUCKETS`
record batches, batch ``b`` holding the fingerprints whose top 8 bits are ``b``. Whoever needs
some fingerprints reads their buckets' batches from every file (the IPC footer locates them):
tasks given disjoint bucket ranges read the stash once between them, and nothing is shuffled.

A content's text is its smallest document's, as the index always took it (one content's
documents share their normalised text unless two 64-bit fingerprints collide). A task run twice
(retried, speculative) leaves two files with the same rows, which changes nothing: a reader keeps
one row per fingerprint. The stash lives in the new segment's directory and is deleted once the
segment is written; a killed run's goes with its uncommitted segment
(:meth:`~neardup_spark.nightly.store.Index.collect_garbage`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.batch.documents import documents_columns_fn
from neardup_spark.columns import BAND_KEYS, DOC_ID, EXACT_FP, HAS_TEXT, NORMALIZED, TEXT
from neardup_spark.config import DedupeConfig
from neardup_spark.io.filesystem import Storage, is_local, join
from neardup_spark.nightly.content_files import open_input, sorted_member_mask, write_ipc_file
from neardup_spark.runtime.engine import default_parallelism
from neardup_spark.stages.documents import documents_schema

STASH_DIR = "_stash"
STASH_SUFFIX = ".arrow"
# A stash on remote storage is compressed; a local one is not: zstd cost the per-document pass
# 17 us a document to write and the readers 4 us to read (150,000 documents: 2.5 s and 0.6 s),
# and an uncompressed file is read back memory-mapped, without a copy (0.03 s).
REMOTE_STASH_CODEC = "zstd"
# Buckets of a stash file (record batches), by a fingerprint's top bits: enough that the tasks
# reading disjoint ranges of them get about equal shares.
STASH_BUCKETS = 256
_BUCKET_SHIFT = np.uint64(64 - 8)
FETCHED_SCHEMA = T.StructType(
    [T.StructField(DOC_ID, T.LongType(), False), T.StructField(TEXT, T.StringType(), False)]
)


@dataclass(frozen=True)
class TextStash:
    """A batch's stash: its directory and its files (full paths)."""

    directory: str
    files: tuple[str, ...]


def stash_files(storage: Storage, directory: str) -> TextStash:
    """The stash in ``directory`` once the pass that writes it has run (a file under its
    temporary name is a task that did not finish)."""
    names = sorted(n for n in storage.list(directory) if n.endswith(STASH_SUFFIX))
    return TextStash(directory, tuple(join(directory, n) for n in names))


def bucket_of(fps: np.ndarray) -> np.ndarray:
    """The stash bucket of each fingerprint (int64): its top 8 bits.

    >>> bucket_of(np.array([0, -1, 1 << 56], np.int64)).tolist()
    [0, 255, 1]
    """
    return (fps.view(np.uint64) >> _BUCKET_SHIFT).astype(np.int64)


def bucket_range(part: int, parts: int) -> tuple[int, int]:
    """The buckets ``[first, last)`` of the ``part``-th of ``parts`` equal ranges."""
    return part * STASH_BUCKETS // parts, (part + 1) * STASH_BUCKETS // parts


def stash_codec(path: str) -> str | None:
    """The compression of a stash file at ``path``: none on a local file system."""
    return None if is_local(path) else REMOTE_STASH_CODEC


def write_stash_file(path: str, rows: pa.Table, codec: str | None) -> int:
    """``rows`` (``fp``, ``doc_id``, ``band_keys``, ``text``) as a stash file compressed with
    ``codec``: one record batch per bucket, empty ones too, so batch ``b`` is bucket ``b``. Its
    bytes."""
    buckets = bucket_of(rows.column(EXACT_FP).to_numpy())
    order = np.argsort(buckets, kind="stable")
    rows = rows.take(pa.array(order)).combine_chunks()
    bounds = np.searchsorted(buckets[order], np.arange(STASH_BUCKETS + 1))
    whole = rows.to_batches()[0] if rows.num_rows else pa.RecordBatch.from_pylist([], rows.schema)
    batches = (whole.slice(a, b - a) for a, b in pairwise(bounds.tolist()))
    return write_ipc_file(path, rows.schema, batches, None, codec)


def read_buckets(paths: Sequence[str], first: int, last: int) -> pa.Table | None:
    """Buckets ``[first, last)`` of every stash file in ``paths``, as one table (None: no
    files)."""
    pieces: list[pa.RecordBatch] = []
    schema = None
    for path in paths:
        reader = pa.ipc.open_file(open_input(path))
        if reader.num_record_batches != STASH_BUCKETS:
            raise RuntimeError(f"{path}: not a stash file ({reader.num_record_batches} batches)")
        schema = reader.schema
        pieces.extend(reader.get_batch(b) for b in range(first, last))
    return pa.Table.from_batches(pieces, schema) if schema is not None else None


def content_rows(rows: pa.Table, keep: np.ndarray) -> np.ndarray:
    """The rows of ``rows`` that stand for their contents: of the fingerprints where ``keep`` (a
    mask of the rows), one row each (its smallest ``doc_id``'s), in fingerprint order."""
    fps = rows.column(EXACT_FP).to_numpy()
    at = np.flatnonzero(keep)
    ids = pa.table({EXACT_FP: fps[at], DOC_ID: rows.column(DOC_ID).take(pa.array(at))})
    at = at[pc.sort_indices(ids, [(EXACT_FP, "ascending"), (DOC_ID, "ascending")]).to_numpy()]
    sorted_fps = fps[at]
    first = np.r_[True, sorted_fps[1:] != sorted_fps[:-1]] if len(at) else np.zeros(0, bool)
    return at[first]


def stashing_features(
    config: DedupeConfig, directory: str, before_batch: Callable[[], None] | None = None
) -> Callable[[DataFrame], DataFrame]:
    """The per-document pass without shingle sets
    (:func:`~neardup_spark.stages.documents.document_features`), each task also writing its
    documents' normalised texts into the stash ``directory``, for ``df.transform``.

    Input columns: ``doc_id``, ``text``. Output columns: those of ``document_features(config,
    with_sets=False)``."""

    def transform(docs: DataFrame) -> DataFrame:
        schema = documents_schema(config, docs.schema[DOC_ID].dataType, with_sets=False)
        run = _stashing_fn(config, directory, schema.names, before_batch)
        return docs.select(DOC_ID, TEXT).mapInArrow(run, schema)

    return transform


def _task_file_name() -> str:
    task = TaskContext.get()
    if task is None:  # not in a Spark task (a test calling the function itself)
        return f"task-{uuid.uuid4().hex}{STASH_SUFFIX}"
    return f"task-{task.partitionId():05d}-{task.taskAttemptId()}{STASH_SUFFIX}"


def _stashing_fn(
    config: DedupeConfig,
    directory: str,
    names: list[str],
    before_batch: Callable[[], None] | None,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    per_batch = documents_columns_fn(config, with_sets=False, keep_normalized=True)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        kept: list[pa.Table] = []
        for batch in batches:
            if before_batch is not None:
                before_batch()
            out = per_batch(batch)
            stashed = pa.table(
                {
                    EXACT_FP: out.column(EXACT_FP),
                    DOC_ID: out.column(DOC_ID),
                    BAND_KEYS: out.column(BAND_KEYS),
                    TEXT: out.column(NORMALIZED).cast(pa.large_string()),
                }
            )
            kept.append(stashed.filter(out.column(HAS_TEXT)))
            yield pa.RecordBatch.from_arrays([out.column(n) for n in names], names=names)
        if kept:
            path = join(directory, _task_file_name())
            write_stash_file(path, pa.concat_tables(kept), stash_codec(path))

    return run


def stashed_texts(wanted: DataFrame, stash: TextStash) -> DataFrame:
    """Fingerprints of the batch (``exact_fp``; each present in the stash) -> their normalised
    texts: ``doc_id`` (the fingerprint), ``text``. Spread by bucket: each task reads the
    buckets of its fingerprints from every file, each bucket by one task."""
    tasks = max(1, default_parallelism(wanted.sparkSession))
    bucket = F.shiftrightunsigned(F.col(EXACT_FP), 64 - 8)
    return (
        wanted.select(EXACT_FP)
        .repartition(tasks, bucket)
        .mapInArrow(_fetch_fn(stash.files), FETCHED_SCHEMA)
    )


def _fetch_fn(files: tuple[str, ...]) -> Any:
    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        got = [b.column(0).to_numpy() for b in batches if b.num_rows]
        if not got or not files:
            return
        wanted = np.unique(np.concatenate(got))
        buckets = bucket_of(wanted)
        readers = [pa.ipc.open_file(open_input(path)) for path in files]
        for bucket, expected in zip(*np.unique(buckets, return_counts=True), strict=True):
            rows = pa.Table.from_batches([r.get_batch(int(bucket)) for r in readers])
            fps = rows.column(EXACT_FP).to_numpy()
            at = content_rows(rows, sorted_member_mask(fps, wanted))
            if len(at) != expected:
                raise RuntimeError("the batch's stash lacks texts of its contents")
            texts = rows.column(TEXT).take(pa.array(at)).combine_chunks()
            yield pa.RecordBatch.from_arrays(
                [pa.array(fps[at]), texts.cast(pa.string())], names=[DOC_ID, TEXT]
            )

    return run
