"""The data behind each figure of report.html, checked against the run's own outputs."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.io.finished import config_of_run
from neardup_spark.kernels.lsh import candidate_probability
from neardup_spark.quality.explain import explain
from neardup_spark.report import data as report_module
from neardup_spark.report.data import (
    cluster_size_distribution,
    report_data,
    similarity_floor,
    threshold_similarity,
)


def test_threshold_and_histogram_floor_by_method():
    minhash = {"method": "minhash", "config": {"threshold": 0.8}}
    simhash = {"method": "simhash", "config": {"hamming_k": 3}}
    exact = {"method": "exact", "config": {}}
    assert threshold_similarity(minhash) == 0.8
    assert threshold_similarity(simhash) == pytest.approx(math.cos(math.pi * 3 / 64))
    assert threshold_similarity(exact) is None
    # The threshold less a margin, down to a multiple of 0.05; lower if a pair lies lower.
    assert similarity_floor(minhash, 0.9) == 0.75
    assert similarity_floor(minhash, 0.6) == 0.55
    assert similarity_floor(simhash, None) == 0.95
    assert similarity_floor(exact, None) == 0.95 and similarity_floor(exact, 1.0) == 0.95


def test_cluster_size_distribution_by_hand():
    # Six documents: a holds b and c, d holds e, f alone.
    removed = pa.table({"doc_id": ["b", "c", "e"], "cluster_id": ["a", "a", "d"]})
    dist, big = cluster_size_distribution(6, removed)
    assert dist["sizes"] == [1, 2, 3] and dist["clusters"] == [1, 1, 1]
    assert dist["documents"] == [1, 2, 3] and dist["total_documents"] == 6
    assert dist["total_clusters"] == 3 and dist["largest"] == 3
    assert big.to_pylist() == [{"cluster_id": "a", "size": 3}, {"cluster_id": "d", "size": 2}]
    empty = pa.table({"doc_id": pa.array([], pa.string()), "cluster_id": pa.array([], pa.string())})
    dist, big = cluster_size_distribution(2, empty)
    assert dist["sizes"] == [1] and dist["clusters"] == [2] and big.num_rows == 0


def test_run_counts_and_stages_are_the_reports(data, minhash_run):
    out, report = minhash_run
    assert data["counts"] == report["counts"]
    assert data["run"]["method"] == "minhash" and data["run"]["config"] == report["config"]
    assert data["run"]["output"] == report.get("output", str(out))
    assert [s["stage"] for s in data["stages"]] == list(report["stage_seconds"])
    wall = report["wall_seconds"]
    for stage in data["stages"]:
        assert stage["share"] == pytest.approx(report["stage_seconds"][stage["stage"]] / wall)


def test_histogram_counts_every_pair_once_by_method(data, tables, minhash_run):
    _, report = minhash_run
    pairs, _ = tables
    hist = data["similarity_histogram"]
    assert len(hist["edges"]) == sum(1 for _ in hist["counts"]["minhash"]) + 1
    assert hist["total"] == len(pairs) == report["counts"]["verified_pairs"]
    assert sum(sum(c) for c in hist["counts"].values()) == len(pairs)
    by_method = Counter(p["method"] for p in pairs)
    assert {k: sum(v) for k, v in hist["counts"].items()} == dict(by_method)
    # (pairs/ holds the anchored rule's justifying rows beside the pairs found)
    assert (
        sum(hist["counts"]["exact"]) == by_method["exact"] >= report["counts"]["exact_copies"] > 0
    )
    assert hist["counts"]["exact"][-1] == by_method["exact"]  # all at 1.0
    assert hist["threshold"] == 0.8 and hist["edges"][0] < 0.8 and hist["edges"][-1] == 1.0
    # Recount with the histogram's own edges.
    edges = np.asarray(hist["edges"])
    sims = np.array([p["similarity"] for p in pairs if p["method"] == "minhash"])
    assert hist["counts"]["minhash"] == np.histogram(sims, bins=edges)[0].tolist()


def test_cluster_size_distribution_matches_clusters_table(data, tables, minhash_run):
    _, report = minhash_run
    _, clusters = tables
    sizes = Counter(Counter(c["cluster_id"] for c in clusters).values())
    dist = data["cluster_sizes"]
    assert dict(zip(dist["sizes"], dist["clusters"], strict=True)) == dict(sizes)
    assert sum(dist["clusters"]) == dist["total_clusters"] == report["counts"]["clusters"]
    assert sum(dist["documents"]) == report["counts"]["input_rows"] == 800
    assert dist["largest"] == max(sizes)


def test_curve_is_the_candidate_probability_at_the_runs_banding(data, minhash_run):
    _, report = minhash_run
    banding = data["banding"]
    assert (banding["bands"], banding["rows"]) == (
        report["banding"]["bands"],
        report["banding"]["rows"],
    )
    js = np.asarray(banding["jaccard"])
    assert js[0] == 0.0 and js[-1] == 1.0
    expected = candidate_probability(js, banding["bands"], banding["rows"])
    np.testing.assert_allclose(banding["probability"], expected, rtol=0, atol=1e-15)
    assert banding["probability_at_threshold"] == pytest.approx(
        report["banding"]["probability_at_threshold"], abs=1e-6
    )
    assert data["simhash"] is None


def test_scatter_points_are_the_verified_minhash_pairs(data, tables):
    pairs, _ = tables
    est = data["estimates"]
    minhash = [p for p in pairs if p["method"] == "minhash"]
    assert est["pairs"] == len(minhash) == len(est["jaccard"]) == len(est["estimate"])
    assert not est["sampled"]
    expected = sorted((p["jaccard"], p["estimate"]) for p in minhash)
    assert sorted(zip(est["jaccard"], est["estimate"], strict=True)) == expected
    assert all(j >= 0.8 for j in est["jaccard"])
    assert est["within_2se"] > 0.8


def test_scatter_is_a_sample_above_its_limit(minhash_run, data, tables, monkeypatch):
    out, report = minhash_run
    near = sum(1 for p in tables[0] if p["method"] == "minhash")
    assert near >= report["counts"]["near_pairs"]
    assert near > 40
    monkeypatch.setattr(report_module, "MAX_SCATTER_POINTS", near // 4)
    est = report_data(str(out))["estimates"]
    full = set(zip(data["estimates"]["jaccard"], data["estimates"]["estimate"], strict=True))
    points = list(zip(est["jaccard"], est["estimate"], strict=True))
    assert est["sampled"] and est["pairs"] == near  # every pair counted, a quarter drawn
    assert 0 < len(points) < near // 2 and set(points) <= full


def test_simhash_run_shows_tables_instead_of_a_curve(simhash_run):
    out, report = simhash_run
    data = report_data(str(out))
    assert data["banding"] is None and data["estimates"] is None
    assert data["simhash"]["tables"] == report["simhash"]["tables"] == 20
    simhash_rows = pq.read_table(out / "pairs", columns=["method"]).column(0).to_pylist()
    assert sum(data["hamming_counts"].values()) == simhash_rows.count("simhash")
    assert max(data["hamming_counts"]) <= 3
    hist = data["similarity_histogram"]
    assert sum(sum(c) for c in hist["counts"].values()) == report["counts"]["verified_pairs"]
    assert hist["threshold"] == pytest.approx(np.cos(np.pi * 3 / 64))
    for cluster in data["top_clusters"]:
        for m in cluster["members"]:
            assert m["hamming_to_representative"] is not None
            assert m["below_threshold"] == (m["hamming_to_representative"] > 3)
        assert cluster["chained_members"] == sum(m["below_threshold"] for m in cluster["members"])


def test_missing_corpus_leaves_the_texts_out(minhash_run, tmp_path):
    out, _ = minhash_run
    gone = str(tmp_path / "no-such-corpus")
    data = report_data(str(out), input_path=gone)
    assert data["corpus"]["available"] is False and data["corpus"]["problem"]
    assert all(m["snippet"] is None for c in data["top_clusters"] for m in c["members"])


# explain (quality) read against the same run: it lives here because it reuses this run.
def test_explain_agrees_with_the_job_on_its_pairs(minhash_run, corpus, tables):
    out, _ = minhash_run
    root, _ = corpus
    pairs, _ = tables
    config = config_of_run(str(out))
    for p in [p for p in pairs if p["method"] == "minhash"][:5]:
        result = explain(str(root), p["doc_a"], p["doc_b"], config)
        assert result["jaccard"] == pytest.approx(p["jaccard"], abs=1e-12)
        assert result["minhash"]["estimate"] == pytest.approx(p["estimate"], abs=1e-12)
        assert result["minhash"]["matched_bands"]
        assert result["verdict"] == "candidate and verified"
