"""Verification: exact Jaccard (and the MinHash estimate) of each candidate pair."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.arrow_utils import csr_from_binary
from neardup_spark.columns import DOC_A, DOC_B, DOC_ID, ESTIMATE, JACCARD, SHINGLES, SKETCH
from neardup_spark.kernels.jaccard import intersection_size

_SHINGLES_A, _SHINGLES_B = "shingles_a", "shingles_b"
_SKETCH_A, _SKETCH_B = "sketch_a", "sketch_b"


def scored_schema(id_type: T.DataType) -> T.StructType:
    """Output schema of :func:`score_candidates`."""
    return T.StructType(
        [
            T.StructField(DOC_A, id_type, False),
            T.StructField(DOC_B, id_type, False),
            T.StructField(JACCARD, T.DoubleType(), False),
            T.StructField(ESTIMATE, T.DoubleType(), False),
        ]
    )


def _score_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        off_a, val_a = csr_from_binary(batch.column(_SHINGLES_A), np.uint64)
        off_b, val_b = csr_from_binary(batch.column(_SHINGLES_B), np.uint64)
        n = batch.num_rows
        jaccard = np.empty(n, dtype=np.float64)
        for i in range(n):
            # Sketches keep shingles in text order with repeats: make them sets here, where
            # only candidate documents pay for it.
            a = np.unique(val_a[off_a[i] : off_a[i + 1]])
            b = np.unique(val_b[off_b[i] : off_b[i + 1]])
            inter = intersection_size(a, b)
            union = a.size + b.size - inter
            jaccard[i] = inter / union if union else 0.0
        sk_off_a, sk_a = csr_from_binary(batch.column(_SKETCH_A), np.uint32)
        _, sk_b = csr_from_binary(batch.column(_SKETCH_B), np.uint32)
        width = int(sk_off_a[1] - sk_off_a[0]) if n else 0
        if n and width:
            agree = sk_a.reshape(n, width) == sk_b.reshape(n, width)
            estimate = agree.mean(axis=1)
        else:
            estimate = np.zeros(n, dtype=np.float64)
        yield pa.RecordBatch.from_arrays(
            [batch.column(DOC_A), batch.column(DOC_B), pa.array(jaccard), pa.array(estimate)],
            names=[DOC_A, DOC_B, JACCARD, ESTIMATE],
        )


def score_candidates(
    sketches: DataFrame, broadcast_candidates: bool = True
) -> Callable[[DataFrame], DataFrame]:
    """Candidate pairs -> the same pairs with exact Jaccard and MinHash estimate.

    Input columns: ``doc_a``, ``doc_b``; ``sketches`` gives ``doc_id``, ``shingles``, ``sketch``.
    Output columns: ``doc_a``, ``doc_b``, ``jaccard`` (exact, of the shingle-hash sets),
    ``estimate`` (fraction of agreeing MinHash values). Nothing is filtered here.

    With ``broadcast_candidates`` the (small) candidate list is broadcast to the sketches, so only
    the candidates' shingle sets move over the network, never the whole sketch table.
    """

    def transform(candidates: DataFrame) -> DataFrame:
        requests = candidates.select(F.col(DOC_A).alias(DOC_ID), DOC_A, DOC_B).unionByName(
            candidates.select(F.col(DOC_B).alias(DOC_ID), DOC_A, DOC_B)
        )
        if broadcast_candidates:
            requests = F.broadcast(requests)
        sides = sketches.select(DOC_ID, SHINGLES, SKETCH).join(requests, DOC_ID)
        side_a = sides.where(F.col(DOC_ID) == F.col(DOC_A)).select(
            DOC_A, DOC_B, F.col(SHINGLES).alias(_SHINGLES_A), F.col(SKETCH).alias(_SKETCH_A)
        )
        side_b = sides.where(F.col(DOC_ID) == F.col(DOC_B)).select(
            DOC_A, DOC_B, F.col(SHINGLES).alias(_SHINGLES_B), F.col(SKETCH).alias(_SKETCH_B)
        )
        joined = side_a.join(side_b, [DOC_A, DOC_B])
        schema = scored_schema(candidates.schema[DOC_A].dataType)
        columns = [DOC_A, DOC_B, _SHINGLES_A, _SHINGLES_B, _SKETCH_A, _SKETCH_B]
        return joined.select(*columns).mapInArrow(_score_batches, schema)

    return transform


def verified(threshold: float) -> Callable[[DataFrame], DataFrame]:
    """Scored pairs -> those whose exact Jaccard reaches ``threshold`` (same columns)."""

    def transform(scored: DataFrame) -> DataFrame:
        return scored.where(F.col(JACCARD) >= F.lit(threshold))

    return transform
