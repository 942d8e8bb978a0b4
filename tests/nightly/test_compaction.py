"""Compaction drops dead contents and keeps every answer."""

from __future__ import annotations

import shutil

import numpy as np

from neardup_spark.nightly.compaction import compact_index
from neardup_spark.nightly.content_files import KEYS_SUFFIX, read_keys
from neardup_spark.nightly.store import Index
from tests.nightly.history import (
    index_assignment,
)


def test_compaction_drops_dead_contents(spark, history, tmp_path):
    index = tmp_path / "index"
    shutil.copytree(history["root"] / "index-after-day3", index)
    before = index_assignment(spark, index)
    old = Index.open(spark, str(index))
    old_pairs = old.pairs()
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
    (segment,) = (index / "segments").iterdir()  # the older segments are deleted
    assert segment.name == compacted.segments[0]["name"]
    parts = sorted(p.name for p in segment.glob("part-*"))
    assert parts and len(parts) == 2 * len(compacted.segments[0]["parts"])
    assert (segment / "docs").is_dir() and (segment / "pairs").is_dir()
    assert len(list(index.glob("v*"))) == 1
    # The dead content's text is gone from the parts, the live ones are all there.
    stored = compacted.content_parts()
    fps = np.concatenate([read_keys(p + KEYS_SUFFIX)[0] for p in stored])
    live = {r["exact_fp"] for r in compacted.docs_rows().where("has_text").collect()}
    assert sorted(fps.tolist()) == sorted(live)
