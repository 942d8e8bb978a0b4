"""Ids as row indices: aligned types, lookups with absent and null ids, order-free pair keys."""

from __future__ import annotations

import doctest

import numpy as np
import pyarrow as pa

from neardup_spark.quality import ids
from neardup_spark.quality.ids import align_ids, column, id_examples, index_in, pair_keys


def test_the_docstring_examples_hold():
    results = doctest.testmod(ids)
    assert results.attempted > 0 and results.failed == 0


def test_integer_ids_of_different_widths_compare_as_int64():
    a, b = align_ids(pa.array([1, 2], pa.int32()), pa.array([2, 3], pa.int64()))
    assert a.type == b.type == pa.int64()
    assert index_in(pa.array([3, 1, 2], pa.int32()), pa.array([1, 2, 3], pa.uint8())).tolist() == [
        2,
        0,
        1,
    ]


def test_mixed_ids_compare_as_strings():
    a, b = align_ids(pa.array([7]), pa.array(["7"]))
    assert a.type == b.type == pa.large_string()
    assert index_in(pa.array([7, 8]), pa.array(["8", "7"])).tolist() == [1, 0]


def test_index_in_of_nothing_and_first_occurrence():
    assert index_in(pa.array([], pa.string()), pa.array(["a"])).tolist() == []
    assert index_in(pa.array(["a"]), pa.array(["b", "a", "a"])).tolist() == [1]


def test_column_combines_chunks_and_examples_are_limited():
    table = pa.Table.from_batches(
        [pa.record_batch({"id": ["a", "b"]}), pa.record_batch({"id": ["c", "d"]})]
    )
    assert column(table, "id").to_pylist() == ["a", "b", "c", "d"]
    assert id_examples(column(table, "id"), np.ones(4, dtype=bool), limit=2) == "'a', 'b'"


def test_pair_keys_are_distinct_for_distinct_pairs():
    n = 7
    a, b = np.triu_indices(n, k=1)
    keys = pair_keys(a, b, n)
    assert np.unique(keys).size == a.size
    assert (pair_keys(b, a, n) == keys).all()
