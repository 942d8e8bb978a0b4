"""spark-submit entry point: ``spark-submit jobs/boilerplate.py INPUT OUTPUT [options]``.

Takes the same options as ``neardup boilerplate``; a master given to spark-submit wins over
--master. Ship the package with ``--py-files`` (a wheel or zip of neardup_spark) on a cluster.
"""

import sys

from neardup_spark.cli.app import job_main


def main(argv: list[str]) -> int:
    return job_main("boilerplate", argv, prog="jobs/boilerplate.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
