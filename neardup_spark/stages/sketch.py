"""Sketch stage: normalise, shingle, hash and MinHash every document, one Arrow batch at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from neardup_spark.arrow_utils import binary_from_csr, binary_from_rows
from neardup_spark.columns import (
    BAND_KEYS,
    DOC_ID,
    N_CHARS,
    N_SHINGLES,
    N_WORDS,
    SHINGLES,
    SKETCH,
    TEXT,
    TEXT_IS_NULL,
)
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.lsh import band_keys
from neardup_spark.kernels.minhash import MultiplyShiftFamily, signatures
from neardup_spark.kernels.normalize import normalize_texts
from neardup_spark.kernels.shingles import combine_word_hashes, unique_per_doc, word_batch


def sketch_schema(id_type: T.DataType) -> T.StructType:
    """Output schema of :func:`sketch`."""
    return T.StructType(
        [
            T.StructField(DOC_ID, id_type, False),
            T.StructField(TEXT_IS_NULL, T.BooleanType(), False),
            T.StructField(N_CHARS, T.IntegerType(), False),
            T.StructField(N_WORDS, T.IntegerType(), False),
            T.StructField(N_SHINGLES, T.IntegerType(), False),
            T.StructField(SHINGLES, T.BinaryType(), False),
            T.StructField(SKETCH, T.BinaryType(), False),
            T.StructField(BAND_KEYS, T.ArrayType(T.LongType(), False), False),
        ]
    )


def sketch_batch_fn(
    config: DedupeConfig,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The per-batch function of :func:`sketch`; captures plain parameters only."""
    assert config.bands is not None and config.rows is not None
    ngram, seed, bands, rows = config.ngram, config.seed, config.bands, config.rows
    options = config.normalize
    family = MultiplyShiftFamily.from_seed(config.num_perm, seed)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            texts = batch.column(TEXT)
            normalized = normalize_texts(texts, options)
            words = word_batch(normalized, seed)
            offsets, raw = combine_word_hashes(words, ngram)
            sets = unique_per_doc(offsets, raw)
            sizes = sets.sizes()
            sketches = signatures(sets.offsets, sets.hashes, family)
            keys = band_keys(sketches, bands, rows)
            has_shingles = sizes > 0
            # Documents without shingles get no band keys: they can never be candidates.
            key_offsets = np.zeros(len(sizes) + 1, dtype=np.int32)
            np.cumsum(np.where(has_shingles, bands, 0), out=key_offsets[1:])
            key_lists = pa.ListArray.from_arrays(
                pa.array(key_offsets, pa.int32()), pa.array(keys[has_shingles].reshape(-1))
            )
            n_chars = pc.fill_null(pc.utf8_length(texts), 0).cast(pa.int32())
            yield pa.RecordBatch.from_arrays(
                [
                    batch.column(DOC_ID),
                    texts.is_null(),
                    n_chars,
                    pa.array(np.diff(words.offsets).astype(np.int32)),
                    pa.array(sizes.astype(np.int32)),
                    binary_from_csr(sets.offsets, sets.hashes),
                    binary_from_rows(sketches),
                    key_lists,
                ],
                names=[
                    DOC_ID,
                    TEXT_IS_NULL,
                    N_CHARS,
                    N_WORDS,
                    N_SHINGLES,
                    SHINGLES,
                    SKETCH,
                    BAND_KEYS,
                ],
            )

    return run


def sketch(config: DedupeConfig) -> Callable[[DataFrame], DataFrame]:
    """Documents -> sketches, for ``df.transform``.

    Input columns: ``doc_id`` (string or integer), ``text`` (string, nullable).
    Output columns (:func:`sketch_schema`): ``doc_id``, ``text_is_null``, ``n_chars`` (characters
    of the raw text), ``n_words``, ``n_shingles`` (distinct), ``shingles`` (sorted uint64 shingle
    hashes as bytes), ``sketch`` (``num_perm`` uint32 MinHash values as bytes), ``band_keys``
    (``bands`` int64 keys; empty for a document with no shingles).
    """

    def transform(docs: DataFrame) -> DataFrame:
        schema = sketch_schema(docs.schema[DOC_ID].dataType)
        return docs.select(DOC_ID, TEXT).mapInArrow(sketch_batch_fn(config), schema)

    return transform
