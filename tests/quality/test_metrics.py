"""Ratios, F1, Jaccard bands and the adjusted Rand index, against hand counts and brute force."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest

from neardup_spark.quality import metrics
from neardup_spark.quality.metrics import (
    BANDS,
    adjusted_rand_index,
    band_label,
    band_of,
    clustering_agreement,
    f1,
    pairs_in_groups,
    ratio,
)
from tests.quality.evaluation_scenario import brute_ari


def test_ari_perfect_and_relabelled():
    labels = np.array([0, 0, 1, 1, 1, 2, 3, 3])
    assert adjusted_rand_index(labels, labels) == 1.0
    assert adjusted_rand_index(labels, 10 * labels[::-1][::-1] + 5) == 1.0


def test_ari_hand_computed():
    # n = 4; contingency [[2, 0, 0], [0, 1, 1]]: index 1, A = 2, B = 1, E = 2/6, max = 1.5
    # -> (1 - 1/3) / (1.5 - 1/3) = 4/7.
    assert adjusted_rand_index(np.array([0, 0, 1, 1]), np.array([0, 0, 1, 2])) == pytest.approx(
        4 / 7
    )
    # Opposite pairings: index 0, A = B = 2, E = 4/6 -> (0 - 2/3) / (2 - 2/3) = -1/2.
    assert adjusted_rand_index(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])) == pytest.approx(
        -0.5
    )
    # All singletons against one pair: index 0, A = 0, B = 1, E = 0 -> 0.
    assert adjusted_rand_index(np.array([0, 1, 2]), np.array([0, 0, 1])) == 0.0


def test_ari_degenerate_partitions_agree():
    assert adjusted_rand_index(np.arange(5), np.arange(5)[::-1]) == 1.0  # all singletons
    assert adjusted_rand_index(np.zeros(5, int), np.ones(5, int)) == 1.0  # one cluster
    assert adjusted_rand_index(np.zeros(1, int), np.zeros(1, int)) == 1.0
    assert adjusted_rand_index(np.zeros(0, int), np.zeros(0, int)) == 1.0


def test_ari_random_labellings_match_pair_counting():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 40))
        a = rng.integers(0, rng.integers(1, 8), n)
        b = rng.integers(0, rng.integers(1, 8), n)
        assert adjusted_rand_index(a, b) == pytest.approx(brute_ari(a.tolist(), b.tolist()))
        agreement = clustering_agreement(a, b)
        same_both = sum(
            a[i] == a[j] and b[i] == b[j] for i, j in itertools.combinations(range(n), 2)
        )
        assert agreement["pairs_same_both"] == same_both


def test_band_of_edges():
    assert band_of(np.array([0.0, 0.49, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0])).tolist() == [
        0,
        0,
        1,
        2,
        3,
        4,
        5,
        5,
        5,
    ]


def test_bands_cover_zero_to_one_and_are_named_by_their_edges():
    assert BANDS[0][0] == 0.0 and BANDS[-1][1] == 1.0
    assert all(hi == lo for (_, hi), (lo, _) in itertools.pairwise(BANDS))
    assert [band_label(lo, hi) for lo, hi in BANDS][-2:] == ["0.8-0.9", "0.9-1.0"]


def test_ratio_f1_and_pairs_in_groups():
    assert ratio(3, 4) == 0.75 and ratio(0, 0) is None
    assert f1(1.0, 0.5) == pytest.approx(2 / 3)
    assert f1(None, 0.5) is None and f1(0.0, 0.0) is None
    assert pairs_in_groups(np.array([0, 1, 2, 3, 100_000])) == 0 + 0 + 1 + 3 + 4_999_950_000


def test_the_docstring_examples_hold():
    results = doctest.testmod(metrics)
    assert results.attempted > 0 and results.failed == 0
