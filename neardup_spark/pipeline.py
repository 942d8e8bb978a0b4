"""The dedupe pipeline: chains the stages, decides when Spark acts, writes outputs and the report.

``dedupe(df, config)`` is the Python API (notebooks, other jobs); ``run(spark, input, output,
config)`` is what the command line and ``jobs/dedupe.py`` call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup_spark import __version__
from neardup_spark.columns import CLUSTER_ID, DOC_ID, JACCARD, N_SHINGLES, N_WORDS, TEXT_IS_NULL
from neardup_spark.components import connected_components
from neardup_spark.config import DedupeConfig
from neardup_spark.errors import UserError
from neardup_spark.io import (
    CHECKPOINT_DIR,
    REPORT_FILE,
    OutputDir,
    as_documents,
    check_columns,
    check_ids,
    read_corpus,
)
from neardup_spark.kernels.lsh import (
    approximate_threshold,
    candidate_probability,
    probability_curve,
)
from neardup_spark.stages.candidates import bucket_members, candidate_pairs
from neardup_spark.stages.clusters import (
    cluster_table,
    deduplicated_rows,
    pairs_table,
    representatives,
)
from neardup_spark.stages.sketch import sketch
from neardup_spark.stages.verify import score_candidates, verified

log = logging.getLogger(__name__)


@dataclass
class StageTimer:
    """Wall seconds per named stage, in the order they ran."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - start, 3)
            log.info("stage %s done in %.2f s", name, self.seconds[name])


@dataclass
class DedupeResult:
    """What a dedupe computes. The DataFrames read persisted intermediate data: call
    :meth:`release` when done with them."""

    clusters: DataFrame
    pairs: DataFrame
    deduplicated: DataFrame
    report: dict[str, Any]
    _persisted: list[DataFrame] = field(default_factory=list, repr=False)

    def release(self) -> None:
        for df in self._persisted:
            df.unpersist()


def banding_report(config: DedupeConfig) -> dict[str, Any]:
    assert config.bands is not None and config.rows is not None
    return {
        "bands": config.bands,
        "rows": config.rows,
        "approximate_threshold": round(approximate_threshold(config.bands, config.rows), 4),
        "probability_at_threshold": round(
            float(candidate_probability(config.threshold, config.bands, config.rows)), 6
        ),
        "curve": probability_curve(config.bands, config.rows),
    }


def _local_checkpoint(df: DataFrame) -> DataFrame:
    return df.localCheckpoint(eager=True)


def _reliable_checkpoint(df: DataFrame) -> DataFrame:
    return df.checkpoint(eager=True)


def dedupe(
    df: DataFrame,
    config: DedupeConfig,
    checkpoint: Callable[[DataFrame], DataFrame] | None = None,
    timer: StageTimer | None = None,
) -> DedupeResult:
    """Find the near-duplicate clusters of ``df`` (a DataFrame with ``config.id_col`` and
    ``config.text_col``; other columns are carried into ``deduplicated``).

    Raises :class:`UserError` for a missing column, a bad type, or null/duplicate ids.
    """
    config = config.resolved()
    timer = timer or StageTimer()
    checkpoint = checkpoint or _local_checkpoint
    spark = df.sparkSession
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(config.arrow_batch_size))
    check_columns(df, config.id_col, config.text_col)
    with timer.stage("check_ids"):
        check_ids(df, config.id_col)

    docs = as_documents(df, config.id_col, config.text_col)
    sketches = docs.transform(sketch(config)).persist(StorageLevel.MEMORY_AND_DISK)
    with timer.stage("sketch"):
        doc_counts = sketches.agg(
            F.count(F.lit(1)).alias("input_rows"),
            F.sum(F.col(TEXT_IS_NULL).cast("long")).alias("null_texts"),
            F.sum(((F.col(N_SHINGLES) == 0) & ~F.col(TEXT_IS_NULL)).cast("long")).alias(
                "empty_texts"
            ),
            F.sum(((F.col(N_WORDS) > 0) & (F.col(N_WORDS) < config.ngram)).cast("long")).alias(
                "short_texts"
            ),
        ).first()
    assert doc_counts is not None
    counts: dict[str, int] = {k: int(v or 0) for k, v in doc_counts.asDict().items()}

    scored = (
        sketches.transform(bucket_members)
        .transform(candidate_pairs(config.bucket_all_pairs_max))
        .transform(score_candidates(sketches))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    with timer.stage("candidates_and_verify"):
        pair_counts = scored.agg(
            F.count(F.lit(1)).alias("candidate_pairs"),
            F.sum((F.col(JACCARD) >= config.threshold).cast("long")).alias("verified_pairs"),
        ).first()
    assert pair_counts is not None
    counts.update({k: int(v or 0) for k, v in pair_counts.asDict().items()})
    edges = scored.transform(verified(config.threshold))

    with timer.stage("components"):
        labels, rounds = connected_components(
            edges,
            checkpoint,
            n_edges=counts["verified_pairs"],
            single_task_max_edges=config.components_single_task_max_edges,
        )
        members = labels.transform(representatives(config.representative, sketches)).persist()
        removed = members.where(F.col(DOC_ID) != F.col(CLUSTER_ID)).count()
    counts["removed"] = int(removed)
    counts["clusters"] = counts["input_rows"] - counts["removed"]

    clusters = sketches.transform(cluster_table(members))
    pairs = edges.transform(pairs_table(config.method))
    deduplicated = df.transform(deduplicated_rows(config.id_col, clusters))
    report = {
        "neardup_spark_version": __version__,
        "config": config.to_dict(),
        "banding": banding_report(config),
        "counts": counts,
        "components": {
            "strategy": "distributed" if rounds else "single_task",
            "rounds": rounds,
        },
        "stage_seconds": timer.seconds,
    }
    return DedupeResult(clusters, pairs, deduplicated, report, [sketches, scored, members])


def run(
    spark: SparkSession,
    input_path: str,
    output_path: str,
    config: DedupeConfig,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Read ``input_path``, dedupe, write the output contract under ``output_path``.

    Layout: ``clusters/``, ``pairs/``, ``deduplicated/`` (Parquet), ``report.json``, and
    ``_SUCCESS`` written last. Returns the report.
    """
    started = time.perf_counter()
    timer = StageTimer()
    if input_path.rstrip("/") == output_path.rstrip("/"):
        raise UserError("the output path must differ from the input path")
    out = OutputDir(spark, output_path)
    out.prepare(overwrite)
    with timer.stage("read"):
        df = read_corpus(spark, input_path)
        check_columns(df, config.id_col, config.text_col)
    spark.sparkContext.setCheckpointDir(out.child(CHECKPOINT_DIR))
    result = dedupe(df, config, checkpoint=_reliable_checkpoint, timer=timer)
    with timer.stage("write"):
        result.clusters.write.mode("overwrite").parquet(out.child("clusters"))
        result.pairs.write.mode("overwrite").parquet(out.child("pairs"))
        result.deduplicated.write.mode("overwrite").parquet(out.child("deduplicated"))
    result.release()
    out.delete(CHECKPOINT_DIR)
    wall = time.perf_counter() - started
    report = dict(result.report)
    report.update(
        {
            "input": input_path,
            "output": output_path,
            "stage_seconds": timer.seconds,
            "wall_seconds": round(wall, 3),
            "docs_per_second": round(report["counts"]["input_rows"] / wall, 1) if wall else None,
        }
    )
    out.write_json(REPORT_FILE, report)
    out.mark_success()
    return report
