"""The report's ``removals`` section: what a run removed and why, as ``report.json`` records it
and ``report.html`` shows it.

* ``removed`` and ``removed_by_components``: the documents this run removed, and those the
  components rule removes over the same pairs (under it, the same number);
* ``largest_clusters``: the clusters of most documents (``cluster_id``: the kept document,
  ``size``: its documents, itself included), largest first, ties to the smallest id;
* ``similarity``: the removed documents counted by their ``similarity`` to their kept document
  (``clusters/``' column) in fixed bins, :data:`BIN_WIDTH` wide from the threshold's bin to 1.0
  (:func:`similarity_edges`); under the components rule None, since a removed document need not
  have a pair with its kept one.

Two implementations, the same section (tested against each other): over ``clusters/`` as a
table of this process when the members were found here (:func:`removals_here`), else two small
Spark jobs over the members the run keeps (:func:`removals_in_spark`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from neardup_spark.batch.row_copies import DUPLICATES, duplicate_counts
from neardup_spark.columns import CLUSTER_ID, DOC_ID, IS_REPRESENTATIVE, SIMILARITY
from neardup_spark.config import DedupeConfig
from neardup_spark.pipeline.execution import run_together
from neardup_spark.stages.clusters import duplicate_counts as duplicate_counts_spark

TOP_CLUSTERS = 10
BIN_WIDTH = 0.05
# A similarity on a bin's edge (0.85 as a double) counts in the bin it opens.
_EDGE_SLACK = 1e-9


def similarity_floor(config: DedupeConfig) -> float:
    """The least similarity of a verified pair: the Jaccard threshold (MinHash),
    ``cos(pi * hamming_k / 64)`` (SimHash), 1.0 (exact copies).

    >>> similarity_floor(DedupeConfig(threshold=0.7))
    0.7
    """
    if config.method == "minhash":
        return float(config.threshold)
    if config.method == "simhash":
        return math.cos(math.pi * config.hamming_k / 64.0)
    return 1.0


def similarity_edges(floor: float) -> list[float]:
    """The histogram's bin edges: multiples of :data:`BIN_WIDTH` from the one at or below
    ``floor`` (at most 0.95: one bin at least) to 1.0; the last bin holds 1.0.

    >>> similarity_edges(0.8)
    [0.8, 0.85, 0.9, 0.95, 1.0]
    >>> similarity_edges(0.73)
    [0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0]
    >>> similarity_edges(1.0)
    [0.95, 1.0]
    """
    steps = round(1 / BIN_WIDTH)
    first = min(math.floor(floor * steps + _EDGE_SLACK), steps - 1)
    return [round(i / steps, 10) for i in range(first, steps + 1)]


def bin_numbers(values: np.ndarray, edges: list[float]) -> np.ndarray:
    """Each value's bin of ``edges`` (-1 below the first edge; 1.0 in the last bin).

    >>> bin_numbers(np.array([0.8, 0.85, 0.99, 1.0, 0.5]), [0.8, 0.85, 0.9, 0.95, 1.0]).tolist()
    [0, 1, 3, 3, -1]
    """
    raw = np.floor((values - edges[0]) / BIN_WIDTH + _EDGE_SLACK).astype(np.int64)
    return np.where(raw < 0, -1, np.minimum(raw, len(edges) - 2))


def section(
    counts: dict[str, int],
    config: DedupeConfig,
    largest: list[tuple[Any, int]],
    bins: dict[int, int] | None,
) -> dict[str, Any]:
    """The section from the run's counts, the largest clusters (``(cluster_id, size)``) and
    the removed documents by bin number (None: no similarities)."""
    similarity = None
    if bins is not None:
        edges = similarity_edges(similarity_floor(config))
        similarity = {
            "edges": edges,
            "counts": [int(bins.get(i, 0)) for i in range(len(edges) - 1)],
            "below": int(bins.get(-1, 0)),
            "threshold": similarity_floor(config),
            "total": int(sum(bins.values())),
        }
    removed = int(counts.get("removed", 0))
    return {
        "cluster_rule": config.cluster_rule,
        "removed": removed,
        "removed_by_components": int(counts.get("removed_by_components", removed)),
        "largest_clusters": [{"cluster_id": c, "size": int(n)} for c, n in largest],
        "similarity": similarity,
    }


def removals_here(counts: dict[str, int], config: DedupeConfig, clusters: pa.Table) -> dict:
    """The section from ``clusters/`` as a table of this process."""
    removed = clusters.filter(pc.invert(clusters.column(IS_REPRESENTATIVE)))
    sizes = duplicate_counts(removed.column(CLUSTER_ID))
    top = sizes.sort_by([(DUPLICATES, "descending"), (DOC_ID, "ascending")]).slice(0, TOP_CLUSTERS)
    largest = [
        (row[DOC_ID], row[DUPLICATES] + 1) for row in top.to_pylist()
    ]  # (ids as Python values)
    bins = None
    if config.cluster_rule == "anchored" and SIMILARITY in clusters.column_names:
        values = removed.column(SIMILARITY).to_numpy(zero_copy_only=False)
        edges = similarity_edges(similarity_floor(config))
        numbers, n = np.unique(bin_numbers(values.astype(np.float64), edges), return_counts=True)
        bins = dict(zip(numbers.tolist(), n.tolist(), strict=True))
    return section(counts, config, largest, bins)


def removals_in_spark(counts: dict[str, int], config: DedupeConfig, members: DataFrame) -> dict:
    """The section from the members (``doc_id``, ``cluster_id``, and ``similarity`` under the
    anchored rule): two small Spark jobs alongside each other (the largest clusters, the
    histogram's counts)."""
    sizes = duplicate_counts_spark(members)
    top = sizes.orderBy(F.col(DUPLICATES).desc(), F.col(DOC_ID).asc()).limit(TOP_CLUSTERS)
    found: dict[str, list] = {}
    actions: list[Callable[[], object]] = [lambda: found.setdefault("top", top.collect())]
    if config.cluster_rule == "anchored" and SIMILARITY in members.columns:
        edges = similarity_edges(similarity_floor(config))
        raw = F.floor((F.col(SIMILARITY) - edges[0]) / BIN_WIDTH + _EDGE_SLACK)
        number = F.when(raw < 0, -1).otherwise(F.least(raw, F.lit(len(edges) - 2)))
        removed = members.where(F.col(DOC_ID) != F.col(CLUSTER_ID))
        binned = removed.groupBy(number.cast("int").alias("bin")).count()
        actions.append(lambda: found.setdefault("bins", binned.collect()))
    run_together(members.sparkSession, actions)
    largest = [(row[DOC_ID], row[DUPLICATES] + 1) for row in found["top"]]
    bins = (
        {int(row["bin"]): int(row["count"]) for row in found["bins"]} if "bins" in found else None
    )
    return section(counts, config, largest, bins)
