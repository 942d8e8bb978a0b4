r"""Boilerplate units on Arrow buffers: split texts into lines or paragraphs, hash each unit's
normalised form, and remove chosen units, all without a Python loop over units.

A *unit* is a line (``"line"``: the bytes up to and including a ``\n``) or a paragraph
(``"paragraph"``: a run of non-blank lines plus the blank lines after it; a blank line holds only
ASCII whitespace). The units of a document cover its text exactly, separators included, so
removing units never adds a byte and keeping them all gives the text back. Each unit is
normalised as the dedupe normalises a document (:func:`~neardup_spark.kernels.normalize.
normalize_texts`: a unit of punctuation, symbols or whitespace only has no words) and hashed
with MurmurHash3 (64 bits of the normalised UTF-8 bytes, seed :data:`UNIT_HASH_SEED`): ``"Home |
News"`` and ``"HOME  news"`` are the same unit. Distinct units collide with probability
``2**-64`` per pair (about ``3e-4`` among 10^8 distinct units).

*Tokens* of a unit decide whether it may be removed at all (a unit shorter than the minimum,
e.g. ``"Home"``, never is): its words, or for a unit written mostly in a script without spaces
(Chinese, Japanese, Thai, ...; :func:`~neardup_spark.kernels.shingles.char_unit_mask`) its
non-space characters, as the dedupe counts a document's shingling tokens.

The texts of the units are a zero-copy Arrow view of the documents' own buffer; splitting,
hashing and rebuilding are compiled (numba) passes over the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

try:
    from numba import njit
except ImportError:  # pragma: no cover - numba is a pinned dependency
    njit = None

from neardup_spark.kernels.compiled_words import (
    murmur3_64,
    string_buffers,
    string_hashes,
    word_counts,
)
from neardup_spark.kernels.hashing import GOLDEN64, fmix64
from neardup_spark.kernels.normalize import (
    DEFAULT_OPTIONS,
    NormalizeOptions,
    ascii_table,
    normalize_texts,
)
from neardup_spark.kernels.shingles import char_unit_mask, split_words

UNITS = ("line", "paragraph")
# Seed of the unit hashes (any fixed value; it is part of what a unit key means).
UNIT_HASH_SEED = 0x0B0113
_NEWLINE = 10


def _is_ascii_space(byte: np.uint8) -> bool:
    return byte == 32 or byte == 9 or byte == 13 or byte == 11 or byte == 12


def _unit_starts(
    data: np.ndarray, offsets: np.ndarray, paragraph: bool, starts: np.ndarray
) -> tuple[np.ndarray, int]:
    """The first byte of every unit, written into ``starts`` in text order; returns the unit
    offsets per document and the number of units (compiled by numba)."""
    n = offsets.shape[0] - 1
    doc_offsets = np.zeros(n + 1, dtype=np.int64)
    u = 0
    for d in range(n):
        begin, end = offsets[d], offsets[d + 1]
        if end > begin:
            starts[u] = begin
            u += 1
            if not paragraph:  # every byte after a newline starts a unit
                for i in range(begin, end - 1):
                    if data[i] == _NEWLINE:
                        starts[u] = i + 1
                        u += 1
                doc_offsets[d + 1] = u
                continue
            line = begin
            previous_blank = False
            while line < end:
                i = line
                blank = True
                while i < end and data[i] != _NEWLINE:
                    if blank and not _is_ascii_space(data[i]):
                        blank = False
                    i += 1
                if line > begin and (not paragraph or (previous_blank and not blank)):
                    starts[u] = line
                    u += 1
                previous_blank = blank
                line = i + 1
        doc_offsets[d + 1] = u
    return doc_offsets, u


def _ascii_unit_hashes(
    data: np.ndarray,
    bounds: np.ndarray,
    table: np.ndarray,
    seed: np.uint64,
    scratch: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Normalise (as the normaliser's ASCII path: ``table`` maps a byte to its lower-cased
    letter or digit, else a space; runs of spaces collapse, none at the ends), hash and count
    the words of every unit in one pass; a unit with a non-ASCII byte is only flagged, for the
    general path. Returns ``(hashes, words, non_ascii)`` (compiled)."""
    n = bounds.shape[0] - 1
    hashes = np.zeros(n, dtype=np.uint64)
    words = np.zeros(n, dtype=np.int32)
    non_ascii = np.zeros(n, dtype=np.bool_)
    space = np.uint8(32)
    for u in range(n):
        pos = 0
        prev = space
        high = np.uint8(0)
        spaces = 0
        for i in range(bounds[u], bounds[u + 1]):
            byte = data[i]
            high |= byte
            c = table[byte]
            scratch[pos] = c
            keep = (c != space) | (prev != space)
            spaces += keep & (c == space)
            pos += keep
            prev = c
        if pos > 0 and scratch[pos - 1] == space:
            pos -= 1
            spaces -= 1
        if high >= 128:
            non_ascii[u] = True
            continue
        hashes[u] = murmur3_64(scratch, 0, pos, seed)
        words[u] = spaces + 1 if pos > 0 else 0
    return hashes, words, non_ascii


def _utf8_chars(data: np.ndarray, begin: int, end: int) -> int:
    count = 0
    for i in range(begin, end):
        count += (data[i] & 0xC0) != 0x80
    return count


def _rebuild(
    data: np.ndarray,
    bounds: np.ndarray,
    doc_offsets: np.ndarray,
    remove: np.ndarray,
    has_words: np.ndarray,
    out: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Copy the kept units of each document; a document left without words becomes empty.
    Returns ``(offsets into out, units removed, characters removed, emptied)`` (compiled)."""
    n = doc_offsets.shape[0] - 1
    out_offsets = np.zeros(n + 1, dtype=np.int64)
    removed_units = np.zeros(n, dtype=np.int32)
    removed_chars = np.zeros(n, dtype=np.int64)
    emptied = np.zeros(n, dtype=np.bool_)
    pos = 0
    for d in range(n):
        first = pos
        kept_words = False
        for u in range(doc_offsets[d], doc_offsets[d + 1]):
            begin, end = bounds[u], bounds[u + 1]
            if remove[u]:
                removed_units[d] += 1
                removed_chars[d] += _utf8_chars(data, begin, end)
            else:
                out[pos : pos + end - begin] = data[begin:end]
                pos += end - begin
                kept_words = kept_words or has_words[u]
        if removed_units[d] > 0 and not kept_words:
            removed_chars[d] += _utf8_chars(out, first, pos)
            pos = first
            emptied[d] = True
        out_offsets[d + 1] = pos
    return out_offsets, removed_units, removed_chars, emptied


def _in_doc_lists(
    doc_offsets: np.ndarray,
    keys: np.ndarray,
    candidates: np.ndarray,
    list_offsets: np.ndarray,
    list_values: np.ndarray,
) -> np.ndarray:
    """Whether each candidate unit's key is in its own document's list (sorted in place per
    document, then binary search: linear-logarithmic in a document's units, never quadratic)."""
    out = np.zeros(keys.shape[0], dtype=np.bool_)
    for d in range(doc_offsets.shape[0] - 1):
        lo, hi = list_offsets[d], list_offsets[d + 1]
        if hi == lo:
            continue
        listed = np.sort(list_values[lo:hi])
        for u in range(doc_offsets[d], doc_offsets[d + 1]):
            if candidates[u]:
                at = np.searchsorted(listed, keys[u])
                out[u] = at < listed.shape[0] and listed[at] == keys[u]
    return out


def _first_in_doc(doc_offsets: np.ndarray, keys: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Per document, a stable sort of its candidate units by key; the first of each run is the
    key's first occurrence in the text (compiled)."""
    out = np.zeros(keys.shape[0], dtype=np.bool_)
    for d in range(doc_offsets.shape[0] - 1):
        lo, hi = doc_offsets[d], doc_offsets[d + 1]
        picked = np.flatnonzero(candidates[lo:hi]) + lo
        if picked.shape[0] == 0:
            continue
        order = picked[np.argsort(keys[picked], kind="mergesort")]
        out[order[0]] = True
        for i in range(1, order.shape[0]):
            out[order[i]] = keys[order[i]] != keys[order[i - 1]]
    return out


if njit is not None:
    _first_in_doc = njit(cache=True, nogil=True)(_first_in_doc)
    _is_ascii_space = njit(inline="always", cache=True)(_is_ascii_space)
    _unit_starts = njit(cache=True, nogil=True)(_unit_starts)
    _ascii_unit_hashes = njit(cache=True, nogil=True)(_ascii_unit_hashes)
    _utf8_chars = njit(inline="always", cache=True)(_utf8_chars)
    _rebuild = njit(cache=True, nogil=True)(_rebuild)
    _in_doc_lists = njit(cache=True, nogil=True)(_in_doc_lists)


@dataclass(frozen=True)
class Units:
    """The units of a batch of texts. Document ``d`` owns units ``doc_offsets[d]:doc_offsets[d
    + 1]``; unit ``u`` is the bytes ``bounds[u]:bounds[u + 1]`` of ``data``. Null and empty texts
    have none (``valid`` is False for a null)."""

    data: np.ndarray
    doc_offsets: np.ndarray
    bounds: np.ndarray
    valid: np.ndarray

    @property
    def count(self) -> int:
        return int(self.doc_offsets[-1])

    def doc_of_unit(self) -> np.ndarray:
        """The document index of each unit (int64)."""
        return np.repeat(np.arange(len(self.valid), dtype=np.int64), np.diff(self.doc_offsets))

    def texts(self) -> pa.Array:
        """Each unit's raw text (a large_string view of the documents' buffer, no copy)."""
        return pa.LargeStringArray.from_buffers(
            self.count, pa.py_buffer(self.bounds), pa.py_buffer(self.data)
        )


def split_units(texts: pa.Array, unit: str = "line") -> Units:
    r"""Split string texts into units (see the module docstring).

    >>> units = split_units(pa.array(["Home\nBody text\n", None, "one line"]))
    >>> units.texts().to_pylist(), units.doc_offsets.tolist()
    (['Home\n', 'Body text\n', 'one line'], [0, 2, 2, 3])
    >>> page = "\nNav\n\nPara one\nstill one\n \nPara two"
    >>> split_units(pa.array([page]), "paragraph").texts().to_pylist()
    ['\n', 'Nav\n\n', 'Para one\nstill one\n \n', 'Para two']
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    data, offsets, valid = string_buffers(texts)
    if not valid.all() and np.any(np.diff(offsets)[~valid] > 0):
        # A null slot holding bytes (Arrow allows it): rebuild so that nulls own none.
        data, offsets, _ = string_buffers(pc.if_else(texts.is_valid(), texts, ""))
    newlines = int(np.count_nonzero(data[offsets[0] : offsets[-1]] == _NEWLINE))
    starts = np.empty(newlines + len(valid) + 1, dtype=np.int64)
    doc_offsets, n_units = _unit_starts(data, offsets, unit == "paragraph", starts)
    bounds = starts[: n_units + 1]
    bounds[n_units] = offsets[-1]
    return Units(data, doc_offsets, bounds, valid)


@dataclass(frozen=True)
class UnitFeatures:
    """Per unit: ``hashes`` (uint64 of the normalised text; meaningful where ``tokens > 0``) and
    ``tokens`` (int32: words, or characters for a unit in a script without spaces)."""

    units: Units
    hashes: np.ndarray
    tokens: np.ndarray


def unit_features(
    texts: pa.Array,
    unit: str = "line",
    options: NormalizeOptions = DEFAULT_OPTIONS,
    shingle_unit: str = "auto",
) -> UnitFeatures:
    r"""Split, normalise, hash and count the tokens of every unit of ``texts``.

    >>> f = unit_features(pa.array(["Home | News\n---\nHOME  news"]))
    >>> f.tokens.tolist(), bool(f.hashes[0] == f.hashes[2])
    ([2, 0, 2], True)
    """
    units = split_units(texts, unit)
    fast = options.strip_punctuation and options.collapse_whitespace and shingle_unit != "char"
    if njit is not None and fast:  # one compiled pass for ASCII units, as the normaliser does
        hashes, tokens, general = _ascii_unit_hashes(
            units.data,
            units.bounds,
            ascii_table(options.casefold),
            np.uint64(UNIT_HASH_SEED),
            np.empty(max(int(np.diff(units.bounds).max(initial=0)), 1), dtype=np.uint8),
        )
        if general.any():
            picked = np.flatnonzero(general)
            hashes[picked], tokens[picked] = _general_features(
                units.texts().take(pa.array(picked)), options, shingle_unit
            )
        return UnitFeatures(units, hashes, tokens)
    hashes, tokens = _general_features(units.texts(), options, shingle_unit)
    return UnitFeatures(units, hashes, tokens)


def _general_features(
    texts: pa.Array, options: NormalizeOptions, shingle_unit: str
) -> tuple[np.ndarray, np.ndarray]:
    """Hashes and tokens of units through the normaliser itself (any script, any options)."""
    normalized = normalize_texts(texts, options)
    hashes = string_hashes(normalized, UNIT_HASH_SEED)
    if options.collapse_whitespace:
        tokens = word_counts(normalized)
    else:
        _, parents = split_words(normalized)
        tokens = np.bincount(parents, minlength=len(texts))
    tokens = tokens.astype(np.int32)
    if shingle_unit != "word":
        _count_characters(normalized, shingle_unit, tokens)
    return hashes, tokens


def _count_characters(normalized: pa.Array, shingle_unit: str, tokens: np.ndarray) -> None:
    """Tokens of the units shingled by characters: their non-space characters (in place). Only
    units with a non-ASCII byte can be (``char_unit_mask`` decides), found on the whole buffer
    at once: Arrow's per-string ASCII test cost as much as normalising."""
    data, offsets, _ = string_buffers(normalized)
    if shingle_unit == "auto":
        high = np.flatnonzero(data[offsets[0] : offsets[-1]] >= 128) + offsets[0]
        if high.size == 0:
            return
        candidates = np.unique(np.searchsorted(offsets, high, side="right") - 1)
        subset = normalized.take(pa.array(candidates))
        chosen = candidates[char_unit_mask(subset, shingle_unit)]
    else:
        chosen = np.arange(len(normalized))
    picked = normalized.take(pa.array(chosen, type=pa.int64()))
    spaces = pc.fill_null(pc.count_substring_regex(picked, r"\s"), 0).to_numpy()
    tokens[chosen] = pc.fill_null(pc.utf8_length(picked), 0).to_numpy() - spaces


def unit_keys(
    hashes: np.ndarray, doc_of_unit: np.ndarray, doc_salts: np.ndarray | None
) -> np.ndarray:
    """The key a unit is counted under: its hash, or with per-document ``doc_salts`` (e.g. the
    hash of a site column) a mix of both, so the same line on two sites is two keys."""
    if doc_salts is None:
        return hashes
    with np.errstate(over="ignore"):
        return fmix64(hashes ^ fmix64(doc_salts[doc_of_unit] + GOLDEN64))


def first_in_document(units: Units, keys: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    r"""Among ``candidates``, the first occurrence of each key within its document (bool per
    unit; False for non-candidates).

    >>> units = split_units(pa.array(["a\nb\na\n", "a"]))
    >>> keys = np.array([5, 6, 5, 5], dtype=np.uint64)
    >>> first_in_document(units, keys, np.array([True, True, True, True])).tolist()
    [True, True, False, True]
    """
    return _first_in_doc(units.doc_offsets, keys, candidates)


def in_sorted(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Whether each key is in ``sorted_keys`` (ascending uint64)."""
    if sorted_keys.size == 0:
        return np.zeros(keys.shape[0], dtype=bool)
    at = np.searchsorted(sorted_keys, keys)
    return sorted_keys[np.minimum(at, sorted_keys.size - 1)] == keys


def in_document_lists(
    units: Units,
    keys: np.ndarray,
    candidates: np.ndarray,
    list_offsets: np.ndarray,
    list_values: np.ndarray,
) -> np.ndarray:
    """Whether each candidate unit's key is in its document's own list (CSR over documents)."""
    return _in_doc_lists(
        units.doc_offsets,
        keys,
        candidates,
        list_offsets.astype(np.int64),
        list_values.astype(np.uint64),
    )


@dataclass(frozen=True)
class Stripped:
    """Texts with units removed, and per document: units removed, characters removed (so that
    ``len(text) == len(original) - removed_chars``), and whether removal left no words (the
    text is then empty)."""

    texts: pa.Array
    removed_units: np.ndarray
    removed_chars: np.ndarray
    emptied: np.ndarray


def remove_units(features: UnitFeatures, remove: np.ndarray) -> Stripped:
    r"""The texts without the units where ``remove`` is True. A document whose remaining units
    hold no words becomes ``""`` (its whitespace counted as removed); a null stays null.

    >>> f = unit_features(pa.array(["Nav\nBody\nFoot", "Nav\n\nFoot", None]))
    >>> s = remove_units(f, np.array([True, False, True, True, False, True]))
    >>> s.texts.to_pylist(), s.removed_units.tolist(), s.emptied.tolist()
    (['Body\n', '', None], [2, 2, 0], [False, True, False])
    """
    units = features.units
    out = np.empty(max(int(units.bounds[-1] - units.bounds[0]), 1), dtype=np.uint8)
    offsets, removed_units, removed_chars, emptied = _rebuild(
        units.data, units.bounds, units.doc_offsets, remove, features.tokens > 0, out
    )
    n = len(units.valid)
    null_count = n - int(units.valid.sum())
    validity = pa.py_buffer(np.packbits(units.valid, bitorder="little")) if null_count else None
    texts = pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(out[: int(offsets[-1])]), validity, null_count
    )
    return Stripped(texts, removed_units, removed_chars, emptied)
