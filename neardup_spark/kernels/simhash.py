"""64-bit SimHash fingerprints (Charikar 2002; Manku, Jain and Das Sarma 2007), for whole batches.

Method. A document is a bag of weighted features (its words, or its word shingles). Each feature
is hashed to 64 bits. Keep 64 running totals, all zero; for every feature and every bit position
``i``, add the feature's weight to total ``i`` if bit ``i`` of its hash is 1 and subtract it if
the bit is 0. Bit ``i`` of the SimHash is 1 iff total ``i`` is positive (a total of exactly 0
gives 0). A document without features gets the fingerprint 0.

Documents whose weighted feature vectors make an angle ``theta`` agree in each bit with
probability about ``1 - theta / pi``, so the Hamming distance ``h`` between two fingerprints
estimates the cosine similarity as ``cos(pi * h / 64)`` (:func:`cosine_from_hamming`).

Bit order. Bit 1 is the MOST significant bit of the ``uint64``, as in the seed article: the
fingerprint ``0x93264c674404019d`` starts with bits ``1 0 0 1 0 0 1 1``. Position ``i``
(1-based) is ``(fp >> (64 - i)) & 1``. :func:`bit_totals` lists totals in that order.

Feature hashes.

* ``"md5"`` (the reference): the first 64 bits, big-endian, of the MD5 digest of the word's
  UTF-8 bytes (:func:`md5_64`). Unseeded. This is what the seed article uses.
* ``"mmh3"`` (the job's default): the project's 64-bit MurmurHash3 of each word under ``seed``
  (:func:`neardup_spark.kernels.shingles.hash_words`); seeded, so runs can use fresh hashes.

Shingle features (:func:`shingle_features`) combine the word hashes of each ``k``-shingle with
:func:`neardup_spark.kernels.shingles.combine_word_hashes`.

Weighting. ``"count"``: a feature weighs its number of occurrences in the document (the job's
default, Manku et al.'s "weight such as its count"). ``"binary"``: each distinct feature weighs
1. The seed article's "words as features, each with weight 1" is the reference
(``hash="md5"``, ``weighting="binary"``, :data:`REFERENCE_HASH`, :data:`REFERENCE_WEIGHTING`):
it reproduces every number the article prints (``d1 -> 93264c674404019d``,
``d2 -> 91060e274484039d``, 7 differing bits, ``d3`` 37 bits from ``d1``). Count weighting
happens to reproduce them too (``d1`` and ``d2`` have no repeated words, and for ``d3`` =
"a rose is a rose is a rose" the counts 3, 3, 2 flip no total's sign).

Layout. Batches use CSR: document ``d`` owns ``hashes[offsets[d]:offsets[d+1]]`` (and the same
slice of ``weights``). Everything is vectorised over documents, with no loop over them: the
feature hashes are unpacked, a chunk of 2048 features at a time, into a ``[chunk, 64]`` bit
matrix (big-endian bytes, so column 0 is bit 1), weighted, and summed per document with
:func:`numpy.add.reduceat`; ``total = 2 * (weight of the 1 bits) - (total weight)``.

Near-duplicate search (Manku et al. 2007, section 3): cut the 64 bits into ``m`` contiguous
blocks (:func:`block_layout`); two fingerprints within ``k`` bits differ in at most ``k`` blocks,
so they agree on all ``m - k`` blocks of at least one of the ``C(m, m - k)`` choices
(:func:`table_combinations`). :func:`table_keys` gives one join key per document and choice.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark.kernels.hashing import GOLDEN64, MASK64, fmix64
from neardup_spark.kernels.normalize import NormalizeOptions, normalize_text
from neardup_spark.kernels.shingles import WordBatch, combine_word_hashes, hash_words, split_words

# Bump when anything here changes the fingerprint of a document or the table keys.
SIMHASH_VERSION = 1
SIMHASH_BITS = 64

HashName = Literal["mmh3", "md5"]
Weighting = Literal["count", "binary"]
HASHES: tuple[str, ...] = ("mmh3", "md5")
WEIGHTINGS: tuple[str, ...] = ("count", "binary")

# The scheme that reproduces the seed article's worked example.
REFERENCE_HASH: HashName = "md5"
REFERENCE_WEIGHTING: Weighting = "binary"

# Features unpacked to bits at a time in _weighted_ones: 2048 x 64 x 8 bytes = 1 MiB.
_CHUNK = 2048


# --------------------------------------------------------------------------------------------
# Feature hashes
# --------------------------------------------------------------------------------------------


def _md5_64_list(words: Sequence[str]) -> np.ndarray:
    if len(words) == 0:
        return np.zeros(0, dtype=np.uint64)
    digests = b"".join(
        hashlib.md5(w.encode("utf-8"), usedforsecurity=False).digest()[:8] for w in words
    )
    return np.frombuffer(digests, dtype=">u8").astype(np.uint64)


def md5_64(words: pa.Array | pa.ChunkedArray | Sequence[str]) -> np.ndarray:
    """First 64 bits (big-endian) of the MD5 digest of each word's UTF-8 bytes, as ``uint64``.

    Takes an Arrow string array (each distinct word is hashed once) or a sequence of ``str``.

    >>> format(int(md5_64(["crawler"])[0]) >> 56, "08b")
    '11001101'
    >>> md5_64(pa.array(["the", "to", "the"])).tolist() == md5_64(["the", "to", "the"]).tolist()
    True
    """
    if isinstance(words, pa.ChunkedArray):
        words = words.combine_chunks()
    if isinstance(words, pa.Array):
        if words.null_count:
            raise ValueError("md5_64: words must not be null")
        if len(words) == 0:
            return np.zeros(0, dtype=np.uint64)
        encoded = pc.dictionary_encode(words)
        distinct = _md5_64_list(encoded.dictionary.to_pylist())
        return distinct[encoded.indices.to_numpy(zero_copy_only=False)]
    return _md5_64_list(list(words))


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _hash_distinct_words(words: pa.Array, seed: int, hash: str) -> np.ndarray:
    """Hash each word of ``words`` (no nulls) with the named feature hash."""
    if hash == "md5":
        return md5_64(words)
    return hash_words(words, seed)


# --------------------------------------------------------------------------------------------
# Features in CSR layout: (offsets int64[n_docs + 1], hashes uint64, weights int64)
# --------------------------------------------------------------------------------------------


def _offsets_from_docs(doc_of: np.ndarray, n_docs: int) -> np.ndarray:
    counts = np.bincount(doc_of, minlength=n_docs) if len(doc_of) else np.zeros(n_docs, np.int64)
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return offsets


def word_features(
    normalized: pa.Array | pa.ChunkedArray,
    seed: int,
    hash: HashName = "mmh3",
    weighting: Weighting = "count",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct words of each normalised text as weighted features, in CSR layout.

    Returns ``(offsets int64[n_docs + 1], hashes uint64, weights int64)``: document ``d``'s
    distinct words have hashes ``hashes[offsets[d]:offsets[d+1]]`` (ordered by first appearance
    of the word in the batch) and weights, the word's count in the document (``"count"``) or 1
    (``"binary"``). Words are split on whitespace (as by
    :func:`~neardup_spark.kernels.shingles.split_words`); null and empty texts have no
    features. ``seed`` only affects ``hash="mmh3"``.

    >>> offsets, hashes, weights = word_features(pa.array(["a rose is a rose", None]), 0)
    >>> offsets.tolist(), weights.tolist()
    ([0, 3, 3], [2, 2, 1])
    """
    _check_choice("hash", hash, HASHES)
    _check_choice("weighting", weighting, WEIGHTINGS)
    if isinstance(normalized, pa.ChunkedArray):
        normalized = normalized.combine_chunks()
    n_docs = len(normalized)
    words, parents = split_words(normalized)
    if len(words) == 0:
        empty = np.zeros(0, dtype=np.uint64)
        return np.zeros(n_docs + 1, dtype=np.int64), empty, np.zeros(0, dtype=np.int64)
    # Number the batch's distinct words; (doc, word id) packs into one int64 key, so a single
    # sort de-duplicates every document at once and counts the occurrences.
    encoded = pc.dictionary_encode(words)
    n_distinct = len(encoded.dictionary)
    if n_docs * n_distinct >= 1 << 63:
        raise ValueError("batch too large for word_features: n_docs * distinct words >= 2**63")
    ids = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    keys, counts = np.unique(parents.astype(np.int64) * n_distinct + ids, return_counts=True)
    doc_of, word_of = np.divmod(keys, n_distinct)
    hashes = _hash_distinct_words(encoded.dictionary, seed, hash)[word_of]
    weights = counts.astype(np.int64) if weighting == "count" else np.ones(len(keys), np.int64)
    return _offsets_from_docs(doc_of, n_docs), hashes, weights


def _distinct_with_counts(
    offsets: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort and de-duplicate each document's values, counting repeats (CSR in, CSR out)."""
    n_docs = len(offsets) - 1
    if len(values) == 0:
        return np.zeros(n_docs + 1, np.int64), np.zeros(0, np.uint64), np.zeros(0, np.int64)
    doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(offsets))
    # Sort by value, then stably by document (a radix sort when document ids fit 16 bits):
    # the same order as np.lexsort((values, doc_of)), several times faster.
    order = np.argsort(values)
    by_doc = doc_of[order]
    if n_docs <= 1 << 16:
        by_doc = by_doc.astype(np.uint16)
    order = order[np.argsort(by_doc, kind="stable")]
    d, v = doc_of[order], values[order]
    first = np.ones(len(v), dtype=bool)
    first[1:] = (d[1:] != d[:-1]) | (v[1:] != v[:-1])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, len(v))).astype(np.int64)
    return _offsets_from_docs(d[starts], n_docs), v[starts], counts


def shingle_features(
    normalized: pa.Array | pa.ChunkedArray,
    k: int,
    seed: int,
    hash: HashName = "mmh3",
    weighting: Weighting = "count",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct word ``k``-shingles of each normalised text as weighted features (CSR).

    Shingle hashes come from :func:`~neardup_spark.kernels.shingles.combine_word_hashes` over
    the word hashes (``"mmh3"`` under ``seed``, the job's shingle hashes; or ``"md5"``). A text
    shorter than ``k`` words is one shingle. Returns ``(offsets, hashes, weights)`` as
    :func:`word_features`, each document's shingles sorted by hash; weights are the shingle's
    count in the document (``"count"``) or 1 (``"binary"``).

    >>> offsets, hashes, weights = shingle_features(pa.array(["a rose is a rose is a rose"]), 4, 0)
    >>> offsets.tolist(), sorted(weights.tolist())
    ([0, 3], [1, 2, 2])
    """
    _check_choice("hash", hash, HASHES)
    _check_choice("weighting", weighting, WEIGHTINGS)
    if isinstance(normalized, pa.ChunkedArray):
        normalized = normalized.combine_chunks()
    words, parents = split_words(normalized)
    batch = WordBatch(
        offsets=_offsets_from_docs(parents, len(normalized)),
        hashes=_hash_distinct_words(words, seed, hash),
    )
    offsets, hashes = combine_word_hashes(batch, k)
    offsets, hashes, counts = _distinct_with_counts(offsets, hashes)
    weights = counts if weighting == "count" else np.ones(len(hashes), np.int64)
    return offsets, hashes, weights


# --------------------------------------------------------------------------------------------
# SimHash
# --------------------------------------------------------------------------------------------


def _as_uint64(values: np.ndarray | Sequence[int] | int) -> np.ndarray:
    """``uint64`` view of fingerprints given as ``uint64``, ``int64`` (Spark longs) or ints."""
    arr = np.asarray(values)
    if arr.dtype == np.int64:
        return arr.view(np.uint64)
    if arr.dtype == np.uint64:
        return arr
    if arr.dtype == object or arr.size == 0 or np.issubdtype(arr.dtype, np.integer):
        return np.asarray(values, dtype=np.uint64)
    raise TypeError(f"expected 64-bit integer fingerprints, got dtype {arr.dtype}")


def _as_weights(weights: np.ndarray | None, n: int) -> np.ndarray | None:
    if weights is None:
        return None
    w = np.asarray(weights)
    if w.shape != (n,):
        raise ValueError(f"weights must have shape ({n},), got {w.shape}")
    if w.dtype == np.bool_ or np.issubdtype(w.dtype, np.integer):
        return w.astype(np.int64, copy=False)
    if np.issubdtype(w.dtype, np.floating):
        return w.astype(np.float64, copy=False)
    raise TypeError(f"weights must be integer or floating, got dtype {w.dtype}")


def _weighted_ones(
    hashes: np.ndarray, weights: np.ndarray | None, starts: np.ndarray
) -> np.ndarray:
    """Per segment and bit, the summed weight (1 if ``weights`` is None) of the features whose
    hash has that bit set: ``[n_segments, 64]``, bit 1 (most significant) first.

    Segments are ``hashes[starts[j]:starts[j+1]]``, the last running to the end; none is empty
    and ``starts[0] == 0``. The features are unpacked to a ``[chunk, 64]`` bit matrix a chunk at
    a time (bounded memory); :func:`numpy.add.reduceat` sums its rows per segment, and a
    segment cut by a chunk boundary gets its partial sums added.
    """
    n_seg, n = len(starts), len(hashes)
    dtype = np.int64 if weights is None else weights.dtype
    ones = np.zeros((n_seg, SIMHASH_BITS), dtype=dtype)
    # Big-endian bytes: unpackbits then yields bit 1 (the most significant) first.
    be_bytes = hashes.astype(">u8").view(np.uint8).reshape(n, 8)
    for lo in range(0, n, _CHUNK):
        hi = min(lo + _CHUNK, n)
        bits = np.unpackbits(be_bytes[lo:hi], axis=1)
        first = int(np.searchsorted(starts, lo, side="right")) - 1
        last = int(np.searchsorted(starts, hi, side="left"))
        local = np.maximum(starts[first:last], lo) - lo
        if weights is None:
            ones[first:last] += np.add.reduceat(bits, local, axis=0, dtype=np.int64)
        else:
            weighted = np.multiply(bits, weights[lo:hi, None], dtype=dtype)
            ones[first:last] += np.add.reduceat(weighted, local, axis=0)
    return ones


def _segment_totals(
    hashes: np.ndarray, weights: np.ndarray | None, starts: np.ndarray
) -> np.ndarray:
    """Signed totals ``[n_segments, 64]`` (bit 1 first) of the segments beginning at ``starts``
    (as in :func:`_weighted_ones`): ``total = 2 * (weight of the 1 bits) - (total weight)``.

    Integer weights are mostly 1 (word counts), so the 1-bits are first counted unweighted,
    the cheap path, and only the features of another weight add ``weight - 1`` times theirs.
    """
    n = len(hashes)
    if weights is None or weights.dtype == np.int64:
        ones = _weighted_ones(hashes, None, starts)
        if weights is None:
            total_weight = np.diff(np.append(starts, n)).astype(np.int64)
        else:
            total_weight = np.add.reduceat(weights, starts)
            others = np.flatnonzero(weights != 1)
            if len(others):
                segment = np.searchsorted(starts, others, side="right") - 1
                segments, first = np.unique(segment, return_index=True)
                ones[segments] += _weighted_ones(hashes[others], weights[others] - 1, first)
    else:
        ones = _weighted_ones(hashes, weights, starts)
        total_weight = np.add.reduceat(weights, starts)
    ones *= 2
    ones -= total_weight[:, None]
    return ones


def _pack_bits(bits: np.ndarray) -> np.ndarray:
    """``bool[n, 64]`` (bit 1 = most significant first) to ``uint64[n]``."""
    packed = np.packbits(bits, axis=1, bitorder="big")
    return np.ascontiguousarray(packed).view(">u8").reshape(-1).astype(np.uint64)


def bit_totals(feature_hashes: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """The 64 signed vote totals of ONE document, bit 1 (most significant) first.

    ``total_i = sum of +w over features whose hash has bit i set, -w over the others``. Integer
    (or absent: all 1) weights give ``int64``; floating weights give ``float64``.

    >>> bit_totals(np.array([0x8000000000000001, 0x8000000000000000], dtype=np.uint64))[[0, 1, 63]]
    array([ 2, -2,  0])
    """
    hashes = _as_uint64(feature_hashes).reshape(-1)
    w = _as_weights(weights, len(hashes))
    if len(hashes) == 0:
        return np.zeros(SIMHASH_BITS, dtype=np.int64 if w is None else w.dtype)
    return _segment_totals(hashes, w, np.zeros(1, dtype=np.int64))[0]


def simhash_batch(
    offsets: np.ndarray, feature_hashes: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """The 64-bit SimHash of every document of a CSR batch: ``uint64[n_docs]``.

    Document ``d`` has features ``feature_hashes[offsets[d]:offsets[d+1]]`` with the same slice
    of ``weights`` (all 1 when ``None``). Bit ``i`` (1 = most significant) is 1 iff the signed
    total of bit ``i`` is positive. Documents without features get 0. Floating weights: a total
    within rounding of 0 may resolve either way.

    >>> offsets, hashes, weights = word_features(pa.array(["a b a", ""]), 0, hash="md5")
    >>> simhash_batch(offsets, hashes, weights).tolist()[1]
    0
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    hashes = _as_uint64(feature_hashes).reshape(-1)
    w = _as_weights(weights, len(hashes))
    if offsets.ndim != 1 or len(offsets) < 1:
        raise ValueError("offsets must be a 1-D array of n_docs + 1 positions")
    if offsets[0] != 0 or offsets[-1] != len(hashes) or np.any(np.diff(offsets) < 0):
        raise ValueError(
            "offsets must start at 0, never decrease and end at len(feature_hashes) "
            f"({len(hashes)}); got {offsets[0]} .. {offsets[-1]}"
        )
    n_docs = len(offsets) - 1
    out = np.zeros(n_docs, dtype=np.uint64)
    nonempty = np.flatnonzero(np.diff(offsets) > 0)
    if len(nonempty) == 0:
        return out
    # Empty documents are left out; each remaining segment then ends where the next one starts.
    totals = _segment_totals(hashes, w, offsets[nonempty])
    out[nonempty] = _pack_bits(totals > 0)
    return out


def simhash_text(
    text: str | None,
    hash: HashName = REFERENCE_HASH,
    weighting: Weighting = REFERENCE_WEIGHTING,
    *,
    seed: int = 0,
    shingle_k: int | None = None,
    options: NormalizeOptions | None = None,
) -> int:
    """SimHash of one raw text, first normalised by :func:`~.normalize.normalize_text`.

    Defaults to the reference scheme (MD5 words, weight 1 each) that reproduces the seed
    article; the job's batch scheme is ``hash="mmh3", weighting="count"`` with its ``seed``.
    With ``shingle_k`` the features are word ``shingle_k``-shingles instead of words. Exactly
    the batch code path, so it equals :func:`simhash_batch` on the same features.

    >>> format(simhash_text("the crawler fetches each page and follows its links to new pages"),
    ...        "016x")
    '93264c674404019d'
    """
    opts = NormalizeOptions() if options is None else options
    normalized = pa.array([normalize_text(text, opts)], type=pa.large_string())
    if shingle_k is None:
        features = word_features(normalized, seed, hash=hash, weighting=weighting)
    else:
        features = shingle_features(normalized, shingle_k, seed, hash=hash, weighting=weighting)
    return int(simhash_batch(*features)[0])


# --------------------------------------------------------------------------------------------
# Distances
# --------------------------------------------------------------------------------------------


def hamming(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Number of differing bits, element-wise (broadcasting): ``int64``.

    Accepts ``uint64`` or ``int64`` (Spark longs: same bits) arrays, or Python ints.

    >>> hamming(np.array([0x93264C674404019D], np.uint64), np.array([0x91060E274484039D]))
    array([7])
    """
    return np.bitwise_count(np.bitwise_xor(_as_uint64(a), _as_uint64(b))).astype(np.int64)


def cosine_from_hamming(h: float | np.ndarray, bits: int = SIMHASH_BITS) -> float | np.ndarray:
    """Cosine similarity estimated from ``h`` differing bits of ``bits``: ``cos(pi * h / bits)``.

    >>> round(float(cosine_from_hamming(3)), 3)
    0.989
    """
    return np.cos(np.pi * np.asarray(h, dtype=np.float64) / bits)


# --------------------------------------------------------------------------------------------
# Block tables for "all pairs within k bits" (Manku et al. 2007, section 3)
# --------------------------------------------------------------------------------------------


def block_layout(blocks: int) -> list[tuple[int, int]]:
    """Cut the 64 bit positions into ``blocks`` contiguous blocks as evenly as possible.

    Returns ``(start, stop)`` per block, half-open, 0-based positions counted from the MOST
    significant bit (position 0 is the article's bit 1); the first ``64 % blocks`` blocks are
    one bit wider.

    >>> block_layout(6)
    [(0, 11), (11, 22), (22, 33), (33, 44), (44, 54), (54, 64)]
    """
    if not 1 <= blocks <= SIMHASH_BITS:
        raise ValueError(f"blocks must be in 1..{SIMHASH_BITS}, got {blocks}")
    base, extra = divmod(SIMHASH_BITS, blocks)
    layout: list[tuple[int, int]] = []
    start = 0
    for j in range(blocks):
        stop = start + base + (1 if j < extra else 0)
        layout.append((start, stop))
        start = stop
    return layout


def _check_tables(blocks: int, k: int) -> None:
    if not (0 <= k < blocks <= SIMHASH_BITS):
        raise ValueError(f"need 0 <= k < blocks <= {SIMHASH_BITS}; got blocks={blocks}, k={k}")


def table_combinations(blocks: int, k: int) -> list[tuple[int, ...]]:
    """Every choice of ``blocks - k`` of the blocks, in lexicographic order: ``C(blocks, k)``.

    Two fingerprints within ``k`` bits differ in at most ``k`` blocks, so they agree on all
    blocks of at least one choice (pigeonhole).

    >>> len(table_combinations(6, 3)), table_combinations(3, 1)
    (20, [(0, 1), (0, 2), (1, 2)])
    """
    _check_tables(blocks, k)
    return list(itertools.combinations(range(blocks), blocks - k))


def table_masks(blocks: int, k: int) -> np.ndarray:
    """``uint64[n_tables]``: the bits each table of :func:`table_combinations` keeps."""
    layout = block_layout(blocks)
    block_masks = [
        (((1 << (stop - start)) - 1) << (SIMHASH_BITS - stop)) & MASK64 for start, stop in layout
    ]
    masks = [sum(block_masks[j] for j in combo) for combo in table_combinations(blocks, k)]
    return np.array(masks, dtype=np.uint64)


def table_keys(fingerprints: np.ndarray, blocks: int, k: int) -> np.ndarray:
    """One 64-bit join key per document and table: ``int64[n_docs, C(blocks, k)]``.

    Table ``t`` keeps the bits ``M_t`` of its chosen blocks; its key is
    ``fmix64(fmix64(fp & M_t) XOR (t + 1) * golden)`` mod 2**64. ``fmix64`` is a bijection, so
    within a table equal keys mean exactly equal kept bits; keys of different tables collide
    with probability about 2**-64. Two fingerprints within ``k`` bits share the key of at least
    one table (same column), so a join on (key) finds every such pair as a candidate.

    >>> keys = table_keys(np.array([0, 1 << 63, 0xFFFF], dtype=np.uint64), 6, 1)
    >>> keys.shape, bool((keys[0] == keys[1]).any()), bool((keys[0] == keys[2]).any())
    ((3, 6), True, False)
    """
    fps = _as_uint64(fingerprints).reshape(-1)
    masks = table_masks(blocks, k)
    salts = np.arange(1, len(masks) + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        salts *= GOLDEN64
    kept = fps[:, None] & masks[None, :]
    return fmix64(fmix64(kept) ^ salts[None, :]).view(np.int64)


def n_tables(blocks: int, k: int) -> int:
    """Number of tables :func:`table_keys` produces, ``C(blocks, k)``, without listing them.

    >>> n_tables(6, 3)
    20
    """
    _check_tables(blocks, k)
    return math.comb(blocks, k)
