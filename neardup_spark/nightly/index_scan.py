"""Filtered reads of the index's narrow tables (``docs``, ``pairs``) for a night on the driver.

A night needs the few rows of these tables that concern it (its documents, the holders of some
contents, the members of the clusters it touches, the edges at its contents). Where the driver
reads the index's files itself (each segment recorded its files through PyArrow at its commit)
and the table has at most ``nightly_driver_scan_max_rows`` rows, the rows come from a filtered
PyArrow scan in this process: ~0.07 s a pass over a million ``docs`` rows, where a Spark job
over the same file took 0.5-1 s (one task: the table of a segment is one file, often one row
group) and a fresh process's first jobs more. A larger table, or one the driver cannot read, is
scanned by a Spark job (semi-joins on the broadcast keys) that returns the matching rows. The
plan chooses; the filter is written once (:mod:`.index_filters`) and rendered for either.

Both give the same rows (``tests/nightly``: a history replayed with each).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema

from neardup_spark.io.filesystem import join, pyarrow_filesystem
from neardup_spark.nightly.index_filters import Filter
from neardup_spark.nightly.integrity import FILES, SEGMENTS_DIR, is_data_file
from neardup_spark.nightly.store import (
    DOCS,
    PAIRS_SCHEMA,
    Index,
    docs_schema,
    id_type_from_name,
)
from neardup_spark.pipeline.plan import DRIVER, Plan, decide_index_scan
from neardup_spark.runtime.spark_compat import to_arrow


class IndexTable:
    """One narrow table (``docs`` or ``pairs``) of the committed version, for filtered reads:
    :meth:`rows` gives the rows a filter keeps, from a PyArrow scan on the driver or from a
    Spark job, as the plan says (:func:`~neardup_spark.pipeline.plan.decide_index_scan`)."""

    def __init__(self, index: Index, table: str, plan: Plan) -> None:
        self.index, self.table = index, table
        holding = [s for s in index.segments if s["rows"].get(table, 0) > 0]
        self.empty = not holding
        self.files: list[str] | None = None
        if holding:  # an empty table is not read: no scan to place
            files = recorded_files(index, table, holding)
            rows = sum(int(s["rows"][table]) for s in holding)
            choice = plan.record(decide_index_scan(table, rows, files is not None, plan.settings))
            self.files = files if choice.where == DRIVER else None
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

    def rows(self, where: Filter) -> pa.Table:
        """The rows ``where`` keeps (a set: a Spark job may return a row more than once)."""
        if self.files is None:
            return to_arrow(where.spark(self.frame()))
        fs, _ = pyarrow_filesystem(self.files[0])
        paths = [pyarrow_filesystem(path)[1] for path in self.files]
        dataset = ds.dataset(paths, schema=self.schema, format="parquet", filesystem=fs)
        return dataset.to_table(filter=where.arrow())


def recorded_files(index: Index, table: str, holding: list[dict[str, Any]]) -> list[str] | None:
    """The data files of ``table`` in the ``holding`` segments when every one of them recorded
    its files (the driver reached them through PyArrow at its commit); else None."""
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
