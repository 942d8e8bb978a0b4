"""SimHash kernels: the seed article's numbers, batch/single agreement, a slow reference, and the
block tables' pigeonhole guarantee (../shared/seeds/near-duplicate-detection-article.txt)."""

from __future__ import annotations

import hashlib
import itertools
import math
from collections import Counter

import mmh3
import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.kernels.normalize import normalize_text, normalize_texts
from neardup_spark.kernels.shingles import shingle_sets, shingle_strings
from neardup_spark.kernels.simhash import (
    REFERENCE_HASH,
    REFERENCE_WEIGHTING,
    SIMHASH_VERSION,
    bit_totals,
    block_layout,
    cosine_from_hamming,
    hamming,
    md5_64,
    n_tables,
    shingle_features,
    simhash_batch,
    simhash_text,
    table_combinations,
    table_keys,
    table_masks,
    word_features,
)

D1 = "the crawler fetches each page and follows its links to new pages"
D2 = "the crawler fetches every page and follows its links to other pages"
D3 = "a rose is a rose is a rose"

# The article's "By hand" table: the first 8 bits of each word's MD5, in its (alphabetical) order.
BY_HAND = [
    ("and", "10111110"),
    ("crawler", "11001101"),
    ("each", "10010011"),
    ("fetches", "11111110"),
    ("follows", "11010011"),
    ("its", "01011000"),
    ("links", "10000000"),
    ("new", "00100010"),
    ("page", "01110001"),
    ("pages", "10110011"),
    ("the", "10001111"),
    ("to", "00000001"),
]


def as_arrow(texts: list[str | None]) -> pa.Array:
    return pa.array(texts, type=pa.large_string())


def slow_simhash(hashes: list[int], weights: list[float]) -> int:
    """Charikar's procedure as the article states it, one feature and one bit at a time."""
    totals = [0.0] * 64
    for h, w in zip(hashes, weights, strict=True):
        for i in range(64):  # i = 0 is the article's bit 1, the most significant
            totals[i] += w if (h >> (63 - i)) & 1 else -w
    return sum(1 << (63 - i) for i in range(64) if totals[i] > 0)


# --- the article's worked example ---------------------------------------------------------------


def test_reference_scheme_is_md5_words_weight_one() -> None:
    assert (REFERENCE_HASH, REFERENCE_WEIGHTING) == ("md5", "binary")
    assert SIMHASH_VERSION == 1


@pytest.mark.parametrize("weighting", ["binary", "count"])
def test_article_fingerprints(weighting: str) -> None:
    # Weight 1 per distinct word is the reference; counts happen to give the same three numbers.
    f1 = simhash_text(D1, "md5", weighting)  # type: ignore[arg-type]
    f2 = simhash_text(D2, "md5", weighting)  # type: ignore[arg-type]
    f3 = simhash_text(D3, "md5", weighting)  # type: ignore[arg-type]
    assert f"{f1:016x}" == "93264c674404019d"
    assert f"{f2:016x}" == "91060e274484039d"
    assert int(hamming(f1, f2)) == 7
    assert 64 - int(hamming(f1, f2)) == 57  # "the observed fraction, 57/64 = 0.891"
    assert int(hamming(f1, f3)) == 37  # "27 of 64 agree"


def test_simhash_text_defaults_to_the_reference() -> None:
    assert simhash_text(D1) == 0x93264C674404019D
    assert simhash_text(D2) == 0x91060E274484039D


def test_by_hand_table() -> None:
    words = D1.split()
    assert sorted(words) == [w for w, _ in BY_HAND]
    hashes = md5_64([w for w, _ in BY_HAND])
    for (word, bits), h in zip(BY_HAND, hashes.tolist(), strict=True):
        assert format(h >> 56, "08b") == bits, word
        assert h == int.from_bytes(hashlib.md5(word.encode()).digest()[:8], "big")
    totals = bit_totals(hashes)
    assert totals.dtype == np.int64
    assert totals[:8].tolist() == [4, -2, -2, 2, -2, -4, 2, 2]
    assert "".join("1" if t > 0 else "0" for t in totals[:8]) == "10010011"
    assert format(simhash_text(D1) >> 56, "08b") == "10010011"
    # 8 of the 12 words have bit 1 set: +8 - 4; the second bit: 5 ones, 7 zeros.
    assert sum(b[0] == "1" for _, b in BY_HAND) == 8
    assert sum(b[1] == "1" for _, b in BY_HAND) == 5


def test_by_hand_totals_agree_with_features_of_d1() -> None:
    offsets, hashes, weights = word_features(as_arrow([D1]), 0, hash="md5", weighting="binary")
    assert offsets.tolist() == [0, 12]
    totals = bit_totals(hashes, weights)
    assert totals.tolist() == bit_totals(md5_64(D1.split())).tolist()
    bits = "".join("1" if t > 0 else "0" for t in totals)
    assert int(bits, 2) == 0x93264C674404019D


def test_d3_totals_under_both_weightings() -> None:
    distinct = md5_64(["a", "rose", "is"])
    binary = bit_totals(distinct)
    counted = bit_totals(distinct, np.array([3, 3, 2]))
    assert np.array_equal(binary > 0, counted > 0)  # why both weightings give 37 bits
    assert set(np.abs(binary).tolist()) <= {1, 3}  # three votes: never a tie


def test_cosine_from_hamming() -> None:
    assert float(cosine_from_hamming(0)) == pytest.approx(1.0)
    assert float(cosine_from_hamming(32)) == pytest.approx(0.0, abs=1e-12)
    assert float(cosine_from_hamming(64)) == pytest.approx(-1.0)
    # Manku et al.'s k = 3: about 8.4 degrees, cosine near 0.99.
    assert math.degrees(3 / 64 * math.pi) == pytest.approx(8.4375)
    assert float(cosine_from_hamming(3)) == pytest.approx(0.9892, abs=1e-4)
    assert cosine_from_hamming(np.array([0, 16]), bits=32).tolist() == pytest.approx([1.0, 0.0])


# --- features ------------------------------------------------------------------------------------


TEXTS = [
    D1,
    D2,
    D3,
    "",
    None,
    "   ",
    "The Crawler, fetches: each PAGE (and) follows its links!",
    "Straße café ｆｕｌｌ naïve naïve",
    "one",
    "b a b a b a c",
]


@pytest.mark.parametrize("hash_name", ["mmh3", "md5"])
@pytest.mark.parametrize("weighting", ["count", "binary"])
def test_word_features_counts(hash_name: str, weighting: str) -> None:
    normalized = normalize_texts(as_arrow(TEXTS))
    offsets, hashes, weights = word_features(normalized, 11, hash_name, weighting)  # type: ignore[arg-type]
    assert offsets.dtype == np.int64 and hashes.dtype == np.uint64 and weights.dtype == np.int64
    assert len(offsets) == len(TEXTS) + 1 and offsets[0] == 0 and offsets[-1] == len(hashes)
    for d, text in enumerate(normalized.to_pylist()):
        counts = Counter((text or "").split())
        got_h = hashes[offsets[d] : offsets[d + 1]]
        got_w = weights[offsets[d] : offsets[d + 1]]
        expected_h = (
            md5_64(list(counts))
            if hash_name == "md5"
            else np.array([mmh3.hash64(w, 11, signed=False)[0] for w in counts], np.uint64)
        )
        expected_w = list(counts.values()) if weighting == "count" else [1] * len(counts)
        assert sorted(zip(got_h.tolist(), got_w.tolist(), strict=True)) == sorted(
            zip(expected_h.tolist(), expected_w, strict=True)
        )


def test_word_features_empty_batch_and_all_empty() -> None:
    for texts in ([], [None, "", None]):
        offsets, hashes, weights = word_features(as_arrow(texts), 0)
        assert offsets.tolist() == [0] * (len(texts) + 1)
        assert len(hashes) == len(weights) == 0
        assert simhash_batch(offsets, hashes, weights).tolist() == [0] * len(texts)


def test_word_features_rejects_unknown_options() -> None:
    with pytest.raises(ValueError, match="hash"):
        word_features(as_arrow([D1]), 0, hash="sha1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="weighting"):
        word_features(as_arrow([D1]), 0, weighting="tfidf")  # type: ignore[arg-type]


def test_word_features_chunked_input() -> None:
    chunked = pa.chunked_array([as_arrow([D1, None]), as_arrow([D2])])
    a = word_features(chunked, 3)
    b = word_features(as_arrow([D1, None, D2]), 3)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("k", [1, 3, 4])
def test_shingle_features_match_shingle_sets(k: int) -> None:
    normalized = normalize_texts(as_arrow(TEXTS))
    offsets, hashes, weights = shingle_features(normalized, k, 5)
    sets = shingle_sets(normalized, k, 5)
    assert np.array_equal(offsets, sets.offsets)
    assert np.array_equal(hashes, sets.hashes)
    for d, text in enumerate(normalized.to_pylist()):
        words = (text or "").split()
        runs = [" ".join(words[i : i + k]) for i in range(len(words) - k + 1)] or (
            [" ".join(words)] if words else []
        )
        assert len(set(runs)) == len(shingle_strings(text or "", k))
        assert sorted(weights[offsets[d] : offsets[d + 1]].tolist()) == sorted(
            Counter(runs).values()
        )
    _, _, binary = shingle_features(normalized, k, 5, weighting="binary")
    assert set(binary.tolist()) <= {1}


def test_shingle_simhash_of_the_rose() -> None:
    # 4-shingles of d3: "a rose is a" x2, "rose is a rose" x2, "is a rose is" x1.
    offsets, hashes, weights = shingle_features(as_arrow([D3]), 4, 0)
    assert sorted(weights.tolist()) == [1, 2, 2]
    assert simhash_text(D3, "mmh3", "count", shingle_k=4) == int(
        simhash_batch(offsets, hashes, weights)[0]
    )
    assert simhash_text(D3, "md5", shingle_k=4) != simhash_text(D3, "mmh3", shingle_k=4)


# --- batch kernel ----------------------------------------------------------------------------


@pytest.mark.parametrize("hash_name", ["mmh3", "md5"])
@pytest.mark.parametrize("weighting", ["count", "binary"])
@pytest.mark.parametrize("shingle_k", [None, 2])
def test_batch_agrees_with_single_text(
    hash_name: str, weighting: str, shingle_k: int | None
) -> None:
    normalized = normalize_texts(as_arrow(TEXTS))
    if shingle_k is None:
        features = word_features(normalized, 42, hash_name, weighting)  # type: ignore[arg-type]
    else:
        features = shingle_features(normalized, shingle_k, 42, hash_name, weighting)  # type: ignore[arg-type]
    batch = simhash_batch(*features)
    assert batch.dtype == np.uint64 and batch.shape == (len(TEXTS),)
    single = [
        simhash_text(t, hash_name, weighting, seed=42, shingle_k=shingle_k)  # type: ignore[arg-type]
        for t in TEXTS
    ]
    assert batch.tolist() == single
    assert single[3] == single[4] == single[5] == 0  # no words, no fingerprint bits


def test_simhash_ignores_word_order_and_case() -> None:
    shuffled = "pages new to links its follows and page each fetches crawler the"
    assert simhash_text(shuffled) == simhash_text(D1)
    assert simhash_text("THE crawler, fetches each page and follows its links to new pages!") == (
        simhash_text(D1)
    )
    # normalize_text is applied first
    assert normalize_text("A rose, IS a rose") == "a rose is a rose"


def random_csr(rng: np.random.Generator, n_docs: int, max_len: int) -> tuple[np.ndarray, ...]:
    sizes = rng.integers(0, max_len + 1, n_docs)
    sizes[rng.random(n_docs) < 0.2] = 0  # plenty of empty documents, also first and last
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    n = int(offsets[-1])
    # few distinct hashes so that totals often tie at exactly 0
    pool = rng.integers(0, 2**64, 16, dtype=np.uint64)
    hashes = np.where(
        rng.random(n) < 0.5,
        pool[rng.integers(0, 16, n)],
        rng.integers(0, 2**64, n, dtype=np.uint64),
    )
    return offsets, hashes


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weights_kind", ["none", "ones", "int", "signed", "dyadic"])
def test_simhash_batch_equals_slow_reference(seed: int, weights_kind: str) -> None:
    rng = np.random.default_rng(seed)
    # seed 0: many small documents; seed 1: long documents that cross the kernel's chunks
    n_docs, max_len = [(300, 12), (7, 5000), (50, 200), (1, 3)][seed]
    offsets, hashes = random_csr(rng, n_docs, max_len)
    n = len(hashes)
    weights: np.ndarray | None
    if weights_kind == "none":
        weights = None
    elif weights_kind == "ones":
        weights = np.ones(n, dtype=np.int32)
    elif weights_kind == "int":
        weights = rng.integers(1, 6, n)
    elif weights_kind == "signed":
        weights = rng.integers(-3, 4, n)  # zero and negative weights are allowed
    else:
        weights = rng.integers(-8, 9, n) / 4.0  # exact in float64, so ties are exact
    got = simhash_batch(offsets, hashes, weights)
    w_list = [1.0] * n if weights is None else weights.tolist()
    h_list = hashes.tolist()
    expected = [
        slow_simhash(h_list[offsets[d] : offsets[d + 1]], w_list[offsets[d] : offsets[d + 1]])
        for d in range(n_docs)
    ]
    assert got.tolist() == expected
    for d in rng.choice(n_docs, min(n_docs, 5), replace=False).tolist():
        seg = slice(offsets[d], offsets[d + 1])
        totals = bit_totals(hashes[seg], None if weights is None else weights[seg])
        bits = "".join("1" if t > 0 else "0" for t in totals)
        assert int(bits, 2) == expected[d]


def test_bit_totals_types_and_empty() -> None:
    h = np.array([0xFFFFFFFFFFFFFFFF, 0], dtype=np.uint64)
    assert bit_totals(h, np.array([2, 1])).tolist() == [1] * 64
    assert bit_totals(h, np.array([0.5, 1.0])).dtype == np.float64
    assert bit_totals(h, np.array([0.5, 1.0])).tolist() == [-0.5] * 64
    assert bit_totals(np.zeros(0, np.uint64)).tolist() == [0] * 64
    assert bit_totals(h.view(np.int64)).tolist() == [0] * 64  # tie: bit is 0
    with pytest.raises(ValueError, match="shape"):
        bit_totals(h, np.array([1]))


def test_simhash_batch_validates_offsets() -> None:
    h = np.arange(4, dtype=np.uint64)
    assert simhash_batch(np.array([0]), np.zeros(0, np.uint64)).tolist() == []
    for bad in ([0, 3], [1, 4], [0, 3, 2, 4], []):
        with pytest.raises(ValueError):
            simhash_batch(np.array(bad, dtype=np.int64), h)


# --- Hamming distance ----------------------------------------------------------------------


def test_hamming_vectorised() -> None:
    rng = np.random.default_rng(9)
    a = rng.integers(0, 2**64, 1000, dtype=np.uint64)
    b = rng.integers(0, 2**64, 1000, dtype=np.uint64)
    h = hamming(a, b)
    assert h.dtype == np.int64
    assert h.tolist() == [
        bin(x ^ y).count("1") for x, y in zip(a.tolist(), b.tolist(), strict=True)
    ]
    assert np.array_equal(hamming(a.view(np.int64), b.view(np.int64)), h)  # Spark longs
    assert hamming(a, a[:1]).shape == (1000,)  # broadcasting
    assert int(hamming(0, 2**64 - 1)) == 64
    assert (64 - hamming(np.uint64(0), np.uint64(1))) == 63  # no unsigned wrap-around


# --- block tables ----------------------------------------------------------------------------


@pytest.mark.parametrize("blocks", range(1, 65))
def test_block_layout(blocks: int) -> None:
    layout = block_layout(blocks)
    assert len(layout) == blocks
    assert layout[0][0] == 0 and layout[-1][1] == 64
    assert all(a[1] == b[0] for a, b in itertools.pairwise(layout))
    widths = [stop - start for start, stop in layout]
    assert max(widths) - min(widths) <= 1 and sorted(widths, reverse=True) == widths


def test_block_layout_rejects() -> None:
    for bad in (0, 65, -1):
        with pytest.raises(ValueError):
            block_layout(bad)


def test_table_combinations() -> None:
    assert len(table_combinations(6, 3)) == 20
    assert n_tables(6, 3) == 20
    assert table_combinations(4, 0) == [(0, 1, 2, 3)]
    for blocks in range(1, 9):
        for k in range(blocks):
            combos = table_combinations(blocks, k)
            assert len(combos) == math.comb(blocks, k) == n_tables(blocks, k)
            assert all(len(c) == blocks - k for c in combos)
    for blocks, k in [(3, 3), (3, 4), (4, -1), (65, 3), (0, 0)]:
        with pytest.raises(ValueError):
            table_combinations(blocks, k)
        with pytest.raises(ValueError):
            table_keys(np.zeros(1, np.uint64), blocks, k)


def test_table_masks_cover_the_chosen_blocks() -> None:
    masks = table_masks(6, 3)
    for combo, mask in zip(table_combinations(6, 3), masks.tolist(), strict=True):
        kept_bits = sum(block_layout(6)[j][1] - block_layout(6)[j][0] for j in combo)
        assert bin(mask).count("1") == kept_bits
    # block 0 is the 11 most significant bits
    assert int(table_masks(6, 5)[0]) == ((1 << 11) - 1) << 53


def flip_bits(rng: np.random.Generator, fps: np.ndarray, counts: np.ndarray) -> np.ndarray:
    out = fps.copy()
    for i, c in enumerate(counts.tolist()):
        for pos in rng.choice(64, c, replace=False).tolist():
            out[i] ^= np.uint64(1) << np.uint64(pos)
    return out


@pytest.mark.parametrize(
    ("blocks", "k"), [(6, 3), (4, 1), (5, 2), (8, 4), (3, 0), (10, 3), (64, 2)]
)
def test_table_keys_pigeonhole(blocks: int, k: int) -> None:
    rng = np.random.default_rng(blocks * 100 + k)
    n = 500
    a = rng.integers(0, 2**64, n, dtype=np.uint64)
    b = flip_bits(rng, a, rng.integers(0, k + 1, n))
    assert int(hamming(a, b).max()) <= k
    ka, kb = table_keys(a, blocks, k), table_keys(b, blocks, k)
    assert ka.dtype == np.int64 and ka.shape == (n, math.comb(blocks, k))
    # Every pair within k bits shares the key of at least one table (the same column).
    assert bool((ka == kb).any(axis=1).all())
    # Exactly: equal keys in table t <=> equal bits under table t's mask.
    masks = table_masks(blocks, k)
    same_bits = ((a ^ b)[:, None] & masks[None, :]) == 0
    assert np.array_equal(ka == kb, same_bits)


@pytest.mark.parametrize(("blocks", "k"), [(6, 3), (4, 1), (8, 4)])
def test_table_keys_far_apart_rarely_share(blocks: int, k: int) -> None:
    rng = np.random.default_rng(17)
    n = 2000
    a = rng.integers(0, 2**64, n, dtype=np.uint64)
    far = flip_bits(rng, a, np.full(n, 24))
    unrelated = rng.integers(0, 2**64, n, dtype=np.uint64)
    ka = table_keys(a, blocks, k)
    for other in (far, unrelated):
        ko = table_keys(other, blocks, k)
        same_column = (ka == ko).any(axis=1).mean()
        assert same_column < 0.005
    # Keys of different tables do not collide: a key value never appears in two columns.
    both = np.concatenate([ka, table_keys(unrelated, blocks, k)])
    per_column = np.concatenate([np.unique(both[:, t]) for t in range(both.shape[1])])
    assert len(np.unique(per_column)) == len(per_column)


def test_table_keys_identical_fingerprints_share_every_table() -> None:
    fps = np.array([0x93264C674404019D, 0x93264C674404019D, 0x91060E274484039D], np.uint64)
    keys = table_keys(fps, 6, 3)
    assert (keys[0] == keys[1]).all()
    # d1 and d2 are 7 bits apart: more than k = 3, yet they may share a table if the 7 bits
    # fall in at most 3 blocks; the keys agree exactly where the masked bits agree.
    masks = table_masks(6, 3)
    assert np.array_equal(keys[0] == keys[2], ((fps[0] ^ fps[2]) & masks) == 0)
    assert np.array_equal(table_keys(fps.view(np.int64), 6, 3), keys)
