"""``neardup eval-extract``: main-content extraction F1 and WARC reader speed (``make
eval-extract``; reads ../shared/data)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from neardup_spark.errors import EXIT_OK
from neardup_spark.extras import require_extra
from neardup_spark.quality.extraction_eval import (
    evaluate_extractor,
    extractors,
    read_benchmark,
    shared_data_dir,
    versions,
    warc_read_speed,
)
from neardup_spark.quality.tables import markdown_table


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "eval-extract",
        help="main-content extraction F1 and WARC reader speed on ../shared/data",
    )
    data = shared_data_dir()
    parser.add_argument(
        "--html",
        type=Path,
        default=data / "html" / "article-extraction-benchmark.parquet",
        help="benchmark Parquet with html and article_body columns",
    )
    parser.add_argument(
        "--warc", type=Path, default=data / "warc", help="directory of WARC files to time"
    )
    parser.add_argument("--repeats", type=int, default=3, help="passes; the best one is timed")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    parser.set_defaults(func=run_eval_extract)


def run_eval_extract(args: argparse.Namespace) -> int:
    require_extra("ingest", "neardup eval-extract")
    result: dict[str, Any] = {"versions": versions()}
    if args.html.is_file():
        pages = read_benchmark(args.html)
        result["extraction"] = {
            name: evaluate_extractor(fn, pages, args.repeats) for name, fn in extractors().items()
        }
        print(f"Extraction: {len(pages)} pages of {args.html.name}\n")
        rows = [
            [
                name,
                f"{r['precision']:.3f}",
                f"{r['recall']:.3f}",
                f"{r['f1']:.3f}",
                f"{r['pages_per_second']:.0f}",
            ]
            for name, r in result["extraction"].items()
        ]
        print(markdown_table(["extractor", "precision", "recall", "F1", "pages/s"], rows))
    else:
        print(f"skipped extraction: {args.html} not found", file=sys.stderr)
    files = (
        sorted(p for p in args.warc.glob("*") if ".warc" in p.name) if args.warc.is_dir() else []
    )
    if files:
        result["warc_reading"] = warc_read_speed(files, max(args.repeats, 5))
        total = sum(p.stat().st_size for p in files)
        print(f"\nWARC reading: {len(files)} files, {total / 1e6:.1f} MB\n")
        rows = [
            [name, r["records"], f"{r['records_per_second']:,}", f"{r['mb_per_second']:.0f}"]
            for name, r in result["warc_reading"].items()
        ]
        print(markdown_table(["library", "records", "records/s", "MB/s"], rows))
    else:
        print(f"skipped WARC reading: no *.warc* files in {args.warc}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return EXIT_OK
