"""``neardup decontaminate CORPUS --reference REF OUTPUT``: find benchmark items (questions,
answers, code problems) in a training corpus, and write it without them (docs/decontaminate.md).
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from neardup_spark.cli.options import add_column_options, add_master_options, add_output_options
from neardup_spark.config.decontaminate import (
    DEFAULT_CUT_MARGIN,
    DEFAULT_MAX_NGRAM_DOCS,
    DEFAULT_MIN_CHARS,
    DEFAULT_NGRAM,
    DecontaminateConfig,
)
from neardup_spark.config.settings import SessionSettings
from neardup_spark.errors import EXIT_OK
from neardup_spark.io.corpus import list_input
from neardup_spark.io.lease import DEFAULT_LOCK_TIMEOUT
from neardup_spark.pipeline.decontaminate import load_reference, run_decontaminate
from neardup_spark.report.decontaminate import write_decontamination_report
from neardup_spark.runtime.session import build_session, stop_session

log = logging.getLogger(__name__)


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "decontaminate", help="find benchmark items in a corpus; remove them or cut them out"
    )
    parser.add_argument("input", metavar="CORPUS", help="the corpus (Parquet, JSON lines, ...)")
    parser.add_argument(
        "output", metavar="OUTPUT", help="output directory: matches/, clean/, report.json"
    )
    parser.add_argument(
        "--reference",
        action="append",
        required=True,
        metavar="REF",
        help="benchmark items: a Parquet or JSON lines file (.gz too) or a directory of them, "
        "one benchmark per file; repeat for more",
    )
    parser.add_argument(
        "--reference-id-col",
        "--reference-id",
        dest="reference_id_col",
        default="id",
        help="the reference's id column (default id)",
    )
    parser.add_argument(
        "--reference-fields",
        "--reference-text-cols",
        dest="reference_fields",
        metavar="A,B",
        help="the reference's text columns, joined by a space (default: every string column "
        "but the id)",
    )
    add_column_options(parser)
    parser.add_argument(
        "--ngram",
        type=int,
        default=DEFAULT_NGRAM,
        help=f"words per n-gram (default {DEFAULT_NGRAM}); shorter items are matched whole",
    )
    parser.add_argument(
        "--max-ngram-docs",
        type=int,
        default=DEFAULT_MAX_NGRAM_DOCS,
        metavar="N",
        help="ignore n-grams held by more than N corpus documents, too common to mean a leak "
        f"(default {DEFAULT_MAX_NGRAM_DOCS})",
    )
    parser.add_argument(
        "--cut-spans",
        action="store_true",
        help="cut the matched spans out of the documents instead of removing them",
    )
    parser.add_argument(
        "--cut-margin",
        type=int,
        default=DEFAULT_CUT_MARGIN,
        metavar="CHARS",
        help=f"--cut-spans: characters cut each side of a span (default {DEFAULT_CUT_MARGIN})",
    )
    parser.add_argument(
        "--min-chars",
        type=int,
        default=DEFAULT_MIN_CHARS,
        metavar="CHARS",
        help=f"--cut-spans: drop documents left shorter than this (default {DEFAULT_MIN_CHARS})",
    )
    parser.add_argument(
        "--corpus-pass",
        choices=("driver", "spark"),
        help="run the corpus pass in this process or as Spark jobs (default: in this process "
        "for local Parquet of up to 128 MB in local mode)",
    )
    add_master_options(parser)
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="do not write OUTPUT/report.html (items per benchmark, the largest matches in "
        "context)",
    )
    add_output_options(parser)
    parser.set_defaults(func=run_decontaminate_command)


def config_from_args(args: argparse.Namespace) -> DecontaminateConfig:
    fields = tuple(f.strip() for f in (args.reference_fields or "").split(",") if f.strip())
    return DecontaminateConfig(
        id_col=args.id_col or "id",
        text_col=args.text_col or "text",
        reference_id_col=args.reference_id_col,
        reference_fields=fields,
        ngram=args.ngram,
        max_ngram_docs=args.max_ngram_docs,
        cut_spans=args.cut_spans,
        cut_margin=args.cut_margin,
        min_chars=args.min_chars,
    )


def summary_lines(report: dict[str, Any]) -> list[str]:
    """What ``neardup decontaminate`` prints."""
    c = report["counts"]
    return [
        f"documents         {c['documents']:,} ({c['contaminated']:,} contaminated)",
        f"removed           {c['removed']:,} (cut: {c['cut']:,})",
        f"items found       {c['items_found']:,} of {c['items']:,}",
        f"wall time         {report['wall_seconds']:.1f} s",
        f"output            {report['output']}",
    ]


def run_decontaminate_command(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    # Bad input found before Spark starts: the reference, a missing corpus.
    load_reference(args.reference, config)
    list_input(None, args.input)
    started = time.perf_counter()
    spark = build_session(SessionSettings(master=args.master, remote=args.remote))
    log.info("Spark started in %.1f s", time.perf_counter() - started)
    try:
        report = run_decontaminate(
            spark,
            args.input,
            args.reference,
            args.output,
            config,
            overwrite=args.overwrite,
            where=args.corpus_pass,
            lock_timeout=DEFAULT_LOCK_TIMEOUT if args.lock_timeout is None else args.lock_timeout,
        )
    finally:
        stop_session(spark)
    print("\n".join(summary_lines(report)))
    if not args.no_report:
        try:
            path = write_decontamination_report(report["output"], args.input)
        except Exception as exc:  # the run succeeded; a report problem must not fail it
            log.warning("report.html not written (%s)", exc)
        else:
            print(f"report            {path}")
    return EXIT_OK
