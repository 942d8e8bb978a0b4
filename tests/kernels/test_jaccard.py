"""Exact Jaccard and containment of sorted hash sets against Python sets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup_spark.kernels.jaccard import containment, intersection_size, jaccard, pair_jaccards


def brute_jaccard(a, b):
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 0.0


@given(
    st.sets(st.integers(0, 60), max_size=40),
    st.sets(st.integers(0, 60), max_size=40),
)
def test_jaccard_and_containment_match_sets(a, b):
    x = np.array(sorted(a), dtype=np.uint64)
    y = np.array(sorted(b), dtype=np.uint64)
    assert intersection_size(x, y) == len(a & b)
    assert jaccard(x, y) == pytest.approx(brute_jaccard(a, b))
    assert containment(x, y) == pytest.approx(len(a & b) / len(a) if a else 0.0)


def _csr(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([r.size for r in rows], out=offsets[1:])
    values = np.concatenate(rows) if rows else np.zeros(0, np.uint64)
    return offsets, values.astype(np.uint64)


def test_pair_jaccards_equal_set_jaccard_with_repeats_and_empty_rows() -> None:
    rng = np.random.default_rng(3)
    rows_a = [rng.integers(0, 50, rng.integers(0, 80)).astype(np.uint64) for _ in range(300)]
    rows_b = [rng.integers(0, 50, rng.integers(0, 80)).astype(np.uint64) for _ in range(300)]
    rows_a[0] = rows_b[0] = np.zeros(0, np.uint64)  # both empty: 0.0
    rows_a[1] = np.array([2**64 - 1, 5, 5], np.uint64)  # large values, repeats
    rows_b[1] = np.array([5, 2**64 - 1], np.uint64)
    got = pair_jaccards(*_csr(rows_a), *_csr(rows_b))
    expected = [jaccard(np.unique(a), np.unique(b)) for a, b in zip(rows_a, rows_b, strict=True)]
    np.testing.assert_allclose(got, expected, rtol=0, atol=0)
    assert got[0] == 0.0 and got[1] == 1.0


def test_pair_jaccards_of_long_and_patterned_rows() -> None:
    """Rows of thousands of values, and values alike in their low or high bits (multiples of
    2**40, consecutive integers), which a hash table must still tell apart."""
    rng = np.random.default_rng(5)
    patterns = [
        lambda k: rng.integers(0, 4000, k).astype(np.uint64) << np.uint64(40),
        lambda k: rng.integers(0, 4000, k).astype(np.uint64),
        lambda k: rng.integers(0, 2**63, k, dtype=np.uint64) | np.uint64(1 << 63),
    ]
    rows_a, rows_b = [], []
    for make in patterns:
        for size in (1, 17, 700, 5000):
            a = make(size)
            rows_a.append(a)
            rows_b.append(np.concatenate([a[: size // 2], make(size)]))
    got = pair_jaccards(*_csr(rows_a), *_csr(rows_b))
    expected = [jaccard(np.unique(a), np.unique(b)) for a, b in zip(rows_a, rows_b, strict=True)]
    np.testing.assert_allclose(got, expected, rtol=0, atol=0)
    assert sum(0 < g < 1 for g in got) >= 8  # partial overlaps, not only 0 and 1
