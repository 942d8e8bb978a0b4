"""LSH banding: the chosen (b, r), band keys."""

from __future__ import annotations

import numpy as np
import pytest

from neardup_spark.kernels.lsh import (
    band_keys,
    candidate_probability,
    choose_bands,
    false_positive_area,
)


def test_choose_bands_defaults_and_recall_target():
    bands, rows = choose_bands(0.8, 200)
    assert (bands, rows) == (28, 7)
    assert candidate_probability(0.8, bands, rows) >= 0.99
    for t in (0.5, 0.7, 0.9, 0.95):
        b, r = choose_bands(t, 200)
        assert b * r <= 200 and candidate_probability(t, b, r) >= 0.99
        # no other full-sketch banding meeting the target has less false-positive area
        for r2 in range(1, 201):
            b2 = 200 // r2
            if candidate_probability(t, b2, r2) >= 0.99:
                assert false_positive_area(b, r, t) <= false_positive_area(b2, r2, t) + 1e-12


def test_band_keys_equal_iff_band_equal():
    rng = np.random.default_rng(1)
    sk = rng.integers(0, 2**32, size=(3, 12), dtype=np.uint64).astype(np.uint32)
    sk[1, :4] = sk[0, :4]  # band 0 shared by docs 0 and 1
    keys = band_keys(sk, 3, 4)
    assert keys.shape == (3, 3) and keys.dtype == np.int64
    assert keys[0, 0] == keys[1, 0]
    assert keys[0, 1] != keys[1, 1] and keys[0, 2] != keys[1, 2]
    # the band index is part of the key: equal values in different bands give different keys
    same = np.zeros((1, 12), dtype=np.uint32)
    k = band_keys(same, 3, 4)
    assert len(set(k[0].tolist())) == 3


def test_band_keys_reject_too_many_bands():
    with pytest.raises(ValueError):
        band_keys(np.zeros((1, 10), dtype=np.uint32), 3, 4)


def test_shared_key_rows_are_exactly_the_rows_of_repeated_keys_grouped_by_key():
    from collections import Counter

    from neardup_spark.kernels.lsh import shared_key_rows

    rng = np.random.default_rng(11)
    keys = rng.integers(-50, 50, 400).astype(np.int64)
    keys[:5] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max, 7, np.iinfo(np.int64).min, 999]
    rows = shared_key_rows(keys)
    counts = Counter(keys.tolist())
    assert sorted(rows.tolist()) == [i for i, k in enumerate(keys) if counts[k] > 1]
    grouped = keys[rows]
    assert np.all(grouped[1:] >= grouped[:-1])  # by key, each key's rows together
    assert rows.tolist() == sorted(rows.tolist(), key=lambda i: (keys[i], i))
    assert shared_key_rows(np.array([5], np.int64)).size == 0
