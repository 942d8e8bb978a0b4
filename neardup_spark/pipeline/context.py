"""What every step of a dedupe shares (:class:`RunContext`), in place of the same five
arguments handed from step to step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from neardup_spark.config import DedupeConfig, ExecutionSettings
from neardup_spark.pipeline.execution import local_checkpoint
from neardup_spark.pipeline.facts import RunFacts
from neardup_spark.pipeline.plan import Plan
from neardup_spark.pipeline.reporting import StageTimer
from neardup_spark.pipeline.resume import StageResults


@dataclass
class RunContext:
    """A dedupe's session, what it computes (``config``), where each step runs (``plan``, with
    the run's facts and execution settings), its stage timer, its counts (filled step by step:
    ``input_rows``, ``candidate_pairs``, ``verified_pairs``, ``removed``...), where its stage
    results are kept (``results``: Spark's cache, or resumable Parquet) and how the iterative
    components checkpoint their lineage."""

    spark: SparkSession
    config: DedupeConfig
    plan: Plan
    timer: StageTimer = field(default_factory=StageTimer)
    counts: dict[str, int] = field(default_factory=dict)
    results: StageResults = field(default_factory=StageResults)
    checkpoint: Callable[[DataFrame], DataFrame] = local_checkpoint

    @property
    def facts(self) -> RunFacts:
        return self.plan.facts

    @property
    def settings(self) -> ExecutionSettings:
        return self.plan.settings
