"""Texts read at their addresses in Parquet files: every request its row's text, in the
requests' order, each row group read once, and an error when a file no longer holds the
documents Spark read there."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.batch import addressed_texts
from neardup_spark.batch.addressed_texts import (
    FILE_NO,
    ROW_INDEX,
    AddressedFiles,
    texts_at_addresses_fn,
)
from neardup_spark.columns import DOC_ID, TEXT

CARRIED = ["pair", "side"]


@pytest.fixture
def files(tmp_path):
    """Three files of 25, 1 and 40 rows in row groups of 7 rows (the text column named
    ``Body``, after another column)."""
    paths = []
    for no, rows in enumerate([25, 1, 40]):
        ids = [f"f{no}-r{r}" for r in range(rows)]
        table = pa.table(
            {
                "other": list(range(rows)),
                "doc": ids,
                "Body": pa.array([f"text of {i}" for i in ids], pa.large_string()),
            }
        )
        path = tmp_path / f"part-{no}.parquet"
        pq.write_table(table, path, row_group_size=7)
        paths.append(str(path))
    return paths


def requests(addresses: list[tuple[int, int]], ids: list[str] | None = None) -> pa.RecordBatch:
    """Requests for (file, row) addresses, in the given order (each carries its place)."""
    file_nos = [f for f, _ in addresses]
    rows = [r for _, r in addresses]
    ids = ids or [f"f{f}-r{r}" for f, r in addresses]
    return pa.RecordBatch.from_arrays(
        [
            pa.array(file_nos, pa.int32()),
            pa.array(rows, pa.int64()),
            pa.array(ids),
            pa.array(range(len(addresses)), pa.int64()),
            pa.array([i % 2 for i in range(len(addresses))], pa.int32()),
        ],
        names=[FILE_NO, ROW_INDEX, DOC_ID, *CARRIED],
    )


def read_all(files, batches, monkeypatch):
    """The requests' output and the (file, row group) reads it made."""
    reads: list[tuple[str, int]] = []

    class Counted(pq.ParquetFile):
        def read_row_group(self, i, *args, **kwargs):
            reads.append((self.reader.metadata.num_rows, i))
            return super().read_row_group(i, *args, **kwargs)

    monkeypatch.setattr(addressed_texts, "pq", SimpleNamespace(ParquetFile=Counted))
    opened = AddressedFiles(tuple(files), "doc", "Body", lambda path: pa.memory_map(path, "r"))
    read = texts_at_addresses_fn(opened, CARRIED, pa.string())
    return pa.Table.from_batches(list(read(batches))), reads


def test_every_request_gets_its_rows_text_in_order_each_row_group_read_once(files, monkeypatch):
    rng = np.random.default_rng(3)
    sizes = [25, 1, 40]
    wanted = [(f, int(r)) for f in range(3) for r in rng.integers(0, sizes[f], 30)]
    wanted += [(2, 39), (0, 0), (0, 0)]  # the last row, a repeated one
    wanted.sort()
    batches = [requests(wanted[:41]), requests(wanted[41:])]  # a file across two batches
    table, reads = read_all(files, batches, monkeypatch)
    assert table.column_names == [*CARRIED, TEXT]
    assert table.schema.field(TEXT).type == pa.string()
    assert table.column(TEXT).to_pylist() == [f"text of f{f}-r{r}" for f, r in wanted]
    assert table.column("pair").to_pylist() == list(range(41)) + list(range(len(wanted) - 41))
    assert len(reads) == len(set(reads))  # sorted requests: each row group read once
    touched = {(sizes[f], r // 7) for f, r in wanted}  # files told by their sizes
    assert set(reads) == touched


def test_unsorted_requests_still_get_their_texts(files, monkeypatch):
    wanted = [(2, 30), (0, 3), (2, 1), (0, 24), (1, 0)]
    table, _ = read_all(files, [requests(wanted)], monkeypatch)
    assert table.column(TEXT).to_pylist() == [f"text of f{f}-r{r}" for f, r in wanted]


def test_a_file_holding_other_documents_is_an_error(files, monkeypatch):
    with pytest.raises(RuntimeError, match="input changed during the run"):
        read_all(files, [requests([(0, 1), (0, 2)], ids=["f0-r1", "f0-r9"])], monkeypatch)
    with pytest.raises(RuntimeError, match="fewer than a candidate's address"):
        read_all(files, [requests([(1, 0), (1, 1)])], monkeypatch)
