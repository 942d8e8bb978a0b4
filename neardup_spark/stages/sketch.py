"""Sketch stage: shingle, hash and MinHash normalised documents, one Arrow batch at a time."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from neardup_spark.arrow_utils import binary_from_csr, binary_from_rows
from neardup_spark.columns import BAND_KEYS, CHAR_UNIT, DOC_ID, NORMALIZED, SHINGLES, SKETCH
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.lsh import band_keys
from neardup_spark.kernels.minhash import MultiplyShiftFamily, signatures
from neardup_spark.kernels.shingles import document_shingles


def sketch_schema(id_type: T.DataType) -> T.StructType:
    """Output schema of :func:`sketch`."""
    return T.StructType(
        [
            T.StructField(DOC_ID, id_type, False),
            T.StructField(SHINGLES, T.BinaryType(), False),
            T.StructField(SKETCH, T.BinaryType(), False),
            T.StructField(BAND_KEYS, T.ArrayType(T.LongType(), False), False),
        ]
    )


def key_lists(keys: np.ndarray, present: np.ndarray) -> pa.ListArray:
    """Per-document lists of keys: row ``d`` holds ``keys[d]`` if ``present[d]``, else nothing."""
    per_doc = keys.shape[1]
    offsets = np.zeros(len(present) + 1, dtype=np.int32)
    np.cumsum(np.where(present, per_doc, 0), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(keys[present].reshape(-1)))


# Test hook for fault tolerance: when this environment variable names a file that does not exist
# yet, the first sketch batch to see it creates the file and fails, so exactly one task attempt
# fails and Spark's retry must produce the same result (tests/test_bad_input.py).
FAIL_ONCE_ENV = "NEARDUP_FAIL_ONCE_MARKER"


def _maybe_fail_once() -> None:
    marker = os.environ.get(FAIL_ONCE_ENV)
    if not marker:
        return
    try:
        with open(marker, "x", encoding="utf-8") as handle:
            handle.write("failed once\n")
    except FileExistsError:
        return
    raise RuntimeError(f"injected task failure ({FAIL_ONCE_ENV}={marker})")


def minhash_sets_fn(
    config: DedupeConfig,
) -> Callable[[pa.Array, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Normalised texts and their ``char_unit`` flags -> ``(offsets, shingle hashes, sketches)``:
    each document's shingle hashes in text order (CSR) and its MinHash sketch."""
    ngram, char_ngram, seed = config.ngram, config.char_ngram, config.seed
    single_spaced = config.normalize.collapse_whitespace
    family = MultiplyShiftFamily.from_seed(config.num_perm, seed)

    def run(
        normalized: pa.Array, char_unit: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        offsets, shingles = document_shingles(
            normalized, char_unit, ngram, char_ngram, seed, single_spaced
        )
        return offsets, shingles, signatures(offsets, shingles, family)

    return run


def sketch_columns_fn(config: DedupeConfig) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """One batch of ``doc_id``, ``normalized``, ``char_unit`` -> its :func:`sketch_schema`
    columns; captures plain parameters only."""
    assert config.bands is not None and config.rows is not None
    bands, rows = config.bands, config.rows
    sets_of = minhash_sets_fn(config)

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        _maybe_fail_once()
        char_unit = batch.column(CHAR_UNIT).to_numpy(zero_copy_only=False)
        offsets, shingles, sketches = sets_of(batch.column(NORMALIZED), char_unit)
        # Documents without shingles get no band keys: they can never be candidates.
        keys = key_lists(band_keys(sketches, bands, rows), np.diff(offsets) > 0)
        return pa.RecordBatch.from_arrays(
            [
                batch.column(DOC_ID),
                binary_from_csr(offsets, shingles),
                binary_from_rows(sketches),
                keys,
            ],
            names=[DOC_ID, SHINGLES, SKETCH, BAND_KEYS],
        )

    return run


def sketch_batch_fn(
    config: DedupeConfig,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function of :func:`sketch`."""
    per_batch = sketch_columns_fn(config)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return map(per_batch, batches)

    return run


def sketch(config: DedupeConfig) -> Callable[[DataFrame], DataFrame]:
    """Normalised documents -> MinHash sketches and band keys, for ``df.transform``.

    Input columns: ``doc_id`` (string or integer), ``normalized`` (string, nullable) and
    ``char_unit`` (bool), as :func:`~neardup_spark.stages.fingerprint.fingerprint` writes them.
    Output columns (:func:`sketch_schema`): ``doc_id``, ``shingles`` (the document's uint64
    shingle hashes in text order, repeats kept, as bytes), ``sketch`` (``num_perm`` uint32 MinHash
    values as bytes), ``band_keys`` (``bands`` int64 keys; empty for a document without shingles).
    """

    def transform(docs: DataFrame) -> DataFrame:
        schema = sketch_schema(docs.schema[DOC_ID].dataType)
        return docs.select(DOC_ID, NORMALIZED, CHAR_UNIT).mapInArrow(
            sketch_batch_fn(config), schema
        )

    return transform
