"""The run report: ``OUTPUT/report.html``, a self-contained page that shows what a run found.

:func:`report_data` reads a finished ``OUTPUT`` with PyArrow only (no Spark) and returns the
numbers behind every figure; :func:`write_report` draws them with matplotlib (Agg canvas, PNGs
embedded as base64) and writes ``OUTPUT/report.html``, which needs no network and no JavaScript.

What is read, and how much of it:

* ``report.json``: counts, stage times, configuration, banding;
* ``clusters/``: only the rows of documents that are NOT representatives (the removed ones),
  from which every cluster of two or more documents and its size follow; singletons are
  counted from the row count in the Parquet metadata;
* ``pairs/``: streamed batch by batch (histogram counts, the estimate-against-Jaccard points,
  sampled to at most :data:`MAX_SCATTER_POINTS`, and the edges inside the largest clusters);
* the corpus (``report.json``'s ``input``, or ``input_path``): only the rows of the members
  shown for the largest clusters, selected with a PyArrow dataset filter on the id column.

The members of a large cluster are shown in breadth-first order from the representative along
the verified pairs (``hops`` = number of pairs on the way, ``linked_to`` = the member it was
reached from), each with its exact Jaccard to the representative computed from the texts with
the job's own kernels. A member far from the representative but linked to a close neighbour
is a chain: A ~ B ~ C with A and C not similar themselves.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from collections import deque
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

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
from neardup_spark.errors import UserError
from neardup_spark.io.filesystem import pyarrow_filesystem
from neardup_spark.io.finished import child, parquet_dataset, read_run_report, require_columns
from neardup_spark.kernels.jaccard import jaccard
from neardup_spark.kernels.lsh import approximate_threshold, candidate_probability
from neardup_spark.kernels.normalize import NormalizeOptions, normalize_texts
from neardup_spark.kernels.shingles import shingle_sets
from neardup_spark.kernels.simhash import block_layout, hamming, simhash_text

if TYPE_CHECKING:  # matplotlib is imported when a figure is drawn, not with the CLI
    from matplotlib.axes import Axes

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
TOP_CLUSTERS = 10
MAX_MEMBERS = 20  # members shown per cluster (breadth-first from the representative)
SNIPPET_CHARS = 200
HISTOGRAM_BINS = 50
CURVE_POINTS = 201
MAX_SCATTER_POINTS = 20_000
SCATTER_SAMPLE_SEED = 0
METHOD_COLORS = {"minhash": "#1f77b4", "simhash": "#2ca02c", "exact": "#7f7f7f"}

COUNT_EXPLANATIONS = {
    "input_rows": "documents read from the input",
    "null_texts": "documents whose text is null",
    "empty_texts": "documents with no words after normalisation (never duplicates)",
    "short_texts": "documents with fewer words than the shingle size (one shingle each)",
    "exact_copies": "documents identical, after normalisation, to one with a smaller id",
    "candidate_pairs": "pairs the index proposed (shared an LSH band or SimHash table key)",
    "near_pairs": "candidate pairs that reached the threshold when measured exactly",
    "verified_pairs": "rows of pairs/: exact copies plus verified near pairs",
    "removed": "documents dropped from deduplicated/ (not their cluster's representative)",
    "clusters": "groups of documents after dedupe, singletons included (= rows kept)",
}


# --------------------------------------------------------------------------------------------
# Reading


def _column(table: pa.Table, name: str) -> pa.Array:
    return table.column(name).combine_chunks()


def _values_of(ids: Sequence[Any], type_: pa.DataType) -> pa.Array:
    """Python ids as an Arrow array of ``type_`` (for ``isin`` filters on that column)."""
    return pa.array(list(ids)).cast(type_)


def _normalize_options(config: dict[str, Any]) -> NormalizeOptions:
    norm = config.get("normalize") or {}
    known = set(NormalizeOptions.__dataclass_fields__)
    return NormalizeOptions(**{k: bool(v) for k, v in norm.items() if k in known})


# --------------------------------------------------------------------------------------------
# The data behind the figures


def similarity_floor(report: dict[str, Any], smallest: float | None) -> float:
    """Left edge of the similarity histogram: the verification threshold (or the smallest
    similarity, if lower) less a margin, rounded down to a multiple of 0.05, so the threshold
    line is visible; 0.95 when every pair has similarity 1."""
    marks = [m for m in (threshold_similarity(report), smallest) if m is not None]
    lo = min(marks) - 0.005 if marks else 0.95
    lo = math.floor(round(lo * 20, 9)) / 20
    return min(max(lo, 0.0), 0.95)


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


def _pair_batches(output: str, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
    path = child(output, "pairs")
    dataset = parquet_dataset(path, "pairs table")
    require_columns(dataset.schema, columns, "pairs table", path)
    yield from dataset.to_batches(columns=list(columns))


def _smallest_similarity(output: str) -> float | None:
    smallest: float | None = None
    for batch in _pair_batches(output, [SIMILARITY]):
        if batch.num_rows:
            low = pc.min(batch.column(SIMILARITY)).as_py()
            if low is not None:
                smallest = low if smallest is None else min(smallest, low)
    return smallest


def _cluster_table(output: str) -> tuple[int, pa.Table]:
    """``(documents, rows of non-representatives: doc_id, cluster_id)``."""
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
        counts = pc.value_counts(_column(removed, CLUSTER_ID))
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


def _bfs_order(
    representative: Any, members: set[Any], edges: dict[Any, list[tuple[Any, float]]], limit: int
) -> list[tuple[Any, Any, float | None, int]]:
    """Members in breadth-first order from the representative along verified pairs, the
    strongest link first: ``(member, reached from, that pair's similarity, hops)``. Members the
    pairs do not reach (should not happen) follow in id order."""
    order: list[tuple[Any, Any, float | None, int]] = [(representative, None, None, 0)]
    seen = {representative}
    queue: deque[tuple[Any, int]] = deque([(representative, 0)])
    while queue and len(order) < limit:
        node, hops = queue.popleft()
        for other, sim in sorted(edges.get(node, []), key=lambda e: (-e[1], str(e[0]))):
            if other in seen or other not in members:
                continue
            seen.add(other)
            order.append((other, node, sim, hops + 1))
            queue.append((other, hops + 1))
            if len(order) >= limit:
                break
    if len(order) < limit:
        for other in sorted(members - seen, key=str)[: limit - len(order)]:
            order.append((other, None, None, -1))
    return order


def _snippet(text: str | None, chars: int = SNIPPET_CHARS) -> str | None:
    if text is None:
        return None
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[:chars].rstrip() + "…"


def _read_texts(
    corpus: str, id_col: str, text_col: str, ids: Sequence[Any]
) -> tuple[dict[Any, str | None], str | None]:
    """Texts of ``ids`` read with a dataset filter; ``({id: text}, problem or None)``."""
    try:
        dataset = parquet_dataset(corpus, "corpus")
        require_columns(dataset.schema, (id_col, text_col), "corpus", corpus)
        id_type = dataset.schema.field(id_col).type
        table = dataset.to_table(
            columns=[id_col, text_col],
            filter=ds.field(id_col).isin(_values_of(ids, id_type)),
        )
    except (UserError, pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
        return {}, str(exc)
    keys = table.column(id_col).to_pylist()
    texts = table.column(text_col).to_pylist()
    return dict(zip(keys, texts, strict=True)), None


def _resolve_corpus(report: dict[str, Any], output: str, input_path: str | None) -> str | None:
    if input_path:
        return input_path
    recorded = report.get("input")
    if not recorded:
        return None
    if "://" in recorded or os.path.isabs(recorded) or os.path.exists(recorded):
        return str(recorded)
    # A relative path recorded by a run started elsewhere: try it next to the output.
    beside = os.path.join(os.path.dirname(os.path.abspath(output.rstrip("/"))), recorded)
    return beside if os.path.exists(beside) else str(recorded)


def _member_similarities(
    config: dict[str, Any], method: str, texts: list[str | None]
) -> tuple[list[float], list[int], list[int | None]]:
    """Exact Jaccard of each text to ``texts[0]`` (the representative), distinct shingle
    counts, and (SimHash runs) the Hamming distance of the SimHash fingerprints."""
    options = _normalize_options(config)
    ngram, seed = int(config.get("ngram", 5)), int(config.get("seed", 42))
    normalized = normalize_texts(pa.array(texts, pa.large_string()), options)
    sets = shingle_sets(normalized, ngram, seed)
    rep = sets.doc(0)
    sims = [jaccard(rep, sets.doc(i)) for i in range(len(sets))]
    sizes = [int(s) for s in sets.sizes()]
    distances: list[int | None] = [None] * len(texts)
    if method == "simhash":
        fps = [
            simhash_text(
                t,
                config.get("simhash_hash", "mmh3"),
                config.get("simhash_weighting", "binary"),
                seed=seed,
                shingle_k=ngram if config.get("simhash_features") == "shingles" else None,
                options=options,
            )
            for t in texts
        ]
        as_u64 = np.array(fps, dtype=np.uint64)
        distances = [int(d) for d in hamming(as_u64[:1], as_u64)]
    return sims, sizes, distances


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
    ``top_clusters`` (largest first: ``cluster_id``, ``size``, ``members``) and ``corpus``
    (where the texts came from, or why they are missing).

    ``input_path`` overrides the corpus recorded in ``report.json`` (e.g. when the run was
    started from another directory).
    """
    report = read_run_report(output)
    config: dict[str, Any] = report.get("config") or {}
    method = str(report.get("method", config.get("method", "minhash")))
    counts: dict[str, Any] = dict(report.get("counts") or {})
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
    data: dict[str, Any] = {
        "run": {
            "method": method,
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
        "counts": counts,
        "stages": stages,
    }

    # Clusters: sizes, and the largest clusters' members.
    n_docs, removed = _cluster_table(output)
    distribution, big = cluster_size_distribution(n_docs, removed)
    data["cluster_sizes"] = distribution
    top_table = big.slice(0, max(top, 0))
    top_ids = top_table.column(CLUSTER_ID).to_pylist()
    top_sizes = top_table.column("size").to_pylist()
    member_rows = removed.filter(
        pc.is_in(_column(removed, CLUSTER_ID), value_set=_column(top_table, CLUSTER_ID))
    )
    members_of: dict[Any, set[Any]] = {cid: {cid} for cid in top_ids}
    for doc, cid in zip(
        member_rows.column(DOC_ID).to_pylist(),
        member_rows.column(CLUSTER_ID).to_pylist(),
        strict=True,
    ):
        members_of[cid].add(doc)
    all_members = pa.array(
        [d for group in members_of.values() for d in group],
        type=removed.schema.field(CLUSTER_ID).type,
    )

    # Pairs, streamed: histogram, scatter sample, edges inside the largest clusters.
    threshold = threshold_similarity(report)
    lo = similarity_floor(report, _smallest_similarity(output))
    edges_arr = np.linspace(lo, 1.0, HISTOGRAM_BINS + 1)
    hist: dict[str, np.ndarray] = {}
    hamming_counts: dict[int, int] = {}
    n_minhash = int(counts.get("near_pairs") or 0) if method == "minhash" else 0
    keep_fraction = min(1.0, MAX_SCATTER_POINTS / n_minhash) if n_minhash else 1.0
    rng = np.random.default_rng(SCATTER_SAMPLE_SEED)
    scatter_j: list[np.ndarray] = []
    scatter_e: list[np.ndarray] = []
    minhash_pairs = 0
    edges: dict[Any, list[tuple[Any, float]]] = {}
    total_pairs = 0
    columns = [DOC_A, DOC_B, METHOD, SIMILARITY, JACCARD, ESTIMATE, HAMMING]
    for batch in _pair_batches(output, columns):
        if not batch.num_rows:
            continue
        total_pairs += batch.num_rows
        sim = np.asarray(batch.column(SIMILARITY).to_numpy(zero_copy_only=False), np.float64)
        kinds = np.asarray(batch.column(METHOD).to_pylist(), dtype=object)
        for kind in np.unique(kinds).tolist():
            values = np.clip(sim[kinds == kind], lo, 1.0)
            counted, _ = np.histogram(values, bins=edges_arr)
            hist[kind] = hist.get(kind, np.zeros(HISTOGRAM_BINS, np.int64)) + counted
        mh = kinds == "minhash"
        if mh.any():
            minhash_pairs += int(mh.sum())
            jac = np.asarray(batch.column(JACCARD).to_numpy(zero_copy_only=False), np.float64)
            est = np.asarray(batch.column(ESTIMATE).to_numpy(zero_copy_only=False), np.float64)
            take = mh & ~np.isnan(jac) & ~np.isnan(est)
            if keep_fraction < 1.0:
                take &= rng.random(batch.num_rows) < keep_fraction
            scatter_j.append(jac[take])
            scatter_e.append(est[take])
        sh = kinds == "simhash"
        if sh.any():
            dist = batch.column(HAMMING).to_numpy(zero_copy_only=False)[sh]
            for d, c in zip(*np.unique(dist.astype(np.int64), return_counts=True), strict=True):
                hamming_counts[int(d)] = hamming_counts.get(int(d), 0) + int(c)
        if len(all_members):
            inside = pc.and_(
                pc.is_in(batch.column(DOC_A), value_set=all_members),
                pc.is_in(batch.column(DOC_B), value_set=all_members),
            )
            picked = batch.filter(inside)
            for a, b, s in zip(
                picked.column(DOC_A).to_pylist(),
                picked.column(DOC_B).to_pylist(),
                picked.column(SIMILARITY).to_pylist(),
                strict=True,
            ):
                edges.setdefault(a, []).append((b, float(s)))
                edges.setdefault(b, []).append((a, float(s)))
    data["similarity_histogram"] = {
        "edges": [round(float(e), 6) for e in edges_arr],
        "counts": {k: v.tolist() for k, v in sorted(hist.items())},
        "total": total_pairs,
        "threshold": threshold,
        "measure": {
            "minhash": "exact Jaccard of the shingle sets",
            "simhash": "cos(pi * hamming / 64)",
            "exact": "1.0 (identical after normalisation)",
        },
    }
    data["hamming_counts"] = dict(sorted(hamming_counts.items())) if hamming_counts else None

    # Banding / SimHash tables.
    if method == "minhash":
        bands = int((report.get("banding") or {}).get("bands") or config["bands"])
        rows = int((report.get("banding") or {}).get("rows") or config["rows"])
        js = np.linspace(0.0, 1.0, CURVE_POINTS)
        t = float(config.get("threshold", 0.8))
        data["banding"] = {
            "bands": bands,
            "rows": rows,
            "num_perm": int(config.get("num_perm", bands * rows)),
            "threshold": t,
            "approximate_threshold": approximate_threshold(bands, rows),
            "probability_at_threshold": float(candidate_probability(t, bands, rows)),
            "jaccard": js.tolist(),
            "probability": candidate_probability(js, bands, rows).tolist(),
        }
    else:
        data["banding"] = None
    if method == "simhash":
        info = dict(report.get("simhash") or {})
        blocks = int(info.get("blocks", config.get("blocks", 6)))
        k = int(info.get("hamming_k", config.get("hamming_k", 3)))
        data["simhash"] = {
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
    else:
        data["simhash"] = None

    if method == "minhash":
        jac_all = np.concatenate(scatter_j) if scatter_j else np.zeros(0)
        est_all = np.concatenate(scatter_e) if scatter_e else np.zeros(0)
        m = int(config.get("num_perm", 200))
        se = np.sqrt(jac_all * (1.0 - jac_all) / m)
        data["estimates"] = {
            "jaccard": jac_all.tolist(),
            "estimate": est_all.tolist(),
            "num_perm": m,
            "pairs": minhash_pairs,
            "sampled": bool(keep_fraction < 1.0),
            "mean_abs_error": float(np.mean(np.abs(est_all - jac_all))) if jac_all.size else None,
            "within_2se": float(np.mean(np.abs(est_all - jac_all) <= 2 * se + 1e-12))
            if jac_all.size
            else None,
        }
    else:
        data["estimates"] = None

    # The largest clusters with their texts.
    corpus = _resolve_corpus(report, output, input_path)
    id_col, text_col = str(config.get("id_col", "id")), str(config.get("text_col", "text"))
    orders = {cid: _bfs_order(cid, members_of[cid], edges, max(max_members, 1)) for cid in top_ids}
    wanted = [m for order in orders.values() for m, _, _, _ in order]
    texts: dict[Any, str | None] = {}
    problem: str | None = None if corpus else "report.json records no input path"
    if corpus and wanted:
        texts, problem = _read_texts(corpus, id_col, text_col, wanted)
    data["corpus"] = {
        "path": corpus,
        "available": bool(corpus) and problem is None,
        "problem": problem,
    }
    threshold_j = float(config.get("threshold", 0.8))
    hamming_k = int(config.get("hamming_k", 3))

    def below_threshold(jac: float | None, bits: int | None) -> bool | None:
        """Would this member, compared with the representative directly, fail verification?"""
        if method == "simhash":
            return None if bits is None else bits > hamming_k
        if method == "minhash":
            return None if jac is None else jac < threshold_j
        return None if jac is None else jac < 1.0

    top_clusters: list[dict[str, Any]] = []
    for cid, size in zip(top_ids, top_sizes, strict=True):
        order = orders[cid]
        have = [m in texts for m, _, _, _ in order]
        member_texts = [texts.get(m) for m, _, _, _ in order]
        if have[0]:
            sims, n_shingles, distances = _member_similarities(config, method, member_texts)
        else:
            sims, n_shingles, distances = [], [], []
        members = []
        for i, (doc, parent, link_sim, hops) in enumerate(order):
            known = bool(have[0] and have[i])
            members.append(
                {
                    "doc_id": doc,
                    "is_representative": i == 0,
                    "hops": hops,
                    "linked_to": parent,
                    "link_similarity": link_sim,
                    "snippet": _snippet(member_texts[i]) if have[i] else None,
                    "jaccard_to_representative": sims[i] if known else None,
                    "n_shingles": n_shingles[i] if known else None,
                    "hamming_to_representative": distances[i] if known else None,
                    "below_threshold": below_threshold(sims[i], distances[i]) if known else None,
                }
            )
        jac_known = [m["jaccard_to_representative"] for m in members[1:]]
        jac_known = [j for j in jac_known if j is not None]
        top_clusters.append(
            {
                "cluster_id": cid,
                "size": int(size),
                "members_shown": len(members),
                "members": members,
                "min_jaccard_to_representative": min(jac_known) if jac_known else None,
                "chained_members": sum(1 for m in members[1:] if m["below_threshold"]),
            }
        )
    data["top_clusters"] = top_clusters
    return data


# --------------------------------------------------------------------------------------------
# Figures (each draws on a given Axes, so notebooks can reuse them)


def plot_similarity_histogram(ax: Axes, hist: dict[str, Any]) -> None:
    """Stacked histogram of the verified pairs' similarity, one colour per method."""
    edges = np.asarray(hist["edges"])
    width = np.diff(edges)
    bottom = np.zeros(len(width))
    for kind, counts in hist["counts"].items():
        values = np.asarray(counts, dtype=np.float64)
        ax.bar(
            edges[:-1],
            values,
            width=width,
            bottom=bottom,
            align="edge",
            color=METHOD_COLORS.get(kind, "#9467bd"),
            edgecolor="white",
            linewidth=0.3,
            label=f"{kind} ({int(values.sum()):,})",
        )
        bottom += values
    if hist.get("threshold") is not None:
        ax.axvline(hist["threshold"], color="#d62728", linestyle="--", label="threshold")
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel("similarity of the pair")
    ax.set_ylabel("verified pairs")
    ax.set_title("Similarity of verified pairs")
    if hist["counts"]:
        ax.legend(loc="upper left", fontsize=8)


def plot_cluster_sizes(ax: Axes, sizes: dict[str, Any]) -> None:
    """Number of clusters of each size, log scale."""
    x = np.asarray(sizes["sizes"], dtype=np.int64)
    y = np.asarray(sizes["clusters"], dtype=np.int64)
    if x.size:
        ax.vlines(x, 0.8, y, color="#1f77b4", linewidth=2)
        ax.plot(x, y, "o", color="#1f77b4", markersize=4)
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.8)
    if x.size and x.max() > 30:
        ax.set_xscale("log")
    else:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(0.5, (x.max() if x.size else 1) + 0.5)
    ax.set_xlabel("cluster size (documents)")
    ax.set_ylabel("number of clusters (log scale)")
    ax.set_title("Cluster sizes")
    ax.grid(True, which="major", alpha=0.3)


def plot_candidate_curve(ax: Axes, banding: dict[str, Any]) -> None:
    """The S-curve ``1 - (1 - J**r)**b`` with the threshold marked."""
    b, r, t = banding["bands"], banding["rows"], banding["threshold"]
    ax.plot(banding["jaccard"], banding["probability"], color="#1f77b4", label=f"{b} x {r}")
    ax.axvline(t, color="#d62728", linestyle="--", label=f"threshold {t:g}")
    p_t = banding["probability_at_threshold"]
    ax.plot([t], [p_t], "o", color="#d62728")
    ax.annotate(f"P = {p_t:.4f}", (t, p_t), textcoords="offset points", xytext=(-80, -25))
    ax.axvline(
        banding["approximate_threshold"],
        color="#7f7f7f",
        linestyle=":",
        label=f"(1/b)^(1/r) = {banding['approximate_threshold']:.2f}",
    )
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("Jaccard similarity of a pair")
    ax.set_ylabel("probability of being compared")
    ax.set_title(f"Candidate probability, {b} bands x {r} rows")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)


def plot_estimates(ax: Axes, estimates: dict[str, Any]) -> None:
    """MinHash estimate against exact Jaccard for verified pairs, with +-2 standard errors."""
    j = np.asarray(estimates["jaccard"])
    e = np.asarray(estimates["estimate"])
    m = estimates["num_perm"]
    lo = float(min(j.min(), e.min())) if j.size else 0.0
    lo = max(0.0, math.floor(lo * 20) / 20)
    line = np.linspace(lo, 1.0, 100)
    se = np.sqrt(line * (1.0 - line) / m)
    ax.fill_between(line, line - 2 * se, line + 2 * se, color="#ff7f0e", alpha=0.2, label="±2 SE")
    ax.plot(line, line, color="#ff7f0e", linewidth=1, label="estimate = Jaccard")
    ax.scatter(j, e, s=6, alpha=0.5, color="#1f77b4", label=f"pairs ({j.size:,})")
    ax.set_xlim(lo, 1.0)
    ax.set_ylim(lo, 1.0)
    ax.set_xlabel("exact Jaccard")
    ax.set_ylabel(f"MinHash estimate ({m} values)")
    ax.set_title("Estimate against exact Jaccard")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, alpha=0.3)


def _png(draw: Any, section: dict[str, Any], size: tuple[float, float] = (7.0, 4.0)) -> bytes:
    """Draw one figure on a pyplot-free Agg canvas (no global backend state) as PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    draw(ax, section)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def figure_pngs(data: dict[str, Any]) -> dict[str, bytes]:
    """PNG bytes of each figure the run has: ``similarities``, ``cluster_sizes``, and for
    MinHash runs ``banding`` and ``estimates``."""
    out = {
        "similarities": _png(plot_similarity_histogram, data["similarity_histogram"]),
        "cluster_sizes": _png(plot_cluster_sizes, data["cluster_sizes"]),
    }
    if data.get("banding"):
        out["banding"] = _png(plot_candidate_curve, data["banding"])
    if data.get("estimates") and data["estimates"]["jaccard"]:
        out["estimates"] = _png(plot_estimates, data["estimates"], (5.5, 5.0))
    return out


# --------------------------------------------------------------------------------------------
# HTML


CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em;
margin-top: 2em; } h3 { margin-bottom: 0.3em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.explain { color: #555; font-size: 0.93em; max-width: 50em; }
.bar { background: #1f77b4; height: 0.8em; display: inline-block; }
tr.rep td { background: #eef6ff; } tr.below td.sim { background: #fde7c8; font-weight: bold; }
tr.below td.bits { background: #fde7c8; font-weight: bold; }
td.snippet { font-family: Georgia, serif; font-size: 0.9em; max-width: 40em; }
img { max-width: 100%; border: 1px solid #eee; } code { background: #f4f4f4; padding: 0 0.2em; }
.muted { color: #888; } td.id { white-space: nowrap; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt_num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return _e(value)


def _img(png: bytes, alt: str) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{encoded}">'


def _summary_html(data: dict[str, Any]) -> str:
    run, counts = data["run"], data["counts"]
    config = run["config"]
    settings = [
        ("method", run["method"]),
        ("input", run["input"]),
        ("output", run["output"]),
        ("id / text columns", f"{config.get('id_col')} / {config.get('text_col')}"),
        ("words per shingle (ngram)", config.get("ngram")),
    ]
    if run["method"] == "minhash":
        settings += [
            ("Jaccard threshold", config.get("threshold")),
            ("MinHash values (num_perm)", config.get("num_perm")),
            ("LSH bands x rows", f"{config.get('bands')} x {config.get('rows')}"),
        ]
    elif run["method"] == "simhash":
        settings += [
            ("max differing bits (hamming_k)", config.get("hamming_k")),
            ("blocks", config.get("blocks")),
        ]
    settings += [
        ("representative", config.get("representative")),
        ("wall time", f"{run['wall_seconds']:.1f} s"),
        ("throughput", f"{run['docs_per_second'] or 0:,.0f} documents/s"),
    ]
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in settings)
    count_rows = "".join(
        f'<tr><th>{_e(k)}</th><td class="num">{_fmt_num(v)}</td>'
        f'<td class="explain">{_e(COUNT_EXPLANATIONS.get(k, ""))}</td></tr>'
        for k, v in counts.items()
    )
    return (
        '<section id="summary"><h2>Run and counts</h2>'
        f"<table>{rows}</table>"
        '<p class="explain">How a run works: each document is normalised (case, punctuation, '
        "spacing) and cut into overlapping word sequences (shingles). Identical documents are "
        "found first by a fingerprint. The rest get a small sketch; an index proposes "
        "<em>candidate pairs</em> whose sketches collide, and each candidate is measured exactly "
        "and kept only if it reaches the threshold. Verified pairs are joined into clusters "
        "(connected components); one representative per cluster is kept.</p>"
        f'<table id="counts"><tr><th>count</th><th>value</th><th>meaning</th></tr>'
        f"{count_rows}</table></section>"
    )


def _stages_html(data: dict[str, Any]) -> str:
    stages = data["stages"]
    longest = max((s["seconds"] for s in stages), default=0.0) or 1.0
    rows = "".join(
        f"<tr><th>{_e(s['stage'])}</th><td class='num'>{s['seconds']:.2f}</td>"
        f"<td class='num'>{_fmt_num(s['share'] * 100 if s['share'] is not None else None, 1)}"
        f"</td><td><span class='bar' style='width:{200 * s['seconds'] / longest:.0f}px'>"
        "</span></td></tr>"
        for s in stages
    )
    total = sum(s["seconds"] for s in stages)
    return (
        '<section id="stages"><h2>Time per stage</h2>'
        "<table><tr><th>stage</th><th>seconds</th><th>% of wall</th><th></th></tr>"
        f"{rows}<tr><th>sum</th><td class='num'>{total:.2f}</td><td></td><td></td></tr></table>"
        '<p class="explain">Wall-clock seconds of each stage as the driver saw them. Spark is '
        "lazy, so a stage's time includes the work it was the first to need (e.g. reading "
        "the input). Start-up of Spark itself is not included.</p></section>"
    )


def _similarities_html(data: dict[str, Any], pngs: dict[str, bytes]) -> str:
    hist = data["similarity_histogram"]
    method = data["run"]["method"]
    extra = ""
    if data.get("hamming_counts"):
        cells = ", ".join(f"{d} bits: {c:,}" for d, c in data["hamming_counts"].items())
        extra = f" SimHash pairs by differing bits: {_e(cells)}."
    what = {
        "minhash": "the exact Jaccard coefficient of the two documents' shingle sets",
        "simhash": "cos(π·h/64), the cosine similarity implied by h differing SimHash bits",
        "exact": "1.0: the documents are identical after normalisation",
    }[method]
    return (
        '<section id="similarities"><h2>Similarity of verified pairs</h2>'
        f"{_img(pngs['similarities'], 'histogram of verified similarities')}"
        f'<p class="explain">Each verified pair of <code>pairs/</code> ({hist["total"]:,} in '
        f"all) counted by its similarity: for this {_e(method)} run, {_e(what)}. Exact copies "
        "sit at 1.0. Nothing lies left of the dashed threshold: those candidates were "
        "rejected. Many pairs just above the threshold suggest that moving it would change "
        f"the result a lot.{extra}</p></section>"
    )


def _cluster_sizes_html(data: dict[str, Any], pngs: dict[str, bytes]) -> str:
    dist = data["cluster_sizes"]
    singles = dist["clusters"][0] if dist["sizes"] and dist["sizes"][0] == 1 else 0
    return (
        '<section id="cluster-sizes"><h2>Cluster sizes</h2>'
        f"{_img(pngs['cluster_sizes'], 'cluster size distribution')}"
        f'<p class="explain">{dist["total_clusters"]:,} clusters hold '
        f"{dist['total_documents']:,} documents; {singles:,} documents have no duplicate "
        f"(size 1) and the largest cluster has {dist['largest']:,} members. The vertical axis "
        "is logarithmic, so a few large clusters stay visible next to thousands of singletons. "
        "An unexpectedly large cluster is worth a look below: it often means boilerplate "
        "(shared headers, templates) or a chain of pairs joining documents that differ.</p>"
        "</section>"
    )


def _banding_html(data: dict[str, Any], pngs: dict[str, bytes]) -> str:
    if data.get("banding"):
        b = data["banding"]
        return (
            '<section id="banding"><h2>Which pairs get compared</h2>'
            f"{_img(pngs['banding'], 'candidate probability curve')}"
            f'<p class="explain">Each document\'s sketch of {b["num_perm"]} MinHash values is '
            f"cut into {b['bands']} bands of {b['rows']} values. Two documents are compared only "
            "if they agree on every value of at least one band, which happens with probability "
            f"1 − (1 − J<sup>{b['rows']}</sup>)<sup>{b['bands']}</sup> for a pair of Jaccard "
            f"J. At the threshold {b['threshold']:g} that is {b['probability_at_threshold']:.4f}"
            f", so about {100 * (1 - b['probability_at_threshold']):.2f}% of pairs exactly at "
            "the threshold are missed (pairs above it are missed less often). Pairs far to the "
            "left are almost never compared, which is what makes the job fast.</p></section>"
        )
    if data.get("simhash"):
        s = data["simhash"]
        rows = [
            ("max differing bits (k)", s["hamming_k"]),
            ("blocks of the 64 bits", f"{s['blocks']} (bits: {s['block_bits']})"),
            ("tables (C(blocks, k))", s["tables"]),
            ("blocks kept per table", s["kept_blocks_per_table"]),
            ("features / hash / weighting", f"{s['features']} / {s['hash']} / {s['weighting']}"),
            ("cosine at k bits, cos(πk/64)", f"{s['cosine_at_k']:.4f}"),
        ]
        table = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
        return (
            '<section id="banding"><h2>Which pairs get compared (SimHash tables)</h2>'
            f"<table>{table}</table>"
            '<p class="explain">Each document has one 64-bit SimHash fingerprint, cut into '
            f"{s['blocks']} blocks. Two fingerprints within {s['hamming_k']} bits differ in at "
            f"most {s['hamming_k']} blocks, so they agree on all blocks of at least one choice of "
            f"{s['kept_blocks_per_table']} blocks; one table per choice ({s['tables']} tables) "
            "finds every such pair, with certainty, without comparing all pairs.</p></section>"
        )
    return (
        '<section id="banding"><h2>Which pairs get compared</h2><p class="explain">'
        "Exact run: only documents with the same fingerprint are paired.</p></section>"
    )


def _estimates_html(data: dict[str, Any], pngs: dict[str, bytes]) -> str:
    est = data.get("estimates")
    if not est:
        return ""
    if "estimates" not in pngs:
        return (
            '<section id="estimates"><h2>Estimate against exact Jaccard</h2>'
            '<p class="explain">No verified MinHash pairs.</p></section>'
        )
    sample = " (a random sample)" if est["sampled"] else ""
    within = est["within_2se"]
    return (
        '<section id="estimates"><h2>Estimate against exact Jaccard</h2>'
        f"{_img(pngs['estimates'], 'MinHash estimate against exact Jaccard')}"
        '<p class="explain">For each verified MinHash pair' + sample + ", the fraction of "
        f"agreeing sketch values (the estimate, {est['num_perm']} values) against the exact "
        "Jaccard the job measured. The estimate is only used to reason about banding; the "
        "decision uses the exact value. Points should scatter around the diagonal within the "
        f"shaded ±2 standard errors, √(J(1−J)/m): here {_fmt_num(within * 100, 1)}% do, with "
        f"a mean absolute error of {_fmt_num(est['mean_abs_error'], 4)}.</p></section>"
    )


def _clusters_html(data: dict[str, Any]) -> str:
    clusters = data["top_clusters"]
    corpus = data["corpus"]
    config = data["run"]["config"]
    simhash = data["run"]["method"] == "simhash"
    rule = {
        "minhash": f"Jaccard to the representative below the threshold ({config.get('threshold')})",
        "simhash": f"more than {config.get('hamming_k')} SimHash bits from the representative",
    }.get(data["run"]["method"], "not identical to the representative")
    parts = [
        '<section id="clusters"><h2>Largest clusters</h2>'
        '<p class="explain">The largest clusters, each with its members in breadth-first '
        "order from the representative (<em>hops</em>: verified pairs on the way; <em>linked "
        "to</em>: the member it was reached from, with that pair's similarity). The "
        "<em>Jaccard to representative</em> is computed here from the texts, with the run's "
        f"normalisation and shingle size. Members with {_e(rule)} are highlighted: they are "
        "in the cluster through a chain "
        "(A ~ B ~ C with A and C not similar themselves), not because they resemble the "
        "representative.</p>"
    ]
    if not corpus["available"]:
        parts.append(
            f'<p class="muted">Texts unavailable ({_e(corpus["problem"])}); run '
            "<code>neardup report OUTPUT --input CORPUS</code> to show snippets.</p>"
        )
    if not clusters:
        parts.append('<p class="explain">No cluster has more than one document.</p>')
    for c in clusters:
        shown = c["members_shown"]
        more = f", {shown} shown" if shown < c["size"] else ""
        chain = (
            f"; {c['chained_members']} member(s) only through a chain"
            if c["chained_members"]
            else ""
        )
        parts.append(
            f"<h3>Cluster {_e(c['cluster_id'])}: {c['size']:,} documents{more}{_e(chain)}</h3>"
        )
        header = (
            "<tr><th>document</th><th>hops</th><th>linked to (similarity)</th>"
            "<th>Jaccard to representative</th><th>shingles</th>"
            + ("<th>SimHash bits from rep.</th>" if simhash else "")
            + "<th>first characters</th></tr>"
        )
        body = []
        for m in c["members"]:
            j = m["jaccard_to_representative"]
            classes = []
            if m["is_representative"]:
                classes.append("rep")
            elif m["below_threshold"]:
                classes.append("below")
            link = (
                f"{_e(m['linked_to'])} ({_fmt_num(m['link_similarity'])})"
                if m["linked_to"] is not None
                else ("representative" if m["is_representative"] else "–")
            )
            snippet = _e(m["snippet"]) if m["snippet"] is not None else "<span class=muted>–</span>"
            cells = [
                f"<td class='id'>{_e(m['doc_id'])}</td>",
                f"<td class='num'>{m['hops'] if m['hops'] >= 0 else '?'}</td>",
                f"<td>{link}</td>",
                f"<td class='num sim'>{_fmt_num(j)}</td>",
                f"<td class='num'>{_fmt_num(m['n_shingles'])}</td>",
            ]
            if simhash:
                cells.append(
                    f"<td class='num bits'>{_fmt_num(m['hamming_to_representative'])}</td>"
                )
            cells.append(f"<td class='snippet'>{snippet}</td>")
            body.append(f"<tr class='{' '.join(classes)}'>{''.join(cells)}</tr>")
        parts.append(f"<table>{header}{''.join(body)}</table>")
    parts.append("</section>")
    return "".join(parts)


def render_html(data: dict[str, Any], pngs: dict[str, bytes] | None = None) -> str:
    """The report page for ``data`` (from :func:`report_data`)."""
    pngs = figure_pngs(data) if pngs is None else pngs
    run = data["run"]
    title = f"neardup report: {run['output']}"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>Near-duplicate run report</h1><p class='muted'>{_e(run['output'])} · "
        f"neardup-spark {_e(run['version'])} · {_e(run['method'])}</p>"
        + _summary_html(data)
        + _stages_html(data)
        + _similarities_html(data, pngs)
        + _cluster_sizes_html(data, pngs)
        + _banding_html(data, pngs)
        + _estimates_html(data, pngs)
        + _clusters_html(data)
        + "</body></html>\n"
    )


def write_report(
    output: str,
    input_path: str | None = None,
    top: int = TOP_CLUSTERS,
    max_members: int = MAX_MEMBERS,
) -> str:
    """Write ``OUTPUT/report.html`` for the run in ``output``; returns its path.

    ``input_path``: the corpus, when ``report.json``'s ``input`` is not readable from here.
    """
    page = render_html(report_data(output, input_path, top=top, max_members=max_members))
    target = child(output, REPORT_HTML)
    fs, inner = pyarrow_filesystem(target)
    with fs.open_output_stream(inner) as stream:
        stream.write(page.encode("utf-8"))
    return target


# --------------------------------------------------------------------------------------------
# Command line
