"""``neardup match BATCH --index DIR OUTPUT``: which documents of a batch are near-duplicates
(or exact copies) of documents an index holds, and which indexed documents they match, the
index left as it is.

The night's steps up to verification, on the driver (:mod:`.driver_night`): the per-document
pass (in this process for local Parquet, else Spark tasks), the probe of the index's keys
(exact copies: a fingerprint the index holds; candidates: the indexed contents sharing an LSH
band, ``bucket_all_pairs_max`` per key), the exact verification of each new x indexed
candidate. Pairs inside the batch are not looked for: a match is against the index only. Then
the ``docs`` rows of the matched contents name the indexed documents.

What a night would remove against the index is removed: under the anchored rule, a document
with a verified pair with a *kept* indexed document, or an exact copy of any indexed one (its
text is that document's, so it is as near that document's kept one); under the components
rule, any document with a match. No commit, no writer's lock: a reader lease
(:mod:`.readers`) keeps the version read from a concurrent night's garbage collection.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from neardup_spark import __version__
from neardup_spark.columns import CLUSTER_ID, DOC_ID, EXACT_FP, HAS_TEXT, JACCARD, SIMILARITY
from neardup_spark.config import DedupeConfig, ExecutionSettings, SessionSettings
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import (
    CorpusSource,
    check_columns,
    check_paths_apart,
    input_files,
    list_input,
    read_corpus,
)
from neardup_spark.io.filesystem import join, write_parquet_file
from neardup_spark.io.lease import DEFAULT_LOCK_TIMEOUT
from neardup_spark.io.output import REPORT_FILE, OutputDir, OutputLayout
from neardup_spark.nightly.docs import current_rows_collected
from neardup_spark.nightly.driver_night import (
    indexed_candidates,
    night_on_driver,
    probe_on_driver,
    texts_on_driver,
    verify_on_driver,
)
from neardup_spark.nightly.driver_read import features_in_process
from neardup_spark.nightly.index_filters import IsIn
from neardup_spark.nightly.index_scan import IndexTable
from neardup_spark.nightly.readers import reading
from neardup_spark.nightly.run import check_incremental_config, make_run_id
from neardup_spark.nightly.steps import BatchContext, batch_features
from neardup_spark.nightly.store import DOCS, FP_A, FP_B, Index
from neardup_spark.pipeline.dedupe import RunJob
from neardup_spark.pipeline.deduplicated_copy import copy_here, rows_copy
from neardup_spark.pipeline.execution import maybe_broadcast
from neardup_spark.pipeline.plan import (
    DRIVER,
    Choice,
    Plan,
    decide_deduplicated,
    decide_night_sketch,
)
from neardup_spark.pipeline.reporting import StageTimer
from neardup_spark.runtime.engine import from_arrow

log = logging.getLogger(__name__)

MATCHES, DEDUPLICATED = "matches", "deduplicated"
INDEXED_ID, KEPT_ID = "indexed_id", "kept_id"
MATCH_LAYOUT = OutputLayout(committed=(MATCHES, DEDUPLICATED, REPORT_FILE), kind="match run")
_NEW_FP, _OLD_FP = "new_fp", "old_fp"
PART_FILE = "part-00000.parquet"


def content_matches(known: np.ndarray, edges: pa.Table, fresh_fps: np.ndarray) -> pa.Table:
    """The batch's contents matched with indexed ones: ``new_fp``, ``old_fp``, ``similarity``
    (1.0 for a content the index holds, else the verified edge's Jaccard)."""
    a, b = edges.column(FP_A).to_numpy(), edges.column(FP_B).to_numpy()
    a_new = np.isin(a, fresh_fps)
    new = np.where(a_new, a, b)
    old = np.where(a_new, b, a)
    jaccard = edges.column(JACCARD).to_numpy()
    return pa.table(
        {
            _NEW_FP: pa.array(np.r_[known, new], pa.int64()),
            _OLD_FP: pa.array(np.r_[known, old], pa.int64()),
            SIMILARITY: pa.array(np.r_[np.ones(len(known)), jaccard], pa.float64()),
        }
    )


def document_matches(docs: pa.Table, pairs: pa.Table, indexed: pa.Table) -> pa.Table:
    """``matches/``: each batch document (``docs``: ``doc_id``, ``has_text``, ``exact_fp``)
    with each indexed document (``indexed``: their current ``docs`` rows) of a content its own
    matches (``pairs``: :func:`content_matches`): ``doc_id``, ``indexed_id``, ``similarity``,
    ``kept_id`` (the indexed document's cluster's kept document), sorted."""
    batch = docs.filter(docs.column(HAS_TEXT)).select([DOC_ID, EXACT_FP])
    batch = batch.rename_columns([DOC_ID, _NEW_FP])
    held = indexed.filter(indexed.column(HAS_TEXT)).select([DOC_ID, EXACT_FP, CLUSTER_ID])
    held = held.rename_columns([INDEXED_ID, _OLD_FP, KEPT_ID])
    found = batch.join(pairs, _NEW_FP, join_type="inner").join(held, _OLD_FP, join_type="inner")
    found = found.select([DOC_ID, INDEXED_ID, SIMILARITY, KEPT_ID])
    return found.sort_by([(DOC_ID, "ascending"), (INDEXED_ID, "ascending")])


def removed_ids(matches: pa.Table, cluster_rule: str) -> pa.Array:
    """The batch documents a night would remove against the index (module docstring)."""
    if cluster_rule == "anchored":
        justified = pc.or_(
            pc.equal(matches.column(INDEXED_ID), matches.column(KEPT_ID)),
            pc.equal(matches.column(SIMILARITY), 1.0),
        )
        matches = matches.filter(justified)
    return pc.unique(matches.column(DOC_ID).combine_chunks())


def match_batch(ctx: BatchContext) -> pa.Table:
    """The night's steps up to verification, then the matched indexed documents: the batch's
    ``matches/`` rows; counts into ``ctx.counts``."""
    timer, counts = ctx.timer, ctx.counts
    sketch = ctx.plan.record(decide_night_sketch(ctx.plan.facts, ctx.plan.settings))
    features: DataFrame | pa.Table = (
        features_in_process(ctx) if sketch.where == DRIVER else batch_features(ctx)
    )
    with timer.stage("contents") as counted:
        night = night_on_driver(ctx, features)
        counted["rows"] = night.contents.num_rows
    if isinstance(features, DataFrame):
        features.unpersist()
    with timer.stage("probe") as counted:
        probed = probe_on_driver(ctx, night)
        counts["known_contents"] = counted["rows"] = len(probed.known)
    held = pc.is_in(night.contents.column(EXACT_FP), pa.array(probed.known, pa.int64()))
    fresh = night.contents.filter(pc.invert(held))
    with timer.stage("candidates") as counted:
        new, old, stored = indexed_candidates(ctx, fresh, probed)
        pairs = np.unique(np.stack([new, old], axis=1), axis=0) if len(new) else np.zeros((0, 2))
        counts["candidate_pairs"] = counted["rows"] = len(pairs)
    with timer.stage("verify") as counted:
        sides = fresh.filter(pc.is_in(fresh.column(EXACT_FP), pa.array(new, pa.int64())))
        texts = texts_on_driver(ctx, sides, stored)
        a, b = pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)
        edges = verify_on_driver(ctx, np.minimum(a, b), np.maximum(a, b), texts)
        counts["near_pairs"] = counted["verified"] = edges.num_rows
    with timer.stage("matches") as counted:
        found = content_matches(probed.known, edges, fresh.column(EXACT_FP).to_numpy())
        rows = IndexTable(ctx.index, DOCS, ctx.plan)
        indexed = found.slice(0, 0)
        if not rows.empty and found.num_rows:
            one_version = sum(1 for s in ctx.index.segments if s["rows"].get(DOCS)) <= 1
            wanted = pa.array(np.unique(found.column(_OLD_FP).to_numpy()), pa.int64())
            indexed = current_rows_collected(rows, IsIn(EXACT_FP, wanted), one_version)
        matches = document_matches(night.docs, found, indexed) if indexed.num_rows else empty(night)
        counted["rows"] = matches.num_rows
    return matches


def empty(night: Any) -> pa.Table:
    """``matches/`` without rows (its id columns of the batch's id type)."""
    ids = night.docs.column(DOC_ID).type
    return pa.table(
        {
            DOC_ID: pa.array([], ids),
            INDEXED_ID: pa.array([], ids),
            SIMILARITY: pa.array([], pa.float64()),
            KEPT_ID: pa.array([], ids),
        }
    )


def write_outputs(
    ctx: BatchContext, matches: pa.Table, removed: pa.Array, staged: OutputDir
) -> None:
    """``matches/`` (one file, by this process) and ``deduplicated/``: the batch's rows less the
    ``removed`` ids, copied from its files by this process where the plan allows a copy (a batch
    read here into a local OUTPUT, as a night's), else by a Spark anti-join."""
    id_col = ctx.config.id_col
    write_parquet_file(join(staged.child(MATCHES), PART_FILE), matches, staged.storage)
    here = ctx.documents is not None
    settings = ctx.plan.settings
    choice = decide_deduplicated(ctx.plan.facts, settings, len(removed), here, False, False)
    if choice.where == "driver_copy" and here:
        ctx.plan.record(choice)
        copy_here(rows_copy(ctx.plan.facts, ctx.df.schema), id_col, removed, staged, DEDUPLICATED)
        return
    why = f"{choice.where} is a full run's; a match joins the batch with its removed ids"
    ctx.plan.record(Choice(choice.step, "spark_join", why, choice.feasible))
    schema = pa.schema([(id_col, removed.type)])
    gone = from_arrow(ctx.spark, pa.table({id_col: removed}).cast(schema))
    kept = ctx.df.join(maybe_broadcast(gone, len(removed)), id_col, "left_anti")
    kept.write.parquet(staged.child(DEDUPLICATED))


def run_match(
    spark: SparkSession,
    batch_input: str | CorpusSource,
    output: str,
    index_dir: str,
    config: DedupeConfig,
    overwrite: bool = False,
    *,
    session: SessionSettings | None = None,
    execution: ExecutionSettings | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> dict[str, Any]:
    """Match the batch at ``batch_input`` against the index at ``index_dir`` and write
    ``matches/``, ``deduplicated/`` and ``report.json`` under ``output``; the index is only
    read. Returns the report. :class:`UserError` (exit 2): no index there, settings other than
    the index's, the input errors of a night."""
    started, timer = time.perf_counter(), StageTimer()
    check_incremental_config(config)
    source = CorpusSource.of(batch_input)
    if source.path is None:
        raise UserError("neardup match reads an input path")
    check_paths_apart({"input": source.path, "output": output, "index": index_dir})
    index = Index.open(spark, index_dir, read_only=True)
    if not index.exists:
        raise UserError(
            f"no index at {index_dir}: build one with `neardup dedupe INPUT OUTPUT --index "
            f"{index_dir}`"
        )
    index.check_settings(config)
    index.check_files(full=config.index_check == "full")
    job = RunJob(spark, source, config, execution or ExecutionSettings(), session)
    with reading(index.storage, index.root, index.name, "neardup match"):
        listed = list_input(spark, source)
        inputs = input_files(spark, listed.files)
        df, skipped = read_corpus(spark, source, config.skip_corrupt, job.columns, listed)
        check_columns(df, config.id_col, config.text_col)
        is_string = isinstance(df.schema[config.id_col].dataType, T.StringType)
        id_type = "string" if is_string else "bigint"
        index.check_id_type(id_type)
        out = OutputDir(spark, output, MATCH_LAYOUT)
        plan = Plan(job.facts(listed, df, len(skipped), out.path), job.execution)
        run_id = make_run_id(inputs, config)
        ctx = BatchContext(
            spark, df, index, config, run_id, inputs, id_type, index.buckets, timer, started,
            skipped, session, plan, listed.format,
        )  # fmt: skip
        with out.locked(lock_timeout):
            out.prepare(overwrite)
            matches = match_batch(ctx)
            staged = out.claim_staging(run_id)
            removed = removed_ids(matches, config.cluster_rule)
            with timer.stage("write"):
                write_outputs(ctx, matches, removed, staged)
            report = match_report(ctx, matches, len(removed), index, out.path, started)
            staged.write_json(REPORT_FILE, report)
            manifest = {"run_id": run_id, "neardup_spark_version": __version__, "index": index.name}
            out.commit(staged, manifest, required=(MATCHES, DEDUPLICATED))
    return report


def match_report(
    ctx: BatchContext, matches: pa.Table, removed: int, index: Index, output: str, started: float
) -> dict[str, Any]:
    """``report.json`` of a match run."""
    counts = dict(ctx.counts)
    matched = pc.count_distinct(matches.column(DOC_ID)).as_py() if matches.num_rows else 0
    counts.update(matched_documents=matched, match_rows=matches.num_rows, removed=removed)
    wall = time.perf_counter() - started
    return {
        "neardup_spark_version": __version__,
        "mode": "match",
        "method": ctx.config.method,
        "cluster_rule": ctx.config.cluster_rule,
        "run_id": ctx.run_id,
        "inputs": ctx.inputs,
        "output": output,
        "index": {"path": index.root, "version": index.name, **index.counts},
        "counts": counts,
        "plan": ctx.plan.section(),
        "stage_seconds": ctx.timer.seconds,
        "wall_seconds": round(wall, 3),
    }
