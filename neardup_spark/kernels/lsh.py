"""LSH banding of MinHash sketches: parameters, their probabilities, and band keys.

A sketch of ``b * r`` values is cut into ``b`` bands of ``r``; two documents are candidates if
they agree on every value of at least one band, which happens with probability
``1 - (1 - J**r)**b`` for a pair of Jaccard ``J``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from neardup_spark.kernels.hashing import GOLDEN64, fmix64, splitmix64_stream

_BAND_SEED = 0xBA4D5


def candidate_probability(jaccard: float | np.ndarray, bands: int, rows: int) -> np.ndarray:
    """Probability that a pair of Jaccard ``jaccard`` shares at least one band.

    >>> round(float(candidate_probability(0.9, 20, 10)), 4)
    0.9998
    """
    j = np.asarray(jaccard, dtype=np.float64)
    return 1.0 - (1.0 - j**rows) ** bands


def approximate_threshold(bands: int, rows: int) -> float:
    """Where the candidate curve rises: about ``(1/b)**(1/r)``.

    >>> round(approximate_threshold(20, 10), 2)
    0.74
    """
    return float((1.0 / bands) ** (1.0 / rows))


def false_positive_area(bands: int, rows: int, threshold: float, steps: int = 2001) -> float:
    """Area under the candidate curve below ``threshold`` (trapezoid rule)."""
    j = np.linspace(0.0, threshold, steps)
    p = candidate_probability(j, bands, rows)
    return float(np.sum((p[1:] + p[:-1]) * np.diff(j)) / 2.0)


def choose_bands(threshold: float, num_perm: int, min_recall: float = 0.99) -> tuple[int, int]:
    """Default ``(bands, rows)``: favour recall, since every candidate is verified exactly.

    For each row count ``r`` the sketch is used whole, ``b = num_perm // r`` bands. Among the
    ``(b, r)`` whose candidate probability at ``threshold`` is at least ``min_recall``, the one
    with the least false-positive area below the threshold wins (fewest wasted candidates).

    >>> choose_bands(0.8, 200)
    (28, 7)
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    best: tuple[float, int, int] | None = None
    for rows in range(1, num_perm + 1):
        bands = num_perm // rows
        if float(candidate_probability(threshold, bands, rows)) < min_recall:
            continue
        area = false_positive_area(bands, rows, threshold)
        if best is None or area < best[0]:
            best = (area, bands, rows)
    if best is None:
        # Even one-row bands miss the target (a tiny sketch): take the most sensitive banding.
        return num_perm, 1
    return best[1], best[2]


def probability_curve(bands: int, rows: int, points: int = 21) -> list[dict[str, float]]:
    """The candidate-probability curve at ``points`` evenly spaced Jaccard values."""
    js = np.linspace(0.0, 1.0, points)
    ps = candidate_probability(js, bands, rows)
    return [
        {"jaccard": round(float(j), 4), "probability": round(float(p), 6)}
        for j, p in zip(js, ps, strict=True)
    ]


def band_multipliers(bands: int, rows: int) -> np.ndarray:
    """Odd 64-bit multipliers, one per sketch position, for combining a band into one key."""
    return (splitmix64_stream(_BAND_SEED, bands * rows) | np.uint64(1)).reshape(bands, rows)


def band_keys(sketches: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """One 64-bit key per band: ``int64[n_docs, bands]``.

    Band ``j``'s key is ``fmix64(sum_i s_{j r + i} M_{j,i} XOR (j + 1) golden)`` mod 2**64, so equal
    bands give equal keys and the band index is part of the key (one key column serves all bands).
    """
    n_docs = sketches.shape[0]
    if bands * rows > sketches.shape[1]:
        raise ValueError(f"{bands} bands x {rows} rows exceed the sketch of {sketches.shape[1]}")
    cube = sketches[:, : bands * rows].astype(np.uint64).reshape(n_docs, bands, rows)
    with np.errstate(over="ignore"):
        acc = (cube * band_multipliers(bands, rows)[None, :, :]).sum(axis=2, dtype=np.uint64)
        acc ^= np.arange(1, bands + 1, dtype=np.uint64)[None, :] * GOLDEN64
    return fmix64(acc).view(np.int64)


def shared_key_rows(keys: np.ndarray) -> np.ndarray:
    """The rows of ``keys`` whose key occurs more than once, grouped by key: the only entries
    that can make a candidate pair (most band keys of a corpus are one document's alone, and
    sorting only the others by key and id costs half of sorting all).

    >>> shared_key_rows(np.array([7, 3, 9, 7, 3, 5])).tolist()
    [1, 4, 0, 3]
    """
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    same_as_next = np.zeros(len(keys), dtype=bool)
    same_as_next[:-1] = ordered[1:] == ordered[:-1]
    shared = same_as_next.copy()
    shared[1:] |= same_as_next[:-1]
    return order[shared]


def bucket_pairs(keys: np.ndarray, ids: pa.Array, all_pairs_max: int) -> tuple[pa.Array, pa.Array]:
    """Entries sorted by (key, id) -> candidate pairs ``(doc_a, doc_b)`` of each key's run (an
    LSH bucket): all pairs of a bucket of up to ``all_pairs_max`` members, a star from its
    smallest id in a larger one, so a bucket of ``n`` costs ``O(n)`` pairs."""
    if keys.size < 2:
        return ids.slice(0, 0), ids.slice(0, 0)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    sizes = np.diff(np.append(starts, keys.size))
    left: list[np.ndarray] = []
    right: list[np.ndarray] = []
    for size in np.unique(sizes[(sizes >= 2) & (sizes <= all_pairs_max)]):
        first = starts[sizes == size]
        i, j = np.triu_indices(int(size), 1)
        left.append((first[:, None] + i[None, :]).reshape(-1))
        right.append((first[:, None] + j[None, :]).reshape(-1))
    star = sizes > all_pairs_max
    if star.any():  # a bucket too large for all pairs: a star from its smallest id
        members = np.flatnonzero(np.repeat(star, sizes))
        first = np.repeat(starts[star], sizes[star])
        others = members != first
        left.append(first[others])
        right.append(members[others])
    if not left:
        return ids.slice(0, 0), ids.slice(0, 0)
    a = pa.array(np.concatenate(left))
    b = pa.array(np.concatenate(right))
    return ids.take(a), ids.take(b)


def large_bucket_rows(keys: np.ndarray, all_pairs_max: int) -> np.ndarray:
    """Entries sorted by key -> the rows of the buckets (runs of one key) larger than
    ``all_pairs_max``: those :func:`bucket_pairs` gives a star only.

    >>> large_bucket_rows(np.array([1, 1, 2, 2, 2, 3]), 2).tolist()
    [2, 3, 4]
    """
    if keys.size == 0:
        return np.zeros(0, np.int64)
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    sizes = np.diff(np.append(starts, keys.size))
    return np.flatnonzero(np.repeat(sizes > all_pairs_max, sizes))
