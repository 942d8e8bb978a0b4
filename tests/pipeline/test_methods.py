"""The SimHash method against brute force: every pair of documents within ``hamming_k`` bits
ends in one cluster (the block tables' pigeonhole guarantee), and every reported pair is within
``hamming_k`` bits."""

from __future__ import annotations

import itertools

import pytest

from neardup_spark.config import build_config
from neardup_spark.kernels.simhash import hamming, simhash_text
from neardup_spark.pipeline.dedupe import dedupe
from neardup_spark.quality.generate import generate_corpus


@pytest.fixture(scope="module")
def corpus():
    table, _ = generate_corpus(500, seed=5, mean_words=80)
    return table.to_pylist()


def test_simhash_recall_and_precision_against_brute_force_hamming(spark, corpus):
    config = build_config(options={"method": "simhash"}, overrides=["exact_first=false"])
    df = spark.createDataFrame([(r["id"], r["text"]) for r in corpus], "id string, text string")
    result = dedupe(df, config)
    clusters = {r["doc_id"]: r["cluster_id"] for r in result.clusters.collect()}
    pairs = result.pairs.collect()
    result.release()
    # One text at a time through the reference function (not the job's compiled batch path),
    # with the job's settings: mmh3 word features, binary weights, its seed.
    fps = {
        r["id"]: simhash_text(r["text"], "mmh3", "binary", seed=config.seed)
        for r in corpus
        if r["text"] and r["text"].strip()
    }
    near = [
        (a, b)
        for a, b in itertools.combinations(sorted(fps), 2)
        if int(hamming(fps[a], fps[b])) <= config.hamming_k
    ]
    assert len(near) >= 50  # the corpus plants enough reorderings and small edits
    missed = [(a, b) for a, b in near if clusters[a] != clusters[b]]
    assert missed == []
    for p in pairs:
        assert p["hamming"] == int(hamming(fps[p["doc_a"]], fps[p["doc_b"]]))
        assert p["hamming"] <= config.hamming_k
