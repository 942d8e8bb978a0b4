"""Exact-duplicate fingerprints: 64 bits of SHA-256 of the normalised text.

The fingerprint of a document is the first 8 bytes of the SHA-256 digest of the UTF-8 bytes of
its normalised text (:mod:`neardup_spark.kernels.normalize`), read big-endian as a ``uint64``
(scheme :data:`EXACT_HASH`, ``"sha256-64"``). Equal normalised texts always get equal
fingerprints; different texts collide with probability about ``2**-64`` per pair (some
``n**2 / 2**65`` over ``n`` documents: about 3e-2 for ``n = 10**9``, so equal fingerprints
mean identical content with overwhelming probability). Texts that differ in a single character,
such as the article's ``d1`` and ``d2``, get unrelated fingerprints: near-duplicates need
:mod:`neardup_spark.kernels.simhash` or MinHash.

Missing text. A null or empty normalised text (a document with no words) has no fingerprint:
:func:`exact_fingerprints` reports it in a ``valid`` mask and puts 0 in its slot, so that
"no content" is never grouped as a duplicate of other empty documents by accident. (A real
fingerprint can also be 0, with probability ``2**-64``; ``valid`` tells them apart.)

For Spark, which has no unsigned 64-bit type, store ``fingerprints.view(np.int64)``: the same
bits, and :func:`to_hex` accepts the signed form too.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from neardup_spark.kernels.hashing import MASK64

EXACT_HASH = "sha256-64"
# The fingerprint value of a document without one (null or empty normalised text).
NO_FINGERPRINT = 0


class ExactFingerprints(NamedTuple):
    """Result of :func:`exact_fingerprints`; unpacks as ``fingerprints, valid = ...``."""

    fingerprints: np.ndarray  # uint64[n_docs]; 0 where not valid
    valid: np.ndarray  # bool[n_docs]; False for null or empty normalised text


def exact_fingerprint(text: str | None) -> int:
    """The ``sha256-64`` fingerprint of one already normalised text, as an unsigned int.

    A null or empty text has none and returns :data:`NO_FINGERPRINT` (0), as the batch does.

    >>> to_hex(exact_fingerprint("a rose is a rose is a rose"))
    '038505ffaf78ff09'
    >>> exact_fingerprint("")
    0
    """
    if not text:
        return NO_FINGERPRINT
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def exact_fingerprints(normalized: pa.Array | pa.ChunkedArray) -> ExactFingerprints:
    """Fingerprints of a batch of normalised texts: ``(fingerprints uint64, valid bool)``.

    ``fingerprints[d]`` is :func:`exact_fingerprint` of text ``d`` (hashed straight from the
    Arrow UTF-8 buffer, without decoding); ``valid[d]`` is False, and the fingerprint 0, when
    the text is null or empty.

    >>> fps, valid = exact_fingerprints(pa.array(["a rose", None, "", "a rose"]))
    >>> [to_hex(f) for f in fps], valid.tolist()  # doctest: +NORMALIZE_WHITESPACE
    (['a6cbf86779e42a1c', '0000000000000000', '0000000000000000', 'a6cbf86779e42a1c'],
     [True, False, False, True])
    """
    if isinstance(normalized, pa.ChunkedArray):
        normalized = normalized.combine_chunks()
    n = len(normalized)
    fingerprints = np.zeros(n, dtype=np.uint64)
    if n == 0:
        return ExactFingerprints(fingerprints, np.zeros(0, dtype=bool))
    if not (pa.types.is_string(normalized.type) or pa.types.is_large_string(normalized.type)):
        normalized = normalized.cast(pa.large_string())
    offset_type = np.int32 if pa.types.is_string(normalized.type) else np.int64
    _validity, offsets_buf, data_buf = normalized.buffers()[:3]
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[normalized.offset :][: n + 1]
    lengths = np.diff(offsets)
    valid = lengths > 0
    if normalized.null_count:
        valid &= normalized.is_valid().to_numpy(zero_copy_only=False)
    data = memoryview(data_buf) if data_buf is not None else memoryview(b"")
    starts = offsets[:-1].tolist()
    stops = offsets[1:].tolist()
    digests = b"".join(
        hashlib.sha256(data[starts[d] : stops[d]]).digest()[:8]
        for d in np.flatnonzero(valid).tolist()
    )
    fingerprints[valid] = np.frombuffer(digests, dtype=">u8")
    return ExactFingerprints(fingerprints, valid)


def to_hex(fp: int | np.integer) -> str:
    """16 lower-case hex digits, zero padded; a signed 64-bit value (Spark long) is read as its
    unsigned bits.

    >>> to_hex(0x93264C674404019D), to_hex(1), to_hex(-1)
    ('93264c674404019d', '0000000000000001', 'ffffffffffffffff')
    """
    value = int(fp)
    if not -(1 << 63) <= value <= MASK64:
        raise ValueError(f"not a 64-bit value: {value}")
    return f"{value & MASK64:016x}"
