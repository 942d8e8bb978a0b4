"""Large LSH buckets under the anchored rule: each member compared with the bucket's *kept*
members, in keep order, by the MinHash estimate (the share of equal sketch values).

A bucket larger than ``bucket_all_pairs_max`` emits a star from its first member
(:func:`~neardup_spark.kernels.lsh.bucket_pairs`): enough to connect a component, not enough for a
rule that keeps two documents unless a verified pair joins them. Here the members (rows of a
``uint32[n, num_perm]`` sketch matrix, each bucket's rows together and in keep order) go through
a greedy: a member is compared with every member the bucket has kept so far, up to ``kept_max``
of them (the first ones); each comparison whose estimate reaches ``pair_bound`` gives a candidate
pair, verified exactly afterwards; the member is *bucket-kept* when no estimate reached
``removal_bound``. A bucket of near-identical pages keeps one member and costs ``n - 1``
comparisons; a bucket of unlike texts keeps them all and costs at most ``kept_max`` comparisons a
member, the rest skipped and counted, never quadratic in silence.

The bounds (:func:`estimate_bounds`): the estimate of a pair of Jaccard ``J`` has standard error
``s = sqrt(J (1 - J) / num_perm)``. Candidates are verified, so recall is what matters: a pair
is proposed from ``t - 3 s(t)`` (a pair at the threshold ``t`` is missed with probability
0.13 %). A member counts as removed, and is no longer compared with later ones, from ``t``
itself, the rule's own bar: the bucket's kept members are then the estimate's best guess at the
ones the rule keeps (a higher bar was tried, ``t + 2 s``: more comparisons, and more kept
members that the rule removes, which left later members uncompared just as often).

What this does not promise: the bucket's kept members are a guess at the rule's, which runs
afterwards over all the verified pairs; where they differ (the estimate's noise near ``t``, a
member removed for a document outside the bucket), two later members both kept by the rule may
never have been compared. On template-heavy buckets this leaves a few of the star's missed
pairs (``tests/pipeline/test_bucket_kept.py``).

>>> import numpy as np
>>> sketches = np.array([[1, 2, 3, 4], [1, 2, 3, 4], [5, 6, 7, 8], [5, 6, 7, 9]], np.uint32)
>>> # one bucket: row 1 is row 0's copy (removed); row 3 is near row 2, but not enough to go
>>> found = bucket_kept_pairs(np.array([0]), sketches, 100, 0.7, 0.9)
>>> found.left.tolist(), found.right.tolist(), found.comparisons, found.skipped
([0, 2], [1, 3], 4, 0)
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

try:
    from numba import njit
except ImportError:  # pragma: no cover - numba is a pinned dependency
    njit = None


class KeptPairs(NamedTuple):
    """Candidate pairs as row numbers (``left`` the earlier, bucket-kept member), the
    comparisons made and those skipped over the cap."""

    left: np.ndarray
    right: np.ndarray
    comparisons: int
    skipped: int


def estimate_bounds(threshold: float, num_perm: int) -> tuple[float, float]:
    """``(pair_bound, removal_bound)``: ``t - 3 s`` with ``s = sqrt(t (1 - t) / num_perm)``,
    and ``t`` (module docstring).

    >>> [round(b, 3) for b in estimate_bounds(0.8, 200)]
    [0.715, 0.8]
    """
    spread = math.sqrt(threshold * (1.0 - threshold) / num_perm)
    return max(0.0, threshold - 3.0 * spread), threshold


def _grown(values: np.ndarray, size: int) -> np.ndarray:
    bigger = np.empty(2 * values.size, values.dtype)
    bigger[:size] = values[:size]
    return bigger


def containment_min_equal(small: float, large: float, threshold: float, values: int) -> int:
    """The fewest equal values of ``values`` MinHash values (or shared one-value bands) a pair
    of sets of ``small`` and ``large`` elements shows when the smaller is contained in the
    larger at ``threshold``: its Jaccard is at least ``J = t s / (s + l - t s)``, and the count
    is binomial, so ``values J - 3 sqrt(values J (1 - J))``, at least 1 (a pair at the bound is
    dropped with probability ~0.13 %).

    >>> containment_min_equal(100, 100, 0.8, 200), containment_min_equal(10, 200, 0.8, 200)
    (113, 1)
    """
    if small > large:
        small, large = large, small
    if small <= 0:
        return 1
    least = threshold * small / (small + large - threshold * small)
    mean = values * least
    return max(1, math.floor(mean - 3.0 * math.sqrt(mean * (1.0 - least))))


def _greedy(
    starts: np.ndarray,
    sketches: np.ndarray,
    kept_max: int,
    pair_min: int,
    removal_min: int,
    sizes: np.ndarray,
    containment: float,
) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    n, width = sketches.shape
    left = np.empty(max(16, n), np.int64)
    right = np.empty(max(16, n), np.int64)
    found, comparisons, skipped = 0, 0, 0
    kept = np.empty(n, np.int64)
    for bucket in range(starts.size):
        first = starts[bucket]
        end = starts[bucket + 1] if bucket + 1 < starts.size else n
        n_kept = 0
        for member in range(first, end):
            compared = min(n_kept, kept_max)
            skipped += n_kept - compared
            removed = False
            for slot in range(compared):
                other = kept[slot]
                equal = 0
                for col in range(width):
                    if sketches[member, col] == sketches[other, col]:
                        equal += 1
                least = pair_min
                if containment > 0.0:  # the pair's own bound, by the two sets' sizes
                    small, large = sizes[member], sizes[other]
                    least = _containment_min_compiled(small, large, containment, width)
                if equal >= least:
                    if found == left.size:
                        left = _grown_compiled(left, found)
                        right = _grown_compiled(right, found)
                    left[found] = other
                    right[found] = member
                    found += 1
                if equal >= removal_min:
                    removed = True
            comparisons += compared
            if not removed:
                kept[n_kept] = member
                n_kept += 1
    return left[:found], right[:found], comparisons, skipped, found


if njit is not None:
    _containment_min_compiled = njit(cache=True, inline="always")(containment_min_equal)
    _grown_compiled = njit(cache=True)(_grown)
    _greedy_compiled = njit(cache=True, nogil=True)(_greedy)
else:  # pragma: no cover
    _containment_min_compiled = containment_min_equal
    _grown_compiled = _grown
    _greedy_compiled = _greedy


def bucket_kept_pairs(
    starts: np.ndarray,
    sketches: np.ndarray,
    kept_max: int,
    pair_bound: float,
    removal_bound: float,
    sizes: np.ndarray | None = None,
    containment: float = 0.0,
) -> KeptPairs:
    """Buckets' sketch rows (bucket ``i`` is rows ``starts[i]`` up to ``starts[i + 1]``, in keep
    order) -> the candidate pairs of the greedy (module docstring): ``(left, right)`` row
    numbers, ``left`` a bucket-kept member before ``right``; each member compared with at most
    ``kept_max`` bucket-kept members (the first), the comparisons beyond counted as skipped.
    ``containment`` (> 0, with each row's set ``sizes``): a pair is proposed from its own
    :func:`containment_min_equal`, not ``pair_bound``."""
    sketches = np.ascontiguousarray(sketches)
    width = sketches.shape[1] if sketches.ndim == 2 else 0
    if sketches.shape[0] == 0 or width == 0:
        empty = np.zeros(0, np.int64)
        return KeptPairs(empty, empty, 0, 0)
    pair_min = math.ceil(pair_bound * width - 1e-9)
    removal_min = math.ceil(removal_bound * width - 1e-9)
    sized = np.zeros(sketches.shape[0], np.int64) if sizes is None else np.asarray(sizes, np.int64)
    left, right, comparisons, skipped, _ = _greedy_compiled(
        np.asarray(starts, np.int64),
        sketches,
        int(kept_max),
        pair_min,
        removal_min,
        sized,
        float(containment if sizes is not None else 0.0),
    )
    return KeptPairs(left.copy(), right.copy(), int(comparisons), int(skipped))
