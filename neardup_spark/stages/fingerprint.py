"""Exact fingerprints of every document, and the exact-copy edges they imply."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.columns import (
    DOC_A,
    DOC_B,
    DOC_ID,
    EXACT_FP,
    HAS_TEXT,
    N_CHARS,
    N_WORDS,
    NORMALIZED,
    TEXT,
    TEXT_IS_NULL,
)
from neardup_spark.kernels.fingerprint import exact_fingerprints
from neardup_spark.kernels.normalize import NormalizeOptions, normalize_texts
from neardup_spark.kernels.shingles import split_words


def fingerprint_schema(id_type: T.DataType) -> T.StructType:
    """Output schema of :func:`fingerprint`."""
    fields = [
        T.StructField(DOC_ID, id_type, False),
        T.StructField(TEXT_IS_NULL, T.BooleanType(), False),
        T.StructField(HAS_TEXT, T.BooleanType(), False),
        T.StructField(N_CHARS, T.IntegerType(), False),
        T.StructField(N_WORDS, T.IntegerType(), False),
        T.StructField(EXACT_FP, T.LongType(), False),
        T.StructField(NORMALIZED, T.StringType(), True),
    ]
    return T.StructType(fields)


def count_words(normalized: pa.Array, single_spaced: bool) -> np.ndarray:
    """Words per normalised text (int32); null and empty texts have none."""
    if single_spaced:
        spaces = pc.fill_null(pc.count_substring(normalized, " "), 0).to_numpy(zero_copy_only=False)
        nonempty = pc.fill_null(pc.greater(pc.utf8_length(normalized), 0), False)
        return np.where(nonempty.to_numpy(zero_copy_only=False), spaces + 1, 0).astype(np.int32)
    _, parents = split_words(normalized)
    return np.bincount(parents, minlength=len(normalized)).astype(np.int32)


def _fingerprint_fn(
    options: NormalizeOptions,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            texts = batch.column(TEXT)
            normalized = normalize_texts(texts, options)
            fps, valid = exact_fingerprints(normalized)
            n_words = count_words(normalized, options.collapse_whitespace)
            columns = [
                batch.column(DOC_ID),
                texts.is_null(),
                pa.array(valid),
                pc.fill_null(pc.utf8_length(texts), 0).cast(pa.int32()),
                pa.array(n_words),
                pa.array(fps.view(np.int64)),
                normalized.cast(texts.type),
            ]
            names = [DOC_ID, TEXT_IS_NULL, HAS_TEXT, N_CHARS, N_WORDS, EXACT_FP, NORMALIZED]
            yield pa.RecordBatch.from_arrays(columns, names=names)

    return run


def fingerprint(options: NormalizeOptions) -> Callable[[DataFrame], DataFrame]:
    """Documents -> one fingerprint row each, for ``df.transform``.

    Input columns: ``doc_id``, ``text``. Output columns: ``doc_id``, ``text_is_null``,
    ``has_text`` (some words after normalisation), ``n_chars`` (raw characters), ``n_words``,
    ``exact_fp`` (SHA-256-64 of the normalised text as int64; 0 without text), ``normalized``
    (the normalised text: later stages shingle it without normalising again).
    """

    def transform(docs: DataFrame) -> DataFrame:
        schema = fingerprint_schema(docs.schema[DOC_ID].dataType)
        return docs.select(DOC_ID, TEXT).mapInArrow(_fingerprint_fn(options), schema)

    return transform


def exact_copy_edges(compare_text: bool = False) -> Callable[[DataFrame], DataFrame]:
    """Fingerprints -> one edge from each exact copy to the smallest id with the same content.

    Documents without text never match (each stays a singleton). With ``compare_text`` the
    grouping key is the normalised text itself, so a 64-bit collision cannot merge two texts.
    Edges per group are a star: linear in the group's size.

    Input columns: ``doc_id``, ``has_text``, ``exact_fp`` (and ``normalized`` with
    ``compare_text``). Output columns: ``doc_a`` (the group's smallest id), ``doc_b`` (a copy).
    """

    def transform(fps: DataFrame) -> DataFrame:
        keys = [EXACT_FP, NORMALIZED] if compare_text else [EXACT_FP]
        smallest = F.min(DOC_ID).over(Window.partitionBy(*keys))
        return (
            fps.where(F.col(HAS_TEXT))
            .select(F.col(DOC_ID).alias(DOC_B), smallest.alias(DOC_A))
            .where(F.col(DOC_B) != F.col(DOC_A))
            .select(DOC_A, DOC_B)
        )

    return transform
