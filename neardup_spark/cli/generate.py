"""``neardup generate DIR``: a synthetic corpus with planted near-duplicates."""

from __future__ import annotations

import argparse
from typing import Any

from neardup_spark.errors import EXIT_OK
from neardup_spark.quality.generate import write_corpus
from neardup_spark.quality.templates import write_template_corpus


def register(sub: Any) -> None:
    parser = sub.add_parser("generate", help="write a synthetic corpus with planted duplicates")
    parser.add_argument("directory", help="writes DIRECTORY/corpus and DIRECTORY/truth")
    parser.add_argument("--docs", type=int, default=5000, help="number of documents")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mean-words", type=int, help="mean document length (default 500)")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument(
        "--templates",
        action="store_true",
        help="site-template corpus instead: bodies in ~60 sites' page templates (one per 180 "
        "pages), some articles on two sites; writes corpus/, truth/ (the cross-site pairs) "
        "and lines/ (each page's body and template lines); --mean-words default 300",
    )
    parser.set_defaults(func=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    if args.templates:
        return run_templates(args)
    summary = write_corpus(
        args.directory,
        args.docs,
        seed=args.seed,
        mean_words=args.mean_words or 500,
        overwrite=args.overwrite,
    )
    print(
        f"wrote {summary['docs']:,} documents to {args.directory}/corpus and "
        f"{summary['truth_pairs']:,} planted pairs to {args.directory}/truth"
    )
    return EXIT_OK


def run_templates(args: argparse.Namespace) -> int:
    summary = write_template_corpus(
        args.directory,
        args.docs,
        seed=args.seed,
        mean_words=args.mean_words or 300,
        overwrite=args.overwrite,
    )
    print(
        f"wrote {summary['docs']:,} pages of {summary['sites']:,} sites to {args.directory}/corpus "
        f"({summary['template_lines']:,} template lines in {args.directory}/lines) and "
        f"{summary['truth_pairs']:,} cross-site copies to {args.directory}/truth"
    )
    return EXIT_OK
