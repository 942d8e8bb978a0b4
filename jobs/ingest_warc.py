"""spark-submit entry point: ``spark-submit jobs/ingest_warc.py WARC_PATH... OUTPUT [options]``.

Takes the same options as ``neardup ingest``; a master given to spark-submit wins over
--master. Ship the package with ``--py-files`` (a wheel or zip of neardup_spark) on a cluster;
the executors also need its dependencies installed or shipped in a packed virtualenv.
"""

import sys

from neardup_spark.cli.app import job_main


def main(argv: list[str]) -> int:
    return job_main("ingest", argv, prog="jobs/ingest_warc.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
