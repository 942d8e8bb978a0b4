"""Input files whose footer reads but whose data pages do not: bytes zeroed in the middle of one
column chunk of one row group, the footer kept (tests of issue 42's damaged inputs)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq

ROWS = 600
ROW_GROUP_ROWS = 200
DAMAGED_GROUP = 1  # the second row group: rows 200 to 399


def pages(first: int, n: int) -> pa.Table:
    """``n`` documents with ids from ``first``: an id, a text and a url column."""
    ids = list(range(first, first + n))
    return pa.table(
        {
            "id": ids,
            "text": [f"page {i} " + " ".join(f"w{i % 97}x{j}" for j in range(30)) for i in ids],
            "url": [f"https://example.org/{i}/" + "p" * (i % 50) for i in ids],
        }
    )


def zero_middle(path: Path, start: int, size: int, n: int = 32) -> None:
    """Zero ``n`` bytes in the middle of ``path``'s bytes ``start`` to ``start + size``."""
    data = bytearray(path.read_bytes())
    middle = start + size // 2
    data[middle : middle + n] = bytes(n)
    path.write_bytes(bytes(data))


def damaged_parquet(path: Path, first: int, column: str = "text") -> None:
    """A snappy Parquet file of :data:`ROWS` rows (row groups of :data:`ROW_GROUP_ROWS`) whose
    ``column`` chunk in row group :data:`DAMAGED_GROUP` has zeroed bytes (PyArrow and Spark both
    fail to decompress it); its footer reads."""
    pq.write_table(pages(first, ROWS), path, row_group_size=ROW_GROUP_ROWS, compression="snappy")
    chunk = pq.read_metadata(path).row_group(DAMAGED_GROUP)
    names = [chunk.column(i).path_in_schema for i in range(chunk.num_columns)]
    meta = chunk.column(names.index(column))
    start = meta.dictionary_page_offset or meta.data_page_offset
    zero_middle(path, start, meta.total_compressed_size)
    assert pq.read_metadata(path).num_rows == ROWS  # the footer reads


def damaged_orc(path: Path, first: int) -> None:
    """A zlib ORC file with zeroed bytes in the middle of its data; its footer reads."""
    orc.write_table(pages(first, ROWS), path, compression="zlib")
    size = path.stat().st_size
    zero_middle(path, 0, size // 2)
    assert orc.ORCFile(path).nrows == ROWS


def digests(root: Path) -> dict[str, str]:
    """Every file under ``root`` by its SHA-256 (to show the input is left as it was)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
