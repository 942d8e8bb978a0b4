"""The input's column names as Spark expressions: taken as they are.

Spark parses the name a string stands for in ``F.col``, ``df[...]``, ``df.select``,
``groupBy``, ``orderBy`` and SQL text: ``doc.id`` is field ``id`` of a struct ``doc``, and a
lone backtick is a syntax error. A user's column (the id, text, ``--prefer``, group and carried
columns) meets Spark through :func:`column` (or :func:`quoted` where Spark wants a string), so
that dots, backticks, spaces, brackets and any letters name the column the input has. Our own
columns (:mod:`neardup_spark.columns`) are plain names and need neither.

Spark's literal-name APIs need no quoting and get none: ``alias``, ``withColumn``,
``withColumnRenamed``, ``drop`` of a string, ``join`` on column names, ``df.schema[name]``,
``df.columns``, a ``Row``'s fields and Arrow's tables. ``mapInArrow`` is not one of them
(PySpark names each input column as an expression): rows with the input's columns go through
:func:`map_in_arrow`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.batch import with_names


def quoted(name: str) -> str:
    """``name`` as Spark reads one column of that exact name: in backticks, each backtick in it
    doubled.

    >>> quoted("doc.id")
    '`doc.id`'
    >>> quoted("we`ird")
    '`we``ird`'
    """
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    """The column named exactly ``name`` (``F.col`` of :func:`quoted`)."""
    return F.col(quoted(name))


def as_given_hint(name: str, present: list[str], option: str) -> str:
    """For a missing column ``name`` that is a present one in Spark's backticks: a remark on how
    ``option`` names it (names are taken as they are); else ``""``.

    >>> as_given_hint("`doc.id`", ["doc.id", "text"], "--id-col")
    ' (names are taken as they are, without backticks: --id-col doc.id)'
    """
    inner = name[1:-1].replace("``", "`") if len(name) > 2 and name[0] == name[-1] == "`" else ""
    if inner not in present:
        return ""
    return f" (names are taken as they are, without backticks: {option} {shlex.quote(inner)})"


def map_in_arrow(
    df: DataFrame,
    run: Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]],
    schema: T.StructType,
) -> DataFrame:
    """``df.mapInArrow(run, schema)`` for rows whose columns may have any names: they travel
    under plain positional names, and ``run`` gets each batch under their own again. (PySpark's
    ``mapInArrow`` reads each column as ``df[name]``, which a dot or a backtick breaks.)"""
    names = df.columns
    plain = df.select(*(column(name).alias(f"_neardup_in_{i}") for i, name in enumerate(names)))
    return plain.mapInArrow(with_names(run, names), schema)
