"""The anchored rule's large LSH buckets (kernels/bucket_kept.py, wired in pipeline/pairs.py and
driver_pairs.py): on template-heavy pages, chains of revisions whose buckets are far larger than
``bucket_all_pairs_max``, the driver and the Spark stages find the same candidates, pairs,
clusters and counts; far fewer kept pairs are near-duplicates than with the star alone; the
``components`` rule is untouched; a cap's skipped comparisons are counted and logged."""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.batch.documents import documents_columns_fn
from neardup_spark.columns import BAND_KEYS, DOC_A, DOC_B, DOC_ID
from neardup_spark.config import build_config
from neardup_spark.kernels.anchored import anchors
from neardup_spark.pipeline import driver_pairs
from neardup_spark.pipeline.dedupe import dedupe
from neardup_spark.quality.oracle import shingle_matrix
from tests.pipeline.test_resume import run_killed_after, run_stages
from tests.plans import placed, ran

ANCHORED = {"cluster_rule": "anchored"}


def template_chains(
    chains: int = 10, length: int = 20, template: int = 400, body: int = 60, step: int = 3
) -> pa.Table:
    """``chains`` chains of ``length`` revisions (``step`` words of a ``body`` changed each
    time) inside one ``template`` of shared words: each page is near its neighbours in its
    chain, not its far end, and the template puts pages of every chain in the same buckets."""
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(5000)]
    shared = list(rng.choice(words, template))
    ids, texts = [], []
    for c in range(chains):
        text = [f"c{c}b{i}" for i in range(body)]
        for v in range(length):
            for at in rng.choice(body, step, replace=False):
                text[at] = f"c{c}v{v}x{at}"
            ids.append(f"page-{v:03d}-{c:02d}")
            texts.append(" ".join(shared[:60] + text + shared[60:]))
    return pa.table({"id": ids, "text": texts})


@pytest.fixture(scope="module")
def pages():
    return template_chains()


@pytest.fixture(scope="module")
def frame(spark, pages):
    return spark.createDataFrame(pages.to_pandas())


def near_pairs_sharing_a_band(pages: pa.Table, config) -> tuple[np.ndarray, np.ndarray]:
    """Every pair ``(i, j)`` of row numbers with exact Jaccard >= threshold that shares a band."""
    batch = pa.RecordBatch.from_arrays(
        [pages.column("id").combine_chunks(), pages.column("text").combine_chunks()],
        names=[DOC_ID, "text"],
    )
    keys = documents_columns_fn(config, with_sets=False)(batch).column(BAND_KEYS).to_pylist()
    matrix = shingle_matrix(pages.column("text"), config.ngram, config.seed)
    i, j = np.triu_indices(pages.num_rows, 1)
    near = matrix.jaccard(i, j) >= config.threshold
    shares = np.array([bool(set(keys[a]) & set(keys[b])) for a, b in zip(i, j, strict=True)])
    return i[near & shares], j[near & shares]


def kept_near_pairs(kept: set[str], pages: pa.Table, config) -> int:
    ids = pages.column("id").to_pylist()
    i, j = near_pairs_sharing_a_band(pages, config)
    return sum(ids[a] in kept and ids[b] in kept for a, b in zip(i, j, strict=True))


def outcome(result) -> dict:
    pairs = result.pairs.toPandas().sort_values([DOC_A, DOC_B]).reset_index(drop=True)
    found = {
        "pairs": pairs,
        "clusters": sorted(tuple(r) for r in result.clusters.collect()),
        "kept": sorted(r["id"] for r in result.deduplicated.select("id").collect()),
        "counts": dict(result.report["counts"]),
        "plan": result.report["plan"],
    }
    result.release()
    return found


@pytest.fixture(scope="module")
def runs(spark, frame):
    config = build_config(options=ANCHORED)
    return {
        where: outcome(dedupe(frame, config, placed(pairs=where))) for where in ("driver", "spark")
    }


def test_the_driver_and_the_spark_stages_find_the_same_pairs_and_clusters(runs):
    driver, spark_path = runs["driver"], runs["spark"]
    ran({"plan": driver["plan"]}, pairs="driver")
    ran({"plan": spark_path["plan"]}, pairs="spark")
    assert driver["pairs"].equals(spark_path["pairs"])
    for key in ("clusters", "kept", "counts"):
        assert driver[key] == spark_path[key], key
    assert driver["counts"]["bucket_comparisons"] > 0
    assert driver["counts"]["bucket_comparisons_skipped"] == 0


def test_the_candidates_are_those_of_the_pipeline_functions(pages, runs):
    """The driver's candidates: the stars, and the buckets' greedy on top (a superset)."""
    config = build_config(options=ANCHORED)
    batch = pa.RecordBatch.from_arrays(
        [pages.column("id").combine_chunks(), pages.column("text").combine_chunks()],
        names=[DOC_ID, "text"],
    )
    docs = pa.Table.from_batches([documents_columns_fn(config, with_sets=False)(batch)])
    star = driver_pairs.candidate_pairs(docs, config.bucket_all_pairs_max)
    counts: dict = {}
    texts = pa.table({DOC_ID: pages.column("id"), "text": pages.column("text")})
    both = driver_pairs.with_bucket_kept_pairs(star, docs, lambda _: texts, config, counts)
    as_set = lambda t: set(zip(t[DOC_A].to_pylist(), t[DOC_B].to_pylist(), strict=True))  # noqa: E731
    assert as_set(star) < as_set(both)
    assert both.num_rows == runs["driver"]["counts"]["candidate_pairs"]
    assert counts["bucket_comparisons"] == runs["driver"]["counts"]["bucket_comparisons"]


def test_far_fewer_kept_pages_are_near_duplicates_than_with_the_star_alone(pages, runs):
    """The star alone: verified, then the rule (kernels/anchored.py), here in the test. The
    buckets' greedy leaves one such pair on this corpus, not none: its kept members are the
    estimate's guess at the rule's (kernels/bucket_kept.py, "What this does not promise")."""
    config = build_config(options=ANCHORED)
    ids = pages.column("id").to_pylist()
    at = {doc: n for n, doc in enumerate(ids)}
    matrix = shingle_matrix(pages.column("text"), config.ngram, config.seed)
    batch = pa.RecordBatch.from_arrays(
        [pages.column("id").combine_chunks(), pages.column("text").combine_chunks()],
        names=[DOC_ID, "text"],
    )
    docs = pa.Table.from_batches([documents_columns_fn(config, with_sets=False)(batch)])
    star = driver_pairs.candidate_pairs(docs, config.bucket_all_pairs_max)
    a = np.array([at[d] for d in star[DOC_A].to_pylist()])
    b = np.array([at[d] for d in star[DOC_B].to_pylist()])
    verified = matrix.jaccard(a, b) >= config.threshold
    order = np.argsort(ids)  # keep order: the smallest id first
    rank = np.empty_like(order)
    rank[order] = np.arange(len(ids))
    anchor = anchors(len(ids), rank[a[verified]], rank[b[verified]])
    star_kept = {ids[order[r]] for r in np.flatnonzero(anchor == np.arange(len(ids)))}
    violations = kept_near_pairs(set(runs["driver"]["kept"]), pages, config)
    star_violations = kept_near_pairs(star_kept, pages, config)
    assert star_violations >= 10
    assert violations <= 1
    assert len(runs["driver"]["kept"]) <= len(star_kept)


def test_the_components_rule_is_untouched(frame, runs):
    components = build_config(options={"cluster_rule": "components"})
    result = outcome(dedupe(frame, components, placed(pairs="spark")))
    assert "bucket_comparisons" not in result["counts"]
    assert result["counts"]["candidate_pairs"] < runs["driver"]["counts"]["candidate_pairs"]


def test_comparisons_over_the_cap_are_counted_and_logged_alike_on_both_paths(frame, caplog):
    config = build_config(options={**ANCHORED, "bucket_kept_max": 1})
    found = {}
    for where in ("driver", "spark"):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="neardup_spark.pipeline.reporting"):
            found[where] = outcome(dedupe(frame, config, placed(pairs=where)))
        assert any("bucket_kept_max=1" in r.getMessage() for r in caplog.records)
    assert found["driver"]["counts"]["bucket_comparisons_skipped"] > 0
    assert found["driver"]["counts"] == found["spark"]["counts"]
    assert found["driver"]["pairs"].equals(found["spark"]["pairs"])


@pytest.mark.extended
def test_a_resumed_run_keeps_the_buckets_counts(spark, pages, tmp_path, monkeypatch):
    """Stopped after the candidates stage and resumed: the large buckets' counts come back with
    the stage (its marker), as the uninterrupted run has them."""
    corpus = tmp_path / "in"
    corpus.mkdir()
    pq.write_table(pages, corpus / "part-0.parquet")
    config = build_config(options=ANCHORED)
    whole = run_stages(spark, str(corpus), str(tmp_path / "whole"), config)
    out = str(tmp_path / "out")
    run_killed_after(monkeypatch, "candidates", spark, str(corpus), out, config)
    report = run_stages(spark, str(corpus), out, config)
    assert "candidates" in report["resumed_stages"]
    assert report["counts"]["bucket_comparisons"] > 0
    assert report["counts"] == whole["counts"]
