"""Scoring side rows: a pair's two rows straddling Arrow batches are scored once."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from neardup_spark.batch.scoring import score_sorted_sides
from neardup_spark.columns import DOC_A, DOC_B, ESTIMATE, JACCARD, SHINGLES, SKETCH
from neardup_spark.kernels.arrow_buffers import binary_from_csr, binary_from_rows


def _csr(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([r.size for r in rows], out=offsets[1:])
    values = np.concatenate(rows) if rows else np.zeros(0, np.uint64)
    return offsets, values.astype(np.uint64)


def _side_rows(n_pairs: int) -> pa.Table:
    """Two rows per pair (a's side then b's), sorted by pair, as the verify stage shuffles them."""
    rng = np.random.default_rng(n_pairs)
    doc_a, doc_b, sets, sketches = [], [], [], []
    for p in range(n_pairs):
        base = rng.integers(0, 100, 40).astype(np.uint64)
        other = base.copy()
        other[: p % 40] += np.uint64(1000)
        for side in (base, other):
            doc_a.append(f"a{p:04d}")
            doc_b.append(f"b{p:04d}")
            sets.append(side)
            sketches.append(side[:4].astype(np.uint32))
    offsets, values = _csr(sets)
    return pa.table(
        {
            DOC_A: doc_a,
            DOC_B: doc_b,
            SHINGLES: binary_from_csr(offsets, values),
            SKETCH: binary_from_rows(np.vstack(sketches)),
        }
    )


@pytest.mark.parametrize("batch_rows", [1, 3, 7, 64])
def test_pairs_straddling_arrow_batches_are_scored_once(batch_rows: int) -> None:
    rows = _side_rows(25)
    whole = pa.Table.from_batches(list(score_sorted_sides(rows.to_batches(max_chunksize=50))))
    split = pa.Table.from_batches(
        list(score_sorted_sides(rows.to_batches(max_chunksize=batch_rows)))
    )
    assert split.num_rows == whole.num_rows == 25
    assert split.column(DOC_A).to_pylist() == [f"a{p:04d}" for p in range(25)]
    assert split.column(JACCARD).to_pylist() == whole.column(JACCARD).to_pylist()
    assert split.column(ESTIMATE).to_pylist() == whole.column(ESTIMATE).to_pylist()
    assert split.column(JACCARD)[0].as_py() == 1.0  # pair 0: identical sides
    assert split.column(JACCARD)[1].as_py() < 1.0


def test_a_pair_missing_a_side_is_an_error_not_a_silent_drop() -> None:
    rows = _side_rows(3).slice(0, 5)  # the last pair lost its second row
    with pytest.raises(RuntimeError, match="did not find both documents"):
        list(score_sorted_sides(rows.to_batches(max_chunksize=2)))
