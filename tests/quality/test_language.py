"""The synthetic language: vocabulary, the Zipf sampler, and rendering tokens to text."""

from __future__ import annotations

import numpy as np

from neardup_spark.quality.language import (
    BOILERPLATE_FOOTERS,
    BOILERPLATE_HEADERS,
    CAPITAL,
    CASE_SHIFT,
    COMMA,
    END,
    PARAGRAPH,
    PERIOD,
    QUESTION,
    SPACE,
    UPPER,
    VOCAB_SIZE,
    ZIPF_EXPONENT,
    language,
    render,
)


def fmt(case: int = 0, punct: int = 0, sep: int = SPACE) -> np.uint8:
    return np.uint8(case << CASE_SHIFT | punct << 2 | sep)


def test_vocabulary_is_distinct_lowercase_pseudo_words_shortest_first():
    lang = language()
    assert len(lang.words) == len(set(lang.words)) == VOCAB_SIZE
    assert all(w.isalpha() and w == w.lower() for w in lang.words)
    top, tail = lang.words[:200], lang.words[-200:]
    assert np.mean([len(w) for w in top]) < np.mean([len(w) for w in tail])
    assert language() is lang  # built once


def test_sampler_follows_the_cdf_exactly():
    lang = language()
    u = np.random.default_rng(3).random(200_000)
    drawn = lang.sample(np.random.default_rng(3), u.size)
    assert drawn.tolist() == np.searchsorted(lang.cdf, u, side="right").tolist()
    assert drawn.min() >= 0 and drawn.max() < VOCAB_SIZE


def test_sampler_is_zipfian():
    counts = np.bincount(language().sample(np.random.default_rng(0), 1_000_000))
    # P(rank 1) / P(rank 10) = 10 ** s under Zipf's law.
    assert abs(counts[0] / counts[9] - 10**ZIPF_EXPONENT) < 1.0


def test_render_cases_punctuation_and_separators():
    lang = language()
    w = lang.words
    words = np.array([0, 1, 2, 3, 4, 5, 6], dtype=np.int32)
    formats = np.array(
        [
            fmt(CAPITAL),
            fmt(punct=COMMA),
            fmt(punct=PERIOD, sep=PARAGRAPH),
            fmt(UPPER, punct=QUESTION, sep=END),
            fmt(CAPITAL),
            fmt(),
            fmt(punct=PERIOD, sep=END),
        ],
        dtype=np.uint8,
    )
    offsets = np.array([0, 4, 4, 7], dtype=np.int64)  # the second document is empty
    texts = render(lang, words, formats, offsets).to_pylist()
    assert texts == [
        f"{w[0].capitalize()} {w[1]}, {w[2]}.\n\n{w[3].upper()}?",
        "",
        f"{w[4].capitalize()} {w[5]} {w[6]}.",
    ]


def test_boilerplate_blocks_render_whole_in_any_case():
    lang = language()
    words = np.array([lang.header_base + 1, lang.footer_base + 3], dtype=np.int32)
    formats = np.array([fmt(UPPER, sep=PARAGRAPH), fmt(sep=END)], dtype=np.uint8)
    text = render(lang, words, formats, np.array([0, 2])).to_pylist()[0]
    assert text == BOILERPLATE_HEADERS[1] + "\n\n" + BOILERPLATE_FOOTERS[3]
