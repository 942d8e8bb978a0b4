"""The input read at its documents' addresses (pipeline/addressed_input.py), each path placed
explicitly and read back from the run's recorded plan: verification reads the candidates'
texts at their addresses in local Parquet files (``verify_texts: addresses``) or through bitmap
words over the addresses (``bitmap``, other storage above the broadcast limit), and
``deduplicated/`` keeps the rows through bitmap words (``spark_bitmap``): the same outputs as
the broadcast joins, and the same when the input is not a file scan (plain joins)."""

from __future__ import annotations

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import ExecutionSettings, build_config
from neardup_spark.pipeline import execution
from neardup_spark.pipeline.addressed_input import addressed_input
from neardup_spark.pipeline.dedupe import dedupe, run
from neardup_spark.quality.generate import generate_corpus
from tests.plans import placed, ran

OUTPUTS = ("clusters", "pairs", "deduplicated")


def table_of(path) -> list:
    rows = ds.dataset(str(path)).to_table().to_pylist()
    return sorted(tuple(r.values()) for r in rows)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    table, _ = generate_corpus(700, seed=8, mean_words=80)
    root = tmp_path_factory.mktemp("filtered-in")
    pq.write_table(table.slice(0, 350), root / "part-0.parquet", row_group_size=100)
    pq.write_table(table.slice(350), root / "part-1.parquet", row_group_size=100)
    return root


@pytest.fixture(scope="module")
def broadcast_run(spark, corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("filtered-out") / "broadcast"
    execution = placed(pairs="spark", verify_texts="broadcast", deduplicated="spark_join")
    report = run(spark, str(corpus), str(out), build_config(), execution=execution)
    ran(report, pairs="spark", verify_texts="broadcast", deduplicated="spark_join")
    assert report["counts"]["removed"] > 0 and report["counts"]["candidate_pairs"] > 0
    return out, report


@pytest.mark.parametrize("texts", ["addresses", pytest.param("bitmap", marks=pytest.mark.extended)])
def test_reads_at_addresses_and_bitmap_scans_give_the_broadcast_outputs(
    spark, corpus, broadcast_run, tmp_path, monkeypatch, texts
):
    """Verification's tasks read the texts at their addresses (local files), or through the
    bitmap scan (other storage); deduplicated/ keeps its rows through the bitmap scan. The same
    outputs as the broadcasts."""
    expected, expected_report = broadcast_run
    # verification's shuffles sized by text: ~15 partitions here, not the session's
    monkeypatch.setattr(execution, "VERIFY_BYTES_PER_PARTITION", 16 * 1024)
    session_partitions = spark.conf.get("spark.sql.shuffle.partitions")
    steps = {"pairs": "spark", "verify_texts": texts, "deduplicated": "spark_bitmap"}
    out = tmp_path / "out"
    report = run(spark, str(corpus), str(out), build_config(), execution=placed(**steps))
    assert spark.conf.get("spark.sql.shuffle.partitions") == session_partitions  # restored
    ran(report, **steps)
    assert report["counts"] == expected_report["counts"]
    for name in OUTPUTS:
        assert table_of(out / name) == table_of(expected / name), name


def test_verification_reads_local_files_at_addresses_whatever_the_candidates(
    spark, corpus, broadcast_run, tmp_path
):
    """Local Parquet: the plan reads the texts at their addresses whatever the number of
    candidates (no step in cost at the broadcast limit), and tasks copy deduplicated/; the
    same outputs."""
    expected, expected_report = broadcast_run
    for limit in (ExecutionSettings().broadcast_max_rows, 0):
        execution = ExecutionSettings(driver_max_docs=0, broadcast_max_rows=limit)
        out = tmp_path / f"out-{limit}"
        report = run(spark, str(corpus), str(out), build_config(), execution=execution)
        ran(report, pairs="spark", verify_texts="addresses", deduplicated="task_copy")
        assert report["plan"]["verify_texts"]["why"] != "given"
        assert report["counts"] == expected_report["counts"]
        for name in OUTPUTS:
            assert table_of(out / name) == table_of(expected / name), name


def test_without_addresses_the_joins_give_the_same_outputs(spark, corpus, broadcast_run):
    """A DataFrame that is not a file scan (here: a union) has no addresses: above the
    broadcast limit (0 here), shuffle joins."""
    expected, _ = broadcast_run
    df = spark.read.parquet(str(corpus / "part-0.parquet")).unionByName(
        spark.read.parquet(str(corpus / "part-1.parquet"))
    )
    assert addressed_input(df, "id", "text") is None
    result = dedupe(df, build_config(), ExecutionSettings(driver_max_docs=0, broadcast_max_rows=0))
    ran(result.report, sketch="spark", pairs="spark", verify_texts="join")
    ran(result.report, deduplicated="spark_join")
    got = {
        "clusters": sorted(map(tuple, result.clusters.collect())),
        "pairs": sorted(map(tuple, result.pairs.collect())),
        "deduplicated": sorted(map(tuple, result.deduplicated.collect())),
    }
    result.release()
    for name in OUTPUTS:
        assert got[name] == table_of(expected / name), name


def test_shuffle_partitions_are_raised_for_a_stage_then_restored(spark):
    key = "spark.sql.shuffle.partitions"
    session = spark.conf.get(key)
    assert 1 < int(session) < 37
    with execution.shuffle_partitions_at_least(spark, 1):  # fewer than the session's: unchanged
        assert spark.conf.get(key) == session
    with execution.shuffle_partitions_at_least(spark, 37):
        assert spark.conf.get(key) == "37"
        assert spark.range(100).repartition("id").rdd.getNumPartitions() == 37
    assert spark.conf.get(key) == session
