"""``neardup match BATCH --index DIR OUTPUT``: the batch's documents that are near-duplicates or
exact copies of indexed ones, the index only read (:mod:`neardup_spark.nightly.match`)."""

from __future__ import annotations

import argparse
from typing import Any

from neardup_spark.cli.dedupe import in_session, plan_lines
from neardup_spark.cli.options import (
    METHOD_OPTIONS,
    add_input_format_option,
    add_master_options,
    add_method_options,
    add_output_options,
    add_settings_options,
    settings_from_args,
)
from neardup_spark.config import CLUSTER_RULES
from neardup_spark.errors import EXIT_OK
from neardup_spark.io.corpus import CorpusSource, check_paths_apart
from neardup_spark.nightly.match import run_match
from neardup_spark.nightly.run import check_incremental_config


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "match",
        help="find the documents of a batch that an index already holds (near-duplicates or "
        "copies), without adding them",
    )
    parser.add_argument("input", help="the batch: a file, directory or glob (as dedupe's INPUT)")
    parser.add_argument("output", help="output directory (matches/, deduplicated/, report.json)")
    parser.add_argument(
        "--index",
        metavar="DIR",
        required=True,
        help="the index (built by `neardup dedupe ... --index DIR`); only read, so a match "
        "runs while a night writes",
    )
    parser.add_argument(
        "--cluster-rule",
        choices=CLUSTER_RULES,
        help="the index's rule (default anchored; another than the index's is refused)",
    )
    add_input_format_option(parser)
    add_settings_options(parser, master=False)
    add_method_options(parser)
    add_master_options(parser)
    add_output_options(parser, "match")
    parser.set_defaults(func=run_match_command)


def summary_lines(report: dict[str, Any]) -> list[str]:
    """What ``neardup match`` prints."""
    counts, index = report["counts"], report["index"]
    return [
        f"documents in      {counts.get('input_rows', 0):,}",
        f"matched           {counts['matched_documents']:,} documents, "
        f"{counts['match_rows']:,} matches with indexed documents",
        f"removed           {counts['removed']:,} (what a night would remove against the index)",
        f"exact copies      {counts.get('known_contents', 0):,} contents the index holds",
        f"near-dup pairs    {counts.get('near_pairs', 0):,} verified "
        f"of {counts.get('candidate_pairs', 0):,} candidates",
        f"index             {index.get('documents', 0):,} documents, version {index['version']} "
        "(unchanged)",
        f"wall time         {report['wall_seconds']:.1f} s "
        f"(+ {report.get('spark_start_seconds', 0):.1f} s Spark start-up)",
        f"output            {report['output']}",
        *plan_lines(report),
    ]


def run_match_command(args: argparse.Namespace) -> int:
    job = settings_from_args(
        args, *METHOD_OPTIONS, "cluster_rule", "master", "remote", "lock_timeout"
    )
    config = check_incremental_config(job.dedupe)  # exit 2 before Spark starts
    source = CorpusSource(args.input, None, args.input_format)
    check_paths_apart({"input": args.input, "output": args.output, "index": args.index})
    report = in_session(
        job,
        lambda spark: run_match(
            spark,
            source,
            args.output,
            args.index,
            config,
            overwrite=args.overwrite,
            session=job.session,
            execution=job.execution,
            lock_timeout=job.session.lock_timeout,
        ),
    )
    print("\n".join(summary_lines(report)))
    return EXIT_OK
