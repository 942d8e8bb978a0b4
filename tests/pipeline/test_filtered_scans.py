"""Above the broadcast limit, verification reads the candidates' texts at their addresses in
local Parquet files (through bitmap words over the addresses for other storage), and
``deduplicated/`` the kept rows through bitmap words: the same outputs as the broadcast joins,
and the same when the input is not a file scan (plain joins)."""

from __future__ import annotations

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.pipeline import execution, filtered_scans, steps
from neardup_spark.pipeline.dedupe import dedupe, run
from neardup_spark.quality.generate import generate_corpus

OUTPUTS = ("clusters", "pairs", "deduplicated")
# The Spark stages whatever the size (a corpus this small finds its pairs on the driver).
SPARK_STAGES = {"driver_max_docs": 0}


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
    report = run(spark, str(corpus), str(out), build_config())
    assert report["counts"]["removed"] > 0 and report["counts"]["candidate_pairs"] > 0
    return out, report


@pytest.mark.parametrize(
    ("files_local", "reads"),
    [(True, ["rows_without", "side_texts"]), (False, ["rows_without", "texts_of"])],
    ids=["read-at-addresses", "bitmap-scan"],
)
def test_filtered_scans_give_the_broadcast_outputs(
    spark, corpus, broadcast_run, tmp_path, monkeypatch, files_local, reads
):
    """Local files: verification's tasks read the texts at their addresses; on other storage
    (here: the files taken for remote) through the bitmap scan. The same outputs either way."""
    expected, expected_report = broadcast_run
    calls: list[str] = []
    for name in ("texts_of", "rows_without", "side_texts"):
        original = getattr(filtered_scans.AddressedInput, name)

        def recorded(self, *args, _original=original, _name=name):
            result = _original(self, *args)
            calls.append(_name if result is not None else f"{_name}: none")
            return result

        monkeypatch.setattr(filtered_scans.AddressedInput, name, recorded)
    if not files_local:
        monkeypatch.setattr(filtered_scans, "is_local", lambda path: False)
    monkeypatch.setattr(steps, "BROADCAST_MAX_ROWS", 0)  # every id list is "too large"
    # and verification's shuffles sized by text: ~15 partitions here, not the session's
    monkeypatch.setattr(execution, "VERIFY_BYTES_PER_PARTITION", 16 * 1024)
    session_partitions = spark.conf.get("spark.sql.shuffle.partitions")
    report = run(spark, str(corpus), str(tmp_path / "out"), build_config(options=SPARK_STAGES))
    assert spark.conf.get("spark.sql.shuffle.partitions") == session_partitions  # restored
    if not files_local:
        reads = [*reads, "side_texts: none"]
    assert sorted(calls) == sorted(reads)
    assert report["counts"] == expected_report["counts"]
    for name in OUTPUTS:
        assert table_of(tmp_path / "out" / name) == table_of(expected / name), name


def test_below_the_limit_verification_reads_local_files_at_addresses_too(
    spark, corpus, broadcast_run, tmp_path, monkeypatch
):
    """Local Parquet: the texts are read at their addresses whatever the number of candidates
    (no step in cost at the broadcast limit); the same outputs."""
    expected, expected_report = broadcast_run
    read = []
    original = filtered_scans.AddressedInput.side_texts

    def recorded(self, *args):
        read.append(original(self, *args))
        return read[-1]

    monkeypatch.setattr(filtered_scans.AddressedInput, "side_texts", recorded)
    report = run(spark, str(corpus), str(tmp_path / "out"), build_config(options=SPARK_STAGES))
    assert len(read) == 1 and read[0] is not None
    assert report["counts"] == expected_report["counts"]
    for name in OUTPUTS:
        assert table_of(tmp_path / "out" / name) == table_of(expected / name), name


def test_without_addresses_the_joins_give_the_same_outputs(
    spark, corpus, broadcast_run, monkeypatch
):
    """A DataFrame that is not a file scan (here: a union) has no addresses: shuffle joins."""
    expected, _ = broadcast_run
    monkeypatch.setattr(steps, "BROADCAST_MAX_ROWS", 0)
    df = spark.read.parquet(str(corpus / "part-0.parquet")).unionByName(
        spark.read.parquet(str(corpus / "part-1.parquet"))
    )
    assert filtered_scans.addressed_input(df, "id", "text") is None
    result = dedupe(df, build_config(options=SPARK_STAGES))
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
