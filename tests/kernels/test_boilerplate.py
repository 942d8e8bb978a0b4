"""Boilerplate unit kernels against brute force: splitting, normalised hashes, token counts,
removal, per-document lists and first occurrences; CJK, CRLF, blank and empty lines, nulls."""

from __future__ import annotations

import doctest
import re

import mmh3
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup_spark.kernels import boilerplate
from neardup_spark.kernels.boilerplate import (
    UNIT_HASH_SEED,
    first_in_document,
    in_document_lists,
    in_sorted,
    remove_units,
    split_units,
    unit_features,
    unit_keys,
)
from neardup_spark.kernels.compiled_words import string_hashes, word_counts
from neardup_spark.kernels.normalize import (
    DEFAULT_OPTIONS,
    NormalizeOptions,
    normalize_text,
    normalize_texts,
)

TEXTS = [
    "Home | News | Sport\nBody line one, with words.\n\nBody line two!\nCopyright 2024 Site\n",
    "",
    None,
    "\n\n\n",
    "no newline at all",
    "Windows\r\nline endings\r\n\r\nhere",
    "首页 新闻 体育\n这是一篇关于天气的文章，内容很长。\n版权所有 新华网",
    "  \n\t\nPara after blanks\nsecond line\n \n\nNext para\n",
    "--- *** ---\n...\nSame words\nsame WORDS!\n",
    "Zwölf Boxkämpfer jagen Straße\nﬁne ligature\n",
]


def reference_lines(text: str) -> list[str]:
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def is_blank(line: str) -> bool:
    return all(c in " \t\r\x0b\x0c\n" for c in line)


def reference_paragraphs(text: str) -> list[str]:
    units: list[str] = []
    previous_blank = False
    for i, line in enumerate(reference_lines(text)):
        blank = is_blank(line)
        if i == 0 or (previous_blank and not blank):
            units.append(line)
        else:
            units[-1] += line
        previous_blank = blank
    return units


def reference_tokens(unit: str, options: NormalizeOptions = DEFAULT_OPTIONS) -> int:
    normalized = normalize_text(unit, options) or ""
    visible = [c for c in normalized if not c.isspace()]
    cjk = sum(
        1
        for c in visible
        if re.match(r"[\u3040-\u30ff\u3400-\u9fff\u0e00-\u0eff\u1780-\u17ff\u1000-\u109f]", c)
    )
    if visible and 2 * cjk >= len(visible):
        return len(visible)
    return len(normalized.split())


def test_doctests():
    assert doctest.testmod(boilerplate).failed == 0


@pytest.mark.parametrize("unit", ["line", "paragraph"])
def test_units_match_brute_force(unit):
    units = split_units(pa.array(TEXTS), unit)
    split = reference_lines if unit == "line" else reference_paragraphs
    expected = [split(t) if t else [] for t in TEXTS]
    got = units.texts().to_pylist()
    offsets = units.doc_offsets.tolist()
    assert [got[offsets[d] : offsets[d + 1]] for d in range(len(TEXTS))] == expected
    # The units cover each text exactly.
    assert ["".join(u) for u in expected] == [t or "" for t in TEXTS]
    assert units.valid.tolist() == [t is not None for t in TEXTS]


def test_units_of_sliced_and_large_arrays():
    sliced = pa.array(TEXTS).slice(5, 3)
    got = split_units(sliced).texts().to_pylist()
    assert got == [u for t in TEXTS[5:8] for u in (reference_lines(t) if t else [])]
    large = pa.array(TEXTS, pa.large_string())
    assert (
        split_units(large).texts().to_pylist() == split_units(pa.array(TEXTS)).texts().to_pylist()
    )


def test_null_slot_holding_bytes_owns_no_unit():
    # Arrow allows a null slot to span bytes; such a slot must not become a unit.
    data = b"keep\nhiddenlast"
    offsets = np.array([0, 5, 11, 15], dtype=np.int32)
    validity = np.packbits(np.array([1, 0, 1], dtype=bool), bitorder="little")
    texts = pa.Array.from_buffers(
        pa.string(), 3, [pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)], 1
    )
    units = split_units(texts)
    assert units.texts().to_pylist() == ["keep\n", "last"]
    assert units.doc_offsets.tolist() == [0, 1, 1, 2]


@pytest.mark.parametrize("unit", ["line", "paragraph"])
def test_hashes_and_tokens_match_brute_force(unit):
    features = unit_features(pa.array(TEXTS), unit)
    raw = features.units.texts().to_pylist()
    assert features.tokens.tolist() == [reference_tokens(u) for u in raw]
    for u, text in enumerate(raw):
        expected = mmh3.hash64(normalize_text(text), UNIT_HASH_SEED, signed=False)[0]
        assert int(features.hashes[u]) == expected


def test_normalised_variants_share_a_hash_and_cjk_counts_characters():
    features = unit_features(pa.array(["Same words\nsame WORDS!\n首页 新闻\n\n"]))
    assert features.hashes[0] == features.hashes[1]
    assert features.tokens.tolist() == [2, 2, 4, 0]


def test_options_without_whitespace_collapse_count_words_alike():
    options = NormalizeOptions(collapse_whitespace=False)
    features = unit_features(pa.array(TEXTS), "line", options)
    raw = features.units.texts().to_pylist()
    assert features.tokens.tolist() == [reference_tokens(u, options) for u in raw]


def reference_remove(texts, unit, remove):
    split = reference_lines if unit == "line" else reference_paragraphs
    out, removed, emptied, at = [], [], [], 0
    for text in texts:
        units = split(text) if text else []
        flags = remove[at : at + len(units)]
        at += len(units)
        kept = [u for u, r in zip(units, flags, strict=True) if not r]
        gone = sum(flags)
        has_words = any(reference_tokens(u) > 0 for u in kept)
        empty = gone > 0 and not has_words
        out.append(None if text is None else ("" if empty else "".join(kept)))
        removed.append(gone)
        emptied.append(empty)
    return out, removed, emptied


@pytest.mark.parametrize("unit", ["line", "paragraph"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_removal_matches_brute_force(unit, seed):
    features = unit_features(pa.array(TEXTS), unit)
    remove = np.random.default_rng(seed).random(features.units.count) < 0.4
    stripped = remove_units(features, remove)
    texts, removed, emptied = reference_remove(TEXTS, unit, remove.tolist())
    assert stripped.texts.to_pylist() == texts
    assert stripped.removed_units.tolist() == removed
    assert stripped.emptied.tolist() == emptied
    lengths = [len(t or "") for t in TEXTS]
    assert (np.array(lengths) - stripped.removed_chars).tolist() == [len(t or "") for t in texts]


def test_all_boilerplate_document_becomes_empty_and_blank_input_is_kept():
    features = unit_features(pa.array(["Nav\n\nFooter line\n", "\n\n", ""]))
    stripped = remove_units(features, np.array([True, False, True, False, False]))
    assert stripped.texts.to_pylist() == ["", "\n\n", ""]
    assert stripped.emptied.tolist() == [True, False, False]
    assert stripped.removed_chars.tolist() == [17, 0, 0]


def test_first_in_document_and_lists_match_brute_force():
    rng = np.random.default_rng(5)
    docs = np.sort(rng.integers(0, 30, 400))
    keys = rng.integers(0, 12, 400).astype(np.uint64)
    candidates = rng.random(400) < 0.8
    texts = pa.array(["x\n" * int(np.sum(docs == d)) for d in range(30)])
    units = split_units(texts)
    assert units.doc_of_unit().tolist() == docs.tolist()
    first = first_in_document(units, keys, candidates)
    seen: set[tuple[int, int]] = set()
    for u in range(400):
        expected = bool(candidates[u]) and (int(docs[u]), int(keys[u])) not in seen
        if candidates[u]:
            seen.add((int(docs[u]), int(keys[u])))
        assert first[u] == expected

    lists = [sorted(set(rng.integers(0, 12, rng.integers(0, 5)).tolist())) for _ in range(30)]
    list_offsets = np.concatenate(([0], np.cumsum([len(x) for x in lists])))
    values = np.array([k for x in lists for k in x], dtype=np.uint64)
    got = in_document_lists(units, keys, candidates, list_offsets, values)
    expected = [bool(candidates[u]) and int(keys[u]) in lists[docs[u]] for u in range(400)]
    assert got.tolist() == expected


def test_in_sorted_and_group_keys():
    keys = np.array([1, 5, 9, 2**64 - 1], dtype=np.uint64)
    assert in_sorted(keys, np.array([5, 2**64 - 1], dtype=np.uint64)).tolist() == [
        False,
        True,
        False,
        True,
    ]
    assert not in_sorted(keys, np.zeros(0, dtype=np.uint64)).any()
    docs = np.array([0, 1, 2])
    same = np.array([7, 7, 7], dtype=np.uint64)
    salted = unit_keys(same, docs, np.array([3, 4, 3], dtype=np.uint64))
    assert salted[0] == salted[2] != salted[1]
    assert unit_keys(same, docs, None) is same


page_lines = st.lists(
    st.one_of(
        st.sampled_from(["Home | News", "Footer © 2024", "", "  ", "首页 新闻", "---", "\r"]),
        st.text(alphabet="ab cdé日,\t", max_size=12),
    ),
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(
    pages=st.lists(st.one_of(st.none(), page_lines.map("\n".join)), min_size=1, max_size=6),
    unit=st.sampled_from(["line", "paragraph"]),
    seed=st.integers(0, 2**16),
)
def test_removal_never_adds_text_and_keeps_every_row(pages, unit, seed):
    features = unit_features(pa.array(pages, pa.string()), unit)
    remove = np.random.default_rng(seed).random(features.units.count) < 0.5
    stripped = remove_units(features, remove)
    out = stripped.texts.to_pylist()
    assert len(out) == len(pages)
    for before, after, chars in zip(pages, out, stripped.removed_chars.tolist(), strict=True):
        if before is None:
            assert after is None
            continue
        assert len(after) == len(before) - chars <= len(before)
    # Brute force: each text is the join of its kept units (each with its separator), or ""
    # when the removal left no unit holding a word; and the units marked are gone.
    units = features.units
    unit_texts = units.texts().to_pylist()
    starts = units.doc_offsets.tolist()
    for d, after in enumerate(out):
        if pages[d] is None:
            continue
        mine = range(starts[d], starts[d + 1])
        kept = [i for i in mine if not remove[i]]
        expected = "".join(unit_texts[i] for i in kept)
        if any(remove[i] for i in mine) and not any(features.tokens[i] > 0 for i in kept):
            expected = ""  # emptied by the removal (a page without words that loses nothing stays)
        assert after == expected
        assert stripped.removed_units[d] == sum(bool(remove[i]) for i in mine)


@pytest.mark.parametrize("casefold", [True, False])
def test_compiled_ascii_path_equals_the_normaliser(casefold):
    """The one-pass ASCII path gives the hashes and word counts of normalising each unit."""
    options = NormalizeOptions(casefold=casefold)
    rng = np.random.default_rng(3)
    alphabet = list("abcXYZ019 ,.;!?-\t'\"é日")
    pages = ["".join(rng.choice(alphabet + ["\n"] * 3, size=200)) for _ in range(50)]
    features = unit_features(pa.array(pages + TEXTS), "line", options)
    normalized = normalize_texts(features.units.texts(), options)
    assert features.hashes.tolist() == string_hashes(normalized, UNIT_HASH_SEED).tolist()
    words = word_counts(normalized)
    ascii_units = [t.isascii() for t in features.units.texts().to_pylist()]
    assert features.tokens[ascii_units].tolist() == words[ascii_units].tolist()
