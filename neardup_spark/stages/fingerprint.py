"""Exact fingerprints of every document, and the exact-copy edges they imply."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.columns import (
    CHAR_UNIT,
    DOC_A,
    DOC_B,
    DOC_ID,
    EXACT_FP,
    HAS_TEXT,
    N_CHARS,
    N_WORDS,
    NORMALIZED,
    REPLACED_BYTES,
    TEXT,
    TEXT_IS_NULL,
)
from neardup_spark.kernels.fingerprint import exact_fingerprints
from neardup_spark.kernels.normalize import NormalizeOptions, normalize_texts
from neardup_spark.kernels.shingles import char_unit_mask, split_words
from neardup_spark.kernels.word_shingles import word_counts

FINGERPRINT_COLUMNS = [
    DOC_ID,
    TEXT_IS_NULL,
    HAS_TEXT,
    N_CHARS,
    N_WORDS,
    EXACT_FP,
    NORMALIZED,
    CHAR_UNIT,
    REPLACED_BYTES,
]


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
        T.StructField(CHAR_UNIT, T.BooleanType(), False),
        T.StructField(REPLACED_BYTES, T.IntegerType(), False),
    ]
    return T.StructType(fields)


def decode_utf8(texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Binary texts -> strings, invalid UTF-8 replaced by U+FFFD; also the replaced-byte counts.

    String input passes through unchanged.
    """
    if not (pa.types.is_binary(texts.type) or pa.types.is_large_binary(texts.type)):
        return texts, np.zeros(len(texts), dtype=np.int32)
    try:  # the common case: valid UTF-8, decoded without a Python loop
        return texts.cast(pa.large_string()), np.zeros(len(texts), dtype=np.int32)
    except pa.ArrowInvalid:
        pass
    decoded: list[str | None] = []
    replaced = np.zeros(len(texts), dtype=np.int32)
    for i, raw in enumerate(texts.to_pylist()):
        if raw is None:
            decoded.append(None)
            continue
        text = raw.decode("utf-8", errors="replace")
        replaced[i] = len(raw) - len(raw.decode("utf-8", errors="ignore").encode("utf-8"))
        decoded.append(text)
    return pa.array(decoded, pa.large_string()), replaced


def count_tokens(normalized: pa.Array, char_unit: np.ndarray, single_spaced: bool) -> np.ndarray:
    """Shingling tokens per normalised text (int32): words, or non-space characters where
    ``char_unit``; null and empty texts have none."""
    words = count_words(normalized, single_spaced)
    if char_unit.any():
        # A null text has no characters (not a null count, which NumPy would make NaN).
        spaces = pc.fill_null(pc.count_substring_regex(normalized, r"\s"), 0).to_numpy()
        chars = pc.fill_null(pc.utf8_length(normalized), 0).to_numpy() - spaces
        words = np.where(char_unit, chars, words).astype(np.int32)
    return words


def count_words(normalized: pa.Array, single_spaced: bool) -> np.ndarray:
    """Words per normalised text (int32); null and empty texts have none."""
    if single_spaced:
        return word_counts(normalized).astype(np.int32)
    _, parents = split_words(normalized)
    return np.bincount(parents, minlength=len(normalized)).astype(np.int32)


def fingerprint_batch_fn(
    options: NormalizeOptions, shingle_unit: str
) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """One batch of ``doc_id``, ``text`` -> its :func:`fingerprint_schema` columns."""

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        texts, replaced = decode_utf8(batch.column(TEXT))
        normalized = normalize_texts(texts, options)
        fps, valid = exact_fingerprints(normalized)
        char_unit = char_unit_mask(normalized, shingle_unit)
        n_words = count_tokens(normalized, char_unit, options.collapse_whitespace)
        columns = [
            batch.column(DOC_ID),
            texts.is_null(),
            pa.array(valid),
            pc.fill_null(pc.utf8_length(texts), 0).cast(pa.int32()),
            pa.array(n_words),
            pa.array(fps.view(np.int64)),
            normalized.cast(pa.string()),
            pa.array(char_unit),
            pa.array(replaced),
        ]
        return pa.RecordBatch.from_arrays(columns, names=FINGERPRINT_COLUMNS)

    return run


def _fingerprint_fn(
    options: NormalizeOptions, shingle_unit: str
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    per_batch = fingerprint_batch_fn(options, shingle_unit)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return map(per_batch, batches)

    return run


def fingerprint(
    options: NormalizeOptions, shingle_unit: str = "auto"
) -> Callable[[DataFrame], DataFrame]:
    """Documents -> one fingerprint row each, for ``df.transform``.

    Input columns: ``doc_id``, ``text`` (string, or binary decoded as UTF-8 with replacement).
    Output columns: ``doc_id``, ``text_is_null``, ``has_text`` (some words after normalisation),
    ``n_chars`` (characters of the decoded text), ``n_words`` (shingling tokens: words, or
    characters for a character-shingled document),
    ``exact_fp`` (SHA-256-64 of the normalised text as int64; 0 without text), ``normalized``
    (the normalised text: later stages shingle it without normalising again), ``char_unit``
    (shingle by characters, see :func:`~neardup_spark.kernels.shingles.char_unit_mask`),
    ``replaced_bytes`` (invalid UTF-8 bytes replaced in a binary text).
    """

    def transform(docs: DataFrame) -> DataFrame:
        schema = fingerprint_schema(docs.schema[DOC_ID].dataType)
        return docs.select(DOC_ID, TEXT).mapInArrow(_fingerprint_fn(options, shingle_unit), schema)

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


def input_counts(fingerprints: DataFrame, ngram: int, char_ngram: int) -> dict[str, int]:
    """The report's per-input counts, in one Spark job over the fingerprint columns: rows, null,
    empty and short texts (fewer tokens than a shingle), character-shingled texts, texts with
    replaced bytes and the bytes replaced."""
    shortest = F.when(F.col(CHAR_UNIT), char_ngram).otherwise(ngram)
    row = fingerprints.agg(
        F.count(F.lit(1)).alias("input_rows"),
        F.sum(F.col(TEXT_IS_NULL).cast("long")).alias("null_texts"),
        F.sum((~F.col(HAS_TEXT) & ~F.col(TEXT_IS_NULL)).cast("long")).alias("empty_texts"),
        F.sum(((F.col(N_WORDS) > 0) & (F.col(N_WORDS) < shortest)).cast("long")).alias(
            "short_texts"
        ),
        F.sum(F.col(CHAR_UNIT).cast("long")).alias("char_shingled_texts"),
        F.sum((F.col(REPLACED_BYTES) > 0).cast("long")).alias("texts_with_replaced_bytes"),
        F.sum(F.col(REPLACED_BYTES).cast("long")).alias("replaced_bytes"),
    ).first()
    assert row is not None
    return {k: int(v or 0) for k, v in row.asDict().items()}
