"""Exact-copy edges: a star per group of identical normalised texts."""

from __future__ import annotations

from neardup_spark.stages.exact_copies import exact_copy_edges


def test_exact_copy_edges_are_a_star_per_group(spark):
    rows = [
        ("c", True, 7),
        ("a", True, 7),
        ("b", True, 7),
        ("x", True, 8),
        ("n1", False, 0),
        ("n2", False, 0),
    ]
    fps = spark.createDataFrame(rows, "doc_id string, has_text boolean, exact_fp long")
    got = sorted(map(tuple, fps.transform(exact_copy_edges()).collect()))
    assert got == [("a", "b"), ("a", "c")]  # documents without text never match
