"""Document ids as row indices: the evaluations compare tables by position, not by id.

Pure PyArrow and NumPy. Ids may be integers or strings; two id columns are compared after
casting both to one type (:func:`align_ids`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def column(table: pa.Table, name: str) -> pa.Array:
    """One column of ``table`` as a single array."""
    col = table.column(name)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def align_ids(*arrays: pa.Array) -> list[pa.Array]:
    """Cast id arrays to one comparable type: int64 if all are integers, else large string."""
    integers = all(pa.types.is_integer(a.type) for a in arrays)
    target = pa.int64() if integers else pa.large_string()
    return [a if a.type == target else pc.cast(a, target) for a in arrays]


def index_in(values: pa.Array, universe: pa.Array) -> np.ndarray:
    """Position of each value in ``universe`` (first occurrence), -1 where absent or null.

    >>> index_in(pa.array(["b", "x", None]), pa.array(["a", "b"])).tolist()
    [1, -1, -1]
    """
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    v, u = align_ids(values, universe)
    idx = pc.index_in(v, value_set=u, skip_nulls=True).fill_null(-1)
    return np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)


def id_examples(values: pa.Array, mask: np.ndarray, limit: int = 3) -> str:
    """The first ``limit`` values where ``mask`` holds, for an error message.

    >>> id_examples(pa.array(["a", "b", "c"]), np.array([False, True, True]))
    "'b', 'c'"
    """
    shown = values.filter(pa.array(mask)).slice(0, limit).to_pylist()
    return ", ".join(repr(v) for v in shown)


def pair_keys(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Order-free int64 key of each pair of indices in ``range(n)``.

    >>> pair_keys(np.array([3, 1]), np.array([1, 3]), 10).tolist()
    [13, 13]
    """
    lo = np.minimum(a, b).astype(np.int64)
    hi = np.maximum(a, b).astype(np.int64)
    return lo * np.int64(n) + hi
