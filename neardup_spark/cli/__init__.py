"""The `neardup` command line: the only place that prints and maps errors to exit codes."""

from neardup_spark.cli.app import main

__all__ = ["main"]
