"""The per-document pass: normalise, fingerprint and sketch every document in one Arrow pass.

Fusing :func:`~neardup_spark.stages.fingerprint.fingerprint` with the method's sketch stage
means each text is read, normalised and shingled once, and the normalised text is never written
to Spark's cache (at 100k documents that was 230 MB written and read back).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from neardup_spark.arrow_utils import binary_from_csr, binary_from_rows
from neardup_spark.columns import DOC_ID, NORMALIZED, SHINGLES, SKETCH, TEXT
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.normalize import normalize_texts
from neardup_spark.kernels.shingles import char_unit_mask
from neardup_spark.stages.fingerprint import decode_utf8, fingerprint_batch_fn, fingerprint_schema
from neardup_spark.stages.simhash import simhash_columns_fn, simhash_schema
from neardup_spark.stages.sketch import minhash_sets_fn, sketch_columns_fn, sketch_schema

# The bulky MinHash columns: a shingle set is ~4 KB for a 500-word page.
SET_COLUMNS = frozenset({SHINGLES, SKETCH})


def _method_fields(
    config: DedupeConfig, id_type: T.DataType, with_sets: bool
) -> list[T.StructField]:
    if config.method == "minhash":
        return [
            f for f in sketch_schema(id_type).fields[1:] if with_sets or f.name not in SET_COLUMNS
        ]
    if config.method == "simhash":
        return list(simhash_schema(id_type).fields[1:])
    return []


def documents_schema(
    config: DedupeConfig, id_type: T.DataType, with_sets: bool = True
) -> T.StructType:
    """Output schema of :func:`document_features`."""
    fields = [
        f
        for f in fingerprint_schema(id_type).fields
        if f.name != NORMALIZED or config.exact_compare_text
    ]
    return T.StructType(fields + _method_fields(config, id_type, with_sets))


def documents_columns_fn(
    config: DedupeConfig, with_sets: bool = True
) -> Callable[[pa.RecordBatch], pa.RecordBatch]:
    """One batch of ``doc_id``, ``text`` -> its :func:`documents_schema` columns; captures plain
    parameters only."""
    fingerprint_columns = fingerprint_batch_fn(config.normalize, config.shingle_unit)
    method_columns: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None
    if config.method == "minhash":
        method_columns = sketch_columns_fn(config)
    elif config.method == "simhash":
        method_columns = simhash_columns_fn(config)
    keep_normalized = config.exact_compare_text

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        fingerprinted = fingerprint_columns(batch)
        names = [n for n in fingerprinted.schema.names if n != NORMALIZED or keep_normalized]
        columns = [fingerprinted.column(n) for n in names]
        if method_columns is not None:
            sketched = method_columns(fingerprinted)
            extra = [
                n
                for n in sketched.schema.names
                if n != DOC_ID and (with_sets or n not in SET_COLUMNS)
            ]
            names += extra
            columns += [sketched.column(n) for n in extra]
        return pa.RecordBatch.from_arrays(columns, names=names)

    return run


def shingle_sets_fn(config: DedupeConfig) -> Callable[[pa.Array], tuple[pa.Array, pa.Array]]:
    """Texts -> their ``shingles`` and ``sketch`` columns, the values :func:`documents_columns_fn`
    computes for them (MinHash), without the columns verification does not read (exact
    fingerprint, counts, band keys: ~8 of ~55 us a page)."""
    options, unit = config.normalize, config.shingle_unit
    sets_of = minhash_sets_fn(config)

    def run(texts: pa.Array) -> tuple[pa.Array, pa.Array]:
        normalized = normalize_texts(decode_utf8(texts)[0], options)
        offsets, shingles, sketches = sets_of(normalized, char_unit_mask(normalized, unit))
        return binary_from_csr(offsets, shingles), binary_from_rows(sketches)

    return run


def documents_batch_fn(
    config: DedupeConfig, with_sets: bool = True
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The mapInArrow function of :func:`document_features`."""
    per_batch = documents_columns_fn(config, with_sets)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return map(per_batch, batches)

    return run


def document_features(
    config: DedupeConfig, with_sets: bool = True
) -> Callable[[DataFrame], DataFrame]:
    """Documents -> one row each with fingerprints and the method's sketch, for ``df.transform``.

    Input columns: ``doc_id``, ``text``. Output columns (:func:`documents_schema`): those of
    :func:`~neardup_spark.stages.fingerprint.fingerprint` (``normalized`` only with
    ``exact_compare_text``), then for ``minhash`` those of
    :func:`~neardup_spark.stages.sketch.sketch` (``shingles``, ``sketch``, ``band_keys``), for
    ``simhash`` those of :func:`~neardup_spark.stages.simhash.simhash_sketch` (``simhash``,
    ``band_keys``), for ``exact`` nothing more. Without ``with_sets`` the MinHash rows leave out
    ``shingles`` and ``sketch``: the job keeps the narrow table for all documents and recomputes
    the sets of the few candidate documents when it verifies them.
    """

    def transform(docs: DataFrame) -> DataFrame:
        schema = documents_schema(config, docs.schema[DOC_ID].dataType, with_sets)
        return docs.select(DOC_ID, TEXT).mapInArrow(documents_batch_fn(config, with_sets), schema)

    return transform
