"""The dedupe pipeline: chains the stages, decides when Spark acts, writes outputs and the report.

``dedupe(df, config)`` is the Python API (notebooks, other jobs); ``run(spark, input, output,
config)`` is what the command line and ``jobs/dedupe.py`` call.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pyspark import InheritableThread, StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup_spark import __version__
from neardup_spark.columns import (
    CLUSTER_ID,
    DOC_A,
    DOC_B,
    DOC_ID,
    HAMMING,
    JACCARD,
)
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
from neardup_spark.stages.candidates import banded_candidate_pairs
from neardup_spark.stages.clusters import (
    cluster_table,
    exact_pairs,
    minhash_pairs,
    representatives,
    simhash_pairs,
)
from neardup_spark.stages.documents import document_features
from neardup_spark.stages.fingerprint import exact_copy_edges, input_counts
from neardup_spark.stages.simhash import hamming_scored
from neardup_spark.stages.verify import score_candidate_texts, verified

log = logging.getLogger(__name__)
progress = logging.getLogger("neardup_spark.progress")

# The large per-document tables (normalised text, shingle hashes) are cached on local disk, not
# on the JVM heap: a 2 GB heap then serves corpora of millions of documents, and the OS page
# cache keeps re-reads fast.
BULK_STORAGE = StorageLevel.DISK_ONLY

# Id lists up to this many rows are broadcast to the large side of a join (tens of MB at most).
BROADCAST_MAX_ROWS = 2_000_000


@dataclass
class StageTimer:
    """Wall seconds per named stage, in the order they ran."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[dict[str, int]]:
        """Time a stage; the caller may record ``counted["rows"]`` (and other counts)."""
        counted: dict[str, int] = {}
        start = time.perf_counter()
        try:
            yield counted
        finally:
            elapsed = time.perf_counter() - start
            self.seconds[name] = round(self.seconds.get(name, 0.0) + elapsed, 3)
            extra = "".join(f" {k}={v}" for k, v in counted.items() if k != "rows")
            progress.info(
                "stage=%s rows=%s seconds=%.2f%s", name, counted.get("rows", "-"), elapsed, extra
            )


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


def _run_alongside(spark: SparkSession, action: Callable[[], object]) -> Callable[[], None]:
    """Start ``action`` (Spark actions) in its own thread and return ``wait``, which joins it and
    re-raises its error. Jobs from two threads share the cores: one job's driver-side planning
    and last-task tail no longer leave cores idle. Until ``wait``, the caller's jobs carry a job
    tag the action's thread inherits: a failed action cancels those jobs (and no one else's), so
    the caller's own job stops early instead of running to its end."""
    context = spark.sparkContext
    tag = f"neardup-alongside-{uuid.uuid4().hex}"
    context.addJobTag(tag)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            action()
        except BaseException as exc:  # re-raised in the caller's thread by wait()
            errors.append(exc)
            context.cancelJobsWithTag(tag)

    thread = InheritableThread(target=target, daemon=True)
    thread.start()

    def wait() -> None:
        thread.join()
        context.removeJobTag(tag)
        if errors:
            raise errors[0]

    return wait


def _run_together(spark: SparkSession, actions: list[Callable[[], object]]) -> None:
    """Run independent Spark actions concurrently; the first error (the one that cancelled the
    others) is raised once all have stopped."""
    waits = [_run_alongside(spark, action) for action in actions[:-1]]
    try:
        actions[-1]()
    except BaseException:
        for wait in waits:  # a background failure cancelled this one: report the cause
            wait()
        raise
    for wait in waits:
        wait()


def _pass_batches(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches


def _start_python_workers(spark: SparkSession) -> Callable[[], None]:
    """In local mode, start the Python workers now, in the background, while the driver reads
    the input's metadata and plans the first stages; returns ``wait``.

    A worker's first task otherwise begins with its imports and the loading of the compiled
    kernels (~1.4 s, done once in :mod:`neardup_spark.worker_daemon`). The workers stay up and
    serve the job's tasks. A failure here is only logged: the job's own tasks start workers
    anyway, and report any real problem."""
    context = spark.sparkContext
    if not context.master.startswith("local"):
        return lambda: None

    def start() -> None:
        try:
            context.setJobDescription("neardup: start Python workers")
            # One task: the daemon preloads once and forks the others in no time; the other
            # cores stay with the driver's planning.
            spark.range(0, 1, 1, 1).mapInArrow(_pass_batches, "id long").collect()
        except Exception as exc:  # see the docstring
            log.debug("starting the Python workers early failed: %r", exc)

    thread = InheritableThread(target=start, daemon=True)
    thread.start()
    return thread.join


def _local_checkpoint(df: DataFrame) -> DataFrame:
    return df.localCheckpoint(eager=True)


def _reliable_checkpoint(df: DataFrame) -> DataFrame:
    return df.checkpoint(eager=True)


def _exact_copies(
    fingerprints: DataFrame, config: DedupeConfig, timer: StageTimer
) -> tuple[DataFrame, int]:
    """Exact-copy edges (persisted) and their number."""
    edges = fingerprints.transform(exact_copy_edges(config.exact_compare_text)).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    with timer.stage("exact") as counted:
        n_copies = counted["rows"] = edges.count()
    return edges, n_copies


def _unique_documents(fingerprints: DataFrame, exact_edges: DataFrame, n_copies: int) -> DataFrame:
    """Fingerprinted documents minus exact copies (each group's smallest id stays)."""
    if n_copies == 0:
        return fingerprints
    copies = exact_edges.select(F.col(DOC_B).alias(DOC_ID))
    return fingerprints.join(_maybe_broadcast(copies, n_copies), DOC_ID, "left_anti")


def _maybe_broadcast(df: DataFrame, rows: int) -> DataFrame:
    """Broadcast a small table of ids so the large side of a join is never shuffled."""
    return F.broadcast(df) if rows <= BROADCAST_MAX_ROWS else df


# (band key, document) entries one candidates task sorts at most: a large corpus gets more
# partitions than local mode's few (1,000,000 pages x 28 bands in 4 partitions: candidates took
# 26.3 s, 20.3 s in 8 before).
CANDIDATE_ENTRIES_PER_PARTITION = 3_500_000


def _shuffle_partitions(spark: SparkSession) -> int:
    return int(spark.conf.get("spark.sql.shuffle.partitions") or 200)


def _candidates(
    sketches: DataFrame,
    config: DedupeConfig,
    timer: StageTimer,
    counts: dict[str, int],
    persisted: list[DataFrame],
) -> DataFrame:
    """Bucket the sketches' keys into distinct candidate pairs (persisted, counted)."""
    assert config.bands is not None
    entries = counts["input_rows"] * config.bands
    parts = max(
        _shuffle_partitions(sketches.sparkSession),
        math.ceil(entries / CANDIDATE_ENTRIES_PER_PARTITION),
    )
    candidates = sketches.transform(
        banded_candidate_pairs(config.bucket_all_pairs_max, parts)
    ).persist(StorageLevel.MEMORY_AND_DISK)
    persisted.append(candidates)
    with timer.stage("candidates") as counted:
        counts["candidate_pairs"] = counted["rows"] = candidates.count()
    return candidates


# Input per Python task of the per-document pass: each Python task costs ~40 ms of fixed work
# (worker hand-off, UDF set-up, Arrow stream) however small; 8 MB local splits in 64 MB tasks cut
# the pass at 100,000 pages from 5.2 to 4.3 s (README, Performance).
PYTHON_TASK_BYTES = 64 * 2**20


def _grouped(df: DataFrame) -> tuple[DataFrame, int]:
    """The input with its small splits grouped (coalesce, no shuffle) into tasks of about
    :data:`PYTHON_TASK_BYTES`, in a multiple of the cores so the last round is full; and its
    number of partitions. Every scan of the input pays a fixed cost per task (the per-document
    pass's Python tasks most; also verification's text scan and the ``deduplicated/`` copy,
    whose write at 100,000 pages took 2.1 s in 21 tasks, 1.8 s in 4). On a cluster (128 MB
    splits) nothing changes."""
    spark = df.sparkSession
    cores = spark.sparkContext.defaultParallelism
    parts = df.rdd.getNumPartitions()
    split_bytes = _byte_size(spark.conf.get("spark.sql.files.maxPartitionBytes") or "128m")
    splits_per_task = max(1, PYTHON_TASK_BYTES // max(split_bytes, 1))
    tasks = cores * max(1, math.ceil(parts / (cores * splits_per_task)))
    return (df.coalesce(tasks), tasks) if tasks < parts else (df, parts)


def _spread(docs: DataFrame, parts: int) -> DataFrame:
    """Partitions for the per-document pass (``docs`` in ``parts`` partitions), which runs one
    Python task per partition.

    A corpus in fewer partitions than cores (one or two large files) would leave cores idle, so
    it is spread over twice the cores (hash partitioning on the id keeps the layout independent
    of task order); with at least one partition per core, shuffling every text costs more than a
    somewhat uneven last round."""
    cores = docs.sparkSession.sparkContext.defaultParallelism
    return docs.repartition(2 * cores, DOC_ID) if parts < cores else docs


def _byte_size(text: str) -> int:
    """A Spark size setting ("8m", "134217728b", "134217728") in bytes."""
    text = text.strip().lower()
    units = {"b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30, "gb": 2**30}
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix) and text[: -len(suffix)].strip().isdigit():
            return int(text[: -len(suffix)]) * units[suffix]
    return int(text) if text.isdigit() else 128 * 2**20


def _near_edges(
    documents: DataFrame,
    raw_docs: DataFrame,
    unique_docs: DataFrame,
    config: DedupeConfig,
    timer: StageTimer,
    counts: dict[str, int],
    persisted: list[DataFrame],
) -> DataFrame:
    """Candidates from ``unique_docs``' band keys, scored with the sketches of ``documents``
    (SimHash) or of ``raw_docs``' texts (MinHash) -> verified ``pairs/`` rows."""
    candidates = _candidates(unique_docs, config, timer, counts, persisted)
    if config.method == "minhash":
        n_pairs = counts["candidate_pairs"]
        broadcast = 2 * n_pairs <= BROADCAST_MAX_ROWS
        scored = candidates.transform(score_candidate_texts(raw_docs, config, broadcast))
        passes = F.col(JACCARD) >= config.threshold
    else:
        scored = candidates.transform(hamming_scored(documents))
        passes = F.col(HAMMING) <= config.hamming_k
    scored = scored.persist(StorageLevel.MEMORY_AND_DISK)
    persisted.append(scored)
    with timer.stage("verify") as counted:
        counts["near_pairs"] = counted["verified"] = scored.where(passes).count()
    if config.method == "minhash":
        return scored.transform(verified(config.threshold)).transform(minhash_pairs)
    return simhash_pairs(scored.where(passes))


def dedupe(
    df: DataFrame,
    config: DedupeConfig,
    checkpoint: Callable[[DataFrame], DataFrame] | None = None,
    timer: StageTimer | None = None,
    write_pairs: Callable[[DataFrame], object] | None = None,
) -> DedupeResult:
    """Find the near-duplicate clusters of ``df`` (a DataFrame with ``config.id_col`` and
    ``config.text_col``; other columns are carried into ``deduplicated``).

    ``write_pairs``, if given, writes the pairs table as soon as it is known, alongside the
    connected components (a single task at most sizes, leaving the other cores free).

    Raises :class:`UserError` for a missing column, a bad type, or null/duplicate ids.
    """
    config = config.resolved()
    timer = timer or StageTimer()
    checkpoint = checkpoint or _local_checkpoint
    spark = df.sparkSession
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(config.arrow_batch_size))
    check_columns(df, config.id_col, config.text_col)
    df, parts = _grouped(df)  # the per-document pass, verification and deduplicated/ read it
    # The id check runs alongside the per-document pass (a bad id cancels it); "check_ids" is
    # the time the job then still waits for the check.
    wait_for_id_check = _run_alongside(spark, lambda: check_ids(df, config.id_col))

    docs = _spread(as_documents(df, config.id_col, config.text_col), parts)
    # One pass normalises, fingerprints and sketches each document; later stages read this
    # narrow table (no shingle sets: verification recomputes those of the candidates only).
    fingerprints = docs.transform(document_features(config, with_sets=False)).persist(BULK_STORAGE)
    # Intermediates of the pair search, released once the pairs are materialised.
    intermediates: list[DataFrame] = []
    try:
        with timer.stage("sketch") as counted:
            counts = input_counts(fingerprints, config.ngram, config.char_ngram)
            counted["rows"] = counts["input_rows"]
    except BaseException:
        wait_for_id_check()  # a bad id, which cancelled the pass, is the error to report
        raise
    with timer.stage("check_ids"):
        wait_for_id_check()

    collapse = config.method == "exact" or config.exact_first
    pair_parts: list[DataFrame] = []
    n_copies = 0
    unique_docs = fingerprints
    if collapse:
        exact_edges, n_copies = _exact_copies(fingerprints, config, timer)
        intermediates.append(exact_edges)
        pair_parts.append(exact_pairs(exact_edges))
        unique_docs = _unique_documents(fingerprints, exact_edges, n_copies)
    counts["exact_copies"] = n_copies
    counts["candidate_pairs"] = counts["near_pairs"] = 0
    if config.method != "exact":
        raw_docs = as_documents(df, config.id_col, config.text_col)
        pair_parts.append(
            _near_edges(fingerprints, raw_docs, unique_docs, config, timer, counts, intermediates)
        )
    pairs = pair_parts[0]
    for part in pair_parts[1:]:
        pairs = pairs.unionByName(part)
    if len(pair_parts) > 1:
        # Each part has a shuffle's partitions; its rows are cheap to recompute here (the
        # verified scores are persisted), and ``pairs/`` gets half as many small files.
        pairs = pairs.coalesce(_shuffle_partitions(spark))
    pairs = pairs.persist(StorageLevel.MEMORY_AND_DISK)
    # Exact-copy edges join a copy to its group's smallest id, near edges join unique texts:
    # the two sets are disjoint, so no job is needed to count their union.
    counts["verified_pairs"] = n_copies + counts["near_pairs"]

    pairs_written = _run_alongside(spark, lambda: write_pairs(pairs)) if write_pairs else None
    try:
        with timer.stage("components") as counted:
            labels, rounds = connected_components(
                pairs.select(DOC_A, DOC_B),
                checkpoint,
                n_edges=counts["verified_pairs"],
                single_task_max_edges=config.components_single_task_max_edges,
            )
            if rounds == 0 and config.representative != "smallest_id":
                labels = labels.persist()  # read twice: the single task would run twice
                intermediates.append(labels)
            members = labels.transform(
                representatives(config.representative, fingerprints)
            ).persist()
            removed = counted["removed"] = members.where(F.col(DOC_ID) != F.col(CLUSTER_ID)).count()
            counted["rows"] = counts["verified_pairs"]
    except BaseException:
        if pairs_written:  # a failed write cancelled the components: report the cause
            pairs_written()
        raise
    if pairs_written:  # before the intermediates it may still read are released
        with timer.stage("write"):
            pairs_written()
    for df_ in intermediates:  # the pairs are materialised now
        df_.unpersist()
    counts["removed"] = int(removed)
    counts["clusters"] = counts["input_rows"] - counts["removed"]

    n_members = 2 * counts["verified_pairs"]  # an upper bound on the documents in clusters
    clusters = fingerprints.transform(cluster_table(_maybe_broadcast(members, n_members)))
    removed_ids = members.where(F.col(DOC_ID) != F.col(CLUSTER_ID)).select(
        F.col(DOC_ID).alias(config.id_col)
    )
    deduplicated = df.join(
        _maybe_broadcast(removed_ids, counts["removed"]), config.id_col, "left_anti"
    )
    report = {
        "neardup_spark_version": __version__,
        "method": config.method,
        "config": config.to_dict(),
        "counts": counts,
        "components": {
            "strategy": "distributed" if rounds else "single_task",
            "rounds": rounds,
        },
        "stage_seconds": timer.seconds,
    }
    if config.method == "minhash":
        report["banding"] = banding_report(config)
    if config.method == "simhash":
        report["simhash"] = {
            "hamming_k": config.hamming_k,
            "blocks": config.blocks,
            "tables": math.comb(config.blocks, config.hamming_k),
            "features": config.simhash_features,
            "hash": config.simhash_hash,
            "weighting": config.simhash_weighting,
        }
    return DedupeResult(clusters, pairs, deduplicated, report, [fingerprints, pairs, members])


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
    workers_started = _start_python_workers(spark)
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + uuid.uuid4().hex[:8]
    staged = out.staging(run_id)
    with timer.stage("read"):
        df, skipped_files = read_corpus(spark, input_path, config.skip_corrupt)
        check_columns(df, config.id_col, config.text_col)
    spark.sparkContext.setCheckpointDir(staged.child(CHECKPOINT_DIR))
    result = dedupe(
        df,
        config,
        checkpoint=_reliable_checkpoint,
        timer=timer,
        write_pairs=lambda pairs: pairs.write.parquet(staged.child("pairs")),
    )
    with timer.stage("write"):
        _run_together(
            spark,
            [
                lambda: result.clusters.write.parquet(staged.child("clusters")),
                lambda: result.deduplicated.write.parquet(staged.child("deduplicated")),
            ],
        )
    result.release()
    workers_started()  # long done: the job's Python tasks ran on those workers
    staged.delete(CHECKPOINT_DIR)
    wall = time.perf_counter() - started
    report = dict(result.report)
    report.update(
        {
            "run_id": run_id,
            "input": input_path,
            "output": output_path,
            "spark": {"version": spark.version, "master": spark.sparkContext.master},
            "skipped_files": skipped_files,
            "stage_seconds": timer.seconds,
            "wall_seconds": round(wall, 3),
            "docs_per_second": round(report["counts"]["input_rows"] / wall, 1) if wall else None,
        }
    )
    staged.write_json(REPORT_FILE, report)
    skipped = {s["path"] for s in skipped_files}
    manifest = {
        "run_id": run_id,
        "neardup_spark_version": __version__,
        "input": input_path,
        "input_files": out.file_listing([f for f in df.inputFiles() if f not in skipped]),
        "skipped_files": skipped_files,
        "config_sha256": hashlib.sha256(config.fingerprint().encode()).hexdigest(),
        "counts": report["counts"],
    }
    out.commit(staged, manifest)
    return report
