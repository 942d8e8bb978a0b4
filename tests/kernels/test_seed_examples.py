"""The seed article's worked examples, to the precision it prints
(../shared/seeds/near-duplicate-detection-article.txt)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.kernels.jaccard import jaccard
from neardup_spark.kernels.lsh import approximate_threshold, candidate_probability
from neardup_spark.kernels.minhash import (
    ModPrimeFamily,
    MultiplyShiftFamily,
    estimate,
    signatures,
    standard_error,
)
from neardup_spark.kernels.normalize import normalize_text
from neardup_spark.kernels.shingles import shingle_sets, shingle_strings

D1 = "the crawler fetches each page and follows its links to new pages"
D2 = "the crawler fetches every page and follows its links to other pages"
D3 = "a rose is a rose is a rose"
D4 = "a rose is a flower which is a rose"

# The article's table: 15 shingles in alphabetical order, and which sentence holds each.
SHINGLE_TABLE = [
    ("and follows its", True, True),
    ("crawler fetches each", True, False),
    ("crawler fetches every", False, True),
    ("each page and", True, False),
    ("every page and", False, True),
    ("fetches each page", True, False),
    ("fetches every page", False, True),
    ("follows its links", True, True),
    ("its links to", True, True),
    ("links to new", True, False),
    ("links to other", False, True),
    ("page and follows", True, True),
    ("the crawler fetches", True, True),
    ("to new pages", True, False),
    ("to other pages", False, True),
]

# (a, b, min over d1, its shingle, min over d2, its shingle, agree) for h(x) = (a x + b) mod 17.
BY_HAND = [
    (1, 0, 0, 0, 0, 0, True),
    (3, 5, 3, 5, 0, 4, False),
    (5, 2, 0, 3, 1, 10, False),
    (7, 11, 0, 13, 2, 6, False),
    (11, 3, 0, 9, 1, 6, False),
    (13, 8, 4, 1, 0, 2, False),
]


def hash_set(text: str, k: int) -> np.ndarray:
    sets = shingle_sets(pa.array([normalize_text(text)], pa.large_string()), k, seed=42)
    return sets.doc(0)


def test_fifteen_shingles_in_alphabetical_order():
    s1, s2 = set(shingle_strings(D1, 3)), set(shingle_strings(D2, 3))
    assert len(s1) == len(s2) == 10
    union = sorted(s1 | s2)
    assert union == [row[0] for row in SHINGLE_TABLE]
    assert [(s in s1, s in s2) for s in union] == [(r[1], r[2]) for r in SHINGLE_TABLE]


def test_jaccard_of_the_running_example_is_one_third():
    a, b = hash_set(D1, 3), hash_set(D2, 3)
    assert a.size == b.size == 10
    assert jaccard(a, b) == pytest.approx(5 / 15, abs=1e-15)


def test_rose_has_three_4_shingles():
    assert shingle_strings(D3, 4) == ["a rose is a", "rose is a rose", "is a rose is"]
    assert hash_set(D3, 4).size == 3


def test_choice_of_k_d3_d4():
    assert jaccard(hash_set(D3, 3), hash_set(D4, 3)) == pytest.approx(3 / 7)
    assert round(jaccard(hash_set(D3, 3), hash_set(D4, 3)), 2) == 0.43
    assert jaccard(hash_set(D3, 2), hash_set(D4, 2)) == pytest.approx(3 / 6)


def test_by_hand_minhash_table_row_by_row():
    number = {row[0]: i for i, row in enumerate(SHINGLE_TABLE)}
    d1 = np.array(sorted(number[s] for s in shingle_strings(D1, 3)), dtype=np.uint64)
    d2 = np.array(sorted(number[s] for s in shingle_strings(D2, 3)), dtype=np.uint64)
    family = ModPrimeFamily(
        a=tuple(r[0] for r in BY_HAND), b=tuple(r[1] for r in BY_HAND), prime=17
    )
    values = np.concatenate([d1, d2])
    sig = signatures(np.array([0, d1.size, d1.size + d2.size]), values, family)
    for i, (a, b, min1, arg1, min2, arg2, agree) in enumerate(BY_HAND):
        assert sig[0, i] == min1 and sig[1, i] == min2, f"row a={a} b={b}"
        assert (a * arg1 + b) % 17 == min1 and arg1 in d1.tolist()
        assert (a * arg2 + b) % 17 == min2 and arg2 in d2.tolist()
        assert (sig[0, i] == sig[1, i]) == agree
    assert round(estimate(sig[0], sig[1]), 2) == 0.17


def test_standard_errors():
    assert [round(standard_error(1 / 3, m), 3) for m in (10, 100, 200)] == [0.149, 0.047, 0.033]


def test_banding_probabilities_and_thresholds():
    assert round(float(candidate_probability(0.9, 20, 10)), 4) == 0.9998
    assert round(float(candidate_probability(0.5, 20, 10)), 3) == 0.019
    assert round(float(candidate_probability(1 / 3, 20, 10)), 4) == 0.0003
    assert round(approximate_threshold(40, 5), 2) == 0.48
    assert round(approximate_threshold(20, 10), 2) == 0.74
    assert round(approximate_threshold(10, 20), 2) == 0.89


def _estimates(seeds: range, num_perm: int) -> np.ndarray:
    a, b = hash_set(D1, 3), hash_set(D2, 3)
    offsets = np.array([0, a.size, a.size + b.size])
    values = np.concatenate([a, b])
    out = []
    for seed in seeds:
        sig = signatures(offsets, values, MultiplyShiftFamily.from_seed(num_perm, seed))
        out.append(estimate(sig[0], sig[1]))
    return np.array(out)


def test_thirty_runs_at_200_have_median_near_one_third():
    runs = _estimates(range(30), 200)
    assert abs(float(np.median(runs)) - 1 / 3) <= 0.02


def test_hash_family_is_min_wise_over_2000_seeds():
    m, j = 200, 1 / 3
    runs = _estimates(range(1000, 3000), m)
    se = standard_error(j, m)
    assert abs(runs.mean() - j) <= 4 * se / np.sqrt(runs.size)
    assert abs(runs.std(ddof=1) - se) <= 0.10 * se
