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


def _unique_count_sorted(x: np.ndarray) -> int:
    count = 0
    for i in range(x.shape[0]):
        if i == 0 or x[i] != x[i - 1]:
            count += 1
    return count


def _pair_jaccards(
    off_a: np.ndarray, val_a: np.ndarray, off_b: np.ndarray, val_b: np.ndarray
) -> np.ndarray:
    n = off_a.shape[0] - 1
    out = np.zeros(n, dtype=np.float64)
    for i in range(n):
        a = np.sort(val_a[off_a[i] : off_a[i + 1]])
        b = np.sort(val_b[off_b[i] : off_b[i + 1]])
        size_a = _unique_count_sorted(a)
        size_b = _unique_count_sorted(b)
        # Merge the two sorted runs, counting each common value once.
        inter = 0
        p = 0
        q = 0
        while p < a.shape[0] and q < b.shape[0]:
            if a[p] < b[q]:
                p += 1
            elif a[p] > b[q]:
                q += 1
            else:
                inter += 1
                value = a[p]
                while p < a.shape[0] and a[p] == value:
                    p += 1
                while q < b.shape[0] and b[q] == value:
                    q += 1
        union = size_a + size_b - inter
        out[i] = inter / union if union else 0.0
    return out


try:  # numba compiles the verification loop; the NumPy fallback gives the same values
    from numba import njit

    _unique_count_sorted = njit(inline="always", cache=True)(_unique_count_sorted)
    _compiled_pair_jaccards = njit(cache=True, nogil=True)(_pair_jaccards)
except ImportError:  # pragma: no cover - numba is a pinned dependency
    _compiled_pair_jaccards = None


def pair_jaccards(
    off_a: np.ndarray, val_a: np.ndarray, off_b: np.ndarray, val_b: np.ndarray
) -> np.ndarray:
    """Jaccard of the value *sets* of row ``i`` of two CSR arrays (repeats and order ignored),
    for every ``i``; 0.0 where both rows are empty.

    >>> off = np.array([0, 3]); pair_jaccards(off, np.array([3, 1, 3], np.uint64),
    ...     np.array([0, 2]), np.array([1, 2], np.uint64)).tolist()
    [0.3333333333333333]
    """
    if _compiled_pair_jaccards is not None:
        return _compiled_pair_jaccards(off_a, val_a, off_b, val_b)
    n = len(off_a) - 1
    return np.array(
        [
            jaccard(
                np.unique(val_a[off_a[i] : off_a[i + 1]]), np.unique(val_b[off_b[i] : off_b[i + 1]])
            )
            for i in range(n)
        ],
        dtype=np.float64,
    )
