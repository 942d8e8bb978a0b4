"""The benchmark's settings and their defaults."""

from __future__ import annotations

import dataclasses

import pytest

from neardup_spark.bench.settings import DEFAULT_DOCS, DEFAULT_SIZES, ROWS, BenchSettings


def test_defaults_are_the_documented_ones():
    settings = BenchSettings()
    assert (
        list(settings.docs)
        == [10_000, 30_000, 100_000]
        == [int(n) for n in DEFAULT_DOCS.split(",")]
    )
    assert (
        list(settings.nightly_sizes)
        == [100_000, 300_000]
        == [int(n) for n in DEFAULT_SIZES.split(",")]
    )
    assert tuple(settings.rows) == ROWS and settings.master == "local[2]"
    assert not settings.no_nightly and not settings.nightly_only
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.seed = 2  # type: ignore[misc]
