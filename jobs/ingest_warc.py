"""spark-submit entry point: ``spark-submit jobs/ingest_warc.py WARC_PATH... OUTPUT [options]``.

Takes the same options as ``neardup ingest``; a master given to spark-submit wins over --master.
Ship the package with ``--py-files`` (a wheel or zip of neardup_spark) on a cluster; the
executors also need its dependencies (pyarrow, resiliparse/fastwarc, ...) installed or shipped
in a packed virtualenv with ``--archives``.
"""

import argparse
import sys

from neardup_spark.cli import _Parser, configure_logging, run_command
from neardup_spark.errors import EXIT_USER_ERROR, UserError
from neardup_spark.ingest import add_arguments, run_ingest


def main(argv: list[str]) -> int:
    parser: argparse.ArgumentParser = _Parser(prog="jobs/ingest_warc.py")
    parser.add_argument("-v", "--verbose", action="store_true")
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    configure_logging(args.verbose)
    return run_command(run_ingest, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
