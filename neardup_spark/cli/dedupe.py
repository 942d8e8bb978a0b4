"""``neardup dedupe INPUT OUTPUT`` (and ``--index DIR`` for nightly runs); ``jobs/dedupe.py``
takes the same options."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from neardup_spark.cli.options import (
    METHOD_OPTIONS,
    PREFER_NAMES,
    add_input_format_option,
    add_master_options,
    add_method_options,
    add_output_options,
    add_settings_options,
    settings_from_args,
)
from neardup_spark.cli.progress import StageProgress, progress_of
from neardup_spark.config import CLUSTER_RULES, REPRESENTATIVE_RULES, JobSettings
from neardup_spark.errors import EXIT_OK, UserError
from neardup_spark.extras import install_hint, missing_modules
from neardup_spark.io.corpus import CorpusSource, check_paths_apart
from neardup_spark.nightly.run import check_incremental_config, run_incremental
from neardup_spark.pipeline.dedupe import run
from neardup_spark.pipeline.tables import OutputTables
from neardup_spark.report.html import write_report
from neardup_spark.runtime.session import build_session, stop_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


def add_dedupe_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``neardup dedupe`` and ``jobs/dedupe.py``."""
    parser.add_argument(
        "input",
        nargs="?",
        help="the corpus: a file, directory or glob (any path Spark reads) in Parquet, JSON "
        "lines, ORC or CSV; or give --input-table",
    )
    parser.add_argument(
        "output",
        nargs="?",
        help="output directory (clusters/, pairs/, deduplicated/, report.json); with "
        "--output-table, optional: report.json only",
    )
    add_input_format_option(parser)
    parser.add_argument(
        "--input-table",
        metavar="NAME",
        help="read a table of the session's catalog instead of INPUT (e.g. db.crawl)",
    )
    add_settings_options(parser, master=False)
    add_method_options(parser)
    add_keep_options(parser)
    add_master_options(parser)
    add_output_options(parser)
    parser.add_argument(
        "--output-table",
        metavar="PREFIX",
        help="write the outputs as tables of the session's catalog, PREFIX_clusters, "
        "PREFIX_pairs and PREFIX_deduplicated, in its default format (Delta on Databricks); "
        "OUTPUT then holds report.json only, and may be left out (docs/output.md)",
    )
    parser.add_argument(
        "--skip-corrupt",
        action="store_true",
        default=None,
        help="skip whole the input files that cannot be read to their end (cut short, damaged) "
        "and leave out malformed records, each listed in report.json, instead of exit 2",
    )
    parser.add_argument(
        "--strip-boilerplate",
        action="store_true",
        default=None,
        help="remove boilerplate lines (navigation, footers: `neardup boilerplate`, settings "
        "--set boilerplate.*) before fingerprinting; deduplicated/ keeps the rows as they were",
    )
    parser.add_argument(
        "--explain-plan",
        action="store_true",
        help="say where each step runs (this process, or Spark tasks and jobs) and why, as the "
        "run decides it (report.json keeps it under plan; --set plan.STEP=WHERE gives a "
        "choice beforehand)",
    )
    parser.add_argument(
        "--no-resume",
        action="store_true",
        help="start afresh: do not read back the stages an unfinished run of the same input "
        "and config kept under OUTPUT/_staging",
    )
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="do not write OUTPUT/report.html (figures and the largest clusters)",
    )
    add_index_options(parser)


def add_index_options(parser: argparse.ArgumentParser) -> None:
    """``--index DIR`` and ``--index-buckets N``: a nightly run against an index."""
    parser.add_argument(
        "--index",
        metavar="DIR",
        help="nightly run: dedupe INPUT (the new documents) against the index at DIR (created "
        "when absent) and add it; OUTPUT gets the batch's clusters/, pairs/, changed_clusters/, "
        "deduplicated/ (minhash only; no report.html)",
    )
    parser.add_argument(
        "--index-buckets",
        type=int,
        metavar="N",
        help="most parts a segment's texts are cut into, one per 250,000 (default 32; the "
        "probe scans parts in parallel); an existing index keeps its own "
        "(`neardup index compact DIR --buckets N` changes it)",
    )


def add_keep_options(parser: argparse.ArgumentParser) -> None:
    """What a run keeps of each group of near-duplicates."""
    parser.add_argument(
        "--representative",
        choices=REPRESENTATIVE_RULES,
        help="which member represents a cluster (default smallest_id)",
    )
    parser.add_argument(
        "--cluster-rule",
        choices=CLUSTER_RULES,
        help="anchored: remove a document only in favour of a kept document it is verified "
        "near (no two kept documents near); components: clusters are the connected "
        "components of the pairs, removal transitive (default anchored)",
    )
    parser.add_argument(
        "--prefer",
        metavar='"COL [asc|desc], ..."',
        help="keep policy: each cluster keeps its document first by these input columns, e.g. "
        '"quality desc" or "fetch_date asc, source_rank desc" (nulls last, ties to the smallest '
        f"id); clusters/ and deduplicated/ follow it; {PREFER_NAMES}. Not with --index",
    )


def register(sub: Any) -> None:
    parser = sub.add_parser("dedupe", help="find near-duplicate clusters in a Parquet corpus")
    add_dedupe_options(parser)
    parser.set_defaults(func=run_dedupe)


def job_settings(args: argparse.Namespace) -> JobSettings:
    return settings_from_args(
        args,
        *METHOD_OPTIONS,
        "representative",
        "cluster_rule",
        "prefer",
        "master",
        "remote",
        "skip_corrupt",
        "strip_boilerplate",
        "lock_timeout",
    )


def summary_lines(report: dict[str, Any]) -> list[str]:
    """What ``neardup dedupe`` prints."""
    counts = report["counts"]
    stripped = report.get("boilerplate")
    removed = (
        [
            f"boilerplate       {stripped['counts']['units_removed']:,} units removed from "
            f"{stripped['counts']['documents_changed']:,} documents "
            f"({stripped['counts']['boilerplate_units']:,} distinct)"
        ]
        if stripped
        else []
    )
    return [
        f"documents in      {counts['input_rows']:,}",
        *removed,
        f"clusters          {counts['clusters']:,}",
        f"duplicates removed {counts['removed']:,}",
        f"exact copies      {counts['exact_copies']:,}",
        f"near-dup pairs    {counts['near_pairs']:,} verified "
        f"of {counts['candidate_pairs']:,} candidates",
        f"wall time         {report['wall_seconds']:.1f} s "
        f"(+ {report.get('spark_start_seconds', 0):.1f} s Spark start-up)",
        f"throughput        {report['docs_per_second']:,.0f} docs/s",
        *([f"output            {report['output']}"] if report.get("output") else []),
        *(
            [f"tables            {', '.join(report['output_tables'])}"]
            if report.get("output_tables")
            else []
        ),
        *resume_lines(report),
        *plan_lines(report),
    ]


def plan_lines(report: dict[str, Any]) -> list[str]:
    """Where the run's steps ran (``--explain-plan`` says why, as each is decided)."""
    steps = report.get("plan") or {}
    chosen = ", ".join(f"{step} {choice['where']}" for step, choice in steps.items())
    return [f"plan              {chosen}"] if chosen else []


def corpus_source(args: argparse.Namespace) -> CorpusSource:
    """INPUT, or ``--input-table``, with ``--input-format``; INPUT, OUTPUT and the index must
    not overlap (checked here too, before Spark starts)."""
    if args.input_table and args.input is not None and args.output is None:
        args.input, args.output = None, args.input  # --input-table T OUTPUT: one positional
    if args.output is None and not args.output_table:
        raise UserError("give OUTPUT (a directory), or --output-table PREFIX")
    source = CorpusSource(args.input, args.input_table, args.input_format)
    paths = {**({"output": args.output} if args.output else {})}
    paths.update({"index": args.index} if args.index else {})
    check_paths_apart({**paths, **({"input": source.path} if source.path else {})})
    return source


def resume_lines(report: dict[str, Any]) -> list[str]:
    """What ``neardup dedupe`` says about an earlier, unfinished run of the same OUTPUT."""
    lines = [
        f"started afresh    {why}" for why in report.get("resume", {}).get("started_afresh", [])
    ]
    if report.get("resumed_stages"):
        stages = ", ".join(report["resumed_stages"])
        lines.append(f"resumed           {stages} (kept by an unfinished run)")
    return lines


def run_dedupe(args: argparse.Namespace) -> int:
    job = job_settings(args)
    if args.explain_plan:
        explain_plan()
    source = corpus_source(args)  # exit 2 before Spark starts
    if args.index:
        if args.no_resume:
            raise UserError("--no-resume is for full runs; a nightly run completes its batch")
        if args.output_table:
            raise UserError("--output-table is for full runs; a nightly run writes OUTPUT")
        return run_nightly(args, job, source)
    tables = OutputTables(args.output_table, args.overwrite) if args.output_table else None
    if args.index_buckets is not None:
        raise UserError("--index-buckets needs --index DIR")
    report = in_session(
        job,
        lambda spark: run(
            spark,
            source,
            args.output,
            job.dedupe,
            overwrite=args.overwrite,
            session=job.session,
            resume=not args.no_resume,
            execution=job.execution,
            lock_timeout=job.session.lock_timeout,
            tables=tables,
        ),
    )
    print("\n".join(summary_lines(report)))
    if not args.no_report and args.output is not None and tables is None:
        write_html_report(args.output, args.input)
    return EXIT_OK


def write_html_report(output: str, input_path: str) -> None:
    """``report.html`` next to a finished run; a problem is only a warning (the run succeeded).
    Without the report extra, one line says how to get it. (matplotlib is imported when the
    first figure is drawn, see report/figures.py.)"""
    if missing_modules("report"):
        print(
            f"report            report.json only; for report.html: {install_hint('report')}, "
            f"then neardup report {output}"
        )
        return
    try:
        path = write_report(output, input_path)
    except Exception as exc:  # the run succeeded; a report problem must not fail it
        log.warning("report not written (%s); try `neardup report %s`", exc, output)
    else:
        print(f"report            {path}")


def nightly_summary_lines(report: dict[str, Any]) -> list[str]:
    """What ``neardup dedupe NEW OUTPUT --index DIR`` prints."""
    counts = report.get("counts", {})
    index = report.get("index", {})
    lines = [
        f"new documents     {counts.get('input_rows', 0):,} "
        f"({counts.get('replaced', 0):,} re-crawled)",
        f"kept (new)        {counts.get('deduplicated', 0):,}",
        f"seen before       {counts.get('joined_existing', 0):,} joined indexed clusters "
        f"({counts.get('touched_clusters', 0):,} clusters touched)",
        f"exact copies      {counts.get('exact_copies', 0):,}",
        f"near-dup pairs    {counts.get('near_pairs', 0):,} verified "
        f"of {counts.get('candidate_pairs', 0):,} candidates",
        f"clusters merged   {counts.get('merged_clusters', 0):,}",
        f"index             {index.get('documents', 0):,} documents, "
        f"{index.get('clusters', 0):,} clusters, version {index.get('version')}",
        f"wall time         {report.get('wall_seconds', 0):.1f} s "
        f"(+ {report.get('spark_start_seconds', 0):.1f} s Spark start-up)",
        f"output            {report.get('output')}",
        *plan_lines(report),
    ]
    if report.get("already_committed"):
        lines.insert(0, f"batch {report.get('run_id')} was already indexed: nothing added")
    return lines


def run_nightly(args: argparse.Namespace, job: JobSettings, source: CorpusSource) -> int:
    """``neardup dedupe NEW OUTPUT --index DIR``: a nightly run (no report.html)."""
    config = check_incremental_config(job.dedupe)  # unsupported: exit 2 before Spark starts
    if source.table is not None:
        raise UserError(
            "--index needs an input path: a batch is identified by its files "
            "(give the table's location as INPUT)"
        )
    report = in_session(
        job,
        lambda spark: run_incremental(
            spark,
            source,
            args.output,
            args.index,
            config,
            overwrite=args.overwrite,
            buckets=args.index_buckets,
            session=job.session,
            execution=job.execution,
            lock_timeout=job.session.lock_timeout,
        ),
    )
    print("\n".join(nightly_summary_lines(report)))
    return EXIT_OK


def explain_plan() -> None:
    """Each step's choice and why on stderr as the run makes it (``plan: STEP: WHERE (why)``)."""
    explained = logging.getLogger("neardup_spark.plan")
    explained.setLevel(logging.INFO)
    if not any(getattr(h, "name", "") == "explain-plan" for h in explained.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.set_name("explain-plan")
        handler.setFormatter(logging.Formatter("plan: %(message)s"))
        explained.addHandler(handler)


def in_session(job: JobSettings, runs: Callable[[SparkSession], dict[str, Any]]) -> dict[str, Any]:
    """``runs`` in a session built for ``job`` (stopped after it), its stages shown as they
    progress; its report, with the session's start-up seconds."""
    log.info("config: %s", job.to_dict())
    started = time.perf_counter()
    spark = build_session(job.session)
    spark_start = time.perf_counter() - started
    try:
        with StageProgress(progress_of(spark)):
            report = runs(spark)
    finally:
        stop_session(spark)
    report["spark_start_seconds"] = round(spark_start, 2)
    return report
