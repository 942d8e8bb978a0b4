"""What bounds a nightly build's memory in a local driver (the executor is the driver's JVM).
The Spark path's segment write reads the batch's stash and collects nothing to the driver
(tests/nightly/test_text_stash.py).

A 1M-document first index build ran out of a 2 GB local driver: the new contents' band keys
(~250 MB) were broadcast. These tests check the plans on a few rows (the 1M run is in the
nightly bench)."""

from __future__ import annotations

from neardup_spark.columns import DOC_ID


def executed_plan(frame) -> str:
    return frame._jdf.queryExecution().executedPlan().toString()


def test_driver_clustering_results_stay_arrow_batches_not_local_relations(spark):
    """The driver's clustering results (one row per member: 1M at a 1M build) come back as an
    RDD of Arrow batches; a local relation held them as row objects, copied by every write."""
    import pyarrow as pa

    from neardup_spark.runtime.spark_compat import (
        LOCAL_RELATION_THRESHOLD,
        from_arrow,
        from_arrow_batches,
    )

    table = pa.table({DOC_ID: pa.array([f"d{i}" for i in range(1000)]), "n": range(1000)})
    assert "LocalTableScan" in executed_plan(from_arrow(spark, table))  # what it replaces
    frame = from_arrow_batches(spark, table)
    assert "LocalTableScan" not in executed_plan(frame)
    assert sorted(frame.toArrow().column("n").to_pylist()) == list(range(1000))
    assert spark.conf.get(LOCAL_RELATION_THRESHOLD, None) in (None, "48MB", str(48 * 2**20))
