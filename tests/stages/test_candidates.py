"""Blocked candidate generation gives exactly the pairs of the bucket-list formulation."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.columns import BAND_KEYS, DOC_A, DOC_B, DOC_ID
from neardup_spark.kernels.lsh import bucket_pairs
from neardup_spark.stages.candidates import (
    banded_candidate_pairs,
    bucket_members,
    candidate_pairs,
)


def _docs(spark, id_type: str, n: int, seed: int):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        doc_id = i * 7 % 1009 if id_type == "long" else f"d{i * 7 % 1009:05d}"
        if i % 50 == 0:
            keys: list[int] = []  # a document without shingles has no keys
        elif i < 40:
            keys = [-5, 2**62 + 3]  # one bucket of 39 documents: larger than all_pairs_max
        else:
            # a small key space so that many buckets hold 2-10 documents
            keys = [int(k) - 300 for k in rng.choice(600, 6, replace=False)]
        rows.append((doc_id, keys))
    return spark.createDataFrame(rows, f"{DOC_ID} {id_type}, {BAND_KEYS} array<long>")


def _pairs(df):
    return sorted((r[DOC_A], r[DOC_B]) for r in df.collect())


@pytest.mark.parametrize("id_type", ["string", "long"])
@pytest.mark.parametrize("parts", [1, 3, 8])
def test_blocked_pairs_equal_bucket_lists(spark, id_type: str, parts: int) -> None:
    docs = _docs(spark, id_type, 400, seed=parts)
    expected = _pairs(docs.transform(bucket_members).transform(candidate_pairs(10)))
    got = _pairs(docs.transform(banded_candidate_pairs(10, parts)))
    assert got == expected
    assert len(got) > 400  # the corpus does make candidates
    assert all(a < b for a, b in got)


def test_bucket_pairs_small_bucket_all_pairs_large_bucket_star() -> None:
    keys = np.array([1, 1, 1, 2, 3, 3, 3, 3, 3], dtype=np.int64)
    ids = pa.array(["a", "b", "c", "x", "p", "q", "r", "s", "t"])
    doc_a, doc_b = bucket_pairs(keys, ids, all_pairs_max=4)
    got = sorted(zip(doc_a.to_pylist(), doc_b.to_pylist(), strict=True))
    # bucket 1 (3 <= 4 members): all pairs; bucket 2: none; bucket 3 (5 > 4): a star from "p"
    assert got == [
        ("a", "b"),
        ("a", "c"),
        ("b", "c"),
        ("p", "q"),
        ("p", "r"),
        ("p", "s"),
        ("p", "t"),
    ]


@pytest.mark.parametrize("parts", [2, 4, 8])
def test_each_key_block_gets_a_partition_of_its_own(spark, parts):
    """The stage's shuffle of key blocks (``repartition(parts, part)``) puts each block alone
    in its partition: every core gets work (blocks 0..3 by their own number went to
    partitions 3, 3, 2, 3)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from neardup_spark.batch.candidates import IDS, KEYS, PART, key_blocks_fn

    docs = _docs(spark, "long", 400, seed=1).select(DOC_ID, BAND_KEYS)
    schema = T.StructType(
        [
            T.StructField(PART, T.IntegerType(), False),
            T.StructField(KEYS, T.ArrayType(T.LongType(), False), False),
            T.StructField(IDS, T.ArrayType(T.LongType(), False), False),
        ]
    )
    blocks = docs.mapInArrow(key_blocks_fn(parts), schema).repartition(parts, PART)
    placed = blocks.select(PART, F.spark_partition_id().alias("partition")).distinct().collect()
    by_partition: dict[int, set[int]] = {}
    for row in placed:
        by_partition.setdefault(row.partition, set()).add(row[PART])
    assert sorted(by_partition) == list(range(parts))
    assert all(len(members) == 1 for members in by_partition.values()), by_partition
