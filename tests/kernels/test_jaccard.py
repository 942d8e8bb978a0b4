"""Exact Jaccard and containment of sorted hash sets against Python sets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from neardup_spark.kernels.jaccard import containment, intersection_size, jaccard


def brute_jaccard(a, b):
    a, b = set(a), set(b)
    return len(a & b) / len(a | b) if a | b else 0.0


@given(
    st.sets(st.integers(0, 60), max_size=40),
    st.sets(st.integers(0, 60), max_size=40),
)
def test_jaccard_and_containment_match_sets(a, b):
    x = np.array(sorted(a), dtype=np.uint64)
    y = np.array(sorted(b), dtype=np.uint64)
    assert intersection_size(x, y) == len(a & b)
    assert jaccard(x, y) == pytest.approx(brute_jaccard(a, b))
    assert containment(x, y) == pytest.approx(len(a & b) / len(a) if a else 0.0)
