"""Runs the report tests read: one generated corpus deduped once with MinHash and once with
SimHash (shared by every test module of tests/report)."""

from __future__ import annotations

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.report.data import report_data


@pytest.fixture(scope="package")
def corpus(tmp_path_factory):
    """``(directory of two Parquet files, {id: text})`` of 800 generated documents."""
    table, _ = generate_corpus(800, seed=7, mean_words=150)
    root = tmp_path_factory.mktemp("report_corpus")
    pq.write_table(table.slice(0, 400), root / "part-0.parquet")
    pq.write_table(table.slice(400), root / "part-1.parquet")
    texts = dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist(), strict=True))
    return root, texts


@pytest.fixture(scope="package")
def minhash_run(spark, corpus, tmp_path_factory):
    root, _ = corpus
    out = tmp_path_factory.mktemp("report_out") / "minhash"
    report = run(spark, str(root), str(out), build_config())
    return out, report


@pytest.fixture(scope="package")
def simhash_run(spark, corpus, tmp_path_factory):
    root, _ = corpus
    out = tmp_path_factory.mktemp("report_out") / "simhash"
    report = run(spark, str(root), str(out), build_config(options={"method": "simhash"}))
    return out, report


@pytest.fixture(scope="package")
def data(minhash_run):
    out, _ = minhash_run
    return report_data(str(out))


@pytest.fixture(scope="package")
def tables(minhash_run):
    """``(pairs/, clusters/)`` of the MinHash run as lists of dicts."""
    out, _ = minhash_run
    pairs = ds.dataset(str(out / "pairs")).to_table().to_pylist()
    clusters = ds.dataset(str(out / "clusters")).to_table().to_pylist()
    return pairs, clusters
