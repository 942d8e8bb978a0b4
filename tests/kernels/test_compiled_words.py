"""The compiled word-shingle kernel against mmh3 and the NumPy path, bit for bit."""

from __future__ import annotations

import mmh3
import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.kernels.compiled_words import (
    _murmur3_64,
    word_counts,
    word_shingle_hashes,
    word_simhashes,
)
from neardup_spark.kernels.shingles import combine_word_hashes, position_multipliers, word_batch
from neardup_spark.kernels.simhash import simhash_batch, word_features


@pytest.mark.parametrize("seed", [0, 42, 2**31 + 5, 2**32 - 1])
def test_murmur3_matches_mmh3_hash64_for_every_tail_length(seed: int) -> None:
    rng = np.random.default_rng(seed % 1000)
    for length in [*range(0, 49), 100, 1000]:
        raw = rng.integers(0, 256, length, dtype=np.uint8)
        got = int(_murmur3_64(raw, 0, length, np.uint64(seed)))
        assert got == mmh3.hash64(raw.tobytes(), seed, signed=False)[0], length


def _random_texts(rng: np.random.Generator, n: int) -> list[str | None]:
    vocab = ["a", "rose", "is", "ü", "straße", "日本語", "x" * 17, "naïve", "b" * 33, "é"]
    texts: list[str | None] = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.05:
            texts.append(None)
        elif roll < 0.1:
            texts.append("")
        else:
            words = rng.integers(0, len(vocab), rng.integers(1, 40))
            texts.append(" ".join(vocab[w] for w in words))
    return texts


@pytest.mark.parametrize("k", [1, 2, 5, 9])
@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_string()])
def test_compiled_shingles_equal_numpy_path(k: int, arrow_type: pa.DataType) -> None:
    rng = np.random.default_rng(k)
    texts = pa.array(_random_texts(rng, 300), arrow_type)
    for array in (texts, texts.slice(7, 200)):  # a sliced array has a non-zero offset
        expected = combine_word_hashes(word_batch(array, 42, single_spaced=True), k)
        got = word_shingle_hashes(array, k, 42, position_multipliers(k))
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])


def test_word_counts_of_empty_null_and_single_spaced_texts() -> None:
    texts = pa.array(["", None, "a", "a b", "ü 日本 c d"])
    assert word_counts(texts).tolist() == [0, 0, 1, 2, 4]
    assert word_counts(pa.array([], pa.string())).tolist() == []


def test_all_empty_batch_has_no_shingles() -> None:
    offsets, hashes = word_shingle_hashes(pa.array(["", None]), 5, 1, position_multipliers(5))
    assert offsets.tolist() == [0, 0, 0]
    assert hashes.size == 0


@pytest.mark.parametrize("weighting", ["binary", "count"])
def test_compiled_simhash_equals_numpy_path(weighting: str) -> None:
    rng = np.random.default_rng(11)
    texts = pa.array([*_random_texts(rng, 400), "a a a rose", "rose"], pa.large_string())
    for array in (texts, texts.slice(5, 300)):
        expected = simhash_batch(*word_features(array, 42, "mmh3", weighting))  # type: ignore[arg-type]
        got = word_simhashes(array, 42, count_weights=weighting == "count")
        np.testing.assert_array_equal(got, expected)
    assert word_simhashes(pa.array(["", None]), 1, False).tolist() == [0, 0]
