"""Compaction drops dead contents and keeps every answer."""

from __future__ import annotations

import shutil

from neardup_spark.nightly.compaction import compact_index
from neardup_spark.nightly.store import Index
from tests.nightly.history import (
    index_assignment,
)


def test_compaction_drops_dead_contents(spark, history, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(history["root"] / "index-after-day3", index)
    before = index_assignment(spark, index)
    old = Index.open(spark, str(index))
    old_pairs = old.table("pairs")
    assert old_pairs is not None
    n_pairs = old_pairs.count()
    summary = compact_index(spark, str(index), keep_versions=1)
    compacted = Index.open(spark, str(index))
    assert len(compacted.segments) == 1 and summary["segments_before"] == 3
    assert index_assignment(spark, index) == before
    # c's day-2 text lost its only document on day 3: its content and its edges (to a, b and
    # 0) are gone.
    assert summary["rows"]["contents"] == summary["live_contents"]
    assert summary["rows"]["pairs"] == n_pairs - 3
    for table in ("contents", "bands", "pairs"):
        assert len(list((index / table).glob("seg=*"))) == 1, table
    assert len(list(index.glob("v*"))) == 1
