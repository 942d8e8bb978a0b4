"""LSH buckets as lists: small buckets emit all pairs, large ones a star."""

from __future__ import annotations

from neardup_spark.columns import (
    DOC_A,
    DOC_B,
)
from neardup_spark.stages.candidates import candidate_pairs


def _buckets(spark, members):
    schema = "band_key long, members array<string>"
    return spark.createDataFrame([(i, m) for i, m in enumerate(members)], schema)


def test_small_bucket_emits_all_pairs(spark):
    buckets = _buckets(spark, [["a", "b", "c", "d"]])
    got = sorted((r[DOC_A], r[DOC_B]) for r in buckets.transform(candidate_pairs(10)).collect())
    assert got == [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")]


def test_large_bucket_is_linear(spark):
    """50,000 documents in one bucket: 49,999 edges, not 1.25 billion."""
    ids = [f"doc{i:06d}" for i in range(50_000)]
    buckets = _buckets(spark, [ids, ids[:3]])
    pairs = buckets.transform(candidate_pairs(10))
    assert pairs.count() == 49_999 + 1  # star edges; the small bucket's pairs (doc0,doc1..2)
    # plus doc1-doc2 from the small bucket; the star already covers doc0's edges
    assert pairs.where((pairs[DOC_A] == "doc000001") & (pairs[DOC_B] == "doc000002")).count() == 1
    assert pairs.where(pairs[DOC_A] != "doc000000").count() == 1
