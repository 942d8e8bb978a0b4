"""The dedupe run, step by step. :func:`run` (the command line's path) and :func:`dedupe` (the
Python API) share :func:`dedupe_steps`; where each step executes is the plan's choice
(:mod:`.plan`), from the run's facts (:mod:`.facts`), and each step's implementations sit side
by side in its module:

    facts       .facts              the input listed, its footers read, once; the session
    read        io/corpus           Spark's read of the listed files, whole files only
    sketch      .sketch             the per-document pass: driver | tasks | spark
    pairs       .pairs              exact copies, candidates, verification: driver | spark
    components  .members            each document's representative: driver | one task | rounds
    outputs     .outputs            clusters/, pairs/, deduplicated/: copies | Spark writes
    commit      io/output           staged, then committed with the report and manifest
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from neardup_spark import __version__
from neardup_spark.columns import CONTAINMENT, SIMILARITY
from neardup_spark.config import DedupeConfig, ExecutionSettings, SessionSettings
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import (
    CorpusSource,
    ListedInput,
    as_documents,
    check_columns,
    check_duplicates_column,
    check_paths_apart,
    files_read,
    input_files,
    list_input,
    preference_table,
    read_corpus,
)
from neardup_spark.io.footer_rows import check_rows_read, footer_rows
from neardup_spark.io.lease import DEFAULT_LOCK_TIMEOUT
from neardup_spark.io.output import CHECKPOINT_DIR, DEDUPE_LAYOUT, REPORT_FILE, OutputDir
from neardup_spark.pipeline.addressed_input import addressed_input
from neardup_spark.pipeline.boilerplate import boilerplate_step
from neardup_spark.pipeline.context import RunContext
from neardup_spark.pipeline.deduplicated_copy import RemovedRows
from neardup_spark.pipeline.execution import (
    grouped_input,
    local_checkpoint,
    reliable_checkpoint,
    start_python_workers,
)
from neardup_spark.pipeline.facts import RunFacts, frame_facts, gather_facts
from neardup_spark.pipeline.members import members_and_pairs_written
from neardup_spark.pipeline.outputs import Found, output_tables, write_outputs
from neardup_spark.pipeline.pairs import verified_edges
from neardup_spark.pipeline.plan import Plan, python_tasks_expected
from neardup_spark.pipeline.removals import removals_here, removals_in_spark
from neardup_spark.pipeline.reporting import (
    StageTimer,
    banding_section,
    run_section,
    simhash_section,
)
from neardup_spark.pipeline.resume import RunStaging, StageResults, run_staging
from neardup_spark.pipeline.sketch import document_table
from neardup_spark.pipeline.tables import TABLES, TABLES_LAYOUT, OutputTables
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

    def release(self) -> None:
        for df in self.persisted:
            df.unpersist()


def dedupe(
    df: DataFrame,
    config: DedupeConfig,
    execution: ExecutionSettings | None = None,
    *,
    timer: StageTimer | None = None,
    results: StageResults | None = None,
) -> DedupeResult:
    """Find the near-duplicate clusters of ``df`` (a DataFrame with ``config.id_col`` and
    ``config.text_col``; other columns are carried into ``deduplicated``, which adds the
    duplicates column, ``config.duplicates_column``), the Python API.

    Its steps run where ``execution``'s thresholds say (:mod:`.plan`; ``report["plan"]``); the
    input is read by Spark (a DataFrame may be any query). Arrow batches have the session's
    size (``spark.sql.execution.arrow.maxRecordsPerBatch``). ``results`` keeps each stage's
    result (default: Spark's cache). ``config.prefer`` (a keep policy over input columns)
    chooses each cluster's representative. Raises :class:`UserError` for a missing column, a
    bad type, or null/duplicate ids.
    """
    check_columns(df, config.id_col, config.text_col)
    id_type = df.schema[config.id_col].dataType
    facts = frame_facts(df.sparkSession, id_type, config.strip_boilerplate)
    plan = Plan(facts, execution)
    ctx = RunContext(df.sparkSession, config, plan, timer or StageTimer())
    ctx.results = results or ctx.results
    return dedupe_steps(ctx, df)[0]


def dedupe_steps(
    ctx: RunContext,
    df: DataFrame,
    write_pairs: Callable[[DataFrame], object] | None = None,
) -> tuple[DedupeResult, Found]:
    """The steps of a dedupe of ``df`` in ``ctx`` -> its result, and what the steps found that
    the writers need (:class:`~neardup_spark.pipeline.outputs.Found`). ``write_pairs``, if
    given, writes the pairs table as soon as it is known, alongside the components."""
    config = ctx.config
    check_columns(df, config.id_col, config.text_col)
    check_duplicates_column(df.columns, config.duplicates_column)
    ranking = preference_table(df, config.id_col, config.preference) if config.prefer else None
    schemas = {f.path: f.schema for f in ctx.facts.input.parquet}
    addressed = addressed_input(df, config.id_col, config.text_col, schemas)  # a Parquet scan
    df, parts = grouped_input(df)  # the per-document pass, verification and deduplicated/ read it
    cleaning = boilerplate_step(df, config, ctx.timer) if config.strip_boilerplate else None
    features, here = document_table(
        ctx,
        df,
        parts,
        cleaning.documents if cleaning else None,
        cleaning.features_of if cleaning else None,
    )
    texts = cleaning.texts_for if cleaning else as_documents(df, config.id_col, config.text_col)
    pairs, driver = verified_edges(ctx, features, texts, addressed, here)
    del here  # the texts read here are not needed again
    members, components, pending, pairs = members_and_pairs_written(
        ctx, pairs, features, ranking, driver, write_pairs
    )
    ctx.results.release("exact", "candidates", "verify")
    clusters, deduplicated, clusters_here = output_tables(
        ctx, df, features, members, addressed, driver
    )
    report = dedupe_report(ctx, components)
    with ctx.timer.stage("removals"):
        report["removals"] = (
            removals_here(ctx.counts, config, clusters_here)
            if clusters_here is not None
            else removals_in_spark(ctx.counts, config, members)
        )
    if cleaning:
        with ctx.timer.stage("boilerplate"):
            report["boilerplate"] = cleaning.report(features)
        cleaning.release()
    counts = ctx.counts
    pair_rows = driver.pair_rows if driver is not None and pending else None
    if pair_rows is not None and driver is not None and driver.added is not None:
        pair_rows = pa.concat_tables([pair_rows, driver.added.cast(pair_rows.schema)])
    if pair_rows is not None and config.similarity == "containment":
        pair_rows = pair_rows.append_column(CONTAINMENT, pair_rows.column(SIMILARITY))
    found = Found(
        clusters_here,
        pair_rows.cast(to_arrow_schema(pairs.schema)) if pair_rows is not None else None,
        pending,
        RemovedRows(addressed, members, counts["removed"], counts["input_rows"])
        if addressed is not None
        else None,
    )
    result = DedupeResult(clusters, pairs, deduplicated, report, [features, pairs, members])
    return result, found


def dedupe_report(ctx: RunContext, components: dict[str, Any]) -> dict[str, Any]:
    """What a dedupe computed: counts, components, the banding or SimHash tables, the plan."""
    config = ctx.config
    report: dict[str, Any] = {
        "neardup_spark_version": __version__,
        "method": config.method,
        "cluster_rule": config.cluster_rule,
        "config": {**config.to_dict(), **ctx.settings.to_dict()},
        "counts": ctx.counts,
        "components": components,
        "plan": ctx.plan.section(),
        "stage_seconds": ctx.timer.seconds,
        "stages_on_driver": list(ctx.timer.on_driver),
    }
    if config.method == "minhash":
        report["banding"] = banding_section(config)
    if config.method == "simhash":
        report["simhash"] = simhash_section(config)
    return report


def run(
    spark: SparkSession,
    input_path: str | CorpusSource,
    output_path: str | None,
    config: DedupeConfig,
    overwrite: bool = False,
    session: SessionSettings | None = None,
    resume: bool = True,
    *,
    execution: ExecutionSettings | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    tables: OutputTables | None = None,
) -> dict[str, Any]:
    """Read ``input_path`` (a path Spark reads, or a :class:`CorpusSource`: a path in a given
    format, or a table), dedupe, write the output contract under ``output_path``.

    Layout: ``clusters/``, ``pairs/``, ``deduplicated/`` (Parquet), ``report.json``, and
    ``_SUCCESS`` written last. ``session`` and ``execution``, the settings the session was
    built with and the plan's thresholds (and choices given beforehand, ``plan``), go into the
    report's config. Each finished stage
    is kept under ``OUTPUT/_staging/RUN_ID/``: a rerun of the same input and config resumes
    from the last one (:mod:`~neardup_spark.pipeline.resume`; ``resume=False`` starts afresh).
    One run writes an OUTPUT at a time: another run holding it is waited for up to
    ``lock_timeout`` seconds. Returns the report.

    ``tables``: the three tables are written to the catalog instead, and OUTPUT (optional then)
    gets ``report.json`` (:mod:`~neardup_spark.pipeline.tables`).
    """
    source = CorpusSource.of(input_path)
    job = RunJob(spark, source, config, execution or ExecutionSettings(), session)
    if output_path is None:
        if tables is None:
            raise UserError("give an OUTPUT directory or --output-table PREFIX")
        return run_to_tables(job, tables)
    if source.path is not None:
        check_paths_apart({"input": source.path, "output": output_path})
    out = OutputDir(spark, output_path, TABLES_LAYOUT if tables else DEDUPE_LAYOUT)
    with out.locked(lock_timeout):
        return run_locked(job, out, overwrite, resume, tables)


@dataclass(frozen=True)
class RunJob:
    """One command's run: its session, input, what it computes, where its steps execute (and
    the steps' choices given beforehand) and its session settings (for the report)."""

    spark: SparkSession
    source: CorpusSource
    config: DedupeConfig
    execution: ExecutionSettings
    session: SessionSettings | None

    @property
    def columns(self) -> tuple[str, str]:
        return (self.config.id_col, self.config.text_col)

    def settings(self) -> dict[str, Any]:
        """The report's ``config``: every setting of the run."""
        session = self.session.to_dict() if self.session is not None else {}
        return {**self.config.to_dict(), **self.execution.to_dict(), **session}

    def facts(
        self, listed: ListedInput, df: DataFrame | None, skipped: int, output: str | None
    ) -> RunFacts:
        """The run's facts (before its read: ``df`` None, a preview for the Python workers)."""
        schema = df.schema if df is not None else None
        cleaning = self.config.strip_boilerplate
        return gather_facts(self.spark, listed, self.columns, schema, skipped, output, cleaning)


def read_input(
    job: RunJob, timer: StageTimer, output: str | None
) -> tuple[DataFrame, list[dict[str, Any]], list[dict[str, Any]], Plan, Callable[[], None] | None]:
    """The run's input listed once (files and footers), its Python workers started early when
    the plan's preview expects Python tasks, its files digested (the run id), then read: the
    input DataFrame, the files digested, those skipped, the plan, and the wait for the
    workers (None: none started)."""
    spark = job.spark
    with timer.stage("input_digest"):
        listed = list_input(spark, job.source)
        preview = job.facts(listed, None, 0, output)
        expected = python_tasks_expected(preview, job.execution)
        workers_started = start_python_workers(spark) if expected else None
        # The run id's digest is of the files listed above, which Spark then reads by their
        # path: a file that lands in between is read but not in the id, so a rerun that sees
        # it gets another id and starts afresh; the other way round, a resumed run would
        # reuse stages without it.
        files = input_files(spark, listed.files) if job.source.path is not None else []
    with timer.stage("read"):
        df, skipped = read_corpus(spark, job.source, job.config.skip_corrupt, job.columns, listed)
        check_columns(df, *job.columns)
        check_duplicates_column(df.columns, job.config.duplicates_column)  # before staging
    plan = Plan(job.facts(listed, df, len(skipped), output), job.execution)
    return df, files, skipped, plan, workers_started


def run_locked(
    job: RunJob, out: OutputDir, overwrite: bool, resume: bool, tables: OutputTables | None
) -> dict[str, Any]:
    """:func:`run` holding OUTPUT's lease."""
    started, timer, spark = time.perf_counter(), StageTimer(), job.spark
    out.prepare(overwrite, clear_staging=False)
    if tables is not None:
        tables.check(spark)
    df, files, skipped, plan, workers_started = read_input(job, timer, out.path)
    staging = run_staging(spark, out, job.source, job.config, resume, files)
    staged = staging.staged
    staged.delete(CHECKPOINT_DIR)  # a killed run's; the components stage checkpoints afresh
    checkpoint = reliable_checkpoint(spark, staged.child(CHECKPOINT_DIR))
    ctx = RunContext(spark, job.config, plan, timer, {}, staging.results, checkpoint)
    write_pairs = lambda pairs: pairs.write.mode("overwrite").parquet(staged.child("pairs"))  # noqa: E731
    result, found = dedupe_steps(ctx, df, write_pairs)
    check_rows_read(footer_rows(df), ctx.counts["input_rows"], job.source.shown)
    keep_column_types(spark)  # deduplicated/ keeps the input's timestamp types
    with timer.stage("write"):
        write_outputs(ctx, result.clusters, result.deduplicated, found, staged, tables)
    result.release()
    if workers_started:
        workers_started()  # long done: the job's Python tasks ran on those workers
    staged.delete(CHECKPOINT_DIR)
    report = {
        **result.report,
        **resume_section(staging),
        "input": job.source.shown,
        "input_format": job.source.format,
        "output": out.path,
        **({"output_tables": tables.names} if tables else {}),
        "plan": plan.section(),
        **run_section(
            spark_section(spark), timer, started, ctx.counts["input_rows"], job.settings(), skipped
        ),
    }
    staged.write_json(REPORT_FILE, report)
    manifest = run_manifest(out, df, job.config, report)
    pause_if_asked("before_commit")
    written = ("clusters", "pairs", "deduplicated") if tables is None else ("pairs",)
    out.commit(staged, manifest, on_cleared=lambda: pause_if_asked("in_commit"), required=written)
    return report


def run_to_tables(job: RunJob, tables: OutputTables) -> dict[str, Any]:
    """:func:`run` with no OUTPUT: the stages kept in Spark's cache (not resumable), the three
    tables written, no ``report.json``. Returns the report."""
    started, timer, spark = time.perf_counter(), StageTimer(), job.spark
    tables.check(spark)
    df, _, skipped, plan, workers_started = read_input(job, timer, None)
    ctx = RunContext(spark, job.config, plan, timer, {}, StageResults(), local_checkpoint)
    result, _ = dedupe_steps(ctx, df)
    check_rows_read(footer_rows(df), ctx.counts["input_rows"], job.source.shown)
    keep_column_types(spark)
    with timer.stage("write"):
        for name in TABLES:
            tables.write(name, getattr(result, name))
    result.release()
    if workers_started:
        workers_started()
    return {
        **result.report,
        "input": job.source.shown,
        "input_format": job.source.format,
        "output": None,
        "output_tables": tables.names,
        "resumed_stages": [],
        "plan": plan.section(),
        **run_section(
            spark_section(spark), timer, started, ctx.counts["input_rows"], job.settings(), skipped
        ),
    }


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
        "config_sha256": config.settings_sha256(),
        "resumed_stages": report["resumed_stages"],
        "counts": report["counts"],
    }


def resume_section(staging: RunStaging) -> dict[str, Any]:
    """The report's run id, ``resumed_stages`` and ``resume`` (why a run started afresh)."""
    return {
        "run_id": staging.run_id,
        "resumed_stages": list(staging.results.resumed),
        "resume": staging.report_section(),
    }
