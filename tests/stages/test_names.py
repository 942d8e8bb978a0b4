"""The input's column names as Spark expressions (neardup_spark/stages/names.py): each names the
column of that exact name, whatever it holds; ``mapInArrow`` over such columns."""

from __future__ import annotations

import doctest

import pyarrow as pa
from pyspark.sql import types as T

from neardup_spark.stages import names as names_module
from neardup_spark.stages.names import column, map_in_arrow

# Names Spark would parse: a struct field, a lone backtick, brackets, a space, a name in
# backticks, letters beyond ASCII, a comma.
ODD = ["doc.id", "we`ird", "a[0]", "body text", "`x`", "größe", "名前", "note, desc"]


def test_doctests():
    assert doctest.testmod(names_module).failed == 0


def test_a_column_is_the_one_of_that_exact_name(spark):
    df = spark.createDataFrame([tuple(range(len(ODD)))], ODD)
    picked = df.select(*(column(name).alias(f"c{i}") for i, name in enumerate(reversed(ODD))))
    assert list(picked.first()) == list(reversed(range(len(ODD))))
    assert df.where(column("we`ird") == 1).count() == 1


def test_map_in_arrow_gives_each_batch_the_columns_own_names(spark):
    df = spark.createDataFrame([tuple(range(len(ODD)))] * 3, ODD)

    def seen(batches):
        for batch in batches:
            yield pa.RecordBatch.from_arrays(
                [pa.array(["|".join(batch.schema.names)] * batch.num_rows)], names=["seen"]
            )

    schema = T.StructType([T.StructField("seen", T.StringType())])
    rows = map_in_arrow(df, seen, schema).collect()
    assert [row["seen"] for row in rows] == ["|".join(ODD)] * 3
