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

from neardup_spark.errors import EXIT_MACHINE_ERROR

# Spark's Python package comes from an extra (a cluster, Databricks or a Connect client brings
# its own): the command says which to install rather than failing on an import.
NO_PYSPARK = (
    "error: neardup needs Spark's Python package: pip install 'neardup-spark[spark]' to run "
    "Spark on this machine or submit to a cluster, or 'neardup-spark[connect]' for a Spark "
    "Connect client (docs/connect.md)"
)


# The standard streams, by file descriptor.
STREAMS = ((0, "stdin"), (1, "stdout"), (2, "stderr"))
STREAM_CLOSED = (
    "warning: standard output was closed when neardup started (>&-): what the command prints "
    "is discarded; its exit code and OUTPUT tell how it went"
)


def main(argv: Sequence[str] | None = None) -> int:
    """``neardup ARGS``; returns the exit code."""
    if importlib.util.find_spec("pyspark") is None:
        print(NO_PYSPARK, file=sys.stderr)
        return EXIT_MACHINE_ERROR
    from neardup_spark.cli.app import main as run

    return run(argv)


def command() -> NoReturn:
    """The ``neardup`` script and ``python -m neardup_spark``: :func:`main`, then
    :func:`exit_quickly` with its code."""
    closed = open_closed_streams()
    if "stdout" in closed:
        print(STREAM_CLOSED, file=sys.stderr)
    exit_quickly(main())


def open_closed_streams() -> list[str]:
    """Open ``/dev/null`` as each standard stream the process was started without
    (``neardup ... >&-``), and name them. Left closed, the stream's file descriptor would be
    the next file opened (a file of OUTPUT, a log), and what Python, Spark's JVM or any child
    process writes to that stream would be written into that file; and ``sys.stdout`` would
    be None, which no printing or flushing code expects."""
    closed = []
    for fd, name in STREAMS:
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: fd, if below
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            mode = "r" if fd == 0 else "w"
            # the stream for the life of the process, as Python opens sys.stdout
            setattr(sys, name, open(fd, mode, encoding="utf-8", closefd=False))  # noqa: SIM115
            closed.append(name)
    return closed


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
        if sys.stdout is not None:
            sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        code = code or 128 + signal.SIGPIPE
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()
    os._exit(code)


__all__ = ["command", "exit_quickly", "main"]
