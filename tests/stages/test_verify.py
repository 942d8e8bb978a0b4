"""Verification: candidates scored by exact Jaccard, from stored sets or from texts."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from neardup_spark.columns import (
    DOC_A,
    DOC_B,
    ESTIMATE,
    JACCARD,
)
from neardup_spark.stages.candidates import bucket_members, candidate_pairs
from neardup_spark.stages.verify import score_candidate_texts, score_candidates, scored_schema


def test_near_duplicates_share_a_bucket_and_verify(sketches, config):
    pairs = sketches.transform(bucket_members).transform(candidate_pairs(10))
    got = {(r[DOC_A], r[DOC_B]) for r in pairs.collect()}
    assert ("a", "b") in got
    scored = pairs.transform(score_candidates(sketches))
    assert scored.schema == scored_schema(T.StringType())
    row = scored.where((scored[DOC_A] == "a") & (scored[DOC_B] == "b")).first()
    # one changed word of 60 removes 5 of 56 shingles from each side: J = 51 / 61
    assert row[JACCARD] == pytest.approx(51 / 61)
    assert abs(row[ESTIMATE] - 51 / 61) < 0.15


@pytest.mark.parametrize("broadcast", [True, False])
def test_scoring_from_texts_equals_scoring_stored_sets(docs, sketches, config, spark, broadcast):
    every_pair = [(x, y) for x in "abcdef" for y in "abcdef" if x < y]
    pairs = spark.createDataFrame(every_pair, "doc_a string, doc_b string").repartition(3)
    stored = pairs.transform(score_candidates(sketches))
    from_texts = pairs.transform(score_candidate_texts(docs, config, broadcast))
    assert from_texts.schema == scored_schema(T.StringType())
    got = sorted(map(tuple, from_texts.collect()))
    assert got == sorted(map(tuple, stored.collect()))
    assert len(got) == len(every_pair)
    assert dict(((a, b), j) for a, b, j, _, _ in got)[("a", "b")] == pytest.approx(51 / 61)
