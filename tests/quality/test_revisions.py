"""Revision chains and the removal scores: a chain's neighbours are near-duplicates and its far
ends are not; the scores tell the components rule's unjustified removals from the anchored
rule's."""

from __future__ import annotations

import numpy as np

from neardup_spark.config import build_config
from neardup_spark.kernels.anchored import anchors
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.quality.oracle import shingle_matrix
from neardup_spark.quality.revisions import revision_chains, score_removals


def test_chains_drift_and_the_scores_tell_the_rules_apart():
    generated, _ = generate_corpus(30, seed=2, mean_words=400)
    texts = generated.column("text").to_pylist()
    corpus = revision_chains(texts[:10], texts[10:], versions=(8, 8), seed=1)
    config = build_config()
    ids = corpus.column("id").to_pylist()
    chain = np.array(corpus.column("chain").to_pylist())
    matrix = shingle_matrix(corpus.column("text"), config.ngram, config.seed, config.normalize)
    first = np.flatnonzero(chain == 0)
    steps = matrix.jaccard(first[:-1], first[1:])
    assert 0.82 <= steps.mean() <= 0.95  # each version near the next
    assert matrix.jaccard(first[:1], first[-1:])[0] < 0.7  # the ends far apart
    # The components rule: each chain one cluster around its first version.
    by_chain = {}
    for doc, c in zip(ids, chain, strict=True):
        by_chain.setdefault(c, doc)
    components = {doc: (by_chain[c] if c >= 0 else doc) for doc, c in zip(ids, chain, strict=True)}
    loose = score_removals(ids, corpus.column("text"), components, config)
    assert loose["removed"] == 70 and loose["justified"] < 0.5
    # The greedy over the exact pairs: every removal justified, nothing kept twice.
    n = len(ids)
    i, j = np.triu_indices(n, 1)
    near = matrix.jaccard(i, j) >= config.threshold
    anchor = anchors(n, i[near], j[near])
    greedy = score_removals(
        ids, corpus.column("text"), dict(zip(ids, np.array(ids)[anchor], strict=True)), config
    )
    assert greedy["justified"] == 1.0 and greedy["kept_near_pairs"] == 0
    assert greedy["kept_vs_greedy"] == 1.0 and greedy["kept"] > loose["kept"]
