"""Benchmark contamination: reference n-grams found in documents, their spans, and cuts.

Words come from :mod:`neardup_spark.kernels.contamination_words`. An n-gram's hash combines
its ``k`` consecutive word hashes (``acc = acc * M + h``, then :func:`fmix64` of ``acc`` mixed
with ``k``), so a document's n-grams are a few vectorised passes over its batch's word
hashes. A reference item of fewer than ``n`` words contributes its whole word sequence, a
``k``-gram, which the corpus is searched for too.

The reference is one sorted array of distinct gram hashes with, per gram, the items holding it
(CSR); a batch's grams are looked up with :func:`numpy.searchsorted`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from neardup_spark.kernels.contamination_words import Words
from neardup_spark.kernels.hashing import FMIX_C1, FMIX_C2, GOLDEN64, fmix64

try:
    from numba import njit
except ImportError:  # pragma: no cover - numba is a pinned dependency
    njit = None

# Odd multiplier of the rolling combination of word hashes into a gram hash.
GRAM_MULTIPLIER = np.uint64(0xD6E8FEB86659FD93)
# The reference's filter: about this many slots per gram (a false positive in 1/16 lookups).
FILTER_SLOTS_PER_GRAM = 16


def gram_hashes(words: Words, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ``k``-gram of each text: ``(index of its first word, hash)``, in text order.

    >>> from neardup_spark.kernels.contamination_words import text_words
    >>> import pyarrow as pa
    >>> first, h = gram_hashes(text_words(pa.array(["a b c", "A, b! C"])), 2)
    >>> first.tolist(), bool(h[0] == h[2]), bool(h[1] == h[3]), bool(h[0] == h[1])
    ([0, 1, 3, 4], True, True, False)
    """
    counts = words.counts
    grams_per_doc = np.maximum(counts - k + 1, 0)
    if k < 1 or not grams_per_doc.any():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint64)
    doc_of = np.repeat(np.arange(len(counts)), grams_per_doc)
    rank = np.arange(len(doc_of)) - np.repeat(
        np.cumsum(grams_per_doc) - grams_per_doc, grams_per_doc
    )
    first = words.doc_offsets[:-1][doc_of] + rank
    acc = np.zeros(len(first), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(k):
            acc = acc * GRAM_MULTIPLIER + words.hashes[first + j]
        acc ^= np.uint64(k) * GOLDEN64
    return first.astype(np.int64), fmix64(acc)


@dataclass(frozen=True)
class ReferenceGrams:
    """The reference's grams: sorted distinct ``hashes`` (uint64), the items holding each
    (``items[item_offsets[g]:item_offsets[g + 1]]``, int64 item indices), the gram lengths in
    use, and per item its number of distinct grams (``item_grams``, the denominator of a
    match's share; kept when grams are dropped as common)."""

    n: int
    hashes: np.ndarray
    item_offsets: np.ndarray
    items: np.ndarray
    lengths: tuple[int, ...]
    item_grams: np.ndarray

    @functools.cached_property
    def filter_bits(self) -> tuple[np.ndarray, int]:
        """A one-bit-per-slot filter of the hashes (slot: the top bits of a hash), as a bool
        array, and the shift that gives a hash's slot; built where it is first used (a task),
        not shipped."""
        bits = int(
            np.clip(np.ceil(np.log2(max(len(self.hashes), 1) * FILTER_SLOTS_PER_GRAM)), 8, 28)
        )
        present = np.zeros(1 << bits, dtype=np.bool_)
        present[self.hashes >> np.uint64(64 - bits)] = True
        return present, 64 - bits

    def __getstate__(self) -> dict[str, object]:
        """Pickled (shipped to tasks) without the filter: each builds its own."""
        return {k: v for k, v in self.__dict__.items() if k != "filter_bits"}

    def without(self, dropped: np.ndarray) -> ReferenceGrams:
        """These grams less ``dropped`` (hashes, any order): the common ones."""
        keep = ~np.isin(self.hashes, np.asarray(dropped, dtype=np.uint64))
        sizes = np.diff(self.item_offsets)
        item_keep = np.repeat(keep, sizes)
        offsets = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
        np.cumsum(sizes[keep], out=offsets[1:])
        return replace(
            self, hashes=self.hashes[keep], item_offsets=offsets, items=self.items[item_keep]
        )


def reference_grams(words: Words, n: int) -> ReferenceGrams:
    """The grams of reference items (one text each): their ``n``-grams, or for an item of
    ``k < n`` words its whole sequence. An item without words is a :class:`ValueError` naming
    its position.

    >>> from neardup_spark.kernels.contamination_words import text_words
    >>> import pyarrow as pa
    >>> ref = reference_grams(text_words(pa.array(["a b c d", "x y"])), 3)
    >>> ref.lengths, ref.item_grams.tolist(), len(ref.hashes)
    ((2, 3), [2, 1], 3)
    """
    counts = words.counts
    if (counts == 0).any():
        raise ValueError(f"reference item {int(np.flatnonzero(counts == 0)[0])} has no words")
    own = np.minimum(counts, n)
    gram_list, item_list = [], []
    for k in np.unique(own).tolist():
        first, hashes = gram_hashes(words, k)
        doc = np.searchsorted(words.doc_offsets, first, side="right") - 1
        mine = own[doc] == k
        gram_list.append(hashes[mine])
        item_list.append(doc[mine])
    grams = np.concatenate(gram_list)
    items = np.concatenate(item_list).astype(np.int64)
    order = np.lexsort((items, grams))
    grams, items = grams[order], items[order]
    distinct = np.ones(len(grams), dtype=bool)
    distinct[1:] = (grams[1:] != grams[:-1]) | (items[1:] != items[:-1])
    grams, items = grams[distinct], items[distinct]
    new_gram = np.ones(len(grams), dtype=bool)
    new_gram[1:] = grams[1:] != grams[:-1]
    offsets = np.append(np.flatnonzero(new_gram), len(grams)).astype(np.int64)
    return ReferenceGrams(
        n=n,
        hashes=grams[new_gram],
        item_offsets=offsets,
        items=items,
        lengths=tuple(int(k) for k in np.unique(own)),
        item_grams=np.bincount(items, minlength=len(counts)).astype(np.int64),
    )


@dataclass(frozen=True)
class Hits:
    """Occurrences of reference grams in texts: the text, the gram (its index in
    :attr:`ReferenceGrams.hashes`), its first and last word (indices into the batch's words)."""

    doc: np.ndarray
    gram: np.ndarray
    first: np.ndarray
    last: np.ndarray


def _gram_hits(
    doc_offsets: np.ndarray,
    hashes: np.ndarray,
    k: int,
    power: np.uint64,
    ref_hashes: np.ndarray,
    present: np.ndarray,
    shift: np.uint64,
    out_first: np.ndarray,
    out_at: np.ndarray,
) -> int:
    """The ``k``-grams of each text (:func:`gram_hashes`' hashes, rolled: ``power`` is
    ``GRAM_MULTIPLIER ** (k - 1)``) found among the sorted ``ref_hashes``: their first words
    into ``out_first``, their indices into ``out_at``; returns how many. A gram's slot in
    ``present`` (its hash's top bits) is checked before the binary search."""
    tag = np.uint64(k) * GOLDEN64
    m = 0
    n_ref = ref_hashes.shape[0]
    for d in range(doc_offsets.shape[0] - 1):
        a = doc_offsets[d]
        b = doc_offsets[d + 1]
        if b - a < k:
            continue
        acc = np.uint64(0)
        for j in range(a, a + k):
            acc = acc * GRAM_MULTIPLIER + hashes[j]
        i = a
        while True:
            h = acc ^ tag
            h ^= h >> np.uint64(33)
            h *= FMIX_C1
            h ^= h >> np.uint64(33)
            h *= FMIX_C2
            h ^= h >> np.uint64(33)
            if present[h >> shift]:
                lo = 0
                hi = n_ref
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if ref_hashes[mid] < h:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < n_ref and ref_hashes[lo] == h:
                    out_first[m] = i
                    out_at[m] = lo
                    m += 1
            if i + k >= b:
                break
            acc = (acc - hashes[i] * power) * GRAM_MULTIPLIER + hashes[i + k]
            i += 1
    return m


if njit is not None:
    _gram_hits = njit(cache=True, nogil=True)(_gram_hits)


def find_hits(words: Words, ref: ReferenceGrams) -> Hits:
    """Every occurrence of a reference gram in the texts, in length order, then text order
    (one compiled pass per gram length: rolling hashes, a filter, then a binary search)."""
    present, shift = ref.filter_bits
    firsts, grams, lasts = [], [], []
    for k in ref.lengths:
        power = np.uint64(1)
        with np.errstate(over="ignore"):
            for _ in range(k - 1):
                power = np.uint64(power * GRAM_MULTIPLIER)
        size = max(len(words.hashes), 1)
        first = np.empty(size, dtype=np.int64)
        at = np.empty(size, dtype=np.int64)
        m = _gram_hits(
            words.doc_offsets,
            words.hashes,
            k,
            power,
            ref.hashes,
            present,
            np.uint64(shift),
            first,
            at,
        )
        firsts.append(first[:m])
        grams.append(at[:m])
        lasts.append(first[:m] + (k - 1))
    first = np.concatenate(firsts) if firsts else np.zeros(0, dtype=np.int64)
    gram = np.concatenate(grams) if grams else np.zeros(0, dtype=np.int64)
    last = np.concatenate(lasts) if lasts else np.zeros(0, dtype=np.int64)
    doc = np.searchsorted(words.doc_offsets, first, side="right") - 1
    return Hits(doc.astype(np.int64), gram, first, last)


def distinct_doc_grams(hits: Hits) -> tuple[np.ndarray, np.ndarray]:
    """``(doc, gram)`` once per text and gram it holds."""
    pairs = np.unique(np.stack([hits.doc, hits.gram], axis=1), axis=0) if len(hits.doc) else None
    if pairs is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return pairs[:, 0], pairs[:, 1]


@dataclass(frozen=True)
class Matches:
    """One row per (text, item) found: ``doc``, ``item``, ``ngrams`` (distinct grams of the
    item in the text), and its merged spans (CSR ``span_offsets``; character ``starts`` and
    ``ends`` in the original text, end exclusive, in text order)."""

    doc: np.ndarray
    item: np.ndarray
    ngrams: np.ndarray
    span_offsets: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


def _group_starts(*keys: np.ndarray) -> np.ndarray:
    """Where a new run of equal keys begins in sorted rows."""
    new = np.ones(len(keys[0]), dtype=bool)
    if len(new):
        new[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in keys])
    return new


def item_matches(words: Words, ref: ReferenceGrams, hits: Hits) -> Matches:
    """The (text, item) matches of ``hits`` in the texts of ``words``
    (:func:`span_matches` with each hit's characters taken from its words)."""
    return span_matches(ref, hits, words.starts[hits.first], words.ends[hits.last])


def span_matches(ref: ReferenceGrams, hits: Hits, starts: np.ndarray, ends: np.ndarray) -> Matches:
    """The (text, item) matches of ``hits`` (``doc``: any int64 key of a text), each hit with
    the character ``starts`` of its first word and ``ends`` of its last. An item's grams all
    have one length, so its hits in a text, ordered by first word, have ordered last words
    too; two merge into one span when they overlap or are adjacent in words (the next begins at
    most one word after the previous ends). A span runs from its first word's first kept
    character to its last word's last kept character + 1 (stripped punctuation at either end
    lies outside)."""
    sizes = np.diff(ref.item_offsets)[hits.gram]
    row = np.repeat(np.arange(len(hits.gram)), sizes)
    within = np.arange(len(row)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    item = ref.items[ref.item_offsets[hits.gram[row]] + within]
    doc, gram, first, last = hits.doc[row], hits.gram[row], hits.first[row], hits.last[row]
    start, end = starts[row], ends[row]
    by_gram = np.lexsort((gram, item, doc))
    fresh = _group_starts(doc[by_gram], item[by_gram], gram[by_gram])
    pair_of_fresh = np.cumsum(_group_starts(doc[by_gram], item[by_gram])) - 1
    ngrams = np.bincount(pair_of_fresh[fresh]) if len(row) else np.zeros(0, dtype=np.int64)
    order = np.lexsort((last, first, item, doc))
    doc, item, first, last = doc[order], item[order], first[order], last[order]
    start, end = start[order], end[order]
    pair_new = _group_starts(doc, item)
    span_new = pair_new.copy()
    if len(first):
        span_new[1:] |= first[1:] > last[:-1] + 1
    span_ids = np.cumsum(span_new) - 1
    # A text's word ends grow with the word: a span's end is its hits' largest.
    span_end = np.zeros(int(span_new.sum()), dtype=np.int64)
    np.maximum.at(span_end, span_ids, end)
    span_offsets = np.append(np.flatnonzero(pair_new[span_new]), span_new.sum()).astype(np.int64)
    return Matches(
        doc=doc[pair_new],
        item=item[pair_new],
        ngrams=ngrams.astype(np.int64),
        span_offsets=span_offsets,
        starts=start[span_new].astype(np.int64),
        ends=span_end,
    )


def cut_ranges(
    matches: Matches, doc_chars: np.ndarray, margin: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each text's spans (any item) widened by ``margin`` characters each side, clipped to the
    text and merged where they overlap or touch: ``(doc, start, end)`` sorted by text, then
    start.

    >>> m = Matches(np.array([0, 0]), np.array([0, 1]), np.array([1, 1]), np.array([0, 1, 2]),
    ...             np.array([10, 40]), np.array([20, 50]))
    >>> [a.tolist() for a in cut_ranges(m, np.array([100]), 5)]
    [[0, 0], [5, 35], [25, 55]]
    >>> [a.tolist() for a in cut_ranges(m, np.array([100]), 15)]
    [[0], [0], [65]]
    """
    per_match = np.diff(matches.span_offsets)
    doc = np.repeat(matches.doc, per_match)
    start = np.maximum(matches.starts - margin, 0)
    end = np.minimum(matches.ends + margin, doc_chars[doc]) if len(doc) else matches.ends
    order = np.lexsort((end, start, doc))
    doc, start, end = doc[order], start[order], end[order]
    new = _group_starts(doc)
    # The furthest end so far within each text: one running maximum over all texts, each
    # text's ends lifted above the texts' before it.
    lift = (np.cumsum(new) - 1) * (int(doc_chars.max(initial=0)) + 1)
    reach = np.maximum.accumulate(end + lift) - lift
    if len(start):
        new[1:] |= start[1:] > reach[:-1]
    merged = np.cumsum(new) - 1
    out_end = np.zeros(int(new.sum()), dtype=np.int64)
    np.maximum.at(out_end, merged, end)
    return doc[new], start[new], out_end
