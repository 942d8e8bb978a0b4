"""Recall and precision of the benchmark's rows, against hand-made cases and brute force."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.bench.corpora import Corpus
from neardup_spark.bench.scoring import (
    exact_pair_jaccard,
    index_of,
    mllib_dropped,
    pair_quality,
    sample_positions,
    score_rows,
    unique_pairs,
)


def test_unique_pairs_orders_dedupes_and_drops_self_pairs():
    lo, hi, first = unique_pairs([3, 1, 0, 2, 4], [1, 3, 1, 2, 0])
    assert list(zip(lo.tolist(), hi.tolist(), strict=True)) == [(1, 3), (0, 1), (0, 4)]
    assert first.tolist() == [0, 2, 4]
    empty = unique_pairs([], [])
    assert all(a.size == 0 for a in empty)


def test_index_of_and_sample_positions():
    universe = pa.array(["a", "b", "c"])
    assert index_of(pa.array(["c", "x", "a"]), universe).tolist() == [2, -1, 0]
    assert index_of(pa.array([], pa.string()), universe).size == 0
    assert sample_positions(3, 5).tolist() == [0, 1, 2]
    sample = sample_positions(100, 10, seed=1)
    assert sample.size == 10 == len(set(sample.tolist())) and sample.tolist() == sorted(sample)
    assert sample.min() >= 0 and sample.max() < 100
    assert sample.tolist() == sample_positions(100, 10, seed=1).tolist()  # reproducible


def test_pair_quality_hand_made():
    # Truth: (0,1) J=.9, (1,2) J=.85, (3,4) J=.95 are positives at 0.8; (4,5) J=.5 is not.
    truth_a, truth_b, truth_j = [0, 1, 3, 4], [1, 2, 4, 5], [0.9, 0.85, 0.95, 0.5]
    # Found: (1,0) right, (0,2) right (J .82) and links 1-2 by transitivity, (3,5) wrong,
    # (0,1) again (a repeat), (4,4) a self-pair.
    found_a, found_b = [1, 0, 3, 0, 4], [0, 2, 5, 1, 4]
    found_j = [0.9, 0.82, 0.3, 0.9, 1.0]
    q = pair_quality(found_a, found_b, found_j, truth_a, truth_b, truth_j, 0.8, n_docs=6)
    assert q["pairs"] == 3 and q["pairs_correct"] == 2
    assert q["precision"] == pytest.approx(2 / 3)
    assert q["positives"] == 3 and q["positives_found"] == 2  # (3,4) not connected
    assert q["recall"] == pytest.approx(2 / 3)


def test_pair_quality_nothing_found():
    q = pair_quality([], [], [], [0], [1], [0.9], 0.8, n_docs=2)
    assert q["pairs"] == 0 and q["precision"] is None and q["recall"] == 0.0
    q = pair_quality([0], [1], [0.9], [], [], [], 0.8, n_docs=2)
    assert q["recall"] is None and q["precision"] == 1.0


def test_pair_quality_precision_over_measured_pairs_only():
    # Three distinct pairs, one not measured (NaN): precision over the two measured ones, but
    # every pair (measured or not) joins components for recall.
    q = pair_quality(
        [0, 2, 4], [1, 3, 5], [0.9, float("nan"), 0.1], [2], [3], [0.95], 0.8, n_docs=6
    )
    assert q["pairs"] == 3 and q["pairs_measured"] == 2 and q["pairs_correct"] == 1
    assert q["precision"] == 0.5 and q["recall"] == 1.0


def test_exact_pair_jaccard_matches_brute_force(brute_jaccard):
    base = " ".join(f"w{i}" for i in range(40))
    texts = pa.array(
        [
            base,
            base.replace("w20", "x"),
            base.upper() + "!",
            "short text",
            "short text",
            "",
            " ".join(f"w{i}" for i in range(10, 50)),
        ],
        pa.large_string(),
    )
    a = np.array([0, 0, 3, 0, 5, 1, 6])
    b = np.array([1, 2, 4, 6, 6, 6, 0])
    got = exact_pair_jaccard(texts, a, b)
    want = [brute_jaccard(texts[i].as_py(), texts[j].as_py()) for i, j in zip(a, b, strict=True)]
    assert got == pytest.approx(want)
    assert got[1] == 1.0 and got[2] == 1.0


def test_mllib_dropped_counts_documents_under_five_tokens():
    texts = pa.array(["a b c d e", "a b c d", "a,b;c.d!e", None, "", "one two three four five six"])
    assert mllib_dropped(texts) == 3  # "a b c d", null, ""


def test_score_rows_against_brute_force(tmp_path, brute_jaccard):
    """A tiny corpus, truth and two fake rows' pairs/; the second row's precision sampled."""
    base = [" ".join(f"w{d}x{i}" for i in range(100)) for d in range(6)]
    texts = [base[0], base[0] + " tail", base[1], base[1].replace("w1x9 ", "z "), *base[2:], ""]
    ids = [f"d{i}" for i in range(len(texts))]
    root = tmp_path / "c"
    (root / "corpus").mkdir(parents=True)
    (root / "truth").mkdir()
    pq.write_table(pa.table({"id": ids, "text": texts}), root / "corpus" / "part-0.parquet")
    truth_pairs = [("d0", "d1"), ("d2", "d3"), ("d4", "d5")]
    truth_j = [brute_jaccard(texts[ids.index(a)], texts[ids.index(b)]) for a, b in truth_pairs]
    pq.write_table(
        pa.table(
            {
                "doc_a": [a for a, _ in truth_pairs],
                "doc_b": [b for _, b in truth_pairs],
                "kind": ["x"] * 3,
                "jaccard": truth_j,
            }
        ),
        root / "truth" / "part-0.parquet",
    )
    records = []
    for name, pairs in (
        ("datasketch", [("d1", "d0"), ("d0", "d1"), ("d4", "d6")]),
        ("spark-mllib", [("d2", "d3"), ("d0", "d1"), ("d4", "d5"), ("d6", "d7")]),
    ):
        out = tmp_path / name
        (out / "pairs").mkdir(parents=True)
        pq.write_table(
            pa.table({"doc_a": [a for a, _ in pairs], "doc_b": [b for _, b in pairs]}),
            out / "pairs" / "part-0.parquet",
        )
        records.append({"docs": len(ids), "row": name, "status": "ok", "output": str(out)})
    records.append({"docs": len(ids), "row": "floor", "status": "ok", "output": "unused"})
    records.append(
        {"docs": len(ids), "row": "neardup-minhash", "status": "ok", "output": str(tmp_path / "x")}
    )
    score_rows(records, Corpus(len(ids), root), 0.8, precision_sample=2)
    sketch, mllib, floor, missing = records
    assert "pairs" not in floor
    positives = sum(j >= 0.8 for j in truth_j)
    assert positives == 2  # (d0,d1) and (d2,d3); (d4,d5) are unrelated
    assert sketch["pairs"] == 2 and sketch["quality"]["pairs_measured"] == 2
    assert sketch["pair_rows"] == 3 and sketch["pairs_unknown_ids"] == 0
    assert sketch["precision"] == 0.5  # (d0,d1) right, (d4,d6) wrong
    assert sketch["recall"] == 0.5  # (d2,d3) missed
    assert mllib["pairs"] == 4 and mllib["quality"]["pairs_measured"] == 2
    assert mllib["recall"] == 1.0
    assert "uniform sample of 2 of 4" in mllib["note"] and "dropped" in mllib["note"]
    assert mllib["mllib_dropped_docs"] == 1  # the empty text
    # A row whose pairs/ cannot be read is marked failed, not scored.
    assert missing["status"] == "failed" and "cannot read pairs" in missing["error"]
    assert "pairs" not in missing and "evaluate" not in missing
