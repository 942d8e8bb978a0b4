"""Boilerplate stages: count the documents each unit appears in (exactly, with a Spark
aggregation), and remove the boilerplate units from the texts (:mod:`neardup_spark.batch.
boilerplate` on each Arrow batch). No actions here: the pipeline decides when to count, collect
and write (:mod:`neardup_spark.pipeline.boilerplate`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.batch import over_batches
from neardup_spark.batch.boilerplate import (
    EXAMPLES,
    BoilerplateSet,
    Examples,
    cleaned_features_fn,
    document_unit_keys_fn,
    strip_columns_fn,
    unit_counts_fn,
)
from neardup_spark.columns import (
    BOILERPLATE_CHARS,
    BOILERPLATE_UNITS,
    CHARS,
    DOC_ID,
    DROP_KEYS,
    EMPTIED,
    GROUP,
    KEEPER,
    TEXT,
    UNIT_DOCS,
    UNIT_KEY,
    UNITS_WITH_WORDS,
)
from neardup_spark.config import DedupeConfig, prefer_hint
from neardup_spark.errors import UserError
from neardup_spark.stages.clusters import nan_as_null
from neardup_spark.stages.documents import documents_schema
from neardup_spark.stages.names import as_given_hint, column, map_in_arrow

# Columns the cleaning pass adds for the run's counts (observed, then dropped).
COUNT_HELPERS = (UNITS_WITH_WORDS, EMPTIED, CHARS)
# The schema of the cleaning's count columns (batch.boilerplate.COUNT_COLUMNS).
COUNT_FIELDS = [
    T.StructField(BOILERPLATE_UNITS, T.IntegerType(), False),
    T.StructField(BOILERPLATE_CHARS, T.LongType(), False),
    T.StructField(UNITS_WITH_WORDS, T.IntegerType(), False),
    T.StructField(EMPTIED, T.BooleanType(), False),
    T.StructField(CHARS, T.LongType(), False),
]
# The examples column (batch.boilerplate.EXAMPLES): per batch, the text of removed units among
# the report's keys; aggregated by example_columns, then dropped.
EXAMPLES_FIELD = T.StructField(
    EXAMPLES,
    T.MapType(
        T.LongType(),
        T.StructType(
            [T.StructField("text", T.StringType()), T.StructField("group", T.StringType())]
        ),
    ),
    True,
)


def check_boilerplate_columns(df: DataFrame, config: DedupeConfig) -> None:
    """The group and prefer columns exist (:class:`UserError` naming the missing one)."""
    options = config.boilerplate
    wanted = [("group", options.group_col)] if options.group_col else []
    wanted += [("prefer", name) for name, _ in options.prefer_order]
    for role, name in wanted:
        if name not in df.columns:
            hint = (
                prefer_hint(name, df.columns)
                if role == "prefer"
                else as_given_hint(name, df.columns, "--group-col")
            )
            raise UserError(
                f"the {role} column {name!r} is not in the input; columns present: "
                f"{', '.join(df.columns)}{hint}"
            )


def _prefer_name(i: int) -> str:
    return f"__neardup_prefer_{i}"


def unit_documents(df: DataFrame, config: DedupeConfig) -> DataFrame:
    """Input rows -> what the batch functions read: ``doc_id``, ``text``, the group column as a
    string (``__neardup_group``, with ``group_col``) and the prefer columns (repeats mode)."""
    options = config.boilerplate
    columns = [column(config.id_col).alias(DOC_ID), column(config.text_col).alias(TEXT)]
    if options.group_col:
        columns.append(column(options.group_col).cast("string").alias(GROUP))
    columns += [  # NaN as null: a missing score ranks last, not first (clusters.nan_as_null)
        nan_as_null(df, name).alias(_prefer_name(i))
        for i, (name, _) in enumerate(options.prefer_order)
    ]
    return df.select(*columns)


def _keeper_order(config: DedupeConfig) -> list[Column]:
    """The prefer order (nulls last), then the smallest id: which occurrence of a unit stays."""
    order = [
        F.col(_prefer_name(i)).desc_nulls_last()
        if desc
        else F.col(_prefer_name(i)).asc_nulls_last()
        for i, (_, desc) in enumerate(config.boilerplate.prefer_order)
    ]
    return [*order, F.col(KEEPER).asc()]


def boilerplate_units(config: DedupeConfig) -> Callable[[DataFrame], DataFrame]:
    """Input rows -> the boilerplate units: ``unit_key`` (long), ``unit_docs`` (the exact number of
    documents holding the unit, within its group with ``group_col``) and in repeats mode
    ``keeper`` (the id of the document whose first occurrence stays).

    Template mode keeps the units in at least ``min_docs`` documents; repeats mode those in two
    or more (a unit repeated within one document only is handled by the cleaning pass). Each
    Arrow batch counts its own units first; Spark sums the batches' counts (and takes the
    smallest keeper, or the first in the prefer order), so the result does not depend on the
    partitioning.
    """
    options = config.boilerplate
    repeats = options.mode == "repeats"
    least = 2 if repeats else options.min_docs
    prefer = tuple(_prefer_name(i) for i in range(len(options.prefer_order)))

    def transform(df: DataFrame) -> DataFrame:
        docs = unit_documents(df, config)
        fields = [
            T.StructField(UNIT_KEY, T.LongType(), False),
            T.StructField(UNIT_DOCS, T.LongType(), False),
        ]
        if repeats:
            fields.append(T.StructField(KEEPER, docs.schema[DOC_ID].dataType, False))
            fields += [docs.schema[name] for name in prefer]
        counted = docs.mapInArrow(
            over_batches(unit_counts_fn(config, prefer)), T.StructType(fields)
        )
        if not repeats:
            totals = counted.groupBy(UNIT_KEY).agg(F.sum(UNIT_DOCS).alias(UNIT_DOCS))
            return totals.where(F.col(UNIT_DOCS) >= least)
        if not prefer:
            totals = counted.groupBy(UNIT_KEY).agg(
                F.sum(UNIT_DOCS).alias(UNIT_DOCS), F.min(KEEPER).alias(KEEPER)
            )
            return totals.where(F.col(UNIT_DOCS) >= least)
        by_key = Window.partitionBy(UNIT_KEY)
        ranked = counted.select(
            UNIT_KEY,
            KEEPER,
            F.sum(UNIT_DOCS).over(by_key).alias(UNIT_DOCS),
            F.row_number().over(by_key.orderBy(*_keeper_order(config))).alias("rank"),
        )
        return ranked.where((F.col("rank") == 1) & (F.col(UNIT_DOCS) >= least)).select(
            UNIT_KEY, UNIT_DOCS, KEEPER
        )

    return transform


def drop_lists(config: DedupeConfig, boilerplate: DataFrame) -> Callable[[DataFrame], DataFrame]:
    """Input rows -> ``doc_id``, ``__neardup_drop_keys`` (the keys of the units to remove from
    that document: boilerplate units, in repeats mode unless it is the unit's keeper), for a
    boilerplate table too large to broadcast. Documents with nothing to drop have no row."""

    def transform(df: DataFrame) -> DataFrame:
        docs = unit_documents(df, config)
        schema = T.StructType(
            [
                T.StructField(DOC_ID, docs.schema[DOC_ID].dataType, False),
                T.StructField(UNIT_KEY, T.LongType(), False),
            ]
        )
        pairs = docs.mapInArrow(over_batches(document_unit_keys_fn(config)), schema)
        matched = pairs.join(boilerplate, UNIT_KEY)
        if KEEPER in boilerplate.columns:
            matched = matched.where(F.col(DOC_ID) != F.col(KEEPER))
        return matched.groupBy(DOC_ID).agg(F.collect_list(UNIT_KEY).alias(DROP_KEYS))

    return transform


def stripped_schema(df: DataFrame, with_examples: bool = False) -> T.StructType:
    """Output schema of :func:`stripped_texts`: the input's columns (helpers left out), then the
    counts (and the examples)."""
    helpers = {GROUP, DROP_KEYS, EXAMPLES, *(f.name for f in COUNT_FIELDS)}
    fields = [f for f in df.schema.fields if f.name not in helpers]
    return T.StructType([*fields, *COUNT_FIELDS, *([EXAMPLES_FIELD] if with_examples else [])])


def stripped_texts(
    config: DedupeConfig,
    id_col: str,
    text_col: str,
    boilerplate: Callable[[], BoilerplateSet],
    drops: DataFrame | None = None,
    with_examples: bool = False,
    keep_emptied: bool = False,
) -> Callable[[DataFrame], DataFrame]:
    """Rows -> the same rows (every one, all columns) with the boilerplate units removed from
    ``text_col``, plus ``boilerplate_units`` (units removed), ``boilerplate_chars``
    (characters removed: the text's length went down by as much), and the count helpers
    ``__neardup_units`` (units with words before), ``__neardup_emptied`` (the text was all
    boilerplate and is now empty) and ``__neardup_chars`` (characters before).

    ``boilerplate`` gives the :class:`BoilerplateSet` on the executors; with ``drops``
    (:func:`drop_lists`) each document's own list is joined to it instead and the set only names
    the units whose text the report shows (``with_examples``: in the examples column, which
    :func:`example_columns` aggregates). ``keep_emptied``:
    a text that was all boilerplate stays whole (the dedupe fingerprints it, so that pages
    that are nothing but template still cluster as a plain dedupe clusters them).
    """
    group_col = config.boilerplate.group_col

    def transform(df: DataFrame) -> DataFrame:
        rows = df
        if group_col and GROUP not in rows.columns:  # else unit_documents made it
            rows = rows.withColumn(GROUP, column(group_col).cast("string"))
        if drops is not None:
            rows = _with_drops(rows, id_col, drops)
        per_batch = strip_columns_fn(
            config, text_col, id_col, boilerplate, with_examples, keep_emptied
        )
        schema = stripped_schema(rows, with_examples)
        return map_in_arrow(rows, over_batches(per_batch), schema)

    return transform


def _with_drops(rows: DataFrame, id_col: str, drops: DataFrame) -> DataFrame:
    """``rows`` with each document's ``__neardup_drop_keys`` (null when it has none)."""
    keyed = drops.withColumnRenamed(DOC_ID, "__neardup_drop_id")
    joined = rows.join(keyed, column(id_col) == F.col("__neardup_drop_id"), "left")
    return joined.drop("__neardup_drop_id")


def cleaned_document_features(
    config: DedupeConfig,
    boilerplate: Callable[[], BoilerplateSet],
    drops: DataFrame | None = None,
    with_examples: bool = False,
    before_batch: Callable[[], None] | None = None,
) -> Callable[[DataFrame], DataFrame]:
    """Documents (``doc_id``, ``text``, optionally ``__neardup_group``) -> the per-document
    pass's table (:func:`~neardup_spark.stages.documents.documents_schema`, no shingle sets)
    of their cleaned texts, plus the cleaning's count columns: cleaning and fingerprinting in
    one Arrow pass (``dedupe --strip-boilerplate``). ``boilerplate``, ``drops``,
    ``with_examples``: as for :func:`stripped_texts`; ``before_batch`` runs before each batch."""

    def transform(docs: DataFrame) -> DataFrame:
        schema = documents_schema(config, docs.schema[DOC_ID].dataType, with_sets=False)
        rows = docs if drops is None else _with_drops(docs, DOC_ID, drops)
        per_batch = cleaned_features_fn(config, boilerplate, with_examples, before_batch)
        extra = [EXAMPLES_FIELD] if with_examples else []
        return rows.mapInArrow(
            over_batches(per_batch), T.StructType([*schema, *COUNT_FIELDS, *extra])
        )

    return transform


def count_columns() -> list[Column]:
    """Aggregates of the cleaning's count columns: the run's boilerplate counts."""
    removed = F.col(BOILERPLATE_UNITS)
    return [
        F.count(F.lit(1)).alias("documents"),
        F.sum((removed > 0).cast("long")).alias("documents_changed"),
        F.sum(F.col(EMPTIED).cast("long")).alias("documents_emptied"),
        F.sum(F.col(UNITS_WITH_WORDS).cast("long")).alias("units"),
        F.sum(removed.cast("long")).alias("units_removed"),
        F.sum(F.col(CHARS)).alias("chars"),
        F.sum(F.col(BOILERPLATE_CHARS)).alias("chars_removed"),
    ]


def example_columns(keys: list[int]) -> list[Column]:
    """One aggregate per key of ``keys``: the smallest (text, group) of that unit among the
    examples column's batches (null when no batch removed it), as JSON (an observed metric
    comes back as plain values only), named ``example_I``."""
    return [
        F.to_json(F.min(F.element_at(F.col(EXAMPLES), F.lit(key).cast("long")))).alias(
            f"example_{i}"
        )
        for i, key in enumerate(keys)
    ]


def examples_of(row: dict[str, Any], keys: list[int]) -> Examples:
    """:func:`example_columns`' values (``row``: name -> JSON) as key -> (text, group)."""
    out: Examples = {}
    for i, key in enumerate(keys):
        found = row.get(f"example_{i}")
        if found is not None:
            example = json.loads(found)
            out[key] = (example.get("text"), example.get("group"))
    return out
