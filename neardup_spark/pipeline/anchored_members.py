"""The components step under the anchored rule (``cluster_rule: anchored``, the default): each
document's kept document, by the sequential greedy of :mod:`neardup_spark.batch.anchored` over
its component. Two implementations, the same members (tested against each other), as the plan
places the components step (:func:`~neardup_spark.pipeline.plan.decide_components`):

* ``driver``: the pairs were found in this process: the rule runs over them here, in one call;
* ``single_task`` and ``distributed``: the pairs' connected components are labelled (in one
  task, this process's labels when the pairs were found here, or distributed rounds), the
  documents and edges of each component sent to one task, and the rule runs there, over whole
  components: the sequential greedy's result whatever the partitioning.

Either way the result is the members (``doc_id``, ``cluster_id``: the kept document,
``similarity``: the member's measure against it, 1.0 for the kept one and exact copies) and the
``pairs/`` rows that justify removals ``pairs/`` does not hold under their own ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type

from neardup_spark.batch.anchored import (
    CONTENT,
    EDGE_VALUES,
    KIND,
    anchored_members,
    anchored_partition_fn,
)
from neardup_spark.columns import (
    CLUSTER_ID,
    COMPONENT,
    DOC_A,
    DOC_B,
    DOC_ID,
    METHOD,
    N_CHARS,
    N_SHINGLES,
    SIMILARITY,
)
from neardup_spark.kernels.anchored import components_removed
from neardup_spark.pipeline.anchored_rounds import (
    EARLIER,
    LATER,
    NODE,
    content_nodes,
    directed_edges,
    greedy_rounds,
    ranked_documents,
    star_labels,
)
from neardup_spark.pipeline.components import connected_components
from neardup_spark.pipeline.context import RunContext
from neardup_spark.pipeline.driver_pairs import DriverTables
from neardup_spark.pipeline.execution import shuffle_partitions
from neardup_spark.pipeline.plan import DRIVER
from neardup_spark.runtime.engine import from_arrow_batches
from neardup_spark.runtime.spark_compat import to_arrow
from neardup_spark.stages.clusters import nan_as_null

MEMORY = StorageLevel.MEMORY_AND_DISK
# The keep policy's table and keys (io/corpus.py, preference_table).
Ranking = tuple[DataFrame, list[tuple[str, bool]]]


def keep_keys(ctx: RunContext, ranking: Ranking | None) -> list[tuple[str, bool]]:
    """The keep order's keys before the smallest id: under containment the most shingles first
    (a container before what it contains), then the ``--prefer`` columns, the longest text, or
    none (the smallest id)."""
    first = [(N_SHINGLES, True)] if ctx.config.similarity == "containment" else []
    if ranking is not None:
        return first + list(ranking[1])
    longest = ctx.config.representative == "longest_text"
    return first + ([(N_CHARS, True)] if longest else [])


def key_table(ctx: RunContext, features: DataFrame, ranking: Ranking | None) -> DataFrame | None:
    """``doc_id`` and the keep keys' columns of every document (None: no keys)."""
    sizes = ctx.config.similarity == "containment"
    if ranking is not None:
        table = ranking[0]
        return table.join(features.select(DOC_ID, N_SHINGLES), DOC_ID) if sizes else table
    longest = ctx.config.representative == "longest_text"
    columns = [*([N_SHINGLES] if sizes else []), *([N_CHARS] if longest else [])]
    return features.select(DOC_ID, *columns) if columns else None


def anchored_here(
    ctx: RunContext, rows: pa.Table, features: DataFrame, ranking: Ranking | None
) -> tuple[pa.Table, pa.Table]:
    """The ``driver`` implementation: the rule over the pairs found in this process (``rows``,
    the ``pairs/`` rows); the keys of their documents (``--prefer``, the longest text) fetched
    in one Spark job. No pairs: no members (their ends' columns may be of the null type)."""
    if not rows.num_rows:
        nothing = pa.array([], to_arrow_type(features.schema[DOC_ID].dataType))
        ctx.counts["removed_by_components"] = 0
        similarity = pa.array([], pa.float64())
        members = pa.table({DOC_ID: nothing, CLUSTER_ID: nothing, SIMILARITY: similarity})
        return members, rows.select([DOC_A, DOC_B, *EDGE_VALUES])
    docs = graph_documents(rows)
    keys = keep_keys(ctx, ranking)
    table = key_table(ctx, features, ranking)
    if table is not None:
        wanted = from_arrow_batches(ctx.spark, pa.table({DOC_ID: docs.column(DOC_ID)}))
        fetched = to_arrow(table.join(F.broadcast(wanted), DOC_ID))
        docs = docs.join(fetched, DOC_ID)
    near = rows.filter(pc.not_equal(rows.column(METHOD), "exact"))
    members, added = anchored_members(docs, near.select([DOC_A, DOC_B, *EDGE_VALUES]), keys)
    ctx.counts["removed_by_components"] = removed_by_components(rows)
    return members, added


def graph_documents(rows: pa.Table) -> pa.Table:
    """Every document of a pairs table and its content: the smallest id of its exact-copy
    group (``doc_a`` of its exact pair), else itself."""
    exact = rows.filter(pc.equal(rows.column(METHOD), "exact"))
    ids = pc.unique(pa.chunked_array([rows.column(DOC_A), rows.column(DOC_B)]).combine_chunks())
    where = pc.index_in(ids, value_set=exact.column(DOC_B).combine_chunks())
    group = exact.column(DOC_A).combine_chunks().take(where)
    return pa.table({DOC_ID: ids, CONTENT: pc.coalesce(group, ids)})


def removed_by_components(rows: pa.Table) -> int:
    """What the components rule removes over the same pairs (the report's comparison)."""
    ids = pc.unique(pa.chunked_array([rows.column(DOC_A), rows.column(DOC_B)]).combine_chunks())
    a = pc.index_in(rows.column(DOC_A), value_set=ids).to_numpy(zero_copy_only=False)
    b = pc.index_in(rows.column(DOC_B), value_set=ids).to_numpy(zero_copy_only=False)
    return components_removed(len(ids), a, b)


def graph_docs(
    ctx: RunContext, pairs: DataFrame, ids: DataFrame, features: DataFrame, ranking: Ranking | None
) -> DataFrame:
    """The graph's documents (``ids``: ``doc_id`` and any other columns) with their
    ``content`` (the smallest id of their exact-copy group, from the exact pairs) and the keep
    keys' columns."""
    exact = pairs.where(F.col(METHOD) == "exact").select(
        F.col(DOC_B).alias(DOC_ID), F.col(DOC_A).alias(CONTENT)
    )
    docs = ids.join(exact, DOC_ID, "left").withColumn(
        CONTENT, F.coalesce(F.col(CONTENT), F.col(DOC_ID))
    )
    table = key_table(ctx, features, ranking)
    if table is not None:
        docs = docs.join(
            table.select(DOC_ID, *(name for name, _ in keep_keys(ctx, ranking))), DOC_ID
        )
    return docs


def members_in_tasks(
    ctx: RunContext, pairs: DataFrame, docs: DataFrame, edges: DataFrame, ranking: Ranking | None
) -> DataFrame:
    """The Spark implementation: each group's documents (``docs``: ``component``, ``doc_id``,
    ``content``, the keep keys; a whole component, or a kept content's star) and its
    near-duplicate edges (``edges``: ``component``, the pairs' columns) sent to one task, which
    runs the rule over them. Returns the task's rows: ``_kind`` 0 the members, 1 the pairs to
    add."""
    keys = keep_keys(ctx, ranking)
    rows = union_rows(docs, edges, keys)
    parts = max(1, shuffle_partitions(ctx.spark))
    out_schema = output_schema(pairs)
    spread = rows.repartition(parts, COMPONENT).drop(COMPONENT)
    run = anchored_partition_fn(keys, to_arrow_schema(out_schema))
    return spread.mapInArrow(run, out_schema)


def component_rows(
    ctx: RunContext,
    pairs: DataFrame,
    labels: DataFrame,
    features: DataFrame,
    ranking: Ranking | None,
) -> DataFrame:
    """:func:`members_in_tasks` over whole components (``labels``: ``doc_id``,
    ``component``)."""
    docs = graph_docs(ctx, pairs, labels, features, ranking)
    ends = labels.select(F.col(DOC_ID).alias(DOC_A), COMPONENT)
    edges = pairs.where(F.col(METHOD) != "exact").join(ends, DOC_A)
    return members_in_tasks(ctx, pairs, docs, edges, ranking)


def star_rows(
    ctx: RunContext,
    pairs: DataFrame,
    features: DataFrame,
    ranking: Ranking | None,
    task_edges: int,
) -> tuple[DataFrame, int]:
    """:func:`members_in_tasks` over stars (a kept content and the contents removed in its
    favour), decided in rounds (:mod:`.anchored_rounds`); and the rounds taken."""
    ends = pairs.select(F.col(DOC_A).alias(DOC_ID)).unionByName(
        pairs.select(F.col(DOC_B).alias(DOC_ID))
    )
    docs = graph_docs(ctx, pairs, ends.distinct(), features, ranking)
    ranked = ctx.checkpoint(ranked_documents(docs, keep_keys(ctx, ranking)))
    nodes = content_nodes(ranked)
    near = pairs.where(F.col(METHOD) != "exact")
    edges = directed_edges(near, nodes)
    open_nodes = (
        edges.select(F.col(LATER).alias(NODE))
        .unionByName(edges.select(F.col(EARLIER).alias(NODE)))
        .distinct()
    )
    max_rounds = ctx.settings.anchored_max_rounds
    decisions, rounds = greedy_rounds(edges, open_nodes, ctx.checkpoint, task_edges, max_rounds)
    labels, stars = star_labels(ranked, nodes, decisions)
    star_docs = ranked.drop(NODE).join(labels, DOC_ID)
    star_edges = near.join(stars, [DOC_A, DOC_B])
    return members_in_tasks(ctx, pairs, star_docs, star_edges, ranking), rounds


def union_rows(docs: DataFrame, edges: DataFrame, keys: Sequence[tuple[str, bool]]) -> DataFrame:
    """Documents (``_kind`` 0) and edges (1) in one table, each with its component."""
    id_type = docs.schema[DOC_ID].dataType
    key_types = {name: docs.schema[name].dataType for name, _ in keys}
    value_types = {name: edges.schema[name].dataType for name in EDGE_VALUES}

    def typed(name: str, data_type: T.DataType, frame: DataFrame) -> F.Column:
        if name in frame.columns:
            value = nan_as_null(frame, name) if name in key_types else F.col(name)
            return value.cast(data_type).alias(name)
        return F.lit(None).cast(data_type).alias(name)

    columns = [
        (COMPONENT, id_type),
        (DOC_ID, id_type),
        (CONTENT, id_type),
        *key_types.items(),
        (DOC_A, id_type),
        (DOC_B, id_type),
        *value_types.items(),
    ]

    def shaped(frame: DataFrame, kind: int) -> DataFrame:
        return frame.select(
            F.lit(kind).cast("byte").alias(KIND), *(typed(n, t, frame) for n, t in columns)
        )

    return shaped(docs, 0).unionByName(shaped(edges, 1))


def output_schema(pairs: DataFrame) -> T.StructType:
    """The rows of :func:`members_in_tasks`: ``_kind``, the members' and the pairs' columns."""
    id_type = pairs.schema[DOC_A].dataType
    fields = [
        T.StructField(KIND, T.ByteType(), False),
        T.StructField(DOC_ID, id_type),
        T.StructField(CLUSTER_ID, id_type),
        T.StructField(DOC_A, id_type),
        T.StructField(DOC_B, id_type),
        *(T.StructField(n, pairs.schema[n].dataType) for n in EDGE_VALUES),
    ]
    return T.StructType(fields)


def split_rows(rows: DataFrame, pairs: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The members (``doc_id``, ``cluster_id``, ``similarity``) and the pairs to add (the
    columns of ``pairs``) of :func:`members_in_tasks`' rows."""
    members = rows.where(F.col(KIND) == 0).select(DOC_ID, CLUSTER_ID, SIMILARITY)
    # (method as pairs/ declares it: never null)
    method = F.coalesce(F.col(METHOD), F.lit("exact")).alias(METHOD)
    columns = [method if name == METHOD else F.col(name) for name in pairs.columns]
    added = rows.where(F.col(KIND) == 1).select(*columns)
    return members, added


def anchored_step(
    ctx: RunContext,
    where: str,
    pairs: DataFrame,
    features: DataFrame,
    ranking: Ranking | None,
    driver: DriverTables | None,
    task_edges: int,
) -> tuple[DataFrame, dict[str, int], DataFrame | pa.Table]:
    """The anchored rule where the plan placed the components (``where``): the members (kept
    in the stage results), the rounds taken (``rounds``: the labels'; ``greedy_rounds``: the
    distributed path's decisions', up to ``task_edges`` edges left for one task), and the pairs
    to add (a table of this process when the rule ran here); ``removed`` and
    ``removed_by_components`` counted."""
    if where == DRIVER:
        assert driver is not None  # the plan's condition
        # (SimHash's similarity is Spark's cosine: the rows as Spark computed them)
        rows = driver.pair_rows if driver.pair_rows is not None else to_arrow(pairs)
        members, added = anchored_here(ctx, rows, features, ranking)
        driver.members, driver.added = members, added
        ctx.counts["removed"] = removed_of(members)
        ctx.counts["justifying_pairs"] = added.num_rows
        return from_arrow_batches(ctx.spark, members), {"rounds": 0}, added
    edges = pairs.select(DOC_A, DOC_B)
    labels, rounds = connected_components(edges, ctx.checkpoint, where == "single_task")
    taken = {"rounds": rounds}
    labels = labels.persist()
    sizes = labels.agg(F.count(F.lit(1)), F.countDistinct(COMPONENT)).first()
    ctx.counts["removed_by_components"] = int(sizes[0] - sizes[1]) if sizes else 0
    if where == "single_task":
        rows = component_rows(ctx, pairs, labels, features, ranking)
    else:  # components may be larger than a task holds: decided in rounds, then by star
        rows, greedy = star_rows(ctx, pairs, features, ranking, task_edges)
        taken["greedy_rounds"] = greedy
    removed = F.sum(((F.col(KIND) == 0) & (F.col(DOC_ID) != F.col(CLUSTER_ID))).cast("long"))
    justifying = F.sum((F.col(KIND) == 1).cast("long"))
    aggregates = {"removed": removed, "justifying_pairs": justifying}
    kept, counted = ctx.results.keep("components", rows, aggregates, MEMORY)
    labels.unpersist()
    ctx.counts["removed"] = counted["removed"]
    ctx.counts["justifying_pairs"] = counted["justifying_pairs"]
    members, added = split_rows(kept, pairs)
    return members, taken, added


def removed_of(members: pa.Table) -> int:
    return int(np.count_nonzero(pc.not_equal(members.column(DOC_ID), members.column(CLUSTER_ID))))
