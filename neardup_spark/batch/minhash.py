"""MinHash features of normalised documents: shingle hashes, sketches, band keys."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from neardup_spark.columns import (
    BAND_KEYS,
    CHAR_UNIT,
    DOC_ID,
    N_SHINGLES,
    NORMALIZED,
    SHINGLES,
    SKETCH,
)
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.arrow_buffers import (
    binary_from_csr,
    binary_from_rows,
    key_lists,
)
from neardup_spark.kernels.jaccard import distinct_counts
from neardup_spark.kernels.lsh import band_keys
from neardup_spark.kernels.minhash import MultiplyShiftFamily, signatures
from neardup_spark.kernels.shingles import document_shingles


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


def minhash_columns_fn(config: DedupeConfig) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """One batch of ``doc_id``, ``normalized``, ``char_unit`` -> ``doc_id``, ``shingles`` (the
    document's uint64 shingle hashes in text order, repeats kept, as bytes), ``sketch``
    (``num_perm`` uint32 MinHash values as bytes), ``band_keys`` (``bands`` int64 keys; empty for
    a document without shingles), and under containment ``n_shingles`` (its distinct shingles,
    int32); captures plain parameters only."""
    bands, rows = config.banding.bands, config.banding.rows
    sets_of = minhash_sets_fn(config)
    sizes = config.similarity == "containment"

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        char_unit = batch.column(CHAR_UNIT).to_numpy(zero_copy_only=False)
        offsets, shingles, sketches = sets_of(batch.column(NORMALIZED), char_unit)
        # Documents without shingles get no band keys: they can never be candidates.
        keys = key_lists(band_keys(sketches, bands, rows), np.diff(offsets) > 0)
        columns = [
            batch.column(DOC_ID),
            binary_from_csr(offsets, shingles),
            binary_from_rows(sketches),
            keys,
        ]
        names = [DOC_ID, SHINGLES, SKETCH, BAND_KEYS]
        if sizes:  # containment's keep order: the container (more shingles) first
            columns.append(pa.array(distinct_counts(offsets, shingles), pa.int32()))
            names.append(N_SHINGLES)
        return pa.RecordBatch.from_arrays(columns, names=names)

    return run
