"""Quality of a dedupe run: planted truth, an exact all-pairs oracle, and human-labelled pairs.

Pure PyArrow, NumPy and SciPy (no Spark): :func:`evaluate` reads a finished ``OUTPUT``
(``clusters/``, ``pairs/``, ``report.json``) and optionally a generated truth table, the corpus
itself and the labelled sets; :func:`format_table` prints the result. Run it as
``neardup evaluate OUTPUT --truth DIR/truth --corpus DIR/corpus --labelled``.

Throughout, ``t`` is the threshold: the argument, else the run's ``config.threshold``. A pair
is *found* when its two documents share a cluster in ``clusters/`` (the same ``cluster_id``),
whether or not ``pairs/`` lists it as an edge. Ratios with an empty denominator are ``None``.

Against the planted truth (``truth``: ``doc_a``, ``doc_b``, ``kind``, ``jaccard``)
    *positives*: truth pairs with ``jaccard >= t``.

    *recall* = found positives / positives.

    *precision* = correct rows of ``pairs/`` / rows of ``pairs/``. A row is correct when its
    exact Jaccard reaches ``t``. Its exact Jaccard is the row's ``jaccard`` column; when that is
    null (methods that do not compute it, e.g. SimHash) it is computed from the corpus when one
    is given; otherwise the row is correct only if the pair is a positive truth pair (truth
    lists only planted (source, copy) pairs, so this is a lower bound). The result's
    ``precision_basis`` says how many rows were judged each way.

    *F1* = 2 P R / (P + R).

    *by kind*, *by band*: over ALL truth pairs of the kind, or of the Jaccard band
    ``[lo, hi)`` (``0.9-1.0`` includes 1.0; ``0.0-0.5`` gathers everything below the listed
    bands), positive or not: pairs, found, recall = found / pairs; per kind also the same
    counts restricted to positives.

    *ARI*: adjusted Rand index (Hubert and Arabie 1985) between the output's clusters and the
    true clustering, the connected components of the positive truth pairs (every other document
    a singleton), over all documents of ``clusters/``. From the contingency table
    ``n_ij`` (documents in output cluster ``i`` and true cluster ``j``), its row sums ``a_i``,
    column sums ``b_j`` and ``n`` documents::

        index = sum C(n_ij, 2),  A = sum C(a_i, 2),  B = sum C(b_j, 2),  E = A B / C(n, 2)
        ARI = (index - E) / ((A + B) / 2 - E)        (1.0 when the denominator is 0)

    ``index / A`` and ``index / B`` are reported too: the pairwise precision and recall of the
    clustering (co-clustered document pairs).

Against the exact oracle (``corpus``: the run's id and text columns)
    Every document's word ``ngram``-shingle set is built with the job's own kernels and the
    run's normalisation and seed; a sparse document x shingle matrix ``A`` (only shingles in
    two or more documents: no other shingle can be shared) gives all intersection sizes as
    ``A @ A.T``, in row blocks of bounded work; Jaccard = ``inter / (|a| + |b| - inter)``.
    When that product would touch more than :data:`PREFIX_FILTER_WORK` entries (boilerplate
    shingles shared by most documents), the same blocked product runs on each document's
    prefix-filter shingles instead and every candidate is then measured exactly: the same
    pairs, far less work (``strategy`` in the result says which ran).

    *positives*: all document pairs ``i < j`` with Jaccard ``>= t``.
    *recall* = found positives / positives; *edge recall* = positives listed in ``pairs/`` /
    positives. *precision* = rows of ``pairs/`` whose exact Jaccard (recomputed, whatever the
    row says) reaches ``t`` / rows. *cluster pair precision* = found positives / document
    pairs sharing a cluster (below 1 when chains join documents that are not similar
    themselves). By band: positives, found, missed. ``jaccard_mismatches`` counts rows whose
    ``jaccard`` column differs from the exact value by more than 1e-9.

Labelled sets (:func:`evaluate_labelled`)
    For each human-labelled pair the decision the job makes on a verified candidate: exact
    Jaccard of the two texts' word ``ngram``-shingle sets (default normalisation) ``>= t``.
    Per label: pairs, mean Jaccard, how many (and what fraction) reach ``t``. Precision =
    positive-labelled pairs reaching ``t`` / all positive- or negative-labelled pairs reaching
    ``t``; recall = positive-labelled pairs reaching ``t`` / positive-labelled pairs.
    Intermediate labels are reported but count for neither.

    ``copycat_judgments/pairs.jsonl``: ``label_raw`` ``"3"`` positive, ``"0.5"`` negative,
    ``"2"`` and ``"1"`` intermediate, anything else ignored (counted).
    ``clough_stevenson/{docs.csv,pairs.csv}``: each answer against its source; ``cut`` and
    ``light`` positive, ``heavy`` and ``non`` negative.
"""

from __future__ import annotations

import csv
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from neardup_spark.columns import (
    CLUSTER_ID,
    DOC_A,
    DOC_B,
    DOC_ID,
    IS_REPRESENTATIVE,
    JACCARD,
    METHOD,
)
from neardup_spark.errors import UserError
from neardup_spark.kernels.jaccard import jaccard
from neardup_spark.kernels.normalize import DEFAULT_OPTIONS, NormalizeOptions, normalize_texts
from neardup_spark.kernels.shingles import shingle_sets
from neardup_spark.quality.tables import markdown_table

REPORT_FILE = "report.json"
TRUTH_COLUMNS = ("doc_a", "doc_b", "kind", "jaccard")
# Jaccard bands of the breakdowns: [lo, hi), the last one closed. The first gathers everything
# below the bands the generator plants.
BAND_EDGES = (0.5, 0.6, 0.7, 0.8, 0.9)
BANDS = ((0.0, 0.5), (0.5, 0.6), (0.6, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0))
DEFAULT_ORACLE_MAX_DOCS = 50_000
# Upper bound on the (row, shingle, other row) triples one block of A @ A.T touches: bounds the
# block product's non-zeros, hence its memory (~ 16 bytes each).
DEFAULT_BLOCK_WORK = 20_000_000
# Above this many (row, shingle, row) triples for the full A @ A.T, the oracle switches to the
# exact prefix filter (same pairs, far less work when boilerplate shingles are in many documents).
PREFIX_FILTER_WORK = 1_000_000_000
SHINGLE_BATCH_DOCS = 5000
PAIR_CHUNK = 100_000
JACCARD_TOLERANCE = 1e-9
LABELLED_ENV = "NEARDUP_LABELLED_DIR"
LABELLED_SEED = 42  # word-hash seed of the labelled evaluation; it does not change a Jaccard


# --------------------------------------------------------------------------------------------
# Small helpers


def _ratio(num: int | float, den: int | float) -> float | None:
    return float(num) / float(den) if den else None


def _f1(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None or precision + recall == 0:
        return None
    return 2 * precision * recall / (precision + recall)


def band_label(lo: float, hi: float) -> str:
    return f"{lo:.1f}-{hi:.1f}"


def band_of(values: np.ndarray) -> np.ndarray:
    """Index into :data:`BANDS` of each Jaccard value (``1.0`` falls in the last band).

    >>> band_of(np.array([0.1, 0.5, 0.79, 0.8, 1.0])).tolist()
    [0, 1, 3, 4, 5]
    """
    return np.searchsorted(np.asarray(BAND_EDGES), values, side="right")


def _pairs_in_groups(counts: np.ndarray) -> int:
    """``sum C(c, 2)`` as an exact Python integer."""
    c = counts.astype(np.int64)
    return int((c * (c - 1) // 2).sum())


def _local_or_uri(path: str) -> tuple[pafs.FileSystem, str]:
    if "://" in path:
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), os.path.abspath(path)


def _join(path: str, name: str) -> str:
    return path.rstrip("/") + "/" + name


def _read_parquet(path: str, what: str, columns: Sequence[str] | None = None) -> pa.Table:
    """A Parquet file or directory (Spark's ``_SUCCESS`` and ``.crc`` files are skipped).

    ``columns``: read only these, after checking that they exist.
    """
    try:
        dataset = ds.dataset(path, format="parquet")
        if columns is not None:
            _require_columns(dataset.schema, columns, what, path)
        return dataset.to_table(columns=list(columns) if columns is not None else None)
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise UserError(f"cannot read {what} {path} as Parquet: {exc}") from None


def _require_columns(schema: pa.Schema, columns: Sequence[str], what: str, path: str) -> None:
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise UserError(
            f"{what} {path} lacks column(s) {', '.join(missing)}; "
            f"columns present: {', '.join(schema.names)}"
        )


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _align_ids(*arrays: pa.Array) -> list[pa.Array]:
    """Cast id arrays to one comparable type: int64 if all are integers, else large string."""
    integers = all(pa.types.is_integer(a.type) for a in arrays)
    target = pa.int64() if integers else pa.large_string()
    return [a if a.type == target else pc.cast(a, target) for a in arrays]


def _index_in(values: pa.Array, universe: pa.Array) -> np.ndarray:
    """Position of each value in ``universe`` (first occurrence), -1 where absent or null."""
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    v, u = _align_ids(values, universe)
    idx = pc.index_in(v, value_set=u, skip_nulls=True).fill_null(-1)
    return np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)


def _examples(values: pa.Array, mask: np.ndarray, limit: int = 3) -> str:
    shown = values.filter(pa.array(mask)).slice(0, limit).to_pylist()
    return ", ".join(repr(v) for v in shown)


def _pair_keys(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Order-free int64 key of each pair of indices in ``range(n)``."""
    lo = np.minimum(a, b).astype(np.int64)
    hi = np.maximum(a, b).astype(np.int64)
    return lo * np.int64(n) + hi


# --------------------------------------------------------------------------------------------
# Adjusted Rand index


def clustering_agreement(labels_a: np.ndarray, labels_b: np.ndarray) -> dict[str, Any]:
    """Pair counts and the adjusted Rand index of two clusterings of the same items.

    ``labels_a`` and ``labels_b`` are integer labels, one per item. Returns ``ari``,
    ``pairs_same_a`` (``A``), ``pairs_same_b`` (``B``), ``pairs_same_both`` (``index``),
    ``precision`` = index / A and ``recall`` = index / B (``a`` taken as the prediction).
    The contingency table is kept sparse: only its non-zero cells are counted.
    """
    a = np.asarray(labels_a, dtype=np.int64)
    b = np.asarray(labels_b, dtype=np.int64)
    if a.shape != b.shape:
        raise ValueError("the two labellings must have the same length")
    n = int(a.size)
    _, a_dense = np.unique(a, return_inverse=True)
    _, b_dense = np.unique(b, return_inverse=True)
    n_b = int(b_dense.max()) + 1 if n else 1
    cells = np.unique(a_dense.astype(np.int64) * n_b + b_dense, return_counts=True)[1]
    index = _pairs_in_groups(cells)
    same_a = _pairs_in_groups(np.bincount(a_dense))
    same_b = _pairs_in_groups(np.bincount(b_dense))
    total = n * (n - 1) // 2
    expected = same_a * same_b / total if total else 0.0
    maximum = (same_a + same_b) / 2
    ari = 1.0 if maximum == expected else (index - expected) / (maximum - expected)
    return {
        "ari": float(ari),
        "items": n,
        "pairs_same_a": same_a,
        "pairs_same_b": same_b,
        "pairs_same_both": index,
        "precision": _ratio(index, same_a),
        "recall": _ratio(index, same_b),
    }


def adjusted_rand_index(labels_a: np.ndarray, labels_b: np.ndarray) -> float:
    """Adjusted Rand index of two labellings; 1.0 for identical partitions.

    >>> round(adjusted_rand_index(np.array([0, 0, 1, 1]), np.array([0, 0, 1, 2])), 6)
    0.571429
    """
    return float(clustering_agreement(labels_a, labels_b)["ari"])


# --------------------------------------------------------------------------------------------
# The exact oracle


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
        strategy = "prefix" if product_work(matrix) > PREFIX_FILTER_WORK else "product"
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


# --------------------------------------------------------------------------------------------
# Reading a run


@dataclass(frozen=True)
class RunSettings:
    """What the evaluation needs from ``report.json``'s ``config``."""

    threshold: float | None
    ngram: int
    seed: int
    id_col: str
    text_col: str
    normalize: NormalizeOptions

    @classmethod
    def from_report(cls, report: dict[str, Any]) -> RunSettings:
        config = report.get("config") or {}
        norm = config.get("normalize") or {}
        known = set(NormalizeOptions.__dataclass_fields__)
        threshold = config.get("threshold")
        return cls(
            threshold=float(threshold) if threshold is not None else None,
            ngram=int(config.get("ngram", 5)),
            seed=int(config.get("seed", 42)),
            id_col=str(config.get("id_col", "id")),
            text_col=str(config.get("text_col", "text")),
            normalize=NormalizeOptions(**{k: bool(v) for k, v in norm.items() if k in known}),
        )


@dataclass
class _Run:
    """A run's tables in index form: documents are rows of ``clusters/``."""

    path: str
    report: dict[str, Any]
    settings: RunSettings
    ids: pa.Array
    labels: np.ndarray  # int64 cluster index per document
    pair_a: np.ndarray  # int64 document index per pairs/ row (-1: unknown id)
    pair_b: np.ndarray
    pair_jaccard: np.ndarray  # float64, NaN where null
    pair_methods: dict[str, int]
    checks: dict[str, int]

    @property
    def n_docs(self) -> int:
        return len(self.ids)


def read_report(output: str) -> dict[str, Any]:
    fs, path = _local_or_uri(_join(output, REPORT_FILE))
    try:
        with fs.open_input_stream(path) as stream:
            data = json.loads(stream.read().decode("utf-8"))
    except FileNotFoundError:
        raise UserError(
            f"{_join(output, REPORT_FILE)} not found: is {output} the OUTPUT of a finished "
            "`neardup dedupe` run?"
        ) from None
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {_join(output, REPORT_FILE)}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{_join(output, REPORT_FILE)} does not hold a JSON object")
    return data


def _read_run(output: str) -> _Run:
    report = read_report(output)
    settings = RunSettings.from_report(report)
    clusters_path = _join(output, "clusters")
    clusters = _read_parquet(clusters_path, "clusters table")
    _require_columns(clusters.schema, (DOC_ID, CLUSTER_ID), "clusters table", clusters_path)
    ids = _column(clusters, DOC_ID)
    cluster_ids = _column(clusters, CLUSTER_ID)
    encoded = pc.dictionary_encode(cluster_ids).indices.fill_null(-1)
    labels = np.asarray(encoded.to_numpy(zero_copy_only=False), dtype=np.int64)
    null_labels = labels < 0
    if null_labels.any():  # a null cluster id: its own singleton
        labels[null_labels] = labels.max(initial=-1) + 1 + np.arange(int(null_labels.sum()))

    pairs_path = _join(output, "pairs")
    pairs = _read_parquet(pairs_path, "pairs table")
    _require_columns(pairs.schema, (DOC_A, DOC_B), "pairs table", pairs_path)
    doc_a, doc_b = _column(pairs, DOC_A), _column(pairs, DOC_B)
    pair_a, pair_b = _index_in(doc_a, ids), _index_in(doc_b, ids)
    if JACCARD in pairs.column_names:
        pair_jaccard = np.asarray(
            pc.cast(_column(pairs, JACCARD), pa.float64()).fill_null(np.nan).to_numpy(),
            dtype=np.float64,
        )
    else:
        pair_jaccard = np.full(pairs.num_rows, np.nan)
    if METHOD in pairs.column_names:
        methods = Counter(str(m) for m in _column(pairs, METHOD).to_pylist())
    else:
        methods = Counter({"(no method column)": pairs.num_rows})

    n = len(ids)
    distinct_ids = pc.count_distinct(ids).as_py() if n else 0
    rep_ids = _index_in(cluster_ids, ids)
    known = (pair_a >= 0) & (pair_b >= 0)
    checks = {
        "duplicate_doc_ids": int(n - distinct_ids),
        "clusters_without_member_id": int(
            np.unique(labels[rep_ids < 0]).size if n else 0
        ),  # cluster_id that is no document's id
        "pairs_unknown_ids": int((~known).sum()),
        "pairs_not_ordered": int(
            pc.sum(pc.cast(pc.greater_equal(doc_a, doc_b), pa.int64())).as_py() or 0
        )
        if pairs.num_rows
        else 0,
        "pairs_across_clusters": int((labels[pair_a[known]] != labels[pair_b[known]]).sum()),
    }
    if IS_REPRESENTATIVE in clusters.column_names and n:
        flag = _column(clusters, IS_REPRESENTATIVE).fill_null(False)
        is_self = pc.equal(*_align_ids(ids, cluster_ids)).fill_null(False)
        checks["representative_flag_wrong"] = int(
            pc.sum(pc.cast(pc.not_equal(flag, is_self), pa.int64())).as_py() or 0
        )
    return _Run(
        path=output,
        report=report,
        settings=settings,
        ids=ids,
        labels=labels,
        pair_a=pair_a,
        pair_b=pair_b,
        pair_jaccard=pair_jaccard,
        pair_methods=dict(methods),
        checks=checks,
    )


def _resolve_dataset(path: str, child: str) -> str:
    """``DIR`` made by ``neardup generate`` stands for ``DIR/child``."""
    if "://" not in path and os.path.isdir(os.path.join(path, child)):
        return os.path.join(path, child)
    return path


def _output_summary(run: _Run) -> dict[str, Any]:
    sizes = np.bincount(run.labels) if run.n_docs else np.zeros(0, dtype=np.int64)
    sizes = sizes[sizes > 0]
    return {
        "docs": run.n_docs,
        "clusters": int(sizes.size),
        "duplicate_clusters": int((sizes > 1).sum()),
        "docs_in_duplicate_clusters": int(sizes[sizes > 1].sum()),
        "largest_cluster": int(sizes.max()) if sizes.size else 0,
        "co_clustered_pairs": _pairs_in_groups(sizes),
        "pairs": int(run.pair_a.size),
        "pairs_by_method": run.pair_methods,
        "pairs_with_jaccard": int((~np.isnan(run.pair_jaccard)).sum()),
    }


# --------------------------------------------------------------------------------------------
# Oracle and truth sections


@dataclass
class _Oracle:
    section: dict[str, Any]
    pair_exact: np.ndarray  # exact Jaccard per pairs/ row
    matrix: ShingleMatrix
    doc_of_run: np.ndarray  # corpus row of each clusters/ row


def _oracle(run: _Run, corpus: str, threshold: float, max_docs: int, block_work: int) -> _Oracle:
    started = time.perf_counter()
    s = run.settings
    table = _read_parquet(corpus, "corpus", columns=(s.id_col, s.text_col))
    n = table.num_rows
    if n > max_docs:
        raise UserError(
            f"the corpus has {n:,} documents; the exact all-pairs oracle is limited to "
            f"{max_docs:,} (raise oracle_max_docs / --oracle-max-docs, or evaluate without "
            "--corpus)"
        )
    corpus_ids = _column(table, s.id_col)
    texts = _column(table, s.text_col)
    run_of_doc = _index_in(corpus_ids, run.ids)
    if (run_of_doc < 0).any():
        missing = run_of_doc < 0
        raise UserError(
            f"{int(missing.sum()):,} corpus ids are not in {run.path}/clusters (e.g. "
            f"{_examples(corpus_ids, missing)}): the corpus does not belong to this output"
        )
    doc_of_run = np.full(run.n_docs, -1, dtype=np.int64)
    doc_of_run[run_of_doc] = np.arange(n, dtype=np.int64)
    if (doc_of_run < 0).any() or np.unique(run_of_doc).size != n:
        raise UserError(
            f"{run.path}/clusters holds {run.n_docs:,} documents but the corpus {n:,} "
            "distinct matching ids: the corpus does not belong to this output"
        )
    labels = run.labels[run_of_doc]

    matrix = shingle_matrix(texts, s.ngram, s.seed, s.normalize)
    shingled = time.perf_counter()
    work = product_work(matrix)
    strategy = "prefix" if work > PREFIX_FILTER_WORK else "product"
    pi, pj, psim = similar_pairs(matrix, threshold, block_work, strategy)
    searched = time.perf_counter()

    found = labels[pi] == labels[pj]
    known = (run.pair_a >= 0) & (run.pair_b >= 0)
    ra = np.where(known, doc_of_run[np.maximum(run.pair_a, 0)], 0)
    rb = np.where(known, doc_of_run[np.maximum(run.pair_b, 0)], 0)
    pair_exact = np.where(known, matrix.jaccard(ra, rb), np.nan)
    listed = np.isin(_pair_keys(pi, pj, n), _pair_keys(ra[known], rb[known], n))
    correct = int((pair_exact >= threshold).sum())
    reported = int(pair_exact.size)
    has_column = ~np.isnan(run.pair_jaccard) & known
    mismatch = np.abs(run.pair_jaccard[has_column] - pair_exact[has_column]) > JACCARD_TOLERANCE
    co_clustered = _pairs_in_groups(np.bincount(labels)) if n else 0

    bands = band_of(psim)
    by_band = []
    for b, (lo, hi) in enumerate(BANDS):
        if hi <= threshold and b != len(BANDS) - 1:
            continue  # no positive can lie in this band
        in_band = bands == b
        positives = int(in_band.sum())
        hits = int((in_band & found).sum())
        by_band.append(
            {
                "band": band_label(lo, hi),
                "positives": positives,
                "found": hits,
                "missed": positives - hits,
                "recall": _ratio(hits, positives),
            }
        )
    recall = _ratio(int(found.sum()), pi.size)
    precision = _ratio(correct, reported)
    section = {
        "corpus": corpus,
        "docs": n,
        "shingles_shared": int(matrix.shared.shape[1]),
        "strategy": strategy,
        "product_work": work,
        "positives": int(pi.size),
        "found": int(found.sum()),
        "missed": int(pi.size - found.sum()),
        "recall": recall,
        "listed_in_pairs": int(listed.sum()),
        "edge_recall": _ratio(int(listed.sum()), pi.size),
        "reported_pairs": reported,
        "reported_correct": correct,
        "precision": precision,
        "f1": _f1(precision, recall),
        "co_clustered_pairs": co_clustered,
        "cluster_pair_precision": _ratio(int(found.sum()), co_clustered),
        "jaccard_checked": int(has_column.sum()),
        "jaccard_mismatches": int(mismatch.sum()),
        "by_band": by_band,
        "seconds": {
            "read_and_shingle": round(shingled - started, 3),
            "all_pairs": round(searched - shingled, 3),
            "total": round(time.perf_counter() - started, 3),
        },
    }
    return _Oracle(section=section, pair_exact=pair_exact, matrix=matrix, doc_of_run=doc_of_run)


def _truth(run: _Run, truth: str, threshold: float, oracle: _Oracle | None) -> dict[str, Any]:
    table = _read_parquet(truth, "truth table", columns=TRUTH_COLUMNS)
    doc_a, doc_b = _column(table, "doc_a"), _column(table, "doc_b")
    ia, ib = _index_in(doc_a, run.ids), _index_in(doc_b, run.ids)
    missing = (ia < 0) | (ib < 0)
    if missing.any():
        raise UserError(
            f"{int(missing.sum()):,} truth pairs name ids that are not in {run.path}/clusters "
            f"(e.g. {_examples(doc_a, missing)}): the truth does not belong to this output"
        )
    kinds = [str(k) for k in _column(table, "kind").to_pylist()]
    sim = np.asarray(
        pc.cast(_column(table, "jaccard"), pa.float64()).fill_null(np.nan).to_numpy(),
        dtype=np.float64,
    )
    found = run.labels[ia] == run.labels[ib]
    positive = sim >= threshold
    n_pos = int(positive.sum())
    n_found = int((positive & found).sum())
    recall = _ratio(n_found, n_pos)

    # Precision over the pairs/ rows.
    n = run.n_docs
    has_column = ~np.isnan(run.pair_jaccard)
    correct = np.zeros(run.pair_a.size, dtype=bool)
    correct[has_column] = run.pair_jaccard[has_column] >= threshold
    null_rows = ~has_column
    basis = {"jaccard_column": int(has_column.sum()), "corpus": 0, "truth_lookup": 0}
    if oracle is not None:
        correct[null_rows] = oracle.pair_exact[null_rows] >= threshold
        basis["corpus"] = int(null_rows.sum())
    elif null_rows.any():
        known = null_rows & (run.pair_a >= 0) & (run.pair_b >= 0)
        keys = _pair_keys(run.pair_a[known], run.pair_b[known], n)
        correct[known] = np.isin(keys, _pair_keys(ia[positive], ib[positive], n))
        basis["truth_lookup"] = int(null_rows.sum())
    reported = int(correct.size)
    precision = _ratio(int(correct.sum()), reported)
    definition = (
        f"rows of pairs/ whose exact Jaccard >= {threshold:g} / rows of pairs/; exact Jaccard = "
        "the row's jaccard column"
    )
    if basis["corpus"]:
        definition += ", or computed from the corpus where it is null"
    if basis["truth_lookup"]:
        definition += (
            "; rows with a null jaccard count as correct only if they are a truth pair with "
            f"jaccard >= {threshold:g} (a lower bound: truth lists only planted pairs)"
        )

    by_kind = []
    for kind in sorted(set(kinds)):
        mask = np.fromiter((k == kind for k in kinds), dtype=bool, count=len(kinds))
        pos = mask & positive
        by_kind.append(
            {
                "kind": kind,
                "pairs": int(mask.sum()),
                "found": int((mask & found).sum()),
                "recall": _ratio(int((mask & found).sum()), int(mask.sum())),
                "positives": int(pos.sum()),
                "positives_found": int((pos & found).sum()),
                "positive_recall": _ratio(int((pos & found).sum()), int(pos.sum())),
                "mean_jaccard": float(np.nanmean(sim[mask])) if mask.any() else None,
            }
        )
    bands = band_of(sim)
    by_band = []
    for b, (lo, hi) in enumerate(BANDS):
        in_band = (bands == b) & ~np.isnan(sim)
        by_band.append(
            {
                "band": band_label(lo, hi),
                "pairs": int(in_band.sum()),
                "found": int((in_band & found).sum()),
                "recall": _ratio(int((in_band & found).sum()), int(in_band.sum())),
            }
        )

    graph = sp.coo_array(
        (np.ones(n_pos, dtype=np.int32), (ia[positive], ib[positive])), shape=(n, n)
    )
    _, true_labels = connected_components(graph, directed=False)
    agreement = clustering_agreement(run.labels, true_labels)

    section: dict[str, Any] = {
        "truth": truth,
        "pairs": int(sim.size),
        "positives": n_pos,
        "positives_found": n_found,
        "recall": recall,
        "reported_pairs": reported,
        "reported_correct": int(correct.sum()),
        "precision": precision,
        "precision_basis": basis,
        "precision_definition": definition,
        "f1": _f1(precision, recall),
        "ari": agreement["ari"],
        "clustering": {
            "true_clusters": int(np.unique(true_labels).size),
            "pairs_same_in_output": agreement["pairs_same_a"],
            "pairs_same_in_truth": agreement["pairs_same_b"],
            "pairs_same_in_both": agreement["pairs_same_both"],
            "pair_precision": agreement["precision"],
            "pair_recall": agreement["recall"],
        },
        "by_kind": by_kind,
        "by_band": by_band,
    }
    if oracle is not None:
        s = run.settings
        if s.ngram == 5 and s.normalize == DEFAULT_OPTIONS:
            exact = oracle.matrix.jaccard(oracle.doc_of_run[ia], oracle.doc_of_run[ib])
            diff = np.abs(exact - sim)
            section["truth_jaccard_check"] = {
                "pairs": int(sim.size),
                "disagreements": int((diff > JACCARD_TOLERANCE).sum()),
                "max_abs_diff": float(np.nanmax(diff)) if diff.size else 0.0,
            }
        else:
            section["truth_jaccard_check"] = {
                "note": "skipped: the run's ngram/normalisation differ from the truth's defaults"
            }
    return section


# --------------------------------------------------------------------------------------------
# Labelled sets


def default_labelled_dir() -> Path:
    """``$NEARDUP_LABELLED_DIR``, else ``../shared/data/labelled`` next to the repository."""
    env = os.environ.get(LABELLED_ENV)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "labelled"


def text_pair_jaccard(
    first: Sequence[str | None],
    second: Sequence[str | None],
    ngram: int = 5,
    options: NormalizeOptions = DEFAULT_OPTIONS,
) -> np.ndarray:
    """Exact Jaccard of the word ``ngram``-shingle sets of each pair of texts (job kernels)."""
    if len(first) != len(second):
        raise ValueError("first and second must have the same length")
    n = len(first)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    texts = pa.array(list(first) + list(second), type=pa.large_string())
    sets = shingle_sets(normalize_texts(texts, options), ngram, LABELLED_SEED)
    return np.fromiter(
        (jaccard(sets.doc(i), sets.doc(n + i)) for i in range(n)), dtype=np.float64, count=n
    )


@dataclass(frozen=True)
class LabelledPairs:
    """A labelled set read into memory: one text pair and one label per row."""

    first: list[str | None]
    second: list[str | None]
    labels: list[str]
    ignored: dict[str, int]
    notes: list[str]


@dataclass(frozen=True)
class LabelledSet:
    """Where a labelled set lives, how to read it, and which labels mean what."""

    name: str
    files: tuple[str, ...]
    positive: tuple[str, ...]
    negative: tuple[str, ...]
    intermediate: tuple[str, ...]
    reader: Callable[[Path], LabelledPairs]

    def role(self, label: str) -> str:
        if label in self.positive:
            return "positive"
        if label in self.negative:
            return "negative"
        return "intermediate"


def read_copycat(directory: Path) -> LabelledPairs:
    """``pairs.jsonl``: ``first_text``, ``second_text``, ``label_raw``."""
    kept = {"3", "2", "1", "0.5"}
    first: list[str | None] = []
    second: list[str | None] = []
    labels: list[str] = []
    ignored: Counter[str] = Counter()
    with open(directory / "pairs.jsonl", encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{directory}/pairs.jsonl line {number}: {exc}") from None
            label = str(row.get("label_raw"))
            if label not in kept:
                ignored[label] += 1
                continue
            first.append(row.get("first_text"))
            second.append(row.get("second_text"))
            labels.append(label)
    return LabelledPairs(first, second, labels, dict(ignored), [])


def read_clough_stevenson(directory: Path) -> LabelledPairs:
    """``docs.csv`` (``File``, ``Task``, ``Category``, ``text``) and ``pairs.csv``
    (``answer_file``, ``source_file``, ``task``, ``category``)."""
    with open(directory / "docs.csv", encoding="utf-8-sig", newline="") as handle:
        texts = {row["File"]: row["text"] for row in csv.DictReader(handle)}
    first: list[str | None] = []
    second: list[str | None] = []
    labels: list[str] = []
    missing = 0
    with open(directory / "pairs.csv", encoding="utf-8-sig", newline="") as handle:
        for row in csv.DictReader(handle):
            answer, source = row["answer_file"], row["source_file"]
            if answer not in texts or source not in texts:
                missing += 1
                continue
            first.append(texts[answer])
            second.append(texts[source])
            labels.append(row["category"].strip())
    notes = [f"{missing} pairs name a file absent from docs.csv"] if missing else []
    return LabelledPairs(first, second, labels, {}, notes)


LABELLED_SETS = (
    LabelledSet(
        name="copycat_judgments",
        files=("pairs.jsonl",),
        positive=("3",),
        negative=("0.5",),
        intermediate=("2", "1"),
        reader=read_copycat,
    ),
    LabelledSet(
        name="clough_stevenson",
        files=("docs.csv", "pairs.csv"),
        positive=("cut", "light"),
        negative=("heavy", "non"),
        intermediate=(),
        reader=read_clough_stevenson,
    ),
)


def _evaluate_set(spec: LabelledSet, directory: Path, threshold: float, ngram: int) -> dict:
    started = time.perf_counter()
    data = spec.reader(directory)
    sims = text_pair_jaccard(data.first, data.second, ngram)
    labels = np.asarray(data.labels, dtype=object)
    hit = sims >= threshold
    order = [*spec.positive, *spec.intermediate, *spec.negative]
    order += sorted(set(data.labels) - set(order))
    rows = []
    for label in order:
        mask = labels == label
        count = int(mask.sum())
        if not count and label not in (*spec.positive, *spec.negative, *spec.intermediate):
            continue
        rows.append(
            {
                "label": label,
                "role": spec.role(label),
                "pairs": count,
                "mean_jaccard": float(sims[mask].mean()) if count else None,
                "median_jaccard": float(np.median(sims[mask])) if count else None,
                "at_threshold": int((mask & hit).sum()),
                "fraction_at_threshold": _ratio(int((mask & hit).sum()), count),
            }
        )
    is_pos = np.isin(labels, spec.positive)
    is_neg = np.isin(labels, spec.negative)
    tp, fn = int((is_pos & hit).sum()), int((is_pos & ~hit).sum())
    fp, tn = int((is_neg & hit).sum()), int((is_neg & ~hit).sum())
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    return {
        "available": True,
        "dir": str(directory),
        "pairs": int(labels.size),
        "positive_labels": list(spec.positive),
        "negative_labels": list(spec.negative),
        "intermediate_labels": list(spec.intermediate),
        "ignored": data.ignored,
        "notes": data.notes,
        "labels": rows,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": precision,
        "recall": recall,
        "f1": _f1(precision, recall),
        "seconds": round(time.perf_counter() - started, 3),
    }


def evaluate_labelled(
    labelled_dir: str | os.PathLike[str] | None = None, threshold: float = 0.8, ngram: int = 5
) -> dict[str, Any]:
    """Our verification decision (exact Jaccard ``>= threshold``) on each human-labelled set.

    ``labelled_dir`` defaults to :func:`default_labelled_dir`. An absent directory (or set) is
    skipped with a note (``available: False``), never an error.
    """
    if not 0.0 < threshold <= 1.0:
        raise UserError(f"threshold must be in (0, 1], got {threshold}")
    if ngram < 1:
        raise UserError(f"ngram must be a positive integer, got {ngram}")
    directory = Path(labelled_dir) if labelled_dir is not None else default_labelled_dir()
    result: dict[str, Any] = {
        "dir": str(directory),
        "threshold": threshold,
        "ngram": ngram,
        "available": directory.is_dir(),
        "sets": {},
    }
    if not directory.is_dir():
        result["note"] = (
            f"labelled data not found at {directory} (set {LABELLED_ENV} or pass the directory); "
            "skipped"
        )
        return result
    for spec in LABELLED_SETS:
        set_dir = directory / spec.name
        absent = [f for f in spec.files if not (set_dir / f).is_file()]
        if absent:
            result["sets"][spec.name] = {
                "available": False,
                "dir": str(set_dir),
                "note": f"missing {', '.join(absent)}; skipped",
            }
            continue
        result["sets"][spec.name] = _evaluate_set(spec, set_dir, threshold, ngram)
    result["available"] = any(s["available"] for s in result["sets"].values())
    if not result["available"]:
        result["note"] = f"no labelled set found under {directory}; skipped"
    return result


# --------------------------------------------------------------------------------------------
# The entry point


def evaluate(
    output: str,
    truth: str | None = None,
    corpus: str | None = None,
    threshold: float | None = None,
    oracle_max_docs: int = DEFAULT_ORACLE_MAX_DOCS,
    labelled: bool = False,
    labelled_dir: str | os.PathLike[str] | None = None,
    block_work: int = DEFAULT_BLOCK_WORK,
) -> dict[str, Any]:
    """Evaluate the dedupe run in ``output`` (see the module docstring for the definitions).

    ``truth``: the truth Parquet (``DIR/truth``, or ``DIR`` itself). ``corpus``: the input
    Parquet (``DIR/corpus`` or ``DIR``), enabling the exact oracle (at most
    ``oracle_max_docs`` documents, else :class:`UserError`). ``labelled`` (or a
    ``labelled_dir``) adds :func:`evaluate_labelled` at the run's threshold and ngram.
    """
    started = time.perf_counter()
    run = _read_run(output)
    s = run.settings
    if threshold is None:
        if s.threshold is None:
            raise UserError(f"{output}/{REPORT_FILE} has no config.threshold; pass a threshold")
        threshold, source = s.threshold, REPORT_FILE
    else:
        source = "argument"
    if not 0.0 < threshold <= 1.0:
        raise UserError(f"threshold must be in (0, 1], got {threshold}")
    result: dict[str, Any] = {
        "output": output,
        "threshold": threshold,
        "threshold_source": source,
        "run": {
            "ngram": s.ngram,
            "seed": s.seed,
            "id_col": s.id_col,
            "text_col": s.text_col,
            "run_threshold": s.threshold,
            "method": (run.report.get("config") or {}).get("method"),
        },
        "summary": _output_summary(run),
        "checks": run.checks,
        "truth": None,
        "oracle": None,
    }
    oracle = None
    if corpus is not None:
        corpus = _resolve_dataset(corpus, "corpus")
        oracle = _oracle(run, corpus, threshold, oracle_max_docs, block_work)
        result["oracle"] = oracle.section
    if truth is not None:
        truth = _resolve_dataset(truth, "truth")
        result["truth"] = _truth(run, truth, threshold, oracle)
    if labelled or labelled_dir is not None:
        result["labelled"] = evaluate_labelled(labelled_dir, threshold=threshold, ngram=s.ngram)
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


# --------------------------------------------------------------------------------------------
# Printing


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _frac(num: int, den: int, value: float | None) -> str:
    return f"{_fmt(value)} ({num:,}/{den:,})"


def format_table(result: dict[str, Any]) -> str:
    """The result as plain-text Markdown: summary, truth, oracle and labelled sections."""
    t = result["threshold"]
    summary = result["summary"]
    out = [
        f"## Evaluation of {result['output']} (threshold {t:g} from {result['threshold_source']})",
        "",
        markdown_table(
            ["documents", "clusters", "duplicate clusters", "docs in them", "pairs/ rows"],
            [
                [
                    summary["docs"],
                    summary["clusters"],
                    summary["duplicate_clusters"],
                    summary["docs_in_duplicate_clusters"],
                    summary["pairs"],
                ]
            ],
        ),
    ]
    problems = {k: v for k, v in result.get("checks", {}).items() if v}
    if problems:
        out += [
            "",
            "**Output contract warnings:** "
            + ", ".join(f"{k} = {v:,}" for k, v in problems.items()),
        ]
    truth = result.get("truth")
    if truth:
        out += [
            "",
            f"### Against the planted truth ({truth['pairs']:,} pairs, "
            f"{truth['positives']:,} with Jaccard >= {t:g})",
            "",
            markdown_table(
                ["metric", "value"],
                [
                    [
                        "pair precision",
                        _frac(
                            truth["reported_correct"], truth["reported_pairs"], truth["precision"]
                        ),
                    ],
                    [
                        "pair recall",
                        _frac(truth["positives_found"], truth["positives"], truth["recall"]),
                    ],
                    ["F1", _fmt(truth["f1"])],
                    ["cluster ARI", _fmt(truth["ari"])],
                    [
                        "co-clustered pair precision / recall",
                        f"{_fmt(truth['clustering']['pair_precision'])} / "
                        f"{_fmt(truth['clustering']['pair_recall'])}",
                    ],
                ],
            ),
            "",
            f"Precision: {truth['precision_definition']}.",
        ]
        check = truth.get("truth_jaccard_check")
        if check and "disagreements" in check:
            out.append(
                f"Truth Jaccard vs the oracle: {check['disagreements']:,} of {check['pairs']:,} "
                f"disagree (max |diff| {check['max_abs_diff']:.2e})."
            )
        out += [
            "",
            "Recall by edit kind (all planted pairs; found = same cluster):",
            "",
            markdown_table(
                ["kind", "pairs", "found", "recall", "mean J", f"J>={t:g}", "found@t", "recall@t"],
                [
                    [
                        r["kind"],
                        r["pairs"],
                        r["found"],
                        r["recall"],
                        r["mean_jaccard"],
                        r["positives"],
                        r["positives_found"],
                        r["positive_recall"],
                    ]
                    for r in truth["by_kind"]
                ],
            ),
            "",
            "Recall by Jaccard band (all planted pairs):",
            "",
            markdown_table(
                ["band", "pairs", "found", "recall"],
                [[r["band"], r["pairs"], r["found"], r["recall"]] for r in truth["by_band"]],
            ),
        ]
    oracle = result.get("oracle")
    if oracle:
        out += [
            "",
            f"### Exact all-pairs oracle ({oracle['docs']:,} documents, "
            f"{oracle['seconds']['total']:.1f} s)",
            "",
            markdown_table(
                ["metric", "value"],
                [
                    [f"pairs with Jaccard >= {t:g}", oracle["positives"]],
                    [
                        "recall (same cluster)",
                        _frac(oracle["found"], oracle["positives"], oracle["recall"]),
                    ],
                    [
                        "edge recall (listed in pairs/)",
                        _frac(
                            oracle["listed_in_pairs"], oracle["positives"], oracle["edge_recall"]
                        ),
                    ],
                    [
                        "precision (exact Jaccard of pairs/ rows)",
                        _frac(
                            oracle["reported_correct"],
                            oracle["reported_pairs"],
                            oracle["precision"],
                        ),
                    ],
                    ["F1", _fmt(oracle["f1"])],
                    [
                        "cluster pair precision",
                        _frac(
                            oracle["found"],
                            oracle["co_clustered_pairs"],
                            oracle["cluster_pair_precision"],
                        ),
                    ],
                    [
                        "jaccard column mismatches",
                        f"{oracle['jaccard_mismatches']:,} of {oracle['jaccard_checked']:,}",
                    ],
                ],
            ),
            "",
            markdown_table(
                ["band", "positives", "found", "missed", "recall"],
                [
                    [r["band"], r["positives"], r["found"], r["missed"], r["recall"]]
                    for r in oracle["by_band"]
                ],
            ),
        ]
    labelled = result.get("labelled")
    if labelled is not None:
        out += ["", format_labelled(labelled)]
    return "\n".join(out) + "\n"


def format_labelled(labelled: dict[str, Any]) -> str:
    """The :func:`evaluate_labelled` result as Markdown tables."""
    t = labelled["threshold"]
    head = f"### Labelled sets (exact Jaccard of word {labelled['ngram']}-shingles >= {t:g})"
    if not labelled["available"]:
        return f"{head}\n\n{labelled.get('note', 'not available')}"
    rows: list[list[Any]] = []
    scores: list[list[Any]] = []
    notes: list[str] = []
    for name, s in labelled["sets"].items():
        if not s["available"]:
            notes.append(f"{name}: {s['note']}")
            continue
        for r in s["labels"]:
            rows.append(
                [
                    name,
                    r["label"],
                    r["role"],
                    r["pairs"],
                    r["mean_jaccard"],
                    r["at_threshold"],
                    r["fraction_at_threshold"],
                ]
            )
        scores.append(
            [name, s["tp"], s["fp"], s["fn"], s["tn"], s["precision"], s["recall"], s["f1"]]
        )
        if s["ignored"]:
            ignored = ", ".join(f"{k!r} x{v}" for k, v in sorted(s["ignored"].items()))
            notes.append(f"{name}: ignored labels {ignored}")
        notes += [f"{name}: {note}" for note in s["notes"]]
    parts = [
        head,
        "",
        markdown_table(["set", "label", "role", "pairs", "mean J", f"J>={t:g}", "fraction"], rows),
        "",
        markdown_table(["set", "TP", "FP", "FN", "TN", "precision", "recall", "F1"], scores),
    ]
    if notes:
        parts += ["", *notes]
    return "\n".join(parts)


# --------------------------------------------------------------------------------------------
# Command line
