"""Connected components of an in-memory edge list, labelled by each component's smallest id.

Used when the verified graph is small enough for one task: one pass of SciPy's
``connected_components`` replaces several distributed rounds.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components


def component_labels(doc_a: pa.Array, doc_b: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Edges ``(doc_a[i], doc_b[i])`` -> ``(nodes, labels)``: every node once, labelled with the
    smallest id (in the ids' own order) of its component.

    >>> nodes, labels = component_labels(pa.array(["b", "c", "x"]), pa.array(["a", "b", "y"]))
    >>> dict(zip(nodes.to_pylist(), labels.to_pylist()))
    {'a': 'a', 'b': 'a', 'c': 'a', 'x': 'x', 'y': 'x'}
    """
    both = pa.chunked_array([doc_a, doc_b]).combine_chunks()
    # Nodes sorted in id order, so a component's smallest id is its smallest node index.
    nodes = pc.unique(both)
    nodes = nodes.take(pc.sort_indices(nodes))
    codes = pc.index_in(both, value_set=nodes).to_numpy(zero_copy_only=False)
    n_edges, n_nodes = len(doc_a), len(nodes)
    graph = coo_matrix(
        (np.ones(n_edges, dtype=np.int8), (codes[:n_edges], codes[n_edges:])),
        shape=(n_nodes, n_nodes),
    )
    _, component = connected_components(graph, directed=False)
    smallest = np.full(component.max() + 1 if n_nodes else 0, n_nodes, dtype=np.int64)
    np.minimum.at(smallest, component, np.arange(n_nodes))
    return nodes, nodes.take(pa.array(smallest[component]))
