"""A synthetic web-crawl-like corpus with planted near-duplicates and their exact Jaccard.

Pure Python, NumPy and PyArrow (no Spark): :func:`generate_corpus` builds the tables in memory,
:func:`write_corpus` writes them as Parquet for the ``neardup generate`` command.

The text
    Pseudo-words built from syllables (30,000 of them, one to four syllables; short words are
    the frequent ones, a few are capitalised names), drawn with Zipf's law (exponent 1.1).
    Sentences have 6-25 words, a capital first word, now and then a comma, and end in ``.``,
    ``!`` or ``?``; paragraphs of 3-8 sentences are separated by a blank line (``"\\n\\n"``).
    Document lengths are log-normal around ``mean_words`` (clipped to ``[20, 8 * mean_words]``,
    then rounded up to whole sentences). As in a real crawl, a few documents have fewer than
    five words and one (in corpora of 1,000 documents or more) is empty.

The planted near-duplicates
    About 30 % of the documents are edited copies of a *source*: an original document drawn at
    random (a source may have several copies; a copy is never the source of another). The
    kinds, equally frequent:

    ``exact``
        identical text.
    ``case_punct``
        casing and punctuation changed, words untouched: the same text after normalisation.
    ``substitute_1``, ``substitute_3``, ``substitute_10``
        1 %, 3 %, 10 % of the words replaced by other vocabulary words (at least one).
    ``insert_delete``
        about 2 % of the words deleted and as many new words inserted, at random positions
        inside sentences.
    ``boilerplate``
        a header block before and a footer block after the text, each 20-40 words from a small
        fixed set shared by the whole corpus (navigation, cookie notices, copyright lines).
    ``truncate``
        the last 5-15 % of the words dropped (the copy ends in ``...``).
    ``reorder``
        the paragraphs shuffled (the source has at least three).

    Originals with fewer than five words are never sources.

Ids and rows
    ``doc-0000000``, ``doc-0000001``, ... zero-padded (at least 7 digits), so string order is
    numeric order. Rows are shuffled before they are numbered, so ids and row order say nothing
    about which document is a copy of which, and copies are not next to their sources.

The truth table
    One row per (source, copy) pair: ``doc_a`` and ``doc_b`` (the smaller and the larger id),
    ``kind``, and ``jaccard``, the exact Jaccard resemblance of the two documents' word
    5-shingle sets under the default normalisation, measured with the project's own kernels
    (:func:`~neardup_spark.kernels.normalize.normalize_texts`,
    :func:`~neardup_spark.kernels.shingles.shingle_sets`,
    :func:`~neardup_spark.kernels.jaccard.jaccard`). Every planted pair is listed, however
    similar the edit left it. Copies of one source are near-duplicates of each other too; the
    table lists only pairs with the source.

Same ``(n_docs, seed, mean_words)``, same tables, byte for byte.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neardup_spark.errors import UserError
from neardup_spark.kernels.jaccard import jaccard
from neardup_spark.kernels.normalize import normalize_texts
from neardup_spark.kernels.shingles import shingle_sets

log = logging.getLogger(__name__)

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
COPY_FRACTION = 0.3
VOCAB_SIZE = 30_000
ZIPF_EXPONENT = 1.1
SHINGLE_K = 5  # words per shingle of the truth Jaccard (the job's default ngram)
SHINGLE_SEED = 42  # word-hash seed; it does not change a Jaccard
MIN_ID_DIGITS = 7
ID_PREFIX = "doc-"
BATCH_DOCS = 5000  # originals generated (and measured) per batch
MIN_SOURCE_WORDS = 5
SHORT_DOCS_PER = 500  # one document of 1-4 words per this many documents
EMPTY_DOC_MIN_CORPUS = 1000  # corpora at least this large get one empty document
SENTENCE_MIN, SENTENCE_MAX = 6, 25
PARAGRAPH_MIN, PARAGRAPH_MAX = 3, 8
DOC_MIN_WORDS = 20
DOC_MAX_FACTOR = 8
LENGTH_SIGMA = 0.5  # of log(document length)
COMMA_RATE = 0.06
REORDER_MIN_PARAGRAPHS = 3
INSERT_DELETE_RATE = 0.02
TRUNCATE_RANGE = (0.05, 0.15)
SUBSTITUTE_RATES = {"substitute_1": 0.01, "substitute_3": 0.03, "substitute_10": 0.10}

CORPUS_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string())])
TRUTH_SCHEMA = pa.schema(
    [
        ("doc_a", pa.string()),
        ("doc_b", pa.string()),
        ("kind", pa.string()),
        ("jaccard", pa.float64()),
    ]
)

# --- token formatting ----------------------------------------------------------------------
# A token is a word index and a format byte: case << 5 | punctuation << 2 | separator.
# The rendered token is the word in that case, then the punctuation, then the separator.
CASE_SHIFT = 5
LOWER, CAPITAL, UPPER = 0, 1, 2
PUNCTUATION = ("", ",", ".", "!", "?", ";", ":", "...")
NO_PUNCT, COMMA, PERIOD, BANG, QUESTION, SEMICOLON, COLON, ELLIPSIS = range(8)
SEPARATORS = (" ", "\n\n", "", "")
SPACE, PARAGRAPH, END = 0, 1, 2
_PUNCT_MASK = np.uint8(0b11100)
_SEP_MASK = np.uint8(0b11)

# --- vocabulary ----------------------------------------------------------------------------
_VOCAB_SEED = 20_240_611  # the language is the same for every corpus seed


def _parts(spec: str) -> tuple[str, ...]:
    """Space-separated syllable parts; ``-`` is the empty part."""
    return tuple(part.strip("-") for part in spec.split())


# Repeats weight a part: an empty onset or coda is common, plain vowels more than diphthongs.
_ONSETS = _parts("- - b c d f g h j k l m n p r s t v w y z bl br ch cl cr dr fr gl gr pl pr sh")
_ONSETS += _parts("sk sl sp st th tr wh")
_NUCLEI = _parts("a e i o u a e i o a e ai ea ee ie oa ou oo y")
_CODAS = _parts("- - - - - - n r s l m t d nd nt st ng rk ck x th")
_SYLLABLE_WEIGHTS = (0.2, 0.4, 0.28, 0.12)  # of 1, 2, 3, 4 syllables
_LENGTH_NOISE = 1.5  # letters, on the length that orders words by frequency
_NAME_FRACTION = 0.03  # of words past the most frequent 200, always capitalised
_ZIPF_GUIDE_BITS = 16

BOILERPLATE_HEADERS = (
    "Home | News | Sport | Business | Culture | Travel | Weather. Sign in to your account or "
    "register for free to save articles, follow topics and get our daily newsletter.",
    "Skip to main content. Menu: Home, Products, Solutions, Pricing, Resources, Blog, About "
    "us, Contact. Search this site. Free shipping on all orders over 50 euros this week only!",
    "This website uses cookies to improve your experience. By continuing to browse the site "
    "you agree to our use of cookies. Accept all | Reject all | Manage preferences.",
    "You are here: Home > Community > Forums > General discussion. Welcome, guest! Please log "
    "in or register to post replies, follow threads and receive notifications.",
)
BOILERPLATE_FOOTERS = (
    "Copyright 2024 Example Media Group. All rights reserved. Privacy policy | Terms of use | "
    "Cookie settings | Accessibility | Contact us | Advertise with us | Careers | Sitemap.",
    "Share this article: Facebook, Twitter, LinkedIn, Email, Print. Related posts: ten tips for "
    "a better morning routine; how to save money on groceries; the best hiking trails near you.",
    "Subscribe to our newsletter and never miss an update. Enter your email address below. We "
    "respect your privacy and you can unsubscribe at any time. Powered by WordPress. Back to top.",
    "Leave a comment. Your email address will not be published. Required fields are marked. "
    "Name, Email, Website. Save my name in this browser for the next time I comment. Post it.",
)


@dataclass(frozen=True)
class Language:
    """The vocabulary, its rendering tables and a Zipf sampler over it.

    Word ``w`` (``0 <= w < VOCAB_SIZE``, rank order: 0 is the most frequent) in case ``c`` is
    ``cased[c * n_entries + w]``; entries past the vocabulary are the boilerplate blocks, the
    same in every case.
    """

    words: tuple[str, ...]
    cased: pa.Array  # 3 * n_entries strings
    n_entries: int
    cdf: np.ndarray  # float64, Zipf cumulative probabilities by rank
    guide_lo: np.ndarray  # int32: the rank of every u in bucket b, when guide_pure[b]
    guide_pure: np.ndarray  # bool

    @property
    def header_base(self) -> int:
        return len(self.words)

    @property
    def footer_base(self) -> int:
        return len(self.words) + len(BOILERPLATE_HEADERS)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` Zipf-distributed word indices (int32): a guide table, then binary search for
        the few draws that fall in a bucket spanning several words."""
        u = rng.random(n)
        bucket = (u * (1 << _ZIPF_GUIDE_BITS)).astype(np.int32)
        out = self.guide_lo[bucket]
        mixed = np.flatnonzero(~self.guide_pure[bucket])
        out[mixed] = np.searchsorted(self.cdf, u[mixed], side="right")
        return out


def _pseudo_words(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` distinct pseudo-words in frequency-rank order: shorter ones first, with noise."""
    syllables = [o + v + c for o in _ONSETS for v in _NUCLEI for c in _CODAS]
    words: dict[str, float] = {}
    while len(words) < n:
        m = 2 * n
        lengths = rng.choice(4, size=m, p=_SYLLABLE_WEIGHTS) + 1
        picks = rng.integers(0, len(syllables), size=(m, 4))
        noise = rng.normal(0.0, _LENGTH_NOISE, size=m)
        for length, row, z in zip(lengths.tolist(), picks.tolist(), noise.tolist(), strict=True):
            word = "".join(syllables[s] for s in row[:length])
            if word not in words:
                words[word] = len(word) + z
    ranked = sorted(words, key=words.__getitem__)
    return ranked[:n]


@lru_cache(maxsize=1)
def language() -> Language:
    """The (cached) vocabulary of every generated corpus."""
    rng = np.random.default_rng(_VOCAB_SEED)
    words = _pseudo_words(rng, VOCAB_SIZE)
    names = rng.random(VOCAB_SIZE) < _NAME_FRACTION
    names[:200] = False
    lower = [w.capitalize() if is_name else w for w, is_name in zip(words, names, strict=True)]
    blocks = list(BOILERPLATE_HEADERS + BOILERPLATE_FOOTERS)
    cased = (
        lower
        + blocks
        + [w.capitalize() for w in words]
        + blocks
        + [w.upper() for w in words]
        + blocks
    )
    weights = np.arange(1, VOCAB_SIZE + 1, dtype=np.float64) ** -ZIPF_EXPONENT
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    cdf[-1] = 1.0
    edges = np.arange((1 << _ZIPF_GUIDE_BITS) + 1, dtype=np.float64) / (1 << _ZIPF_GUIDE_BITS)
    lo = np.searchsorted(cdf, edges[:-1], side="right")
    hi = np.searchsorted(cdf, edges[1:], side="left")
    return Language(
        words=tuple(words),
        cased=pa.array(cased, type=pa.string()),
        n_entries=VOCAB_SIZE + len(blocks),
        cdf=cdf,
        guide_lo=lo.astype(np.int32),
        guide_pure=lo == hi,
    )


_ENDINGS = pa.array(
    [PUNCTUATION[p] + SEPARATORS[s] for p in range(len(PUNCTUATION)) for s in range(4)],
    type=pa.string(),
)


def render(lang: Language, words: np.ndarray, fmt: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Texts of documents given as tokens in CSR layout (doc ``d`` owns tokens
    ``offsets[d]:offsets[d+1]``); all in Arrow, no Python string per token."""
    entry = (fmt >> CASE_SHIFT).astype(np.int64) * lang.n_entries + words
    tokens = pc.binary_join_element_wise(
        lang.cased.take(pa.array(entry)), _ENDINGS.take(pa.array(fmt & np.uint8(31))), ""
    )
    lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), tokens)
    return pc.binary_join(lists, "")


# --- document structure --------------------------------------------------------------------


def _local_cumsum(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
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


def _structure(rng: np.random.Generator, targets: np.ndarray) -> Structure:
    """Whole sentences until each document reaches its target word count; targets below
    ``SENTENCE_MIN`` give one sentence of exactly that many words (none for 0)."""
    n_docs = targets.size
    short = targets < SENTENCE_MIN
    slots = np.where(short, np.minimum(targets, 1), -(-targets // SENTENCE_MIN))
    span = SENTENCE_MAX - SENTENCE_MIN
    lengths = SENTENCE_MIN + rng.binomial(span, 0.35, size=int(slots.sum()))
    slot_start = np.cumsum(slots) - slots
    has_short = short & (slots > 0)
    lengths[slot_start[has_short]] = targets[has_short]
    before = _local_cumsum(lengths, slots) - lengths
    keep = before < np.repeat(targets, slots)
    sentence_lengths = lengths[keep]
    sentence_doc = np.repeat(np.arange(n_docs), slots)[keep]
    per_doc = np.bincount(sentence_doc, minlength=n_docs)
    sentence_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(per_doc, out=sentence_offsets[1:])
    n_words = np.bincount(sentence_doc, weights=sentence_lengths, minlength=n_docs)

    # Paragraph lengths drawn per document, cut where its sentences run out.
    p_slots = -(-per_doc // PARAGRAPH_MIN)
    p_lengths = rng.integers(PARAGRAPH_MIN, PARAGRAPH_MAX + 1, size=int(p_slots.sum()))
    p_ends = _local_cumsum(p_lengths, p_slots)  # sentences up to each break, within its doc
    p_doc = np.repeat(np.arange(n_docs), p_slots)
    inner = p_ends < per_doc[p_doc]  # a break before the document's last sentence
    paragraph_end = np.zeros(sentence_lengths.size, dtype=bool)
    paragraph_end[sentence_offsets[p_doc[inner]] + p_ends[inner] - 1] = True
    # A last paragraph of one or two sentences joins the one before it.
    n_breaks = np.bincount(p_doc[inner], minlength=n_docs)
    p_start = np.cumsum(p_slots) - p_slots
    with_break = np.flatnonzero(n_breaks > 0)
    last_break = p_ends[p_start[with_break] + n_breaks[with_break] - 1]
    merge = per_doc[with_break] - last_break < PARAGRAPH_MIN
    paragraph_end[sentence_offsets[with_break[merge]] + last_break[merge] - 1] = False
    n_breaks[with_break[merge]] -= 1
    n_paragraphs = np.where(per_doc > 0, n_breaks + 1, 0)
    return Structure(
        sentence_offsets=sentence_offsets,
        sentence_lengths=sentence_lengths.astype(np.int64),
        paragraph_end=paragraph_end,
        n_words=n_words.astype(np.int64),
        n_paragraphs=n_paragraphs.astype(np.int64),
    )


def _original_tokens(
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
    fmt[ends] = (fmt[ends] & ~_PUNCT_MASK) | (mark << 2)
    fmt[ends[st.paragraph_end[s_lo:s_hi]]] |= np.uint8(PARAGRAPH)
    doc_last = offsets[1:][offsets[1:] > offsets[:-1]] - 1
    fmt[doc_last] = (fmt[doc_last] & ~_SEP_MASK) | np.uint8(END)
    return words, fmt, offsets


# --- edits ---------------------------------------------------------------------------------

Tokens = tuple[np.ndarray, np.ndarray]
Edit = Callable[[np.random.Generator, Language, np.ndarray, np.ndarray], Tokens]


def _with_sep(fmt: np.ndarray, sep: int) -> np.ndarray:
    return (fmt & ~_SEP_MASK) | np.uint8(sep)


def _exact(rng: np.random.Generator, lang: Language, w: np.ndarray, f: np.ndarray) -> Tokens:
    return w, f


def _case_punct(rng: np.random.Generator, lang: Language, w: np.ndarray, f: np.ndarray) -> Tokens:
    n = f.size
    case = f >> CASE_SHIFT
    punct = (f >> 2) & np.uint8(7)
    sep = f & _SEP_MASK
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
    ends = np.flatnonzero((f & _SEP_MASK) != SPACE)  # last token of each paragraph
    starts = np.concatenate(([0], ends[:-1] + 1))
    order = rng.permutation(ends.size)
    if np.array_equal(order, np.arange(ends.size)):
        order = np.roll(order, 1)
    lengths = ends - starts + 1
    new_lengths = lengths[order]
    idx = (
        np.repeat(starts[order], new_lengths)
        + _local_cumsum(np.ones(int(new_lengths.sum()), dtype=np.int64), new_lengths)
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


# --- the corpus ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """Who is what: originals are generation indices ``0:n_originals``, copy ``c`` is
    ``n_originals + c``; ``row_of[g]`` is the row (and id number) of generation index ``g``."""

    targets: np.ndarray  # words wanted per original
    copy_source: np.ndarray  # original index per copy
    copy_kind: np.ndarray  # index into KINDS per copy
    row_of: np.ndarray  # int64 per generation index


def _plan(rng: np.random.Generator, n_docs: int, mean_words: int) -> tuple[Plan, Structure]:
    n_degenerate = n_docs // SHORT_DOCS_PER + (n_docs >= EMPTY_DOC_MIN_CORPUS)
    n_copies = round(COPY_FRACTION * n_docs) if n_docs - n_degenerate >= 2 else 0
    n_originals = n_docs - n_copies
    lo = max(SENTENCE_MIN, min(DOC_MIN_WORDS, mean_words))
    hi = max(lo, DOC_MAX_FACTOR * mean_words)
    mu = np.log(mean_words) - LENGTH_SIGMA**2 / 2
    targets = np.clip(np.rint(rng.lognormal(mu, LENGTH_SIGMA, n_originals)), lo, hi)
    targets = targets.astype(np.int64)
    degenerate = rng.choice(n_originals, size=n_degenerate, replace=False)
    targets[degenerate] = rng.integers(1, MIN_SOURCE_WORDS, size=n_degenerate)
    if n_docs >= EMPTY_DOC_MIN_CORPUS:
        targets[degenerate[0]] = 0
    st = _structure(rng, targets)

    kinds = rng.permutation(np.arange(n_copies) % len(KINDS))
    eligible = np.flatnonzero(st.n_words >= MIN_SOURCE_WORDS)
    reorderable = np.flatnonzero(st.n_paragraphs >= REORDER_MIN_PARAGRAPHS)
    reorder = KINDS.index("reorder")
    if reorderable.size == 0:  # tiny documents: no source can be reordered
        kinds[kinds == reorder] = KINDS.index("exact")
    is_reorder = kinds == reorder
    sources = eligible[rng.integers(0, max(eligible.size, 1), size=n_copies)]
    sources[is_reorder] = reorderable[
        rng.integers(0, max(reorderable.size, 1), size=int(is_reorder.sum()))
    ]
    row_of = rng.permutation(n_docs)
    return Plan(targets, sources.astype(np.int64), kinds, row_of), st


def _take_chunked(chunks: list[pa.Array], starts: np.ndarray, index: np.ndarray) -> pa.Array:
    """``concat(chunks).take(index)`` without concatenating all the chunks."""
    chunk_of = np.searchsorted(starts, index, side="right") - 1
    order = np.argsort(chunk_of, kind="stable")
    parts = []
    for c in np.unique(chunk_of):
        sel = order[chunk_of[order] == c]
        parts.append(chunks[c].take(pa.array(index[sel] - starts[c])))
    gathered = pa.concat_arrays(parts) if parts else pa.array([], type=pa.string())
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size)
    return gathered.take(pa.array(inverse))


def _id_width(n_docs: int) -> int:
    return max(MIN_ID_DIGITS, len(str(max(n_docs - 1, 0))))


def _ids(numbers: np.ndarray, width: int) -> list[str]:
    return [f"{ID_PREFIX}{i:0{width}d}" for i in numbers.tolist()]


def _equal_to_source(copies: pa.Array, sources: pa.Array, copy_src: np.ndarray) -> np.ndarray:
    same = pc.equal(copies, sources.take(pa.array(copy_src, type=pa.int64())))
    return np.asarray(pc.fill_null(same, False).to_numpy(zero_copy_only=False), dtype=bool)


def _measure(source_texts: pa.Array, copy_texts: pa.Array, copy_src: np.ndarray) -> np.ndarray:
    """Exact 5-shingle Jaccard of each copy with its source (``source_texts[copy_src[i]]``).

    Every text is normalised and shingled by the project's kernels, once: a copy whose text,
    raw or normalised, equals its source's uses the source's shingle set (same input, same
    kernel output).
    """
    norm_src = normalize_texts(source_texts)
    slot = copy_src.copy()  # shingle set of each copy: its source's, until shown otherwise
    differ = np.flatnonzero(~_equal_to_source(copy_texts, source_texts, copy_src))
    norm_copy = normalize_texts(copy_texts.take(pa.array(differ, type=pa.int64())))
    own = np.flatnonzero(~_equal_to_source(norm_copy, norm_src, copy_src[differ]))
    slot[differ[own]] = len(norm_src) + np.arange(own.size)
    sets = shingle_sets(
        pa.concat_arrays([norm_src, norm_copy.take(pa.array(own, type=pa.int64()))]),
        SHINGLE_K,
        SHINGLE_SEED,
    )
    return np.array(
        [jaccard(sets.doc(int(s)), sets.doc(int(t))) for s, t in zip(copy_src, slot, strict=True)],
        dtype=np.float64,
    )


def _check_args(n_docs: int, seed: int, mean_words: int) -> None:
    if n_docs < 0:
        raise UserError(f"the number of documents must be >= 0, got {n_docs}")
    if seed < 0:
        raise UserError(f"the seed must be >= 0, got {seed}")
    if mean_words < 1:
        raise UserError(f"the mean document length must be >= 1 word, got {mean_words}")


def generate_corpus(n_docs: int, seed: int = 0, mean_words: int = 500) -> tuple[pa.Table, pa.Table]:
    """Returns ``(corpus, truth)``.

    corpus columns: ``id`` (string), ``text`` (string), one row per document, in id order.
    truth columns: ``doc_a`` (string), ``doc_b`` (string), ``kind`` (string), ``jaccard``
    (float64), one row per planted (source, copy) pair, ``doc_a < doc_b``, sorted.

    >>> corpus, truth = generate_corpus(20, seed=1, mean_words=30)
    >>> corpus.num_rows, truth.num_rows, corpus.column("id")[0].as_py()
    (20, 6, 'doc-0000000')
    """
    _check_args(n_docs, seed, mean_words)
    rng = np.random.default_rng(seed)
    lang = language()
    plan, st = _plan(rng, n_docs, mean_words)
    n_originals = plan.targets.size
    by_source = np.argsort(plan.copy_source, kind="stable")
    sorted_sources = plan.copy_source[by_source]

    chunks: list[pa.Array] = []
    chunk_gen: list[np.ndarray] = []
    jaccards = np.zeros(plan.copy_source.size, dtype=np.float64)
    for lo in range(0, n_originals, BATCH_DOCS):
        hi = min(lo + BATCH_DOCS, n_originals)
        words, fmt, offsets = _original_tokens(rng, lang, st, lo, hi)
        originals = render(lang, words, fmt, offsets)
        chunks.append(originals)
        chunk_gen.append(np.arange(lo, hi))

        a, b = np.searchsorted(sorted_sources, [lo, hi])
        copies = by_source[a:b]
        if copies.size == 0:
            continue
        copy_words, copy_fmt, sizes = [], [], []
        for c in copies.tolist():
            s = int(plan.copy_source[c]) - lo
            w, f = EDITS[KINDS[plan.copy_kind[c]]](
                rng, lang, words[offsets[s] : offsets[s + 1]], fmt[offsets[s] : offsets[s + 1]]
            )
            copy_words.append(w)
            copy_fmt.append(f)
            sizes.append(w.size)
        copy_offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        copy_texts = render(
            lang, np.concatenate(copy_words), np.concatenate(copy_fmt), copy_offsets
        )
        chunks.append(copy_texts)
        chunk_gen.append(n_originals + copies)

        sources, copy_src = np.unique(plan.copy_source[copies] - lo, return_inverse=True)
        source_texts = originals.take(pa.array(sources))
        jaccards[copies] = _measure(source_texts, copy_texts, copy_src.astype(np.int64))

    # Rows in id order: row r holds generation index gen_of_row[r].
    width = _id_width(n_docs)
    gen_order = np.concatenate(chunk_gen) if chunk_gen else np.zeros(0, dtype=np.int64)
    position = np.empty(n_docs, dtype=np.int64)
    position[gen_order] = np.arange(n_docs)
    gen_of_row = np.argsort(plan.row_of)
    starts = np.cumsum([0] + [len(c) for c in chunks])[:-1]
    step = 20_000
    text_parts = [
        _take_chunked(chunks, starts, position[gen_of_row[r : r + step]])
        for r in range(0, n_docs, step)
    ]
    corpus = pa.Table.from_arrays(
        [
            pa.chunked_array([pa.array(_ids(np.arange(n_docs), width), pa.string())]),
            pa.chunked_array(text_parts, type=pa.string()),
        ],
        schema=CORPUS_SCHEMA,
    )

    source_row = plan.row_of[plan.copy_source]
    copy_row = plan.row_of[n_originals + np.arange(plan.copy_source.size)]
    row_a, row_b = np.minimum(source_row, copy_row), np.maximum(source_row, copy_row)
    order = np.lexsort((row_b, row_a))
    truth = pa.Table.from_arrays(
        [
            pa.array(_ids(row_a[order], width), pa.string()),
            pa.array(_ids(row_b[order], width), pa.string()),
            pa.array([KINDS[k] for k in plan.copy_kind[order].tolist()], pa.string()),
            pa.array(jaccards[order], pa.float64()),
        ],
        schema=TRUTH_SCHEMA,
    )
    return corpus, truth


# Row groups of a few thousand documents, as crawl dumps written in blocks have: Spark can then
# split a file across tasks instead of reading 20,000 documents in one.
ROW_GROUP_ROWS = 5000


def _file_parts(table: pa.Table, rows_per_file: int) -> Iterator[pa.Table]:
    if table.num_rows == 0:
        yield table
    for start in range(0, table.num_rows, rows_per_file):
        yield table.slice(start, rows_per_file)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def write_corpus(
    directory: str,
    n_docs: int,
    seed: int = 0,
    mean_words: int = 500,
    overwrite: bool = False,
    rows_per_file: int = 20000,
) -> dict[str, Any]:
    """Write ``DIRECTORY/corpus/part-00000.parquet``, ``part-00001.parquet``, ...
    (``rows_per_file`` rows each) and ``DIRECTORY/truth/part-00000.parquet``.

    Returns a summary: ``docs``, ``truth_pairs``, ``by_kind`` (pairs per kind), ``files``
    (corpus files) and ``seconds``. An existing ``DIRECTORY/corpus`` or ``DIRECTORY/truth`` is
    a :class:`UserError` unless ``overwrite``, which removes both first (after the new corpus
    has been generated, so a failed generation leaves the old one in place).
    """
    started = time.perf_counter()
    _check_args(n_docs, seed, mean_words)
    if rows_per_file < 1:
        raise UserError(f"rows per file must be >= 1, got {rows_per_file}")
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise UserError(f"{root} exists and is not a directory")
    corpus_dir, truth_dir = root / "corpus", root / "truth"
    existing = [p for p in (corpus_dir, truth_dir) if p.exists() or p.is_symlink()]
    if existing and not overwrite:
        raise UserError(
            f"{existing[0]} already exists; pass --overwrite to replace it, or choose another "
            "directory"
        )

    corpus, truth = generate_corpus(n_docs, seed=seed, mean_words=mean_words)
    for path in existing:
        _remove(path)
    corpus_dir.mkdir(parents=True)
    truth_dir.mkdir(parents=True)
    files = 0
    for i, part in enumerate(_file_parts(corpus, rows_per_file)):
        pq.write_table(part, corpus_dir / f"part-{i:05d}.parquet", row_group_size=ROW_GROUP_ROWS)
        files += 1
    pq.write_table(truth, truth_dir / "part-00000.parquet")

    kinds = truth.column("kind").to_pylist()
    seconds = time.perf_counter() - started
    log.info("wrote %d documents and %d planted pairs in %.1f s", n_docs, len(kinds), seconds)
    return {
        "docs": n_docs,
        "truth_pairs": len(kinds),
        "by_kind": {kind: kinds.count(kind) for kind in KINDS if kind in kinds},
        "files": files,
        "seconds": round(seconds, 3),
    }
