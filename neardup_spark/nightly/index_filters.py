"""Which rows of an index table a night reads, said once and rendered two ways: a PyArrow
expression for a filtered scan in this process, or semi- and anti-joins on broadcast key
tables for a Spark job (:class:`~neardup_spark.nightly.index_scan.IndexTable` picks, as the plan
says). Every filter a night needs is a column's membership in a set of keys, combined:

>>> import pyarrow as pa
>>> near = AnyOf(IsIn("doc_id", pa.array(["a", "b"])), IsIn("exact_fp", pa.array([7])))
>>> table = pa.table({"doc_id": ["a", "c", "d"], "exact_fp": [1, 7, 2]})
>>> table.filter(near.arrow()).column("doc_id").to_pylist()
['a', 'c']
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from neardup_spark.pipeline.execution import maybe_broadcast
from neardup_spark.runtime.engine import from_arrow


@dataclass(frozen=True)
class IsIn:
    """Rows whose ``column`` is one of ``keys``."""

    column: str
    keys: pa.Array

    def arrow(self) -> pc.Expression:
        return pc.field(self.column).isin(self.keys)

    def spark(self, frame: DataFrame) -> DataFrame:
        return frame.join(self.keys_frame(frame), self.column, "left_semi")

    def keys_frame(self, frame: DataFrame) -> DataFrame:
        """The keys as a one-column DataFrame (broadcast when few)."""
        keys = from_arrow(frame.sparkSession, pa.table({self.column: self.keys}))
        return maybe_broadcast(keys, len(self.keys))


@dataclass(frozen=True)
class NotIn:
    """Rows whose ``column`` is none of ``keys``."""

    column: str
    keys: pa.Array

    def arrow(self) -> pc.Expression:
        return ~pc.field(self.column).isin(self.keys)

    def spark(self, frame: DataFrame) -> DataFrame:
        return frame.join(IsIn(self.column, self.keys).keys_frame(frame), self.column, "left_anti")


@dataclass(frozen=True)
class Combined:
    """Rows every one of ``parts`` keeps (``every``: :func:`AllOf`) or one of them keeps
    (:func:`AnyOf`; a Spark job then returns a row once per part keeping it: the readers take
    the rows as a set)."""

    parts: tuple[Filter, ...]
    every: bool

    def arrow(self) -> pc.Expression:
        expression = self.parts[0].arrow()
        for part in self.parts[1:]:
            expression = expression & part.arrow() if self.every else expression | part.arrow()
        return expression

    def spark(self, frame: DataFrame) -> DataFrame:
        if self.every:
            for part in self.parts:
                frame = part.spark(frame)
            return frame
        found = self.parts[0].spark(frame)
        for part in self.parts[1:]:
            found = found.unionByName(part.spark(frame))
        return found


def AllOf(*parts: Filter) -> Combined:  # (named as the filter it makes)
    """Rows every one of ``parts`` keeps."""
    return Combined(parts, every=True)


def AnyOf(*parts: Filter) -> Combined:
    """Rows one of ``parts`` keeps."""
    return Combined(parts, every=False)


Filter = IsIn | NotIn | Combined
