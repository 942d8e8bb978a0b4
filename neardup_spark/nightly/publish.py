"""Publishing a committed batch's outputs into OUTPUT, from its results stored in the index: staged
and committed through :class:`~neardup_spark.io.output.OutputDir` as a full run's outputs are."""

from __future__ import annotations

import json
import time
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup_spark.columns import DOC_ID
from neardup_spark.config import DedupeConfig
from neardup_spark.io.filesystem import join
from neardup_spark.io.output import REPORT_FILE, OutputDir
from neardup_spark.io.storage import copy_tree
from neardup_spark.nightly.driver_read import DeduplicatedHere
from neardup_spark.nightly.stable_ids import KEPT
from neardup_spark.nightly.store import Index
from neardup_spark.pipeline.deduplicated_copy import copy_here
from neardup_spark.pipeline.execution import BROADCAST_MAX_ROWS, grouped_input, maybe_broadcast
from neardup_spark.pipeline.reporting import StageTimer
from neardup_spark.runtime.session import keep_column_types
from neardup_spark.stages.clusters import duplicate_counts, with_duplicates

CHANGED_CLUSTERS = "changed_clusters"


def publish_batch(
    spark: SparkSession,
    df: DataFrame,
    index: Index,
    batch: dict[str, Any],
    config: DedupeConfig,
    out: OutputDir,
    timing: tuple[StageTimer, float] | None = None,
    here: DeduplicatedHere | None = None,
    plan: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write a committed batch's outputs (``clusters/``, ``pairs/``, ``changed_clusters/`` from
    its stored results, ``deduplicated/`` from the input rows ``df``, ``report.json``) and
    commit them into ``out``; returns the report. ``timing``: the run that indexed the batch
    (its stage timer and start): OUTPUT's report then counts the index commit and this
    publishing too, as a full run's counts its writes (the report kept in the index stops at
    the index's own writes). ``here``: ``deduplicated/`` is copied from the input files by this
    process (a night read here, :func:`~neardup_spark.nightly.driver_read.deduplicated_here`),
    not written by a Spark job. ``plan``: the run's plan, its publishing's choice included."""
    publishing = time.perf_counter()
    results = join(index.root, batch["results"])
    staged = out.claim_staging(batch["run_id"])
    for name in ("clusters", "pairs", CHANGED_CLUSTERS):
        copy_tree(spark, join(results, name), staged.child(name))
    if here is not None:
        copy_here(here.copy, config.id_col, here.removed, staged, "deduplicated", here.counts)
    else:
        kept = spark.read.parquet(join(results, KEPT)).select(F.col(DOC_ID).alias(config.id_col))
        n_kept = int(batch["counts"]["deduplicated"])
        keep_column_types(spark)  # deduplicated/ keeps the input's timestamp types
        # The input's splits grouped as a full run groups them: a 1M-document build wrote 216
        # files in 16.1 s from 8 MB splits.
        rows = grouped_input(df)[0]
        # duplicates: the night's documents removed in the kept one's favour (its clusters/)
        counts = duplicate_counts(spark.read.parquet(join(results, "clusters")))
        small = int(batch["counts"].get("removed", 0)) <= BROADCAST_MAX_ROWS
        rows.join(maybe_broadcast(kept, n_kept), config.id_col, "left_semi").transform(
            with_duplicates(counts, config.id_col, config.duplicates_column, small)
        ).write.parquet(staged.child("deduplicated"))
    text = index.storage.read_text(join(results, REPORT_FILE))
    report: dict[str, Any] = json.loads(text) if text else {}
    if here is not None:
        report["stages_on_driver"] = [*report.get("stages_on_driver", []), "publish"]
    report["output"] = out.path
    if plan is not None:
        report["plan"] = plan
    if timing is not None:
        timer, started = timing
        now = time.perf_counter()
        report["stage_seconds"] = {**timer.seconds, "publish": round(now - publishing, 3)}
        report["wall_seconds"] = wall = round(now - started, 3)
        rows = report.get("counts", {}).get("input_rows", 0)
        report["docs_per_second"] = round(rows / wall, 1) if wall else None
    staged.write_json(REPORT_FILE, report)
    manifest = {
        "run_id": batch["run_id"],
        "mode": "incremental",
        "batch": batch["seq"],
        "inputs": batch["inputs"],
        "config_hash": config.settings_sha256()[:16],
        "index": {"path": index.root, "version": batch["version"]},
        "committed_at": batch["committed_at"],
        "counts": batch["counts"],
    }
    out.commit(staged, manifest, required=("clusters", "pairs", CHANGED_CLUSTERS, "deduplicated"))
    return report
