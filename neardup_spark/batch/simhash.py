"""SimHash features of normalised documents: fingerprints and Manku et al.'s block-table keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np
import pyarrow as pa

from neardup_spark.columns import BAND_KEYS, DOC_ID, NORMALIZED, SIMHASH
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.arrow_buffers import key_lists
from neardup_spark.kernels.compiled_words import word_counts, word_simhashes
from neardup_spark.kernels.simhash import (
    HashName,
    Weighting,
    shingle_features,
    simhash_batch,
    table_keys,
    word_features,
)


def simhash_columns_fn(config: DedupeConfig) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """One batch of ``doc_id``, ``normalized`` -> ``doc_id``, ``simhash`` (64 bits as int64),
    ``band_keys`` (one int64 key per block table, ``C(blocks, hamming_k)`` of them; empty for a
    document without features, which can never be a candidate)."""
    seed, ngram = config.seed, config.ngram
    # The config validated these against the kernels' choices.
    features = config.simhash_features
    hash_name = cast(HashName, config.simhash_hash)
    weighting = cast(Weighting, config.simhash_weighting)
    blocks, k = config.blocks, config.hamming_k

    # The default features (distinct words, mmh3) of single-spaced texts take the compiled path.
    compiled = features == "words" and hash_name == "mmh3" and config.normalize.collapse_whitespace

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        normalized = batch.column(NORMALIZED)
        if compiled:
            fps = word_simhashes(normalized, seed, weighting == "count")
            has_features = word_counts(normalized) > 0
            keys = table_keys(fps, blocks, k)
            return pa.RecordBatch.from_arrays(
                [
                    batch.column(DOC_ID),
                    pa.array(fps.view(np.int64)),
                    key_lists(keys, has_features),
                ],
                names=[DOC_ID, SIMHASH, BAND_KEYS],
            )
        if features == "words":
            offsets, hashes, weights = word_features(normalized, seed, hash_name, weighting)
        else:
            offsets, hashes, weights = shingle_features(
                normalized, ngram, seed, hash_name, weighting
            )
        fps = simhash_batch(offsets, hashes, weights)
        has_features = np.diff(offsets) > 0
        keys = table_keys(fps, blocks, k)
        return pa.RecordBatch.from_arrays(
            [batch.column(DOC_ID), pa.array(fps.view(np.int64)), key_lists(keys, has_features)],
            names=[DOC_ID, SIMHASH, BAND_KEYS],
        )

    return run
