"""Scores shared by the evaluations: ratios, F1, Jaccard bands and the adjusted Rand index.

Pure NumPy. A ratio with an empty denominator is ``None`` (nothing to measure), never 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Jaccard bands of the breakdowns: [lo, hi), the last one closed. The first gathers everything
# below the bands the generator plants.
BAND_EDGES = (0.5, 0.6, 0.7, 0.8, 0.9)
BANDS = ((0.0, 0.5), (0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0))


def ratio(num: int | float, den: int | float) -> float | None:
    """``num / den``, or ``None`` when ``den`` is 0.

    >>> ratio(1, 4), ratio(3, 0)
    (0.25, None)
    """
    return float(num) / float(den) if den else None


def f1(precision: float | None, recall: float | None) -> float | None:
    """``2 P R / (P + R)``; ``None`` when either is unknown or both are 0.

    >>> f1(0.5, 1.0), f1(None, 1.0), f1(0.0, 0.0)
    (0.6666666666666666, None, None)
    """
    if precision is None or recall is None or precision + recall == 0:
        return None
    return 2 * precision * recall / (precision + recall)


def band_label(lo: float, hi: float) -> str:
    """``0.8-0.9``: how a band is named in results and tables."""
    return f"{lo:.1f}-{hi:.1f}"


def band_of(values: np.ndarray) -> np.ndarray:
    """Index into :data:`BANDS` of each Jaccard value (``1.0`` falls in the last band).

    >>> band_of(np.array([0.1, 0.5, 0.79, 0.8, 1.0])).tolist()
    [0, 1, 3, 4, 5]
    """
    return np.searchsorted(np.asarray(BAND_EDGES), values, side="right")


def pairs_in_groups(counts: np.ndarray) -> int:
    """``sum C(c, 2)`` as an exact Python integer: the pairs inside groups of these sizes.

    >>> pairs_in_groups(np.array([1, 2, 4]))
    7
    """
    c = np.asarray(counts).astype(np.int64)
    return int((c * (c - 1) // 2).sum())


def clustering_agreement(labels_a: np.ndarray, labels_b: np.ndarray) -> dict[str, Any]:
    """Pair counts and the adjusted Rand index of two clusterings of the same items.

    ``labels_a`` and ``labels_b`` are integer labels, one per item. Returns ``ari``,
    ``pairs_same_a`` (``A``), ``pairs_same_b`` (``B``), ``pairs_same_both`` (``index``),
    ``precision`` = index / A and ``recall`` = index / B (``a`` taken as the prediction).
    The contingency table is kept sparse: only its non-zero cells are counted.
    """
    a = np.asarray(labels_a, dtype=np.int64)
    b = np.asarray(labels_b, dtype=np.int64)
    if a.shape != b.shape:
        raise ValueError("the two labellings must have the same length")
    n = int(a.size)
    _, a_dense = np.unique(a, return_inverse=True)
    _, b_dense = np.unique(b, return_inverse=True)
    n_b = int(b_dense.max()) + 1 if n else 1
    cells = np.unique(a_dense.astype(np.int64) * n_b + b_dense, return_counts=True)[1]
    index = pairs_in_groups(cells)
    same_a = pairs_in_groups(np.bincount(a_dense))
    same_b = pairs_in_groups(np.bincount(b_dense))
    total = n * (n - 1) // 2
    expected = same_a * same_b / total if total else 0.0
    maximum = (same_a + same_b) / 2
    ari = 1.0 if maximum == expected else (index - expected) / (maximum - expected)
    return {
        "ari": float(ari),
        "items": n,
        "pairs_same_a": same_a,
        "pairs_same_b": same_b,
        "pairs_same_both": index,
        "precision": ratio(index, same_a),
        "recall": ratio(index, same_b),
    }


def adjusted_rand_index(labels_a: np.ndarray, labels_b: np.ndarray) -> float:
    """Adjusted Rand index of two labellings; 1.0 for identical partitions.

    >>> round(adjusted_rand_index(np.array([0, 0, 1, 1]), np.array([0, 0, 1, 2])), 6)
    0.571429
    """
    return float(clustering_agreement(labels_a, labels_b)["ari"])
