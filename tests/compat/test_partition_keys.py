"""The keys of kernels/spark_partitions.py against the running Spark's own hash partitioning:
``repartition(n, key)`` puts ``partition_keys(n)[i]`` in partition ``i`` (on every Spark line
``make test-compat`` runs)."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from neardup_spark.kernels.spark_partitions import partition_keys


@pytest.mark.parametrize("partitions", [1, 2, 4, 9, 64])
def test_each_key_lands_in_its_own_partition(spark, partitions):
    keys = [(int(key), i) for i, key in enumerate(partition_keys(partitions))]
    routed = (
        spark.createDataFrame(keys, "key int, block int")
        .repartition(partitions, "key")
        .select("block", F.spark_partition_id().alias("partition"))
        .collect()
    )
    assert sorted((row.block, row.partition) for row in routed) == [
        (i, i) for i in range(partitions)
    ]
