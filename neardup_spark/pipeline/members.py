"""The components step: the verified pairs -> each clustered document's representative (its
``members``: ``doc_id``, ``cluster_id``). Three implementations, the same members (tested
against each other); the plan (:func:`~neardup_spark.pipeline.plan.decide_components`) picks
one by the number of edges:

* ``driver``: the pairs were found in this process and the representatives are the smallest
  ids: labelled here with the single task's kernel, nothing kept (a rerun finds them again);
* ``single_task``: one executor task gathers the edges and labels them (the labels come from
  this process when the pairs were found here);
* ``distributed``: large-star / small-star rounds (:mod:`.components`).

The representative is the smallest id, the longest text, or the first by the ``--prefer``
columns (:mod:`neardup_spark.stages.clusters`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from neardup_spark.columns import CLUSTER_ID, CONTAINMENT, DOC_A, DOC_B, DOC_ID, SIMILARITY
from neardup_spark.pipeline.anchored_members import anchored_step, split_rows
from neardup_spark.pipeline.components import (
    connected_components,
    driver_components,
    driver_members,
)
from neardup_spark.pipeline.context import RunContext
from neardup_spark.pipeline.driver_pairs import DriverTables
from neardup_spark.pipeline.execution import run_alongside, single_task_edge_limit
from neardup_spark.pipeline.plan import DRIVER, Choice, decide_components
from neardup_spark.runtime.engine import from_arrow_batches
from neardup_spark.stages.clusters import preferred_representatives, representatives

MEMORY = StorageLevel.MEMORY_AND_DISK
# The keep policy's table and keys (io/corpus.py, preference_table).
Ranking = tuple[DataFrame, list[tuple[str, bool]]]


def members_and_pairs_written(
    ctx: RunContext,
    pairs: DataFrame,
    features: DataFrame,
    ranking: Ranking | None,
    driver: DriverTables | None,
    write_pairs: Callable[[DataFrame], object] | None,
) -> tuple[DataFrame, dict[str, Any], Callable[[], object] | None, DataFrame]:
    """:func:`cluster_members`, with ``write_pairs`` writing ``pairs/``: alongside the
    components under the components rule; after them under the anchored rule, which adds the
    rows justifying its removals. Members found in this process take no time, so their pairs
    are left to be written with the other outputs: the third value writes them then. The
    fourth is ``pairs/`` (the verified pairs, and the rows the anchored rule added)."""
    write_now = write_pairs is not None and ctx.results.finished("components") is None
    later = members_here(ctx, ranking, driver)
    alongside = ctx.config.cluster_rule == "components" and not later
    pairs_written: Callable[[], object] | None = (
        run_alongside(ctx.spark, lambda: write_pairs(pairs))
        if write_pairs and write_now and alongside
        else None
    )
    try:
        members, components, added = cluster_members(ctx, pairs, features, ranking, driver)
    except Exception:  # (an interrupt is not waited on: it stops the process)
        if pairs_written:  # a failed write cancelled the components: report the cause
            pairs_written()
        raise
    every = pairs if added is None else pairs.unionByName(added_frame(ctx, added, pairs))
    if ctx.config.similarity == "containment":  # pairs/'s own column: similarity measures it
        every = every.withColumn(CONTAINMENT, F.col(SIMILARITY))
    if write_pairs and write_now and not alongside and not later:
        pairs_written = lambda: write_pairs(every)  # noqa: E731
    if pairs_written:  # before the intermediates it may still read are released
        with ctx.timer.stage("write"):
            pairs_written()
    if not later:  # members found here are not kept: a rerun finds them again
        finish_components(ctx, components)
    pending = (lambda: write_pairs(every)) if write_pairs and write_now and later else None
    return members, components, pending, every


def added_frame(ctx: RunContext, added: DataFrame | pa.Table, pairs: DataFrame) -> DataFrame:
    """The anchored rule's added pairs as a DataFrame of ``pairs``' schema."""
    if isinstance(added, DataFrame):
        return added
    return from_arrow_batches(ctx.spark, added.cast(to_arrow_schema(pairs.schema)))


def members_here(ctx: RunContext, ranking: Ranking | None, driver: DriverTables | None) -> bool:
    """Whether the members are found in this process (the pairs were; under the components
    rule, the representatives are the smallest ids), decided now: the pairs' writing waits on
    it."""
    if driver is None or not smallest_id_members(ctx, ranking):
        return False
    return components_choice(ctx, None, driver, ranking).where == DRIVER


def smallest_id_members(ctx: RunContext, ranking: Ranking | None) -> bool:
    """Whether the members may be found in this process with the pairs: always under the
    anchored rule (it fetches the keep keys it needs), under the components rule when the
    representatives are the smallest ids."""
    if ctx.config.cluster_rule == "anchored":
        return True
    return ranking is None and ctx.config.representative == "smallest_id"


def components_choice(
    ctx: RunContext, edges: DataFrame | None, driver: DriverTables | None, ranking: Ranking | None
) -> Choice:
    """The plan's choice for the components (once): the edges one task holds are
    ``components_single_task_max_edges`` when set, every edge of pairs found here, else what
    one Python task's memory holds of ``edges`` (measured)."""
    if "components" in ctx.plan.choices:
        return ctx.plan.choices["components"]
    n_edges = ctx.counts["verified_pairs"]
    limit = task_edge_limit(ctx, edges, driver)
    pairs = ctx.plan.choices["pairs"]
    smallest = smallest_id_members(ctx, ranking)
    return ctx.plan.record(decide_components(n_edges, limit, pairs, smallest))


def task_edge_limit(ctx: RunContext, edges: DataFrame | None, driver: DriverTables | None) -> int:
    """The edges one task takes: ``components_single_task_max_edges`` when set, every edge of
    pairs found here, else what one Python task's memory holds of ``edges`` (measured)."""
    n_edges = ctx.counts["verified_pairs"]
    limit = ctx.settings.components_single_task_max_edges
    if limit is not None:
        return limit
    if driver is not None or edges is None:
        return n_edges
    return single_task_edge_limit(ctx.spark, None, n_edges, edges)


def cluster_members(
    ctx: RunContext,
    pairs: DataFrame,
    features: DataFrame,
    ranking: Ranking | None = None,
    driver: DriverTables | None = None,
) -> tuple[DataFrame, dict[str, Any], DataFrame | pa.Table | None]:
    """The verified pairs -> each clustered document's kept document (``doc_id``,
    ``cluster_id``, and ``similarity`` under the anchored rule; kept in the stage results,
    finished by :func:`finish_components`), the report's ``components`` (the ``strategy``
    taken, ``driver``, ``single_task`` or ``distributed``, and its ``rounds``: a forest of
    stars takes none; the anchored rule's distributed path adds ``greedy_rounds``), and the
    anchored rule's added ``pairs/`` rows (None under the components rule, or when an earlier
    run finished the step). ``ranking``: the keep policy's table and keys. ``driver``: the
    pairs found in this process."""
    counts = ctx.counts
    done = ctx.results.finished("components")
    if done is not None:
        counts.update(done["counts"])
        rounds = int(done["rounds"])
        strategy = done.get("strategy") or ("distributed" if rounds else "single_task")
        loaded = ctx.results.load("components")
        if ctx.config.cluster_rule == "anchored":
            loaded = split_rows(loaded, pairs)[0]
        taken = {"rounds": rounds}
        if "greedy_rounds" in done:
            taken["greedy_rounds"] = int(done["greedy_rounds"])
        return loaded, {"strategy": strategy, **taken}, None
    edges = pairs.select(DOC_A, DOC_B)
    added, taken = None, {}
    with ctx.timer.stage("components") as counted:
        choice = components_choice(ctx, edges, driver, ranking)
        if ctx.config.cluster_rule == "anchored":
            task_edges = task_edge_limit(ctx, edges, driver) if choice.where == "distributed" else 0
            members, taken, added = anchored_step(
                ctx, choice.where, pairs, features, ranking, driver, task_edges
            )
            rounds = taken["rounds"]
            removed = ctx.counts["removed"]
            # pairs/ holds the rows justifying removals too: verified_pairs counts its rows
            counts["verified_pairs"] += counts["justifying_pairs"]
        elif choice.where == DRIVER and smallest_id_members(ctx, ranking):
            assert driver is not None  # the plan's condition
            driver.members, removed = driver_members(driver.edges)
            members, rounds = from_arrow_batches(ctx.spark, driver.members), 0
        else:
            members, rounds = spark_members(ctx, choice, edges, features, ranking, driver)
            removed = ctx.counts["removed"]
        if choice.where == DRIVER:
            ctx.timer.on_driver.append("components")
        counted["removed"], counted["rows"] = removed, counts["verified_pairs"]
    counts["removed"] = removed
    counts["clusters"] = counts["input_rows"] - removed
    return members, {"strategy": choice.where, **taken, "rounds": rounds}, added


def spark_members(
    ctx: RunContext,
    choice: Choice,
    edges: DataFrame,
    features: DataFrame,
    ranking: Ranking | None,
    driver: DriverTables | None,
) -> tuple[DataFrame, int]:
    """The members from the components' labels (found in this process when the pairs were,
    else in one task or distributed rounds, as ``choice`` says) and the representative rule;
    kept, the removed documents counted into ``ctx.counts``. Returns them and the rounds."""
    single_task = choice.where != "distributed"
    if choice.where == DRIVER:
        assert driver is not None  # the plan's condition
        labels, rounds = driver_components(ctx.spark, driver.edges), 0
    else:
        labels, rounds = connected_components(edges, ctx.checkpoint, single_task)
    if single_task and (ctx.config.representative != "smallest_id" or ranking is not None):
        labels = labels.persist()  # read twice: the single task would run twice
    if ranking is not None:
        small = 2 * ctx.counts["verified_pairs"] <= ctx.settings.broadcast_max_rows
        rule = preferred_representatives(ranking[1], ranking[0], small)
    else:
        rule = representatives(ctx.config.representative, features)
    members, kept = ctx.results.keep(
        "components",
        labels.transform(rule),
        {"removed": F.sum((F.col(DOC_ID) != F.col(CLUSTER_ID)).cast("long"))},
        MEMORY,
    )
    labels.unpersist()
    ctx.counts["removed"] = kept["removed"]
    return members, rounds


def finish_components(ctx: RunContext, components: dict[str, Any]) -> None:
    """Mark the components stage finished (once ``pairs/``, staged alongside it, is written)."""
    if "components" not in ctx.results.resumed:
        # (the last three: the anchored rule's only)
        kept = (
            "removed",
            "clusters",
            "removed_by_components",
            "justifying_pairs",
            "verified_pairs",
        )
        marker = {name: ctx.counts[name] for name in kept if name in ctx.counts}
        ctx.results.finish("components", {"counts": marker, **components, "staged": ["pairs"]})
