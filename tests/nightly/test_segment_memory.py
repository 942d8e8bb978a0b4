"""What bounds a nightly build's memory in a local driver (the executor is the driver's JVM):
the Spark path's segment write reads the persisted texts and collects nothing to the driver.

A 1M-document first index build ran out of a 2 GB local driver: the new contents' band keys
(~250 MB) were broadcast, and the batch was read and normalised again instead of read from the
persisted texts. These tests check the plans on a few rows (the 1M run is in the nightly bench)."""

from __future__ import annotations

from pyspark import StorageLevel
from pyspark.sql import functions as F

from neardup_spark.columns import BAND_KEYS, DOC_ID, EXACT_FP, TEXT
from neardup_spark.nightly.segment import segment_contents
from neardup_spark.nightly.steps import keep


def executed_plan(frame) -> str:
    return frame._jdf.queryExecution().executedPlan().toString()


def test_segment_contents_read_the_persisted_texts_and_broadcast_nothing(spark):
    docs = spark.createDataFrame(
        [(f"d{i}", f"text number {i}") for i in range(200)], f"{DOC_ID} string, {TEXT} string"
    )
    fresh = keep(
        docs.select(
            DOC_ID,
            F.xxhash64(DOC_ID).alias(EXACT_FP),
            F.array(F.xxhash64(TEXT), F.lit(7).cast("long")).alias(BAND_KEYS),
        )
    )
    # As steps.fresh_texts: the texts derive from ``fresh`` and are persisted on disk.
    reps = fresh.select(DOC_ID, EXACT_FP).hint("merge")
    texts = (
        docs.join(reps, DOC_ID)
        .select(F.col(EXACT_FP).alias(DOC_ID), F.upper(TEXT).alias(TEXT))
        .persist(StorageLevel.DISK_ONLY)
    )
    try:
        assert texts.count() == 200
        rows = segment_contents(fresh, texts)
        plan = executed_plan(rows)
        assert "InMemoryTableScan" in plan, plan  # the persisted texts, not the batch again
        assert "Broadcast" not in plan, plan  # nothing batch-sized collected to the driver
        # No join (its own shuffle of the texts, before the parts' one): a union of the two
        assert plan.splitlines()[0].startswith("Union"), plan
        keys = {r[EXACT_FP]: r[BAND_KEYS][1] for r in rows.collect() if r[TEXT] is None}
        got = {r[EXACT_FP]: r[TEXT] for r in rows.collect() if r[BAND_KEYS] is None}
        assert set(keys) == set(got) and len(got) == 200 and rows.count() == 400
        assert set(got.values()) == {f"TEXT NUMBER {i}" for i in range(200)}
        assert set(keys.values()) == {7}
    finally:
        texts.unpersist()


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
