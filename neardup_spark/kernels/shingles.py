"""Words, word k-shingles and their 64-bit hashes, for a whole Arrow batch at once.

A document's shingles are its runs of ``k`` consecutive words; a document with fewer than ``k``
words (but at least one) is a single shingle of all its words; an empty document has none.

Hashing: each distinct word of a batch is hashed once with MurmurHash3 (``mmh3.hash64``, x64
variant, unsigned, first 64 bits) under ``seed``; a shingle's hash combines the hashes of its
words with position-dependent odd multipliers and MurmurHash3's ``fmix64`` finaliser (see
:func:`combine_word_hashes`). Word order matters: ``a b`` and ``b a`` differ.
"""

from __future__ import annotations

from dataclasses import dataclass

import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark.kernels.compiled_words import word_shingle_hashes
from neardup_spark.kernels.hashing import GOLDEN64, fmix64, splitmix64_stream

# Bump when anything here changes the hash of a shingle: an index built under another version
# cannot be mixed with new sketches.
SHINGLE_HASH_VERSION = 1
_POSITION_SEED = 0x5EED_0F_5A1A


@dataclass(frozen=True)
class WordBatch:
    """The words of a batch of documents, flattened: doc ``d`` owns
    ``hashes[offsets[d]:offsets[d+1]]``."""

    offsets: np.ndarray  # int64, n_docs + 1
    hashes: np.ndarray  # uint64, one per word occurrence


@dataclass(frozen=True)
class ShingleSets:
    """Sorted, de-duplicated shingle hashes per document (CSR layout)."""

    offsets: np.ndarray  # int64, n_docs + 1
    hashes: np.ndarray  # uint64

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def doc(self, i: int) -> np.ndarray:
        return self.hashes[self.offsets[i] : self.offsets[i + 1]]


def split_words(normalized: pa.Array, single_spaced: bool = False) -> tuple[pa.Array, np.ndarray]:
    """Split normalised texts on whitespace: ``(flat words, doc index of each word)``.

    Null texts and empty tokens contribute no words. ``single_spaced`` promises that words are
    separated by exactly one space with none at either end (normalisation with
    ``collapse_whitespace`` guarantees it), which allows a 2.5x faster split.
    """
    if isinstance(normalized, pa.ChunkedArray):
        normalized = normalized.combine_chunks()
    if single_spaced:
        lists = pc.split_pattern(normalized, pattern=" ")
        flat = pc.list_flatten(lists)
        parents = pc.list_parent_indices(lists)
        # Only an empty text yields an empty token here.
        if not pc.any(pc.equal(pc.utf8_length(normalized), 0)).as_py():
            return flat, parents.to_numpy(zero_copy_only=False)
    else:
        lists = pc.utf8_split_whitespace(normalized)
        flat = pc.list_flatten(lists)
        parents = pc.list_parent_indices(lists)
    keep = pc.greater(pc.utf8_length(flat), 0)
    return flat.filter(keep), parents.filter(keep).to_numpy(zero_copy_only=False)


def hash_words(words: pa.Array, seed: int) -> np.ndarray:
    """64-bit MurmurHash3 of each word; each distinct word is hashed once.

    >>> hash_words(pa.array(["a", "b", "a"]), 0).tolist()[0] == mmh3.hash64("a", 0, signed=False)[0]
    True
    """
    if len(words) == 0:
        return np.zeros(0, dtype=np.uint64)
    encoded = pc.dictionary_encode(words)
    seed32 = seed & 0xFFFFFFFF
    distinct = np.fromiter(
        (mmh3.hash64(w, seed32, signed=False)[0] for w in encoded.dictionary.to_pylist()),
        dtype=np.uint64,
        count=len(encoded.dictionary),
    )
    return distinct[encoded.indices.to_numpy(zero_copy_only=False)]


def word_batch(normalized: pa.Array, seed: int, single_spaced: bool = False) -> WordBatch:
    """Hash the words of a batch of normalised texts (see :func:`split_words`)."""
    words, parents = split_words(normalized, single_spaced)
    counts = np.bincount(parents, minlength=len(normalized)).astype(np.int64)
    offsets = np.zeros(len(normalized) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return WordBatch(offsets=offsets, hashes=hash_words(words, seed))


def position_multipliers(k: int) -> np.ndarray:
    """Odd 64-bit multipliers, one per position in a shingle."""
    return splitmix64_stream(_POSITION_SEED, k) | np.uint64(1)


def combine_word_hashes(words: WordBatch, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Hash every word k-shingle of every document, in order (repeats kept).

    Returns ``(offsets, hashes)`` in CSR layout. The hash of the shingle of words
    ``w_0 .. w_{L-1}`` (``L = k``, or the word count of a document shorter than ``k``) is
    ``fmix64(sum_j h(w_j) * M_j  XOR  L * golden)`` modulo 2**64.
    """
    if k < 1:
        raise ValueError(f"shingle size k must be >= 1, got {k}")
    n_words = np.diff(words.offsets)
    n_shingles = np.where(n_words >= k, n_words - k + 1, np.minimum(n_words, 1))
    offsets = np.zeros(len(n_words) + 1, dtype=np.int64)
    np.cumsum(n_shingles, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return offsets, np.zeros(0, dtype=np.uint64)
    mult = position_multipliers(k)
    hashes = words.hashes
    # Window sums over the whole flattened word array at once (contiguous slices, no gathers);
    # then keep the windows that start a shingle inside one document.
    n_all = len(hashes)
    acc = np.zeros(max(n_all - k + 1, 0), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(k):
            acc += hashes[j : j + len(acc)] * mult[j]
        acc ^= np.uint64(k) * GOLDEN64
    full = n_words >= k
    # Window starts inside one document: [offset_d, offset_d + n_d - k] for each full document.
    marks = np.zeros(len(acc) + 1, dtype=np.int32)
    np.add.at(marks, words.offsets[:-1][full], 1)
    np.add.at(marks, words.offsets[:-1][full] + n_words[full] - k + 1, -1)
    valid = np.cumsum(marks[:-1]) > 0
    out = np.empty(total, dtype=np.uint64)
    slots = np.ones(total, dtype=bool)
    short_docs = np.flatnonzero(~full & (n_words > 0))
    slots[offsets[short_docs]] = False
    out[slots] = acc[valid]
    if short_docs.size:  # documents shorter than k: one shingle of all their words
        short_acc = np.zeros(short_docs.size, dtype=np.uint64)
        lengths = n_words[short_docs]
        with np.errstate(over="ignore"):
            for j in range(k - 1):
                has = lengths > j
                idx = words.offsets[short_docs[has]] + j
                short_acc[has] += hashes[idx] * mult[j]
            short_acc ^= lengths.astype(np.uint64) * GOLDEN64
        out[offsets[short_docs]] = short_acc
    return offsets, fmix64(out)


def unique_per_doc(offsets: np.ndarray, values: np.ndarray) -> ShingleSets:
    """Sort and de-duplicate each document's values."""
    parts = [np.unique(values[offsets[i] : offsets[i + 1]]) for i in range(len(offsets) - 1)]
    sizes = np.fromiter((p.size for p in parts), dtype=np.int64, count=len(parts))
    new_offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(sizes, out=new_offsets[1:])
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
    return ShingleSets(offsets=new_offsets, hashes=flat.astype(np.uint64, copy=False))


# Scripts written without spaces between words: word shingles degenerate there.
NO_SPACE_SCRIPTS = r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}]"
SHINGLE_UNITS = ("word", "char", "auto")


def char_unit_mask(normalized: pa.Array, unit: str) -> np.ndarray:
    """Which documents are shingled by characters rather than words.

    ``word``: none; ``char``: all; ``auto`` (the default): a document whose non-space characters
    are at least half from scripts written without spaces (Han, Hiragana, Katakana, Thai, Lao,
    Khmer, Myanmar). Deterministic, and decided per document from its own normalised text, so
    two near-identical texts get the same unit.

    >>> char_unit_mask(pa.array(["日本語のテキスト", "plain english", None]), "auto").tolist()
    [True, False, False]
    """
    if isinstance(normalized, pa.ChunkedArray):
        normalized = normalized.combine_chunks()
    n = len(normalized)
    if unit == "word":
        return np.zeros(n, dtype=bool)
    if unit == "char":
        return np.ones(n, dtype=bool)
    if unit != "auto":
        raise ValueError(f"shingle unit must be one of {SHINGLE_UNITS}, got {unit!r}")
    mask = np.zeros(n, dtype=bool)
    # ASCII text (most of a Latin-script crawl) needs no regex at all.
    candidates = np.flatnonzero(
        ~pc.fill_null(pc.string_is_ascii(normalized), True).to_numpy(zero_copy_only=False)
    )
    if candidates.size == 0:
        return mask
    subset = normalized.take(pa.array(candidates))
    script = pc.count_substring_regex(subset, NO_SPACE_SCRIPTS).to_numpy(zero_copy_only=False)
    spaces = pc.count_substring_regex(subset, r"\s").to_numpy(zero_copy_only=False)
    visible = pc.utf8_length(subset).to_numpy(zero_copy_only=False) - spaces
    mask[candidates] = (visible > 0) & (2 * script >= visible)
    return mask


def char_batch(normalized: pa.Array, seed: int) -> WordBatch:
    """Like :func:`word_batch`, with each non-space character as a token."""
    texts = normalized.to_pylist()
    chars = [[c for c in (t or "") if not c.isspace()] for t in texts]
    counts = np.fromiter((len(c) for c in chars), dtype=np.int64, count=len(chars))
    offsets = np.zeros(len(chars) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    flat = pa.array([c for doc in chars for c in doc], pa.string())
    return WordBatch(offsets=offsets, hashes=hash_words(flat, seed))


def _merge_csr(
    n_docs: int, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> tuple[np.ndarray, np.ndarray]:
    """Merge CSR parts ``(doc indices, offsets, values)`` covering disjoint documents."""
    sizes = np.zeros(n_docs, dtype=np.int64)
    for docs, offsets, _ in parts:
        sizes[docs] = np.diff(offsets)
    merged_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(sizes, out=merged_offsets[1:])
    out = np.empty(int(merged_offsets[-1]), dtype=np.uint64)
    for docs, offsets, values in parts:
        shift = np.repeat(merged_offsets[docs] - offsets[:-1], np.diff(offsets))
        out[np.arange(len(values)) + shift] = values
    return merged_offsets, out


def document_shingles(
    normalized: pa.Array,
    char_mask: np.ndarray,
    ngram: int,
    char_ngram: int,
    seed: int,
    single_spaced: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Shingle hashes of every document (CSR, text order, repeats kept): word ``ngram``-shingles,
    or character ``char_ngram``-shingles where ``char_mask`` says so."""
    if isinstance(normalized, pa.ChunkedArray):
        normalized = normalized.combine_chunks()
    if not char_mask.any():
        return word_shingles(normalized, ngram, seed, single_spaced)
    char_docs = np.flatnonzero(char_mask)
    word_docs = np.flatnonzero(~char_mask)
    parts = []
    if word_docs.size:
        subset = normalized.take(pa.array(word_docs))
        parts.append((word_docs, *word_shingles(subset, ngram, seed, single_spaced)))
    subset = normalized.take(pa.array(char_docs))
    parts.append((char_docs, *combine_word_hashes(char_batch(subset, seed), char_ngram)))
    return _merge_csr(len(normalized), parts)


def word_shingles(
    normalized: pa.Array, ngram: int, seed: int, single_spaced: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Word ``ngram``-shingle hashes of every document (CSR, text order, repeats kept).

    Single-spaced texts take the compiled path (:mod:`~neardup_spark.kernels.compiled_words`),
    others the NumPy one; both give the same hashes.
    """
    if single_spaced:
        return word_shingle_hashes(normalized, ngram, seed, position_multipliers(ngram))
    return combine_word_hashes(word_batch(normalized, seed, single_spaced), ngram)


def shingle_sets(
    normalized: pa.Array, k: int, seed: int, single_spaced: bool = False
) -> ShingleSets:
    """Sorted shingle-hash sets of a batch of normalised texts."""
    offsets, hashes = word_shingles(normalized, k, seed, single_spaced)
    return unique_per_doc(offsets, hashes)


def shingle_strings(normalized_text: str, k: int) -> list[str]:
    """The distinct k-shingles of one normalised text, as strings, in first-seen order.

    For explanations and tests; the job works on hashes.

    >>> shingle_strings("a rose is a rose is a rose", 4)
    ['a rose is a', 'rose is a rose', 'is a rose is']
    >>> shingle_strings("a rose", 4)
    ['a rose']
    """
    words = normalized_text.split()
    if not words:
        return []
    if len(words) < k:
        return [" ".join(words)]
    seen = dict.fromkeys(" ".join(words[i : i + k]) for i in range(len(words) - k + 1))
    return list(seen)
