"""``neardup index info|verify|compact DIR``: inspect, check or compact the index of nightly
runs."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession

from neardup_spark.cli.options import CliParser, add_lock_timeout_option, add_settings_options
from neardup_spark.config import load_session_settings
from neardup_spark.errors import EXIT_FAILURE, EXIT_OK, UserError
from neardup_spark.io.filesystem import is_local
from neardup_spark.nightly.compaction import compact_index
from neardup_spark.nightly.integrity import damage_message
from neardup_spark.nightly.store import index_info, verify_index
from neardup_spark.runtime.session import build_session, stop_session


def register(sub: Any) -> None:
    """``neardup index info|compact``."""
    parser = sub.add_parser(
        "index",
        help="inspect (info), check (verify) or compact the index of nightly runs (dedupe --index)",
    )
    commands = parser.add_subparsers(dest="index_command", required=True, parser_class=CliParser)
    info = commands.add_parser("info", help="version, settings, counts and batches of an index")
    info.add_argument("directory", help="the index directory (dedupe --index DIR)")
    info.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_settings_options(info)
    info.set_defaults(func=run_info)

    verify = commands.add_parser(
        "verify",
        help="check every file of the index against the size and SHA-256 recorded when it was "
        "written (exit 0: intact, 1: damaged, each damaged file listed)",
    )
    verify.add_argument("directory", help="the index directory (dedupe --index DIR)")
    verify.add_argument("--json", action="store_true", help="print the findings as JSON")
    add_settings_options(verify)
    verify.set_defaults(func=run_verify)

    compact = commands.add_parser(
        "compact",
        help="rewrite the index into one segment, dropping texts no document holds any more",
    )
    compact.add_argument("directory", help="the index directory (dedupe --index DIR)")
    compact.add_argument(
        "--buckets",
        type=int,
        metavar="N",
        help="most parts the compacted texts are cut into (default: the index's own)",
    )
    add_lock_timeout_option(compact)
    add_settings_options(compact)
    compact.set_defaults(func=run_compact)


def index_info_lines(info: dict[str, Any]) -> list[str]:
    """What ``neardup index info DIR`` prints."""
    counts, settings = info["counts"], info["settings"]
    lines = [
        f"index             {info['index']}",
        f"version           {info['version']} (created {info['created_at']})",
        f"documents         {counts.get('documents', 0):,} in {counts.get('clusters', 0):,} "
        "clusters",
        f"contents          {counts.get('contents', 0):,} distinct texts stored",
        f"verified pairs    {counts.get('pairs', 0):,}",
        f"segments          {info['segments']} ({info['buckets']} buckets; "
        "`neardup index compact` merges them)",
        f"ids               {info['id_type']}",
        f"settings          num_perm {settings.get('num_perm')}, seed {settings.get('seed')}, "
        f"{settings.get('bands')} bands x {settings.get('rows')} rows, threshold "
        f"{settings.get('threshold')}, ngram {settings.get('ngram')}, shingle hash version "
        f"{settings.get('shingle_hash_version')}",
        f"batches           {len(info['batches'])}",
    ]
    for batch in info["batches"][-5:]:
        batch_counts = batch.get("counts", {})
        lines.append(
            f"  #{batch['seq']:<4} {batch['committed_at']}  run {batch['run_id']}  "
            f"{batch_counts.get('input_rows', 0):,} documents, "
            f"{batch_counts.get('deduplicated', 0):,} kept"
        )
    return lines


def with_storage(args: argparse.Namespace, read: Callable[[SparkSession | None], Any]) -> Any:
    """``read(spark)`` with no Spark session for a local index, else a session for its file
    system (stopped after)."""
    if is_local(args.directory):
        return read(None)
    spark = build_session(
        load_session_settings(
            args.config, args.overrides, {"master": args.master, "remote": args.remote}
        )
    )
    try:
        return read(spark)
    finally:
        stop_session(spark)


def run_info(args: argparse.Namespace) -> int:
    info = with_storage(args, lambda spark: index_info(spark, args.directory))
    print(json.dumps(info, indent=2) if args.json else "\n".join(index_info_lines(info)))
    return EXIT_OK


def run_verify(args: argparse.Namespace) -> int:
    root = args.directory
    found = with_storage(args, lambda spark: verify_index(spark, root))
    problems = found.problems
    if args.json:
        print(
            json.dumps(
                {
                    "index": root,
                    "files_checked": found.files,
                    "bytes_checked": found.bytes,
                    "damaged": [dataclasses.asdict(p) for p in problems],
                    "without_checksums": found.unrecorded,
                },
                indent=2,
            )
        )
    else:
        for problem in problems:
            print(f"damaged  {problem.line()}")
        for name in found.unrecorded:
            print(
                f"note     {name}: no checksums recorded (written before they were); its "
                "texts were decoded and checked against their fingerprints only"
            )
        state = f"{len(problems)} damaged" if problems else "intact"
        print(f"{state}: {found.files:,} files, {found.bytes:,} bytes checked in {root}")
    if problems:
        print(f"error: {damage_message(root, problems)}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def run_compact(args: argparse.Namespace) -> int:
    if args.buckets is not None and args.buckets < 1:
        raise UserError(f"--buckets must be >= 1, got {args.buckets}")
    session = load_session_settings(
        args.config,
        args.overrides,
        {"master": args.master, "remote": args.remote, "lock_timeout": args.lock_timeout},
    )
    spark = build_session(session)
    try:
        summary = compact_index(
            spark, args.directory, buckets=args.buckets, lock_timeout=session.lock_timeout
        )
    finally:
        stop_session(spark)
    rows = summary["rows"]
    print(
        "\n".join(
            [
                f"index             {summary['index']}",
                f"version           {summary['version']}",
                f"segments          {summary['segments_before']} -> 1 "
                f"({summary['buckets']} buckets)",
                f"contents          {rows.get('contents', 0):,} kept "
                f"({summary['live_contents']:,} live)",
                f"documents         {rows.get('docs', 0):,} (current rows)",
                f"verified pairs    {rows.get('pairs', 0):,}",
                f"removed entries   {summary['deleted_entries']:,}",
            ]
        )
    )
    return EXIT_OK
