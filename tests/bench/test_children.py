"""The rows run as ``neardup bench-row``: the floor's batch function and the datasketch row
(both without a JVM; the floor's Spark job runs in tests/cli/test_bench.py)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from neardup_spark.bench.children import STATS_FILE, floor_batch_fn, run_child_row
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
