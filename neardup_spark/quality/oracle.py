"""The exact all-pairs oracle: every document pair whose word-shingle Jaccard reaches a threshold.

Pure NumPy and SciPy (no Spark). Every document's word ``ngram``-shingle set is built with the
job's own kernels (:func:`shingle_matrix`); a sparse document x shingle matrix ``A`` (only
shingles in two or more documents: no other shingle can be shared) gives all intersection sizes
as ``A @ A.T``, in row blocks of bounded work; Jaccard = ``inter / (|a| + |b| - inter)``.
When that product would touch more than :data:`PREFIX_FILTER_WORK` entries (boilerplate
shingles shared by most documents), the same blocked product runs on each document's
prefix-filter shingles instead and every candidate is then measured exactly: the same pairs,
far less work (:func:`similar_pairs`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from neardup_spark.kernels.normalize import DEFAULT_OPTIONS, NormalizeOptions, normalize_texts
from neardup_spark.kernels.shingles import shingle_sets

# Upper bound on the (row, shingle, other row) triples one block of A @ A.T touches: bounds the
# block product's non-zeros, hence its memory (~ 16 bytes each).
DEFAULT_BLOCK_WORK = 20_000_000
# Above this many (row, shingle, row) triples for the full A @ A.T, the oracle switches to the
# exact prefix filter (same pairs, far less work when boilerplate shingles are in many documents).
PREFIX_FILTER_WORK = 1_000_000_000
SHINGLE_BATCH_DOCS = 5000
PAIR_CHUNK = 100_000


@dataclass(frozen=True)
class ShingleMatrix:
    """Shingle sets of a corpus as a sparse matrix, for exact intersections of any pairs.

    ``sizes[i]`` is ``|S_i|``; ``shared`` is the 0/1 document x shingle CSR matrix restricted to
    shingles present in at least two documents (only those can be in an intersection).
    """

    sizes: np.ndarray  # int64, one per document
    shared: sp.csr_array

    def __len__(self) -> int:
        return int(self.sizes.size)

    def intersections(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """``|S_i ∩ S_j|`` for each pair of row indices."""
        i = np.asarray(i, dtype=np.int64)
        j = np.asarray(j, dtype=np.int64)
        out = np.zeros(i.size, dtype=np.int64)
        for start in range(0, i.size, PAIR_CHUNK):
            stop = start + PAIR_CHUNK
            rows_a = self.shared[i[start:stop]]
            rows_b = self.shared[j[start:stop]]
            out[start:stop] = np.asarray(rows_a.multiply(rows_b).sum(axis=1)).ravel()
        return out

    def jaccard(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Exact Jaccard of each pair (0.0 when both sets are empty, as the kernel)."""
        i = np.asarray(i, dtype=np.int64)
        j = np.asarray(j, dtype=np.int64)
        inter = self.intersections(i, j)
        union = self.sizes[i] + self.sizes[j] - inter
        return np.divide(
            inter, union, out=np.zeros(i.size, dtype=np.float64), where=union > 0
        ).astype(np.float64)


def shingle_matrix(
    texts: pa.Array,
    ngram: int,
    seed: int,
    options: NormalizeOptions = DEFAULT_OPTIONS,
    batch_docs: int = SHINGLE_BATCH_DOCS,
) -> ShingleMatrix:
    """Shingle the texts with the job's kernels (in batches) and build the sparse matrix."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    n = len(texts)
    sizes_parts: list[np.ndarray] = []
    hash_parts: list[np.ndarray] = []
    for start in range(0, n, batch_docs):
        sets = shingle_sets(normalize_texts(texts.slice(start, batch_docs), options), ngram, seed)
        sizes_parts.append(sets.sizes().astype(np.int64))
        hash_parts.append(sets.hashes)
    sizes = np.concatenate(sizes_parts) if sizes_parts else np.zeros(0, dtype=np.int64)
    hashes = np.concatenate(hash_parts) if hash_parts else np.zeros(0, dtype=np.uint64)
    del hash_parts
    _, inverse, counts = np.unique(hashes, return_inverse=True, return_counts=True)
    del hashes
    keep_column = counts >= 2
    column = np.cumsum(keep_column) - 1
    keep = keep_column[inverse]
    rows = np.repeat(np.arange(n, dtype=np.int64), sizes)[keep]
    indices = column[inverse[keep]].astype(np.int32)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    # Each document's hashes are sorted and np.unique's mapping is monotone: canonical CSR.
    shared = sp.csr_array(
        (np.ones(indices.size, dtype=np.int32), indices, indptr),
        shape=(n, int(keep_column.sum())),
    )
    return ShingleMatrix(sizes=sizes, shared=shared)


def _upper_block_products(
    left: sp.csr_array, block_work: int
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``left[block] @ left.T`` for row blocks of bounded work, as ``(i, j, value)`` with
    ``i < j``.

    A row's work is the sum over its columns of the column's number of rows: an upper bound on
    the non-zeros its product row can have. A block's rows add up to about ``block_work``.
    """
    n = left.shape[0]
    if n == 0 or left.nnz == 0:
        return
    left_t = left.T.tocsr()
    frequency = np.diff(left_t.indptr).astype(np.int64)
    work = np.asarray(left @ frequency, dtype=np.int64)
    block = np.cumsum(work) // max(int(block_work), 1)
    cuts = np.flatnonzero(np.diff(block)) + 1
    starts = np.concatenate([[0], cuts]).tolist()
    stops = np.concatenate([cuts, [n]]).tolist()
    for start, stop in zip(starts, stops, strict=True):
        if not work[start:stop].any():
            continue
        product = (left[start:stop] @ left_t).tocsr()
        row = np.repeat(
            np.arange(start, stop, dtype=np.int64), np.diff(product.indptr).astype(np.int64)
        )
        col = product.indices.astype(np.int64)
        upper = col > row
        yield row[upper], col[upper], product.data[upper].astype(np.int64)


def product_work(matrix: ShingleMatrix) -> int:
    """Triples ``(i, shingle, j)`` the full ``A @ A.T`` touches: ``sum df(s)^2``."""
    frequency = np.bincount(matrix.shared.indices, minlength=matrix.shared.shape[1])
    return int((frequency.astype(np.int64) ** 2).sum())


def prefix_matrix(matrix: ShingleMatrix, threshold: float) -> sp.csr_array:
    """The prefix-filter index: each document's rarest shingles, enough that any pair with
    Jaccard ``>= threshold`` shares at least one (Chaudhuri et al. 2006, Bayardo et al. 2007).

    Shingles are ordered by document frequency, rarest first (those in one document only, not
    in ``shared``, before all others); a document of ``s`` shingles keeps its first
    ``s - ceil(t s) + 1``. If ``J(x, y) >= t`` then ``|x ∩ y| >= ceil(t max(|x|, |y|))``, so the
    two prefixes intersect. Columns are those of ``matrix.shared``.
    """
    a = matrix.shared
    n, m = a.shape
    frequency = np.bincount(a.indices, minlength=m)
    order = np.lexsort((np.arange(m), frequency))
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m, dtype=np.int64)
    per_row = np.diff(a.indptr).astype(np.int64)
    row = np.repeat(np.arange(n, dtype=np.int64), per_row)
    ranked = np.lexsort((rank[a.indices], row))  # each row's entries, rarest first
    position = np.arange(a.nnz, dtype=np.int64) - np.repeat(a.indptr[:-1], per_row)
    sizes = matrix.sizes
    # ceil(t s), rounded down when within 1e-6 of an integer: float error may only lengthen a
    # prefix (more candidates), never shorten it.
    overlap = np.ceil(threshold * sizes - 1e-6).astype(np.int64)
    prefix = sizes - overlap + 1
    only_here = sizes - per_row  # shingles of the document found in no other
    keep = (only_here[row] + position) < prefix[row]
    kept = np.sort(ranked[keep])  # entry order of ``a``: rows in order, columns sorted
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(row[kept], minlength=n), out=indptr[1:])
    return sp.csr_array((np.ones(kept.size, dtype=np.int32), a.indices[kept], indptr), shape=(n, m))


def choose_strategy(work: int) -> str:
    """``prefix`` when the full product's work (:func:`product_work`) exceeds
    :data:`PREFIX_FILTER_WORK`, else ``product``.

    >>> choose_strategy(10), choose_strategy(PREFIX_FILTER_WORK + 1)
    ('product', 'prefix')
    """
    return "prefix" if work > PREFIX_FILTER_WORK else "product"


def similar_pairs(
    matrix: ShingleMatrix,
    threshold: float,
    block_work: int = DEFAULT_BLOCK_WORK,
    strategy: str = "auto",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All pairs ``i < j`` with exact Jaccard ``>= threshold``: ``(i, j, jaccard)``, sorted.

    ``product``: every intersection size from ``A[block] @ A.T`` (row blocks of bounded work).
    ``prefix``: candidates from the same blocked product of the :func:`prefix_matrix`, each
    then measured exactly; the same pairs, much less work when a few shingles are in very many
    documents (shared boilerplate). ``auto``: ``product`` unless its work
    (:func:`product_work`) exceeds :data:`PREFIX_FILTER_WORK`.
    """
    if strategy == "auto":
        strategy = choose_strategy(product_work(matrix))
    if strategy not in ("product", "prefix"):
        raise ValueError(f"strategy must be auto, product or prefix, got {strategy!r}")
    sizes = matrix.sizes
    found_i: list[np.ndarray] = [np.zeros(0, np.int64)]
    found_j: list[np.ndarray] = [np.zeros(0, np.int64)]
    found_s: list[np.ndarray] = [np.zeros(0, np.float64)]
    if strategy == "product":
        blocks = _upper_block_products(matrix.shared, block_work)
    else:
        blocks = _upper_block_products(prefix_matrix(matrix, threshold), block_work)
    for row, col, inter in blocks:
        if strategy == "prefix":
            small = np.minimum(sizes[row], sizes[col])
            large = np.maximum(sizes[row], sizes[col])
            fits = small >= threshold * large * (1 - 1e-9)  # J <= small / large
            row, col = row[fits], col[fits]
            inter = matrix.intersections(row, col)
        union = sizes[row] + sizes[col] - inter
        sim = inter / np.maximum(union, 1)
        hit = sim >= threshold
        found_i.append(row[hit])
        found_j.append(col[hit])
        found_s.append(sim[hit])
    i, j, sim = np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_s)
    order = np.lexsort((j, i))
    return i[order], j[order], sim[order].astype(np.float64)
