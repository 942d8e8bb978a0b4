"""The benchmark's corpora: generated once, reused while their marker matches."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.dataset as ds

from neardup_spark.bench.corpora import (
    CORPUS_MARKER,
    NIGHTLY_CORPUS_MARKER,
    ensure_corpus,
    ensure_nightly_corpus,
)


def test_corpus_is_generated_once(tmp_path):
    first = ensure_corpus(tmp_path, 60, seed=3, timeout=120)
    assert not first["reused"]
    root = Path(first["path"])
    assert (root / "corpus").is_dir() and (root / "truth").is_dir()
    assert ds.dataset(str(root / "corpus")).count_rows() == 60
    second = ensure_corpus(tmp_path, 60, seed=3, timeout=120)
    assert second["reused"] and second["path"] == first["path"]
    # A marker written for another layout is not reused.
    marker = json.loads((root / CORPUS_MARKER).read_text())
    (root / CORPUS_MARKER).write_text(json.dumps({**marker, "row_group_rows": 1}))
    assert not ensure_corpus(tmp_path, 60, seed=3, timeout=120)["reused"]


def test_nightly_corpus_is_cut_in_base_and_new(tmp_path):
    root = tmp_path / "nightly"
    paths = ensure_nightly_corpus(root, 50, 20, seed=1, mean_words=30)
    base, new, both = (ds.dataset(paths[k]).to_table() for k in ("base", "new", "all"))
    assert base.num_rows == 50 and new.num_rows == 20 and both.num_rows == 70
    assert not set(base.column("id").to_pylist()) & set(new.column("id").to_pylist())
    for file in Path(paths["all"]).iterdir():  # hard links, not copies
        name, _, original = file.name.partition("-")  # base-part-00000.parquet
        assert os.path.samefile(file, Path(paths[name]) / original)
    before = {p: p.stat().st_mtime_ns for p in Path(paths["base"]).iterdir()}
    assert ensure_nightly_corpus(root, 50, 20, seed=1, mean_words=30) == paths
    assert {p: p.stat().st_mtime_ns for p in Path(paths["base"]).iterdir()} == before
    marker = json.loads((root / NIGHTLY_CORPUS_MARKER).read_text())
    assert marker["docs"] == 70 and marker["parts"] == {"base": [0, 50], "new": [50, 70]}
    ensure_nightly_corpus(root, 40, 20, seed=1, mean_words=30)  # another size: redone
    assert ds.dataset(paths["base"]).count_rows() == 40
