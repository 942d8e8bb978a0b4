"""The seed article's worked examples: the numbers it prints, computed by the package.

The notebook (tests/test_notebooks.py) checks the same values through Jupyter; these run them
directly, so a wrong number shows here without a kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

from neardup_spark.quality import worked_examples as we


def test_shingle_table_and_jaccard_of_the_running_example():
    table = we.shingle_table(we.D1, we.D2, k=3)
    assert len(table) == 15 and [r["number"] for r in table] == list(range(15))
    assert sum(r["in_a"] and r["in_b"] for r in table) == 5
    summary = we.jaccard_summary(we.D1, we.D2, k=3)
    assert (summary["shingles_a"], summary["shingles_b"]) == (10, 10)
    assert (summary["shared"], summary["union"]) == (5, 15)
    assert summary["jaccard"] == pytest.approx(1 / 3, abs=1e-12)


def test_choice_of_k():
    by_k = {r["k"]: r["jaccard"] for r in we.choice_of_k(we.D3, we.D4, ks=(2, 3))}
    assert by_k[3] == pytest.approx(3 / 7, abs=1e-12)
    assert by_k[2] == pytest.approx(0.5, abs=1e-12)


def test_by_hand_minhash_matches_the_article():
    by_hand = we.by_hand_minhash()
    got = [(r["min_a"], r["shingle_a"], r["min_b"], r["shingle_b"]) for r in by_hand["rows"]]
    assert got == [
        (0, 0, 0, 0),
        (3, 5, 0, 4),
        (0, 3, 1, 10),
        (0, 13, 2, 6),
        (0, 9, 1, 6),
        (4, 1, 0, 2),
    ]
    agree = sum(r["agree"] for r in by_hand["rows"])
    assert agree == 1 and by_hand["estimate"] == pytest.approx(agree / 6)


def test_standard_errors_and_banding():
    errors = [round(r["standard_error"], 3) for r in we.standard_errors(1 / 3, (10, 100, 200))]
    assert errors == [0.149, 0.047, 0.033]
    probabilities = [r["probability"] for r in we.banding_probabilities(20, 10, (0.9, 0.5, 1 / 3))]
    assert [round(p, d) for p, d in zip(probabilities, (4, 3, 4), strict=True)] == [
        0.9998,
        0.019,
        0.0003,
    ]
    assert [round(r["threshold"], 2) for r in we.banding_thresholds()] == [0.48, 0.74, 0.89]


def test_estimate_runs_converge_to_one_third():
    runs = we.estimate_runs(we.D1, we.D2, max_hashes=200, runs=30)
    assert runs.shape == (30, 200)
    assert set(runs[:, 0]) <= {0.0, 1.0}
    summary = we.run_summary(runs, 200)
    assert abs(summary["median"] - 1 / 3) < 0.03
    assert summary["q1"] <= summary["median"] <= summary["q3"]
    assert np.array_equal(runs, we.estimate_runs(we.D1, we.D2, max_hashes=200, runs=30))


def test_simhash_table_fingerprints_and_angles():
    bits = we.simhash_bit_table(we.D1, bits=8)
    assert bits["totals"] == [4, -2, -2, 2, -2, -4, 2, 2] and bits["simhash_bits"] == "10010011"
    fp1, fp2, _ = we.simhash_fingerprints((we.D1, we.D2, we.D3))
    assert (fp1, fp2) == ("93264c674404019d", "91060e274484039d")
    angles = we.simhash_angles(we.D1, we.D2)
    assert angles["differing_bits"] == 7 and we.simhash_angles(we.D1, we.D3)["differing_bits"] == 37
    assert round(angles["angle_degrees"], 1) == 33.6
    assert round(angles["predicted_agreement"], 3) == 0.814
    assert angles["observed_agreement"] == (64 - 7) / 64
