"""Variant rows: neardup-minhash run another way, compared with it; the resumed rerun."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.bench.corpora import Corpus
from neardup_spark.bench.rows import run_row, skip_reason
from neardup_spark.bench.settings import ROWS, VARIANT_ROWS, BenchSettings
from neardup_spark.bench.variants import VARIANTS, compare_variants, same_outputs
from tests.plans import ran


def write_output(path, clusters, pairs):
    for name, rows in (("clusters", clusters), ("pairs", pairs)):
        (path / name).mkdir(parents=True)
        pq.write_table(pa.table(rows), path / name / "part-0.parquet")


def test_the_variant_rows_are_the_settings_ones():
    """Every variant row is a default row (neardup-connect) or one of the rows run only when
    named; the latter are exactly the variants that are not default rows."""
    assert set(VARIANTS) - set(ROWS) == set(VARIANT_ROWS)
    assert "neardup-connect" in ROWS and "neardup-connect" in VARIANTS


def test_variants_are_skipped_above_their_size():
    settings = BenchSettings(variant_max_docs=1000)
    assert skip_reason("neardup-standalone", 1001, settings) == "above --variant-max-docs 1,000"
    assert skip_reason("neardup-standalone", 1000, settings) is None
    assert skip_reason("neardup-minhash", 10**9, settings) is None


def test_compare_variants_against_neardup_minhash(tmp_path):
    clusters = {"doc_id": ["a", "b", "c"], "cluster_id": ["a", "a", "c"]}
    pairs = {"doc_a": ["a"], "doc_b": ["b"]}
    write_output(tmp_path / "ref", clusters, pairs)
    write_output(tmp_path / "same", {k: v[::-1] for k, v in clusters.items()}, pairs)
    write_output(
        tmp_path / "other",
        {"doc_id": ["a", "b", "c"], "cluster_id": ["a", "b", "c"]},
        {"doc_a": [], "doc_b": []},
    )
    assert same_outputs(tmp_path / "same", tmp_path / "ref")
    rows = [
        {
            "row": "neardup-minhash",
            "status": "ok",
            "output": str(tmp_path / "ref"),
            "work_seconds": 10.0,
        },
        {"row": "neardup-64-partitions", "status": "ok", "output": str(tmp_path / "same")},
        {"row": "neardup-distributed-cc", "status": "ok", "output": str(tmp_path / "other")},
        {
            "row": "neardup-resume",
            "status": "ok",
            "output": str(tmp_path / "same"),
            "work_seconds": 4.0,
        },
        {"row": "neardup-standalone", "status": "failed"},
        # (another rule: outputs that differ by design, never called the same or not)
        {"row": "neardup-components", "status": "ok", "output": str(tmp_path / "other")},
    ]
    compare_variants(rows)
    assert [r.get("same_as_minhash") for r in rows] == [None, True, False, True, None, None]
    assert rows[3]["rerun_share"] == 0.4


@pytest.mark.slow
@pytest.mark.extended
def test_the_resume_row_kills_a_run_after_candidates_and_measures_the_rerun(spark, tmp_path):
    """The row's killed run got as far as the candidates stage (the rerun resumed its three
    stages, kept by the Spark path its ``driver_max_docs=0`` takes), and the resumed rerun's
    clusters and pairs equal an uninterrupted run's (this suite's session, the row's
    threshold, its pairs found on the driver)."""
    from neardup_spark.config import build_config
    from neardup_spark.pipeline.dedupe import run
    from neardup_spark.quality.generate import write_corpus

    write_corpus(str(tmp_path / "corpus"), 400, seed=3, mean_words=60)
    corpus = Corpus(docs=400, root=tmp_path / "corpus")
    settings = BenchSettings(timeout=600, scale_metrics=True)
    record = run_row("neardup-resume", corpus, tmp_path / "bench", settings)
    assert record["status"] == "ok", record
    assert record["resumed_stages"] == ["sketch", "exact", "candidates"]
    assert record["killed_run"]["seconds"] > 0
    scale = record["scale"]
    assert scale["tasks"] > 0 and scale["shuffle_write_bytes"] > 0 and scale["input_bytes"] > 0
    assert scale["staging_peak_bytes"] > 0 and scale["output_bytes"] > 0
    reference = tmp_path / "uninterrupted"
    config = build_config(options={"threshold": settings.threshold})
    report = run(spark, str(corpus.corpus), str(reference), config)
    assert report["counts"]["near_pairs"] > 0  # there are pairs to get wrong
    assert same_outputs(Path(record["output"]), reference)
    ran(json.loads((Path(record["output"]) / "report.json").read_text()), pairs="spark")
    ran(report, pairs="driver")
