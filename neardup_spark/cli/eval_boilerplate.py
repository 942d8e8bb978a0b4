"""``neardup eval-boilerplate``: the measurements behind the boilerplate defaults (README,
Boilerplate), and the score of a dedupe run over a generated template corpus."""

from __future__ import annotations

import argparse
from typing import Any

from neardup_spark.errors import EXIT_OK
from neardup_spark.quality.boilerplate_eval import real_page_grid, score_template_run, template_grid
from neardup_spark.quality.tables import markdown_table


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "eval-boilerplate", help="measure boilerplate settings on generated and real pages"
    )
    parser.add_argument("--docs", type=int, default=10_800, help="generated template pages")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--real",
        nargs=2,
        metavar=("TEXT_CORPUS", "MAIN_CORPUS"),
        help="the same crawl ingested with --extract text and --extract main (their OUTPUTs)",
    )
    parser.add_argument(
        "--run",
        nargs=2,
        metavar=("OUTPUT", "TEMPLATE_DIR"),
        help="instead: score a dedupe OUTPUT over `neardup generate TEMPLATE_DIR --templates`",
    )
    parser.set_defaults(func=run_eval)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def run_eval(args: argparse.Namespace) -> int:
    if args.run:
        scores = score_template_run(*args.run)
        for name, value in scores.items():
            print(f"{name:22} {value if isinstance(value, int) else _pct(value)}")
        return EXIT_OK
    rows = template_grid(args.docs, args.seed)
    print(f"generated template corpus: {args.docs:,} pages, seed {args.seed}\n")
    headers = ["unit", "grouped", "min_docs", "min_words", "template removed %", "body kept %"]
    cells = [
        [
            r["unit"],
            str(r["grouped"]),
            str(r["min_docs"]),
            str(r["min_words"]),
            _pct(r["template_removed"]),
            _pct(r["body_kept"]),
        ]
        for r in rows
    ]
    print(markdown_table(headers, cells, right={2, 3, 4, 5}))
    if args.real:
        totals, real = real_page_grid(*args.real)
        print(
            f"\nreal pages: {totals['pages']:,} pages, {totals['lines']:,} lines, "
            f"{totals['chrome_lines']:,} chrome (not in the main content)\n"
        )
        headers = ["min_docs", "min_words", "chrome removed %", "content chars removed %"]
        cells = [
            [
                str(r["min_docs"]),
                str(r["min_words"]),
                _pct(r["chrome_removed"]),
                _pct(r["content_chars_removed"]),
            ]
            for r in real
        ]
        print(markdown_table(headers, cells, right={0, 1, 2, 3}))
    return EXIT_OK
