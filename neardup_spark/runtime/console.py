"""What the JVM says on the console: Spark's start-up noise silenced, ``-v`` brings it back.

When this process starts the JVM (local mode, no spark-submit), a quiet session gets:

* a log4j2 configuration (``log4j2-quiet.properties`` beside this module): errors only, on
  stderr; without it Spark announces its default profile, its log level, the host's loopback
  address and the missing native Hadoop library, and warns of every task a cancelled job loses;
* the JVM's stderr through a filter (:func:`filter_jvm_stderr`) that drops the few lines no
  log4j setting reaches (the JVM's own ``Using incubator modules`` warning, Spark's
  ``Setting default log level`` hints). Everything else the JVM and its Python workers write
  passes through, until :func:`mute_jvm` (a signal is stopping the run: what a JVM says while
  it is torn down under running jobs, a ``RejectedExecutionException`` from a closing thread
  pool say, is not for the user, whose one line the command prints itself).

Under spark-submit the JVM is already running with the submitter's settings; nothing changes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

QUIET_LOG4J = Path(__file__).with_name("log4j2-quiet.properties")

# Lines the JVM writes to stderr that no log4j setting reaches.
NOISE = re.compile(
    r"^(WARNING: Using incubator modules: "
    r"|Using Spark's default log4j profile: "
    r"|Setting default log level to "
    r"|To adjust logging level use sc\.setLogLevel)"
)


@dataclass
class ConsoleSettings:
    """Set once by the command line (``-v``) before a session is built."""

    verbose: bool = True  # the Python API and tests: Spark's own console


SETTINGS = ConsoleSettings()

# Set by mute_jvm: the filter then drops every line of the JVM and its workers.
_MUTED = threading.Event()


def mute_jvm() -> None:
    """From now on, drop everything the JVM (and its Python workers) writes to stderr: the
    command is ending on an error it reports itself (a signal, a failed action that cancelled
    the others), and what the JVM says of the jobs torn down meanwhile is not for the user."""
    _MUTED.set()


def unmute_jvm() -> None:
    """Copy the JVM's stderr again (a new JVM's: what :func:`mute_jvm` dropped belonged to a
    command that has ended)."""
    _MUTED.clear()


_PY4J_DIR = f"{os.sep}py4j{os.sep}"


def _not_from_py4j(record: logging.LogRecord) -> bool:
    """False for what py4j logs, on its own loggers and on the root logger: ``Exception while
    sending command.`` and a stack trace when the JVM's connection drops under a call (a thread
    still talking to the JVM as a signal stops it), errors of a connection shut down. The call
    fails as well, and the command reports that in its own line."""
    from_py4j = record.name == "py4j" or record.name.startswith("py4j.")
    return not (from_py4j or _PY4J_DIR in record.pathname)


def configure(verbose: bool) -> None:
    """The command line's console (after its log handlers are set up): Spark's own console and
    py4j's log records only with ``verbose``."""
    SETTINGS.verbose = verbose
    for handler in logging.getLogger().handlers:
        handler.removeFilter(_not_from_py4j)
        if not verbose:
            handler.addFilter(_not_from_py4j)


def quiet_connect_client() -> None:
    """PySpark logs a JSON line for each error a Spark Connect server reports, with the server's
    Java stack trace; the command line reports the error itself, in one line."""
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL + 1)


def quiet_java_options() -> str:
    """The JVM option that makes log4j2 use the quiet configuration."""
    return f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}"


def _copy_lines(source: int, target: int) -> None:
    """Copy ``source``'s lines to ``target`` except :data:`NOISE`, until end of file. Never
    stops reading early: the writer would block on a full pipe."""
    with open(source, "rb", buffering=0) as reader:
        pending = b""
        while chunk := reader.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            kept = b"".join(
                line + b"\n"
                for line in lines
                if not _MUTED.is_set() and not NOISE.match(line.decode("utf-8", "replace"))
            )
            if kept:
                with contextlib.suppress(OSError):  # stderr gone (closed terminal): keep draining
                    os.write(target, kept)
        if pending and not _MUTED.is_set():
            with contextlib.suppress(OSError):
                os.write(target, pending)


def filter_jvm_stderr() -> tuple[int, threading.Thread]:
    """Point this process's stderr (fd 2) at a pipe read by a filtering thread, so that a JVM
    started now inherits it; returns the real stderr's duplicate, to be put back with
    :func:`restore_stderr` once the JVM runs (the JVM and its Python workers keep the pipe)."""
    unmute_jvm()  # muted, if at all, by an earlier command of this process
    read_end, write_end = os.pipe()
    real = os.dup(2)
    thread = threading.Thread(
        target=_copy_lines, args=(read_end, os.dup(real)), name="neardup-jvm-stderr", daemon=True
    )
    thread.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    return real, thread


def restore_stderr(real: int) -> None:
    os.dup2(real, 2)
    os.close(real)
