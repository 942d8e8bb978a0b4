"""Contamination stages: DataFrame -> DataFrame, the per-batch work in ``mapInArrow``
(:mod:`neardup_spark.batch.decontaminate`), the reference captured by each stage's function
(PySpark broadcasts a task's function once it is large, so the reference's arrays travel to
each executor once, not with every task).

The corpus's texts are tokenised by :func:`contamination_hits` only; :func:`gram_docs` and
:func:`hit_matches` work on its small hit rows, and :func:`decontaminated` tokenises only the
rows whose id is a contaminated document's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.batch import over_batches
from neardup_spark.batch.decontaminate import (
    BENCHMARK,
    DOC_ID,
    END,
    FIRST,
    GRAM,
    HIT_COLUMNS,
    ITEM_ID,
    ITEM_SHARE,
    LAST,
    NGRAMS,
    ROW,
    ROWS,
    SPANS,
    START,
    Reference,
    clean_fn,
    hit_matches,
    hit_rows_fn,
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


def hits_schema(id_type: T.DataType) -> T.StructType:
    """The hit rows' columns (:func:`~neardup_spark.batch.decontaminate.hit_rows`)."""
    types = {DOC_ID: id_type, GRAM: T.LongType()}
    return T.StructType(
        [T.StructField(name, types.get(name, T.LongType()), name == DOC_ID) for name in HIT_COLUMNS]
    )


def contamination_hits(
    ref: Reference, id_col: str, text_col: str
) -> Callable[[DataFrame], DataFrame]:
    """Corpus rows (``id_col``, ``text_col``) -> hit rows (:func:`hits_schema`): each document
    keyed by ``monotonically_increasing_id`` (unique within this DataFrame's one evaluation:
    write the result before using it twice), its texts tokenised once."""

    def transform(df: DataFrame) -> DataFrame:
        docs = df.select(
            F.monotonically_increasing_id().alias(ROW),
            column(id_col).alias(DOC_ID),
            column(text_col).alias(TEXT),
        )
        schema = hits_schema(docs.schema[DOC_ID].dataType)
        return docs.mapInArrow(over_batches(hit_rows_fn(ref, ROW, DOC_ID, TEXT)), schema)

    return transform


def gram_docs(hits: DataFrame) -> DataFrame:
    """Hit rows -> ``gram``, ``docs`` (the documents holding each gram found), ``rows`` (0;
    and for ``gram`` -1, the documents of the corpus pass): both in one aggregation."""
    return hits.groupBy(GRAM).agg(
        F.countDistinct(ROW).alias(GRAM_DOCS), F.sum(ROWS).cast("long").alias(ROWS)
    )


def hit_matches_stage(ref: Reference, dropped: np.ndarray) -> Callable[[DataFrame], DataFrame]:
    """Hit rows -> matches/ rows (:func:`matches_schema`), the grams ``dropped`` (reference
    indices) left out: the hits of each document brought to one task, its matches and merged
    spans computed there."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        held = list(batches)
        if held:
            yield hit_matches(ref, pa.Table.from_batches(held), dropped)

    def transform(hits: DataFrame) -> DataFrame:
        found = hits.where(F.col(GRAM) >= 0).select(ROW, DOC_ID, GRAM, FIRST, LAST, START, END)
        schema = matches_schema(hits.schema[DOC_ID].dataType)
        return found.repartition(ROW).mapInArrow(run, schema)

    return transform


SUSPECT = "_neardup_suspect"


def decontaminated(
    ref: Reference,
    id_col: str,
    text_col: str,
    cut: bool,
    margin: int,
    min_chars: int,
    suspects: DataFrame,
) -> Callable[[DataFrame], DataFrame]:
    """Corpus rows -> the same columns, without the contaminated documents; with ``cut``, their
    spans (widened by ``margin`` characters) cut from ``text_col`` and only the documents left
    shorter than ``min_chars`` dropped. ``suspects``: one column, the contaminated documents'
    ids (small: broadcast). A row whose id is not among them passes as it is, without leaving
    the JVM; the others are tokenised again and judged on their own text
    (:func:`~neardup_spark.batch.decontaminate.clean_fn`), so a clean row sharing its id with a
    contaminated one stays. Ids compare null-safe."""

    def transform(df: DataFrame) -> DataFrame:
        ids = F.broadcast(suspects.select(F.col(suspects.columns[0]).alias(SUSPECT)))
        same = column(id_col).eqNullSafe(F.col(SUSPECT))
        passed = df.join(ids, same, "left_anti")
        judged = df.join(ids, same, "left_semi")
        clean = clean_fn(ref, text_col, cut, margin, min_chars)
        return passed.union(map_in_arrow(judged, over_batches(clean), df.schema))

    return transform
