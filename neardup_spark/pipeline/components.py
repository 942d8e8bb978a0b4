"""Connected components of the verified-pair graph, labelled by each component's smallest id.

Two strategies (the plan chooses by the number of edges, :mod:`.plan`):

* a graph one task holds: one executor task gathers the edge list and runs
  SciPy's connected components (:mod:`neardup_spark.kernels.components`): one Spark job instead
  of several per round, which dominates small runs;
* above it, distributed alternating large-star / small-star (Kiveris, Lattanzi, Mirrokni,
  Rastogi, Vassilvitskii 2014), O(log^2 n) rounds. Each round keeps the edge set as ``(a, b)``
  with ``a < b``; it ends when every component is a star around its smallest id (no node is both
  the smaller end of one edge and the larger end of another, and no node the larger end of two).
  Lineage is cut every round by a checkpoint.

Either way the edge list stays on the executors; nothing is collected to the driver. A run that
found its pairs on the driver (:mod:`.driver_pairs`) has its edges there already and labels them
there with the single task's kernel (:func:`driver_components`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.columns import CLUSTER_ID, COMPONENT, DOC_A, DOC_B, DOC_ID, SIMILARITY
from neardup_spark.kernels.components import component_labels
from neardup_spark.runtime.engine import from_arrow_batches

log = logging.getLogger(__name__)

_NODE, _NBR, _MIN = "node", "nbr", "min_nbr"


def _normalized(edges: DataFrame) -> DataFrame:
    a, b = F.col(DOC_A), F.col(DOC_B)
    return (
        edges.select(F.least(a, b).alias(DOC_A), F.greatest(a, b).alias(DOC_B))
        .where(F.col(DOC_A) != F.col(DOC_B))
        .distinct()
    )


def large_star(edges: DataFrame) -> DataFrame:
    """Connect every larger neighbour of a node to the smallest of its closed neighbourhood.

    Input and output columns: ``doc_a < doc_b``.
    """
    directed = edges.select(F.col(DOC_A).alias(_NODE), F.col(DOC_B).alias(_NBR)).unionByName(
        edges.select(F.col(DOC_B).alias(_NODE), F.col(DOC_A).alias(_NBR))
    )
    mins = directed.groupBy(_NODE).agg(F.min(_NBR).alias(_MIN))
    return (
        directed.where(F.col(_NBR) > F.col(_NODE))
        .join(mins, _NODE)
        .select(F.least(F.col(_MIN), F.col(_NODE)).alias(DOC_A), F.col(_NBR).alias(DOC_B))
        .distinct()
    )


def small_star(edges: DataFrame) -> DataFrame:
    """Connect a node and its smaller neighbours to the smallest of them.

    Input and output columns: ``doc_a < doc_b``.
    """
    mins = edges.groupBy(DOC_B).agg(F.min(DOC_A).alias(_MIN))
    joined = edges.join(mins, DOC_B)
    to_node = joined.select(F.col(_MIN).alias(DOC_A), F.col(DOC_B))
    to_smaller = joined.where(F.col(DOC_A) != F.col(_MIN)).select(
        F.col(_MIN).alias(DOC_A), F.col(DOC_A).alias(DOC_B)
    )
    return to_node.unionByName(to_smaller).distinct()


def _is_forest_of_stars(edges: DataFrame) -> bool:
    """True when every component is a star around its smallest id: no node is a leaf
    (``doc_b``) of one edge and a centre (``doc_a``) of another, and no leaf has two centres
    (edges ``1-3`` and ``2-3`` pass the first test alone: node 3 would get two labels and its
    component two clusters). One Spark job. Input: distinct edges ``doc_a < doc_b``."""
    centres_per_leaf = edges.groupBy(DOC_B).agg(F.count(F.lit(1)).alias(_MIN))
    two_centres = centres_per_leaf.where(F.col(_MIN) > 1).select(F.col(DOC_B).alias(DOC_A))
    leaves = centres_per_leaf.select(F.col(DOC_B).alias(DOC_A))
    also_centre = edges.select(DOC_A).join(leaves, DOC_A, "left_semi")
    return two_centres.unionByName(also_centre).limit(1).count() == 0


def _labels_in_one_task(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    collected = [batch for batch in batches if batch.num_rows]
    if not collected:
        return
    table = pa.Table.from_batches(collected)
    nodes, labels = component_labels(
        table.column(DOC_A).combine_chunks(), table.column(DOC_B).combine_chunks()
    )
    yield pa.RecordBatch.from_arrays([nodes, labels], names=[DOC_ID, COMPONENT])


def single_task_components(edges: DataFrame) -> DataFrame:
    """Edges -> labels, in one executor task (for graphs that fit one task's memory).

    Input columns: ``doc_a``, ``doc_b``. Output columns: ``doc_id``, ``component``.
    """
    id_type = edges.schema[DOC_A].dataType
    schema = T.StructType(
        [T.StructField(DOC_ID, id_type, False), T.StructField(COMPONENT, id_type, False)]
    )
    return edges.select(DOC_A, DOC_B).coalesce(1).mapInArrow(_labels_in_one_task, schema)


def _driver_labels(edges: pa.Table, label: str) -> pa.Table:
    """Edges held in this process -> ``doc_id``, ``label`` (each component's smallest id),
    with the single task's kernel."""
    id_type = edges.schema.field(DOC_A).type
    nodes, labels = component_labels(
        edges.column(DOC_A).combine_chunks(), edges.column(DOC_B).combine_chunks()
    )
    schema = pa.schema([pa.field(DOC_ID, id_type, False), pa.field(label, id_type, False)])
    return pa.table([nodes, labels], schema=schema)


def driver_components(spark: SparkSession, edges: pa.Table) -> DataFrame:
    """Edges held in this process -> labels, computed here (a small run that found its pairs
    on the driver: no Python task).

    Input columns: ``doc_a``, ``doc_b``. Output columns: ``doc_id``, ``component``.
    """
    return from_arrow_batches(spark, _driver_labels(edges, COMPONENT))


def driver_members(edges: pa.Table) -> tuple[pa.Table, int]:
    """Edges held in this process -> each member's representative by the default rule (the
    component's smallest id), computed here, and how many members are not one.

    Input columns: ``doc_a``, ``doc_b``. Output columns: ``doc_id``, ``cluster_id``.
    """
    members = _driver_labels(edges, CLUSTER_ID)
    return members, members.num_rows - len(pc.unique(members.column(CLUSTER_ID)))


def driver_clusters(ids: pa.ChunkedArray, members: pa.Table, schema: pa.Schema) -> pa.Table:
    """Every document's id and the members found here -> the ``clusters/`` table, computed
    here, in ``schema`` (the Spark stage's: :func:`~neardup_spark.stages.clusters.
    cluster_table`'s columns ``doc_id``, ``cluster_id``, ``is_representative`` and, with the
    members' ``similarity``, ``similarity``: 1.0 for a document in no cluster)."""
    every = ids.combine_chunks()
    where = pc.index_in(every, value_set=members.column(DOC_ID).combine_chunks())
    cluster = pc.coalesce(members.column(CLUSTER_ID).combine_chunks().take(where), every)
    columns = [every, cluster, pc.equal(every, cluster)]
    if SIMILARITY in members.column_names:
        measure = members.column(SIMILARITY).combine_chunks().take(where)
        columns.append(pc.coalesce(measure, pa.scalar(1.0)))
    return pa.table(columns, names=schema.names).cast(schema)


def connected_components(
    edges: DataFrame,
    checkpoint: Callable[[DataFrame], DataFrame],
    single_task: bool = False,
    max_rounds: int = 100,
) -> tuple[DataFrame, int]:
    """Undirected edges -> ``(labels, rounds)``.

    Input columns: ``doc_a``, ``doc_b`` (any orientation; self-loops and repeats ignored).
    Output columns: ``doc_id``, ``component`` (the smallest id of its component), one row per node
    that appears in an edge. ``checkpoint`` persists a DataFrame and cuts its lineage (each
    distributed round). ``single_task`` (what the plan chose for a graph one task holds): the
    single-task strategy runs (0 rounds); its labels are one task away from ``edges`` and not
    checkpointed (a checkpoint job and its files cost ~0.3 s): persist ``edges`` and the labels
    if read more than once.
    """
    if single_task:
        return single_task_components(edges), 0
    current = checkpoint(_normalized(edges))
    rounds = 0
    while not _is_forest_of_stars(current):
        if rounds >= max_rounds:
            raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")
        current = checkpoint(small_star(large_star(current)))
        rounds += 1
        log.debug("connected components: round %d", rounds)
    labels = current.select(F.col(DOC_B).alias(DOC_ID), F.col(DOC_A).alias(COMPONENT)).unionByName(
        current.select(F.col(DOC_A).alias(DOC_ID), F.col(DOC_A).alias(COMPONENT)).distinct()
    )
    return labels, rounds
