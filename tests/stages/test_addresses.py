"""Addresses of a Parquet scan and the bitmap words that filter it by a set of ids."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import AnalysisException
from pyspark.logger import PySparkLogger

from neardup_spark.stages.addresses import (
    BITS,
    FILE_PATH,
    QUERY_CONTEXT_LOGGERS,
    ROW_INDEX,
    WORD,
    address_words,
    rows_of_words,
    with_addresses,
)


@pytest.fixture(scope="module")
def scan(spark, tmp_path_factory):
    """Two files of 150 and 70 rows, in row groups of 40: rows 63, 64 and 127 sit at word
    edges (bit 63 is the sign bit of a Spark long)."""
    root = tmp_path_factory.mktemp("addresses")
    for name, ids in (("a.parquet", range(150)), ("b.parquet", range(150, 220))):
        table = pa.table({"id": [f"d{i:03d}" for i in ids], "text": [f"t{i}" for i in ids]})
        pq.write_table(table, root / name, row_group_size=40)
    return spark.read.parquet(str(root))


def test_addresses_are_file_and_row(scan):
    rows = with_addresses(scan).select("id", FILE_PATH, ROW_INDEX).collect()
    where = {r["id"]: (r[FILE_PATH].rsplit("/", 1)[1], r[ROW_INDEX]) for r in rows}
    assert where["d000"] == ("a.parquet", 0) and where["d149"] == ("a.parquet", 149)
    assert where["d150"] == ("b.parquet", 0) and where["d219"] == ("b.parquet", 69)


def test_a_dataframe_built_in_memory_has_no_addresses(spark):
    assert with_addresses(spark.createDataFrame([("a", "x")], "id string, text string")) is None


@pytest.mark.parametrize("source", ["csv", "memory"])
def test_a_scan_without_row_indexes_is_probed_without_a_word_on_the_console(
    spark, tmp_path, source
):
    """A CSV scan has no ``_metadata.row_index`` and a DataFrame built in memory no
    ``_metadata``: no addresses, and the failed probe logs nothing (PySpark 4 logs every
    analysis error of a DataFrame call, caught or not, as an ERROR with the JVM's stack trace on
    stderr: a successful run over a CSV corpus printed ~150 lines of it)."""
    if source == "csv":
        (tmp_path / "a.csv").write_text("id,text\na,some words\n")
        df = spark.read.option("header", "true").csv(str(tmp_path / "a.csv"))
    else:
        df = spark.createDataFrame([("a", "x")], "id string, text string")
    records: list[logging.LogRecord] = []
    recorder = logging.Handler()
    recorder.emit = records.append  # type: ignore[method-assign]
    loggers = [PySparkLogger.getLogger(name) for name in QUERY_CONTEXT_LOGGERS]
    for logger in loggers:
        logger.addHandler(recorder)
    try:
        assert with_addresses(df) is None
        # The loggers are on again after the probe: the JVM's own errors still reach the user.
        with pytest.raises(AnalysisException):
            df.select("no_such_column")
    finally:
        for logger in loggers:
            logger.removeHandler(recorder)
    assert [record.getMessage().split("]")[0] for record in records] == [
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION"
    ]


def test_bitmap_words_keep_exactly_the_members_or_all_others(spark, scan):
    members = ["d000", "d063", "d064", "d127", "d128", "d149", "d150", "d213", "d063"]
    ids = spark.createDataFrame([(m,) for m in members], "doc_id string")
    addressed = with_addresses(scan)
    words = ids.transform(address_words(addressed, "id"))
    rows = {(r[FILE_PATH].rsplit("/", 1)[1], r[WORD]): r[BITS] for r in words.collect()}
    signed = (1 | 1 << 63) - (1 << 64)  # bits 0 and 63, as a Spark long
    assert rows == {
        ("a.parquet", 0): signed,  # d000, d063
        ("a.parquet", 1): signed,  # d064, d127
        ("a.parquet", 2): 1 | 1 << 21,  # d128, d149
        ("b.parquet", 0): signed,  # d150, d213
    }
    kept = addressed.transform(rows_of_words(words, members=True))
    assert kept.columns == ["id", "text"]
    assert sorted(r["id"] for r in kept.collect()) == sorted(set(members))
    others = addressed.transform(rows_of_words(words, members=False)).collect()
    assert len(others) == 220 - len(set(members))
    assert not {r["id"] for r in others} & set(members)
