"""A finished run's tables in index form: documents are the rows of ``clusters/``.

Pure PyArrow and NumPy (no Spark), reading through :mod:`neardup_spark.io.finished`:
:func:`read_run_tables` turns ``OUTPUT/clusters``, ``OUTPUT/pairs`` and ``OUTPUT/report.json``
into NumPy arrays of document indices (cluster label per document, the two documents of each
``pairs/`` row), checks the output contract on the way (``checks``), and
:func:`output_summary` counts what the run produced.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark.columns import (
    CLUSTER_ID,
    DOC_A,
    DOC_B,
    DOC_ID,
    IS_REPRESENTATIVE,
    JACCARD,
    METHOD,
)
from neardup_spark.io.finished import child, read_run_report, read_table, require_columns
from neardup_spark.kernels.normalize import NormalizeOptions
from neardup_spark.quality.ids import align_ids, column, index_in
from neardup_spark.quality.metrics import pairs_in_groups


@dataclass(frozen=True)
class RunSettings:
    """What the evaluation needs from ``report.json``'s ``config``.

    Read leniently from the raw dict rather than through
    :func:`neardup_spark.io.finished.config_of_report`: a missing threshold must stay ``None``
    (the evaluation then asks for one instead of assuming the default), and settings the
    evaluation does not use are not validated.
    """

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
class RunTables:
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


def read_run_tables(output: str) -> RunTables:
    """The run at ``output`` in index form; a missing table or column is a
    :class:`~neardup_spark.errors.UserError`."""
    report = read_run_report(output)
    settings = RunSettings.from_report(report)
    clusters_path = child(output, "clusters")
    clusters = read_table(clusters_path, "clusters table")
    require_columns(clusters.schema, (DOC_ID, CLUSTER_ID), "clusters table", clusters_path)
    ids = column(clusters, DOC_ID)
    labels = _cluster_labels(column(clusters, CLUSTER_ID))

    pairs_path = child(output, "pairs")
    pairs = read_table(pairs_path, "pairs table")
    require_columns(pairs.schema, (DOC_A, DOC_B), "pairs table", pairs_path)
    pair_a, pair_b = index_in(column(pairs, DOC_A), ids), index_in(column(pairs, DOC_B), ids)
    return RunTables(
        path=output,
        report=report,
        settings=settings,
        ids=ids,
        labels=labels,
        pair_a=pair_a,
        pair_b=pair_b,
        pair_jaccard=_pair_jaccard(pairs),
        pair_methods=_pair_methods(pairs),
        checks=_contract_checks(clusters, pairs, labels, pair_a, pair_b),
    )


def _cluster_labels(cluster_ids: pa.Array) -> np.ndarray:
    """A dense int64 label per document; a null cluster id is its own singleton."""
    encoded = pc.dictionary_encode(cluster_ids).indices.fill_null(-1)
    labels = np.asarray(encoded.to_numpy(zero_copy_only=False), dtype=np.int64)
    null_labels = labels < 0
    if null_labels.any():
        labels[null_labels] = labels.max(initial=-1) + 1 + np.arange(int(null_labels.sum()))
    return labels


def _pair_jaccard(pairs: pa.Table) -> np.ndarray:
    """The ``jaccard`` column as float64, NaN where null or absent."""
    if JACCARD not in pairs.column_names:
        return np.full(pairs.num_rows, np.nan)
    return np.asarray(
        pc.cast(column(pairs, JACCARD), pa.float64()).fill_null(np.nan).to_numpy(),
        dtype=np.float64,
    )


def _pair_methods(pairs: pa.Table) -> dict[str, int]:
    """Rows of ``pairs/`` per ``method``."""
    if METHOD in pairs.column_names:
        methods = Counter(str(m) for m in column(pairs, METHOD).to_pylist())
    else:
        methods = Counter({"(no method column)": pairs.num_rows})
    return dict(methods)


def _contract_checks(
    clusters: pa.Table,
    pairs: pa.Table,
    labels: np.ndarray,
    pair_a: np.ndarray,
    pair_b: np.ndarray,
) -> dict[str, int]:
    """Violations of the output contract, counted (0 everywhere for a sound output)."""
    ids, cluster_ids = column(clusters, DOC_ID), column(clusters, CLUSTER_ID)
    doc_a, doc_b = column(pairs, DOC_A), column(pairs, DOC_B)
    n = len(ids)
    distinct_ids = pc.count_distinct(ids).as_py() if n else 0
    rep_ids = index_in(cluster_ids, ids)
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
        flag = column(clusters, IS_REPRESENTATIVE).fill_null(False)
        is_self = pc.equal(*align_ids(ids, cluster_ids)).fill_null(False)
        checks["representative_flag_wrong"] = int(
            pc.sum(pc.cast(pc.not_equal(flag, is_self), pa.int64())).as_py() or 0
        )
    return checks


def output_summary(run: RunTables) -> dict[str, Any]:
    """What the run produced: documents, clusters and their sizes, ``pairs/`` rows."""
    sizes = np.bincount(run.labels) if run.n_docs else np.zeros(0, dtype=np.int64)
    sizes = sizes[sizes > 0]
    return {
        "docs": run.n_docs,
        "clusters": int(sizes.size),
        "duplicate_clusters": int((sizes > 1).sum()),
        "docs_in_duplicate_clusters": int(sizes[sizes > 1].sum()),
        "largest_cluster": int(sizes.max()) if sizes.size else 0,
        "co_clustered_pairs": pairs_in_groups(sizes),
        "pairs": int(run.pair_a.size),
        "pairs_by_method": run.pair_methods,
        "pairs_with_jaccard": int((~np.isnan(run.pair_jaccard)).sum()),
    }
