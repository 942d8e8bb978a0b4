"""What ``report.html`` shows, read from a finished ``OUTPUT`` with PyArrow only (no Spark, no
matplotlib): :func:`report_data` returns the numbers behind every figure and table, one
function per section.

What is read, and how much of it:

* ``report.json``: counts, stage times, configuration, banding;
* ``clusters/``: only the rows of documents that are NOT representatives (the removed ones),
  from which every cluster of two or more documents and its size follow; singletons are
  counted from the row count in the Parquet metadata;
* ``pairs/``: streamed batch by batch (histogram counts, the estimate-against-Jaccard points,
  sampled to at most :data:`MAX_SCATTER_POINTS`, and the edges inside the largest clusters);
* the corpus (``report.json``'s ``input``, or ``input_path``): only the rows of the members
  shown for the largest clusters, selected with a PyArrow dataset filter on the id column
  (:mod:`neardup_spark.report.largest_clusters`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from neardup_spark.columns import (
    CLUSTER_ID,
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    HAMMING,
    IS_REPRESENTATIVE,
    JACCARD,
    METHOD,
    SIMILARITY,
)
from neardup_spark.io.finished import (
    child,
    parquet_dataset,
    read_run_report,
    require_columns,
    skipped_paths,
)
from neardup_spark.kernels.lsh import approximate_threshold, candidate_probability
from neardup_spark.kernels.simhash import block_layout
from neardup_spark.report.largest_clusters import (
    Links,
    cluster_members,
    largest_clusters_section,
    resolve_corpus,
)

TOP_CLUSTERS = 10
MAX_MEMBERS = 20  # members shown per cluster (breadth-first from the representative)
HISTOGRAM_BINS = 50
CURVE_POINTS = 201
MAX_SCATTER_POINTS = 20_000
SCATTER_SAMPLE_SEED = 0

COUNT_EXPLANATIONS = {
    "input_rows": "documents read from the input",
    "null_texts": "documents whose text is null",
    "empty_texts": "documents with no words after normalisation (never duplicates)",
    "short_texts": "documents with fewer words than the shingle size (one shingle each)",
    "exact_copies": "documents identical, after normalisation, to one with a smaller id",
    "candidate_pairs": "pairs the index proposed (shared an LSH band or SimHash table key)",
    "near_pairs": "candidate pairs that reached the threshold when measured exactly",
    "bucket_comparisons": "anchored rule: large LSH buckets' members compared with their kept ones",
    "bucket_comparisons_skipped": "anchored rule: those comparisons skipped over bucket_kept_max",
    "verified_pairs": "rows of pairs/: exact copies plus verified near pairs",
    "removed": "documents dropped from deduplicated/ (not their cluster's representative)",
    "removed_by_components": "documents the components rule would remove over the same pairs",
    "clusters": "groups of documents after dedupe, singletons included (= rows kept)",
}

SIMILARITY_MEASURES = {
    "minhash": "exact Jaccard of the shingle sets",
    "simhash": "cos(pi * hamming / 64)",
    "exact": "1.0 (identical after normalisation)",
}


def report_data(
    output: str,
    input_path: str | None = None,
    top: int = TOP_CLUSTERS,
    max_members: int = MAX_MEMBERS,
) -> dict[str, Any]:
    """The numbers behind every figure and table of the report of the run in ``output``.

    Keys: ``run`` (method, paths, configuration, times), ``counts`` (report.json's),
    ``stages`` (list of ``{stage, seconds, share}``), ``similarity_histogram`` (``edges``,
    ``counts`` per method, ``total``, ``threshold``), ``hamming_counts`` (SimHash runs:
    distance -> pairs), ``cluster_sizes`` (``sizes``, ``clusters``, ``documents``,
    ``total_clusters``), ``banding`` (MinHash: ``bands``, ``rows``, ``threshold``, ``jaccard``,
    ``probability`` = :func:`candidate_probability` at those points) or None, ``simhash``
    (SimHash: blocks, tables, bit layout) or None, ``estimates`` (MinHash: ``jaccard`` and
    ``estimate`` of verified pairs, sampled to at most :data:`MAX_SCATTER_POINTS`) or None,
    ``top_clusters`` (largest first: ``cluster_id``, ``size``, ``members``), ``corpus``
    (where the texts came from, or why they are missing), ``boilerplate`` (report.json's,
    with ``--strip-boilerplate``; else None) and ``removals`` (report.json's: removed and
    removed by the components rule, the largest clusters, the removed documents' similarity to
    their kept ones; None when the run did not record it).

    ``input_path`` overrides the corpus recorded in ``report.json`` (e.g. when the run was
    started from another directory).
    """
    report = read_run_report(output)
    config: dict[str, Any] = report.get("config") or {}
    method = run_method(report)
    data = run_section(report, output)
    data["boilerplate"] = report.get("boilerplate")
    data["removals"] = report.get("removals")  # None from a run of an earlier version

    n_docs, removed = read_removed_rows(output)
    distribution, big = cluster_size_distribution(n_docs, removed)
    data["cluster_sizes"] = distribution
    top_table = big.slice(0, max(top, 0))
    members_of = cluster_members(removed, top_table)
    # Cluster ids are document ids: the type of every member id, and of the pairs' ids.
    id_type = removed.schema.field(CLUSTER_ID).type
    member_ids = pa.array([d for group in members_of.values() for d in group], type=id_type)

    tally = scan_pairs(output, report, member_ids)
    data["similarity_histogram"] = tally.histogram_section(threshold_similarity(report))
    data["hamming_counts"] = tally.hamming_section()
    data["banding"] = banding_section(report) if method == "minhash" else None
    data["simhash"] = simhash_section(report) if method == "simhash" else None
    data["estimates"] = estimates_section(tally, config) if method == "minhash" else None

    corpus = resolve_corpus(report, output, input_path)
    top_ids, top_sizes = top_table.column(CLUSTER_ID), top_table.column("size")
    sizes = dict(zip(top_ids.to_pylist(), top_sizes.to_pylist(), strict=True))
    data["corpus"], data["top_clusters"] = largest_clusters_section(
        config,
        method,
        corpus,
        sizes,
        members_of,
        tally.links,
        max(max_members, 1),
        report.get("input_format"),
        skipped_paths(report),
    )
    return data


# --------------------------------------------------------------------------------------------
# The run: method, paths, counts, stage times


def run_method(report: dict[str, Any]) -> str:
    """The run's method (``minhash``, ``simhash`` or ``exact``) as its report records it."""
    config = report.get("config") or {}
    return str(report.get("method", config.get("method", "minhash")))


def run_section(report: dict[str, Any], output: str) -> dict[str, Any]:
    """``run`` (method, paths, version, times, configuration), ``counts`` and ``stages`` (each
    stage's seconds and share of the wall time)."""
    config: dict[str, Any] = report.get("config") or {}
    wall = float(report.get("wall_seconds") or 0.0)
    stage_seconds: dict[str, float] = report.get("stage_seconds") or {}
    stages = [
        {
            "stage": name,
            "seconds": float(sec),
            "share": float(sec) / wall if wall else None,
        }
        for name, sec in stage_seconds.items()
    ]
    return {
        "run": {
            "method": run_method(report),
            "input": report.get("input"),
            "output": report.get("output", output),
            "version": report.get("neardup_spark_version"),
            "spark": report.get("spark"),
            "wall_seconds": wall,
            "spark_start_seconds": report.get("spark_start_seconds"),
            "docs_per_second": report.get("docs_per_second"),
            "config": config,
            "components": report.get("components"),
        },
        "counts": dict(report.get("counts") or {}),
        "stages": stages,
    }


# --------------------------------------------------------------------------------------------
# Clusters: sizes and the members of the largest


def read_removed_rows(output: str) -> tuple[int, pa.Table]:
    """``(documents, rows of non-representatives: doc_id, cluster_id)`` of ``clusters/``."""
    path = child(output, "clusters")
    dataset = parquet_dataset(path, "clusters table")
    require_columns(dataset.schema, (DOC_ID, CLUSTER_ID, IS_REPRESENTATIVE), "clusters table", path)
    n_docs = dataset.count_rows()
    removed = dataset.to_table(columns=[DOC_ID, CLUSTER_ID], filter=~ds.field(IS_REPRESENTATIVE))
    return n_docs, removed


def cluster_size_distribution(n_docs: int, removed: pa.Table) -> tuple[dict[str, Any], pa.Table]:
    """Cluster sizes from the non-representative rows: ``({sizes, clusters, documents},
    table of clusters with two or more members: cluster_id, size, largest first)``."""
    if removed.num_rows:
        counts = pc.value_counts(removed.column(CLUSTER_ID).combine_chunks())
        big = pa.table(
            {
                CLUSTER_ID: counts.field("values"),
                "size": pc.add(counts.field("counts"), 1),
            }
        ).sort_by([("size", "descending"), (CLUSTER_ID, "ascending")])
        sizes = np.asarray(big.column("size").to_numpy(), dtype=np.int64)
    else:
        big = pa.table({CLUSTER_ID: pa.array([], pa.string()), "size": pa.array([], pa.int64())})
        sizes = np.zeros(0, dtype=np.int64)
    singletons = n_docs - int(sizes.sum())
    all_sizes = np.concatenate([np.ones(max(singletons, 0), dtype=np.int64), sizes])
    values, clusters = np.unique(all_sizes, return_counts=True)
    distribution = {
        "sizes": values.tolist(),
        "clusters": clusters.tolist(),
        "documents": (values * clusters).tolist(),
        "total_clusters": int(clusters.sum()),
        "total_documents": int((values * clusters).sum()),
        "largest": int(values.max()) if values.size else 0,
    }
    return distribution, big


# --------------------------------------------------------------------------------------------
# Pairs: one streaming pass for the histogram, the scatter sample and the cluster links


def threshold_similarity(report: dict[str, Any]) -> float | None:
    """The ``similarity`` a verified pair must reach: the Jaccard threshold (MinHash) or
    ``cos(pi * k / 64)`` (SimHash within ``k`` bits); None for exact runs."""
    config = report.get("config") or {}
    method = report.get("method", config.get("method"))
    if method == "minhash":
        return float(config.get("threshold", 0.8))
    if method == "simhash":
        return math.cos(math.pi * int(config.get("hamming_k", 3)) / 64.0)
    return None


def similarity_floor(report: dict[str, Any], smallest: float | None) -> float:
    """Left edge of the similarity histogram: the verification threshold (or the smallest
    similarity, if lower) less a margin, rounded down to a multiple of 0.05, so the threshold
    line is visible; 0.95 when every pair has similarity 1."""
    marks = [m for m in (threshold_similarity(report), smallest) if m is not None]
    lo = min(marks) - 0.005 if marks else 0.95
    lo = math.floor(round(lo * 20, 9)) / 20
    return min(max(lo, 0.0), 0.95)


def pair_batches(output: str, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """``pairs/`` of ``output``, batch by batch, only ``columns`` (checked first)."""
    path = child(output, "pairs")
    dataset = parquet_dataset(path, "pairs table")
    require_columns(dataset.schema, columns, "pairs table", path)
    yield from dataset.to_batches(columns=list(columns))


def smallest_similarity(output: str) -> float | None:
    """The lowest ``similarity`` of ``pairs/`` (None when it has no pairs)."""
    smallest: float | None = None
    for batch in pair_batches(output, [SIMILARITY]):
        if batch.num_rows:
            low = pc.min(batch.column(SIMILARITY)).as_py()
            if low is not None:
                smallest = low if smallest is None else min(smallest, low)
    return smallest


def _floats(batch: pa.RecordBatch, name: str) -> np.ndarray:
    return np.asarray(batch.column(name).to_numpy(zero_copy_only=False), np.float64)


class PairTally:
    """What one pass over ``pairs/`` gathers, batch by batch (:meth:`add`): histogram counts
    per method over ``bin_edges``, SimHash distances, a sample of (exact Jaccard, estimate) of
    MinHash pairs (each kept with probability ``keep_fraction``), and ``links``: the pairs
    whose two documents are both in ``members``."""

    def __init__(self, bin_edges: np.ndarray, keep_fraction: float, members: pa.Array) -> None:
        self.bin_edges = bin_edges
        self.keep_fraction = keep_fraction
        self.members = members
        self.rng = np.random.default_rng(SCATTER_SAMPLE_SEED)
        self.histogram: dict[str, np.ndarray] = {}
        self.hamming_counts: dict[int, int] = {}
        self.scatter_jaccard: list[np.ndarray] = []
        self.scatter_estimate: list[np.ndarray] = []
        self.minhash_pairs = 0
        self.total_pairs = 0
        self.links: Links = {}

    def add(self, batch: pa.RecordBatch) -> None:
        """Count one batch of pairs (columns doc_a, doc_b, method, similarity, jaccard,
        estimate, hamming)."""
        if not batch.num_rows:
            return
        self.total_pairs += batch.num_rows
        kinds = np.asarray(batch.column(METHOD).to_pylist(), dtype=object)
        self._count_similarities(_floats(batch, SIMILARITY), kinds)
        if (kinds == "minhash").any():
            self._sample_estimates(batch, kinds == "minhash")
        if (kinds == "simhash").any():
            self._count_distances(batch, kinds == "simhash")
        if len(self.members):
            self._collect_links(batch)

    def _count_similarities(self, sim: np.ndarray, kinds: np.ndarray) -> None:
        lo = self.bin_edges[0]
        for kind in np.unique(kinds).tolist():
            values = np.clip(sim[kinds == kind], lo, 1.0)
            counted, _ = np.histogram(values, bins=self.bin_edges)
            zero = np.zeros(HISTOGRAM_BINS, np.int64)
            self.histogram[kind] = self.histogram.get(kind, zero) + counted

    def _sample_estimates(self, batch: pa.RecordBatch, minhash: np.ndarray) -> None:
        self.minhash_pairs += int(minhash.sum())
        jac, est = _floats(batch, JACCARD), _floats(batch, ESTIMATE)
        take = minhash & ~np.isnan(jac) & ~np.isnan(est)
        if self.keep_fraction < 1.0:
            take &= self.rng.random(batch.num_rows) < self.keep_fraction
        self.scatter_jaccard.append(jac[take])
        self.scatter_estimate.append(est[take])

    def _count_distances(self, batch: pa.RecordBatch, simhash: np.ndarray) -> None:
        dist = batch.column(HAMMING).to_numpy(zero_copy_only=False)[simhash]
        for d, c in zip(*np.unique(dist.astype(np.int64), return_counts=True), strict=True):
            self.hamming_counts[int(d)] = self.hamming_counts.get(int(d), 0) + int(c)

    def _collect_links(self, batch: pa.RecordBatch) -> None:
        inside = pc.and_(
            pc.is_in(batch.column(DOC_A), value_set=self.members),
            pc.is_in(batch.column(DOC_B), value_set=self.members),
        )
        picked = batch.filter(inside)
        for a, b, s in zip(
            picked.column(DOC_A).to_pylist(),
            picked.column(DOC_B).to_pylist(),
            picked.column(SIMILARITY).to_pylist(),
            strict=True,
        ):
            self.links.setdefault(a, []).append((b, float(s)))
            self.links.setdefault(b, []).append((a, float(s)))

    def histogram_section(self, threshold: float | None) -> dict[str, Any]:
        """``similarity_histogram``: bin edges, counts per method, total pairs, threshold."""
        return {
            "edges": [round(float(e), 6) for e in self.bin_edges],
            "counts": {k: v.tolist() for k, v in sorted(self.histogram.items())},
            "total": self.total_pairs,
            "threshold": threshold,
            "measure": dict(SIMILARITY_MEASURES),
        }

    def hamming_section(self) -> dict[int, int] | None:
        """``hamming_counts``: SimHash pairs by differing bits (None without SimHash pairs)."""
        return dict(sorted(self.hamming_counts.items())) if self.hamming_counts else None


def scan_pairs(output: str, report: dict[str, Any], members: pa.Array) -> PairTally:
    """Read ``pairs/`` once (after a pass over its similarity column for the histogram's left
    edge) into a :class:`PairTally`, with the links among the documents ``members``."""
    counts = report.get("counts") or {}
    n_minhash = int(counts.get("near_pairs") or 0) if run_method(report) == "minhash" else 0
    keep_fraction = min(1.0, MAX_SCATTER_POINTS / n_minhash) if n_minhash else 1.0
    lo = similarity_floor(report, smallest_similarity(output))
    tally = PairTally(np.linspace(lo, 1.0, HISTOGRAM_BINS + 1), keep_fraction, members)
    columns = [DOC_A, DOC_B, METHOD, SIMILARITY, JACCARD, ESTIMATE, HAMMING]
    for batch in pair_batches(output, columns):
        tally.add(batch)
    return tally


# --------------------------------------------------------------------------------------------
# Which pairs get compared: banding (MinHash), tables (SimHash); the estimates


def banding_section(report: dict[str, Any]) -> dict[str, Any]:
    """``banding`` of a MinHash run: bands, rows, threshold and the candidate-probability
    S-curve at :data:`CURVE_POINTS` Jaccard values."""
    config: dict[str, Any] = report.get("config") or {}
    bands = int((report.get("banding") or {}).get("bands") or config["bands"])
    rows = int((report.get("banding") or {}).get("rows") or config["rows"])
    js = np.linspace(0.0, 1.0, CURVE_POINTS)
    t = float(config.get("threshold", 0.8))
    return {
        "bands": bands,
        "rows": rows,
        "num_perm": int(config.get("num_perm", bands * rows)),
        "threshold": t,
        "approximate_threshold": approximate_threshold(bands, rows),
        "probability_at_threshold": float(candidate_probability(t, bands, rows)),
        "jaccard": js.tolist(),
        "probability": candidate_probability(js, bands, rows).tolist(),
    }


def simhash_section(report: dict[str, Any]) -> dict[str, Any]:
    """``simhash`` of a SimHash run: blocks, tables, bit layout, fingerprint settings."""
    config: dict[str, Any] = report.get("config") or {}
    info = dict(report.get("simhash") or {})
    blocks = int(info.get("blocks", config.get("blocks", 6)))
    k = int(info.get("hamming_k", config.get("hamming_k", 3)))
    return {
        "hamming_k": k,
        "blocks": blocks,
        "tables": int(info.get("tables", math.comb(blocks, k))),
        "kept_blocks_per_table": blocks - k,
        "block_bits": [stop - start for start, stop in block_layout(blocks)],
        "features": info.get("features", config.get("simhash_features")),
        "hash": info.get("hash", config.get("simhash_hash")),
        "weighting": info.get("weighting", config.get("simhash_weighting")),
        "cosine_at_k": math.cos(math.pi * k / 64.0),
    }


def estimates_section(tally: PairTally, config: dict[str, Any]) -> dict[str, Any]:
    """``estimates`` of a MinHash run: the sampled (exact Jaccard, estimate) points, their
    mean absolute error and the share within two standard errors."""
    jac_all = np.concatenate(tally.scatter_jaccard) if tally.scatter_jaccard else np.zeros(0)
    est_all = np.concatenate(tally.scatter_estimate) if tally.scatter_estimate else np.zeros(0)
    m = int(config.get("num_perm", 200))
    se = np.sqrt(jac_all * (1.0 - jac_all) / m)
    return {
        "jaccard": jac_all.tolist(),
        "estimate": est_all.tolist(),
        "num_perm": m,
        "pairs": tally.minhash_pairs,
        "sampled": bool(tally.keep_fraction < 1.0),
        "mean_abs_error": float(np.mean(np.abs(est_all - jac_all))) if jac_all.size else None,
        "within_2se": float(np.mean(np.abs(est_all - jac_all) <= 2 * se + 1e-12))
        if jac_all.size
        else None,
    }
