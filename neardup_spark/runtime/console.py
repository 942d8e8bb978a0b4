"""What the JVM says on the console: Spark's start-up noise silenced, ``-v`` brings it back.

When this process starts the JVM (local mode, no spark-submit), a quiet session gets:

* a log4j2 configuration (``log4j2-quiet.properties`` beside this module): errors only, on
  stderr; without it Spark announces its default profile, its log level, the host's loopback
  address and the missing native Hadoop library, and warns of every task a cancelled job loses;
* the JVM's stderr (and stdout) through a filter (:class:`StartCapture`) that drops the few
  lines no log4j setting reaches (the JVM's own ``Using incubator modules`` warning, Spark's
  ``Setting default log level`` hints). Everything else the JVM and its Python workers write
  passes through, until :func:`mute_jvm` (a signal is stopping the run: what a JVM says while
  it is torn down under running jobs, a ``RejectedExecutionException`` from a closing thread
  pool say, is not for the user, whose one line the command prints itself).

What the JVM writes while it starts is recorded, quiet or not, and held back unless ``-v``: a
start that fails is reported in one line (:mod:`~neardup_spark.runtime.start_failure` finds
the cause in it), not with the JVM's stack traces; a start that succeeds lets it through.

Under spark-submit the JVM is already running with the submitter's settings; nothing changes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
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


def _copy_lines(source: int, target: int, verbose: bool = False) -> None:
    """Copy ``source``'s lines to ``target`` until end of file: all of them when ``verbose``,
    else all but :data:`NOISE` until :func:`mute_jvm`. A JVM's start (:class:`StartCapture`)
    records them, and holds them back unless ``verbose``. Never stops reading early: the
    writer would block on a full pipe."""
    with open(source, "rb", buffering=0) as reader:
        pending = b""
        while chunk := reader.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            kept = b"".join(line + b"\n" for line in lines if _passes(line, verbose))
            if kept:
                with contextlib.suppress(OSError):  # stderr gone (closed terminal): keep draining
                    os.write(target, kept)
        if pending and _passes(pending, verbose):
            with contextlib.suppress(OSError):
                os.write(target, pending)


def _passes(line: bytes, verbose: bool) -> bool:
    """Whether the copier writes ``line`` now (not dropped as noise or muted, nor held by a
    JVM's start)."""
    if not verbose and (_MUTED.is_set() or NOISE.match(line.decode("utf-8", "replace"))):
        return False
    start = _STARTING
    return start is None or not start.take(line)


def _start_copier(verbose: bool) -> tuple[int, int, threading.Thread]:
    """A pipe whose lines a daemon thread copies to this process's stderr: (a duplicate of the
    real stderr, the pipe's write end, the thread)."""
    read_end, write_end = os.pipe()
    real = os.dup(2)
    thread = threading.Thread(
        target=_copy_lines,
        args=(read_end, os.dup(real), verbose),
        name="neardup-jvm-stderr",
        daemon=True,
    )
    thread.start()
    return real, write_end, thread


# Lines of a JVM's start kept for the cause of a failed start.
START_LINES_KEPT = 2000
# How long a failed start waits for the copier to read what the JVM wrote last (a JVM that
# exited closes the pipe sooner; one still running keeps it open).
START_SETTLE_SECONDS = 0.5


class StartCapture:
    """A JVM's stdout and stderr while it starts (it inherits this process's fds 1 and 2, both
    pointed at the filter's pipe until :meth:`succeeded` or :meth:`failed`): recorded, so that
    a failed start can say why in one line, and held back unless ``verbose``, so that its
    stack traces do not reach the console. Once started, the JVM keeps writing through the
    filter (both streams: what a JVM prints on stdout is diagnostics, not a command's
    output)."""

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose
        self.lines: list[str] = []
        self._held: list[bytes] = []
        self._lock = threading.Lock()
        self._open = True
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):  # None: closed
                stream.flush()
        unmute_jvm()  # muted, if at all, by an earlier command of this process
        self._real_err, write_end, self._thread = _start_copier(verbose)
        try:
            self._real_out = os.dup(1)
        except OSError:  # no standard output (closed by the caller): left as it is
            self._real_out = -1
        global _STARTING
        _STARTING = self
        if self._real_out >= 0:
            os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        os.close(write_end)

    def take(self, line: bytes) -> bool:
        """Record ``line`` while the JVM starts; True when it is held back (not written)."""
        with self._lock:
            if not self._open:
                return False
            if len(self.lines) < START_LINES_KEPT:
                self.lines.append(line.decode("utf-8", "replace").rstrip("\r"))
            if not self.verbose:
                self._held.append(line + b"\n")
            return not self.verbose

    def _restore_fds(self) -> None:
        """This process's own stdout and stderr back (the JVM keeps the pipe)."""
        if self._real_out >= 0:
            os.dup2(self._real_out, 1)
            os.close(self._real_out)
            self._real_out = -1
        if self._real_err >= 0:
            os.dup2(self._real_err, 2)
            os.close(self._real_err)
            self._real_err = -1

    def _close(self) -> list[bytes]:
        """Stop recording; the lines held back."""
        global _STARTING
        with self._lock:
            self._open = False
            held, self._held = self._held, []
        if _STARTING is self:
            _STARTING = None
        return held

    def succeeded(self) -> None:
        """The JVM runs: what it wrote while starting reaches the console now."""
        self._restore_fds()
        held = self._close()
        if held:
            with contextlib.suppress(OSError):
                os.write(2, b"".join(held))

    def failed(self) -> list[str]:
        """The start failed: the lines the JVM wrote (all of them once a JVM that exited has
        closed the pipe, which this process no longer writes to); unless verbose, nothing the
        JVM writes from now on reaches the console."""
        self._restore_fds()
        self._thread.join(timeout=START_SETTLE_SECONDS)  # to the end of a closed pipe
        self._close()
        if not self.verbose:
            mute_jvm()
        with self._lock:
            return list(self.lines)


_STARTING: StartCapture | None = None
