"""Connected components (single task and distributed) against union-find."""

from __future__ import annotations

import random

import numpy as np
import pytest

from neardup_spark.columns import (
    COMPONENT,
    DOC_ID,
)
from neardup_spark.pipeline.components import connected_components


def union_find_components(edges):
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: find(x) for x in list(parent)}


@pytest.mark.parametrize("single_task", [False, True], ids=["distributed", "single_task"])
@pytest.mark.parametrize(
    "shape",
    ["chain", pytest.param("random", marks=pytest.mark.extended), "stars", "two-centres", "zigzag"],
)
def test_connected_components_match_union_find(spark, shape, single_task):
    """``two-centres`` (3's smaller neighbours 1 and 2, no larger one) and ``zigzag`` pass the
    "no node both a leaf and a centre" test as they are, or after a round: stopped there, node
    3 had two labels and its component two clusters."""
    rng = random.Random(7)
    if shape == "chain":  # a long path: the worst case for label propagation
        edges = [(i + 1, i) for i in range(60)]
    elif shape == "two-centres":
        edges = [(1, 3), (2, 3)]
    elif shape == "zigzag":
        edges = [(1, 6), (6, 4), (4, 3), (3, 2)]
    elif shape == "stars":
        edges = [(0, i) for i in range(1, 50)] + [(100, i) for i in range(101, 140)]
    else:
        edges = [(rng.randrange(400), rng.randrange(400)) for _ in range(350)]
    df = spark.createDataFrame(edges, "doc_a long, doc_b long")
    labels, rounds = connected_components(df, lambda d: d.localCheckpoint(eager=True), single_task)
    got = {r[DOC_ID]: r[COMPONENT] for r in labels.collect()}
    expected = {k: v for k, v in union_find_components(edges).items()}
    nodes_in_edges = {x for e in edges for x in e if e[0] != e[1]}
    assert got == {k: v for k, v in expected.items() if k in nodes_in_edges}
    assert labels.count() == len(got)  # one row per node
    if single_task:
        assert rounds == 0
    elif shape == "chain":
        assert 0 < rounds <= int(np.log2(60)) ** 2
