"""Representatives and the clusters/ table from component labels."""

from __future__ import annotations

from neardup_spark.columns import (
    CLUSTER_ID,
    DOC_ID,
    IS_REPRESENTATIVE,
)
from neardup_spark.stages.clusters import cluster_table, representatives


def test_representatives_and_cluster_table(spark):
    labels = spark.createDataFrame(
        [("a", "a"), ("b", "a"), ("c", "a"), ("x", "x"), ("y", "x")],
        "doc_id string, component string",
    )
    lengths = spark.createDataFrame(
        [("a", 5), ("b", 9), ("c", 9), ("x", 3), ("y", 2), ("z", 1)], "doc_id string, n_chars int"
    )
    smallest = labels.transform(representatives("smallest_id", lengths))
    assert {r[DOC_ID]: r[CLUSTER_ID] for r in smallest.collect()}["c"] == "a"
    longest = labels.transform(representatives("longest_text", lengths))
    got = {r[DOC_ID]: r[CLUSTER_ID] for r in longest.collect()}
    assert got == {"a": "b", "b": "b", "c": "b", "x": "x", "y": "x"}  # tie b/c -> smaller id b
    table = lengths.transform(cluster_table(longest))
    rows = {r[DOC_ID]: (r[CLUSTER_ID], r[IS_REPRESENTATIVE]) for r in table.collect()}
    assert rows["z"] == ("z", True)  # singleton
    assert rows["a"] == ("b", False) and rows["b"] == ("b", True)
    assert len(rows) == 6
