"""Words of texts with their character offsets, for contamination matching (NumPy, numba).

A word is a maximal run of non-whitespace characters (``str.isspace``, as ``str.split()``
splits), stripped of leading and trailing punctuation and symbols (Unicode categories ``P*``
and ``S*``; characters outside the Basic Multilingual Plane count as letters); a word left
empty is dropped. Each word is case-folded (``str.casefold``) and hashed with MurmurHash3
(``mmh3.hash64(word, seed, signed=False)[0]``). Its offsets are characters (code points, as
Python indexes a ``str``) in the ORIGINAL text: ``start`` is its first kept character,
``end`` one past its last kept one, so the stripped punctuation lies outside.

One compiled pass over an Arrow string buffer finds the words, their offsets and their
ASCII-lower-cased bytes; only words holding a non-ASCII byte go through Python's ``casefold``,
once per distinct word of the batch.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark.kernels.compiled_words import string_buffers, string_hashes

try:
    from numba import njit
except ImportError:  # pragma: no cover - numba is a pinned dependency
    njit = None

WORD, SPACE, PUNCT = 0, 1, 2
BMP = 0x10000


@functools.cache
def character_classes() -> np.ndarray:
    """Code point (BMP) -> :data:`WORD`, :data:`SPACE` or :data:`PUNCT` (``uint8[65536]``).

    >>> classes = character_classes()
    >>> [int(classes[ord(c)]) for c in "a \\n,$é"]
    [0, 1, 1, 2, 2, 0]
    """
    table = np.zeros(BMP, dtype=np.uint8)
    for cp in range(BMP):
        ch = chr(cp)
        if ch.isspace():
            table[cp] = SPACE
        elif unicodedata.category(ch)[0] in "PS":
            table[cp] = PUNCT
    return table


def _next_code_point(data: np.ndarray, i: int) -> tuple[int, int]:
    """``(code point, its byte length)`` of the UTF-8 character at ``data[i]``."""
    b = int(data[i])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (int(data[i + 1]) & 0x3F), 2
    if b < 0xF0:
        return ((b & 0x0F) << 12) | ((int(data[i + 1]) & 0x3F) << 6) | (int(data[i + 2]) & 0x3F), 3
    cp = ((b & 0x07) << 18) | ((int(data[i + 1]) & 0x3F) << 12)
    return cp | ((int(data[i + 2]) & 0x3F) << 6) | (int(data[i + 3]) & 0x3F), 4


def _scan(
    data: np.ndarray,
    offsets: np.ndarray,
    valid: np.ndarray,
    classes: np.ndarray,
    fill: bool,
    doc_words: np.ndarray,
    doc_chars: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    byte_offsets: np.ndarray,
    lowered: np.ndarray,
    non_ascii: np.ndarray,
) -> int:
    """Count (``fill`` False) or write (``fill`` True) the words of every text; returns the
    number of words. ``doc_words[d + 1]``: words up to text ``d``; ``doc_chars[d]``: its
    characters. With ``fill``: each word's character ``starts``/``ends``, its bytes
    ASCII-lower-cased into ``lowered`` at ``byte_offsets``, and whether it holds a non-ASCII
    byte."""
    n = offsets.shape[0] - 1
    w = 0
    pos = 0
    for d in range(n):
        chars = 0
        if valid[d]:
            i = offsets[d]
            end = offsets[d + 1]
            in_word = False
            kept_start = -1  # first kept (non-punctuation) character of the current word
            kept_byte = 0
            last_end = 0  # one past its last kept character, and byte
            last_byte = 0
            while i <= end:
                if i < end:
                    cp, size = _next_code_point(data, i)
                    cls = classes[cp] if cp < BMP else WORD
                else:
                    cp, size, cls = 32, 1, SPACE  # the end closes the last word
                if cls == SPACE:
                    if in_word and kept_start >= 0:
                        if fill:
                            starts[w] = kept_start
                            ends[w] = last_end
                            high = False
                            for b in range(kept_byte, last_byte):
                                c = data[b]
                                high = high or c >= 128
                                lowered[pos] = c + 32 if 65 <= c <= 90 else c
                                pos += 1
                            byte_offsets[w + 1] = pos
                            non_ascii[w] = high
                        w += 1
                    in_word = False
                    kept_start = -1
                else:
                    in_word = True
                    if cls == WORD:
                        if kept_start < 0:
                            kept_start = chars
                            kept_byte = i
                        last_end = chars + 1
                        last_byte = i + size
                if i < end:
                    chars += 1
                i += size
        doc_chars[d] = chars
        doc_words[d + 1] = w
    return w


if njit is not None:
    _next_code_point = njit(inline="always", cache=True)(_next_code_point)
    _scan = njit(cache=True, nogil=True)(_scan)


@dataclass(frozen=True)
class Words:
    """The words of ``n`` texts, in text order (CSR by ``doc_offsets``): ``hashes`` (uint64),
    character ``starts`` and ``ends`` (int64, end exclusive) in the original text; and each
    text's length in characters (``doc_chars``)."""

    doc_offsets: np.ndarray
    hashes: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    doc_chars: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.doc_offsets)


def text_words(texts: pa.Array, seed: int = 0) -> Words:
    """The words of each text (null: none), hashed with ``seed``.

    >>> w = text_words(pa.array(["Hello,  WORLD!", None, "(x)"]))
    >>> w.doc_offsets.tolist(), w.starts.tolist(), w.ends.tolist()
    ([0, 2, 2, 3], [0, 8, 1], [5, 13, 2])
    >>> import mmh3
    >>> int(w.hashes[1]) == mmh3.hash64("world", 0, signed=False)[0]
    True
    """
    data, offsets, valid = string_buffers(texts)
    n = offsets.shape[0] - 1
    classes = character_classes()
    doc_words = np.zeros(n + 1, dtype=np.int64)
    doc_chars = np.zeros(n, dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    m = _scan(
        data,
        offsets,
        valid,
        classes,
        False,
        doc_words,
        doc_chars,
        none,
        none,
        none,
        np.zeros(0, dtype=np.uint8),
        np.zeros(0, dtype=np.bool_),
    )
    starts = np.empty(m, dtype=np.int64)
    ends = np.empty(m, dtype=np.int64)
    byte_offsets = np.zeros(m + 1, dtype=np.int64)
    lowered = np.empty(max(int(offsets[-1] - offsets[0]) if n else 0, 1), dtype=np.uint8)
    non_ascii = np.zeros(m, dtype=np.bool_)
    _scan(
        data,
        offsets,
        valid,
        classes,
        True,
        doc_words,
        doc_chars,
        starts,
        ends,
        byte_offsets,
        lowered,
        non_ascii,
    )
    words = pa.LargeStringArray.from_buffers(
        m, pa.py_buffer(byte_offsets), pa.py_buffer(lowered[: int(byte_offsets[-1])])
    )
    hashes = string_hashes(words, seed) if m else np.zeros(0, dtype=np.uint64)
    if non_ascii.any():
        hashes[non_ascii] = folded_hashes(words.filter(pa.array(non_ascii)), seed)
    return Words(
        doc_offsets=doc_words, hashes=hashes, starts=starts, ends=ends, doc_chars=doc_chars
    )


def folded_hashes(words: pa.Array, seed: int) -> np.ndarray:
    """The hash of each word case-folded (Python's ``casefold``, once per distinct word)."""
    encoded = pc.dictionary_encode(words)
    distinct = encoded.dictionary.to_pylist()
    folded = pa.array([word.casefold() for word in distinct], type=pa.large_string())
    return string_hashes(folded, seed)[encoded.indices.to_numpy(zero_copy_only=False)]


def _cut(
    data: np.ndarray,
    offsets: np.ndarray,
    valid: np.ndarray,
    range_offsets: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    separator: np.ndarray,
    out: np.ndarray,
    out_offsets: np.ndarray,
    out_chars: np.ndarray,
) -> None:
    """Copy each text less its character ranges (sorted, disjoint), the pieces left joined by
    ``separator``; its characters into ``out_chars``."""
    n = offsets.shape[0] - 1
    pos = 0
    for d in range(n):
        r = range_offsets[d]
        r_end = range_offsets[d + 1]
        chars = 0
        kept = 0
        cut_before = False
        if valid[d]:
            i = offsets[d]
            end = offsets[d + 1]
            while i < end:
                _, size = _next_code_point(data, i)
                while r < r_end and chars >= ends[r]:
                    r += 1
                inside = r < r_end and starts[r] <= chars
                if inside:
                    cut_before = True
                else:
                    if cut_before and kept > 0:
                        for s in range(separator.shape[0]):
                            out[pos] = separator[s]
                            pos += 1
                        kept += separator.shape[0]
                    cut_before = False
                    for b in range(i, i + size):
                        out[pos] = data[b]
                        pos += 1
                    kept += 1
                chars += 1
                i += size
        out_chars[d] = kept
        out_offsets[d + 1] = pos


if njit is not None:
    _cut = njit(cache=True, nogil=True)(_cut)


def cut_texts(
    texts: pa.Array,
    range_offsets: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    separator: str = "\n",
) -> tuple[pa.Array, np.ndarray]:
    """Each text less its character ranges (CSR ``range_offsets``; sorted, disjoint, end
    exclusive), the pieces left joined by ``separator`` (ASCII); and each result's length in
    characters. A null text stays null.

    >>> out, chars = cut_texts(pa.array(["héllo big world", None]), np.array([0, 1, 1]),
    ...                        np.array([5]), np.array([10]))
    >>> out.to_pylist(), chars.tolist()
    (['héllo\\nworld', None], [11, 0])
    """
    data, offsets, valid = string_buffers(texts)
    n = offsets.shape[0] - 1
    sep = np.frombuffer(separator.encode("ascii"), dtype=np.uint8)
    n_ranges = np.diff(range_offsets)
    out = np.empty(
        max(int(offsets[-1] - offsets[0]) + len(sep) * int(n_ranges.sum()), 1), dtype=np.uint8
    )
    out_offsets = np.zeros(n + 1, dtype=np.int64)
    out_chars = np.zeros(n, dtype=np.int64)
    _cut(
        data,
        offsets,
        valid,
        range_offsets.astype(np.int64),
        starts.astype(np.int64),
        ends.astype(np.int64),
        sep,
        out,
        out_offsets,
        out_chars,
    )
    null_count = n - int(valid.sum())
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if null_count else None
    result = pa.LargeStringArray.from_buffers(
        n,
        pa.py_buffer(out_offsets),
        pa.py_buffer(out[: int(out_offsets[-1])]),
        validity,
        null_count,
    )
    return (result if result.type == texts.type else result.cast(texts.type)), out_chars
