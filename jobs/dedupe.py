"""spark-submit entry point: ``spark-submit jobs/dedupe.py INPUT OUTPUT [options]``.

Takes the same options as ``neardup dedupe`` (``--index DIR`` for nightly runs); a master given
to spark-submit wins over --master.
Ship the package with ``--py-files`` (a wheel or zip of neardup_spark) on a cluster.
"""

import argparse
import sys

from neardup_spark.cli import (
    _Parser,
    add_dedupe_options,
    cmd_dedupe,
    configure_logging,
    run_command,
)
from neardup_spark.errors import EXIT_USER_ERROR, UserError


def main(argv: list[str]) -> int:
    parser: argparse.ArgumentParser = _Parser(prog="jobs/dedupe.py")
    parser.add_argument("-v", "--verbose", action="store_true")
    add_dedupe_options(parser)
    try:
        args = parser.parse_args(argv)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    configure_logging(args.verbose)
    return run_command(cmd_dedupe, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
