"""The original documents of a generated corpus: sentences, paragraphs and their tokens.

Sentences have :data:`SENTENCE_MIN`-:data:`SENTENCE_MAX` words, a capital first word, now and
then a comma, and end in ``.``, ``!`` or ``?``; paragraphs of :data:`PARAGRAPH_MIN`-
:data:`PARAGRAPH_MAX` sentences are separated by a blank line. :func:`structure` lays out whole
sentences until each document reaches its target length; :func:`original_tokens` draws the
words and formats of a range of documents (tokens as in
:mod:`~neardup_spark.quality.language`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neardup_spark.quality.language import (
    BANG,
    CAPITAL,
    CASE_SHIFT,
    COMMA,
    END,
    PARAGRAPH,
    PERIOD,
    PUNCT_MASK,
    QUESTION,
    SEP_MASK,
    Language,
)

SENTENCE_MIN, SENTENCE_MAX = 6, 25
PARAGRAPH_MIN, PARAGRAPH_MAX = 3, 8
COMMA_RATE = 0.06


def local_cumsum(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Cumulative sums restarting at each group (``counts`` consecutive values per group)."""
    total = np.cumsum(values)
    starts = np.cumsum(counts) - counts
    base = np.concatenate(([0], total))[starts]
    return total - np.repeat(base, counts)


@dataclass(frozen=True)
class Structure:
    """Sentences and paragraphs of the original documents."""

    sentence_offsets: np.ndarray  # int64, n_docs + 1: doc d owns sentences [o[d], o[d+1])
    sentence_lengths: np.ndarray  # int64, words per sentence
    paragraph_end: np.ndarray  # bool per sentence: the last sentence of a paragraph
    n_words: np.ndarray  # int64 per doc
    n_paragraphs: np.ndarray  # int64 per doc


def structure(rng: np.random.Generator, targets: np.ndarray) -> Structure:
    """Whole sentences until each document reaches its target word count; targets below
    ``SENTENCE_MIN`` give one sentence of exactly that many words (none for 0).

    Draws every document's sentences (:func:`sentence_layout`), then every document's
    paragraphs (:func:`paragraph_layout`). Each half draws document after document, so calling
    it on consecutive ranges of documents draws what one call on all of them draws (a streamed
    corpus replays a range from the generator's state at its start)."""
    sentence_lengths, per_doc = sentence_layout(rng, targets)
    paragraph_end, n_paragraphs = paragraph_layout(rng, per_doc)
    return layout_structure(sentence_lengths, per_doc, paragraph_end, n_paragraphs)


def layout_structure(
    sentence_lengths: np.ndarray,
    per_doc: np.ndarray,
    paragraph_end: np.ndarray,
    n_paragraphs: np.ndarray,
) -> Structure:
    """The :class:`Structure` of documents from their two layouts."""
    n_docs = per_doc.size
    sentence_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(per_doc, out=sentence_offsets[1:])
    sentence_doc = np.repeat(np.arange(n_docs), per_doc)
    n_words = np.bincount(sentence_doc, weights=sentence_lengths, minlength=n_docs)
    return Structure(
        sentence_offsets=sentence_offsets,
        sentence_lengths=sentence_lengths.astype(np.int64),
        paragraph_end=paragraph_end,
        n_words=n_words.astype(np.int64),
        n_paragraphs=n_paragraphs.astype(np.int64),
    )


def sentence_layout(rng: np.random.Generator, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sentence lengths, sentences per document)``: whole sentences until each target."""
    n_docs = targets.size
    short = targets < SENTENCE_MIN
    slots = np.where(short, np.minimum(targets, 1), -(-targets // SENTENCE_MIN))
    span = SENTENCE_MAX - SENTENCE_MIN
    lengths = SENTENCE_MIN + rng.binomial(span, 0.35, size=int(slots.sum()))
    slot_start = np.cumsum(slots) - slots
    has_short = short & (slots > 0)
    lengths[slot_start[has_short]] = targets[has_short]
    before = local_cumsum(lengths, slots) - lengths
    keep = before < np.repeat(targets, slots)
    sentence_doc = np.repeat(np.arange(n_docs), slots)[keep]
    return lengths[keep], np.bincount(sentence_doc, minlength=n_docs)


def paragraph_layout(
    rng: np.random.Generator, per_doc: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(paragraph_end per sentence, paragraphs per document)`` for documents of ``per_doc``
    sentences: paragraph lengths drawn per document, cut where its sentences run out."""
    n_docs = per_doc.size
    sentence_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(per_doc, out=sentence_offsets[1:])
    p_slots = -(-per_doc // PARAGRAPH_MIN)
    p_lengths = rng.integers(PARAGRAPH_MIN, PARAGRAPH_MAX + 1, size=int(p_slots.sum()))
    p_ends = local_cumsum(p_lengths, p_slots)  # sentences up to each break, within its doc
    p_doc = np.repeat(np.arange(n_docs), p_slots)
    inner = p_ends < per_doc[p_doc]  # a break before the document's last sentence
    paragraph_end = np.zeros(int(sentence_offsets[-1]), dtype=bool)
    paragraph_end[sentence_offsets[p_doc[inner]] + p_ends[inner] - 1] = True
    # A last paragraph of one or two sentences joins the one before it.
    n_breaks = np.bincount(p_doc[inner], minlength=n_docs)
    p_start = np.cumsum(p_slots) - p_slots
    with_break = np.flatnonzero(n_breaks > 0)
    last_break = p_ends[p_start[with_break] + n_breaks[with_break] - 1]
    merge = per_doc[with_break] - last_break < PARAGRAPH_MIN
    paragraph_end[sentence_offsets[with_break[merge]] + last_break[merge] - 1] = False
    n_breaks[with_break[merge]] -= 1
    return paragraph_end, np.where(per_doc > 0, n_breaks + 1, 0)


def original_tokens(
    rng: np.random.Generator, lang: Language, st: Structure, lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tokens of originals ``lo:hi``: ``(words, fmt, offsets)``."""
    s_lo, s_hi = int(st.sentence_offsets[lo]), int(st.sentence_offsets[hi])
    lengths = st.sentence_lengths[s_lo:s_hi]
    offsets = np.zeros(hi - lo + 1, dtype=np.int64)
    np.cumsum(st.n_words[lo:hi], out=offsets[1:])
    n = int(offsets[-1])
    words = lang.sample(rng, n)
    fmt = np.where(rng.random(n) < COMMA_RATE, np.uint8(COMMA << 2), np.uint8(0))
    starts = np.cumsum(lengths) - lengths
    ends = starts + lengths - 1
    fmt[starts] |= np.uint8(CAPITAL << CASE_SHIFT)
    u = rng.random(ends.size)
    mark = np.where(u < 0.86, PERIOD, np.where(u < 0.93, QUESTION, BANG)).astype(np.uint8)
    fmt[ends] = (fmt[ends] & ~PUNCT_MASK) | (mark << 2)
    fmt[ends[st.paragraph_end[s_lo:s_hi]]] |= np.uint8(PARAGRAPH)
    doc_last = offsets[1:][offsets[1:] > offsets[:-1]] - 1
    fmt[doc_last] = (fmt[doc_last] & ~SEP_MASK) | np.uint8(END)
    return words, fmt, offsets
