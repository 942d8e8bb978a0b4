"""The exact all-pairs oracle against a pure-Python double loop over the scenario's corpus."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.quality import oracle
from neardup_spark.quality.oracle import (
    PREFIX_FILTER_WORK,
    choose_strategy,
    prefix_matrix,
    product_work,
    shingle_matrix,
    similar_pairs,
)
from tests.quality.evaluation_scenario import K, shingle_set


@pytest.mark.parametrize("strategy", ["product", "prefix", "auto"])
@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("block_work", [1, 50, 10**9])
def test_similar_pairs_is_the_brute_force_set(scenario, strategy, threshold, block_work):
    texts = scenario.corpus.texts
    matrix = shingle_matrix(pa.array(texts, pa.string()), K, seed=42)
    i, j, sim = similar_pairs(matrix, threshold, block_work=block_work, strategy=strategy)
    got = {(int(a), int(b)): float(s) for a, b, s in zip(i, j, sim, strict=True)}
    want = {p: s for p, s in scenario.exact.items() if s >= threshold}
    assert got == want  # same pairs, same float values
    assert all(a < b for a, b in got)


def test_shingle_matrix_sizes_and_intersections(scenario):
    texts = scenario.corpus.texts
    matrix = shingle_matrix(pa.array(texts, pa.string()), K, seed=7, batch_docs=7)
    sets = [shingle_set(t) for t in texts]
    assert matrix.sizes.tolist() == [len(s) for s in sets]
    pairs = list(itertools.combinations(range(len(texts)), 2))
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    assert matrix.intersections(a, b).tolist() == [len(sets[x] & sets[y]) for x, y in pairs]
    assert matrix.jaccard(a, b).tolist() == [scenario.exact[p] for p in pairs]


def test_prefix_matrix_keeps_a_prefix_of_each_document(scenario):
    texts = scenario.corpus.texts
    matrix = shingle_matrix(pa.array(texts, pa.string()), K, seed=42)
    prefix = prefix_matrix(matrix, 0.8)
    assert prefix.has_canonical_format
    assert (prefix.multiply(matrix.shared) != prefix).nnz == 0  # a subset of the entries
    assert prefix.nnz < matrix.shared.nnz


def test_product_work_counts_the_triples_of_the_full_product(scenario):
    texts = scenario.corpus.texts
    matrix = shingle_matrix(pa.array(texts, pa.string()), K, seed=42)
    dense = matrix.shared.toarray()
    assert product_work(matrix) == int((dense.sum(axis=0) ** 2).sum()) > 0
    assert choose_strategy(product_work(matrix)) == "product"
    assert choose_strategy(PREFIX_FILTER_WORK) == "product"
    assert choose_strategy(PREFIX_FILTER_WORK + 1) == "prefix"


def test_similar_pairs_refuses_an_unknown_strategy(scenario):
    matrix = shingle_matrix(pa.array(scenario.corpus.texts[:3], pa.string()), K, seed=42)
    with pytest.raises(ValueError, match="strategy"):
        similar_pairs(matrix, 0.8, strategy="fast")


def test_the_docstring_examples_hold():
    results = doctest.testmod(oracle)
    assert results.attempted > 0 and results.failed == 0
