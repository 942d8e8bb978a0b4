"""The large-bucket greedy of the anchored rule: against a brute-force greedy, linear on a bucket
of near-identical pages, capped and counted on a bucket of unlike texts, deterministic."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup_spark.kernels.bucket_kept import bucket_kept_pairs, estimate_bounds

WIDTH = 200


def brute_force(starts, sketches, kept_max, pair_bound, removal_bound):
    """The greedy as the module says it, in Python."""
    n = sketches.shape[0]
    ends = [*starts[1:], n]
    pairs, comparisons, skipped = [], 0, 0
    for first, end in zip(starts, ends, strict=True):
        kept: list[int] = []
        for member in range(first, end):
            removed = False
            for k in kept[:kept_max]:
                estimate = np.mean(sketches[member] == sketches[k])
                comparisons += 1
                if estimate >= pair_bound - 1e-12:
                    pairs.append((k, member))
                removed |= bool(estimate >= removal_bound - 1e-12)
            skipped += max(0, len(kept) - kept_max)
            if not removed:
                kept.append(member)
    return pairs, comparisons, skipped


def near_identical(n: int, changed: int, seed: int = 0) -> np.ndarray:
    """``n`` sketches equal to one page's but in ``changed`` random positions each."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**32, WIDTH, dtype=np.uint32)
    sketches = np.repeat(base[None, :], n, axis=0)
    rows = np.repeat(np.arange(n), changed)
    cols = rng.integers(0, WIDTH, n * changed)
    sketches[rows, cols] = rng.integers(0, 2**32, n * changed, dtype=np.uint32)
    return sketches


def test_bounds_sit_around_the_threshold():
    low, high = estimate_bounds(0.8, 200)
    assert 0.70 < low < 0.8 == high
    assert estimate_bounds(1.0, 200) == (1.0, 1.0)


def test_a_bucket_of_50000_near_identical_pages_costs_linear_work():
    n = 50_000
    sketches = near_identical(n, changed=4)
    found = bucket_kept_pairs(np.array([0]), sketches, 100, *estimate_bounds(0.8, WIDTH))
    assert found.comparisons == n - 1  # each member against the first, the only one kept
    assert found.skipped == 0
    assert (found.left == 0).all()
    assert found.right.tolist() == list(range(1, n))


def test_a_large_bucket_of_unlike_short_texts_is_capped_and_counted():
    n, cap = 3_000, 100
    rng = np.random.default_rng(1)
    # Short unlike texts: few shingles, so most sketch values are distinct, a few shared.
    sketches = rng.integers(0, 20, (n, WIDTH), dtype=np.uint32) * np.uint32(1_000_003)
    found = bucket_kept_pairs(np.array([0]), sketches, cap, *estimate_bounds(0.8, WIDTH))
    members = np.arange(n)
    assert found.comparisons == int(np.minimum(members, cap).sum())
    assert found.skipped == int(np.maximum(members - cap, 0).sum())
    assert found.left.size == 0  # nothing near: every member kept, no candidates


def test_no_cap_is_reached_without_a_count():
    sketches = near_identical(500, changed=150, seed=2)  # J ~ 0.3 between any two: all kept
    found = bucket_kept_pairs(np.array([0]), sketches, 10_000, *estimate_bounds(0.8, WIDTH))
    assert found.comparisons == 500 * 499 // 2
    assert found.skipped == 0


def test_buckets_apart_or_together_give_the_same_pairs():
    parts = [near_identical(40, changed=c, seed=s) for c, s in ((5, 3), (60, 4), (30, 5))]
    together = np.concatenate(parts)
    starts = np.array([0, 40, 80])
    bounds = estimate_bounds(0.8, WIDTH)
    found = bucket_kept_pairs(starts, together, 7, *bounds)
    pairs, comparisons, skipped = set(), 0, 0
    for start, part in zip(starts, parts, strict=True):
        alone = bucket_kept_pairs(np.array([0]), part, 7, *bounds)
        pairs |= {(a + start, b + start) for a, b in zip(alone.left, alone.right, strict=True)}
        comparisons += alone.comparisons
        skipped += alone.skipped
    assert set(zip(found.left.tolist(), found.right.tolist(), strict=True)) == pairs
    assert (found.comparisons, found.skipped) == (comparisons, skipped)
    again = bucket_kept_pairs(starts, together.copy(), 7, *bounds)
    assert again.left.tolist() == found.left.tolist()
    assert again.right.tolist() == found.right.tolist()


buckets = st.lists(st.integers(1, 25), min_size=1, max_size=4).flatmap(
    lambda sizes: st.tuples(
        st.just(sizes),
        st.lists(
            st.lists(st.integers(0, 2), min_size=8, max_size=8),
            min_size=sum(sizes),
            max_size=sum(sizes),
        ),
        st.integers(1, 6),
    )
)


@settings(max_examples=200, deadline=None)
@given(buckets)
def test_the_kernel_is_the_brute_force_greedy(case):
    sizes, rows, cap = case
    sketches = np.array(rows, np.uint32)
    starts = np.r_[0, np.cumsum(sizes)[:-1]]
    found = bucket_kept_pairs(starts, sketches, cap, 0.5, 0.75)
    pairs, comparisons, skipped = brute_force(starts, sketches, cap, 0.5, 0.75)
    assert list(zip(found.left.tolist(), found.right.tolist(), strict=True)) == pairs
    assert (found.comparisons, found.skipped) == (comparisons, skipped)


def test_containment_bounds_each_pair_by_its_sizes():
    """Under containment a comparison proposes a pair from the equal values a pair contained at
    the threshold shows for its two sizes: a small set inside a large one with few equal
    values is proposed, two equal-sized sets with as few are not."""
    rng = np.random.default_rng(3)
    sketches = rng.integers(0, 2**32, (3, 200), dtype=np.uint32)
    sketches[1, :12] = sketches[0, :12]  # 12 equal values with the first row
    sketches[2, :12] = sketches[0, :12]
    sizes = np.array([2000, 100, 2000])  # row 1 is 20x smaller than row 0, row 2 as large
    found = bucket_kept_pairs(np.array([0]), sketches, 100, 0.0, 0.8, sizes, 0.8)
    # (0, 1) and (1, 2): a small set in a large one; not (0, 2), alike in size
    assert (found.left.tolist(), found.right.tolist()) == ([0, 1], [1, 2])
    plain = bucket_kept_pairs(np.array([0]), sketches, 100, 0.0, 0.8)
    assert len(plain.left) == 3  # without sizes every comparison reaches a bound of 0
