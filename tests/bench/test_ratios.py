"""Growth exponents and speed ratios between the rows of a benchmark."""

from __future__ import annotations

import math

import pytest

from neardup_spark.bench.ratios import derive, growth_exponent, ratio


def test_growth_exponent():
    assert growth_exponent(10_000, 2.0, 100_000, 20.0) == pytest.approx(1.0)
    assert growth_exponent(10_000, 1.0, 100_000, 100.0) == pytest.approx(2.0)
    assert growth_exponent(30_000, 6.0, 100_000, 10.0) == pytest.approx(
        math.log(10 / 6) / math.log(100 / 30)
    )
    assert growth_exponent(10, None, 100, 1.0) is None
    assert growth_exponent(10, 1.0, 10, 2.0) is None
    assert growth_exponent(10, 0.0, 100, 2.0) is None


def test_ratio():
    assert ratio(10.0, 4.0) == 2.5
    assert ratio(None, 4.0) is None and ratio(1.0, None) is None and ratio(1.0, 0.0) is None


def test_derive_growth_and_ratios(make_row):
    rows = [
        make_row(10_000, "floor", 2.0, 7.0),
        make_row(10_000, "neardup-minhash", 4.0, 9.0),
        make_row(10_000, "spark-mllib", 16.0, 21.0),
        make_row(100_000, "floor", 20.0, 25.0),
        make_row(100_000, "neardup-minhash", 40.0, 45.0),
        {"docs": 100_000, "row": "spark-mllib", "status": "timeout", "error": "timed out"},
    ]
    derive(rows)
    small_floor, small_nd, small_ml, big_floor, big_nd, big_ml = rows
    assert small_nd["vs_floor"] == pytest.approx(0.5)
    assert small_nd["vs_mllib"] == pytest.approx(4.0)
    assert small_nd["vs_mllib_wall"] == pytest.approx(21 / 9)
    assert small_floor["vs_floor"] == 1.0 and small_ml["vs_mllib"] == 1.0
    assert small_nd["growth_exponent"] is None
    assert big_nd["growth_exponent"] == pytest.approx(1.0)
    assert big_nd["growth_from_docs"] == 10_000
    assert big_floor["growth_exponent"] == pytest.approx(1.0)
    assert big_nd["vs_mllib"] is None  # no mllib result at that size
    assert big_ml["growth_exponent"] is None and big_ml["vs_floor"] is None


def test_boilerplate_rows_are_timed_against_their_reference(make_row):
    rows = [
        make_row(100_000, "floor", 10.0, 12.0),
        make_row(100_000, "neardup-minhash", 20.0, 22.0),
        make_row(100_000, "neardup-strip", 25.0, 27.0),
        make_row(100_000, "neardup-boilerplate", 13.0, 15.0),
    ]
    derive(rows)
    assert [r["time_vs"] for r in rows] == [None, None, 1.25, 1.3]


def test_the_anchored_default_is_timed_against_the_components_rule(make_row):
    rows = [
        make_row(100_000, "neardup-minhash", 22.0, 25.0),
        make_row(100_000, "neardup-components", 20.0, 23.0),
    ]
    derive(rows)
    assert [r["time_vs"] for r in rows] == [pytest.approx(1.1), None]
