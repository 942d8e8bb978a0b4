"""Stable cluster ids on the driver (NumPy, SciPy) on hand-made members."""

from __future__ import annotations

import pyarrow as pa
import pytest

from neardup_spark.nightly.stable_ids import cluster_members


def members_table(rows: list[tuple], id_type: pa.DataType) -> pa.Table:
    """(doc_id, exact_fp, old_cluster or None, prev_exact_fp or None, live_before or None)."""
    return pa.table(
        {
            "doc_id": pa.array([r[0] for r in rows], id_type),
            "has_text": pa.array([True] * len(rows)),
            "exact_fp": pa.array([r[1] for r in rows], pa.int64()),
            "old_cluster": pa.array([r[2] for r in rows], id_type),
            "is_old": pa.array([r[2] is not None for r in rows]),
            "batch": pa.array([1 if r[2] is not None else 2 for r in rows], pa.int32()),
            "prev_exact_fp": pa.array([r[3] for r in rows], pa.int64()),
            "prev_has_text": pa.array([None if r[3] is None else True for r in rows], pa.bool_()),
            "live_before": pa.array([r[4] for r in rows], pa.bool_()),
        }
    )


@pytest.mark.parametrize("big", [False, True])
def test_cluster_members_on_the_driver(big):
    """The driver kernel alone: a bridge merges two old clusters, an exact copy joins a third,
    an edge to a dead content is ignored; integer ids beyond 2**53 stay exact."""
    if big:
        base = 2**60
        a, b, c, zero, p1, p2, q, n = (base + i for i in (10, 20, 30, 5, 40, 41, 50, 60))
        id_type = pa.int64()
    else:
        a, b, c, zero, p1, p2, q, n = "a", "b", "c", "0", "p1", "p2", "q", "n"
        id_type = pa.string()
    members = members_table(
        [
            (a, 1, a, None, None),
            (b, 2, b, None, None),
            (p1, 3, p1, None, None),
            (p2, 3, p1, None, None),
            (c, 4, None, None, None),
            (zero, 5, None, None, None),
            (q, 3, None, None, True),
            (n, 6, None, 7, True),  # re-crawled with new text
        ],
        id_type,
    )
    edges = pa.table(
        {
            "fp_a": pa.array([1, 2, 1, 4], pa.int64()),
            "fp_b": pa.array([4, 4, 5, 99], pa.int64()),
            "jaccard": [0.9, 0.85, 0.95, 0.9],
            "estimate": [0.9, 0.8, 0.9, 0.9],
        }
    )
    result = cluster_members(members, edges)
    of = dict(
        zip(
            result.assigned.column("doc_id").to_pylist(),
            result.assigned.column("cluster_id").to_pylist(),
            strict=True,
        )
    )
    assert of == {a: a, b: a, c: a, zero: a, p1: p1, p2: p1, q: p1, n: n}
    assert result.changed.to_pylist() == [{"old_cluster_id": b, "new_cluster_id": a}]
    kept = dict(
        zip(
            result.assigned.column("doc_id").to_pylist(),
            result.assigned.column("kept").to_pylist(),
            strict=True,
        )
    )
    assert {d for d, k in kept.items() if k} == {n}
    found = {
        (r["doc_a"], r["doc_b"], r["method"])
        for r in result.pairs.select(["doc_a", "doc_b", "method"]).to_pylist()
    }
    assert found == {
        (p1, q, "exact"),
        (min(a, c), max(a, c), "minhash"),
        (min(b, c), max(b, c), "minhash"),
        (min(a, zero), max(a, zero), "minhash"),
    }
    stats = result.stats
    assert stats["merged_clusters"] == 1 and stats["joined_existing"] == 3
    assert stats["replaced"] == 1 and stats["replaced_unchanged"] == 0
    assert stats["deduplicated"] == 1 and stats["member_clusters"] == 3


def test_cluster_members_of_an_empty_batch():
    result = cluster_members(
        members_table([], pa.string()),
        pa.table(
            {
                "fp_a": pa.array([], pa.int64()),
                "fp_b": pa.array([], pa.int64()),
                "jaccard": pa.array([], pa.float64()),
                "estimate": pa.array([], pa.float64()),
            }
        ),
    )
    assert result.assigned.num_rows == result.pairs.num_rows == result.changed.num_rows == 0
