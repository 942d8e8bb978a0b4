"""The anchored rule on one Arrow table of whole components: each document's kept document
and similarity to it, and the ``pairs/`` rows that justify each removal.

The graph's nodes are *contents*: an exact-copy group (its documents share one normalised text;
a document without copies is a content of its own), named by its smallest id, the id its
near-duplicate edges carry. A content's place in the keep order is that of its first document
(by the keep keys, then the smallest id), and that document is the one kept for it. The
contents go through :func:`~neardup_spark.kernels.anchored.anchors` in that order; a removed
content's documents all anchor to the document kept for its anchor (their texts are one text,
so the verified pair between the two contents holds for each of them), a kept content's other
documents to its kept document (exact copies, similarity 1). This is the sequential greedy over
the documents themselves, exact copies being pairs of similarity 1.

Every removal is justified in ``pairs/``: a document's pair with its kept document is the
verified edge between their contents, or an exact copy; where ``pairs/`` holds it under other
ids (a copy's group names its smallest id, not the kept one), a row for the document itself is
added, with the edge's values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup_spark.columns import (
    CLUSTER_ID,
    DOC_A,
    DOC_B,
    DOC_ID,
    ESTIMATE,
    HAMMING,
    JACCARD,
    METHOD,
    SIMILARITY,
)
from neardup_spark.kernels.anchored import anchors

CONTENT = "content"  # a document's exact-copy group, named by its smallest id
EDGE_VALUES = (METHOD, SIMILARITY, JACCARD, ESTIMATE, HAMMING)


def keep_order(docs: pa.Table, keys: Sequence[tuple[str, bool]]) -> np.ndarray:
    """``docs``' rows in keep order: by ``keys`` (``(column, descending)``, nulls and NaN last
    whatever the direction), then the smallest ``doc_id``."""
    columns, sort_keys = {}, []
    for i, (name, descending) in enumerate(keys):
        values = docs.column(name)
        if pa.types.is_floating(values.type):  # NaN ranks as a missing value
            values = pc.if_else(pc.is_nan(values), pa.scalar(None, values.type), values)
        columns[f"k{i}"] = values
        sort_keys.append((f"k{i}", "descending" if descending else "ascending"))
    columns[DOC_ID] = docs.column(DOC_ID)
    sort_keys.append((DOC_ID, "ascending"))
    order = pc.sort_indices(pa.table(columns), sort_keys=sort_keys, null_placement="at_end")
    return order.to_numpy()


def anchored_members(
    docs: pa.Table, edges: pa.Table, keys: Sequence[tuple[str, bool]]
) -> tuple[pa.Table, pa.Table]:
    """The anchored rule over whole components.

    ``docs``: every document in a component (``doc_id``, ``content``, the ``keys`` columns);
    ``edges``: the verified near-duplicate edges between contents (``doc_a``, ``doc_b`` naming
    contents, and :data:`EDGE_VALUES`). Returns the members (``doc_id``, ``cluster_id``: its
    kept document, ``similarity``: its measure against it; the kept ones themselves included)
    and the ``pairs/`` rows to add (``doc_a < doc_b``, :data:`EDGE_VALUES`)."""
    order = pa.array(keep_order(docs, keys))
    ids = docs.column(DOC_ID).combine_chunks().take(order)
    content = docs.column(CONTENT).combine_chunks().take(order)
    names = pc.unique(content)
    code = pc.index_in(content, value_set=names).to_numpy()  # each document's content
    first = np.full(len(names), len(code), np.int64)  # a content's first place in keep order
    np.minimum.at(first, code, np.arange(len(code)))
    by_number = np.argsort(first)  # contents numbered in keep order
    number = np.empty(len(names), np.int64)
    number[by_number] = np.arange(len(names))
    kept_place = first[by_number]  # where each content's kept document is
    a = number[pc.index_in(edges.column(DOC_A), value_set=names).to_numpy()]
    b = number[pc.index_in(edges.column(DOC_B), value_set=names).to_numpy()]
    own = number[code]
    target = anchors(len(names), a, b)[own]
    cluster = ids.take(pa.array(kept_place[target]))
    moved = target != own
    edge = np.full(len(own), -1, np.int64)
    edge[moved] = edge_rows(a, b, own[moved], target[moved], len(names))
    similarity = np.ones(len(own))
    similarity[moved] = edges.column(SIMILARITY).to_numpy(zero_copy_only=False)[edge[moved]]
    members = pa.table({DOC_ID: ids, CLUSTER_ID: cluster, SIMILARITY: pa.array(similarity)})
    named = names.take(pa.array(by_number))  # each content's name, by number
    return members, justifying_pairs(ids, cluster, named, own, target, edge, edges)


def edge_rows(a: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray, n: int) -> np.ndarray:
    """The row of edge ``(x[i], y[i])`` (either way round) among the edges ``(a, b)``."""
    encoded = np.minimum(a, b) * n + np.maximum(a, b)
    sorter = np.argsort(encoded, kind="stable")
    wanted = np.minimum(x, y) * n + np.maximum(x, y)
    return sorter[np.searchsorted(encoded, wanted, sorter=sorter)]


def justifying_pairs(
    ids: pa.Array,
    cluster: pa.Array,
    named: pa.Array,
    own: np.ndarray,
    target: np.ndarray,
    edge: np.ndarray,
    edges: pa.Table,
) -> pa.Table:
    """The ``pairs/`` rows that justify removals ``pairs/`` does not already hold under these
    ids: a removed content's document with its kept document (the edge's values), a kept
    content's copy with a kept document that is not the group's smallest id (exact)."""
    removed = pc.not_equal(ids, cluster).to_numpy(zero_copy_only=False)
    moved = target != own
    held_near = pc.equal(ids, named.take(pa.array(own))).to_numpy(zero_copy_only=False) & pc.equal(
        cluster, named.take(pa.array(target))
    ).to_numpy(zero_copy_only=False)
    # A kept content's copies hold the exact pair with its smallest id: the kept document's
    # own pair with it too, when that is not the kept one.
    group = named.take(pa.array(own))
    held_exact = pc.or_(pc.equal(cluster, group), pc.equal(ids, group)).to_numpy(
        zero_copy_only=False
    )
    add = removed & np.where(moved, ~held_near, ~held_exact)
    doc, kept = ids.filter(pa.array(add)), cluster.filter(pa.array(add))
    first = pc.less(doc, kept)
    rows = edge[add]
    near = rows >= 0
    picked = edges.take(pa.array(np.where(near, rows, 0))) if edges.num_rows else None
    n = int(add.sum())

    def value(name: str, exact: pa.Scalar) -> pa.Array:
        column = edges.schema.field(name).type
        if picked is None:
            return pa.array([exact.as_py()] * n, column)
        return pc.if_else(pa.array(near), picked.column(name), pa.scalar(exact.as_py(), column))

    return pa.table(
        {
            DOC_A: pc.if_else(first, doc, kept),
            DOC_B: pc.if_else(first, kept, doc),
            METHOD: value(METHOD, pa.scalar("exact")),
            SIMILARITY: value(SIMILARITY, pa.scalar(1.0)),
            JACCARD: value(JACCARD, pa.scalar(1.0)),
            ESTIMATE: value(ESTIMATE, pa.scalar(None, pa.float64())),
            HAMMING: value(HAMMING, pa.scalar(None, pa.int32())),
        }
    )


KIND = "_kind"  # a row of the Spark path's tables: 0 a document, 1 an edge (or an added pair)
OUT_COLUMNS = (KIND, DOC_ID, CLUSTER_ID, DOC_A, DOC_B, *EDGE_VALUES)


def anchored_partition_fn(
    keys: Sequence[tuple[str, bool]], out_schema: pa.Schema
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """:func:`anchored_members` over one ``mapInArrow`` partition holding whole components: its
    rows are documents (``_kind`` 0: ``doc_id``, ``content``, the keys' columns) and edges
    (``_kind`` 1: ``doc_a``, ``doc_b``, :data:`EDGE_VALUES`); its output the members (0:
    ``doc_id``, ``cluster_id``, ``similarity``) and the pairs to add (1), in ``out_schema``
    (:data:`OUT_COLUMNS`)."""
    key_names = [name for name, _ in keys]

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        read = list(batches)
        if not read:
            return
        table = pa.Table.from_batches(read)
        kind = table.column(KIND)
        docs = table.filter(pc.equal(kind, 0)).select([DOC_ID, CONTENT, *key_names])
        edges = table.filter(pc.equal(kind, 1)).select([DOC_A, DOC_B, *EDGE_VALUES])
        members, added = anchored_members(docs, edges, keys)
        yield from tagged_batches(((members, 0), (added, 1)), out_schema)

    return run


def tagged_batches(
    parts: Iterable[tuple[pa.Table, int]], out_schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """Tables of different columns as batches of one ``out_schema``: each row tagged with its
    table's number in ``_kind``, the columns it lacks null (a ``mapInArrow`` has one schema)."""
    for part, number in parts:
        columns = {KIND: pa.array(np.full(part.num_rows, number, np.int8))}
        for field in out_schema:
            if field.name != KIND:
                present = field.name in part.column_names
                values = part.column(field.name) if present else pa.nulls(part.num_rows)
                columns[field.name] = values.cast(field.type)
        yield from pa.Table.from_pydict(columns, schema=out_schema).to_batches()
