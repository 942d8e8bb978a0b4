"""Spark's hash partitioning reproduced: Murmur3 of ints and keys that route to a partition."""

from __future__ import annotations

import numpy as np
import pytest

from neardup_spark.kernels.spark_partitions import hash_partition, murmur3_int, partition_keys


def test_murmur3_is_sparks_hash_of_ints():
    # SELECT hash(CAST(id AS INT)) FROM range(4), and of the extremes (Spark 4.0.1)
    values = np.array([0, 1, 2, 3, -1, 2**31 - 1, -(2**31)], np.int32)
    assert murmur3_int(values).tolist() == [
        933211791,
        -559580957,
        1765031574,
        -1823081949,
        -1604776387,
        133916647,
        723455942,
    ]


def test_small_ints_collide_which_is_why_keys_are_chosen():
    # repartition(n, block) for blocks 0..n-1: far from one a partition
    assert hash_partition(np.arange(2, dtype=np.int32), 2).tolist() == [1, 1]
    assert hash_partition(np.arange(4, dtype=np.int32), 4).tolist() == [3, 3, 2, 3]


@pytest.mark.parametrize("partitions", [1, 2, 3, 4, 7, 64, 1000, 4096])
def test_partition_keys_route_each_block_to_its_own_partition(partitions):
    keys = partition_keys(partitions)
    assert keys.dtype == np.int32 and len(keys) == partitions
    assert hash_partition(keys, partitions).tolist() == list(range(partitions))
    # the smallest such key: no smaller non-negative int goes to the same partition
    targets = hash_partition(np.arange(int(keys.max()) + 1, dtype=np.int32), partitions)
    first = {}
    for value, target in enumerate(targets.tolist()):
        first.setdefault(target, value)
    assert [first[i] for i in range(partitions)] == keys.tolist()


def test_partition_keys_reject_no_partitions():
    with pytest.raises(ValueError, match="partitions must be >= 1"):
        partition_keys(0)
