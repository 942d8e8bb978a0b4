"""Options shared by several subcommands, and the parser that turns argparse's errors into
user errors (exit 2, one line)."""

from __future__ import annotations

import argparse
from typing import Any

from neardup_spark.config import METHODS, SIMILARITIES, JobSettings, load_settings
from neardup_spark.errors import UserError
from neardup_spark.io.format_names import INPUT_FORMATS


class CliParser(argparse.ArgumentParser):
    """argparse that reports errors as a UserError (exit 2, one clear line)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise UserError(f"{self.prog}: {message}")


def add_settings_options(parser: argparse.ArgumentParser, master: bool = True) -> None:
    """``--config FILE``, ``--set KEY=VALUE`` (both repeatable), ``--ui``, ``--master`` and
    ``--remote``."""
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="YAML settings layered over the defaults (repeatable)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="override one setting, e.g. --set normalize.casefold=false or "
        "--set spark.driver.memory=4g (repeatable)",
    )
    add_ui_option(parser)
    if master:
        add_master_options(parser)


def add_input_format_option(parser: argparse.ArgumentParser) -> None:
    """``--input-format``: the corpus's format when its file names do not say it."""
    parser.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        help="the input's format (default: told by its file names: .parquet, .jsonl/.json "
        "(also .gz, .zst, ...), .orc, .csv)",
    )


def add_master_options(parser: argparse.ArgumentParser) -> None:
    """``--master URL`` and ``--remote URL`` (Spark Connect): where the job runs."""
    parser.add_argument("--master", help="Spark master URL (default local[*]; spark-submit's wins)")
    parser.add_argument(
        "--remote",
        metavar="URL",
        help="run over Spark Connect on this server, sc://HOST:PORT (default: $SPARK_REMOTE; "
        "not with --master; docs/connect.md)",
    )


def add_output_options(parser: argparse.ArgumentParser, kind: str = "run") -> None:
    """``--overwrite`` and ``--lock-timeout SECONDS``."""
    parser.add_argument(
        "--overwrite", action="store_true", help=f"replace an OUTPUT that holds a finished {kind}"
    )
    add_lock_timeout_option(parser)


def add_lock_timeout_option(parser: argparse.ArgumentParser) -> None:
    """``--lock-timeout SECONDS``: how long a run waits for another one holding its index or
    OUTPUT (setting ``lock_timeout``; docs/operations/locking.md)."""
    parser.add_argument(
        "--lock-timeout",
        type=float,
        metavar="SECONDS",
        help="wait this long for another run holding the same index or OUTPUT, then exit 2 "
        "naming it (default 3600; 0: do not wait)",
    )


def add_ui_option(parser: argparse.ArgumentParser) -> None:
    """``--ui``: Spark's web UI, off by default in local mode; on 127.0.0.1 (port 4040, or
    the next free one) when on. The same as ``--set spark.ui.enabled=true``."""
    parser.add_argument(
        "--ui",
        action="append_const",
        const="spark.ui.enabled=true",
        dest="overrides",
        help="serve Spark's web UI on 127.0.0.1:4040 (or the next free port) while the job "
        "runs (local mode; off by default)",
    )


# How --prefer names a column (config.parse_prefer), for the help of the options that take one.
PREFER_NAMES = 'a name holding spaces or commas in backticks: "`fetch date` desc"'


def add_column_options(parser: argparse.ArgumentParser) -> None:
    """``--id-col`` and ``--text-col``: column names taken as they are (docs/input.md)."""
    parser.add_argument(
        "--id-col",
        help="id column, named as the input names it (dots, spaces, backticks, any letters: "
        "no quoting; default id)",
    )
    parser.add_argument(
        "--text-col", help="text column, named as the input names it (default text)"
    )


def add_method_options(parser: argparse.ArgumentParser) -> None:
    """The dedupe settings that have an option of their own (dedupe, explain)."""
    parser.add_argument("--method", choices=METHODS, help="dedupe method (default minhash)")
    add_column_options(parser)
    parser.add_argument("--ngram", type=int, help="words per shingle (default 5)")
    parser.add_argument("--num-perm", type=int, help="MinHash sketch size (default 200)")
    parser.add_argument(
        "--threshold",
        type=float,
        help="Jaccard (or with --similarity containment, containment) a pair must reach "
        "(default 0.8)",
    )
    parser.add_argument(
        "--similarity",
        choices=SIMILARITIES,
        help="minhash: jaccard (default), or containment of the smaller document in the "
        "larger, the contained one removed in favour of its container (docs/containment.md)",
    )
    parser.add_argument("--bands", type=int, help="LSH bands (default: derived from the threshold)")
    parser.add_argument("--rows", type=int, help="rows per LSH band (with --bands)")
    parser.add_argument("--seed", type=int, help="seed of the MinHash permutations (default 42)")
    parser.add_argument("--hamming-k", type=int, help="simhash: max differing bits (default 3)")
    parser.add_argument("--blocks", type=int, help="simhash: blocks per fingerprint (default 6)")


METHOD_OPTIONS = (
    "method",
    "similarity",
    "id_col",
    "text_col",
    "ngram",
    "num_perm",
    "threshold",
    "bands",
    "rows",
    "seed",
    "hamming_k",
    "blocks",
)


def settings_from_args(args: argparse.Namespace, *names: str) -> JobSettings:
    """The settings of ``--config``, ``--set`` and the options ``names`` (attributes of ``args``
    named as the settings), resolved once."""
    options = {name: getattr(args, name, None) for name in names}
    return load_settings(args.config, args.overrides, options)
