"""The anchored rule's kernel against a brute-force sequential greedy, and its guarantees."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup_spark.kernels.anchored import (
    KEPT_FIXED,
    REMOVED_FIXED,
    anchors,
    anchors_with_fixed,
    components_removed,
)


def brute_force(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """The sequential greedy in keep order, as the rule says it."""
    neighbours: dict[int, set[int]] = {i: set() for i in range(n)}
    for x, y in edges:
        if x != y:
            neighbours[x].add(y)
            neighbours[y].add(x)
    kept: list[int] = []
    anchor = []
    for node in range(n):
        first = next((k for k in kept if k in neighbours[node]), None)  # kept is in order
        anchor.append(node if first is None else first)
        if first is None:
            kept.append(node)
    return anchor


graphs = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=120)
    )
)


@settings(max_examples=300, deadline=None)
@given(graphs)
def test_the_kernel_is_the_sequential_greedy(graph):
    n, edges = graph
    a = np.array([x for x, _ in edges], np.int64)
    b = np.array([y for _, y in edges], np.int64)
    found = anchors(n, a, b)
    assert found.tolist() == brute_force(n, edges)
    kept = {i for i in range(n) if found[i] == i}
    pairs = {(min(x, y), max(x, y)) for x, y in edges if x != y}
    assert not any(x in kept and y in kept for x, y in pairs)  # no two kept neighbours
    for node in range(n):  # every removed node next to its (kept, earlier) anchor
        if found[node] != node:
            assert found[node] in kept and found[node] < node
            assert (min(node, found[node]), max(node, found[node])) in pairs


def test_chains_of_revisions_keep_every_second_version():
    n = 10  # version i ~ version i + 1 only
    found = anchors(n, np.arange(n - 1), np.arange(1, n))
    assert found.tolist() == [0, 0, 2, 2, 4, 4, 6, 6, 8, 8]
    assert components_removed(n, np.arange(n - 1), np.arange(1, n)) == 9


def test_a_star_and_a_clique_keep_one():
    assert anchors(5, np.zeros(4, np.int64), np.arange(1, 5)).tolist() == [0] * 5
    a, b = np.triu_indices(6, 1)
    assert anchors(6, a, b).tolist() == [0] * 6
    assert anchors(3, np.array([], np.int64), np.array([], np.int64)).tolist() == [0, 1, 2]


def brute_force_fixed(content, fixed, fixed_anchor, edges):
    """Documents in keep order, some decided: one to decide takes the first kept document of
    its content or a neighbouring content (kept ones fixed anywhere, or decided before it)."""
    near = {(x, y) for x, y in edges} | {(y, x) for x, y in edges}
    n = len(content)
    kept = {d for d in range(n) if fixed[d] == KEPT_FIXED}
    anchor = []
    for d in range(n):
        if fixed[d] == KEPT_FIXED or content[d] < 0:
            anchor.append(d)
            continue
        if fixed[d] == REMOVED_FIXED:
            anchor.append(fixed_anchor[d])
            continue
        close = [
            k for k in sorted(kept) if content[k] == content[d] or (content[k], content[d]) in near
        ]
        anchor.append(close[0] if close else d)
        if not close:
            kept.add(d)
    return anchor


nights = st.integers(1, 30).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(-1, 7), min_size=n, max_size=n),
        st.lists(st.sampled_from([0, 0, 0, KEPT_FIXED, REMOVED_FIXED]), min_size=n, max_size=n),
        st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=20),
    )
)


@settings(max_examples=300, deadline=None)
@given(nights)
def test_the_night_kernel_is_the_greedy_with_earlier_decisions(night):
    content, fixed, edges = night
    fixed = [f if c >= 0 else 0 for f, c in zip(fixed, content, strict=True)]
    fixed_anchor = [0] * len(content)  # a removed fixed document keeps its anchor, any
    a = [x for x, _ in edges]
    b = [y for _, y in edges]
    got = anchors_with_fixed(np.array(content), np.array(fixed), np.array(fixed_anchor), a, b, 8)
    assert got.tolist() == brute_force_fixed(content, fixed, fixed_anchor, edges)


@settings(max_examples=200, deadline=None)
@given(graphs)
def test_without_earlier_decisions_the_night_kernel_is_the_kernel(graph):
    n, edges = graph
    a = np.array([x for x, _ in edges], np.int64)
    b = np.array([y for _, y in edges], np.int64)
    got = anchors_with_fixed(np.arange(n), np.zeros(n), np.zeros(n), a, b, n)
    assert got.tolist() == anchors(n, a, b).tolist()
