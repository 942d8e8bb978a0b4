"""``neardup bench``: the benchmark (main table, then the nightly case); ``bench-row`` is one
row's child process."""

from __future__ import annotations

import argparse
from dataclasses import fields
from typing import Any

from neardup_spark.bench.settings import (
    CHILD_ROWS,
    DEFAULT_DATASKETCH_MAX_DOCS,
    DEFAULT_DOCS,
    DEFAULT_MASTER,
    DEFAULT_MLLIB_MAX_DOCS,
    DEFAULT_NEW,
    DEFAULT_SEED,
    DEFAULT_SERIES_INDEX,
    DEFAULT_SERIES_NIGHTS,
    DEFAULT_SIZES,
    DEFAULT_THRESHOLD,
    DEFAULT_TIMEOUT,
    DEFAULT_VARIANT_MAX_DOCS,
    DEFAULT_WORKDIR,
    ROWS,
    VARIANT_ROWS,
    BenchSettings,
)
from neardup_spark.errors import EXIT_OK
from neardup_spark.extras import require_extra
from neardup_spark.runtime import preflight


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "bench", help="benchmark against the hashing floor, Spark MLlib and datasketch"
    )
    add_bench_options(parser)
    parser.set_defaults(func=run_bench)
    row = sub.add_parser("bench-row")  # no help: not listed
    row.add_argument("row", choices=CHILD_ROWS)
    row.add_argument("corpus")
    row.add_argument("output")
    row.add_argument("--master", default=DEFAULT_MASTER)
    row.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    row.set_defaults(func=run_bench_row)


def run_bench_row(args: argparse.Namespace) -> int:
    from neardup_spark.bench.children import run_child_row  # deferred: imports the bench's peers

    run_child_row(args.row, args.corpus, args.output, args.master, args.threshold)
    return EXIT_OK


def _docs_list(text: str) -> list[int]:
    try:
        sizes = sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--docs expects integers like 10000,30000: {text!r}"
        ) from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError(f"--docs needs positive sizes, got {text!r}")
    return sizes


def _rows_list(text: str) -> list[str]:
    rows = [part.strip() for part in text.split(",") if part.strip()]
    known = (*ROWS, *VARIANT_ROWS)
    unknown = [r for r in rows if r not in known]
    if unknown or not rows:
        raise argparse.ArgumentTypeError(
            f"unknown row(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(known)}"
        )
    return [r for r in known if r in rows]


def add_bench_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``neardup bench``."""
    parser.add_argument(
        "--docs",
        type=_docs_list,
        default=_docs_list(DEFAULT_DOCS),
        metavar="N,N,...",
        help=f"corpus sizes (default {DEFAULT_DOCS}); 1000000 is an optional size "
        "(spark-mllib and datasketch are skipped above their --*-max-docs)",
    )
    parser.add_argument(
        "--rows",
        type=_rows_list,
        default=list(ROWS),
        metavar="ROW,...",
        help=f"rows to run (default: {','.join(ROWS)}); also {','.join(VARIANT_ROWS)}: "
        "neardup-minhash run another way, which must give its clusters and pairs",
    )
    parser.add_argument(
        "--workdir",
        default=DEFAULT_WORKDIR,
        help=f"corpora, outputs and logs (default {DEFAULT_WORKDIR})",
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"corpus seed (default {DEFAULT_SEED})"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help=f"Jaccard threshold for every row and for recall/precision (default "
        f"{DEFAULT_THRESHOLD})",
    )
    parser.add_argument(
        "--master", default=DEFAULT_MASTER, help=f"Spark master (default {DEFAULT_MASTER})"
    )
    add_output_options(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds one row may take before its process tree is ended (default "
        f"{DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--mllib-max-docs",
        type=int,
        default=DEFAULT_MLLIB_MAX_DOCS,
        help="skip spark-mllib above this size: it neither fits the time budget nor 2 GB of "
        f"driver memory much beyond it (default {DEFAULT_MLLIB_MAX_DOCS})",
    )
    parser.add_argument(
        "--datasketch-max-docs",
        type=int,
        default=DEFAULT_DATASKETCH_MAX_DOCS,
        help=f"skip datasketch above this size (default {DEFAULT_DATASKETCH_MAX_DOCS})",
    )
    parser.add_argument(
        "--variant-max-docs",
        type=int,
        default=DEFAULT_VARIANT_MAX_DOCS,
        help=f"skip the variant rows above this size (default {DEFAULT_VARIANT_MAX_DOCS:,})",
    )
    parser.add_argument(
        "--no-compile-timing",
        action="store_true",
        help="do not time the kernels' compilation (first with numba's cache empty, then "
        "cached, each in a fresh process: ~20 s) before the rows",
    )
    parser.add_argument(
        "--scale-metrics",
        action="store_true",
        help="also measure the neardup rows' disk (input, staging, Spark local files, "
        "outputs), shuffle and spill bytes (event log) and sizing figures (make bench-scale)",
    )
    add_nightly_options(parser)


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """Where ``neardup bench`` writes its results and tables."""
    parser.add_argument(
        "--results", help="results JSON (default WORKDIR/results.json = out/bench/results.json)"
    )
    parser.add_argument(
        "--markdown", help="Markdown table (default WORKDIR/results.md = out/bench/results.md)"
    )
    parser.add_argument(
        "--docs-out",
        metavar="DIR",
        help="also write the tables as pages of the documentation site, headed by the date, "
        "the machine and this command: DIR/bench-main.md, DIR/bench-nightly.md (e.g. "
        "docs/performance/generated)",
    )


# Rows that run no Spark (nor Java).
PEERS_WITHOUT_SPARK = ("datasketch", "rensa")


def run_bench(args: argparse.Namespace) -> int:
    """Run the benchmark as ``args`` say, printing its progress and tables; 0 when every row
    and nightly run finished, 1 when one failed or timed out (the tables are written either
    way)."""
    settings = BenchSettings(**{f.name: getattr(args, f.name) for f in fields(BenchSettings)})
    for peer in PEERS_WITHOUT_SPARK:
        if peer in settings.rows:
            require_extra("bench", f"the {peer} row of neardup bench (or leave it out with --rows)")
    if set(settings.rows) - set(PEERS_WITHOUT_SPARK):
        preflight.check_java()  # exit 3 at once, not a table of failed rows
    from neardup_spark.bench.main import run_bench as bench  # deferred: imports the bench's peers

    return bench(settings, echo)


def echo(line: str) -> None:
    """Print one line of the bench as soon as it is known (child processes run in between)."""
    print(line, flush=True)


def _sizes_list(text: str) -> list[int]:
    try:
        sizes = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a list of sizes: {text!r}") from exc
    if not sizes or any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be positive integers, got {text!r}")
    return sizes


def add_nightly_options(parser: argparse.ArgumentParser) -> None:
    """The nightly options of ``neardup bench``."""
    group = parser.add_argument_group("nightly case (incremental run against an index)")
    group.add_argument(
        "--nightly-sizes",
        type=_sizes_list,
        default=_sizes_list(DEFAULT_SIZES),
        metavar="N,N,...",
        help=f"index sizes (default {DEFAULT_SIZES})",
    )
    group.add_argument(
        "--nightly-new",
        type=int,
        default=DEFAULT_NEW,
        metavar="M",
        help=f"new documents per nightly run (default {DEFAULT_NEW})",
    )
    group.add_argument(
        "--nightly-repeats",
        type=int,
        default=1,
        metavar="K",
        help="time nightly and full runs K times each, keep the best (default 1)",
    )
    group.add_argument(
        "--nightly-series",
        type=int,
        default=DEFAULT_SERIES_NIGHTS,
        metavar="K",
        help=f"then K nights one after the other on one index, no compaction (default "
        f"{DEFAULT_SERIES_NIGHTS}; 0 skips them)",
    )
    group.add_argument(
        "--nightly-series-index",
        type=int,
        default=DEFAULT_SERIES_INDEX,
        metavar="N",
        help=f"documents indexed before the series (default {DEFAULT_SERIES_INDEX:,})",
    )
    which = group.add_mutually_exclusive_group()
    which.add_argument("--no-nightly", action="store_true", help="skip the nightly case")
    which.add_argument(
        "--nightly-only", action="store_true", help="run only the nightly case (make bench-nightly)"
    )
