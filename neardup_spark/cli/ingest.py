"""``neardup ingest WARC... OUTPUT``: WARC/WET records into the Parquet corpus dedupe reads;
``jobs/ingest_warc.py`` takes the same options."""

from __future__ import annotations

import argparse
from typing import Any

from neardup_spark.cli.options import add_master_options, add_output_options, add_ui_option
from neardup_spark.config import load_session_settings
from neardup_spark.errors import EXIT_OK
from neardup_spark.extras import require_extra
from neardup_spark.ingest.options import (
    DEFAULT_RECORD_TYPES,
    EXTRACT_MODES,
    HTML_TYPES,
    RECORD_TYPES,
    IngestOptions,
)
from neardup_spark.runtime.session import build_session, stop_session


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "ingest", help="read WARC/WET files into the Parquet corpus dedupe reads"
    )
    add_ingest_options(parser)
    parser.set_defaults(func=run_ingest)


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def add_ingest_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``neardup ingest`` and ``jobs/ingest_warc.py``."""
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="WARC_PATH",
        help="WARC/WET file (gzip, zstd, lz4 or plain), directory (searched recursively for "
        "*.warc* and *.wet*) or glob; local, file://, s3://, gs:// or hdfs://",
    )
    parser.add_argument(
        "output",
        help="the corpus to write: Parquet files at OUTPUT (with _skipped/, _summary.json); "
        "any path Spark writes",
    )
    parser.add_argument(
        "--extract",
        choices=EXTRACT_MODES,
        default="main",
        help="main: the main content (drops navigation, sidebars, footers); text: all visible "
        "text (default main)",
    )
    parser.add_argument(
        "--record-types",
        type=_csv,
        default=DEFAULT_RECORD_TYPES,
        metavar="TYPES",
        help=f"comma-separated WARC types to keep, of {', '.join(RECORD_TYPES)} "
        f"(default {','.join(DEFAULT_RECORD_TYPES)})",
    )
    parser.add_argument(
        "--content-types",
        type=_csv,
        default=HTML_TYPES,
        metavar="TYPES",
        help=f"comma-separated content types of response/resource records to keep "
        f"(default {','.join(HTML_TYPES)}; add text/plain to keep plain text as is)",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="YAML settings (its spark: mapping, master, arrow_batch_size) (repeatable)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="e.g. --set spark.executor.memory=4g (repeatable)",
    )
    add_ui_option(parser)
    add_master_options(parser)
    add_output_options(parser, "ingest")


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """What ``neardup ingest`` prints."""
    skipped = ", ".join(f"{k} {v:,}" for k, v in summary["skipped"].items() if v) or "none"
    decoding = summary["decoding"]
    return [
        f"files             {summary['files']:,} ({summary['input_bytes']:,} bytes)",
        f"records           {summary['records']:,} "
        f"({', '.join(f'{k} {v:,}' for k, v in summary['records_by_type'].items())})",
        f"documents         {summary['documents']:,} (extract {summary['options']['extract']}; "
        f"{summary['empty_texts']:,} with empty text)",
        f"skipped           {skipped}",
        f"charset fallback  {decoding['documents_with_replacements']:,} documents, "
        f"{decoding['replaced_chars']:,} characters replaced",
        f"wall time         {summary['wall_seconds']:.1f} s",
        f"output            {summary['output']['corpus']} "
        f"(then: neardup dedupe {summary['output']['corpus']} OUT)",
    ]


def run_ingest(args: argparse.Namespace) -> int:
    """``neardup ingest``: build the session from --config/--set/--master, ingest, print."""
    require_extra("ingest", "neardup ingest")
    # Imported here: the WARC readers are the ingest extra, not the core every command has.
    from neardup_spark.ingest.job import ingest, list_inputs

    session = load_session_settings(
        args.config,
        args.overrides,
        {"master": args.master, "remote": args.remote, "lock_timeout": args.lock_timeout},
    )
    # Bad options and missing inputs fail before Spark starts.
    IngestOptions(
        extract=args.extract,
        record_types=tuple(args.record_types),
        content_types=tuple(args.content_types),
    ).validate()
    list_inputs(args.paths, args.output)
    spark = build_session(session, app_name="neardup-ingest")
    try:
        summary = ingest(
            spark,
            list(args.paths),
            args.output,
            extract=args.extract,
            overwrite=args.overwrite,
            record_types=args.record_types,
            content_types=args.content_types,
            batch_rows=session.arrow_batch_size,
            lock_timeout=session.lock_timeout,
        )
    finally:
        stop_session(spark)
    print("\n".join(summary_lines(summary)))
    return EXIT_OK
