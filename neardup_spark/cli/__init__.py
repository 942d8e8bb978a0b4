"""The `neardup` command line: the only place that prints and maps errors to exit codes."""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

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


def command() -> NoReturn:
    """The ``neardup`` script and ``python -m neardup_spark``: :func:`main`, then
    :func:`exit_quickly` with its code."""
    exit_quickly(main())


def exit_quickly(code: int) -> NoReturn:
    """End this process with ``code`` without the interpreter's teardown of every module and
    object, which took 0.3-0.9 s after a run (numba's, PyArrow's and Spark's objects freed one
    by one) for nothing the command needs. What an exit does that matters still happens, in
    the same order: other threads that are not daemons are waited for, the ``atexit`` handlers
    run (logging flushed, PySpark's JVM told to stop, temporary directories removed), and
    standard output and error are flushed; a reader of standard output that has gone makes
    it exit 141, as a broken pipe does anywhere else in the command."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        code = code or 128 + signal.SIGPIPE
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)


__all__ = ["command", "exit_quickly", "main"]
