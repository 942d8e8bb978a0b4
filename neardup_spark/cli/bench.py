"""``neardup bench``: the benchmark (main table, then the nightly case); ``bench-row`` is one
row's child process."""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import time
from pathlib import Path
from typing import Any

from neardup_spark.bench.nightly import (
    DEFAULT_NEW,
    DEFAULT_SIZES,
    NIGHTLY_JSON,
    NIGHTLY_MD,
    bench_nightly,
    format_nightly,
)
from neardup_spark.bench.run import (
    CHILD_ROWS,
    DEFAULT_DATASKETCH_MAX_DOCS,
    DEFAULT_DOCS,
    DEFAULT_MASTER,
    DEFAULT_MLLIB_MAX_DOCS,
    DEFAULT_SEED,
    DEFAULT_THRESHOLD,
    DEFAULT_TIMEOUT,
    DEFAULT_WORKDIR,
    ROWS,
    Corpus,
    derive,
    ensure_corpus,
    ensure_jvm_archive,
    format_markdown,
    machine_info,
    run_child_row,
    run_row,
    score_rows,
    write_json,
)
from neardup_spark.errors import EXIT_OK

log = logging.getLogger(__name__)


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
    unknown = [r for r in rows if r not in ROWS]
    if unknown or not rows:
        raise argparse.ArgumentTypeError(
            f"unknown row(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(ROWS)}"
        )
    return [r for r in ROWS if r in rows]


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
        help=f"rows to run (default all: {','.join(ROWS)})",
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
    parser.add_argument(
        "--results", help="results JSON (default WORKDIR/results.json = out/bench/results.json)"
    )
    parser.add_argument(
        "--markdown", help="Markdown table (default WORKDIR/results.md = out/bench/results.md)"
    )
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
    add_nightly_options(parser)


def run_bench(args: argparse.Namespace) -> int:
    """Run the benchmark described by ``args`` (see :func:`add_arguments`); 0 when every row
    that ran finished, 1 when one failed or timed out (the table is written either way).
    The nightly case (:mod:`neardup_spark.bench.nightly`) runs after the main table."""
    if args.nightly_only:
        return run_nightly(args)
    started = time.perf_counter()
    workdir = Path(args.workdir)
    results_path = Path(args.results or workdir / "results.json")
    markdown_path = Path(args.markdown or workdir / "results.md")
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "machine": machine_info(),
        "settings": {
            "docs": list(args.docs),
            "rows": list(args.rows),
            "seed": args.seed,
            "threshold": args.threshold,
            "master": args.master,
            "timeout": args.timeout,
            "mllib_max_docs": args.mllib_max_docs,
            "datasketch_max_docs": args.datasketch_max_docs,
            "workdir": str(workdir),
        },
        "corpora": [],
        "rows": [],
    }
    results["settings"]["jvm_archive"] = ensure_jvm_archive()
    all_rows: list[dict[str, Any]] = results["rows"]
    for docs in args.docs:
        try:
            info = ensure_corpus(workdir, docs, args.seed, args.timeout)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            results["corpora"].append({"docs": docs, "error": str(exc)})
            all_rows += [
                {"docs": docs, "row": row, "status": "failed", "error": "no corpus"}
                for row in args.rows
            ]
            continue
        results["corpora"].append(info)
        print(
            f"[bench] {docs:,} documents: corpus {'reused' if info['reused'] else 'generated'} "
            f"({info['seconds']:.1f} s)",
            flush=True,
        )
        corpus = Corpus(docs=docs, root=Path(info["path"]))
        size_rows: list[dict[str, Any]] = []
        for row in args.rows:
            record = run_row(row, corpus, workdir, args)
            size_rows.append(record)
            all_rows.append(record)
            print(
                f"[bench] {docs:,} {row}: {record['status']}"
                + (f", wall {record['wall_seconds']:.1f} s" if "wall_seconds" in record else "")
                + (f", work {record['work_seconds']:.1f} s" if "work_seconds" in record else "")
                + (f" ({record['error']})" if record.get("error") else ""),
                flush=True,
            )
            results["total_seconds"] = round(time.perf_counter() - started, 1)
            write_json(results_path, results)
        scoring = time.perf_counter()
        score_rows(size_rows, corpus, args.threshold)
        results.setdefault("scoring_seconds", {})[str(docs)] = round(
            time.perf_counter() - scoring, 1
        )
        derive(all_rows)
        results["total_seconds"] = round(time.perf_counter() - started, 1)
        write_json(results_path, results)
    derive(all_rows)
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    write_json(results_path, results)
    text = format_markdown(results)
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text(text)
    print(text)
    print(f"[bench] wrote {results_path} and {markdown_path}", flush=True)
    failed = [r for r in all_rows if r.get("status") in ("failed", "timeout")]
    nightly_status = 0 if args.no_nightly else run_nightly(args)
    return 1 if failed or nightly_status else 0


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
    which = group.add_mutually_exclusive_group()
    which.add_argument("--no-nightly", action="store_true", help="skip the nightly case")
    which.add_argument(
        "--nightly-only", action="store_true", help="run only the nightly case (make bench-nightly)"
    )


def run_nightly(args: argparse.Namespace) -> int:
    """The nightly case of ``neardup bench`` with its options; writes ``WORKDIR/nightly.json``
    and ``.md`` and prints the table. 0 on success, 1 when a run failed (recorded)."""
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "machine": machine_info(),
        "settings": {
            "index_sizes": list(args.nightly_sizes),
            "new_docs": args.nightly_new,
            "repeats": args.nightly_repeats,
            "seed": args.seed,
            "threshold": args.threshold,
            "master": args.master,
        },
    }
    started = time.perf_counter()
    status = 0
    try:
        results["rows"] = bench_nightly(
            str(workdir / "nightly"),
            args.nightly_sizes,
            args.nightly_new,
            seed=args.seed,
            master=args.master,
            repeats=args.nightly_repeats,
            threshold=args.threshold,
            echo=lambda line: print(line, flush=True),
        )
    except Exception as exc:
        log.exception("the nightly bench failed")
        results["error"] = f"{type(exc).__name__}: {exc}"
        results["rows"] = []
        status = 1
    results["total_seconds"] = round(time.perf_counter() - started, 1)
    json_path, md_path = workdir / NIGHTLY_JSON, workdir / NIGHTLY_MD
    json_path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    text = "Nightly: new documents against an index vs a full rerun over index + new\n\n"
    text += format_nightly(results["rows"]) + "\n"
    if status:
        text += f"\nfailed: {results['error']}\n"
    md_path.write_text(text)
    print(text)
    print(f"[bench] wrote {json_path} and {md_path}", flush=True)
    return status
