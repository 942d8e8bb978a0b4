"""The rows run as ``neardup bench-row``: the floor's batch function, the datasketch and rensa
rows (all without a JVM; the floor's Spark job runs in tests/cli/test_bench.py)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from neardup_spark.bench import rensa_row
from neardup_spark.bench.children import STATS_FILE, floor_batch_fn, run_child_row
from neardup_spark.bench.rensa_row import banding_for, union_find_clusters
from neardup_spark.config import DedupeConfig

TEXTS = ["a b c d e f g", "x y", "", None, "One, two! three four five"]


def floor_counts(*batches: list[str | None]) -> list[dict]:
    config = DedupeConfig()
    fn = floor_batch_fn(config.ngram, config.seed, config.normalize)
    arrow = [pa.record_batch([pa.array(b, pa.string())], names=["text"]) for b in batches]
    return [out.to_pylist()[0] for out in fn(iter(arrow))]


def test_floor_counts_documents_words_and_shingles():
    (counts,) = floor_counts(TEXTS)
    # 7 + 2 + 5 words; shingles: 3 of the 7-word text, one each for the short ones.
    assert counts["docs"] == 5 and counts["words"] == 14 and counts["shingles"] == 5


def test_floor_checksum_uses_every_hash_and_combines_across_batches():
    (whole,) = floor_counts(TEXTS)
    first, second = floor_counts(TEXTS[:2], TEXTS[2:])
    assert first["xor"] ^ second["xor"] == whole["xor"]  # what the job's bit_xor computes
    (changed,) = floor_counts([*TEXTS[:-1], "One, two! three four six"])
    assert changed["xor"] != whole["xor"]


def test_datasketch_row_writes_its_pairs_and_stats(tmp_path):
    base = " ".join(f"w{i}" for i in range(60))
    ids = ["a", "b", "c", "d", "e"]
    texts = [base, base.replace("w30", "x"), "something else entirely " * 5, "", base]
    pq.write_table(pa.table({"id": ids, "text": texts}), tmp_path / "corpus.parquet")
    out = tmp_path / "out"
    run_child_row("datasketch", str(tmp_path / "corpus.parquet"), str(out), "local[2]", 0.8)
    stats = json.loads((out / STATS_FILE).read_text())
    assert stats["counts"] == {"docs": 5, "empty": 1}
    assert stats["spark_start_seconds"] is None and stats["work_seconds"] > 0
    pairs = ds.dataset(str(out / "pairs")).to_table().to_pylist()
    assert sorted((p["doc_a"], p["doc_b"]) for p in pairs) == [("a", "b"), ("a", "e"), ("b", "e")]


def test_rensa_banding_is_the_narrowest_with_the_recall():
    # 25 bands of 8 rows give 0.9899 at J = 0.8, just short of 0.99: 40 bands of 5 it is.
    assert banding_for(0.8) == 40
    assert 1 - (1 - 0.8**8) ** 25 < 0.99 <= 1 - (1 - 0.8**5) ** 40
    assert banding_for(0.5) == 100 and banding_for(0.95) == 20


def test_union_find_joins_chains_and_leaves_singletons():
    roots = union_find_clusters(np.array([3, 1, 5]), np.array([4, 3, 6]), 8)
    assert roots.tolist() == [0, 1, 2, 1, 1, 5, 5, 7]


def test_rensa_row_writes_its_pairs_and_stats(tmp_path, monkeypatch):
    monkeypatch.setattr(rensa_row, "BATCH_DOCS", 4)  # three batches: rows keep corpus order
    base = " ".join(f"w{i}" for i in range(60))
    ids = [f"d{i}" for i in range(9)]
    texts = [base, "one two", "", base.replace("w30", "x"), None]
    texts += [
        "something else entirely " * 5,
        base,
        "other words here " * 8,
        "other words here " * 8,
    ]
    pq.write_table(pa.table({"id": ids, "text": texts}), tmp_path / "corpus.parquet")
    out = tmp_path / "out"
    run_child_row("rensa", str(tmp_path / "corpus.parquet"), str(out), "local[2]", 0.8)
    stats = json.loads((out / STATS_FILE).read_text())
    assert stats["counts"] == {"docs": 9, "empty": 2, "bands": 40, "clusters": 2}
    pairs = ds.dataset(str(out / "pairs")).to_table().to_pylist()
    found = sorted(tuple(sorted((p["doc_a"], p["doc_b"]))) for p in pairs)
    assert found == [("d0", "d3"), ("d0", "d6"), ("d3", "d6"), ("d7", "d8")]
