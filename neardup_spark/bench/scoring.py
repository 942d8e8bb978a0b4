"""Recall and precision of each row of one size, computed the same way for every row from its
``pairs/`` Parquet (``doc_a``, ``doc_b``), see :func:`pair_quality`:

* *precision* = distinct found pairs whose exact Jaccard (word 5-shingles, default
  normalisation, the project's kernels) reaches the threshold / distinct found pairs;
* *recall* = truth pairs with ``jaccard >= threshold`` whose two documents are connected by the
  found pairs (connected components, i.e. union-find) / such truth pairs.

A row reporting more than :data:`PRECISION_SAMPLE` distinct pairs has its precision measured on
a uniform sample of that many (said in the table's notes). neardup rows are also scored with
:func:`neardup_spark.quality.evaluate.evaluate` (its recall is the same number; its precision
reads the ``jaccard`` column); the result is kept in ``results.json`` (up to
:data:`EVALUATE_MAX_DOCS` documents).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from neardup_spark.bench.children import MLLIB_TOKEN_GAPS, NGRAM
from neardup_spark.bench.corpora import Corpus
from neardup_spark.bench.settings import UNSCORED_ROWS
from neardup_spark.errors import UserError
from neardup_spark.quality.evaluate import evaluate, shingle_matrix

# Exact Jaccard (precision) is measured on at most this many distinct pairs per row: all of
# them at the default sizes except for rows that report many pairs (e.g. SimHash).
PRECISION_SAMPLE = 100_000
# neardup rows also scored by `neardup evaluate` (its recall is the table's), up to this size:
# it holds every document's cluster in memory, several GB at ten million documents.
EVALUATED_ROWS = ("neardup-minhash", "neardup-simhash")
EVALUATE_MAX_DOCS = 2_000_000


def score_rows(
    records: list[dict[str, Any]],
    corpus: Corpus,
    threshold: float,
    precision_sample: int = PRECISION_SAMPLE,
) -> None:
    """Add pairs/recall/precision to the finished rows of one size (in place).

    Exact Jaccard is measured for every distinct pair of a row, or for a uniform sample of
    ``precision_sample`` of them when it found more; only the texts of the documents in
    measured pairs are read, and a pair found by several rows is measured once.
    """
    dataset = ds.dataset(str(corpus.corpus), format="parquet")
    ids = dataset.to_table(columns=["id"]).column("id").combine_chunks()
    truth = read_truth(corpus.truth, ids)
    found: dict[int, FoundPairs] = {}
    for i, record in enumerate(records):
        if record["status"] == "ok" and record["row"] not in UNSCORED_ROWS:
            pairs = read_found_pairs(record, ids, precision_sample)
            if pairs is not None:
                found[i] = pairs
    if found:
        lookup = measure_pairs(dataset, found.values(), len(ids))
        for i, pairs in found.items():
            add_quality(records[i], pair_quality_of(pairs, lookup, truth, threshold, len(ids)))
    add_peer_notes(records, dataset, corpus, threshold)


# --------------------------------------------------------------------------------------------
# Pairs as document indices


def unique_pairs(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Order-free distinct pairs of document indices, self-pairs dropped.

    Returns ``(lo, hi, first)``: the pairs with ``lo < hi`` and, for each, the position of its
    first occurrence in the input.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keep = np.flatnonzero(lo != hi)
    if keep.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    keys = np.stack([lo[keep], hi[keep]], axis=1)
    _, first = np.unique(keys, axis=0, return_index=True)
    first = np.sort(first)
    return lo[keep][first], hi[keep][first], keep[first]


def index_of(values: pa.Array, universe: pa.Array) -> np.ndarray:
    """Position of each of ``values`` in ``universe`` (compared as strings), -1 if absent."""
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    values = pc.cast(values, pa.string())
    universe = pc.cast(universe, pa.string())
    index = pc.index_in(values, value_set=universe).fill_null(-1)
    return np.asarray(index.to_numpy(zero_copy_only=False), dtype=np.int64)


def read_columns(path: Path, columns: Sequence[str]) -> pa.Table:
    """``columns`` of a Parquet file or directory."""
    return ds.dataset(str(path), format="parquet").to_table(columns=list(columns))


def sample_positions(size: int, limit: int, seed: int = 0) -> np.ndarray:
    """Sorted positions of a uniform sample of ``limit`` of ``range(size)`` (all if fewer)."""
    if size <= limit:
        return np.arange(size)
    return np.sort(np.random.default_rng(seed).choice(size, limit, replace=False))


@dataclass(frozen=True)
class TruthPairs:
    """The planted pairs as document indices, with their exact Jaccard."""

    a: np.ndarray
    b: np.ndarray
    jaccard: np.ndarray


@dataclass(frozen=True)
class FoundPairs:
    """One row's distinct pairs (``lo < hi``, document indices) and the positions of those
    whose exact Jaccard is measured (``measured``: all, or a uniform sample)."""

    lo: np.ndarray
    hi: np.ndarray
    measured: np.ndarray


def read_truth(path: Path, ids: pa.Array) -> TruthPairs:
    """The truth pairs of a generated corpus, as indices into ``ids``."""
    truth = read_columns(path, ["doc_a", "doc_b", "jaccard"])
    return TruthPairs(
        a=index_of(truth.column("doc_a").combine_chunks(), ids),
        b=index_of(truth.column("doc_b").combine_chunks(), ids),
        jaccard=np.asarray(truth.column("jaccard").to_numpy(), dtype=np.float64),
    )


def read_found_pairs(
    record: dict[str, Any], ids: pa.Array, precision_sample: int
) -> FoundPairs | None:
    """The distinct pairs of a row's ``pairs/`` as indices into ``ids`` (pairs naming an unknown
    id are counted in ``pairs_unknown_ids`` and left out); None, with the row marked failed,
    when they cannot be read."""
    try:
        pairs = read_columns(Path(record["output"]) / "pairs", ["doc_a", "doc_b"])
    except (OSError, pa.ArrowInvalid) as exc:
        record.update(status="failed", error=f"cannot read pairs: {exc}")
        return None
    pa_idx = index_of(pairs.column("doc_a").combine_chunks(), ids)
    pb_idx = index_of(pairs.column("doc_b").combine_chunks(), ids)
    record["pair_rows"] = int(pairs.num_rows)
    record["pairs_unknown_ids"] = int(((pa_idx < 0) | (pb_idx < 0)).sum())
    known = (pa_idx >= 0) & (pb_idx >= 0)
    lo, hi, _ = unique_pairs(pa_idx[known], pb_idx[known])
    return FoundPairs(lo, hi, sample_positions(lo.size, precision_sample))


# --------------------------------------------------------------------------------------------
# Exact Jaccard of the measured pairs


def exact_pair_jaccard(texts: pa.Array, a: Any, b: Any) -> np.ndarray:
    """Exact Jaccard of word 5-shingle sets (default normalisation, the project's kernels) of
    the pairs ``(a[i], b[i])`` of row indices into ``texts``."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if a.size == 0:
        return np.zeros(0, dtype=np.float64)
    involved, local = np.unique(np.concatenate([a, b]), return_inverse=True)
    matrix = shingle_matrix(texts.take(pa.array(involved)), NGRAM, seed=42)
    return matrix.jaccard(local[: a.size], local[a.size :])


@dataclass(frozen=True)
class PairLookup:
    """Exact Jaccard of measured pairs, by key ``lo * n_docs + hi`` (``keys`` sorted)."""

    keys: np.ndarray
    sims: np.ndarray
    n_docs: int

    def similarities(self, pairs: FoundPairs) -> np.ndarray:
        """The exact Jaccard of each of ``pairs`` (NaN where not measured)."""
        pair_sims = np.full(pairs.lo.size, np.nan)
        measured = pairs.measured
        if self.keys.size and measured.size:
            wanted = pairs.lo[measured] * self.n_docs + pairs.hi[measured]
            pos = np.minimum(np.searchsorted(self.keys, wanted), self.keys.size - 1)
            pair_sims[measured] = np.where(self.keys[pos] == wanted, self.sims[pos], np.nan)
        return pair_sims


def measure_pairs(dataset: ds.Dataset, found: Iterable[FoundPairs], n_docs: int) -> PairLookup:
    """Every distinct measured pair of every row measured once, reading only the texts of the
    documents involved."""
    rows = list(found)
    lo, hi, _ = unique_pairs(
        np.concatenate([f.lo[f.measured] for f in rows]),
        np.concatenate([f.hi[f.measured] for f in rows]),
    )
    involved, local = np.unique(np.concatenate([lo, hi]), return_inverse=True)
    texts = dataset.take(pa.array(involved), columns=["text"]).column("text").combine_chunks()
    sims = exact_pair_jaccard(texts, local[: lo.size], local[lo.size :])
    keys = lo * n_docs + hi
    order = np.argsort(keys)
    return PairLookup(keys[order], sims[order], n_docs)


# --------------------------------------------------------------------------------------------
# Recall and precision


def pair_quality(
    found_a: Any,
    found_b: Any,
    found_jaccard: Any,
    truth_a: Any,
    truth_b: Any,
    truth_jaccard: Any,
    threshold: float,
    n_docs: int,
) -> dict[str, Any]:
    """Precision and recall of found pairs against exact Jaccard and the truth.

    Documents are indices in ``range(n_docs)``. ``found_jaccard[i]`` is the exact Jaccard of
    found pair ``i``, NaN when it was not measured. Repeated pairs (either order) count once;
    self-pairs are ignored.

    * precision = measured distinct found pairs with exact Jaccard ``>= threshold`` / measured
      distinct found pairs (all of them, or a uniform sample: ``pairs_measured``);
    * recall = truth pairs with ``jaccard >= threshold`` whose documents lie in one connected
      component of all the found pairs (union-find) / truth pairs with ``jaccard >= threshold``.
    """
    lo, hi, first = unique_pairs(found_a, found_b)
    sim = np.asarray(found_jaccard, dtype=np.float64)[first]
    measured = int((~np.isnan(sim)).sum())
    correct = int((sim >= threshold).sum())
    graph = coo_matrix((np.ones(lo.size, dtype=np.int8), (lo, hi)), shape=(n_docs, n_docs))
    _, labels = connected_components(graph, directed=False)
    ta = np.asarray(truth_a, dtype=np.int64)
    tb = np.asarray(truth_b, dtype=np.int64)
    positive = np.asarray(truth_jaccard, dtype=np.float64) >= threshold
    found = labels[ta[positive]] == labels[tb[positive]]
    positives = int(positive.sum())
    return {
        "pairs": int(lo.size),
        "pairs_measured": measured,
        "pairs_correct": correct,
        "precision": correct / measured if measured else None,
        "positives": positives,
        "positives_found": int(found.sum()),
        "recall": float(found.sum()) / positives if positives else None,
    }


def pair_quality_of(
    pairs: FoundPairs, lookup: PairLookup, truth: TruthPairs, threshold: float, n_docs: int
) -> dict[str, Any]:
    """:func:`pair_quality` of one row's pairs, their exact Jaccard looked up in ``lookup``."""
    sims = lookup.similarities(pairs)
    return pair_quality(
        pairs.lo, pairs.hi, sims, truth.a, truth.b, truth.jaccard, threshold, n_docs
    )


def add_quality(record: dict[str, Any], quality: dict[str, Any]) -> None:
    """A row's pairs, recall and precision (and a note when precision was sampled)."""
    record.update(
        pairs=quality["pairs"],
        recall=quality["recall"],
        precision=quality["precision"],
        quality=quality,
    )
    if quality["pairs_measured"] < quality["pairs"]:
        add_note(
            record,
            f"precision measured on a uniform sample of {quality['pairs_measured']:,} "
            f"of {quality['pairs']:,} distinct pairs",
        )


def add_note(record: dict[str, Any], note: str) -> None:
    """Append ``note`` to the row's notes (printed under the table)."""
    record["note"] = f"{record['note']}; {note}" if record.get("note") else note


# --------------------------------------------------------------------------------------------
# What only some rows have: MLlib's dropped documents, neardup's own evaluation


def mllib_dropped(texts: pa.Array) -> int:
    """Documents with fewer than 5 tokens under the spark-mllib row's tokenizer."""
    tokens = pc.split_pattern_regex(pc.utf8_lower(texts.fill_null("")), pattern=MLLIB_TOKEN_GAPS)
    flat = pc.list_flatten(tokens)
    parents = pc.list_parent_indices(tokens)
    nonempty = pc.greater(pc.utf8_length(flat), 0)
    counts = np.bincount(
        parents.filter(nonempty).to_numpy(zero_copy_only=False), minlength=len(texts)
    )
    return int((counts < NGRAM).sum())


def mllib_dropped_in(dataset: ds.Dataset) -> int:
    """:func:`mllib_dropped` over a whole corpus, batch by batch."""
    return sum(
        mllib_dropped(batch.column(0))
        for batch in dataset.to_batches(columns=["text"], batch_size=20_000)
    )


def evaluate_neardup(output: str, corpus: Corpus, threshold: float) -> dict[str, Any]:
    """:func:`neardup_spark.quality.evaluate.evaluate` of a neardup row against the truth (its
    error, if it cannot run)."""
    try:
        result = evaluate(output, truth=str(corpus.truth), threshold=threshold)
    except (UserError, OSError, ValueError) as exc:
        return {"error": str(exc)}
    truth = result["truth"] or {}
    return {
        "recall": truth.get("recall"),
        "precision": truth.get("precision"),
        "precision_basis": truth.get("precision_basis"),
        "ari": truth.get("ari"),
        "positives": truth.get("positives"),
        "positives_found": truth.get("positives_found"),
        "reported_pairs": truth.get("reported_pairs"),
    }


def add_peer_notes(
    records: list[dict[str, Any]], dataset: ds.Dataset, corpus: Corpus, threshold: float
) -> None:
    """spark-mllib's dropped documents (with a note) and neardup rows' ``evaluate`` result."""
    for r in records:
        if r["row"] == "spark-mllib" and r["status"] == "ok":
            r["mllib_dropped_docs"] = mllib_dropped_in(dataset)
            add_note(
                r,
                f"{r['mllib_dropped_docs']:,} documents under {NGRAM} tokens dropped before "
                "hashing (MLlib rejects empty vectors)",
            )
        if r["row"] in EVALUATED_ROWS and r["status"] == "ok" and r["docs"] <= EVALUATE_MAX_DOCS:
            r["evaluate"] = evaluate_neardup(r["output"], corpus, threshold)
