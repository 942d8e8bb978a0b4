"""``neardup jvm-archive``: pre-parse the classes a local run loads (one-off; faster local
JVMs). ``--dump FILE`` is the build's child process."""

from __future__ import annotations

import argparse
from typing import Any

from neardup_spark.bench import archive_build as archive_builder
from neardup_spark.errors import EXIT_OK, UserError
from neardup_spark.runtime import jvm_archive, preflight


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "jvm-archive",
        help="pre-parse the classes a local run loads (one-off; faster local JVMs)",
    )
    parser.add_argument("--force", action="store_true", help="rebuild an existing archive")
    parser.add_argument("--dump", metavar="FILE", help=argparse.SUPPRESS)
    parser.set_defaults(func=run_jvm_archive)


def run_jvm_archive(args: argparse.Namespace) -> int:
    if args.dump:  # the build's child: a JVM that writes its classes to FILE at exit
        archive_builder.dump(args.dump)
        return EXIT_OK
    preflight.check_java()  # no Java, or too old a one: exit 3 naming it
    if jvm_archive.archive_path() is None:
        raise UserError(f"no archive: {jvm_archive.ARCHIVE_ENV}=off")
    path = archive_builder.build(force=args.force)
    print(f"class archive: {path} ({path.stat().st_size / 2**20:.0f} MB)")
    return EXIT_OK
