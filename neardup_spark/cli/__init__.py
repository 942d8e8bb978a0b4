"""The `neardup` command line: the only place that prints and maps errors to exit codes."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence

# Spark's Python package comes from an extra (a cluster, Databricks or a Connect client brings
# its own): the command says which to install rather than failing on an import.
NO_PYSPARK = (
    "error: neardup needs Spark's Python package: pip install 'neardup-spark[spark]' to run "
    "Spark on this machine or submit to a cluster, or 'neardup-spark[connect]' for a Spark "
    "Connect client (docs/connect.md)"
)


def main(argv: Sequence[str] | None = None) -> int:
    """``neardup ARGS``; returns the exit code."""
    if importlib.util.find_spec("pyspark") is None:
        print(NO_PYSPARK, file=sys.stderr)
        return 2
    from neardup_spark.cli.app import main as run

    return run(argv)


__all__ = ["main"]
