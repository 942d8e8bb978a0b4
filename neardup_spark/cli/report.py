"""``neardup report OUTPUT``: write OUTPUT/report.html for a finished run."""

from __future__ import annotations

import argparse
from typing import Any

from neardup_spark.errors import EXIT_OK
from neardup_spark.extras import require_extra
from neardup_spark.report.data import MAX_MEMBERS, TOP_CLUSTERS
from neardup_spark.report.html import write_report


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "report", help="write OUTPUT/report.html: figures and the largest clusters of a run"
    )
    add_report_options(parser)
    parser.set_defaults(func=run_report)


def add_report_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``neardup report``."""
    parser.add_argument("output", help="OUTPUT of `neardup dedupe`; writes OUTPUT/report.html")
    parser.add_argument(
        "--input",
        dest="input_path",
        metavar="CORPUS",
        help="the corpus, for text snippets (default: the input recorded in report.json)",
    )
    parser.add_argument(
        "--top", type=int, default=TOP_CLUSTERS, help="largest clusters to show (default 10)"
    )
    parser.add_argument(
        "--max-members",
        type=int,
        default=MAX_MEMBERS,
        help=f"members shown per cluster (default {MAX_MEMBERS})",
    )


def run_report(args: argparse.Namespace) -> int:
    """Write the report as ``args`` say and print its path."""
    require_extra("report", "neardup report")
    path = write_report(args.output, args.input_path, top=args.top, max_members=args.max_members)
    print(path)
    return EXIT_OK
