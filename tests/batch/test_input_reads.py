"""PyArrow's reads of input row groups: a damaged one is an InputUnreadable naming the file, its
format and the row group, in every reader (here: verification's texts at addresses); raised in
a Spark task, its message is found again in the driver's error; Spark's own failure to read a
file is the input's only for a file under INPUT."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.batch.addressed_texts import (
    FILE_NO,
    ROW_INDEX,
    AddressedFiles,
    texts_at_addresses_fn,
)
from neardup_spark.batch.input_reads import read_row_group
from neardup_spark.columns import DOC_ID
from neardup_spark.errors import InputUnreadable, UserError, input_damage_in
from neardup_spark.io.input_failures import failed_input_read
from tests.damaged_files import damaged_parquet

SAID = "is damaged: reading row group 2 of 3 (rows 200 to 399) failed (OSError: Corrupt snappy"


def test_a_damaged_row_group_is_named(tmp_path):
    path = tmp_path / "b.parquet"
    damaged_parquet(path, 0)
    with pq.ParquetFile(path) as parquet:
        assert read_row_group(parquet, str(path), 0, ["id"]).num_rows == 200
        with pytest.raises(InputUnreadable) as raised:
            read_row_group(parquet, str(path), 1, ["id", "text"])
    assert f"{path} (Parquet) {SAID}" in str(raised.value)
    assert isinstance(raised.value, UserError)  # exit 2


def test_verification_reading_a_damaged_file_names_it(tmp_path):
    path = tmp_path / "b.parquet"
    damaged_parquet(path, 0)
    files = AddressedFiles((str(path),), "id", "text", pa.memory_map)
    requests = pa.RecordBatch.from_arrays(
        [pa.array([0], pa.int32()), pa.array([250], pa.int64()), pa.array([250]), pa.array([1])],
        names=[FILE_NO, ROW_INDEX, DOC_ID, "side"],
    )
    with pytest.raises(InputUnreadable) as raised:
        list(texts_at_addresses_fn(files, ["side"], pa.string())([requests]))
    assert f"{path} (Parquet) {SAID}" in str(raised.value)


def test_the_message_is_found_in_a_spark_error():
    text = (
        "An error occurred while calling o61.collectToPython.\n"
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "x.py", line 1, in read\n'
        "neardup_spark.errors.InputUnreadable: input file /in/b.parquet (Parquet) is damaged: x\n"
        "\tat org.apache.spark.api.python.BasePythonRunner"
    )
    found = input_damage_in(RuntimeError(text))
    assert found == "input file /in/b.parquet (Parquet) is damaged: x"
    assert input_damage_in(RuntimeError("another failure")) is None


SPARK_SAYS = (
    "An error occurred while calling o36.collectToPython.\n"
    ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while "
    "reading file file:///data/{where}/part%201.orc.  SQLSTATE: KD001\n"
    "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(Q.scala:856)\n"
    "Caused by: java.io.IOException: Error reading file: file:/data/{where}/part 1.orc\n"
    "Caused by: java.io.IOException: Decompress output buffer too small.\n"
)


@pytest.mark.parametrize(
    "given", ["/data/in", "file:///data/in/", "/data/i*", "/data/in/part 1.orc"]
)
def test_spark_failing_to_read_an_input_file(given):
    found = failed_input_read(RuntimeError(SPARK_SAYS.format(where="in")), [given])
    assert found is not None
    assert found.startswith("input file /data/in/part 1.orc (ORC) is damaged: reading it with ")
    assert "IOException: Decompress output buffer too small." in found


def test_spark_failing_to_read_a_file_of_the_run_is_not_the_input():
    staged = RuntimeError(SPARK_SAYS.format(where="out/_staging/r1/sketch"))
    assert failed_input_read(staged, ["/data/in"]) is None
    assert failed_input_read(staged, []) is None  # an input table: no path to tell it by
