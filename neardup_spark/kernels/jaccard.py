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
