"""Pure kernels against brute force (no Spark)."""

from __future__ import annotations

import math

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup_spark.kernels.arrow_buffers import binary_from_csr, binary_from_rows, csr_from_binary
from neardup_spark.kernels.hashing import fmix64
from neardup_spark.kernels.jaccard import containment, intersection_size, jaccard
from neardup_spark.kernels.lsh import (
    band_keys,
    candidate_probability,
    choose_bands,
    false_positive_area,
)
from neardup_spark.kernels.minhash import (
    EMPTY_SLOT,
    MultiplyShiftFamily,
    estimate,
    signatures,
    standard_error,
)
from neardup_spark.kernels.normalize import NormalizeOptions, normalize_text, normalize_texts
from neardup_spark.kernels.shingles import (
    WordBatch,
    combine_word_hashes,
    hash_words,
    shingle_sets,
    shingle_strings,
    word_batch,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The  Crawler,\tfetches!\n", "the crawler fetches"),
        ("Straße GROSS", "strasse gross"),  # full case folding, not just lower()
        ("ﬁne Ｆｕｌｌ\u00a0width", "fine full width"),  # NFKC: ligature, full-width, nbsp
        ("don't-stop", "don t stop"),
        ("   ", ""),
        ("", ""),
        ("ΣΟΦΟΣ", "σοφοσ"),  # casefold maps final and medial sigma alike
    ],
)
def test_normalize_cases(raw, expected):
    assert normalize_text(raw) == expected


def test_normalize_keeps_nulls_and_length():
    out = normalize_texts(pa.array(["A b", None, "C"]))
    assert out.to_pylist() == ["a b", None, "c"]


def test_normalize_options_switch_steps_off():
    opts = NormalizeOptions(casefold=False, strip_punctuation=False)
    assert normalize_text("Hello,  World!", opts) == "Hello, World!"
    raw = NormalizeOptions(
        nfkc=False, casefold=False, strip_punctuation=False, collapse_whitespace=False
    )
    assert normalize_text(" a  b ", raw) == " a  b "


_MIXED = [chr(i) for i in range(128)] + list("éßÀ日本ﬁ\u00a0\u2003’“”Σς\u0301")


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(
        st.one_of(st.none(), st.text(st.sampled_from(_MIXED), max_size=40)), max_size=60
    ),
    start=st.integers(0, 5),
    large=st.booleans(),
    casefold=st.booleans(),
    nfkc=st.booleans(),
)
def test_compiled_ascii_path_equals_arrow_regex_path(texts, start, large, casefold, nfkc):
    """The compiled path (all-ASCII documents) and Arrow's regexes (the rest) give the same
    text as Arrow's regexes for every document, on sliced arrays of both string types."""
    import pyarrow.compute as pc

    from neardup_spark.kernels import normalize as kernel

    arr = pa.array(texts, pa.large_string() if large else pa.string()).slice(start)
    opts = NormalizeOptions(nfkc=nfkc, casefold=casefold)
    got = normalize_texts(arr, opts)
    base = pc.utf8_normalize(arr, form="NFKC") if nfkc else arr
    assert got.type == arr.type
    assert got.to_pylist() == kernel._words_arrow(base, opts).to_pylist()


def test_compiled_ascii_path_on_every_ascii_character():
    from neardup_spark.kernels import normalize as kernel

    texts = [chr(i) for i in range(128)] + [f" A{chr(i)}b9 " for i in range(128)] + ["x" * 3]
    arr = pa.array(texts)
    expected = kernel._words_arrow(arr, NormalizeOptions()).to_pylist()
    assert normalize_texts(arr).to_pylist() == expected
    assert expected[128 + ord("-")] == "a b9" and expected[128 + ord("Z")] == "azb9"


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


def brute_jaccard(a, b):
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 0.0


@given(
    st.sets(st.integers(0, 60), max_size=40),
    st.sets(st.integers(0, 60), max_size=40),
)
def test_jaccard_and_containment_match_sets(a, b):
    x = np.array(sorted(a), dtype=np.uint64)
    y = np.array(sorted(b), dtype=np.uint64)
    assert intersection_size(x, y) == len(a & b)
    assert jaccard(x, y) == pytest.approx(brute_jaccard(a, b))
    assert containment(x, y) == pytest.approx(len(a & b) / len(a) if a else 0.0)


def test_signatures_match_brute_force_minimum():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2**63, size=50, dtype=np.uint64)
    offsets = np.array([0, 10, 10, 50])
    family = MultiplyShiftFamily.from_seed(16, 5)
    sig = signatures(offsets, values, family)
    for d in (0, 2):
        part = values[offsets[d] : offsets[d + 1]]
        for i in range(16):
            assert sig[d, i] == family.apply(i, part).min()
    assert np.all(sig[1] == EMPTY_SLOT)


def test_family_is_deterministic_and_seed_dependent():
    a = MultiplyShiftFamily.from_seed(8, 1)
    assert np.array_equal(a.a, MultiplyShiftFamily.from_seed(8, 1).a)
    assert not np.array_equal(a.a, MultiplyShiftFamily.from_seed(8, 2).a)
    assert np.all(a.a % 2 == 1)


@settings(deadline=None, max_examples=40)
@given(st.integers(0, 2**31), st.floats(0.2, 0.95))
def test_estimate_within_five_standard_errors(seed, target):
    # Two sets of n values sharing s: J = s / (2n - s), so s = 2nJ / (1 + J).
    n = 200
    shared = round(2 * n * target / (1 + target))
    rng = np.random.default_rng(seed)
    universe = rng.choice(2**62, size=3 * n, replace=False).astype(np.uint64)
    a = np.sort(np.concatenate([universe[:shared], universe[n : 2 * n - shared]]))
    b = np.sort(np.concatenate([universe[:shared], universe[2 * n : 3 * n - shared]]))
    j = jaccard(a, b)
    assert j == pytest.approx(shared / (2 * n - shared))
    values = np.concatenate([a, b])
    family = MultiplyShiftFamily.from_seed(200, seed)
    sig = signatures(np.array([0, a.size, values.size]), values, family)
    assert abs(estimate(sig[0], sig[1]) - j) <= 5 * standard_error(j, 200)


def test_choose_bands_defaults_and_recall_target():
    bands, rows = choose_bands(0.8, 200)
    assert (bands, rows) == (28, 7)
    assert candidate_probability(0.8, bands, rows) >= 0.99
    for t in (0.5, 0.7, 0.9, 0.95):
        b, r = choose_bands(t, 200)
        assert b * r <= 200 and candidate_probability(t, b, r) >= 0.99
        # no other full-sketch banding meeting the target has less false-positive area
        for r2 in range(1, 201):
            b2 = 200 // r2
            if candidate_probability(t, b2, r2) >= 0.99:
                assert false_positive_area(b, r, t) <= false_positive_area(b2, r2, t) + 1e-12


def test_band_keys_equal_iff_band_equal():
    rng = np.random.default_rng(1)
    sk = rng.integers(0, 2**32, size=(3, 12), dtype=np.uint64).astype(np.uint32)
    sk[1, :4] = sk[0, :4]  # band 0 shared by docs 0 and 1
    keys = band_keys(sk, 3, 4)
    assert keys.shape == (3, 3) and keys.dtype == np.int64
    assert keys[0, 0] == keys[1, 0]
    assert keys[0, 1] != keys[1, 1] and keys[0, 2] != keys[1, 2]
    # the band index is part of the key: equal values in different bands give different keys
    same = np.zeros((1, 12), dtype=np.uint32)
    k = band_keys(same, 3, 4)
    assert len(set(k[0].tolist())) == 3


def test_band_keys_reject_too_many_bands():
    with pytest.raises(ValueError):
        band_keys(np.zeros((1, 10), dtype=np.uint32), 3, 4)


def test_binary_round_trip():
    offsets = np.array([0, 2, 2, 5])
    values = np.arange(5, dtype=np.uint64) * 3
    arr = binary_from_csr(offsets, values)
    assert arr.to_pylist()[1] == b""
    got_offsets, got = csr_from_binary(arr, np.uint64)
    assert got_offsets.tolist() == offsets.tolist() and got.tolist() == values.tolist()
    sliced_offsets, sliced = csr_from_binary(arr.slice(1), np.uint64)
    assert sliced_offsets.tolist() == [0, 0, 3] and sliced.tolist() == [6, 9, 12]
    rows = binary_from_rows(np.arange(6, dtype=np.uint32).reshape(2, 3))
    assert csr_from_binary(rows, np.uint32)[1].tolist() == list(range(6))


def test_standard_error_formula():
    assert standard_error(0.5, 100) == pytest.approx(math.sqrt(0.25 / 100))


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


@pytest.mark.parametrize("num_perm", [64, 7])
def test_compiled_and_numpy_signatures_agree(num_perm):
    rng = np.random.default_rng(8)
    sizes = rng.integers(0, 40, size=60)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    values = rng.integers(0, 2**64 - 1, size=offsets[-1], dtype=np.uint64)
    family = MultiplyShiftFamily.from_seed(num_perm, 3)
    from neardup_spark.kernels import minhash

    assert minhash._compiled_minimums is not None  # numba is a pinned dependency
    fast = signatures(offsets, values, family)
    slow = signatures(offsets, values, family, compiled=False)
    assert np.array_equal(fast, slow)
    assert np.all(fast[sizes == 0] == EMPTY_SLOT)
