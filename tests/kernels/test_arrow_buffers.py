"""NumPy arrays in and out of Arrow binary columns."""

from __future__ import annotations

import numpy as np

from neardup_spark.kernels.arrow_buffers import (
    binary_from_csr,
    binary_from_rows,
    csr_from_binary,
    sorted_sets,
)


def test_binary_round_trip():
    offsets = np.array([0, 2, 2, 5])
    values = np.arange(5, dtype=np.uint64) * 3
    arr = binary_from_csr(offsets, values)
    assert arr.to_pylist()[1] == b""
    got_offsets, got = csr_from_binary(arr, np.uint64)
    assert got_offsets.tolist() == offsets.tolist() and got.tolist() == values.tolist()
    sliced_offsets, sliced = csr_from_binary(arr.slice(1), np.uint64)
    assert sliced_offsets.tolist() == [0, 0, 3] and sliced.tolist() == [6, 9, 12]
    rows = binary_from_rows(np.arange(6, dtype=np.uint32).reshape(2, 3))
    assert csr_from_binary(rows, np.uint32)[1].tolist() == list(range(6))


def test_sorted_sets():
    offsets, values = sorted_sets(
        np.array([0, 4, 4, 6]), np.array([9, 3, 9, 1, 7, 7], dtype=np.uint64)
    )
    assert offsets.tolist() == [0, 3, 3, 4] and values.tolist() == [1, 3, 9, 7]
