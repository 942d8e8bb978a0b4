"""Incremental (nightly) runs against a persistent index: ``neardup dedupe NEW OUTPUT --index DIR``.

A run checks the batch of new documents against everything indexed before, and adds it:

1. **Per document.** The full run's per-document pass (normalise, fingerprint, shingle,
   MinHash, band keys), in Spark, with the id check alongside.
2. **Exact copies.** A fingerprint the index already holds is *known content*: the document is
   an exact copy and needs nothing more (the index stores each distinct text once, see
   :mod:`neardup_spark.nightly.store`).
3. **Near-duplicates.** The band keys of each *new content* are looked up among the new contents
   (LSH buckets, as in a full run) and in the index's keys files (one scan of 232 bytes per
   indexed content, :mod:`neardup_spark.nightly.content_files`). Every candidate pair is verified
   exactly; the old side's normalised text is read from the few record batches of the index
   that hold it and shingled with the full run's kernel.
4. **Clusters.** The clusters the batch touches (those holding a copy or a verified neighbour of
   a new document, or a re-crawled document) are re-computed as connected components over their
   live documents and the stored plus new verified edges; all other clusters stay as they are.
5. **Commit.** The new segment (the new contents, the ``docs`` rows the batch adds or changes,
   its edges) and the batch's results are written under fresh names, then ``CURRENT`` is
   replaced atomically; finally the outputs are staged under ``OUTPUT/_staging/`` and committed
   into OUTPUT as a full run's are.

Steps 2-5 run on the driver, on Arrow tables with the same kernels, for a batch of up to
``nightly_driver_max_docs`` documents (:mod:`.night`: Spark scans the contents keys and
returns the rows about the night, the docs and pairs rows come from :mod:`.index_scan`); a larger
batch runs them as Spark jobs
(:mod:`.night`). Both give the same index and outputs (tested).

Cluster ids follow the stable ``smallest_id`` rule of :mod:`neardup_spark.nightly.stable_ids`.
So when new documents have larger ids than old ones (ids that grow with crawl time), ids are
exactly those of one full run over all documents; the partition is the same in any case.

Re-crawled pages: a new row whose id is already indexed replaces that document. Its old content
loses a document; a content no document refers to is dead and its edges connect nothing any
more, so the cluster it held together may split.

Outputs for the batch under OUTPUT: ``clusters/`` (the new documents: ``doc_id``,
``cluster_id``, ``is_representative``), ``pairs/`` (the edges this batch adds: near-duplicate
edges of contents that were not live in the index before, between each content's smallest
document, and exact-copy edges of new documents), ``changed_clusters/`` (``old_cluster_id``,
``new_cluster_id``), ``deduplicated/`` (input rows of the new documents that are their
cluster's representative in a cluster with no document indexed before, minus re-crawls whose
text did not change), ``report.json``, ``manifest.json`` and ``_SUCCESS``.

Idempotence: the run id is a hash of the input files (qualified paths, sizes, content SHA-256)
and the id and text columns. A run id the index has already committed adds nothing: its stored
results are published again (or the OUTPUT holding them is kept).

Clustering: the documents of the touched clusters plus the new ones (and their edges) are
clustered on the driver (:mod:`neardup_spark.nightly.stable_ids`, NumPy and SciPy); on the
Spark path, when they are more than ``components_single_task_max_edges`` (2,000,000 by
default), the same rule runs as distributed Spark jobs
(:func:`neardup_spark.nightly.stable_ids_spark.cluster_with_spark`).

One writer at a time: a run holds the index's lease (``DIR/_lock``) from before it reads the
committed version until after it commits, and OUTPUT's lease from before it checks OUTPUT until
after it publishes. An overlapping run waits up to ``lock_timeout`` seconds, then reads the
version the first one committed and adds its batch on top (docs/operations/locking.md); readers
are never disturbed.

Limits: MinHash only (``--method simhash``/``exact`` with ``--index`` is a :class:`UserError`);
representatives by ``smallest_id`` only; exact copies are grouped by their 64-bit fingerprint
(``exact_compare_text`` is refused). Candidates stay linear in the batch as in a full run: a
new content is paired with every new content of an LSH bucket up to ``bucket_all_pairs_max``
members (a larger bucket is a star from its smallest fingerprint), and with the indexed contents
of the bucket, up to ``bucket_all_pairs_max`` of them (the smallest fingerprints). So an
incremental run finds the pairs a full run finds except where a bucket is larger than that
(where a full run also keeps only a star, centred on the smallest id), the only case in which the
two can differ.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from neardup_spark import __version__
from neardup_spark.config import DedupeConfig, ExecutionSettings, SessionSettings
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import (
    CorpusSource,
    ListedInput,
    check_columns,
    check_duplicates_column,
    check_paths_apart,
    input_files,
    list_input,
    read_corpus,
)
from neardup_spark.io.filesystem import join
from neardup_spark.io.footer_rows import check_rows_read, footer_rows
from neardup_spark.io.lease import DEFAULT_LOCK_TIMEOUT, hold_lease
from neardup_spark.io.output import REPORT_FILE, OutputDir
from neardup_spark.io.paths import check_writable
from neardup_spark.io.storage import storage_for
from neardup_spark.nightly.driver_read import deduplicated_here, features_in_process
from neardup_spark.nightly.layout import SEGMENTS
from neardup_spark.nightly.night import index_on_driver, index_with_spark
from neardup_spark.nightly.publish import publish_batch
from neardup_spark.nightly.steps import BatchContext, batch_features
from neardup_spark.nightly.store import (
    DEFAULT_BUCKETS,
    KEEP_VERSIONS,
    Index,
    new_manifest,
    now_iso,
)
from neardup_spark.pipeline.dedupe import RunJob
from neardup_spark.pipeline.execution import start_python_workers
from neardup_spark.pipeline.plan import (
    DRIVER,
    Plan,
    decide_night,
    decide_night_sketch,
)
from neardup_spark.pipeline.reporting import StageTimer, banding_section, run_section
from neardup_spark.runtime.faults import pause_if_asked
from neardup_spark.runtime.session import spark_section

log = logging.getLogger(__name__)


def check_incremental_config(config: DedupeConfig) -> DedupeConfig:
    """Refuse what an indexed run does not support (:class:`UserError`); returns ``config``."""
    if config.method != "minhash":
        raise UserError(
            f"--index works with --method minhash only (got {config.method!r}); run "
            "--method simhash or exact without --index"
        )
    if config.similarity != "jaccard":
        raise UserError(
            "--index works with --similarity jaccard only: an index's nights keep the first "
            "seen document, where containment keeps the container (run --similarity "
            "containment without --index)"
        )
    if config.representative != "smallest_id":
        raise UserError(
            "--index keeps cluster ids stable with the smallest_id representative rule only "
            f"(got representative={config.representative!r})"
        )
    if config.prefer is not None:
        raise UserError(
            "--index keeps cluster ids stable with the smallest_id representative rule only; "
            "--prefer is not supported with --index (choose the kept copies from clusters/ "
            "with your columns, or run without --index)"
        )
    if config.exact_compare_text:
        raise UserError(
            "--index groups exact copies by their 64-bit fingerprint; exact_compare_text=true "
            "is not supported with --index"
        )
    if config.strip_boilerplate:
        raise UserError(
            "--strip-boilerplate is not supported with --index: which lines are boilerplate "
            "depends on every document, so a night would change the indexed texts. Run `neardup "
            "boilerplate` on each night's input, or dedupe without --index"
        )
    return config


def make_run_id(inputs: list[dict[str, Any]], config: DedupeConfig) -> str:
    """A batch's identity: the same files with the same content (and columns) -> the same id."""
    payload = {
        "inputs": [[f["path"], f["size"], f["digest"]] for f in inputs],
        "id_col": config.id_col,
        "text_col": config.text_col,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def open_index(
    spark: SparkSession, index_dir: str, config: DedupeConfig, buckets: int | None
) -> Index:
    """The index at ``index_dir`` (new when absent), checked against ``config``."""
    if buckets is not None and buckets < 1:
        raise UserError(f"--index-buckets must be >= 1, got {buckets}")
    index = Index.open(spark, index_dir)
    index.check_settings(config)
    index.check_files(full=config.index_check == "full")
    if index.exists and buckets is not None and buckets != index.buckets:
        log.warning(
            "the index at %s has %d buckets; --index-buckets %d applies to a new index only "
            "(`neardup index compact %s --buckets %d` re-buckets it)",
            index_dir,
            index.buckets,
            buckets,
            index_dir,
            buckets,
        )
    return index


def run_incremental(
    spark: SparkSession,
    new_input: str | CorpusSource,
    output: str,
    index_dir: str,
    config: DedupeConfig,
    overwrite: bool = False,
    *,
    buckets: int | None = None,
    keep_versions: int = KEEP_VERSIONS,
    session: SessionSettings | None = None,
    execution: ExecutionSettings | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> dict[str, Any]:
    """Dedupe the batch at ``new_input`` against the index at ``index_dir`` (created when
    absent), add it to the index and write the batch's outputs under ``output``. Its steps run
    where ``execution`` says (:mod:`~neardup_spark.pipeline.plan`).

    ``buckets`` (default :data:`~neardup_spark.nightly.store.DEFAULT_BUCKETS`) applies when the
    index is created; an existing index keeps its own (``compact_index`` re-buckets). Returns
    the batch report (``report.json``), with ``already_committed`` true when the batch was in
    the index before this call.

    Another run holding the index or OUTPUT is waited for up to ``lock_timeout`` seconds.

    Raises :class:`UserError` (exit 2) for unsupported settings, an index built with other
    settings, a finished OUTPUT without ``overwrite``, the input errors of ``dedupe``, a lock
    held longer than ``lock_timeout`` and a version committed by another run meanwhile.
    """
    started, timer = time.perf_counter(), StageTimer()
    check_incremental_config(config)
    source = CorpusSource.of(new_input)
    if source.path is None:
        raise UserError("a nightly run reads an input path (its files identify the batch)")
    check_paths_apart({"input": source.path, "output": output, "index": index_dir})
    if buckets is not None and buckets < 1:
        raise UserError(f"--index-buckets must be >= 1, got {buckets}")
    check_writable(index_dir, "index")
    storage = storage_for(spark, index_dir)
    job = RunJob(spark, source, config, execution or ExecutionSettings(), session)
    # A fresh process's first Python workers (imports, kernels) start while the driver reads
    # the index and the input's metadata, as in a full run; a batch read here needs none.
    with timer.stage("read"):
        listed = list_input(spark, source)
    preview = job.facts(listed, None, 0, output)
    if decide_night_sketch(preview, job.execution).where == DRIVER:
        workers_started: Callable[[], None] = lambda: None  # noqa: E731
    else:
        workers_started = start_python_workers(spark)
    with hold_lease(storage, index_dir, "nightly run", lock_timeout) as lease:
        index = open_index(spark, index_dir, config, buckets)
        index.lease = lease
        night = Night(job, listed, output, index, buckets, keep_versions, timer, started)
        report = index_and_publish(night, overwrite, lock_timeout)
    workers_started()  # long done: the night's Python tasks ran on those workers
    return report


@dataclass(frozen=True)
class Night:
    """One nightly run: its job (input, settings), the input as listed, its OUTPUT, the
    index, the new index's buckets and the versions kept, its timer and start."""

    job: RunJob
    listed: ListedInput
    output: str
    index: Index
    buckets: int | None
    keep_versions: int
    timer: StageTimer
    started: float


def index_and_publish(night: Night, overwrite: bool, lock_timeout: float) -> dict[str, Any]:
    """:func:`run_incremental` holding the index's lease: the batch indexed (unless it was
    before) and published into its OUTPUT under OUTPUT's lease."""
    job, index, timer = night.job, night.index, night.timer
    spark, config, source = job.spark, job.config, job.source
    out = OutputDir(spark, night.output)
    with timer.stage("read"):
        # The batch's id from the files listed once (Spark then reads them by their path): a
        # file landing in between is read but not in the id, so the next night that sees it
        # is another batch; the other way round it would count as committed, never indexed.
        inputs = input_files(spark, night.listed.files)
        run_id = make_run_id(inputs, config)
        df, skipped = read_corpus(spark, source, config.skip_corrupt, job.columns, night.listed)
        check_columns(df, config.id_col, config.text_col)
        check_duplicates_column(df.columns, config.duplicates_column)
    id_type = "string" if isinstance(df.schema[config.id_col].dataType, T.StringType) else "bigint"
    index.check_id_type(id_type)
    batch = index.batch(run_id)
    plan = Plan(job.facts(night.listed, df, len(skipped), out.path), job.execution)
    with out.locked(lock_timeout):
        finished = out.finished_manifest()
        if batch is not None and finished is not None and finished.get("run_id") == run_id:
            log.info("batch %s is committed and published at %s: nothing to do", run_id, out.path)
            return {**out.read_json(REPORT_FILE), "already_committed": True}
        out.prepare(overwrite)
        index.collect_garbage(night.keep_versions)
        already = batch is not None
        here = None
        if batch is None:
            context = BatchContext(
                spark, df, index, config, run_id, inputs, id_type,
                index.buckets if index.exists else (night.buckets or DEFAULT_BUCKETS),
                timer, night.started, skipped, job.session, plan, night.listed.format,
            )  # fmt: skip
            batch = index_batch(context)
            index.collect_garbage(night.keep_versions)
            log.info("batch %s committed as index version %s", run_id, index.name)
            here = deduplicated_here(context, df, join(index.root, batch["results"]))
        else:
            log.info("batch %s was committed before (batch %d): publishing", run_id, batch["seq"])
        with timer.stage("publish"):
            timing = None if already else (timer, night.started)
            steps = None if already else plan.section()  # its publishing's choice too
            report = publish_batch(spark, df, index, batch, config, out, timing, here, steps)
    report["already_committed"] = already
    return report


def index_batch(ctx: BatchContext) -> dict[str, Any]:
    """Find the batch's clusters, write and commit the next index version; returns its batch
    entry of the manifest. After the per-document pass, a batch of up to
    ``nightly_driver_max_docs`` documents is indexed on the driver, a larger one in Spark jobs
    (same results)."""
    ctx.index.claim(ctx.version_name, f"{SEGMENTS}/{ctx.segment}", ctx.results)
    sketch = ctx.plan.record(decide_night_sketch(ctx.plan.facts, ctx.plan.settings))
    here = sketch.where == DRIVER
    features: DataFrame | pa.Table = features_in_process(ctx) if here else batch_features(ctx)
    check_rows_read(footer_rows(ctx.df), ctx.n_new, "the batch's input files")
    if ctx.plan.record(decide_night(ctx.plan.settings, ctx.n_new)).where == DRIVER:
        night = index_on_driver(ctx, features)
    else:
        assert isinstance(features, DataFrame)  # a batch read here is within the driver's size
        night = index_with_spark(ctx, features)
    if isinstance(features, DataFrame):
        features.unpersist()
    if ctx.stash is not None:  # read by now: the segment's parts hold the new texts
        ctx.index.storage.delete(ctx.stash.directory)
    record_counts(ctx, night.stats)
    index_counts = after_counts(ctx, night.stats, night.touched_clusters)
    report = batch_report(ctx, index_counts, night.components, bool(night.segment["rows"]))
    ctx.index.storage.write_text(
        join(ctx.results_path, REPORT_FILE), json.dumps(report, indent=2, default=str) + "\n"
    )
    pause_if_asked("before_index_commit")
    return commit_batch(ctx, night.segment, index_counts)


def record_counts(ctx: BatchContext, stats: dict[str, int]) -> None:
    """The batch's counts from the clustering's statistics."""
    ctx.counts.update(
        replaced=stats["replaced"],
        replaced_unchanged=stats["replaced_unchanged"],
        revived_contents=ctx.counts["known_contents"] - stats["live_before"],
        # Documents with text, less one per content no document held before the batch.
        exact_copies=stats["text_docs"] - stats["fresh_contents"],
        joined_existing=stats["joined_existing"],
        changed_clusters=stats["changed_clusters"],
        merged_clusters=stats["merged_clusters"],
        deduplicated=stats["deduplicated"],
        removed=ctx.n_new - stats["deduplicated"],
        clusters=stats["clusters"],
    )


def after_counts(ctx: BatchContext, stats: dict[str, int], touched_clusters: int) -> dict[str, int]:
    """The index's counts once the batch is committed."""
    before = ctx.index.counts
    return {
        "documents": int(before.get("documents", 0)) - stats["replaced"] + ctx.n_new,
        "clusters": int(before.get("clusters", 0)) - touched_clusters + stats["member_clusters"],
        "contents": int(before.get("contents", 0)) + ctx.counts["new_contents"],
        "pairs": int(before.get("pairs", 0)) + ctx.counts["near_pairs"],
        "batches": ctx.seq,
    }


def batch_report(
    ctx: BatchContext,
    index_counts: dict[str, int],
    components: dict[str, Any],
    new_segment: bool,
) -> dict[str, Any]:
    """The batch's ``report.json`` (kept with its results in the index)."""
    config, session, index = ctx.config, ctx.session, ctx.index
    settings = {
        **config.to_dict(),
        **ctx.plan.settings.to_dict(),
        **(session.to_dict() if session else {}),
    }
    return {
        "neardup_spark_version": __version__,
        "method": config.method,
        "cluster_rule": config.cluster_rule,
        "mode": "incremental",
        "run_id": ctx.run_id,
        "batch": ctx.seq,
        "inputs": ctx.inputs,
        "counts": ctx.counts,
        "index": {
            "path": index.root,
            "version_before": index.name,
            "version": ctx.version_name,
            "segments": len(index.segments) + (1 if new_segment else 0),
            **index_counts,
        },
        "components": components,
        "banding": banding_section(config),
        "plan": ctx.plan.section(),
        **run_section(
            spark_section(ctx.spark), ctx.timer, ctx.started, ctx.n_new, settings, ctx.skipped
        ),
    }


def commit_batch(
    ctx: BatchContext, segment: dict[str, Any], index_counts: dict[str, int]
) -> dict[str, Any]:
    """Commit the next index version (its manifest lists the batch); returns the batch entry."""
    entry = {
        "seq": ctx.seq,
        "run_id": ctx.run_id,
        "committed_at": now_iso(),
        "version": ctx.version_name,
        "inputs": ctx.inputs,
        "results": ctx.results,
        "counts": ctx.counts,
    }
    segments = ctx.index.segments
    if segment["rows"]:
        segments.append(segment)
    manifest = new_manifest(
        ctx.index,
        ctx.config,
        ctx.id_type,
        segments,
        [*ctx.index.batches, entry],
        index_counts,
        ctx.buckets,
        ctx.nonce,
    )
    with ctx.timer.stage("commit"):
        ctx.index.commit(manifest, run=ctx.run_id)
    return entry
