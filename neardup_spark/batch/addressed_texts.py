"""Reading documents' texts by their addresses in the input's Parquet files, on Arrow batches.

Verification of a large run needs the texts of its candidate documents only, once per side of
each candidate pair. Its side requests, each located at an address (the file's number, the
row in it), come here sorted by address: each Parquet row group holding a requested row is read
once (the id and text columns only), in file order, and every request gets its row's text.
Nothing else of the corpus is read and no text travels through a shuffle before the one that
brings a pair's two sides together (:mod:`neardup_spark.stages.verify`). The id read at each
address must be the requested one: a file changed under a run is an error, not a wrong pair.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neardup_spark.batch.input_reads import read_row_group
from neardup_spark.columns import DOC_ID, TEXT
from neardup_spark.errors import InputChanged

FILE_NO = "_neardup_file_no"  # the file's place in the run's list of input files
ROW_INDEX = "_neardup_row"  # the row's place in its file (Spark's ``_metadata.row_index``)


@dataclass(frozen=True)
class AddressedFiles:
    """The input files a run reads texts from by address: ``paths`` (opened by ``open_file``,
    numbered by their place here), and the names of the id and text columns in them."""

    paths: tuple[str, ...]
    id_col: str
    text_col: str
    open_file: Callable[[str], Any]


class _RowGroupReader:
    """One file's row groups, read one at a time (the last one kept: sorted requests ask for
    the rows of a row group together, sometimes across two Arrow batches)."""

    def __init__(self, files: AddressedFiles, file_no: int) -> None:
        self.files = files
        self.file_no = file_no
        self.path = files.paths[file_no]
        self.parquet = pq.ParquetFile(files.open_file(self.path))
        meta = self.parquet.metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        self.starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.cached: tuple[int, pa.Table] | None = None

    def row_group(self, index: int) -> pa.Table:
        if self.cached is None or self.cached[0] != index:
            columns = [self.files.id_col, self.files.text_col]
            self.cached = (index, read_row_group(self.parquet, self.path, index, columns))
        return self.cached[1]

    def texts(self, rows: np.ndarray, ids: pa.Array) -> list[pa.Array]:
        """The texts at ``rows`` (sorted) of this file, checked to belong to ``ids``."""
        if len(rows) and (rows.min() < 0 or rows.max() >= self.starts[-1]):
            raise InputChanged(
                f"verification: {self.path} has {self.starts[-1]} rows, fewer than a "
                "candidate's address: the input changed during the run"
            )
        groups = np.searchsorted(self.starts, rows, side="right") - 1
        bounds = np.flatnonzero(np.diff(groups)) + 1
        chunks = []
        for lo, hi in zip([0, *bounds], [*bounds, len(rows)], strict=True):
            group = int(groups[lo])
            local = pa.array(rows[lo:hi] - self.starts[group])
            table = self.row_group(group)
            found = table.column(self.files.id_col).take(local)
            wanted = ids.slice(lo, hi - lo)
            if not pc.all(pc.equal(found.cast(wanted.type), wanted)).as_py():
                raise InputChanged(
                    f"verification: row group {group} of {self.path} does not hold the "
                    "documents Spark read there: the input changed during the run"
                )
            chunks.extend(table.column(self.files.text_col).take(local).chunks)
        return chunks


def texts_at_addresses_fn(
    files: AddressedFiles, carried: list[str], text_type: pa.DataType
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Requests sorted by address -> the same requests with the text at each address.

    Input columns: ``_neardup_file_no``, ``_neardup_row``, ``doc_id`` and ``carried``; rows
    sorted by (file number, row) within the task. Output columns: ``carried`` and ``text``
    (of ``text_type``), one row per request, in the input's order.
    """

    def read(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reader: _RowGroupReader | None = None
        for batch in batches:
            if not batch.num_rows:
                continue
            file_nos = batch.column(FILE_NO).to_numpy()
            rows = batch.column(ROW_INDEX).to_numpy()
            ids = batch.column(DOC_ID)
            bounds = np.flatnonzero(np.diff(file_nos)) + 1
            chunks: list[pa.Array] = []
            for lo, hi in zip([0, *bounds], [*bounds, batch.num_rows], strict=True):
                file_no = int(file_nos[lo])
                if reader is None or reader.file_no != file_no:
                    reader = _RowGroupReader(files, file_no)
                chunks.extend(reader.texts(rows[lo:hi], ids.slice(lo, hi - lo)))
            texts = pa.chunked_array(chunks, chunks[0].type).cast(text_type).combine_chunks()
            yield pa.RecordBatch.from_arrays(
                [*(batch.column(name) for name in carried), texts], names=[*carried, TEXT]
            )

    return read
