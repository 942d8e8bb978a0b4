"""Texts made in one order, written in another: a spill to local disk, by destination file.

A generated corpus makes its texts original batch by original batch, but writes them in row
order, and rows are a random permutation of the documents. :class:`RowOrderSpill` appends each
arriving text to the spill file of the output files its row falls in (Arrow IPC, LZ4), then
reads the spill back one bucket at a time and hands out each output file's texts in row order:
memory holds one bucket, never the corpus.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import numpy as np
import pyarrow as pa

# Open spill files at most; more output files than this share spill files (buckets).
MAX_BUCKETS = 512
ROW, TEXT = "row", "text"
SPILL_SCHEMA = pa.schema([(ROW, pa.int64()), (TEXT, pa.string())])


def take_chunked(chunks: list[pa.Array], starts: np.ndarray, index: np.ndarray) -> pa.Array:
    """``concat(chunks).take(index)`` without concatenating all the chunks (``starts``: the
    position of each chunk's first value)."""
    chunk_of = np.searchsorted(starts, index, side="right") - 1
    order = np.argsort(chunk_of, kind="stable")
    # Each chunk's run of ``order`` (one slice each, not a scan of all of it per chunk)
    chunk_ids, first, counts = np.unique(chunk_of[order], return_index=True, return_counts=True)
    parts = []
    for c, begin, count in zip(chunk_ids, first, counts, strict=True):
        sel = order[begin : begin + count]
        parts.append(chunks[c].take(pa.array(index[sel] - starts[c])))
    gathered = pa.concat_arrays(parts) if parts else pa.array([], type=pa.string())
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return gathered.take(pa.array(inverse))


class RowOrderSpill:
    """Texts of rows ``0:n_rows`` added in any order; :meth:`files` yields them in row order,
    ``rows_per_file`` at a time. Spill files live under ``directory``, removed by
    :meth:`close` (or on leaving a ``with`` block)."""

    def __init__(self, directory: Path, n_rows: int, rows_per_file: int) -> None:
        self.directory = directory
        self.n_rows = n_rows
        self.rows_per_file = rows_per_file
        self.n_files = max(1, math.ceil(n_rows / rows_per_file))
        self.files_per_bucket = math.ceil(self.n_files / MAX_BUCKETS)
        self.rows_per_bucket = self.files_per_bucket * rows_per_file
        self.n_buckets = math.ceil(self.n_files / self.files_per_bucket)
        self._writers: dict[int, pa.ipc.RecordBatchStreamWriter] = {}
        self._options = pa.ipc.IpcWriteOptions(compression="lz4")
        directory.mkdir(parents=True, exist_ok=False)

    def _path(self, bucket: int) -> Path:
        return self.directory / f"bucket-{bucket:05d}.arrows"

    def add(self, rows: np.ndarray, texts: pa.Array) -> None:
        """Spill ``texts[i]`` as the text of row ``rows[i]``."""
        buckets = rows // self.rows_per_bucket
        order = np.argsort(buckets, kind="stable")
        bounds = np.flatnonzero(np.diff(buckets[order])) + 1
        for part in np.split(order, bounds) if order.size else []:
            bucket = int(buckets[part[0]])
            writer = self._writers.get(bucket)
            if writer is None:
                writer = pa.ipc.new_stream(
                    str(self._path(bucket)), SPILL_SCHEMA, options=self._options
                )
                self._writers[bucket] = writer
            index = pa.array(part)
            writer.write_batch(
                pa.record_batch([pa.array(rows[part], pa.int64()), texts.take(index)], SPILL_SCHEMA)
            )

    def files(self) -> Iterator[tuple[int, int, pa.Array]]:
        """``(file index, first row, texts of its rows in row order)`` for every output file,
        in order; each bucket's spill file is deleted once read. Raises ``ValueError`` when
        a row was added twice or never."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        for bucket in range(self.n_buckets):
            lo = bucket * self.rows_per_bucket
            hi = min(lo + self.rows_per_bucket, self.n_rows)
            chunks, rows = self._read(bucket)
            if rows.size != hi - lo or (rows.size and not _is_permutation(rows - lo)):
                raise ValueError(f"spill bucket {bucket} does not hold rows {lo}:{hi} once each")
            position = np.empty(rows.size, dtype=np.int64)
            position[rows - lo] = np.arange(rows.size)  # position[r - lo]: where row r arrived
            starts = np.cumsum([0] + [len(c) for c in chunks])[:-1]
            first_file = bucket * self.files_per_bucket
            for f in range(first_file, min(first_file + self.files_per_bucket, self.n_files)):
                start = f * self.rows_per_file
                stop = min(start + self.rows_per_file, self.n_rows)
                index = position[start - lo : stop - lo]
                yield f, start, take_chunked(chunks, starts, index) if chunks else _no_texts()

    def _read(self, bucket: int) -> tuple[list[pa.Array], np.ndarray]:
        path = self._path(bucket)
        if not path.exists():
            return [], np.zeros(0, dtype=np.int64)
        with pa.ipc.open_stream(str(path)) as reader:
            table = reader.read_all()
        path.unlink()
        rows = table.column(ROW).to_numpy()
        return list(table.column(TEXT).chunks), rows

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> RowOrderSpill:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _is_permutation(offsets: np.ndarray) -> bool:
    seen = np.zeros(offsets.size, dtype=bool)
    if offsets.min() < 0 or offsets.max() >= offsets.size:
        return False
    seen[offsets] = True
    return bool(seen.all())


def _no_texts() -> pa.Array:
    return pa.array([], type=pa.string())
