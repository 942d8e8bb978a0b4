"""Contamination stages: DataFrame -> DataFrame, the per-batch work in ``mapInArrow``
(:mod:`neardup_spark.batch.decontaminate`), the reference captured by each stage's function
(PySpark broadcasts a task's function once it is large, so the reference's arrays travel to
each executor once, not with every task)."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.batch import over_batches
from neardup_spark.batch.decontaminate import (
    BENCHMARK,
    DOC_ID,
    GRAM,
    ITEM_ID,
    ITEM_SHARE,
    NGRAMS,
    SPANS,
    Reference,
    clean_fn,
    gram_docs_fn,
    matches_fn,
)
from neardup_spark.columns import TEXT
from neardup_spark.stages.names import column, map_in_arrow

GRAM_DOCS = "docs"
SPAN_SCHEMA = T.ArrayType(
    T.StructType(
        [T.StructField("start", T.LongType(), False), T.StructField("end", T.LongType(), False)]
    ),
    False,
)


def matches_schema(id_type: T.DataType) -> T.StructType:
    """matches/'s columns, ``doc_id`` of the corpus's id type."""
    return T.StructType(
        [
            T.StructField(DOC_ID, id_type),
            T.StructField(ITEM_ID, T.StringType()),
            T.StructField(BENCHMARK, T.StringType()),
            T.StructField(NGRAMS, T.LongType()),
            T.StructField(ITEM_SHARE, T.DoubleType()),
            T.StructField(SPANS, SPAN_SCHEMA),
        ]
    )


def reference_gram_docs(ref: Reference, text_col: str) -> Callable[[DataFrame], DataFrame]:
    """Corpus rows (``text_col``) -> ``gram`` (int64, a reference gram's hash), ``docs`` (the
    documents holding it; grams held by none are absent)."""

    def transform(df: DataFrame) -> DataFrame:
        texts = df.select(column(text_col).alias(TEXT))
        schema = T.StructType([T.StructField(GRAM, T.LongType(), False)])
        held = texts.mapInArrow(over_batches(gram_docs_fn(ref, TEXT)), schema)
        return held.groupBy(GRAM).agg(F.count(F.lit(1)).alias(GRAM_DOCS))

    return transform


def contamination_matches(
    ref: Reference, id_col: str, text_col: str
) -> Callable[[DataFrame], DataFrame]:
    """Corpus rows (``id_col``, ``text_col``) -> one row per document and item it holds:
    ``doc_id``, ``item_id``, ``benchmark``, ``ngrams``, ``item_share``, ``spans``
    (:func:`matches_schema`)."""

    def transform(df: DataFrame) -> DataFrame:
        docs = df.select(column(id_col).alias(DOC_ID), column(text_col).alias(TEXT))
        schema = matches_schema(docs.schema[DOC_ID].dataType)
        return docs.mapInArrow(over_batches(matches_fn(ref, DOC_ID, TEXT)), schema)

    return transform


def decontaminated(
    ref: Reference, text_col: str, cut: bool, margin: int, min_chars: int
) -> Callable[[DataFrame], DataFrame]:
    """Corpus rows -> the same columns, without the contaminated documents; with ``cut``, their
    spans (widened by ``margin`` characters) cut from ``text_col`` and only the documents left
    shorter than ``min_chars`` dropped (:func:`~neardup_spark.batch.decontaminate.clean_fn`)."""

    def transform(df: DataFrame) -> DataFrame:
        run = over_batches(clean_fn(ref, text_col, cut, margin, min_chars))
        return map_in_arrow(df, run, df.schema)

    return transform
