"""Exact resemblance and containment of sorted, de-duplicated shingle-hash sets."""

from __future__ import annotations

import numpy as np


def intersection_size(a: np.ndarray, b: np.ndarray) -> int:
    """``|a ∩ b|`` for sorted unique arrays, by binary search of the smaller in the larger.

    >>> intersection_size(np.array([1, 3, 5]), np.array([3, 4, 5, 6]))
    2
    """
    if a.size > b.size:
        a, b = b, a
    if a.size == 0:
        return 0
    pos = np.searchsorted(b, a)
    pos[pos == b.size] = 0
    return int(np.count_nonzero(b[pos] == a))


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """``|a ∩ b| / |a ∪ b|``; 0.0 when both are empty (an empty document resembles nothing).

    >>> jaccard(np.array([1, 2, 3]), np.array([2, 3, 4]))
    0.5
    """
    inter = intersection_size(a, b)
    union = a.size + b.size - inter
    return inter / union if union else 0.0


def containment(a: np.ndarray, b: np.ndarray) -> float:
    """``|a ∩ b| / |a|``: how much of ``a`` lies in ``b`` (Broder 1997); 0.0 for empty ``a``.

    >>> containment(np.array([1, 2]), np.array([1, 2, 3, 4]))
    1.0
    """
    return intersection_size(a, b) / a.size if a.size else 0.0


# Fibonacci hashing: a value's slot is the top bits of its product with 2^64 / phi, spread
# well even for small or patterned values (tests use 1, 2, 3; shingle hashes are mixed anyway).
_GOLDEN = 0x9E3779B97F4A7C15
_IN_A, _IN_B = 1, 2


def _table_bits(entries: int) -> int:
    """log2 of the smallest power of two >= 2 * ``entries`` (at least 16 slots)."""
    bits = 4
    while (1 << bits) < 2 * entries:
        bits += 1
    return bits


def _pair_scores(
    off_a: np.ndarray, val_a: np.ndarray, off_b: np.ndarray, val_b: np.ndarray
) -> np.ndarray:
    """Each pair's Jaccard and containment of the smaller set in the larger (columns 0 and 1).
    Its values go into one open-addressing hash table (linear probing), ``a``'s then ``b``'s,
    counting distinct values of each and those in both: ~5 us a pair of ~500 shingles, where
    sorting both and merging took ~33 us. A slot belongs to pair ``i`` while its stamp is
    ``i + 1``, so the table is never cleared."""
    n = off_a.shape[0] - 1
    out = np.zeros((n, 2), dtype=np.float64)
    longest = 0
    for i in range(n):
        longest = max(longest, off_a[i + 1] - off_a[i] + off_b[i + 1] - off_b[i])
    size = 1 << _table_bits(longest)
    keys = np.zeros(size, dtype=np.uint64)
    where = np.zeros(size, dtype=np.uint8)
    stamps = np.zeros(size, dtype=np.int64)
    golden = np.uint64(_GOLDEN)
    for i in range(n):
        bits = _table_bits(off_a[i + 1] - off_a[i] + off_b[i + 1] - off_b[i])
        shift = np.uint64(64 - bits)
        mask = np.int64((1 << bits) - 1)
        stamp = i + 1
        distinct_a = distinct_b = inter = 0
        for side in range(2):
            values = val_a[off_a[i] : off_a[i + 1]] if side == 0 else val_b[off_b[i] : off_b[i + 1]]
            for value in values:
                slot = np.int64((np.uint64(value) * golden) >> shift)
                while stamps[slot] == stamp and keys[slot] != value:
                    slot = (slot + np.int64(1)) & mask
                if stamps[slot] != stamp:  # new to the pair
                    stamps[slot] = stamp
                    keys[slot] = value
                    where[slot] = _IN_A if side == 0 else _IN_B
                    if side == 0:
                        distinct_a += 1
                    else:
                        distinct_b += 1
                elif side == 1 and where[slot] == _IN_A:  # in a, first seen in b
                    where[slot] = _IN_A | _IN_B
                    distinct_b += 1
                    inter += 1
        union = distinct_a + distinct_b - inter
        smaller = min(distinct_a, distinct_b)
        out[i, 0] = inter / union if union else 0.0
        out[i, 1] = inter / smaller if smaller else 0.0
    return out


def _distinct_counts(offsets: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Distinct values of each CSR row, by the same stamped hash table as :func:`_pair_scores`."""
    n = offsets.shape[0] - 1
    out = np.zeros(n, dtype=np.int32)
    longest = 0
    for i in range(n):
        longest = max(longest, offsets[i + 1] - offsets[i])
    size = 1 << _table_bits(longest)
    keys = np.zeros(size, dtype=np.uint64)
    stamps = np.zeros(size, dtype=np.int64)
    golden = np.uint64(_GOLDEN)
    for i in range(n):
        bits = _table_bits(offsets[i + 1] - offsets[i])
        shift = np.uint64(64 - bits)
        mask = np.int64((1 << bits) - 1)
        stamp = i + 1
        distinct = 0
        for value in values[offsets[i] : offsets[i + 1]]:
            slot = np.int64((np.uint64(value) * golden) >> shift)
            while stamps[slot] == stamp and keys[slot] != value:
                slot = (slot + np.int64(1)) & mask
            if stamps[slot] != stamp:
                stamps[slot] = stamp
                keys[slot] = value
                distinct += 1
        out[i] = distinct
    return out


try:  # numba compiles the verification loop; the NumPy fallback gives the same values
    from numba import njit

    _table_bits = njit(inline="always", cache=True)(_table_bits)
    _compiled_pair_scores = njit(cache=True, nogil=True)(_pair_scores)
    _compiled_distinct_counts = njit(cache=True, nogil=True)(_distinct_counts)
except ImportError:  # pragma: no cover - numba is a pinned dependency
    _compiled_pair_scores = _pair_scores
    _compiled_distinct_counts = _distinct_counts


def pair_scores(
    off_a: np.ndarray, val_a: np.ndarray, off_b: np.ndarray, val_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Jaccard of the value *sets* of row ``i`` of two CSR arrays (repeats and order ignored),
    and the containment of the smaller set in the larger (``|A n B| / min(|A|, |B|)``), for
    every ``i``; 0.0 where the sets (the smaller set) are empty.

    >>> off = np.array([0, 3]); j, c = pair_scores(off, np.array([3, 1, 3], np.uint64),
    ...     np.array([0, 2]), np.array([1, 2], np.uint64)); (j.tolist(), c.tolist())
    ([0.3333333333333333], [0.5])
    """
    scores = _compiled_pair_scores(off_a, val_a, off_b, val_b)
    return scores[:, 0].copy(), scores[:, 1].copy()


def pair_jaccards(
    off_a: np.ndarray, val_a: np.ndarray, off_b: np.ndarray, val_b: np.ndarray
) -> np.ndarray:
    """Jaccard of the value *sets* of row ``i`` of two CSR arrays (repeats and order ignored),
    for every ``i``; 0.0 where both rows are empty.

    >>> off = np.array([0, 3]); pair_jaccards(off, np.array([3, 1, 3], np.uint64),
    ...     np.array([0, 2]), np.array([1, 2], np.uint64)).tolist()
    [0.3333333333333333]
    """
    return pair_scores(off_a, val_a, off_b, val_b)[0]


def distinct_counts(offsets: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The size of each CSR row's value *set* (int32): a document's distinct shingles.

    >>> distinct_counts(np.array([0, 3, 3, 5]), np.array([7, 1, 7, 2, 2], np.uint64)).tolist()
    [2, 0, 1]
    """
    return _compiled_distinct_counts(np.asarray(offsets, np.int64), values)
