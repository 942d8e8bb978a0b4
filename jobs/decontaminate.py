"""spark-submit entry point: ``spark-submit jobs/decontaminate.py CORPUS --reference REF OUTPUT
[options]``.

Takes the same options as ``neardup decontaminate``; a master given to spark-submit wins over
--master. Ship the package with ``--py-files`` (a wheel or zip of neardup_spark) on a cluster.
"""

import sys

from neardup_spark.cli.app import job_main


def main(argv: list[str]) -> int:
    return job_main("decontaminate", argv, prog="jobs/decontaminate.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
