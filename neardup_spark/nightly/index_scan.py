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
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from neardup_spark.io.filesystem import join, pyarrow_filesystem
from neardup_spark.nightly.integrity import FILES, SEGMENTS_DIR, is_data_file
from neardup_spark.nightly.store import (
    DOCS,
    PAIRS_SCHEMA,
    Index,
    docs_schema,
    id_type_from_name,
)
from neardup_spark.pipeline.execution import maybe_broadcast
from neardup_spark.runtime.engine import from_arrow
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
        id_type = index.manifest["id_type"] if index.manifest is not None else "bigint"
        spark_schema = docs_schema(id_type_from_name(id_type)) if table == DOCS else PAIRS_SCHEMA
        # Read as the store declares them, whatever nullability a file's writer marked.
        self.schema = pa.schema(f.with_nullable(True) for f in to_arrow_schema(spark_schema))

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


def keys_frame(spark: SparkSession, column: str, keys: pa.Array) -> DataFrame:
    """A one-column DataFrame of ``keys`` (broadcast when few): the right side of a Spark
    read's semi-join."""
    return maybe_broadcast(from_arrow(spark, pa.table({column: keys})), len(keys))
