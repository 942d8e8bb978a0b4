"""Helpers shared by the benchmark's tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from neardup_spark.kernels.normalize import normalize_text


def _row(docs: int, name: str, work: float, wall: float, **extra) -> dict:
    return {
        "docs": docs,
        "row": name,
        "status": "ok",
        "error": None,
        "work_seconds": work,
        "wall_seconds": wall,
        "spark_start_seconds": 4.0 if name != "datasketch" else None,
        "docs_per_second": docs / work,
        "docs_per_second_wall": docs / wall,
        "peak_rss_bytes": 2 * 1024**3,
        **extra,
    }


def _brute_jaccard(x: str, y: str, k: int = 5) -> float:
    def shingles(text: str) -> set[tuple[str, ...]]:
        words = (normalize_text(text) or "").split()
        if len(words) < k:
            return {tuple(words)} if words else set()
        return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}

    a, b = shingles(x), shingles(y)
    return len(a & b) / len(a | b) if a | b else 0.0


@pytest.fixture
def make_row() -> Callable[..., dict]:
    """``make_row(docs, name, work, wall, **extra)``: a finished row as run_row records it."""
    return _row


@pytest.fixture
def brute_jaccard() -> Callable[[str, str], float]:
    """Exact Jaccard of word 5-shingle sets, by brute force (independent of the kernels)."""
    return _brute_jaccard
