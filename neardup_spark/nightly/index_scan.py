"""Filtered reads of the index's narrow tables (``docs``, ``pairs``) for a night on the driver.

A night needs the few rows of these tables that concern it (its documents, the holders of some
contents, the members of the clusters it touches, the edges at its contents). Where the driver
reads the index's files itself (each segment recorded its files through PyArrow at its commit)
and the table has at most ``nightly_driver_scan_max_rows`` rows, the rows come from a filtered
PyArrow scan in this process: ~0.07 s a pass over a million ``docs`` rows, where a Spark job
over the same file took 0.5-1 s (one task: the table of a segment is one file, often one row
group) and a fresh process's first jobs more. A larger table, or one the driver cannot read, is
scanned by a Spark job (semi-joins on the broadcast keys) that returns the matching rows.

Both give the same rows (``tests/nightly``: a history replayed with each).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame

from neardup_spark.columns import CLUSTER_ID, DOC_ID, ESTIMATE, EXACT_FP, HAS_TEXT, JACCARD
from neardup_spark.io.filesystem import join, pyarrow_filesystem
from neardup_spark.nightly.integrity import FILES, SEGMENTS_DIR, is_data_file
from neardup_spark.nightly.store import BATCH, DOCS, FP_A, FP_B, WRITTEN, Index
from neardup_spark.runtime.spark_compat import to_arrow

SparkFilter = Callable[[DataFrame], DataFrame]


class IndexTable:
    """One narrow table (``docs`` or ``pairs``) of the committed version, for filtered reads:
    :meth:`rows` gives the rows a condition keeps, from a PyArrow scan on the driver where it
    can, else from a Spark job."""

    def __init__(self, index: Index, table: str, max_driver_rows: int) -> None:
        self.index, self.table = index, table
        self.empty = not any(s["rows"].get(table, 0) > 0 for s in index.segments)
        self.files = None if self.empty else _driver_files(index, table, max_driver_rows)
        string_ids = index.manifest is not None and index.manifest["id_type"] == "string"
        self.schema = _arrow_schema(table, pa.string() if string_ids else pa.int64())

    @property
    def on_driver(self) -> bool:
        return self.files is not None

    def frame(self) -> DataFrame:
        """The table as a Spark DataFrame (made when a Spark job reads it: making one lists
        its files in the JVM)."""
        frame = self.index.docs_rows() if self.table == DOCS else self.index.pairs()
        assert frame is not None, f"no {self.table} rows in the index"
        return frame

    def rows(self, matching: SparkFilter, where: pc.Expression) -> pa.Table:
        """The rows where ``where`` holds; ``matching`` is the same condition as a Spark
        filter of the table's DataFrame (semi-joins on small key tables)."""
        if self.files is None:
            return to_arrow(matching(self.frame()))
        fs, _ = pyarrow_filesystem(self.files[0])
        paths = [pyarrow_filesystem(path)[1] for path in self.files]
        dataset = ds.dataset(paths, schema=self.schema, format="parquet", filesystem=fs)
        return dataset.to_table(filter=where)


def _driver_files(index: Index, table: str, max_rows: int) -> list[str] | None:
    """The data files of ``table`` in the committed version's segments, when the driver reads
    them itself: every segment holding rows of it recorded its files (the driver reached them
    through PyArrow at its commit) and they add up to at most ``max_rows`` rows; else None."""
    holding = [s for s in index.segments if s["rows"].get(table, 0) > 0]
    if sum(int(s["rows"][table]) for s in holding) > max_rows:
        return None
    files: list[str] = []
    for segment in holding:
        base = join(index.root, SEGMENTS_DIR, segment["name"])
        own = [
            join(base, rel)
            for rel in sorted(segment.get(FILES) or ())
            if rel.startswith(f"{table}/") and is_data_file(rel)
        ]
        if not own:  # files not recorded (the driver could not list them): Spark reads them
            return None
        files += own
    return files or None


def _arrow_schema(table: str, id_type: pa.DataType) -> pa.Schema:
    """The table's columns as the Spark schemas of :mod:`.store` declare them (read as such,
    whatever nullability a file's writer marked)."""
    if table == DOCS:
        columns = [
            (DOC_ID, id_type), (HAS_TEXT, pa.bool_()), (EXACT_FP, pa.int64()),
            (CLUSTER_ID, id_type), (BATCH, pa.int32()), (WRITTEN, pa.int32()),
        ]  # fmt: skip
    else:
        columns = [(FP_A, pa.int64()), (FP_B, pa.int64()), (JACCARD, pa.float64()),
                   (ESTIMATE, pa.float64())]  # fmt: skip
    return pa.schema(columns)
