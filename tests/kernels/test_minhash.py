"""MinHash signatures against brute force; the estimate within its standard error."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup_spark.kernels.jaccard import jaccard
from neardup_spark.kernels.minhash import (
    EMPTY_SLOT,
    MultiplyShiftFamily,
    estimate,
    signatures,
    standard_error,
)


def test_signatures_match_brute_force_minimum():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2**63, size=50, dtype=np.uint64)
    offsets = np.array([0, 10, 10, 50])
    family = MultiplyShiftFamily.from_seed(16, 5)
    sig = signatures(offsets, values, family)
    for d in (0, 2):
        part = values[offsets[d] : offsets[d + 1]]
        for i in range(16):
            assert sig[d, i] == family.apply(i, part).min()
    assert np.all(sig[1] == EMPTY_SLOT)


def test_family_is_deterministic_and_seed_dependent():
    a = MultiplyShiftFamily.from_seed(8, 1)
    assert np.array_equal(a.a, MultiplyShiftFamily.from_seed(8, 1).a)
    assert not np.array_equal(a.a, MultiplyShiftFamily.from_seed(8, 2).a)
    assert np.all(a.a % 2 == 1)


@settings(deadline=None, max_examples=40)
@given(st.integers(0, 2**31), st.floats(0.2, 0.95))
def test_estimate_within_five_standard_errors(seed, target):
    # Two sets of n values sharing s: J = s / (2n - s), so s = 2nJ / (1 + J).
    n = 200
    shared = round(2 * n * target / (1 + target))
    rng = np.random.default_rng(seed)
    universe = rng.choice(2**62, size=3 * n, replace=False).astype(np.uint64)
    a = np.sort(np.concatenate([universe[:shared], universe[n : 2 * n - shared]]))
    b = np.sort(np.concatenate([universe[:shared], universe[2 * n : 3 * n - shared]]))
    j = jaccard(a, b)
    assert j == pytest.approx(shared / (2 * n - shared))
    values = np.concatenate([a, b])
    family = MultiplyShiftFamily.from_seed(200, seed)
    sig = signatures(np.array([0, a.size, values.size]), values, family)
    assert abs(estimate(sig[0], sig[1]) - j) <= 5 * standard_error(j, 200)


def test_standard_error_formula():
    assert standard_error(0.5, 100) == pytest.approx(math.sqrt(0.25 / 100))


@pytest.mark.parametrize("num_perm", [64, 7])
def test_compiled_and_numpy_signatures_agree(num_perm):
    rng = np.random.default_rng(8)
    sizes = rng.integers(0, 40, size=60)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    values = rng.integers(0, 2**64 - 1, size=offsets[-1], dtype=np.uint64)
    family = MultiplyShiftFamily.from_seed(num_perm, 3)
    from neardup_spark.kernels import minhash

    assert minhash._compiled_minimums is not None  # numba is a pinned dependency
    fast = signatures(offsets, values, family)
    slow = signatures(offsets, values, family, compiled=False)
    assert np.array_equal(fast, slow)
    assert np.all(fast[sizes == 0] == EMPTY_SLOT)
