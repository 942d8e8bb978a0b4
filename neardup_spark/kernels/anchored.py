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


KEPT_FIXED, REMOVED_FIXED = 1, 2  # a document decided before this call (an earlier night's)


def _greedy_fixed(
    content: np.ndarray,
    fixed: np.ndarray,
    fixed_anchor: np.ndarray,
    indptr: np.ndarray,
    neighbours: np.ndarray,
    n_contents: int,
) -> np.ndarray:
    n = content.size
    none = n  # no kept document near
    nearest = np.full(n_contents, none, np.int64)  # first kept document on a content or next to it
    anchor = np.empty(n, np.int64)
    for doc in range(n):  # what is kept already reaches its contents' neighbours first
        if fixed[doc] == KEPT_FIXED and content[doc] >= 0:
            _reach(content[doc], doc, nearest, indptr, neighbours)
    for doc in range(n):
        c = content[doc]
        if fixed[doc] == KEPT_FIXED or c < 0:
            anchor[doc] = doc
        elif fixed[doc] == REMOVED_FIXED:
            anchor[doc] = fixed_anchor[doc]
        elif nearest[c] < none:
            anchor[doc] = nearest[c]
        else:
            anchor[doc] = doc
            _reach(c, doc, nearest, indptr, neighbours)
    return anchor


def _reach(c: int, doc: int, nearest: np.ndarray, indptr: np.ndarray, nbr: np.ndarray) -> None:
    nearest[c] = min(nearest[c], doc)
    for j in range(indptr[c], indptr[c + 1]):
        nearest[nbr[j]] = min(nearest[nbr[j]], doc)


if njit is not None:
    _reach = njit(cache=True, nogil=True)(_reach)
    _greedy_fixed_compiled = njit(cache=True, nogil=True)(_greedy_fixed)
else:  # pragma: no cover
    _greedy_fixed_compiled = _greedy_fixed


def anchors_with_fixed(
    content: np.ndarray,
    fixed: np.ndarray,
    fixed_anchor: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    n_contents: int,
) -> np.ndarray:
    """The greedy over *documents* ``0 .. n - 1`` in keep order, some decided already: each
    document's ``content`` (``0 .. n_contents - 1``; its exact-copy group, -1 without text),
    ``fixed`` (0 to decide, :data:`KEPT_FIXED`, :data:`REMOVED_FIXED` with its
    ``fixed_anchor``), and the near-duplicate edges ``(a[i], b[i])`` between contents ->
    each document's anchor.

    A document to decide anchors to the first kept document (in keep order) of its own content
    or of a content it shares an edge with, counting those kept already (fixed) wherever they
    stand in the order and those kept before it; with none it is kept. Documents without text
    are kept on their own. Without fixed documents this is :func:`anchors` over the documents,
    exact copies being edges. ``O(n + m)`` after one sort: a kept document marks its content
    and the content's neighbours once."""
    content = np.asarray(content, np.int64)
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    keep = a != b
    ends = np.r_[a[keep], b[keep]]
    others = np.r_[b[keep], a[keep]]
    order = np.argsort(ends, kind="stable")
    indptr = np.zeros(n_contents + 1, np.int64)
    np.cumsum(np.bincount(ends, minlength=n_contents), out=indptr[1:])
    return _greedy_fixed_compiled(
        content,
        np.asarray(fixed, np.int8),
        np.asarray(fixed_anchor, np.int64),
        indptr,
        others[order],
        n_contents,
    )
