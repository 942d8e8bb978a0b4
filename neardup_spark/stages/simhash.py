"""SimHash stages: fingerprints with Manku et al.'s block-table keys, and Hamming verification."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import cast

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.columns import BAND_KEYS, DOC_A, DOC_B, DOC_ID, HAMMING, NORMALIZED, SIMHASH
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.simhash import (
    HashName,
    Weighting,
    shingle_features,
    simhash_batch,
    table_keys,
    word_features,
)
from neardup_spark.kernels.word_shingles import word_counts, word_simhashes
from neardup_spark.stages.sketch import key_lists


def simhash_schema(id_type: T.DataType) -> T.StructType:
    """Output schema of :func:`simhash_sketch`."""
    return T.StructType(
        [
            T.StructField(DOC_ID, id_type, False),
            T.StructField(SIMHASH, T.LongType(), False),
            T.StructField(BAND_KEYS, T.ArrayType(T.LongType(), False), False),
        ]
    )


def simhash_columns_fn(config: DedupeConfig) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """One batch of ``doc_id``, ``normalized`` -> its :func:`simhash_schema` columns."""
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


def _simhash_fn(
    config: DedupeConfig,
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    per_batch = simhash_columns_fn(config)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return map(per_batch, batches)

    return run


def simhash_sketch(config: DedupeConfig) -> Callable[[DataFrame], DataFrame]:
    """Normalised documents -> SimHash fingerprints and block-table keys, for ``df.transform``.

    Input columns: ``doc_id``, ``normalized``. Output columns: ``doc_id``, ``simhash`` (64 bits as
    int64), ``band_keys`` (one int64 key per table, ``C(blocks, hamming_k)`` of them; empty for a
    document without features, which can never be a candidate).
    """

    def transform(docs: DataFrame) -> DataFrame:
        schema = simhash_schema(docs.schema[DOC_ID].dataType)
        return docs.select(DOC_ID, NORMALIZED).mapInArrow(_simhash_fn(config), schema)

    return transform


def hamming_scored(sketches: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Candidate pairs -> the same pairs with the Hamming distance of their fingerprints.

    Input columns: ``doc_a``, ``doc_b``; ``sketches`` gives ``doc_id``, ``simhash``.
    Output columns: ``doc_a``, ``doc_b``, ``hamming`` (int). Built-in Spark functions only.
    """

    def transform(candidates: DataFrame) -> DataFrame:
        fp = sketches.select(DOC_ID, SIMHASH)
        side_a = fp.select(F.col(DOC_ID).alias(DOC_A), F.col(SIMHASH).alias("fp_a"))
        side_b = fp.select(F.col(DOC_ID).alias(DOC_B), F.col(SIMHASH).alias("fp_b"))
        joined = candidates.join(side_a, DOC_A).join(side_b, DOC_B)
        distance = F.bit_count(F.col("fp_a").bitwiseXOR(F.col("fp_b"))).cast(T.IntegerType())
        return joined.select(DOC_A, DOC_B, distance.alias(HAMMING))

    return transform
