"""Moving NumPy arrays in and out of Arrow binary columns without per-row copies."""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def binary_from_csr(offsets: np.ndarray, values: np.ndarray) -> pa.Array:
    """A binary array whose row ``i`` holds the bytes of ``values[offsets[i]:offsets[i+1]]``."""
    data = np.ascontiguousarray(values)
    byte_offsets = (offsets * data.itemsize).astype(np.int64)
    if byte_offsets[-1] < 2**31:
        return pa.Array.from_buffers(
            pa.binary(),
            len(offsets) - 1,
            [None, pa.py_buffer(byte_offsets.astype(np.int32)), pa.py_buffer(data.tobytes())],
        )
    return pa.Array.from_buffers(
        pa.large_binary(),
        len(offsets) - 1,
        [None, pa.py_buffer(byte_offsets), pa.py_buffer(data.tobytes())],
    )


def binary_from_rows(matrix: np.ndarray) -> pa.Array:
    """A binary array with one row of a 2-D array per value."""
    n, width = matrix.shape
    offsets = np.arange(n + 1, dtype=np.int64) * width
    return binary_from_csr(offsets, np.ascontiguousarray(matrix).reshape(-1))


def csr_from_binary(column: pa.Array, dtype: type | np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`binary_from_csr`: ``(offsets in elements, flat values)``.

    Null rows read as empty.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    itemsize = np.dtype(dtype).itemsize
    offset_type = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    buffers = column.buffers()
    raw_offsets = np.frombuffer(buffers[1], dtype=offset_type)[
        column.offset : column.offset + len(column) + 1
    ].astype(np.int64)
    if column.null_count:
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        sizes = np.where(valid, np.diff(raw_offsets), 0)
    else:
        sizes = np.diff(raw_offsets)
    start = int(raw_offsets[0])
    data = buffers[2]
    if data is None or int(sizes.sum()) == 0:
        return np.zeros(len(column) + 1, dtype=np.int64), np.zeros(0, dtype=dtype)
    if column.null_count or not np.array_equal(np.diff(raw_offsets), sizes):
        chunks = [
            np.frombuffer(data, dtype=np.uint8)[raw_offsets[i] : raw_offsets[i] + sizes[i]]
            for i in range(len(column))
        ]
        flat_bytes = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint8)
    else:
        flat_bytes = np.frombuffer(data, dtype=np.uint8)[start : int(raw_offsets[-1])]
    offsets = np.zeros(len(column) + 1, dtype=np.int64)
    np.cumsum(sizes // itemsize, out=offsets[1:])
    return offsets, flat_bytes.view(dtype) if flat_bytes.size else np.zeros(0, dtype=dtype)


def key_lists(keys: np.ndarray, present: np.ndarray) -> pa.ListArray:
    """Per-document lists of keys: row ``d`` holds ``keys[d]`` if ``present[d]``, else nothing."""
    per_doc = keys.shape[1]
    offsets = np.zeros(len(present) + 1, dtype=np.int32)
    np.cumsum(np.where(present, per_doc, 0), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(keys[present].reshape(-1)))


def sorted_sets(offsets: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort and de-duplicate each CSR row at once: ``(offsets, values)`` of the sets.

    >>> o, v = sorted_sets(np.array([0, 3, 3, 5]), np.array([5, 1, 5, 2, 2], dtype=np.uint64))
    >>> o.tolist(), v.tolist()
    ([0, 2, 2, 3], [1, 5, 2])
    """
    n = len(offsets) - 1
    doc = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    order = np.lexsort((values, doc))
    v, d = values[order], doc[order]
    keep = np.ones(len(v), dtype=bool)
    if len(v) > 1:
        keep[1:] = (v[1:] != v[:-1]) | (d[1:] != d[:-1])
    v, d = v[keep], d[keep]
    new_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(d, minlength=n), out=new_offsets[1:])
    return new_offsets, v.astype(np.uint64, copy=False)
