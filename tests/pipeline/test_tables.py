"""``--output-table PREFIX``: the three outputs as tables of the session's catalog, with or
without an OUTPUT directory for report.json; existing tables refused unless overwritten."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.pipeline.dedupe import run
from neardup_spark.pipeline.tables import OutputTables
from neardup_spark.quality.generate import generate_corpus


@pytest.fixture
def database(spark, tmp_path):
    """A database of the suite's catalog under tmp_path, dropped after the test."""
    name = "neardup_tables_test"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{tmp_path / 'warehouse'}'")
    yield name
    spark.sql(f"DROP DATABASE {name} CASCADE")


@pytest.fixture
def corpus(tmp_path):
    table, _ = generate_corpus(300, seed=21, mean_words=60)
    (tmp_path / "corpus").mkdir()
    pq.write_table(table, tmp_path / "corpus" / "part-0.parquet")
    return str(tmp_path / "corpus")


def rows_of(df) -> list[tuple]:
    return sorted(tuple(sorted(r.asDict().items())) for r in df.collect())


def test_tables_hold_the_parquet_outputs(spark, database, corpus, tmp_path):
    config = build_config()
    run(spark, corpus, str(tmp_path / "parquet"), config)
    tables = OutputTables(f"{database}.crawl")
    report = run(spark, corpus, None, config, tables=tables)
    assert report["output_tables"] == [
        f"{database}.crawl_{t}" for t in ("clusters", "pairs", "deduplicated")
    ]
    for table in ("clusters", "pairs", "deduplicated"):
        expected = rows_of(spark.read.parquet(str(tmp_path / "parquet" / table)))
        assert rows_of(spark.table(f"{database}.crawl_{table}")) == expected, table
    assert spark.catalog.tableExists(f"{database}.crawl_pairs")


def test_existing_tables_are_refused_unless_overwritten(spark, database, corpus, tmp_path):
    config = build_config()
    tables = OutputTables(f"{database}.night")
    run(spark, corpus, None, config, tables=tables)
    with pytest.raises(
        UserError, match=rf"table {database}.night_clusters exists; pass --overwrite"
    ):
        run(spark, corpus, None, config, tables=tables)
    out = tmp_path / "report-dir"
    report = run(
        spark, corpus, str(out), config, tables=OutputTables(f"{database}.night", overwrite=True)
    )
    # OUTPUT holds the report, the manifest, _SUCCESS and the job's ownership record only.
    assert sorted(p.name for p in out.iterdir()) == [
        "_SUCCESS",
        "_neardup.json",
        "manifest.json",
        "report.json",
    ]
    written = json.loads((out / "report.json").read_text())
    assert written["output_tables"] == report["output_tables"]
    assert written["counts"]["input_rows"] == 300
    assert spark.table(f"{database}.night_deduplicated").count() == report["counts"]["clusters"]


def test_a_bad_prefix_is_a_user_error(spark, corpus):
    with pytest.raises(UserError, match="not a table name prefix"):
        run(spark, corpus, None, build_config(), tables=OutputTables("a b"))
