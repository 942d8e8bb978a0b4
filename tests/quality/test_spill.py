"""Texts spilled in arrival order come back in row order, file by file, bucket by bucket."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.quality import spill as spill_module
from neardup_spark.quality.spill import RowOrderSpill, take_chunked


def test_take_chunked_is_take_of_the_concatenation():
    chunks = [pa.array(["a", "b"]), pa.array(["c"]), pa.array(["d", "e", "f"])]
    starts = np.array([0, 2, 3])
    index = np.array([5, 0, 3, 2, 2, 1])
    assert take_chunked(chunks, starts, index).to_pylist() == ["f", "a", "d", "c", "c", "b"]


@pytest.mark.parametrize("max_buckets", [1, 2, 512])
def test_rows_come_back_in_order_whatever_the_arrival_order(tmp_path, monkeypatch, max_buckets):
    monkeypatch.setattr(spill_module, "MAX_BUCKETS", max_buckets)
    n_rows, per_file = 23, 5
    arrival = np.random.default_rng(1).permutation(n_rows)
    with RowOrderSpill(tmp_path / "spill", n_rows, per_file) as spill:
        for part in np.array_split(arrival, 4):
            spill.add(part, pa.array([f"text {r}" for r in part.tolist()]))
        files = list(spill.files())
    assert [(f, first) for f, first, _ in files] == [(0, 0), (1, 5), (2, 10), (3, 15), (4, 20)]
    texts = [t for _, _, texts in files for t in texts.to_pylist()]
    assert texts == [f"text {r}" for r in range(n_rows)]
    assert not (tmp_path / "spill").exists()  # removed on leaving the block


def test_an_empty_spill_gives_one_empty_file(tmp_path):
    with RowOrderSpill(tmp_path / "spill", 0, 5) as spill:
        assert [(f, first, t.to_pylist()) for f, first, t in spill.files()] == [(0, 0, [])]


@pytest.mark.parametrize("rows", [[0, 1, 2], [0, 1, 2, 3, 3]])
def test_a_missing_or_repeated_row_is_an_error(tmp_path, rows):
    with RowOrderSpill(tmp_path / "spill", 4, 10) as spill:
        spill.add(np.array(rows), pa.array(["x"] * len(rows)))
        with pytest.raises(ValueError, match="once each"):
            list(spill.files())
