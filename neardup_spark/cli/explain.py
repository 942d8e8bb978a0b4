"""``neardup explain INPUT ID_A ID_B``: why the job would or would not pair two documents."""

from __future__ import annotations

import argparse
import json
from typing import Any

from neardup_spark.cli.options import (
    METHOD_OPTIONS,
    add_input_format_option,
    add_method_options,
    add_settings_options,
    settings_from_args,
)
from neardup_spark.errors import EXIT_OK
from neardup_spark.quality.explain import SHARED_EXAMPLES, explain, format_explanation


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "explain", help="why the job would or would not pair two documents (same options)"
    )
    add_explain_options(parser)
    parser.set_defaults(func=run_explain)


def add_explain_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``neardup explain``: the input, two ids, and dedupe's settings."""
    parser.add_argument(
        "input",
        help="the corpus: a file or directory of Parquet, JSON lines, CSV or ORC, as for "
        "dedupe (read without Spark)",
    )
    parser.add_argument("id_a", help="id of the first document")
    parser.add_argument("id_b", help="id of the second document")
    add_input_format_option(parser)
    add_settings_options(parser, master=False)
    add_method_options(parser)
    parser.add_argument(
        "--shared", type=int, default=SHARED_EXAMPLES, help="shared shingles to list (default 5)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run_explain(args: argparse.Namespace) -> int:
    """Explain the pair as ``args`` say and print it; a user error is exit code 2."""
    config = settings_from_args(args, *METHOD_OPTIONS).dedupe
    result = explain(
        args.input,
        args.id_a,
        args.id_b,
        config,
        shared_examples=args.shared,
        input_format=args.input_format,
    )
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(format_explanation(result), end="")
    return EXIT_OK
