"""Keys that Spark's hash partitioning sends to a chosen partition (pure NumPy, no Spark).

``df.repartition(n, col)`` puts a row in partition ``pmod(murmur3_32(col, seed 42), n)``. For a
column of small integers ``0 .. n-1`` that is far from one each: the blocks ``0, 1`` of
``repartition(2, block)`` both land in partition 1, and ``0 .. 3`` in partitions 3, 3, 2, 3, so
one task did three quarters of the work while another core idled. A stage that cuts its work
into ``n`` blocks of its own sends block ``i`` as :func:`partition_keys` ``(n)[i]``, an ``int``
that hashes to partition ``i``: one block per task, every core busy.

Spark has partitioned by Murmur3 (x86, 32-bit, seed 42) since 2.0, on classic and Connect
servers alike; the suite checks these keys against a real session
(``tests/compat/test_partition_keys.py``). Were it ever to change, results would not (a block
is whole in whichever partition it lands), only the balance.
"""

from __future__ import annotations

import numpy as np

SPARK_HASH_SEED = 42
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def murmur3_int(values: np.ndarray, seed: int = SPARK_HASH_SEED) -> np.ndarray:
    """Spark's ``hash()`` of 32-bit integers (``Murmur3_x86_32.hashInt``), as int32.

    >>> murmur3_int(np.array([0, 1], np.int32)).tolist()
    [933211791, -559580957]
    """
    with np.errstate(over="ignore"):
        k1 = np.asarray(values, np.int32).view(np.uint32) * _C1
        k1 = _rotl(k1, 15) * _C2
        h1 = np.full(k1.shape, seed, np.uint32) ^ k1
        h1 = _rotl(h1, 13) * np.uint32(5) + np.uint32(0xE6546B64)
        h1 ^= np.uint32(4)  # the input's length in bytes
        h1 ^= h1 >> np.uint32(16)
        h1 *= np.uint32(0x85EBCA6B)
        h1 ^= h1 >> np.uint32(13)
        h1 *= np.uint32(0xC2B2AE35)
        h1 ^= h1 >> np.uint32(16)
    return h1.view(np.int32)


def hash_partition(values: np.ndarray, partitions: int) -> np.ndarray:
    """The partition ``df.repartition(partitions, col)`` gives each int ``value`` of ``col``."""
    return np.mod(murmur3_int(values).astype(np.int64), partitions)


def partition_keys(partitions: int) -> np.ndarray:
    """``keys[i]`` (int32, the smallest such non-negative int) goes to partition ``i`` of
    ``partitions`` under Spark's hash partitioning.

    >>> partition_keys(2).tolist()  # 0 hashes to partition 1
    [2, 0]
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    keys = np.full(partitions, -1, np.int64)
    found, start, step = 0, 0, max(1024, 4 * partitions)
    while found < partitions:  # ~n ln n candidates for n partitions (coupon collector)
        candidates = np.arange(start, start + step, dtype=np.int64)
        targets = hash_partition(candidates.astype(np.int32), partitions)
        # The first candidate of each partition not yet served.
        first, index = np.unique(targets, return_index=True)
        fresh = keys[first] < 0
        keys[first[fresh]] = candidates[index[fresh]]
        found += int(fresh.sum())
        start += step
    return keys.astype(np.int32)
