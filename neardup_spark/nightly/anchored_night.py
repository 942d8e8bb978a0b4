"""A night's clusters under the anchored rule (``cluster_rule: anchored``), in one process; the
Spark path runs the same function over whole components (:mod:`.stable_ids_spark`).

The keep order is the batch that first indexed a document's current version, then its id: a
night's documents come after everything indexed before. What earlier nights decided stands:

* a kept indexed document stays kept, re-crawled or not (first seen wins), and its id stays its
  cluster's id;
* a removed indexed document stays removed in favour of its kept document while that
  document's text is unchanged; when that text changed (a re-crawl), it is checked again: it
  joins the first kept document (in keep order) it is a near-duplicate of, or is kept itself
  (listed in ``changed_clusters/``);
* a re-crawled document that was removed is decided again, with the night's documents, unless
  neither its text nor its kept document's changed.

The night's documents are then decided in keep order: each joins the first kept document it has
a verified pair with (or shares its exact text with), indexed or kept earlier that night, or is
kept. :func:`~neardup_spark.kernels.anchored.anchors_with_fixed` is that greedy. Without
re-crawls, a night equals a full run over all nights' documents in that keep order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark.batch.anchored import KIND as BATCH_KIND
from neardup_spark.batch.anchored import tagged_batches
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
from neardup_spark.kernels.anchored import KEPT_FIXED, REMOVED_FIXED, anchors_with_fixed
from neardup_spark.nightly.stable_ids import (
    IS_OLD,
    KEPT,
    LIVE_BEFORE,
    NEW_CLUSTER_ID,
    OLD_CLUSTER,
    OLD_CLUSTER_ID,
    PREV_CLUSTER,
    PREV_FP,
    PREV_HAS_TEXT,
    ClusterResult,
    ContentGraph,
    Members,
    added_pairs,
    content_graph,
    nunique,
    sorted_members,
)
from neardup_spark.nightly.store import BATCH, FP_A, FP_B


def decided_before(m: Members) -> tuple[np.ndarray, np.ndarray]:
    """Each member's state before the night (by rank): ``fixed`` (0 to decide,
    ``KEPT_FIXED``, ``REMOVED_FIXED``) and the rank of its kept document (itself when kept
    or to decide)."""
    rank = np.arange(m.n)
    recrawled = m.table.column(PREV_FP).is_valid().to_numpy(zero_copy_only=False).astype(bool)
    unchanged = (
        recrawled & (m.column(PREV_FP, 0) == m.fp) & (m.column(PREV_HAS_TEXT, False) == m.has_text)
    )
    # The kept document an indexed version stood for (itself when kept), by rank (-1: none).
    before = pc.if_else(
        m.table.column(IS_OLD), m.table.column(OLD_CLUSTER), m.table.column(PREV_CLUSTER)
    )
    holder = np.full(m.n, -1, np.int64)
    indexed = before.is_valid().to_numpy(zero_copy_only=False).astype(bool)
    wanted = before.filter(pa.array(indexed)).to_numpy(zero_copy_only=False)
    holder[indexed] = pd.Index(m.ids).get_indexer(wanted)
    fixed = np.zeros(m.n, np.int8)
    fixed[holder == rank] = KEPT_FIXED
    # A removal stands while its kept document's text and its own stand.
    standing = (holder >= 0) & (holder != rank) & (~recrawled | unchanged)
    kept_text = np.maximum(holder, 0)
    standing &= ~recrawled[kept_text] | unchanged[kept_text]
    fixed[standing] = REMOVED_FIXED
    return fixed, np.where(standing, holder, rank)


def keep_order(m: Members) -> np.ndarray:
    """The members' ranks in keep order: the batch that indexed them, then the id."""
    batch = m.table.column(BATCH).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.lexsort((np.arange(m.n), batch))


def night_anchors(m: Members, g: ContentGraph) -> np.ndarray:
    """Each member's kept document (by rank), by the module docstring's rule."""
    fixed, fixed_anchor = decided_before(m)
    order = keep_order(m)
    place = np.empty(m.n, np.int64)
    place[order] = np.arange(m.n)
    content = g.anchor[order]  # a content is named by its smallest document's rank
    anchor_places = anchors_with_fixed(
        content,
        fixed[order],
        place[fixed_anchor[order]],
        g.near_a,
        g.near_b,
        m.n,
    )
    anchor = np.empty(m.n, np.int64)
    anchor[order] = order[anchor_places]
    return anchor


def similarities(g: ContentGraph, edges: pa.Table, anchor: np.ndarray) -> pa.Array:
    """Each member's measure against its kept document: 1.0 on the same content (or itself),
    else the Jaccard of their contents' edge (null where the night holds no such edge: a
    removal that stands from an earlier night, between contents it did not load)."""
    n = anchor.size
    own, other = g.anchor, g.anchor[anchor]
    jaccard = np.full(n, np.nan)
    same = (own == other) | (np.arange(n) == anchor)
    jaccard[same] = 1.0
    near = ~same & (own >= 0) & (other >= 0)
    if near.any() and g.near.size:
        key = np.minimum(g.near_a, g.near_b) * n + np.maximum(g.near_a, g.near_b)
        values = edges.column(JACCARD).to_numpy(zero_copy_only=False)[g.near]
        order = np.argsort(key, kind="stable")
        wanted = np.minimum(own[near], other[near]) * n + np.maximum(own[near], other[near])
        at = np.minimum(np.searchsorted(key, wanted, sorter=order), key.size - 1)
        hit = key[order[at]] == wanted
        jaccard[np.flatnonzero(near)[hit]] = values[order[at]][hit]
    return pa.array(jaccard, pa.float64(), from_pandas=True)


def justifying_pairs(m: Members, anchor: np.ndarray, similarity: pa.Array) -> pa.Table:
    """A ``pairs/`` row for each of the night's removed documents with its kept document."""
    rows = np.flatnonzero(~m.is_old & (anchor != np.arange(m.n)))
    lo = np.minimum(rows, anchor[rows])
    hi = np.maximum(rows, anchor[rows])
    values = similarity.take(pa.array(rows))
    exact = pa.array(m.fp[rows] == m.fp[anchor[rows]], pa.bool_())
    return pa.table(
        {
            DOC_A: pa.array(m.ids[lo], m.id_type),
            DOC_B: pa.array(m.ids[hi], m.id_type),
            METHOD: pc.if_else(exact, "exact", "minhash"),
            SIMILARITY: values,
            JACCARD: values,
            ESTIMATE: pa.nulls(rows.size, pa.float64()),
            HAMMING: pa.nulls(rows.size, pa.int32()),
        }
    )


def anchored_cluster_members(members: pa.Table, edges: pa.Table) -> ClusterResult:
    """The night's clusters under the anchored rule: the columns of
    :func:`~neardup_spark.nightly.stable_ids.cluster_members` (``members`` also with
    ``prev_cluster``: a re-crawl's cluster id before the night), and ``similarity`` among the
    assigned columns. The same for any set of whole components of the members' graph."""
    m = sorted_members(members)
    g = content_graph(m, edges)
    anchor = night_anchors(m, g)
    rank = np.arange(m.n)
    recrawled = m.table.column(PREV_FP).is_valid().to_numpy(zero_copy_only=False).astype(bool)
    unchanged = (
        recrawled & (m.column(PREV_FP, 0) == m.fp) & (m.column(PREV_HAS_TEXT, False) == m.has_text)
    )
    kept = ~m.is_old & (anchor == rank) & ~unchanged
    cluster_ids = pa.array(m.ids[anchor], m.id_type)
    old_ids = m.table.column(OLD_CLUSTER)
    moved = np.flatnonzero(
        m.is_old
        & pc.fill_null(pc.not_equal(old_ids, cluster_ids), False).to_numpy(zero_copy_only=False)
    )
    changed = (
        pa.table(
            {
                OLD_CLUSTER_ID: old_ids.take(pa.array(moved)),
                NEW_CLUSTER_ID: cluster_ids.take(pa.array(moved)),
            }
        )
        .group_by([OLD_CLUSTER_ID, NEW_CLUSTER_ID])
        .aggregate([])
    )
    similarity = similarities(g, edges, anchor)
    new_text = ~m.is_old & m.has_text
    live_before = m.column(LIVE_BEFORE, False).astype(bool)
    fresh = np.unique(m.fp[new_text & ~live_before])
    indexed = m.is_old | recrawled
    pairs = pa.concat_tables(
        [added_pairs(m, g, edges, fresh), justifying_pairs(m, anchor, similarity)]
    )
    assigned = pa.table(
        {
            DOC_ID: m.table.column(DOC_ID),
            HAS_TEXT: m.table.column(HAS_TEXT),
            EXACT_FP: m.table.column(EXACT_FP),
            CLUSTER_ID: cluster_ids,
            BATCH: m.table.column(BATCH),
            IS_OLD: m.table.column(IS_OLD),
            OLD_CLUSTER: old_ids,
            KEPT: pa.array(kept),
            SIMILARITY: similarity,
        }
    )
    stats = {
        "joined_existing": int((~m.is_old & (anchor != rank) & indexed[anchor]).sum()),
        "deduplicated": int(kept.sum()),
        "replaced": int(recrawled.sum()),
        "replaced_unchanged": int(unchanged.sum()),
        "text_docs": int(new_text.sum()),
        "fresh_contents": int(fresh.size),
        "live_before": nunique(m.fp[new_text & live_before]),
        "member_clusters": nunique(anchor),
        "clusters": nunique(anchor[~m.is_old]),
        "changed_clusters": changed.num_rows,
        "merged_clusters": pc.count_distinct(old_ids.take(pa.array(moved))).as_py(),
        "moved_docs": int(moved.size),
    }
    return ClusterResult(assigned, changed, distinct_pairs(pairs), stats)


def distinct_pairs(pairs: pa.Table) -> pa.Table:
    """One row per ``(doc_a, doc_b)``, the first given."""
    if not pairs.num_rows:
        return pairs
    a = pairs.column(DOC_A).to_numpy(zero_copy_only=False)
    b = pairs.column(DOC_B).to_numpy(zero_copy_only=False)
    codes = pd.MultiIndex.from_arrays([a, b]).duplicated(keep="first")
    return pairs.filter(pa.array(~codes))


# A row of the Spark twin (``_kind``): 0 a member, 1 an edge; out: 0 assigned, 1 pair, 2 changed
KIND = BATCH_KIND
STATS = "_stats"  # out: 3, one row per task, its counts as JSON (they add up over components)


def components_fn(
    member_columns: list[str], out_schema: pa.Schema
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """:func:`anchored_cluster_members` over one ``mapInArrow`` partition of whole components:
    members (``_kind`` 0, ``member_columns``) and edges (1: ``fp_a``, ``fp_b``, ``jaccard``,
    ``estimate``) in, the result's tables out in ``out_schema``, told apart by ``_kind``."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        read = [batch for batch in batches if batch.num_rows]
        if not read:
            return
        table = pa.Table.from_batches(read)
        kind = table.column(KIND)
        members = table.filter(pc.equal(kind, 0)).select(member_columns)
        edges = table.filter(pc.equal(kind, 1)).select([FP_A, FP_B, JACCARD, ESTIMATE])
        result = anchored_cluster_members(members, edges)
        stats = pa.table({STATS: [json.dumps(result.stats)]})
        parts = ((result.assigned, 0), (result.pairs, 1), (result.changed, 2), (stats, 3))
        yield from tagged_batches(parts, out_schema)

    return run


def summed_stats(rows: list[str]) -> dict[str, int]:
    """The tasks' counts added up (each component lies in one task)."""
    total: dict[str, int] = {}
    for row in rows:
        for key, value in json.loads(row).items():
            total[key] = total.get(key, 0) + int(value)
    return total
