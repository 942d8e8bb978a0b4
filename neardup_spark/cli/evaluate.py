"""``neardup evaluate OUTPUT``: precision, recall and ARI of a run against planted truth, an
exact oracle, and the labelled sets."""

from __future__ import annotations

import argparse
import json
from typing import Any

from neardup_spark.errors import EXIT_OK
from neardup_spark.quality.evaluate import DEFAULT_ORACLE_MAX_DOCS, evaluate
from neardup_spark.quality.evaluation_tables import format_table
from neardup_spark.quality.labelled import LABELLED_ENV


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "evaluate", help="precision, recall and ARI of a run against planted truth or an oracle"
    )
    add_evaluate_options(parser)
    parser.set_defaults(func=run_evaluate)


def add_evaluate_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``neardup evaluate``."""
    parser.add_argument("output", help="OUTPUT of `neardup dedupe` (clusters/, pairs/, report)")
    parser.add_argument("--truth", help="truth Parquet of `neardup generate` (DIR/truth or DIR)")
    parser.add_argument("--corpus", help="the input corpus (DIR/corpus or DIR): exact oracle")
    parser.add_argument("--threshold", type=float, help="default: the run's config.threshold")
    parser.add_argument("--oracle-max-docs", type=int, default=DEFAULT_ORACLE_MAX_DOCS, metavar="N")
    parser.add_argument(
        "--labelled",
        nargs="?",
        const="",
        default=None,
        metavar="DIR",
        help=f"also score the labelled sets (DIR default: ${LABELLED_ENV} or "
        "../shared/data/labelled)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the full result as JSON")


def run_evaluate(args: argparse.Namespace) -> int:
    """Evaluate as ``args`` say; print the table (and write JSON with ``--json``)."""
    result = evaluate(
        args.output,
        truth=args.truth,
        corpus=args.corpus,
        threshold=args.threshold,
        oracle_max_docs=args.oracle_max_docs,
        labelled=args.labelled is not None,
        labelled_dir=args.labelled or None,
    )
    print(format_table(result), end="")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
            handle.write("\n")
    return EXIT_OK
