"""The per-document pass: normalise, fingerprint and sketch every document in one Arrow pass
(:mod:`neardup_spark.batch.documents` on each batch), and its two halves for callers that need
them apart."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_type

from neardup_spark.batch import BatchFn, over_batches
from neardup_spark.batch.documents import (
    SET_COLUMNS,
    documents_columns_fn,
)
from neardup_spark.batch.minhash import minhash_columns_fn
from neardup_spark.batch.row_group_reads import RowGroup, row_groups_fn
from neardup_spark.batch.text import text_columns_fn
from neardup_spark.columns import (
    BAND_KEYS,
    CHAR_UNIT,
    DOC_ID,
    EXACT_FP,
    HAS_TEXT,
    N_CHARS,
    N_SHINGLES,
    N_WORDS,
    NORMALIZED,
    REPLACED_BYTES,
    SHINGLES,
    SIMHASH,
    SKETCH,
    TEXT,
    TEXT_IS_NULL,
)
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.normalize import NormalizeOptions


def text_schema(id_type: T.DataType) -> T.StructType:
    """Output schema of :func:`text_features`."""
    return T.StructType(
        [
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
    )


def minhash_schema(id_type: T.DataType, sizes: bool = False) -> T.StructType:
    """Output schema of :func:`minhash_sketch` (``sizes``: with ``n_shingles``, under
    containment)."""
    fields = [
        T.StructField(DOC_ID, id_type, False),
        T.StructField(SHINGLES, T.BinaryType(), False),
        T.StructField(SKETCH, T.BinaryType(), False),
        T.StructField(BAND_KEYS, T.ArrayType(T.LongType(), False), False),
    ]
    if sizes:
        fields.append(T.StructField(N_SHINGLES, T.IntegerType(), False))
    return T.StructType(fields)


def simhash_schema(id_type: T.DataType) -> T.StructType:
    """The SimHash columns of :func:`document_features`."""
    return T.StructType(
        [
            T.StructField(DOC_ID, id_type, False),
            T.StructField(SIMHASH, T.LongType(), False),
            T.StructField(BAND_KEYS, T.ArrayType(T.LongType(), False), False),
        ]
    )


def documents_schema(
    config: DedupeConfig, id_type: T.DataType, with_sets: bool = True
) -> T.StructType:
    """Output schema of :func:`document_features`."""
    fields = [
        f for f in text_schema(id_type).fields if f.name != NORMALIZED or config.exact_compare_text
    ]
    if config.method == "minhash":
        sizes = config.similarity == "containment"
        fields += [
            f
            for f in minhash_schema(id_type, sizes).fields[1:]
            if with_sets or f.name not in SET_COLUMNS
        ]
    elif config.method == "simhash":
        fields += simhash_schema(id_type).fields[1:]
    return T.StructType(fields)


def _with_hook(per_batch: BatchFn, before_batch: Callable[[], None] | None) -> BatchFn:
    if before_batch is None:
        return per_batch

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        before_batch()
        return per_batch(batch)

    return run


def document_features(
    config: DedupeConfig,
    with_sets: bool = True,
    before_batch: Callable[[], None] | None = None,
) -> Callable[[DataFrame], DataFrame]:
    """Documents -> one row each with text features and the method's sketch, for
    ``df.transform``.

    Input columns: ``doc_id``, ``text``. Output columns (:func:`documents_schema`): those of
    :func:`text_features` (``normalized`` only with ``exact_compare_text``), then for ``minhash``
    those of :func:`minhash_sketch` (``shingles``, ``sketch``, ``band_keys``), for ``simhash``
    ``simhash`` and ``band_keys``, for ``exact`` nothing more. Without ``with_sets`` the MinHash
    rows leave out ``shingles`` and ``sketch``: the job keeps this narrow table for all
    documents and recomputes the sets of the few candidate documents when it verifies them.
    ``before_batch`` (a picklable function) runs on the executor before each batch.
    """

    def transform(docs: DataFrame) -> DataFrame:
        schema = documents_schema(config, docs.schema[DOC_ID].dataType, with_sets)
        per_batch = _with_hook(documents_columns_fn(config, with_sets), before_batch)
        return docs.select(DOC_ID, TEXT).mapInArrow(over_batches(per_batch), schema)

    return transform


def features_of_row_groups(
    config: DedupeConfig,
    tasks: Sequence[Sequence[RowGroup]],
    columns: tuple[str, str],
    types: tuple[T.DataType, T.DataType],
    batch_rows: int,
    before_batch: Callable[[], None] | None = None,
) -> Callable[[DataFrame], DataFrame]:
    """Task numbers -> :func:`document_features` (without sets) of the documents in each
    task's Parquet row groups, which the task reads itself, for ``df.transform``
    (:mod:`~neardup_spark.batch.row_group_reads`).

    Input column: ``id`` (task numbers, ``0 .. len(tasks) - 1``, one per partition). Output
    columns: :func:`documents_schema` with ``doc_id`` of ``types[0]``. ``columns``: the id and
    text columns in the files (``types``: as Spark reads them); ``batch_rows``: rows per batch
    of the per-document function.
    """

    def transform(task_numbers: DataFrame) -> DataFrame:
        schema = documents_schema(config, types[0], with_sets=False)
        per_batch = _with_hook(documents_columns_fn(config, with_sets=False), before_batch)
        arrow_types = (to_arrow_type(types[0]), to_arrow_type(types[1]))
        read = row_groups_fn(tasks, columns, arrow_types, per_batch, batch_rows)
        return task_numbers.mapInArrow(read, schema)

    return transform


def text_features(
    options: NormalizeOptions, shingle_unit: str = "auto"
) -> Callable[[DataFrame], DataFrame]:
    """Documents -> one text-feature row each, for ``df.transform``.

    Input columns: ``doc_id``, ``text`` (string, or binary decoded as UTF-8 with replacement).
    Output columns (:func:`text_schema`): see
    :func:`~neardup_spark.batch.text.text_columns_fn`.
    """

    def transform(docs: DataFrame) -> DataFrame:
        schema = text_schema(docs.schema[DOC_ID].dataType)
        per_batch = text_columns_fn(options, shingle_unit)
        return docs.select(DOC_ID, TEXT).mapInArrow(over_batches(per_batch), schema)

    return transform


def minhash_sketch(config: DedupeConfig) -> Callable[[DataFrame], DataFrame]:
    """Normalised documents -> MinHash sketches and band keys, for ``df.transform``.

    Input columns: ``doc_id`` (string or integer), ``normalized`` (string, nullable) and
    ``char_unit`` (bool), as :func:`text_features` writes them. Output columns
    (:func:`minhash_schema`): see :func:`~neardup_spark.batch.minhash.minhash_columns_fn`.
    """

    def transform(docs: DataFrame) -> DataFrame:
        sizes = config.similarity == "containment"
        schema = minhash_schema(docs.schema[DOC_ID].dataType, sizes)
        return docs.select(DOC_ID, NORMALIZED, CHAR_UNIT).mapInArrow(
            over_batches(minhash_columns_fn(config)), schema
        )

    return transform
