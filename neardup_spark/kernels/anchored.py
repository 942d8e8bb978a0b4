"""Anchored clusters: keep documents greedily in a keep order, and remove a document only against
a kept one it is verified to be a near-duplicate of.

Nodes ``0 .. n - 1`` are numbered in keep order (a node's number is its place: 0 is kept
first). Going through them in that order, a node is *kept* when no node kept before it shares a
verified edge with it; otherwise it *anchors* to the first kept node (the smallest number) it
shares an edge with, and is removed in its favour. No two kept nodes share an edge, every removed
node shares one with its anchor, and the result is the sequential greedy's whatever the edges'
order. Only a node's edges to earlier nodes matter, so the edges are sorted by their later end
(one ``lexsort``) and each node reads its earlier neighbours in order until it finds a kept one:
``O(n + m)`` after the sort.

>>> import numpy as np
>>> # a chain of revisions 0 - 1 - 2 - 3: 0 kept, 1 removed in its favour, 2 kept, 3 removed
>>> anchors(4, np.array([0, 1, 2]), np.array([1, 2, 3]))
array([0, 0, 2, 2])
"""

from __future__ import annotations

import numpy as np

try:
    from numba import njit
except ImportError:  # pragma: no cover - numba is a pinned dependency
    njit = None


def _greedy(n: int, indptr: np.ndarray, earlier: np.ndarray) -> np.ndarray:
    anchor = np.empty(n, np.int64)
    for node in range(n):
        anchor[node] = node
        for j in range(indptr[node], indptr[node + 1]):
            other = earlier[j]
            if anchor[other] == other:  # kept: the first kept earlier neighbour
                anchor[node] = other
                break
    return anchor


_greedy_compiled = njit(cache=True, nogil=True)(_greedy) if njit is not None else _greedy


def anchors(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Nodes ``0 .. n - 1`` in keep order and undirected edges ``(a[i], b[i])`` (self-loops and
    repeats allowed) -> each node's anchor: itself when kept, else the first kept node it shares
    an edge with (module docstring)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    later, earlier = np.maximum(a, b), np.minimum(a, b)
    keep = later != earlier
    later, earlier = later[keep], earlier[keep]
    order = np.lexsort((earlier, later))  # by the later end, then the earlier in keep order
    later, earlier = later[order], earlier[order]
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(later, minlength=n), out=indptr[1:])
    return _greedy_compiled(n, indptr, earlier)


def components_removed(n: int, a: np.ndarray, b: np.ndarray) -> int:
    """How many of ``n`` nodes the connected-components rule removes over the same edges (all
    but one node of each component): what the report compares the anchored rule with."""
    if n == 0:
        return 0
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(a), np.int8), (np.asarray(a), np.asarray(b))), shape=(n, n))
    count, _ = connected_components(graph, directed=False)
    return int(n - count)
