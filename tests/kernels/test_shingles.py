"""Word shingles and their 64-bit hashes against mmh3 and brute force."""

from __future__ import annotations

import mmh3
import numpy as np
import pyarrow as pa

from neardup_spark.kernels.hashing import fmix64
from neardup_spark.kernels.normalize import normalize_texts
from neardup_spark.kernels.shingles import (
    WordBatch,
    combine_word_hashes,
    hash_words,
    shingle_sets,
    shingle_strings,
    word_batch,
)


def test_hash_words_uses_mmh3_per_word():
    words = pa.array(["alpha", "beta", "alpha"])
    got = hash_words(words, seed=7)
    assert got.tolist() == [mmh3.hash64(w, 7, signed=False)[0] for w in ["alpha", "beta", "alpha"]]


def _words(texts):
    return word_batch(normalize_texts(pa.array(texts, pa.large_string())), seed=1)


def test_shingle_counts_short_and_empty_documents():
    words = _words(["a b c d e f g", "a b", "", None, "one"])
    offsets, _ = combine_word_hashes(words, 5)
    assert np.diff(offsets).tolist() == [3, 1, 0, 0, 1]


def test_shingle_hash_is_order_sensitive_and_deterministic():
    words = _words(["a b c", "c b a", "a b c"])
    _, hashes = combine_word_hashes(words, 3)
    assert hashes[0] != hashes[1]
    assert hashes[0] == hashes[2]


def test_shingle_sets_match_string_shingles():
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(30)]
    texts = [" ".join(rng.choice(vocab, size=n)) for n in (0, 1, 4, 5, 6, 40, 200)]
    for k in (1, 2, 5):
        sets = shingle_sets(pa.array(texts, pa.large_string()), k, seed=9)
        for i, text in enumerate(texts):
            assert sets.doc(i).size == len(set(shingle_strings(text, k)))
            assert np.all(np.diff(sets.doc(i).astype(np.float64)) > 0)  # sorted, unique


def test_shingle_hashes_have_no_collisions_on_many_distinct_shingles():
    words = WordBatch(
        offsets=np.array([0, 200_000]),
        hashes=fmix64(np.arange(1, 200_001, dtype=np.uint64)),
    )
    _, hashes = combine_word_hashes(words, 5)
    assert np.unique(hashes).size == hashes.size


def test_combine_word_hashes_matches_its_formula():
    """fmix64(sum_j h(w_j) M_j XOR L golden) per shingle, computed slowly with Python ints."""
    from neardup_spark.kernels.hashing import GOLDEN64
    from neardup_spark.kernels.shingles import position_multipliers

    rng = np.random.default_rng(4)
    counts = [0, 1, 3, 5, 9, 4, 0, 12]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    hashes = rng.integers(0, 2**64 - 1, size=offsets[-1], dtype=np.uint64)
    k = 5
    got_offsets, got = combine_word_hashes(WordBatch(offsets, hashes), k)
    mult = [int(m) for m in position_multipliers(k)]
    expected = []
    for d in range(len(counts)):
        words = [int(h) for h in hashes[offsets[d] : offsets[d + 1]]]
        windows = (
            [words[i : i + k] for i in range(len(words) - k + 1)]
            if len(words) >= k
            else ([words] if words else [])
        )
        for window in windows:
            acc = sum(w * m for w, m in zip(window, mult, strict=False)) % 2**64
            acc ^= (len(window) * int(GOLDEN64)) % 2**64
            expected.append(int(fmix64(np.array([acc], dtype=np.uint64))[0]))
    assert np.diff(got_offsets).tolist() == [0, 1, 1, 1, 5, 1, 0, 8]
    assert got.tolist() == expected
