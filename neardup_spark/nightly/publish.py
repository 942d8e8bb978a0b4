"""Publishing a committed batch's outputs into OUTPUT, from its results stored in the index: staged
and committed through :class:`~neardup_spark.io.output.OutputDir` as a full run's outputs are."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup_spark.columns import DOC_ID
from neardup_spark.config import DedupeConfig
from neardup_spark.io.filesystem import join
from neardup_spark.io.output import REPORT_FILE, OutputDir
from neardup_spark.io.storage import copy_tree
from neardup_spark.nightly.stable_ids import KEPT
from neardup_spark.nightly.store import Index
from neardup_spark.pipeline.execution import maybe_broadcast
from neardup_spark.runtime.session import keep_column_types

CHANGED_CLUSTERS = "changed_clusters"


def publish_batch(
    spark: SparkSession,
    df: DataFrame,
    index: Index,
    batch: dict[str, Any],
    config: DedupeConfig,
    out: OutputDir,
) -> dict[str, Any]:
    """Write a committed batch's outputs (``clusters/``, ``pairs/``, ``changed_clusters/`` from
    its stored results, ``deduplicated/`` from the input rows ``df``, ``report.json``) and
    commit them into ``out``; returns the report."""
    results = join(index.root, batch["results"])
    staged = out.staging(batch["run_id"])
    for name in ("clusters", "pairs", CHANGED_CLUSTERS):
        copy_tree(spark, join(results, name), staged.child(name))
    kept = spark.read.parquet(join(results, KEPT)).select(F.col(DOC_ID).alias(config.id_col))
    n_kept = int(batch["counts"]["deduplicated"])
    keep_column_types(spark)  # deduplicated/ keeps the input's timestamp types
    df.join(maybe_broadcast(kept, n_kept), config.id_col, "left_semi").write.parquet(
        staged.child("deduplicated")
    )
    text = index.storage.read_text(join(results, REPORT_FILE))
    report: dict[str, Any] = json.loads(text) if text else {}
    report["output"] = out.path
    staged.write_json(REPORT_FILE, report)
    manifest = {
        "run_id": batch["run_id"],
        "mode": "incremental",
        "batch": batch["seq"],
        "inputs": batch["inputs"],
        "config_hash": hashlib.sha256(config.settings_json().encode()).hexdigest()[:16],
        "index": {"path": index.root, "version": batch["version"]},
        "committed_at": batch["committed_at"],
        "counts": batch["counts"],
    }
    out.commit(staged, manifest)
    return report
