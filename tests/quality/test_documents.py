"""Original documents: whole sentences up to each target, paragraphs, and their tokens."""

from __future__ import annotations

import re

import numpy as np
import pytest

from neardup_spark.quality.documents import (
    PARAGRAPH_MAX,
    PARAGRAPH_MIN,
    SENTENCE_MAX,
    SENTENCE_MIN,
    local_cumsum,
    original_tokens,
    structure,
)
from neardup_spark.quality.language import language, render

TARGETS = np.array([0, 1, 4, 5, 6, 7, 30, 200, 1000, 3], dtype=np.int64)


@pytest.fixture(scope="module")
def st():
    return structure(np.random.default_rng(2), TARGETS)


def test_local_cumsum_restarts_in_each_group():
    values = np.array([1, 2, 3, 4, 5, 6])
    counts = np.array([2, 0, 3, 1])
    assert local_cumsum(values, counts).tolist() == [1, 3, 3, 7, 12, 6]


def test_whole_sentences_until_the_target(st):
    for d, target in enumerate(TARGETS.tolist()):
        lengths = st.sentence_lengths[st.sentence_offsets[d] : st.sentence_offsets[d + 1]]
        assert st.n_words[d] == lengths.sum()
        if target < SENTENCE_MIN:  # one sentence of exactly that many words, none for 0
            assert lengths.tolist() == ([target] if target else [])
            continue
        assert all(SENTENCE_MIN <= n <= SENTENCE_MAX for n in lengths.tolist())
        assert lengths.sum() >= target > lengths[:-1].sum()  # the last sentence crosses it


def test_paragraphs_have_three_to_eight_sentences_but_the_merged_last(st):
    for d in range(TARGETS.size):
        ends = st.paragraph_end[st.sentence_offsets[d] : st.sentence_offsets[d + 1]]
        n_sentences = ends.size
        assert not (n_sentences and ends[-1])  # the last sentence ends the document instead
        sizes = np.diff(np.concatenate(([0], np.flatnonzero(ends) + 1, [n_sentences])))
        sizes = sizes[sizes > 0]
        assert st.n_paragraphs[d] == sizes.size
        if sizes.size > 1:
            assert all(PARAGRAPH_MIN <= s <= PARAGRAPH_MAX for s in sizes[:-1].tolist())
            assert PARAGRAPH_MIN <= sizes[-1] <= PARAGRAPH_MAX + PARAGRAPH_MIN - 1


def test_original_tokens_render_as_sentences_and_paragraphs(st):
    lang = language()
    lo, hi = 6, 10
    words, formats, offsets = original_tokens(np.random.default_rng(5), lang, st, lo, hi)
    assert offsets.tolist() == np.concatenate(([0], np.cumsum(st.n_words[lo:hi]))).tolist()
    texts = render(lang, words, formats, offsets).to_pylist()
    for d, text in zip(range(lo, hi), texts, strict=True):
        assert len(text.split()) == st.n_words[d]
        assert text.count("\n\n") == st.n_paragraphs[d] - 1
        sentences = re.split(r"(?<=[.!?])\s+", text)
        assert len(sentences) == st.sentence_offsets[d + 1] - st.sentence_offsets[d]
        assert all(s[0].isupper() and s[-1] in ".!?" for s in sentences)
