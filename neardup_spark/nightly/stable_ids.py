"""Stable cluster ids for the documents a nightly batch touches, computed in one process (NumPy
and SciPy); :mod:`neardup_spark.nightly.stable_ids_spark` is its distributed twin.

The rule (the ``smallest_id`` representative, made stable):

* a cluster's id is the id of one of its documents, its representative;
* a cluster that gains documents **keeps its id**, even when a new document has a smaller id;
* clusters merged by a batch take the **smallest** of their ids (``changed_clusters/`` maps each
  merged id to the surviving one);
* a cluster made only of new documents gets its smallest id;
* when a re-crawl splits a cluster, the part holding the old representative keeps the id and
  every other part gets its smallest id (also listed in ``changed_clusters/``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components as graph_components

from neardup_spark.columns import (
    CLUSTER_ID,
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    EXACT_FP,
    HAMMING,
    HAS_TEXT,
    JACCARD,
    METHOD,
    SIMILARITY,
)
from neardup_spark.nightly.store import BATCH, FP_A, FP_B

# Columns of the touched documents ("members") and of the batch results.
IS_OLD = "is_old"  # indexed before this batch
OLD_CLUSTER = "old_cluster"  # an indexed document's cluster id (null for a new one)
PREV_FP, PREV_HAS_TEXT = "prev_exact_fp", "prev_has_text"  # a re-crawl's replaced version
PREV_CLUSTER = "prev_cluster"  # the cluster id of a re-crawl's replaced version
LIVE_BEFORE = "live_before"  # some document held this content before the batch
KEPT = "kept"  # the new document goes to deduplicated/
OLD_CLUSTER_ID, NEW_CLUSTER_ID = "old_cluster_id", "new_cluster_id"  # changed_clusters/


@dataclass
class ClusterResult:
    """What :func:`cluster_members` computes (Arrow tables, ids of the members' type)."""

    assigned: pa.Table  # doc_id, has_text, exact_fp, cluster_id, batch, is_old, old_cluster, kept
    changed: pa.Table  # old_cluster_id, new_cluster_id
    pairs: pa.Table  # PAIRS_COLUMNS: the edges the batch adds
    stats: dict[str, int]


@dataclass
class Members:
    """The members sorted by id: a document is its rank."""

    table: pa.Table
    ids: np.ndarray
    id_type: pa.DataType
    has_text: np.ndarray
    is_old: np.ndarray
    fp: np.ndarray

    def column(self, name: str, fill: Any = None) -> np.ndarray:
        column = self.table.column(name)
        if fill is not None:
            column = pc.fill_null(column, fill)
        return column.to_numpy(zero_copy_only=False)

    @property
    def n(self) -> int:
        return self.table.num_rows


@dataclass
class ContentGraph:
    """Each content's documents joined to its smallest one (its anchor); edges join anchors."""

    anchor: np.ndarray  # rank of each document's anchor (-1 without text)
    copies: np.ndarray  # documents that are not their content's anchor
    near: np.ndarray  # rows of the edge table with both ends live
    near_a: np.ndarray  # their anchors
    near_b: np.ndarray
    labels: np.ndarray  # component of each document
    components: int


def sorted_members(members: pa.Table) -> Members:
    codes, _ = pd.factorize(members.column(DOC_ID).to_numpy(zero_copy_only=False), sort=True)
    table = members.take(pa.array(np.argsort(codes)))
    column = table.column
    return Members(
        table=table,
        ids=column(DOC_ID).to_numpy(zero_copy_only=False),
        id_type=table.schema.field(DOC_ID).type,
        has_text=column(HAS_TEXT).to_numpy(zero_copy_only=False).astype(bool),
        is_old=column(IS_OLD).to_numpy(zero_copy_only=False).astype(bool),
        fp=column(EXACT_FP).to_numpy(zero_copy_only=False).astype(np.int64),
    )


def _present(mapped: np.ndarray) -> np.ndarray:
    """Which values of a ``Series.reindex`` result were found (missing ones are NaN)."""
    return ~np.isnan(mapped) if mapped.dtype.kind == "f" else np.ones(len(mapped), dtype=bool)


def content_graph(m: Members, edges: pa.Table) -> ContentGraph:
    n, rank = m.n, np.arange(m.n)
    text = np.flatnonzero(m.has_text)
    by_fp = pd.Series(rank[text]).groupby(m.fp[text]).min()
    anchor = np.full(n, -1, dtype=np.int64)
    anchor[text] = by_fp.reindex(m.fp[text]).to_numpy()
    copies = text[anchor[text] != text]
    # Near edges between live contents (an end no member holds is dead), as anchor pairs.
    e_a = by_fp.reindex(edges.column(FP_A).to_numpy(zero_copy_only=False)).to_numpy()
    e_b = by_fp.reindex(edges.column(FP_B).to_numpy(zero_copy_only=False)).to_numpy()
    near = np.flatnonzero(_present(e_a) & _present(e_b))
    near_a, near_b = e_a[near].astype(np.int64), e_b[near].astype(np.int64)
    graph = coo_matrix(
        (
            np.ones(copies.size + near.size, dtype=np.int8),
            (np.concatenate([anchor[copies], near_a]), np.concatenate([copies, near_b])),
        ),
        shape=(n, n),
    )
    k, labels = graph_components(graph, directed=False)
    return ContentGraph(anchor, copies, near, near_a, near_b, labels, k)


def _stable_ids(m: Members, g: ContentGraph) -> tuple[np.ndarray, np.ndarray]:
    """``(cluster rank of each document, rank of the old cluster id it claims or -1)``."""
    n, rank, labels = m.n, np.arange(m.n), g.labels
    smallest = np.full(g.components, n, dtype=np.int64)
    np.minimum.at(smallest, labels, rank)
    # An old id survives while its representative is in the component: smallest such id wins.
    old_ids = m.table.column(OLD_CLUSTER)
    claimed = m.is_old & old_ids.is_valid().to_numpy(zero_copy_only=False).astype(bool)
    claim = np.full(n, -1, dtype=np.int64)
    claim[claimed] = pd.Index(m.ids).get_indexer(
        old_ids.filter(pa.array(claimed)).to_numpy(zero_copy_only=False)
    )
    valid = np.flatnonzero((claim >= 0) & (labels[np.maximum(claim, 0)] == labels))
    winner = np.full(g.components, n, dtype=np.int64)
    np.minimum.at(winner, labels[valid], claim[valid])
    return np.where(winner[labels] < n, winner[labels], smallest[labels]), claim


def added_pairs(m: Members, g: ContentGraph, edges: pa.Table, fresh: np.ndarray) -> pa.Table:
    """The edges the batch adds: exact edges touching a new document, near edges touching a
    content no document held before the batch (``fresh``)."""
    added_exact = g.copies[~(m.is_old[g.copies] & m.is_old[g.anchor[g.copies]])]
    edge_fp_a = edges.column(FP_A).to_numpy(zero_copy_only=False)[g.near]
    edge_fp_b = edges.column(FP_B).to_numpy(zero_copy_only=False)[g.near]
    added = np.flatnonzero(np.isin(edge_fp_a, fresh) | np.isin(edge_fp_b, fresh))
    lo = np.minimum(g.near_a[added], g.near_b[added])
    hi = np.maximum(g.near_a[added], g.near_b[added])
    jaccard = edges.column(JACCARD).to_numpy(zero_copy_only=False)[g.near][added]
    estimate = edges.column(ESTIMATE).to_numpy(zero_copy_only=False)[g.near][added]
    n_exact, n_near = added_exact.size, added.size
    ids, id_type = m.ids, m.id_type
    return pa.table(
        {
            DOC_A: pa.array(np.concatenate([ids[g.anchor[added_exact]], ids[lo]]), id_type),
            DOC_B: pa.array(np.concatenate([ids[added_exact], ids[hi]]), id_type),
            METHOD: pa.array(["exact"] * n_exact + ["minhash"] * n_near, pa.string()),
            SIMILARITY: pa.array(np.concatenate([np.ones(n_exact), jaccard]), pa.float64()),
            JACCARD: pa.array(np.concatenate([np.ones(n_exact), jaccard]), pa.float64()),
            ESTIMATE: pa.array(
                np.concatenate([np.full(n_exact, np.nan), estimate]), pa.float64(), from_pandas=True
            ),
            HAMMING: pa.nulls(n_exact + n_near, pa.int32()),
        }
    )


def nunique(values: np.ndarray) -> int:
    return int(np.unique(values).size)


def cluster_members(members: pa.Table, edges: pa.Table) -> ClusterResult:
    """Final clusters of the touched documents, in one process (NumPy and SciPy).

    ``members``: ``doc_id``, ``has_text``, ``exact_fp``, ``old_cluster`` (the cluster id of an
    indexed document, null for a new one), ``is_old``, ``batch``, ``prev_exact_fp`` and
    ``prev_has_text`` (the replaced version of a re-crawled document, else null),
    ``live_before`` (true when a document held this content before the batch, else null).
    ``edges``: ``fp_a``, ``fp_b``, ``jaccard``, ``estimate``: verified edges between contents;
    those with an end no member holds (a dead content) are ignored.

    Components get ids by the stable rule of the module docstring. Same results as
    :func:`neardup_spark.nightly.stable_ids_spark.cluster_with_spark`.
    """
    m = sorted_members(members)
    g = content_graph(m, edges)
    cluster, claim = _stable_ids(m, g)
    rank, labels = np.arange(m.n), g.labels
    has_old = np.zeros(g.components, dtype=bool)
    has_old[labels[m.is_old]] = True
    replaced = m.table.column(PREV_FP).is_valid().to_numpy(zero_copy_only=False).astype(bool)
    unchanged = (
        replaced & (m.column(PREV_FP, 0) == m.fp) & (m.column(PREV_HAS_TEXT, False) == m.has_text)
    )
    kept = ~m.is_old & (cluster == rank) & ~has_old[labels] & ~unchanged
    cluster_ids = pa.array(m.ids[cluster], m.id_type)
    moved = np.flatnonzero(m.is_old & (claim != cluster))
    changed = (
        pa.table(
            {
                OLD_CLUSTER_ID: m.table.column(OLD_CLUSTER).take(pa.array(moved)),
                NEW_CLUSTER_ID: cluster_ids.take(pa.array(moved)),
            }
        )
        .group_by([OLD_CLUSTER_ID, NEW_CLUSTER_ID])
        .aggregate([])
    )
    new_text = ~m.is_old & m.has_text
    live_before = m.column(LIVE_BEFORE, False).astype(bool)
    fresh = np.unique(m.fp[new_text & ~live_before])
    assigned = pa.table(
        {
            DOC_ID: m.table.column(DOC_ID),
            HAS_TEXT: m.table.column(HAS_TEXT),
            EXACT_FP: m.table.column(EXACT_FP),
            CLUSTER_ID: cluster_ids,
            BATCH: m.table.column(BATCH),
            IS_OLD: m.table.column(IS_OLD),
            OLD_CLUSTER: m.table.column(OLD_CLUSTER),
            KEPT: pa.array(kept),
        }
    )
    stats = {
        "joined_existing": int((~m.is_old & has_old[labels]).sum()),
        "deduplicated": int(kept.sum()),
        "replaced": int(replaced.sum()),
        "replaced_unchanged": int(unchanged.sum()),
        "text_docs": int(new_text.sum()),
        "fresh_contents": int(fresh.size),
        "live_before": nunique(m.fp[new_text & live_before]),
        "member_clusters": nunique(cluster),
        "clusters": nunique(cluster[~m.is_old]),
        "changed_clusters": changed.num_rows,
        "merged_clusters": nunique(claim[moved]),
        "moved_docs": int(moved.size),
    }
    return ClusterResult(assigned, changed, added_pairs(m, g, edges, fresh), stats)
