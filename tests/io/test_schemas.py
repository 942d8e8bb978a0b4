"""Files whose schemas disagree: a type conflict is exit 2 naming two files and two types; a
column missing from some files is read as null there, unless the run needs it."""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from neardup_spark.errors import UserError
from neardup_spark.io.corpus import read_corpus
from neardup_spark.io.schemas import check_schemas, read_footers


def write(directory, name, **columns):
    directory.mkdir(exist_ok=True)
    pq.write_table(pa.table(columns), directory / name)


@pytest.mark.parametrize(
    ("column", "first", "second", "types"),
    [
        ("id", [1, 2], ["3", "4"], "int64 .* but string"),
        ("text", ["a", "b"], [b"c", b"d"], "string .* but binary"),
        ("quality", [1, 2], ["x", "y"], "int64 .* but string"),
    ],
)
def test_a_type_conflict_names_both_files_and_types(spark, tmp_path, column, first, second, types):
    base = {"id": [1, 2], "text": ["a", "b"], "quality": [0.5, 0.7]}
    write(tmp_path, "part-0.parquet", **{**base, column: first})
    write(tmp_path, "part-1.parquet", **{**base, "id": [3, 4], column: second})
    pattern = rf"disagree on column '{column}': it is {types} in .*part-1.parquet"
    with pytest.raises(UserError, match=pattern):
        read_corpus(spark, str(tmp_path), columns=("id", "text"))


def test_a_column_missing_from_some_files(spark, tmp_path):
    write(tmp_path, "part-0.parquet", id=[1, 2], text=["a", "b"], quality=[0.5, 0.7])
    write(tmp_path, "part-1.parquet", id=[3], text=["c"])
    df, _ = read_corpus(spark, str(tmp_path), columns=("id", "text"))  # merged: nulls
    assert sorted((r.id, r.quality) for r in df.collect()) == [(1, 0.5), (2, 0.7), (3, None)]
    write(tmp_path, "part-2.parquet", id=[4], body=["d"])
    with pytest.raises(
        UserError, match=r"column 'text' is in .*part-0.parquet but missing from .*part-2"
    ):
        read_corpus(spark, str(tmp_path), columns=("id", "text"))


def test_orc_files_are_checked_too(spark, tmp_path):
    orc.write_table(pa.table({"id": [1], "text": ["a"]}), str(tmp_path / "a.orc"))
    orc.write_table(pa.table({"id": ["2"], "text": ["b"]}), str(tmp_path / "b.orc"))
    with pytest.raises(UserError, match="disagree on column 'id'"):
        read_corpus(spark, str(tmp_path))


def test_widths_and_encodings_that_spark_reads_alike_agree(tmp_path):
    write(tmp_path, "a.parquet", id=pa.array(["1"], pa.large_string()))
    write(tmp_path, "b.parquet", id=pa.array(["2"]).dictionary_encode())
    write(tmp_path, "c.parquet", id=pa.array([None], pa.null()))
    footers = read_footers([f"file:{p}" for p in sorted(tmp_path.iterdir())])
    assert not check_schemas(footers, "x") and all(f.problem is None for f in footers)


def test_reading_a_thousand_footers_is_cheap(tmp_path):
    """The check's cost: 1,000 local Parquet footers read on the driver's threads."""
    table = pa.table({"id": [1], "text": ["a"]})
    for i in range(1000):
        pq.write_table(table, tmp_path / f"part-{i:04d}.parquet")
    files = [f"file:{p}" for p in sorted(tmp_path.iterdir())]
    started = time.perf_counter()
    check_schemas(read_footers(files), "x", ("id", "text"))
    seconds = time.perf_counter() - started
    print(f"1,000 footers read and compared in {seconds:.2f} s")
    assert seconds < 10
