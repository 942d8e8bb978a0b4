"""Contamination kernels: words and their offsets, n-gram hashes, spans to the character."""

from __future__ import annotations

import random

import mmh3
import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.batch.decontaminate import (
    WORD_SEED,
    build_reference,
    clean_fn,
    gram_docs_fn,
    matches_fn,
)
from neardup_spark.kernels.contamination import (
    cut_ranges,
    find_hits,
    gram_hashes,
    item_matches,
    reference_grams,
)
from neardup_spark.kernels.contamination_words import cut_texts, text_words
from tests.decontaminate.oracle import oracle_spans, oracle_words

ITEM = (
    "Write a function that returns the sum of the squares of all odd numbers in a list, "
    "ignoring negative numbers and values that are not integers."
)


def spans_of(doc: str, items: list[str], n: int = 13) -> list[tuple[int, int, list[tuple]]]:
    """``(item, ngrams, spans)`` found in ``doc``."""
    ref = reference_grams(text_words(pa.array(items)), n)
    words = text_words(pa.array([doc]))
    m = item_matches(words, ref, find_hits(words, ref))
    out = []
    for i in range(len(m.item)):
        a, b = m.span_offsets[i], m.span_offsets[i + 1]
        spans = list(zip(m.starts[a:b].tolist(), m.ends[a:b].tolist(), strict=True))
        out.append((int(m.item[i]), int(m.ngrams[i]), spans))
    return out


def test_words_offsets_case_and_punctuation():
    text = '  "Hello," she  said;\n\tWORLD!! -- (Straße) … ok'
    w = text_words(pa.array([text]))
    got = [text[s:e] for s, e in zip(w.starts.tolist(), w.ends.tolist(), strict=True)]
    assert got == ["Hello", "she", "said", "WORLD", "Straße", "ok"]
    expected = [
        mmh3.hash64(x, WORD_SEED, signed=False)[0]
        for x in ("hello", "she", "said", "world", "strasse", "ok")
    ]
    assert w.hashes.tolist() == expected
    assert w.doc_chars.tolist() == [len(text)]


def test_words_match_the_oracle_on_random_texts():
    rng = random.Random(3)
    alphabet = [*"abcXYZ é,.!?;:'\"()-\n\t", "ß", "Ω", "…", "😀", "  "]
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        w = text_words(pa.array([text]))
        spans = list(zip(w.starts.tolist(), w.ends.tolist(), strict=True))
        assert spans == [(s, e) for _, s, e in oracle_words(text)], text
        folded = [mmh3.hash64(x, WORD_SEED, signed=False)[0] for x, _, _ in oracle_words(text)]
        assert w.hashes.tolist() == folded, text


def test_gram_hashes_ignore_wrapping_and_case():
    a = text_words(pa.array(["one two three four"]))
    b = text_words(pa.array(["ONE\n  two,\nThree (four)"]))
    for k in (1, 2, 4):
        assert gram_hashes(a, k)[1].tolist() == gram_hashes(b, k)[1].tolist()
    assert len(gram_hashes(a, 5)[1]) == 0
    # a k-gram's hash differs from the same words' hashes at another length
    assert set(gram_hashes(a, 2)[1].tolist()).isdisjoint(gram_hashes(a, 1)[1].tolist())


@pytest.mark.parametrize(
    "doc",
    [
        f"Intro. {ITEM} Outro.",
        f"Intro.\n{ITEM.upper()}\n\nOutro.",
        "Intro: " + ITEM.replace(" ", "\n   ", 7).replace("numbers", "NUMBERS") + " and more",
        "x " + ITEM.replace(",", " ;").replace("odd", "(odd)") + ' "quoted"',
    ],
    ids=["verbatim", "re-cased", "re-wrapped", "punctuation"],
)
def test_spans_exact_to_the_character(doc):
    found = spans_of(doc, [ITEM])
    assert [(item, ngrams) for item, ngrams, _ in found] == [(0, 14)]
    ((start, end),) = found[0][2]
    found_text = " ".join(doc[start:end].split()).casefold()
    assert found_text.startswith("write a function") and found_text.endswith("not integers")
    assert found[0][1:] == oracle_spans(doc, ITEM, 13)


def test_a_few_words_changed_leave_the_surviving_ngrams():
    words = ITEM.split()
    words[20] = "or"  # breaks the n-grams starting at words 8..13 of 0..13
    doc = "Before. " + " ".join(words) + " after."
    ((item, ngrams, spans),) = spans_of(doc, [ITEM])
    assert (item, ngrams) == (0, 8)
    assert [doc[s:e] for s, e in spans] == [
        "Write a function that returns the sum of the squares of all odd numbers in a list, "
        "ignoring negative numbers"
    ]
    words[6] = "total"  # and those starting at 0..6: only words 7..19 are left
    doc = " ".join(words)
    ((item, ngrams, spans),) = spans_of(doc, [ITEM])
    assert ngrams == 1
    assert [doc[s:e] for s, e in spans] == [
        "of the squares of all odd numbers in a list, ignoring negative numbers"
    ]
    assert (ngrams, spans) == oracle_spans(doc, ITEM, 13)


def test_short_items_are_matched_whole():
    items = ["Return the median.", "x"]
    doc = "Please RETURN the\nmedian, now. The x-ray, x."
    found = spans_of(doc, items)
    got = {item: (ngrams, [doc[s:e] for s, e in spans]) for item, ngrams, spans in found}
    assert got == {0: (1, ["RETURN the\nmedian"]), 1: (1, ["x"])}
    assert "x-ray" not in [doc[s:e] for _, _, sp in found for s, e in sp]


def test_empty_item_is_refused():
    with pytest.raises(ValueError, match="reference item 1 has no words"):
        reference_grams(text_words(pa.array(["a b", " ... "])), 13)


def test_overlapping_and_adjacent_hits_merge():
    item = " ".join(f"w{i}" for i in range(30))
    doc = " ".join(f"w{i}" for i in range(15)) + " gap " + " ".join(f"w{i}" for i in range(15))
    found = spans_of(doc, [item], n=5)
    ((_, ngrams, spans),) = found
    assert ngrams == 11 and spans == oracle_spans(doc, item, 5)[1] and len(spans) == 2
    adjacent = " ".join(f"w{i}" for i in range(10))  # w0..w4 and w5..w9: adjacent in words
    assert spans_of(adjacent, [item], n=5)[0][2] == [(0, len(adjacent))]


def test_common_grams_are_dropped_but_count_in_the_share():
    ref = build_reference(pa.array([ITEM]), pa.array(["i"]), pa.array(["b"]), 13)
    batch = pa.record_batch([pa.array([1]), pa.array([ITEM])], names=["id", "text"])
    held = gram_docs_fn(ref, "text")(batch).column("gram").to_numpy()
    assert len(held) == 14
    kept = ref.grams.without(held[:10].view(np.uint64))
    dropped = type(ref)(kept, ref.item_ids, ref.benchmarks)
    row = matches_fn(dropped, "id", "text")(batch).to_pylist()[0]
    assert row["ngrams"] == 4 and row["item_share"] == pytest.approx(4 / 14)
    assert (
        matches_fn(
            type(ref)(ref.grams.without(held.view(np.uint64)), ref.item_ids, ref.benchmarks),
            "id",
            "text",
        )(batch).num_rows
        == 0
    )


def test_cut_spans_with_margin_and_min_chars():
    ref = build_reference(pa.array([ITEM]), pa.array(["i"]), pa.array(["b"]), 13)
    long_doc = "A" * 50 + " " + ITEM + " " + "B" * 50
    batch = pa.record_batch(
        [pa.array([1, 2, 3]), pa.array([long_doc, ITEM, "clean text"])], names=["id", "text"]
    )
    removed = clean_fn(ref, "text", False, 0, 0)(batch)
    assert removed.column("id").to_pylist() == [3]
    cut = clean_fn(ref, "text", True, 10, 30)(batch).to_pylist()
    # the span ends before "." (stripped): the margin covers ". " and 8 Bs
    assert cut == [{"id": 1, "text": "A" * 41 + "\n" + "B" * 42}, {"id": 3, "text": "clean text"}]


def test_cut_ranges_and_texts():
    ref = reference_grams(text_words(pa.array(["a b", "c d"])), 2)
    texts = pa.array(["a b x c d y", "zz a b"])
    words = text_words(texts)
    m = item_matches(words, ref, find_hits(words, ref))
    doc, start, end = cut_ranges(m, words.doc_chars, 1)  # [0, 4) and [5, 10) stay apart
    assert (doc.tolist(), start.tolist(), end.tolist()) == ([0, 0, 1], [0, 5, 2], [4, 10, 6])
    doc, start, end = cut_ranges(m, words.doc_chars, 2)  # [0, 5) and [4, 11) merge
    assert (doc.tolist(), start.tolist(), end.tolist()) == ([0, 1], [0, 1], [11, 6])
    doc, start, end = cut_ranges(m, words.doc_chars, 0)
    assert (doc.tolist(), start.tolist(), end.tolist()) == ([0, 0, 1], [0, 6, 3], [3, 9, 6])
    offsets = np.array([0, 2, 3])
    out, chars = cut_texts(texts, offsets, start, end)
    assert out.to_pylist() == [" x \n y", "zz "] and chars.tolist() == [6, 3]
