"""What a run reports: seconds per stage, input counts, the banding and SimHash sections."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from neardup_spark.columns import (
    CHAR_UNIT,
    HAS_TEXT,
    N_CHARS,
    N_WORDS,
    REPLACED_BYTES,
    TEXT_IS_NULL,
)
from neardup_spark.config import DedupeConfig
from neardup_spark.kernels.lsh import (
    approximate_threshold,
    candidate_probability,
    probability_curve,
)

progress = logging.getLogger("neardup_spark.progress")


@dataclass(frozen=True)
class RunningStage:
    """The stage running now, for a progress display (``neardup``'s live line per stage)."""

    name: str
    started: float  # time.perf_counter() at its start
    documents: int | None  # the run's documents, once counted (None before: no docs/s yet)


# The stages running now, innermost last (read by the command line's progress thread).
_RUNNING: list[RunningStage] = []


def running_stage() -> RunningStage | None:
    """The innermost stage running now, if any."""
    return _RUNNING[-1] if _RUNNING else None


@dataclass
class StageTimer:
    """Wall seconds per named stage, in the order they ran; ``documents``, once known, lets a
    progress display show documents per second."""

    seconds: dict[str, float] = field(default_factory=dict)
    documents: int | None = None
    # Stages that ran in the driver's process, not as Spark jobs (a small run's pair stages).
    on_driver: list[str] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str) -> Iterator[dict[str, int]]:
        """Time a stage; the caller may record ``counted["rows"]`` (and other counts)."""
        counted: dict[str, int] = {}
        start = time.perf_counter()
        running = RunningStage(name, start, self.documents)
        _RUNNING.append(running)
        try:
            yield counted
        finally:
            _RUNNING.remove(running)
            elapsed = time.perf_counter() - start
            self.seconds[name] = round(self.seconds.get(name, 0.0) + elapsed, 3)
            extra = "".join(f" {k}={v}" for k, v in counted.items() if k != "rows")
            progress.info(
                "stage=%s rows=%s seconds=%.2f%s", name, counted.get("rows", "-"), elapsed, extra
            )


def input_count_columns(ngram: int, char_ngram: int) -> dict[str, Column]:
    """The report's per-input counts as aggregate columns over the text-feature columns: rows,
    null, empty and short texts (fewer tokens than a shingle), character-shingled texts, texts
    with replaced bytes, the bytes replaced, and the characters of all texts (which size the
    verification shuffle)."""
    shortest = F.when(F.col(CHAR_UNIT), char_ngram).otherwise(ngram)
    return {
        "input_rows": F.count(F.lit(1)),
        "null_texts": F.sum(F.col(TEXT_IS_NULL).cast("long")),
        "empty_texts": F.sum((~F.col(HAS_TEXT) & ~F.col(TEXT_IS_NULL)).cast("long")),
        "short_texts": F.sum(((F.col(N_WORDS) > 0) & (F.col(N_WORDS) < shortest)).cast("long")),
        "char_shingled_texts": F.sum(F.col(CHAR_UNIT).cast("long")),
        "texts_with_replaced_bytes": F.sum((F.col(REPLACED_BYTES) > 0).cast("long")),
        "replaced_bytes": F.sum(F.col(REPLACED_BYTES).cast("long")),
        "text_chars": F.sum(F.col(N_CHARS).cast("long")),
    }


def input_counts(features: pa.Table, ngram: int, char_ngram: int) -> dict[str, int]:
    """:func:`input_count_columns`' counts over a per-document table this process holds."""

    def column(name: str) -> np.ndarray:
        return features.column(name).to_numpy(zero_copy_only=False)

    null, has_text, words = column(TEXT_IS_NULL), column(HAS_TEXT), column(N_WORDS)
    char_unit, replaced = column(CHAR_UNIT), column(REPLACED_BYTES)
    shortest = np.where(char_unit, char_ngram, ngram)
    counts = {
        "input_rows": features.num_rows,
        "null_texts": np.count_nonzero(null),
        "empty_texts": np.count_nonzero(~has_text & ~null),
        "short_texts": np.count_nonzero((words > 0) & (words < shortest)),
        "char_shingled_texts": np.count_nonzero(char_unit),
        "texts_with_replaced_bytes": np.count_nonzero(replaced > 0),
        "replaced_bytes": replaced.sum(dtype=np.int64),
        "text_chars": column(N_CHARS).sum(dtype=np.int64),
    }
    return {name: int(value) for name, value in counts.items()}


def banding_section(config: DedupeConfig) -> dict[str, Any]:
    """The report's ``banding``: (b, r), the approximate threshold, the probability of becoming
    a candidate at the threshold, and the S-curve; under containment also the Jaccard floor the
    banding is tuned for and the probability there."""
    bands, rows = config.banding.bands, config.banding.rows
    floor = (
        {
            "jaccard_floor": round(config.jaccard_floor, 6),
            "probability_at_jaccard_floor": round(
                float(candidate_probability(config.jaccard_floor, bands, rows)), 6
            ),
            "containment_max_ratio": config.containment_max_ratio,
        }
        if config.similarity == "containment"
        else {}
    )
    return {
        **floor,
        "bands": bands,
        "rows": rows,
        "approximate_threshold": round(approximate_threshold(bands, rows), 4),
        "probability_at_threshold": round(
            float(candidate_probability(config.threshold, bands, rows)), 6
        ),
        "curve": probability_curve(bands, rows),
    }


def simhash_section(config: DedupeConfig) -> dict[str, Any]:
    """The report's ``simhash``: block tables and feature settings."""
    return {
        "hamming_k": config.hamming_k,
        "blocks": config.blocks,
        "tables": math.comb(config.blocks, config.hamming_k),
        "features": config.simhash_features,
        "hash": config.simhash_hash,
        "weighting": config.simhash_weighting,
    }


def run_section(
    spark_section: dict[str, Any],
    timer: StageTimer,
    started: float,
    rows: int,
    settings: dict[str, Any],
    skipped: list[dict[str, Any]],
) -> dict[str, Any]:
    """What every run's report ends with, a full run's and a night's alike: every setting
    (``config``: what it computes, where its steps execute, its session), the Spark session,
    the input files skipped, each stage's seconds, which stages ran in this process, the wall
    time since ``started`` and the documents (``rows``) per second."""
    wall = time.perf_counter() - started
    return {
        "config": settings,
        "spark": spark_section,
        "skipped_files": skipped,
        "stage_seconds": timer.seconds,
        "stages_on_driver": list(timer.on_driver),
        "wall_seconds": round(wall, 3),
        "docs_per_second": round(rows / wall, 1) if wall else None,
    }


def record_bucket_comparisons(
    counts: dict[str, Any], comparisons: int, skipped: int, kept_max: int
) -> None:
    """The anchored rule's large-bucket comparisons into the run's counts
    (``bucket_comparisons``, ``bucket_comparisons_skipped``), and a warning when the cap
    skipped some: pairs of those members were not proposed."""
    counts["bucket_comparisons"] = int(comparisons)
    counts["bucket_comparisons_skipped"] = int(skipped)
    if skipped:
        logging.getLogger(__name__).warning(
            "%d comparisons in large LSH buckets skipped: a member meets at most "
            "bucket_kept_max=%d of its bucket's kept members (raise it to compare more; "
            "report.json counts.bucket_comparisons_skipped)",
            skipped,
            kept_max,
        )
