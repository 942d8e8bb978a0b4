"""``neardup generate DIR``: a synthetic corpus with planted near-duplicates."""

from __future__ import annotations

import argparse
from typing import Any

from neardup_spark.errors import EXIT_OK
from neardup_spark.quality.generate import write_corpus


def register(sub: Any) -> None:
    parser = sub.add_parser("generate", help="write a synthetic corpus with planted duplicates")
    parser.add_argument("directory", help="writes DIRECTORY/corpus and DIRECTORY/truth")
    parser.add_argument("--docs", type=int, default=5000, help="number of documents")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mean-words", type=int, default=500, help="mean document length")
    parser.add_argument("--overwrite", action="store_true")
    parser.set_defaults(func=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    summary = write_corpus(
        args.directory,
        args.docs,
        seed=args.seed,
        mean_words=args.mean_words,
        overwrite=args.overwrite,
    )
    print(
        f"wrote {summary['docs']:,} documents to {args.directory}/corpus and "
        f"{summary['truth_pairs']:,} planted pairs to {args.directory}/truth"
    )
    return EXIT_OK
