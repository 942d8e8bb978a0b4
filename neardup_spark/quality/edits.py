"""The planted edit kinds: how a copy is made from its source's tokens.

Each edit takes ``(rng, language, words, formats)`` of one source document (tokens as in
:mod:`~neardup_spark.quality.language`) and returns the copy's tokens; :data:`EDITS` maps each
of :data:`KINDS` to its edit, in that order.

``exact``
    identical text.
``case_punct``
    casing and punctuation changed, words untouched: the same text after normalisation.
``substitute_1``, ``substitute_3``, ``substitute_10``
    1 %, 3 %, 10 % of the words replaced by other vocabulary words (at least one).
``insert_delete``
    about 2 % of the words deleted and as many new words inserted, at random positions inside
    sentences.
``boilerplate``
    a header block before and a footer block after the text, each 20-40 words from a small
    fixed set shared by the whole corpus (navigation, cookie notices, copyright lines).
``truncate``
    the last 5-15 % of the words dropped (the copy ends in ``...``).
``reorder``
    the paragraphs shuffled (the source must have at least :data:`REORDER_MIN_PARAGRAPHS`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from neardup_spark.quality.documents import local_cumsum
from neardup_spark.quality.language import (
    BANG,
    BOILERPLATE_FOOTERS,
    BOILERPLATE_HEADERS,
    CAPITAL,
    CASE_SHIFT,
    COLON,
    COMMA,
    ELLIPSIS,
    END,
    LOWER,
    NO_PUNCT,
    PARAGRAPH,
    PERIOD,
    QUESTION,
    SEMICOLON,
    SEP_MASK,
    SPACE,
    UPPER,
    VOCAB_SIZE,
    Language,
)

KINDS = (
    "exact",
    "case_punct",
    "substitute_1",
    "substitute_3",
    "substitute_10",
    "insert_delete",
    "boilerplate",
    "truncate",
    "reorder",
)
REORDER_MIN_PARAGRAPHS = 3
INSERT_DELETE_RATE = 0.02
TRUNCATE_RANGE = (0.05, 0.15)
SUBSTITUTE_RATES = {"substitute_1": 0.01, "substitute_3": 0.03, "substitute_10": 0.10}

Tokens = tuple[np.ndarray, np.ndarray]  # words (int32 vocabulary index) and format bytes
Edit = Callable[[np.random.Generator, Language, np.ndarray, np.ndarray], Tokens]


def _with_sep(fmt: np.ndarray, sep: int) -> np.ndarray:
    """The format bytes with their separator replaced by ``sep``."""
    return (fmt & ~SEP_MASK) | np.uint8(sep)


def _exact(rng: np.random.Generator, lang: Language, w: np.ndarray, f: np.ndarray) -> Tokens:
    return w, f


def _case_punct(rng: np.random.Generator, lang: Language, w: np.ndarray, f: np.ndarray) -> Tokens:
    n = f.size
    case = f >> CASE_SHIFT
    punct = (f >> 2) & np.uint8(7)
    sep = f & SEP_MASK
    style = int(rng.integers(3))
    if style == 0:  # all lower case
        case = np.zeros_like(case)
    elif style == 1:  # some words shouted
        case = np.where(rng.random(n) < 0.08, np.uint8(UPPER), case)
    else:  # some words capitalised
        case = np.where(rng.random(n) < 0.3, np.uint8(CAPITAL), case)
    marks = np.array([PERIOD, BANG, QUESTION, SEMICOLON, ELLIPSIS], dtype=np.uint8)
    swap = np.isin(punct, marks[:3]) & (rng.random(n) < 0.3)
    punct = np.where(swap, marks[rng.integers(0, marks.size, n)], punct)
    punct = np.where((punct == COMMA) & (rng.random(n) < 0.5), np.uint8(NO_PUNCT), punct)
    add = (punct == NO_PUNCT) & (sep == SPACE) & (rng.random(n) < 0.03)
    punct = np.where(add, np.where(rng.random(n) < 0.8, COMMA, COLON).astype(np.uint8), punct)
    out = ((case << CASE_SHIFT) | (punct << 2) | sep).astype(np.uint8)
    if np.array_equal(out, f):  # always change something
        out[0] = (out[0] & np.uint8(31)) | np.uint8((UPPER if case[0] != UPPER else LOWER) << 5)
    return w, out


def _different_words(rng: np.random.Generator, lang: Language, old: np.ndarray) -> np.ndarray:
    new = lang.sample(rng, old.size)
    same = new == old
    shift = rng.integers(1, VOCAB_SIZE, size=int(same.sum()))
    new[same] = (old[same] + shift) % VOCAB_SIZE
    return new


def _substitute(rate: float) -> Edit:
    def edit(rng: np.random.Generator, lang: Language, w: np.ndarray, f: np.ndarray) -> Tokens:
        k = max(1, round(rate * w.size))
        pos = rng.choice(w.size, size=k, replace=False)
        out = w.copy()
        out[pos] = _different_words(rng, lang, w[pos])
        return out, f

    return edit


def _insert_delete(
    rng: np.random.Generator, lang: Language, w: np.ndarray, f: np.ndarray
) -> Tokens:
    """Delete k words and insert k new ones, k about 2 % of the words.

    Both happen at random mid-sentence words (lower case, no punctuation after them), so
    sentences keep their capital and their final mark: a deleted word leaves with its slot, a
    new word goes in right after such a word.
    """
    k = max(1, round(INSERT_DELETE_RATE * w.size))
    plain = np.flatnonzero(f == 0)
    k = min(k, plain.size // 2)
    if k == 0:  # no mid-sentence words to spare: replace the last word instead
        out = w.copy()
        out[-1:] = _different_words(rng, lang, w[-1:])
        return out, f
    chosen = plain[rng.choice(plain.size, size=2 * k, replace=False)]
    keep = np.ones(w.size, dtype=bool)
    keep[chosen[:k]] = False
    where = np.sort(chosen[k:]) + 1
    keep = np.insert(keep, where, True)
    words = np.insert(w, where, lang.sample(rng, k))[keep]
    return words, np.insert(f, where, np.uint8(0))[keep]


def _boilerplate(rng: np.random.Generator, lang: Language, w: np.ndarray, f: np.ndarray) -> Tokens:
    header = lang.header_base + int(rng.integers(len(BOILERPLATE_HEADERS)))
    footer = lang.footer_base + int(rng.integers(len(BOILERPLATE_FOOTERS)))
    body = f.copy()
    body[-1] = _with_sep(body[-1:], PARAGRAPH)[0]
    words = np.concatenate(([header], w, [footer])).astype(np.int32)
    fmt = np.concatenate(([np.uint8(PARAGRAPH)], body, [np.uint8(END)])).astype(np.uint8)
    return words, fmt


def _truncate(rng: np.random.Generator, lang: Language, w: np.ndarray, f: np.ndarray) -> Tokens:
    drop = max(1, round(rng.uniform(*TRUNCATE_RANGE) * w.size))
    keep = w.size - drop
    fmt = f[:keep].copy()
    last = fmt[-1]
    fmt[-1] = (last & np.uint8(0b11100000)) | np.uint8(ELLIPSIS << 2 | END)
    return w[:keep], fmt


def _reorder(rng: np.random.Generator, lang: Language, w: np.ndarray, f: np.ndarray) -> Tokens:
    ends = np.flatnonzero((f & SEP_MASK) != SPACE)  # last token of each paragraph
    starts = np.concatenate(([0], ends[:-1] + 1))
    order = rng.permutation(ends.size)
    if np.array_equal(order, np.arange(ends.size)):
        order = np.roll(order, 1)
    lengths = ends - starts + 1
    new_lengths = lengths[order]
    idx = (
        np.repeat(starts[order], new_lengths)
        + local_cumsum(np.ones(int(new_lengths.sum()), dtype=np.int64), new_lengths)
        - 1
    )
    fmt = _with_sep(f[idx], SPACE)
    new_ends = np.cumsum(new_lengths) - 1
    fmt[new_ends] |= np.uint8(PARAGRAPH)
    fmt[-1] = _with_sep(fmt[-1:], END)[0]
    return w[idx], fmt


EDITS: dict[str, Edit] = {
    "exact": _exact,
    "case_punct": _case_punct,
    **{kind: _substitute(rate) for kind, rate in SUBSTITUTE_RATES.items()},
    "insert_delete": _insert_delete,
    "boilerplate": _boilerplate,
    "truncate": _truncate,
    "reorder": _reorder,
}
