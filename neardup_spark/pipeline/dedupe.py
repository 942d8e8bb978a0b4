"""The dedupe run: ``dedupe(df, config)`` (the Python API) chains the steps of
:mod:`neardup_spark.pipeline.steps`; ``run(spark, input, output, config)`` (the command line's
path) reads the corpus, calls it and writes the output contract."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from neardup_spark import __version__
from neardup_spark.columns import DOC_ID, IS_REPRESENTATIVE
from neardup_spark.config import DedupeConfig, SessionSettings
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import (
    CorpusSource,
    as_documents,
    check_columns,
    check_paths_apart,
    files_read,
    input_files,
    preference_table,
    read_corpus,
)
from neardup_spark.io.filesystem import LocalStorage, join, write_parquet_file
from neardup_spark.io.footer_rows import check_rows_read, footer_rows
from neardup_spark.io.lease import DEFAULT_LOCK_TIMEOUT
from neardup_spark.io.output import CHECKPOINT_DIR, DEDUPE_LAYOUT, REPORT_FILE, OutputDir
from neardup_spark.pipeline.boilerplate import boilerplate_step
from neardup_spark.pipeline.driver_pairs import DriverTables
from neardup_spark.pipeline.execution import (
    grouped_input,
    local_checkpoint,
    reliable_checkpoint,
    run_alongside,
    run_together,
    start_python_workers,
)
from neardup_spark.pipeline.filtered_scans import addressed_input
from neardup_spark.pipeline.in_process import LocalInput, local_input, may_read_in_process
from neardup_spark.pipeline.local_output import RowsCopy, rows_copy, write_rows_without
from neardup_spark.pipeline.reporting import StageTimer
from neardup_spark.pipeline.resume import RunPlan, StageResults, plan_run
from neardup_spark.pipeline.steps import (
    cluster_members,
    document_table,
    finish_components,
    members_on_driver,
    output_tables,
    run_report,
    verified_edges,
)
from neardup_spark.pipeline.tables import TABLES, TABLES_LAYOUT, OutputTables
from neardup_spark.pipeline.task_copy import RemovedRows, copy_in_tasks
from neardup_spark.runtime.faults import pause_if_asked
from neardup_spark.runtime.session import keep_column_types, spark_section


@dataclass
class DedupeResult:
    """What a dedupe computes. The DataFrames read persisted intermediate data: call
    :meth:`release` when done with them."""

    clusters: DataFrame
    pairs: DataFrame
    deduplicated: DataFrame
    report: dict[str, Any]
    persisted: list[DataFrame] = field(default_factory=list, repr=False)
    # Writes the pairs when dedupe() did not (a run whose members were found on the driver
    # writes them with its other tables, in one go).
    write_pairs: Callable[[], object] | None = field(default=None, repr=False)
    # clusters/ and pairs/ as tables of this process (members found on the driver; pairs/
    # when made here too, see driver_pairs.DriverTables): written from here.
    clusters_table: pa.Table | None = field(default=None, repr=False)
    pairs_table: pa.Table | None = field(default=None, repr=False)
    # The removed documents with the input's addresses, for deduplicated/ copied by tasks.
    removed_rows: RemovedRows | None = field(default=None, repr=False)

    def release(self) -> None:
        for df in self.persisted:
            df.unpersist()


def dedupe(
    df: DataFrame,
    config: DedupeConfig,
    checkpoint: Callable[[DataFrame], DataFrame] | None = None,
    timer: StageTimer | None = None,
    write_pairs: Callable[[DataFrame], object] | None = None,
    results: StageResults | None = None,
    local: LocalInput | None = None,
) -> DedupeResult:
    """Find the near-duplicate clusters of ``df`` (a DataFrame with ``config.id_col`` and
    ``config.text_col``; other columns are carried into ``deduplicated``).

    ``write_pairs``, if given, writes the pairs table as soon as it is known, alongside the
    connected components (a single task at most sizes, leaving the other cores free). Arrow
    batches have the session's size (``spark.sql.execution.arrow.maxRecordsPerBatch``).
    ``results`` keeps each stage's result (default: Spark's cache; :func:`run` keeps them on
    disk, resumable). ``local``: ``df``'s files when this process may read them and do the
    per-document pass itself (:mod:`~neardup_spark.pipeline.in_process`).

    ``config.prefer`` (a keep policy over input columns) chooses each cluster's representative.
    Raises :class:`UserError` for a missing column, a bad type, or null/duplicate ids.
    """
    timer = timer or StageTimer()
    results = results or StageResults()
    check_columns(df, config.id_col, config.text_col)
    ranking = preference_table(df, config.id_col, config.preference) if config.prefer else None
    addressed = addressed_input(df, config.id_col, config.text_col)  # None unless a file scan
    df, parts = grouped_input(df)  # the per-document pass, verification and deduplicated/ read it
    cleaning = boilerplate_step(df, config, timer) if config.strip_boilerplate else None
    features, counts, here = document_table(
        df,
        parts,
        config,
        timer,
        cleaning.documents if cleaning else None,
        cleaning.features_of if cleaning else None,
        results,
        local,
    )
    texts = cleaning.texts_for if cleaning else as_documents(df, config.id_col, config.text_col)
    pairs, driver = verified_edges(features, texts, config, timer, counts, results, addressed, here)
    del here  # the texts read here are not needed again
    members, components, pending = members_and_pairs_written(
        pairs,
        features,
        config,
        timer,
        counts,
        checkpoint or local_checkpoint,
        results,
        ranking,
        driver,
        write_pairs,
    )
    results.release("exact", "candidates", "verify")
    clusters, deduplicated, clusters_here = output_tables(
        df, features, members, config, counts, addressed, driver
    )
    report = run_report(config, counts, components, timer)
    if cleaning:
        with timer.stage("boilerplate"):
            report["boilerplate"] = cleaning.report(features)
        cleaning.release()
    return DedupeResult(
        clusters,
        pairs,
        deduplicated,
        report,
        [features, pairs, members],
        write_pairs=pending,
        clusters_table=clusters_here,
        pairs_table=driver.pair_rows if driver is not None and pending else None,
        removed_rows=(
            RemovedRows(addressed, members, counts["removed"], counts["input_rows"])
            if addressed is not None
            else None
        ),
    )


def members_and_pairs_written(
    pairs: DataFrame,
    features: DataFrame,
    config: DedupeConfig,
    timer: StageTimer,
    counts: dict[str, int],
    checkpoint: Callable[[DataFrame], DataFrame],
    results: StageResults,
    ranking: tuple[DataFrame, list[tuple[str, bool]]] | None,
    driver: DriverTables | None,
    write_pairs: Callable[[DataFrame], object] | None,
) -> tuple[DataFrame, dict[str, Any], Callable[[], object] | None]:
    """:func:`~neardup_spark.pipeline.steps.cluster_members` (finished in ``results``), with
    ``write_pairs`` writing the pairs alongside; members found on the driver take no time, so
    their pairs are left to be written with the other outputs: the third value writes them."""
    write_now = write_pairs is not None and results.finished("components") is None
    later = members_on_driver(config, counts, ranking, driver)
    pairs_written = (
        run_alongside(pairs.sparkSession, lambda: write_pairs(pairs))
        if write_pairs and write_now and not later
        else None
    )
    try:
        members, components = cluster_members(
            pairs, features, config, timer, counts, checkpoint, results, ranking, driver
        )
    except Exception:  # (an interrupt is not waited on: it stops the process)
        if pairs_written:  # a failed write cancelled the components: report the cause
            pairs_written()
        raise
    if pairs_written:  # before the intermediates it may still read are released
        with timer.stage("write"):
            pairs_written()
    if not later:  # members found here are not kept: a rerun finds them again
        finish_components(results, counts, components)
    pending = (lambda: write_pairs(pairs)) if write_pairs and write_now and later else None
    return members, components, pending


def run(
    spark: SparkSession,
    input_path: str | CorpusSource,
    output_path: str | None,
    config: DedupeConfig,
    overwrite: bool = False,
    session: SessionSettings | None = None,
    resume: bool = True,
    *,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    tables: OutputTables | None = None,
) -> dict[str, Any]:
    """Read ``input_path`` (a path Spark reads, or a :class:`CorpusSource`: a path in a given
    format, or a table), dedupe, write the output contract under ``output_path``.

    Layout: ``clusters/``, ``pairs/``, ``deduplicated/`` (Parquet), ``report.json``, and
    ``_SUCCESS`` written last. ``session``, the settings the session was built with, goes into
    the report's config. Each finished stage is kept under ``OUTPUT/_staging/RUN_ID/``: a rerun
    of the same input and config resumes from the last one (:mod:`~neardup_spark.pipeline.
    resume`; ``resume=False`` starts afresh). One run writes an OUTPUT at a time: another run
    holding it is waited for up to ``lock_timeout`` seconds. Returns the report.

    ``tables``: the three tables are written to the catalog instead, and OUTPUT (optional then)
    gets ``report.json`` (:mod:`~neardup_spark.pipeline.tables`).
    """
    source = CorpusSource.of(input_path)
    if output_path is None:
        if tables is None:
            raise UserError("give an OUTPUT directory or --output-table PREFIX")
        return run_to_tables(spark, source, tables, config, session)
    if source.path is not None:
        check_paths_apart({"input": source.path, "output": output_path})
    out = OutputDir(spark, output_path, TABLES_LAYOUT if tables else DEDUPE_LAYOUT)
    with out.locked(lock_timeout):
        return run_locked(spark, source, out, config, overwrite, session, resume, tables)


def run_locked(
    spark: SparkSession,
    source: CorpusSource,
    out: OutputDir,
    config: DedupeConfig,
    overwrite: bool,
    session: SessionSettings | None,
    resume: bool,
    tables: OutputTables | None = None,
) -> dict[str, Any]:
    """:func:`run` holding OUTPUT's lease."""
    started = time.perf_counter()
    timer = StageTimer()
    out.prepare(overwrite, clear_staging=False)
    if tables is not None:
        tables.check(spark)
    ahead = python_tasks_ahead(spark, source, config)
    workers_started = start_python_workers(spark) if ahead else None
    # The run id's file list is taken before Spark lists the input to read it: a file that
    # lands in between is then read but not in the id, so a rerun that sees it gets another id
    # and starts afresh; the other way round, a resumed run would reuse stages without it.
    with timer.stage("input_digest"):
        files = input_files(spark, source.path) if source.path is not None else []
    with timer.stage("read"):
        df, skipped_files = read_corpus(
            spark, source, config.skip_corrupt, (config.id_col, config.text_col)
        )
        check_columns(df, config.id_col, config.text_col)
    plan = plan_run(spark, out, source, config, resume, files)
    staged = plan.staged
    staged.delete(CHECKPOINT_DIR)  # a killed run's; the components stage checkpoints afresh
    local = local_input(spark, source, files, config, skipped_files)
    result = dedupe(
        df,
        config,
        checkpoint=reliable_checkpoint(spark, staged.child(CHECKPOINT_DIR)),
        timer=timer,
        write_pairs=lambda pairs: pairs.write.mode("overwrite").parquet(staged.child("pairs")),
        results=plan.results,
        local=local,
    )
    check_rows_read(footer_rows(df), result.report["counts"]["input_rows"], source.shown)
    keep_column_types(spark)  # deduplicated/ keeps the input's timestamp types
    with timer.stage("write"):
        local_out = isinstance(staged.storage, LocalStorage)
        copy = rows_copy(df, local, config.id_col) if local_out else None
        write_outputs(spark, result, staged, tables, copy, config.id_col)
    result.release()
    if workers_started:
        workers_started()  # long done: the job's Python tasks ran on those workers
    staged.delete(CHECKPOINT_DIR)
    report = {**result.report, **plan_section(plan)}
    if session is not None:
        report["config"] = {**config.to_dict(), **session.to_dict()}
    wall = time.perf_counter() - started
    report.update(
        {
            "input": source.shown,
            "input_format": source.format,
            "output": out.path,
            **({"output_tables": tables.names} if tables else {}),
            "spark": spark_section(spark),
            "skipped_files": skipped_files,
            "stage_seconds": timer.seconds,
            "wall_seconds": round(wall, 3),
            "docs_per_second": round(report["counts"]["input_rows"] / wall, 1) if wall else None,
        }
    )
    staged.write_json(REPORT_FILE, report)
    manifest = run_manifest(out, df, config, report)
    pause_if_asked("before_commit")
    written = ("clusters", "pairs", "deduplicated") if tables is None else ("pairs",)
    out.commit(staged, manifest, on_cleared=lambda: pause_if_asked("in_commit"), required=written)
    return report


def python_tasks_ahead(spark: SparkSession, source: CorpusSource, config: DedupeConfig) -> bool:
    """Whether the run will run Python tasks (whose workers a fresh process starts early):
    not when the driver may read its input (:func:`~neardup_spark.pipeline.in_process.
    may_read_in_process`) and find its pairs (``driver_max_docs``), which then runs none."""
    if config.strip_boilerplate or not config.driver_max_docs:
        return True
    return not may_read_in_process(spark, source, config, config.driver_max_docs)


def write_outputs(
    spark: SparkSession,
    result: DedupeResult,
    staged: OutputDir,
    tables: OutputTables | None,
    copy: RowsCopy | None = None,
    id_col: str = "",
) -> None:
    """``clusters/`` and ``deduplicated/`` staged as Parquet (and ``pairs/`` when dedupe()
    left it to be written here), or the three tables written (pairs from the staged
    Parquet). ``copy``: ``deduplicated/`` is copied from the input files by this process
    (:mod:`~neardup_spark.pipeline.local_output`; ``id_col`` names their id column) when
    the clusters are a table here, else by Spark tasks (:mod:`.task_copy`) when they can."""
    if tables is None:
        table = result.clusters_table

        def write_deduplicated() -> None:
            name = "deduplicated"
            if copy is not None and table is not None:
                write_rows_without(copy, id_col, removed_ids(table), staged, name)
            elif not (
                copy is not None
                and result.removed_rows is not None
                and copy_in_tasks(result.removed_rows, copy, staged, name)
            ):
                result.deduplicated.write.mode("overwrite").parquet(staged.child(name))

        def write_clusters() -> None:
            if table is not None:
                write_table_here(staged, "clusters", table)
            else:
                result.clusters.write.mode("overwrite").parquet(staged.child("clusters"))

        def write_pairs() -> None:
            if result.pairs_table is not None:
                rows = result.pairs_table.cast(to_arrow_schema(result.pairs.schema))
                write_table_here(staged, "pairs", rows)
            elif result.write_pairs:
                result.write_pairs()

        # The last action runs in this thread: the Spark jobs start first, in the background.
        pending = [write_pairs] if result.write_pairs else []
        run_together(spark, [*pending, write_deduplicated, write_clusters])
        return
    if result.write_pairs:
        result.write_pairs()
    tables.write("pairs", spark.read.parquet(staged.child("pairs")))
    tables.write("clusters", result.clusters)
    tables.write("deduplicated", result.deduplicated)


def removed_ids(clusters: pa.Table) -> pa.Array:
    """The ids of the documents a ``clusters/`` table does not keep (not representatives)."""
    removed = clusters.filter(pc.invert(clusters.column(IS_REPRESENTATIVE)))
    return removed.column(DOC_ID).combine_chunks()


def write_table_here(staged: OutputDir, name: str, table: pa.Table) -> None:
    """A staged output computed in this process, written by it as one Parquet file (replacing
    what a killed attempt left)."""
    staged.delete(name)
    write_parquet_file(join(staged.child(name), "part-00000.parquet"), table, staged.storage)


def run_to_tables(
    spark: SparkSession,
    source: CorpusSource,
    tables: OutputTables,
    config: DedupeConfig,
    session: SessionSettings | None,
) -> dict[str, Any]:
    """:func:`run` with no OUTPUT: the stages kept in Spark's cache (not resumable), the three
    tables written, no ``report.json``. Returns the report."""
    started = time.perf_counter()
    timer = StageTimer()
    workers_started = start_python_workers(spark)
    with timer.stage("read"):
        df, skipped_files = read_corpus(
            spark, source, config.skip_corrupt, (config.id_col, config.text_col)
        )
        check_columns(df, config.id_col, config.text_col)
        tables.check(spark)
    result = dedupe(df, config, timer=timer)
    check_rows_read(footer_rows(df), result.report["counts"]["input_rows"], source.shown)
    keep_column_types(spark)
    with timer.stage("write"):
        for name in TABLES:
            tables.write(name, getattr(result, name))
    result.release()
    workers_started()
    report = dict(result.report)
    if session is not None:
        report["config"] = {**config.to_dict(), **session.to_dict()}
    wall = time.perf_counter() - started
    report.update(
        {
            "input": source.shown,
            "input_format": source.format,
            "output": None,
            "output_tables": tables.names,
            "spark": spark_section(spark),
            "skipped_files": skipped_files,
            "resumed_stages": [],
            "stage_seconds": timer.seconds,
            "wall_seconds": round(wall, 3),
            "docs_per_second": round(report["counts"]["input_rows"] / wall, 1) if wall else None,
        }
    )
    return report


def run_manifest(
    out: OutputDir, df: DataFrame, config: DedupeConfig, report: dict[str, Any]
) -> dict[str, Any]:
    """``manifest.json`` of a finished run: run id, input files, config hash, counts."""
    skipped = {s["path"] for s in report["skipped_files"]}
    return {
        "run_id": report["run_id"],
        "neardup_spark_version": __version__,
        "input": report["input"],
        "input_files": out.file_listing([f for f in files_read(df) if f not in skipped]),
        "skipped_files": report["skipped_files"],
        "config_sha256": hashlib.sha256(config.settings_json().encode()).hexdigest(),
        "resumed_stages": report["resumed_stages"],
        "counts": report["counts"],
    }


def plan_section(plan: RunPlan) -> dict[str, Any]:
    """The report's run id, ``resumed_stages`` and ``resume`` (why a run started afresh)."""
    return {
        "run_id": plan.run_id,
        "resumed_stages": list(plan.results.resumed),
        "resume": plan.report_section(),
    }
