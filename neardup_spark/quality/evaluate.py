"""Quality of a dedupe run: against the planted truth and against the exact all-pairs oracle.

Pure PyArrow, NumPy and SciPy (no Spark): :func:`evaluate` reads a finished ``OUTPUT``
(``clusters/``, ``pairs/``, ``report.json``; :mod:`~neardup_spark.quality.run_tables`) and
optionally a generated truth table, the corpus itself and the labelled sets
(:mod:`~neardup_spark.quality.labelled`);
:func:`~neardup_spark.quality.evaluation_tables.format_table` prints the result. Run it as
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
    Every document pair with Jaccard ``>= t``, found by :mod:`~neardup_spark.quality.oracle`
    with the run's ngram, normalisation and seed (``strategy`` in the result says whether the
    blocked product or the prefix filter ran).

    *positives*: all document pairs ``i < j`` with Jaccard ``>= t``.
    *recall* = found positives / positives; *edge recall* = positives listed in ``pairs/`` /
    positives. *precision* = rows of ``pairs/`` whose exact Jaccard (recomputed, whatever the
    row says) reaches ``t`` / rows. *cluster pair precision* = found positives / document
    pairs sharing a cluster (below 1 when chains join documents that are not similar
    themselves). By band: positives, found, missed. ``jaccard_mismatches`` counts rows whose
    ``jaccard`` column differs from the exact value by more than 1e-9.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from neardup_spark.errors import UserError
from neardup_spark.io.finished import read_table, skipped_paths
from neardup_spark.io.output import REPORT_FILE
from neardup_spark.kernels.normalize import DEFAULT_OPTIONS
from neardup_spark.quality.generate import generated_part
from neardup_spark.quality.ids import column, id_examples, index_in, pair_keys
from neardup_spark.quality.labelled import evaluate_labelled
from neardup_spark.quality.metrics import (
    BANDS,
    band_label,
    band_of,
    clustering_agreement,
    f1,
    pairs_in_groups,
    ratio,
)
from neardup_spark.quality.oracle import (
    DEFAULT_BLOCK_WORK,
    ShingleMatrix,
    choose_strategy,
    product_work,
    shingle_matrix,
    similar_pairs,
)
from neardup_spark.quality.run_tables import RunTables, output_summary, read_run_tables

TRUTH_COLUMNS = ("doc_a", "doc_b", "kind", "jaccard")
DEFAULT_ORACLE_MAX_DOCS = 50_000
JACCARD_TOLERANCE = 1e-9


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
    ``labelled_dir``) adds :func:`~neardup_spark.quality.labelled.evaluate_labelled` at the
    run's threshold and ngram.
    """
    started = time.perf_counter()
    run = read_run_tables(output)
    s = run.settings
    threshold, source = _threshold(output, run, threshold)
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
        "summary": output_summary(run),
        "checks": run.checks,
        "truth": None,
        "oracle": None,
    }
    oracle = None
    if corpus is not None:
        corpus = generated_part(corpus, "corpus")
        oracle = _oracle(run, corpus, threshold, oracle_max_docs, block_work)
        result["oracle"] = oracle.section
    if truth is not None:
        truth = generated_part(truth, "truth")
        result["truth"] = _truth(run, truth, threshold, oracle)
    if labelled or labelled_dir is not None:
        result["labelled"] = evaluate_labelled(labelled_dir, threshold=threshold, ngram=s.ngram)
    result["seconds"] = round(time.perf_counter() - started, 3)
    return result


def _threshold(output: str, run: RunTables, threshold: float | None) -> tuple[float, str]:
    """The threshold to judge by and where it came from (the argument, else the report)."""
    if threshold is None:
        if run.settings.threshold is None:
            raise UserError(f"{output}/{REPORT_FILE} has no config.threshold; pass a threshold")
        threshold, source = run.settings.threshold, REPORT_FILE
    else:
        source = "argument"
    if not 0.0 < threshold <= 1.0:
        raise UserError(f"threshold must be in (0, 1], got {threshold}")
    return threshold, source


# --------------------------------------------------------------------------------------------
# Against the exact oracle


@dataclass
class _Oracle:
    section: dict[str, Any]
    pair_exact: np.ndarray  # exact Jaccard per pairs/ row
    matrix: ShingleMatrix
    doc_of_run: np.ndarray  # corpus row of each clusters/ row


@dataclass
class _Corpus:
    """The corpus matched row for row with ``clusters/``."""

    texts: pa.Array
    run_of_doc: np.ndarray  # clusters/ row of each corpus row
    doc_of_run: np.ndarray  # corpus row of each clusters/ row


def _read_corpus(run: RunTables, corpus: str, max_docs: int) -> _Corpus:
    """The corpus's texts, refused when too large for the oracle or not this run's corpus."""
    s = run.settings
    fallback = run.report.get("input_format")  # the run's --input-format, if any
    table = read_table(
        corpus,
        "corpus",
        columns=(s.id_col, s.text_col),
        corpus=True,
        fallback=fallback,
        skipped=skipped_paths(run.report),
    )
    n = table.num_rows
    if n > max_docs:
        raise UserError(
            f"the corpus has {n:,} documents; the exact all-pairs oracle is limited to "
            f"{max_docs:,} (raise oracle_max_docs / --oracle-max-docs, or evaluate without "
            "--corpus)"
        )
    corpus_ids = column(table, s.id_col)
    run_of_doc = index_in(corpus_ids, run.ids)
    if (run_of_doc < 0).any():
        missing = run_of_doc < 0
        raise UserError(
            f"{int(missing.sum()):,} corpus ids are not in {run.path}/clusters (e.g. "
            f"{id_examples(corpus_ids, missing)}): the corpus does not belong to this output"
        )
    doc_of_run = np.full(run.n_docs, -1, dtype=np.int64)
    doc_of_run[run_of_doc] = np.arange(n, dtype=np.int64)
    if (doc_of_run < 0).any() or np.unique(run_of_doc).size != n:
        raise UserError(
            f"{run.path}/clusters holds {run.n_docs:,} documents but the corpus {n:,} "
            "distinct matching ids: the corpus does not belong to this output"
        )
    return _Corpus(column(table, s.text_col), run_of_doc, doc_of_run)


def _oracle(
    run: RunTables, corpus: str, threshold: float, max_docs: int, block_work: int
) -> _Oracle:
    started = time.perf_counter()
    s = run.settings
    docs = _read_corpus(run, corpus, max_docs)
    n = docs.run_of_doc.size
    labels = run.labels[docs.run_of_doc]
    matrix = shingle_matrix(docs.texts, s.ngram, s.seed, s.normalize)
    shingled = time.perf_counter()
    work = product_work(matrix)
    strategy = choose_strategy(work)
    pi, pj, psim = similar_pairs(matrix, threshold, block_work, strategy)
    searched = time.perf_counter()

    found = labels[pi] == labels[pj]
    known = (run.pair_a >= 0) & (run.pair_b >= 0)
    ra = np.where(known, docs.doc_of_run[np.maximum(run.pair_a, 0)], 0)
    rb = np.where(known, docs.doc_of_run[np.maximum(run.pair_b, 0)], 0)
    pair_exact = np.where(known, matrix.jaccard(ra, rb), np.nan)
    listed = np.isin(pair_keys(pi, pj, n), pair_keys(ra[known], rb[known], n))
    correct = int((pair_exact >= threshold).sum())
    reported = int(pair_exact.size)
    has_column = ~np.isnan(run.pair_jaccard) & known
    mismatch = np.abs(run.pair_jaccard[has_column] - pair_exact[has_column]) > JACCARD_TOLERANCE
    co_clustered = pairs_in_groups(np.bincount(labels)) if n else 0
    recall = ratio(int(found.sum()), pi.size)
    precision = ratio(correct, reported)
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
        "edge_recall": ratio(int(listed.sum()), pi.size),
        "reported_pairs": reported,
        "reported_correct": correct,
        "precision": precision,
        "f1": f1(precision, recall),
        "co_clustered_pairs": co_clustered,
        "cluster_pair_precision": ratio(int(found.sum()), co_clustered),
        "jaccard_checked": int(has_column.sum()),
        "jaccard_mismatches": int(mismatch.sum()),
        "by_band": _oracle_by_band(psim, found, threshold),
        "seconds": {
            "read_and_shingle": round(shingled - started, 3),
            "all_pairs": round(searched - shingled, 3),
            "total": round(time.perf_counter() - started, 3),
        },
    }
    return _Oracle(section, pair_exact, matrix, docs.doc_of_run)


def _oracle_by_band(sims: np.ndarray, found: np.ndarray, threshold: float) -> list[dict[str, Any]]:
    """Positives, found and missed per Jaccard band that can hold a positive."""
    bands = band_of(sims)
    rows = []
    for b, (lo, hi) in enumerate(BANDS):
        if hi <= threshold and b != len(BANDS) - 1:
            continue  # no positive can lie in this band
        in_band = bands == b
        positives = int(in_band.sum())
        hits = int((in_band & found).sum())
        rows.append(
            {
                "band": band_label(lo, hi),
                "positives": positives,
                "found": hits,
                "missed": positives - hits,
                "recall": ratio(hits, positives),
            }
        )
    return rows


# --------------------------------------------------------------------------------------------
# Against the planted truth


@dataclass
class _TruthPairs:
    """The truth table with its documents as ``clusters/`` rows."""

    ia: np.ndarray
    ib: np.ndarray
    kinds: list[str]
    sim: np.ndarray  # float64 truth Jaccard, NaN where null


def _read_truth(run: RunTables, truth: str) -> _TruthPairs:
    """The truth pairs; a pair naming an id the run does not hold is a :class:`UserError`."""
    table = read_table(truth, "truth table", columns=TRUTH_COLUMNS)
    doc_a, doc_b = column(table, "doc_a"), column(table, "doc_b")
    ia, ib = index_in(doc_a, run.ids), index_in(doc_b, run.ids)
    missing = (ia < 0) | (ib < 0)
    if missing.any():
        raise UserError(
            f"{int(missing.sum()):,} truth pairs name ids that are not in {run.path}/clusters "
            f"(e.g. {id_examples(doc_a, missing)}): the truth does not belong to this output"
        )
    kinds = [str(k) for k in column(table, "kind").to_pylist()]
    sim = np.asarray(
        pc.cast(column(table, "jaccard"), pa.float64()).fill_null(np.nan).to_numpy(),
        dtype=np.float64,
    )
    return _TruthPairs(ia, ib, kinds, sim)


def _truth(run: RunTables, truth: str, threshold: float, oracle: _Oracle | None) -> dict[str, Any]:
    pairs = _read_truth(run, truth)
    found = run.labels[pairs.ia] == run.labels[pairs.ib]
    positive = pairs.sim >= threshold
    n_pos = int(positive.sum())
    n_found = int((positive & found).sum())
    recall = ratio(n_found, n_pos)
    correct, basis = _correct_pairs_rows(run, pairs, positive, threshold, oracle)
    precision = ratio(int(correct.sum()), int(correct.size))

    n = run.n_docs
    graph = sp.coo_array(
        (np.ones(n_pos, dtype=np.int32), (pairs.ia[positive], pairs.ib[positive])), shape=(n, n)
    )
    _, true_labels = connected_components(graph, directed=False)
    agreement = clustering_agreement(run.labels, true_labels)

    section: dict[str, Any] = {
        "truth": truth,
        "pairs": int(pairs.sim.size),
        "positives": n_pos,
        "positives_found": n_found,
        "recall": recall,
        "reported_pairs": int(correct.size),
        "reported_correct": int(correct.sum()),
        "precision": precision,
        "precision_basis": basis,
        "precision_definition": _precision_definition(threshold, basis),
        "f1": f1(precision, recall),
        "ari": agreement["ari"],
        "clustering": {
            "true_clusters": int(np.unique(true_labels).size),
            "pairs_same_in_output": agreement["pairs_same_a"],
            "pairs_same_in_truth": agreement["pairs_same_b"],
            "pairs_same_in_both": agreement["pairs_same_both"],
            "pair_precision": agreement["precision"],
            "pair_recall": agreement["recall"],
        },
        "by_kind": _truth_by_kind(pairs, found, positive),
        "by_band": _truth_by_band(pairs.sim, found),
    }
    if oracle is not None:
        section["truth_jaccard_check"] = _truth_jaccard_check(run, pairs, oracle)
    return section


def _correct_pairs_rows(
    run: RunTables,
    pairs: _TruthPairs,
    positive: np.ndarray,
    threshold: float,
    oracle: _Oracle | None,
) -> tuple[np.ndarray, dict[str, int]]:
    """Which ``pairs/`` rows are correct, and how many were judged each way (the basis)."""
    has_column = ~np.isnan(run.pair_jaccard)
    correct = np.zeros(run.pair_a.size, dtype=bool)
    correct[has_column] = run.pair_jaccard[has_column] >= threshold
    null_rows = ~has_column
    basis = {"jaccard_column": int(has_column.sum()), "corpus": 0, "truth_lookup": 0}
    if oracle is not None:
        correct[null_rows] = oracle.pair_exact[null_rows] >= threshold
        basis["corpus"] = int(null_rows.sum())
    elif null_rows.any():
        n = run.n_docs
        known = null_rows & (run.pair_a >= 0) & (run.pair_b >= 0)
        keys = pair_keys(run.pair_a[known], run.pair_b[known], n)
        correct[known] = np.isin(keys, pair_keys(pairs.ia[positive], pairs.ib[positive], n))
        basis["truth_lookup"] = int(null_rows.sum())
    return correct, basis


def _precision_definition(threshold: float, basis: dict[str, int]) -> str:
    """How the precision was computed, in words (printed under the table)."""
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
    return definition


def _truth_by_kind(
    pairs: _TruthPairs, found: np.ndarray, positive: np.ndarray
) -> list[dict[str, Any]]:
    """Per edit kind: all its pairs, and those at the threshold, found or not."""
    kinds, sim = pairs.kinds, pairs.sim
    rows = []
    for kind in sorted(set(kinds)):
        mask = np.fromiter((k == kind for k in kinds), dtype=bool, count=len(kinds))
        pos = mask & positive
        rows.append(
            {
                "kind": kind,
                "pairs": int(mask.sum()),
                "found": int((mask & found).sum()),
                "recall": ratio(int((mask & found).sum()), int(mask.sum())),
                "positives": int(pos.sum()),
                "positives_found": int((pos & found).sum()),
                "positive_recall": ratio(int((pos & found).sum()), int(pos.sum())),
                "mean_jaccard": float(np.nanmean(sim[mask])) if mask.any() else None,
            }
        )
    return rows


def _truth_by_band(sim: np.ndarray, found: np.ndarray) -> list[dict[str, Any]]:
    """Per Jaccard band: all truth pairs in it, found or not."""
    bands = band_of(sim)
    rows = []
    for b, (lo, hi) in enumerate(BANDS):
        in_band = (bands == b) & ~np.isnan(sim)
        rows.append(
            {
                "band": band_label(lo, hi),
                "pairs": int(in_band.sum()),
                "found": int((in_band & found).sum()),
                "recall": ratio(int((in_band & found).sum()), int(in_band.sum())),
            }
        )
    return rows


def _truth_jaccard_check(run: RunTables, pairs: _TruthPairs, oracle: _Oracle) -> dict[str, Any]:
    """The truth's Jaccard against the oracle's, when both measure the same shingles."""
    s = run.settings
    if s.ngram != 5 or s.normalize != DEFAULT_OPTIONS:
        return {"note": "skipped: the run's ngram/normalisation differ from the truth's defaults"}
    exact = oracle.matrix.jaccard(oracle.doc_of_run[pairs.ia], oracle.doc_of_run[pairs.ib])
    diff = np.abs(exact - pairs.sim)
    return {
        "pairs": int(pairs.sim.size),
        "disagreements": int((diff > JACCARD_TOLERANCE).sum()),
        "max_abs_diff": float(np.nanmax(diff)) if diff.size else 0.0,
    }
