"""The anchored rule's distributed path: the sequential greedy of
:mod:`neardup_spark.kernels.anchored` decided in rounds of Spark jobs, for verified graphs larger
than one task holds, whose components may be too.

The nodes are contents (:mod:`neardup_spark.batch.anchored`: exact-copy groups), each placed in
the keep order by one global sort of the graph's documents (``_node``: a content's first
document's place). The greedy decides a content from its *earlier* neighbours' decisions only,
so in each round every undecided content whose earlier neighbours allow it decides, as the
greedy would:

* kept, when every earlier neighbour is removed (or it has none);
* removed in favour of its first kept earlier neighbour ``k``, when every earlier neighbour
  before ``k`` is removed.

The first undecided content of each component decides in every round, so the rounds end, but a
chain of revisions in keep order takes about one round a link: after ``anchored_max_rounds``
rounds, or as soon as the edges still open fit one task, one task finishes the rest with the
sequential kernel (the kept contents among the earlier ends are kept there too: they have no
earlier neighbour left). Then each kept content and the contents removed in its favour (a star,
never a whole component) go to one task, where the single task's code gives the members and the
rows justifying the removals: the sequential greedy's result whatever the partitioning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.batch.anchored import CONTENT
from neardup_spark.columns import COMPONENT, DOC_A, DOC_B, DOC_ID
from neardup_spark.kernels.anchored import anchors
from neardup_spark.stages.clusters import nan_as_null

log = logging.getLogger(__name__)

NODE = "_node"  # a content's place in the keep order (its first document's)
ANCHOR = "_anchor"  # the node a content is removed in favour of; itself when kept
LATER, EARLIER = "_later", "_earlier"  # an edge's ends in keep order
EARLIER_KEPT = "_earlier_kept"  # whether the earlier end is decided kept (else undecided)
FIRST_KEPT, FIRST_OPEN = "_first_kept", "_first_open"


def ranked_documents(docs: DataFrame, keys: Sequence[tuple[str, bool]]) -> DataFrame:
    """Documents (``doc_id``, ``content``, the ``keys`` columns) -> the same and ``_node``:
    the document's place in the keep order (``keys``, nulls and NaN last whatever the
    direction, then the smallest ``doc_id``: :func:`~neardup_spark.batch.anchored.keep_order`),
    numbered after one global sort (increasing along it, not consecutive)."""
    order: list[Column] = []
    for name, descending in keys:
        value = nan_as_null(docs, name)
        order.append(value.desc_nulls_last() if descending else value.asc_nulls_last())
    order.append(F.col(DOC_ID).asc())
    # (after a sort, the ids grow along it: partitions in range order, rows in order in each)
    return docs.orderBy(*order).withColumn(NODE, F.monotonically_increasing_id())


def content_nodes(ranked: DataFrame) -> DataFrame:
    """:func:`ranked_documents`' rows -> ``content``, ``_node``: its first document's place."""
    return ranked.groupBy(CONTENT).agg(F.min(NODE).alias(NODE))


def directed_edges(near: DataFrame, nodes: DataFrame) -> DataFrame:
    """Near-duplicate edges between contents (``doc_a``, ``doc_b``) -> ``_later``,
    ``_earlier`` (their nodes in keep order), ``_earlier_kept`` (false: nothing decided)."""
    a = nodes.select(F.col(CONTENT).alias(DOC_A), F.col(NODE).alias("_a"))
    b = nodes.select(F.col(CONTENT).alias(DOC_B), F.col(NODE).alias("_b"))
    ends = near.select(DOC_A, DOC_B).join(a, DOC_A).join(b, DOC_B)
    return (
        ends.select(
            F.greatest("_a", "_b").alias(LATER),
            F.least("_a", "_b").alias(EARLIER),
            F.lit(False).alias(EARLIER_KEPT),
        )
        .where(F.col(LATER) != F.col(EARLIER))
        .distinct()
    )


def decide_round(edges: DataFrame, open_nodes: DataFrame) -> DataFrame:
    """One round's decisions (``_node``, ``_anchor``: itself when kept) of the undecided
    ``open_nodes`` (``_node``), from ``edges`` (:func:`directed_edges`' columns: the edges whose
    later end is undecided and whose earlier end is not removed): first those kept (no earlier
    end left), then those removed in favour of a kept one, these included."""
    free = open_nodes.join(edges.select(F.col(LATER).alias(NODE)).distinct(), NODE, "left_anti")
    now = free.select(F.col(NODE).alias(EARLIER), F.lit(True).alias("_kept_now"))
    marked = edges.join(now, EARLIER, "left")
    kept = F.col(EARLIER_KEPT) | F.col("_kept_now").isNotNull()
    earlier = F.col(EARLIER)
    waiting = marked.groupBy(LATER).agg(
        F.min(F.when(kept, earlier)).alias(FIRST_KEPT),
        F.min(F.when(~kept, earlier)).alias(FIRST_OPEN),
    )
    first_kept, first_open = F.col(FIRST_KEPT), F.col(FIRST_OPEN)
    removed = waiting.where(
        first_kept.isNotNull() & (first_open.isNull() | (first_open > first_kept))
    ).select(F.col(LATER).alias(NODE), first_kept.alias(ANCHOR))
    return free.select(NODE, F.col(NODE).alias(ANCHOR)).unionByName(removed)


def after_round(
    edges: DataFrame, open_nodes: DataFrame, decided: DataFrame
) -> tuple[DataFrame, DataFrame]:
    """The edges and undecided nodes left after a round's ``decided``: edges to a removed
    earlier end dropped, to a kept one marked, from a decided later end dropped."""
    open_nodes = open_nodes.join(decided.select(NODE), NODE, "left_anti")
    state = decided.select(
        F.col(NODE).alias(EARLIER), (F.col(ANCHOR) == F.col(NODE)).alias("_kept_now")
    )
    now = F.col("_kept_now")
    edges = (
        edges.join(decided.select(F.col(NODE).alias(LATER)), LATER, "left_anti")
        .join(state, EARLIER, "left")
        .where(now.isNull() | now)
        .select(LATER, EARLIER, (F.col(EARLIER_KEPT) | now.isNotNull()).alias(EARLIER_KEPT))
    )
    return edges, open_nodes


def later_anchors_fn() -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The sequential greedy over one task's edges (``_later``, ``_earlier`` nodes) -> the
    ``_node``, ``_anchor`` of each later end (the earlier ends only are kept already, or
    decided by the caller)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        read = [batch for batch in batches if batch.num_rows]
        if not read:
            return
        table = pa.Table.from_batches(read)
        later = table.column(LATER).to_numpy()
        earlier = table.column(EARLIER).to_numpy()
        nodes, ends = np.unique(np.r_[later, earlier], return_inverse=True)  # keep order
        anchor = anchors(len(nodes), ends[: len(later)], ends[len(later) :])
        decided = np.unique(ends[: len(later)])
        yield pa.RecordBatch.from_arrays(
            [pa.array(nodes[decided]), pa.array(nodes[anchor[decided]])], names=[NODE, ANCHOR]
        )

    return run


def finish_in_one_task(edges: DataFrame, open_nodes: DataFrame) -> DataFrame:
    """The decisions (``_node``, ``_anchor``) of every undecided node: the sequential greedy
    over the open edges in one task; an undecided node with no open edge is kept."""
    schema = T.StructType(
        [T.StructField(NODE, T.LongType(), False), T.StructField(ANCHOR, T.LongType(), False)]
    )
    decided = edges.select(LATER, EARLIER).coalesce(1).mapInArrow(later_anchors_fn(), schema)
    free = open_nodes.join(decided.select(NODE), NODE, "left_anti")
    return decided.unionByName(free.select(NODE, F.col(NODE).alias(ANCHOR)))


def greedy_rounds(
    edges: DataFrame,
    open_nodes: DataFrame,
    checkpoint: Callable[[DataFrame], DataFrame],
    task_edges: int,
    max_rounds: int,
) -> tuple[DataFrame, int]:
    """Every node's decision (``_node``, ``_anchor``): rounds while more than ``task_edges``
    edges are open, at most ``max_rounds``, then one task (:func:`finish_in_one_task`).
    Returns them and the rounds taken. ``checkpoint`` cuts each round's lineage."""
    edges, open_nodes = checkpoint(edges), checkpoint(open_nodes)
    decisions: list[DataFrame] = []
    rounds, n_edges = 0, edges.count()
    while n_edges > task_edges and rounds < max_rounds:
        decided = checkpoint(decide_round(edges, open_nodes))
        decisions.append(decided)
        edges, open_nodes = after_round(edges, open_nodes, decided)
        edges, open_nodes = checkpoint(edges), checkpoint(open_nodes)
        rounds, n_edges = rounds + 1, edges.count()
        log.debug("anchored rounds: round %d, %d edges open", rounds, n_edges)
    if n_edges > task_edges:
        log.warning(
            "anchored rule: %d edges still open after %d rounds (anchored_max_rounds), "
            "finished in one task",
            n_edges,
            rounds,
        )
    decisions.append(finish_in_one_task(edges, open_nodes))
    every = decisions[0]
    for more in decisions[1:]:
        every = every.unionByName(more)
    return every, rounds


def star_labels(
    ranked: DataFrame, nodes: DataFrame, decisions: DataFrame
) -> tuple[DataFrame, DataFrame]:
    """Each document's star (``doc_id``, ``component``: the content kept for its content, by
    name) and the removed contents' edges to their kept ones (``doc_a < doc_b``, content
    names, and ``component``)."""
    names = nodes.select(NODE, CONTENT)
    anchored = decisions.join(names, NODE).join(
        names.select(F.col(NODE).alias(ANCHOR), F.col(CONTENT).alias(COMPONENT)), ANCHOR
    )
    group = nodes.join(anchored.select(CONTENT, COMPONENT), CONTENT, "left").select(
        CONTENT, F.coalesce(F.col(COMPONENT), F.col(CONTENT)).alias(COMPONENT)
    )
    labels = ranked.select(DOC_ID, CONTENT).join(group, CONTENT).select(DOC_ID, COMPONENT)
    content, kept = F.col(CONTENT), F.col(COMPONENT)
    stars = anchored.where(F.col(NODE) != F.col(ANCHOR)).select(
        F.least(content, kept).alias(DOC_A), F.greatest(content, kept).alias(DOC_B), COMPONENT
    )
    return labels, stars
