"""What bounds a nightly build's memory in a local driver (the executor is the driver's JVM):
the Spark path's segment write shuffles the batch's texts once and collects nothing to the
driver.

A 1M-document first index build ran out of a 2 GB local driver: the new contents' band keys
(~250 MB) were broadcast. These tests check the plans on a few rows (the 1M run is in the
nightly bench)."""

from __future__ import annotations

from pyspark.sql import functions as F

from neardup_spark.columns import BAND_KEYS, DOC_ID, EXACT_FP, TEXT
from neardup_spark.config import DedupeConfig
from neardup_spark.nightly.segment import segment_contents
from neardup_spark.nightly.steps import keep
from neardup_spark.stages.documents import fingerprinted_texts


def executed_plan(frame) -> str:
    return frame._jdf.queryExecution().executedPlan().toString()


def test_segment_contents_shuffle_the_texts_once_and_broadcast_nothing(spark):
    """The batch's texts go straight from its scan into the parts' shuffle, by the fingerprint
    they carry: no join (its own shuffle of every text, by id, to find a content's document
    first), nothing collected to the driver."""
    docs = spark.createDataFrame(
        [(f"d{i}", f"Text number {i % 150}") for i in range(200)], f"{DOC_ID} string, {TEXT} string"
    )
    texts = docs.transform(fingerprinted_texts(DedupeConfig()))
    fresh = keep(
        texts.groupBy(EXACT_FP).agg(
            F.min(DOC_ID).alias(DOC_ID),
            F.array(F.first(EXACT_FP), F.lit(7).cast("long")).alias(BAND_KEYS),
        )
    )
    rows = segment_contents(fresh, texts)
    plan = executed_plan(rows)
    assert "Broadcast" not in plan and "Join" not in plan, plan
    assert plan.splitlines()[0].startswith("Union"), plan
    collected = rows.collect()
    keys = {r[EXACT_FP]: (r[DOC_ID], r[BAND_KEYS][1]) for r in collected if r[TEXT] is None}
    got = {r[EXACT_FP] for r in collected if r[BAND_KEYS] is None}
    assert len(keys) == 150 and set(keys) == got and len(collected) == 350
    assert {r[TEXT] for r in collected if r[TEXT]} == {f"text number {i}" for i in range(150)}


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
