"""Exact fingerprints: 64 bits of SHA-256 of the normalised text ("Exact duplicates" in
../shared/seeds/near-duplicate-detection-article.txt)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.kernels.exact_fingerprint import (
    EXACT_HASH,
    NO_FINGERPRINT,
    ExactFingerprints,
    exact_fingerprint,
    exact_fingerprints,
    to_hex,
)
from neardup_spark.kernels.normalize import normalize_text, normalize_texts

D1 = "the crawler fetches each page and follows its links to new pages"
D2 = "the crawler fetches every page and follows its links to other pages"


def sha256_64(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def test_scheme_name() -> None:
    assert EXACT_HASH == "sha256-64"
    assert NO_FINGERPRINT == 0


def test_single_text_is_first_64_bits_of_sha256() -> None:
    assert exact_fingerprint(D1) == sha256_64(D1)
    assert to_hex(exact_fingerprint(D1)) == hashlib.sha256(D1.encode()).hexdigest()[:16]
    assert exact_fingerprint("café") == sha256_64("café")  # UTF-8 bytes, not code points
    assert exact_fingerprint("") == exact_fingerprint(None) == 0


def test_d1_and_d2_differ() -> None:
    # Ten of twelve words shared, yet unrelated fingerprints: exact matching misses them.
    f1, f2 = exact_fingerprint(D1), exact_fingerprint(D2)
    assert f1 != f2
    assert bin(f1 ^ f2).count("1") > 8
    fps, valid = exact_fingerprints(pa.array([D1, D2]))
    assert fps.tolist() == [f1, f2] and valid.tolist() == [True, True]


def test_equal_normalised_texts_give_equal_fingerprints() -> None:
    raw = [
        "The Crawler, fetches EACH page",
        "the crawler fetches each page",
        "the  crawler\tfetches each page!",
    ]
    normalized = normalize_texts(pa.array(raw))
    fps, valid = exact_fingerprints(normalized)
    assert valid.all()
    assert len(set(fps.tolist())) == 1
    assert fps[0] == exact_fingerprint(normalize_text(raw[0]))
    assert exact_fingerprint(normalize_text("the crawler fetches each page.")) == fps[0]
    assert exact_fingerprint("the crawler fetches each pages") != fps[0]


def test_null_and_empty() -> None:
    result = exact_fingerprints(pa.array(["a", None, "", "a"], type=pa.large_string()))
    assert isinstance(result, ExactFingerprints)
    assert result.fingerprints.dtype == np.uint64 and result.valid.dtype == np.bool_
    assert result.valid.tolist() == [True, False, False, True]
    assert result.fingerprints.tolist() == [sha256_64("a"), 0, 0, sha256_64("a")]
    # whitespace-only raw text normalises to empty: no fingerprint
    fps, valid = exact_fingerprints(normalize_texts(pa.array(["  \t ", "!!!"])))
    assert valid.tolist() == [False, False] and fps.tolist() == [0, 0]


@pytest.mark.parametrize(
    "array",
    [
        pa.array([], type=pa.string()),
        pa.array([None, None], type=pa.string()),
        pa.array(["", ""], type=pa.large_string()),
        pa.array([None, None]),  # null type
    ],
)
def test_degenerate_batches(array: pa.Array) -> None:
    fps, valid = exact_fingerprints(array)
    assert fps.tolist() == [0] * len(array) and not valid.any()


TEXTS = [D1, None, "", D2, "straße", "naïve café", "ｆｕｌｌ", "a rose is a rose", D1, "x"]


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_string(), pa.string_view()])
def test_batch_equals_single(arrow_type: pa.DataType) -> None:
    fps, valid = exact_fingerprints(pa.array(TEXTS, type=arrow_type))
    assert fps.tolist() == [exact_fingerprint(t) for t in TEXTS]
    assert valid.tolist() == [bool(t) for t in TEXTS]
    assert fps[0] == fps[8]


def test_sliced_and_chunked_arrays() -> None:
    full = pa.array(TEXTS, type=pa.string())
    expected = [exact_fingerprint(t) for t in TEXTS]
    for start in range(len(TEXTS)):
        fps, valid = exact_fingerprints(full.slice(start, 4))
        assert fps.tolist() == expected[start : start + 4]
        assert valid.tolist() == [bool(t) for t in TEXTS[start : start + 4]]
    chunked = pa.chunked_array([full.slice(0, 3), full.slice(3)])
    assert exact_fingerprints(chunked).fingerprints.tolist() == expected


def test_random_texts() -> None:
    rng = np.random.default_rng(3)
    alphabet = list("abc xyzéß€😀")
    texts = ["".join(rng.choice(alphabet, rng.integers(0, 30))) for _ in range(500)]
    fps, valid = exact_fingerprints(pa.array(texts))
    assert fps.tolist() == [sha256_64(t) if t else 0 for t in texts]
    assert valid.tolist() == [bool(t) for t in texts]


def test_to_hex() -> None:
    assert to_hex(0x93264C674404019D) == "93264c674404019d"
    assert to_hex(0) == "0000000000000000"
    assert to_hex(0xAB) == "00000000000000ab"
    assert to_hex(np.uint64(2**64 - 1)) == "ffffffffffffffff"
    assert to_hex(-1) == "ffffffffffffffff"  # a Spark long: the same 64 bits
    assert to_hex(np.int64(-(2**63))) == "8000000000000000"
    fp = exact_fingerprint(D1)
    assert to_hex(np.array([fp], np.uint64).view(np.int64)[0]) == to_hex(fp)
    assert int(to_hex(fp), 16) == fp
    for bad in (2**64, -(2**63) - 1):
        with pytest.raises(ValueError):
            to_hex(bad)


def test_token_counts_of_null_and_empty_texts_shingled_by_characters_are_zero():
    import warnings

    from neardup_spark.batch.text import count_tokens

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a NaN count cast to int32 warned (and was garbage)
        counts = count_tokens(pa.array(["ab c", None, ""]), np.array([True, True, True]), True)
    assert counts.tolist() == [3, 0, 0]
