"""The anchored rule's rounds (pipeline/anchored_rounds.py) against the sequential kernel: the
same decisions on random graphs, whatever the rounds' bound; the keep order of the global sort
is the batch code's."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.batch.anchored import CONTENT, keep_order
from neardup_spark.columns import DOC_ID
from neardup_spark.kernels.anchored import anchors
from neardup_spark.pipeline.anchored_rounds import (
    ANCHOR,
    EARLIER,
    EARLIER_KEPT,
    LATER,
    NODE,
    greedy_rounds,
    ranked_documents,
)
from neardup_spark.pipeline.execution import local_checkpoint


def random_graph(seed: int, n: int, m: int, chain: int) -> tuple[np.ndarray, ...]:
    """Nodes (increasing, with gaps, as the global sort numbers them) and ``m`` random edges
    between them, with a ``chain`` of nodes linked in keep order (the rounds' worst case: two
    links a round)."""
    rng = np.random.default_rng(seed)
    nodes = np.cumsum(rng.integers(1, 5, n)) + (1 << 33)  # a second partition's numbers
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    links = np.arange(0, chain)
    a, b = np.r_[a, links[:-1]], np.r_[b, links[1:]]
    return nodes, a, b


@pytest.mark.parametrize(
    ("seed", "chain", "task_edges", "max_rounds"),
    [(1, 0, 0, 50), (2, 40, 0, 3), (3, 40, 60, 50)],
    ids=["every-round", "bounded", "until-one-task-holds"],
)
def test_the_rounds_decide_as_the_sequential_greedy(spark, seed, chain, task_edges, max_rounds):
    nodes, a, b = random_graph(seed, 120, 150, chain)
    expected = nodes[anchors(len(nodes), a, b)]
    keep = a != b
    later, earlier = np.maximum(a, b)[keep], np.minimum(a, b)[keep]
    edges = spark.createDataFrame(
        pa.table(
            {
                LATER: nodes[later],
                EARLIER: nodes[earlier],
                EARLIER_KEPT: np.zeros(len(later), bool),
            }
        ).to_pandas()
    ).distinct()
    touched = np.unique(np.r_[later, earlier])
    open_nodes = spark.createDataFrame(pa.table({NODE: nodes[touched]}).to_pandas())
    decisions, rounds = greedy_rounds(edges, open_nodes, local_checkpoint, task_edges, max_rounds)
    got = {row[NODE]: row[ANCHOR] for row in decisions.collect()}
    assert len(got) == decisions.count() == len(touched)  # each node decided once
    assert got == {int(nodes[i]): int(expected[i]) for i in touched}
    if max_rounds < 10:  # the bound reached: one task decided the rest
        assert rounds == max_rounds
    else:
        assert 0 < rounds < max_rounds


def test_the_global_sort_is_the_keep_order(spark):
    rng = np.random.default_rng(5)
    n = 400
    score = rng.choice([1.5, 2.5, np.nan, -0.5], n)
    site = rng.choice(["a", "b", None, "é"], n).tolist()
    docs = pa.table(
        {
            DOC_ID: [f"d{i:04d}" for i in rng.permutation(n)],
            CONTENT: [f"d{i:04d}" for i in range(n)],
            "score": pa.array(score).cast(pa.float64()),
            "site": pa.array(site, pa.string()),
        }
    )
    keys = [("score", True), ("site", False)]
    expected = docs.column(DOC_ID).take(pa.array(keep_order(docs, keys))).to_pylist()
    frame = spark.createDataFrame(docs.to_pandas()).repartition(7)
    ranked = ranked_documents(frame, keys).collect()
    assert [r[DOC_ID] for r in sorted(ranked, key=lambda r: r[NODE])] == expected
