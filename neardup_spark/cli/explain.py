"""``neardup explain INPUT ID_A ID_B``: why the job would or would not pair two documents;
``neardup explain INPUT ID --output OUTPUT``: why that run removed a document (its kept
document and their Jaccard) or kept it."""

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
from neardup_spark.errors import EXIT_OK, UserError
from neardup_spark.io.finished import config_of_run
from neardup_spark.quality.explain import SHARED_EXAMPLES, explain, format_explanation
from neardup_spark.quality.removal import format_removal, removal


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
    parser.add_argument(
        "id_b",
        nargs="?",
        help="id of the second document; left out with --output: the first one's kept document",
    )
    add_input_format_option(parser)
    add_settings_options(parser, master=False)
    add_method_options(parser)
    parser.add_argument(
        "--shared", type=int, default=SHARED_EXAMPLES, help="shared shingles to list (default 5)"
    )
    parser.add_argument(
        "--output",
        metavar="OUTPUT",
        help="the OUTPUT of a finished dedupe of INPUT: say why it removed (or kept) ID_A, its "
        "kept document and their Jaccard, computed with that run's settings (its report.json)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run_explain(args: argparse.Namespace) -> int:
    """Explain the pair as ``args`` say and print it; a user error is exit code 2."""
    if args.output is None and args.id_b is None:
        raise UserError(
            "give two ids to explain a pair, or one id and --output OUTPUT (a finished run) to "
            "explain why that run removed it"
        )
    found = removal(args.output, args.id_a) if args.output is not None else None
    config = settings_from_args(args, *METHOD_OPTIONS).dedupe
    if found is not None:  # the run's own settings, its input columns read as it read them
        config = config_of_run(args.output)
    other = args.id_b
    if other is None and found is not None and found["removed"]:
        other = found["cluster_id"]  # the pair that justified its removal
    result: dict[str, Any] = {}
    if other is not None:  # (a kept document and no second id: no pair to explain)
        result = explain(
            args.input,
            args.id_a,
            other,
            config,
            shared_examples=args.shared,
            input_format=args.input_format,
        )
    if found is not None:
        result["removal"] = found
    if args.json:
        print(json.dumps(result, indent=2, default=str))
        return EXIT_OK
    if found is not None:
        print(format_removal(found), end="\n" if "ids" in result else "")
    if "ids" in result:
        print(format_explanation(result), end="")
    return EXIT_OK
