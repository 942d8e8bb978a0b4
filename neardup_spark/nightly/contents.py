"""The index's contents in Spark: writing a segment's parts, probing every part with a batch,
fetching the texts verification needs. The files themselves: :mod:`.content_files`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.columns import BAND_KEY, BAND_KEYS, DOC_ID, EXACT_FP, TEXT
from neardup_spark.nightly.content_files import (
    KEYS_SUFFIX,
    TEXT_BATCH_ROWS,
    TEXTS_SUFFIX,
    band_key_matrix,
    probe_part,
    read_keys,
    read_texts,
    sorted_member_mask,
    write_part,
)
from neardup_spark.nightly.text_stash import (
    TextStash,
    bucket_range,
    content_rows,
    read_buckets,
)
from neardup_spark.runtime.engine import default_parallelism

PART, ROW, KIND = "part", "row", "kind"
KNOWN, MATCH = 0, 1  # probe rows: a batch content the index holds; a band-key match
# Contents per part of a segment: the probe's tasks take whole parts.
ROWS_PER_PART = 250_000

PART_SUMMARY_SCHEMA = T.StructType(
    [
        T.StructField("name", T.StringType(), False),
        T.StructField("rows", T.LongType(), False),
        T.StructField("keys_bytes", T.LongType(), False),
        T.StructField("texts_bytes", T.LongType(), False),
    ]
)
PART_SUMMARY_ARROW = pa.schema(
    [("name", pa.string()), ("rows", pa.int64()), ("keys_bytes", pa.int64()),
     ("texts_bytes", pa.int64())]
)  # fmt: skip
PROBE_SCHEMA = T.StructType(
    [
        T.StructField(KIND, T.IntegerType(), False),
        T.StructField(BAND_KEY, T.LongType(), False),
        T.StructField(EXACT_FP, T.LongType(), False),
        T.StructField(PART, T.StringType(), False),
        T.StructField(ROW, T.LongType(), False),
    ]
)
PROBE_ARROW_SCHEMA = pa.schema(
    [(KIND, pa.int32()), (BAND_KEY, pa.int64()), (EXACT_FP, pa.int64()), (PART, pa.string()),
     (ROW, pa.int64())]
)  # fmt: skip
TEXTS_SCHEMA = T.StructType(
    [T.StructField(DOC_ID, T.LongType(), False), T.StructField(TEXT, T.StringType(), True)]
)


def parts_for(rows: int, most: int) -> int:
    """Parts a segment of ``rows`` contents is written in: one per :data:`ROWS_PER_PART`, at
    most ``most`` (the index's ``buckets``)."""
    return max(1, min(most, math.ceil(rows / ROWS_PER_PART)))


def _content_rows(table: pa.Table) -> tuple[np.ndarray, pa.Array, pa.Array, np.ndarray]:
    """A part's rows (one per content: ``exact_fp``, ``band_keys``, ``text``): ``(fps, band key
    lists, texts, text_rows)``, the fingerprints sorted and their key lists in that order, the
    texts as they came with ``text_rows[i]`` the text of ``fps[i]``."""
    fps = table.column(EXACT_FP).to_numpy()
    order = np.argsort(fps, kind="stable")
    fps = fps[order]
    keys, texts = table.column(BAND_KEYS), table.column(TEXT)
    if np.any(fps[1:] == fps[:-1]) or keys.null_count or texts.null_count:
        raise RuntimeError("a segment's contents must each have one row with a key list and a text")
    # large_string: a part's texts may pass 2 GB, the limit of one string array
    texts = texts.cast(pa.large_string()).combine_chunks()
    return fps, keys.combine_chunks().take(pa.array(order)), texts, order


def _write_parts_fn(directory: str, bands: int) -> Any:
    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = [batch for batch in batches if batch.num_rows]
        if not received:
            return
        table = pa.Table.from_batches(received)
        del received
        fps, keys, texts, text_rows = _content_rows(table)
        del table  # the batches as received: the texts are in ``texts`` now, once
        summary = write_part(directory, fps, band_key_matrix(keys, bands), texts, text_rows)
        yield pa.RecordBatch.from_pylist([vars(summary)], schema=PART_SUMMARY_ARROW)

    return run


def write_contents(
    contents: DataFrame, directory: str, parts: int, bands: int
) -> list[dict[str, Any]]:
    """Write ``contents`` (``exact_fp``, ``band_keys``, ``text``: one row per content, its
    ``bands`` keys and its normalised text) as ``parts`` parts under ``directory``, each sorted
    by fingerprint; returns the parts written (name, rows, bytes), in name order. For
    compaction, which rewrites an index's live contents; a night writes its new ones from its
    stash (:func:`write_contents_from_stash`).

    A part holds the fingerprints Spark's hash partitioning sends it (nothing looks a content
    up by its part: the probe scans them all). By ``exact_fp`` itself, not ``pmod(exact_fp,
    parts)``: that column's ``parts`` values hash into fewer partitions (both of two into one),
    so a 300,000-content segment came out as one part, written by one task while the other
    core idled. Each task orders its part itself (a JVM sort copied every text once more)."""
    written = (
        contents.select(EXACT_FP, BAND_KEYS, TEXT)
        .repartition(parts, EXACT_FP)
        .mapInArrow(_write_parts_fn(directory, bands), PART_SUMMARY_SCHEMA)
        .collect()
    )
    return _in_name_order(written)


def _stash_parts_fn(
    files: tuple[str, ...], directory: str, parts: int, bands: int, known: np.ndarray
) -> Any:
    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for part in batch.column(0).to_pylist():
                rows = read_buckets(files, *bucket_range(part, parts))
                if rows is None or not rows.num_rows:
                    continue
                fps = rows.column(EXACT_FP).to_numpy()
                at = content_rows(rows, ~sorted_member_mask(fps, known))
                if not len(at):
                    continue
                # The texts in one array, taken into fingerprint order a block at a time by
                # write_part: a take from the read's thousands of chunks cost up to 2.8 s a part.
                summary = write_part(
                    directory,
                    fps[at],
                    band_key_matrix(rows.column(BAND_KEYS), bands)[at],
                    rows.column(TEXT).combine_chunks(),
                    at,
                )
                yield pa.RecordBatch.from_pylist([vars(summary)], schema=PART_SUMMARY_ARROW)

    return run


def write_contents_from_stash(
    spark: SparkSession,
    stash: TextStash,
    directory: str,
    parts: int,
    bands: int,
    known: np.ndarray,
) -> list[dict[str, Any]]:
    """Write the batch's new contents as ``parts`` parts under ``directory`` from its
    :mod:`stash <.text_stash>`: every fingerprint of the stash but those in ``known`` (sorted:
    the batch's contents the index holds), once, with its smallest document's text; part ``i``
    holds the ``i``-th range of fingerprints (:func:`bucket_range`), one task each, nothing
    shuffled. Returns the parts written (name, rows, bytes), in name order."""
    run = _stash_parts_fn(stash.files, directory, parts, bands, known)
    written = part_numbers(spark, parts, parts).mapInArrow(run, PART_SUMMARY_SCHEMA).collect()
    return _in_name_order(written)


def _in_name_order(summaries: list[Any]) -> list[dict[str, Any]]:
    """The writing tasks' part summaries (one row each), as dicts in name order."""
    return sorted((row.asDict() for row in summaries), key=lambda part: str(part["name"]))


def _probe_fn(
    parts: list[str],
    checksums: dict[str, str],
    batch_fps: np.ndarray,
    batch_keys: np.ndarray,
    top: int,
) -> Any:
    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in (parts[i] for i in batch.column(0).to_pylist()):
                fps, keys = read_keys(path + KEYS_SUFFIX, checksums.get(path))
                hits = probe_part(fps, keys, batch_fps, batch_keys, top)
                n_known, n_match = len(hits.known), len(hits.keys)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(np.r_[[KNOWN] * n_known, [MATCH] * n_match], pa.int32()),
                        pa.array(np.r_[np.zeros(n_known, np.int64), hits.keys]),
                        pa.array(np.r_[hits.known, hits.fps]),
                        pa.array([path] * (n_known + n_match), pa.string()),
                        pa.array(np.r_[np.full(n_known, -1), hits.rows].astype(np.int64)),
                    ],
                    schema=PROBE_ARROW_SCHEMA,
                )

    return run


def probe_index(
    spark: SparkSession,
    parts: list[str],
    batch_fps: np.ndarray,
    batch_keys: np.ndarray,
    top: int,
    checksums: dict[str, str] | None = None,
) -> DataFrame:
    """Scan every part (``parts``: paths without suffix) for the batch's fingerprints and band
    keys (sorted int64; shipped with the tasks): ``kind`` (``KNOWN``: ``exact_fp`` is a batch
    content the index holds; ``MATCH``: ``exact_fp`` has ``band_key``, one of the ``top``
    smallest fingerprints with that key in its part), ``band_key``, ``exact_fp``, ``part``,
    ``row``. ``checksums``: the recorded SHA-256 of each part's keys file, checked as it is
    read."""
    tasks = max(1, min(len(parts), 2 * default_parallelism(spark)))
    probe = _probe_fn(parts, checksums or {}, batch_fps, batch_keys, top)
    return part_numbers(spark, len(parts), tasks).mapInArrow(probe, PROBE_SCHEMA)


def probe_in_process(
    parts: list[str],
    batch_fps: np.ndarray,
    batch_keys: np.ndarray,
    top: int,
    checksums: dict[str, str] | None = None,
    threads: int = 2,
) -> pa.Table:
    """:func:`probe_index`'s rows, the parts scanned by ``threads`` threads of this process
    (local mode: the cores a Spark job would use, without its tasks and Python workers); in
    part order, whatever finishes first."""
    probe = _probe_fn(parts, checksums or {}, batch_fps, batch_keys, top)

    def scan(number: int) -> list[pa.RecordBatch]:
        return list(probe([pa.record_batch([pa.array([number], pa.int64())], names=["id"])]))

    with ThreadPoolExecutor(max(1, threads)) as pool:
        scanned = [batch for found in pool.map(scan, range(len(parts))) for batch in found]
    return pa.Table.from_batches(scanned, schema=PROBE_ARROW_SCHEMA)


def part_numbers(spark: SparkSession, n_parts: int, tasks: int) -> DataFrame:
    """``0 .. n_parts - 1`` in ``tasks`` partitions, no shuffle: each task handles the parts
    with its numbers (their paths travel with the function)."""
    return spark.range(0, n_parts, 1, tasks)


def _fetch_fn(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    received = [batch for batch in batches if batch.num_rows]
    if not received:
        return
    table = pa.Table.from_batches(received)
    table = table.sort_by([(PART, "ascending"), (ROW, "ascending")])
    parts = table.column(PART).to_pylist()
    rows = table.column(ROW).to_numpy()
    start = 0
    while start < len(parts):
        end = start
        while end < len(parts) and parts[end] == parts[start]:
            end += 1
        fps, texts = read_texts(parts[start] + TEXTS_SUFFIX, np.unique(rows[start:end]))
        yield pa.RecordBatch.from_arrays(
            [pa.array(fps, pa.int64()), texts.cast(pa.string())], names=[DOC_ID, TEXT]
        )
        start = end


def fetch_texts(requests: DataFrame) -> DataFrame:
    """Requests (``part``, ``row``) -> the normalised texts stored there: ``doc_id`` (the
    content's fingerprint), ``text``. Each task reads the few record batches it needs of the
    parts it gets.

    Spread by record batch, not by part: a night's index has a few parts, whose names Spark's
    hash partitioning put in fewer tasks than cores (one part: one task); the rows of one
    batch stay together, so no batch is decompressed twice."""
    tasks = max(1, default_parallelism(requests.sparkSession))
    batch = F.floor(F.col(ROW) / TEXT_BATCH_ROWS)
    return (
        requests.select(PART, ROW)
        .distinct()
        .repartition(tasks, PART, batch)
        .mapInArrow(_fetch_fn, TEXTS_SCHEMA)
    )


def _read_parts_fn(parts: list[str], checksums: dict[str, str], bands: int) -> Any:
    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for path in (parts[i] for i in batch.column(0).to_pylist()):
                fps, keys = read_keys(path + KEYS_SUFFIX, checksums.get(path))
                _, texts = read_texts(path + TEXTS_SUFFIX, np.arange(len(fps)))
                offsets = pa.array(np.arange(len(fps) + 1, dtype=np.int32) * bands)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(fps, pa.int64()),
                        pa.ListArray.from_arrays(offsets, pa.array(keys.reshape(-1))),
                        texts.cast(pa.string()),
                    ],
                    names=[EXACT_FP, BAND_KEYS, TEXT],
                )

    return run


def read_contents(
    spark: SparkSession, parts: list[str], bands: int, checksums: dict[str, str] | None = None
) -> DataFrame:
    """Every content of ``parts``: ``exact_fp``, ``band_keys`` (list of ``bands`` longs),
    ``text`` (normalised). For compaction, which rewrites them whole."""
    schema = T.StructType(
        [
            T.StructField(EXACT_FP, T.LongType(), False),
            T.StructField(BAND_KEYS, T.ArrayType(T.LongType(), False), False),
            T.StructField(TEXT, T.StringType(), True),
        ]
    )
    reader = _read_parts_fn(parts, checksums or {}, bands)
    return part_numbers(spark, len(parts), max(1, len(parts))).mapInArrow(reader, schema)
