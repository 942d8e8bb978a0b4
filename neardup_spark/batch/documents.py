"""The per-document function: normalise, fingerprint and sketch one Arrow batch of documents.

Fusing the text features with the method's sketch means each text is read, normalised and
shingled once, and the normalised text never reaches Spark's cache (at 100,000 documents that
was 230 MB written and read back).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from neardup_spark.batch import BatchFn
from neardup_spark.batch.minhash import minhash_columns_fn, minhash_sets_fn
from neardup_spark.batch.simhash import simhash_columns_fn
from neardup_spark.batch.text import decode_utf8, text_columns_fn
from neardup_spark.columns import DOC_ID, NORMALIZED, SHINGLES, SKETCH
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.arrow_buffers import binary_from_csr, binary_from_rows
from neardup_spark.kernels.normalize import normalize_texts
from neardup_spark.kernels.shingles import char_unit_mask

# The bulky MinHash columns: a shingle set is ~4 KB for a 500-word page.
SET_COLUMNS = frozenset({SHINGLES, SKETCH})


def method_columns_fn(config: DedupeConfig) -> BatchFn | None:
    """The method's sketch function over the text columns (None for ``exact``)."""
    if config.method == "minhash":
        return minhash_columns_fn(config)
    if config.method == "simhash":
        return simhash_columns_fn(config)
    return None


def documents_columns_fn(
    config: DedupeConfig, with_sets: bool = True, keep_normalized: bool | None = None
) -> BatchFn:
    """One batch of ``doc_id``, ``text`` -> the text columns
    (:data:`~neardup_spark.batch.text.TEXT_COLUMNS`; ``normalized`` only with
    ``exact_compare_text`` or ``keep_normalized``) then the method's columns (``shingles``,
    ``sketch`` and ``band_keys`` for MinHash, ``shingles`` and ``sketch`` only ``with_sets``;
    ``simhash`` and ``band_keys`` for SimHash; none for exact). Captures plain parameters
    only."""
    text_columns = text_columns_fn(config.normalize, config.shingle_unit)
    method_columns = method_columns_fn(config)
    if keep_normalized is None:
        keep_normalized = config.exact_compare_text

    def run(batch: pa.RecordBatch) -> pa.RecordBatch:
        texts = text_columns(batch)
        names = [n for n in texts.schema.names if n != NORMALIZED or keep_normalized]
        columns = [texts.column(n) for n in names]
        if method_columns is not None:
            sketched = method_columns(texts)
            extra = [
                n
                for n in sketched.schema.names
                if n != DOC_ID and (with_sets or n not in SET_COLUMNS)
            ]
            names += extra
            columns += [sketched.column(n) for n in extra]
        return pa.RecordBatch.from_arrays(columns, names=names)

    return run


def shingle_sets_fn(
    config: DedupeConfig, normalized: bool = False
) -> Callable[[pa.Array], tuple[pa.Array, pa.Array]]:
    """Texts -> their ``shingles`` and ``sketch`` columns, the values :func:`documents_columns_fn`
    computes for them (MinHash), without the columns verification does not read (exact
    fingerprint, counts, band keys: ~8 of ~55 us a page). With ``normalized`` the texts are
    already normalised (as the nightly index stores them) and are shingled as they are."""
    options, unit = config.normalize, config.shingle_unit
    sets_of = minhash_sets_fn(config)

    def run(texts: pa.Array) -> tuple[pa.Array, pa.Array]:
        ready = texts if normalized else normalize_texts(decode_utf8(texts)[0], options)
        offsets, shingles, sketches = sets_of(ready, char_unit_mask(ready, unit))
        return binary_from_csr(offsets, shingles), binary_from_rows(sketches)

    return run


def normalized_texts_fn(config: DedupeConfig) -> Callable[[pa.Array], pa.Array]:
    """Texts (string or binary) -> their normalised form, as the per-document pass makes it."""
    options = config.normalize

    def run(texts: pa.Array) -> pa.Array:
        return normalize_texts(decode_utf8(texts)[0], options)

    return run
