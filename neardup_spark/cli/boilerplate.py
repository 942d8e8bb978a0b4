"""``neardup boilerplate INPUT OUTPUT``: remove the lines (or paragraphs) a site repeats on its
pages; OUTPUT is the cleaned corpus, read by ``neardup dedupe OUTPUT ...`` as it is.
``jobs/boilerplate.py`` takes the same options."""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

from neardup_spark.cli.options import (
    PREFER_NAMES,
    add_column_options,
    add_output_options,
    add_settings_options,
)
from neardup_spark.config import BOILERPLATE_MODES, JobSettings, load_settings
from neardup_spark.errors import EXIT_OK
from neardup_spark.kernels.boilerplate import UNITS
from neardup_spark.pipeline.boilerplate import run_boilerplate
from neardup_spark.runtime.session import build_session, stop_session

log = logging.getLogger(__name__)

# Options of this command that are ``boilerplate.*`` settings.
BOILERPLATE_OPTIONS = ("unit", "mode", "min_docs", "min_words", "group_col", "prefer")


def add_boilerplate_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``neardup boilerplate`` and ``jobs/boilerplate.py``."""
    parser.add_argument("input", help="Parquet file or directory (any path Spark reads)")
    parser.add_argument(
        "output",
        help="output directory: the cleaned corpus (Parquet data files), _report.json, _SUCCESS",
    )
    add_settings_options(parser)
    add_column_options(parser)
    parser.add_argument("--unit", choices=UNITS, help="line, or blank-line separated paragraph")
    parser.add_argument(
        "--mode",
        choices=BOILERPLATE_MODES,
        help="template: remove every occurrence of a unit found in >= --min-docs documents; "
        "repeats: keep only each unit's first occurrence (default template)",
    )
    parser.add_argument(
        "--min-docs", type=int, metavar="N", help="template: documents that make a unit boilerplate"
    )
    parser.add_argument(
        "--min-words",
        type=int,
        metavar="N",
        help="units with fewer words (CJK: characters) are never removed",
    )
    parser.add_argument(
        "--group-col",
        metavar="COL",
        help="count documents within each value of COL (e.g. a host or site column; named as "
        "the input names it)",
    )
    parser.add_argument(
        "--prefer",
        metavar='"COL [asc|desc][, COL ...]"',
        help="repeats: the first occurrence is the first document in this order (nulls last, "
        f"then the smallest id; default: the smallest id); {PREFER_NAMES}",
    )
    add_output_options(parser)
    parser.add_argument(
        "--skip-corrupt",
        action="store_true",
        default=None,
        help="skip whole the input files that cannot be read to their end (cut short, damaged) "
        "and leave out malformed records, each listed in _report.json, instead of exit 2",
    )


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "boilerplate", help="remove the lines a site repeats on every page (navigation, footers)"
    )
    add_boilerplate_options(parser)
    parser.set_defaults(func=run_boilerplate_command)


def job_settings(args: argparse.Namespace) -> JobSettings:
    """``--config``, ``--set``, then this command's options, layered as for dedupe."""
    options = {name: getattr(args, name) for name in ("id_col", "text_col", "master", "remote")}
    options["lock_timeout"] = args.lock_timeout
    options["skip_corrupt"] = args.skip_corrupt
    nested = {name: getattr(args, name) for name in BOILERPLATE_OPTIONS}
    if any(v is not None for v in nested.values()):
        options["boilerplate"] = {k: v for k, v in nested.items() if v is not None}
    return load_settings(args.config, args.overrides, options)


def summary_lines(report: dict[str, Any]) -> list[str]:
    """What ``neardup boilerplate`` prints."""
    counts = report["counts"]
    settings = report["settings"]
    chars, removed = counts["chars"], counts["chars_removed"]
    share = f"{100 * removed / chars:.1f} %" if chars else "-"
    rule = (
        f"in >= {settings['min_docs']} documents"
        if settings["mode"] == "template"
        else "repeated after their first occurrence"
    )
    within = f" of one {settings['group_col']}" if settings.get("group_col") else ""
    return [
        f"documents         {counts['documents']:,} ({counts['documents_changed']:,} changed, "
        f"{counts['documents_emptied']:,} all boilerplate)",
        f"boilerplate       {counts['boilerplate_units']:,} distinct {settings['unit']}s {rule}"
        f"{within}",
        f"units removed     {counts['units_removed']:,} of {counts['units']:,}",
        f"chars removed     {removed:,} of {chars:,} ({share})",
        f"wall time         {report['wall_seconds']:.1f} s "
        f"(+ {report.get('spark_start_seconds', 0):.1f} s Spark start-up)",
        f"output            {report['output']}",
    ]


def run_boilerplate_command(args: argparse.Namespace) -> int:
    job = job_settings(args)
    log.info("config: %s", job.to_dict())
    started = time.perf_counter()
    spark = build_session(job.session)
    spark_start = time.perf_counter() - started
    try:
        report = run_boilerplate(
            spark,
            args.input,
            args.output,
            job.dedupe,
            overwrite=args.overwrite,
            session=job.session,
            lock_timeout=job.session.lock_timeout,
        )
    finally:
        stop_session(spark)
    report["spark_start_seconds"] = round(spark_start, 2)
    print("\n".join(summary_lines(report)))
    return EXIT_OK
