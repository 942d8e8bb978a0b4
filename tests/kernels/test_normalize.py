"""Normalisation (NFKC, case folding, punctuation, whitespace): the compiled ASCII path
against the Arrow regex path."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup_spark.kernels.normalize import NormalizeOptions, normalize_text, normalize_texts

_MIXED = [chr(i) for i in range(128)] + list("éßÀ日本ﬁ\u00a0\u2003’“”Σς\u0301")


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
