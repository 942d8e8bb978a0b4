"""SIGINT and SIGTERM (Ctrl-C, a cron timeout, Airflow, Kubernetes) end a command quickly and
cleanly: the running Spark jobs are cancelled, the session and its JVM stopped, one line is
printed, and the exit code is 128 + the signal's number (130, 143), as shells report a process
a signal ended.

Within :func:`handle_signals`, both signals cancel every Spark job at once (from a thread of
its own: py4j serves each thread on its own connection) and raise :class:`Interrupted` in the
main thread, a ``BaseException``, so no ``except Exception`` of the job takes it for a job error.
Never inside a py4j call, though: an exception raised there would leave the main thread's
connection with an answer still to come, and every later call (the command's own ``finally``
blocks) would read the wrong one. When the signal finds the main thread in a call to the JVM,
the cancelled job makes that call return (with Spark's "job cancelled" error, which the command
line reports as the interruption), and a watcher delivers the interrupt if the main thread is
still going :data:`DELIVERY_GRACE_SECONDS` after it left py4j. The command's ``finally``
blocks release its locks; nothing is committed that was not committed before the signal, and a
rerun resumes from the stages kept under ``OUTPUT/_staging/``. If the process is still there
:data:`STOP_SECONDS` after the signal, or at a second signal, the JVM is killed and the process
exits at once.
"""

from __future__ import annotations

import _thread
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from neardup_spark.runtime import console
from neardup_spark.runtime.engine import CLASSIC, engine_of

log = logging.getLogger(__name__)

STOP_SECONDS = 8.0
SIGNALS = (signal.SIGINT, signal.SIGTERM)
_POLL_SECONDS = 0.02
# Usually the cancelled job's error ends the command within milliseconds of its call's return,
# through the command's own clean-up (locks released), which an interrupt raised there would
# cut short; only a command still running after this long out of py4j is interrupted.
DELIVERY_GRACE_SECONDS = 1.0


class Interrupted(BaseException):
    """The command got SIGINT or SIGTERM."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    active = False  # inside handle_signals
    signum: int | None = None  # the first signal received
    delivered = False  # Interrupted raised in the main thread
    session: Any = None  # the session whose jobs a signal cancels (watch)


def watch(spark: Any) -> None:
    """The session a signal stops: its jobs (classic) or operations (Spark Connect) are
    cancelled, then it is stopped."""
    _State.session = spark


def _watched() -> Any:
    """The watched session, else the classic session this process runs (if any)."""
    if _State.session is not None:
        return _State.session
    try:
        from pyspark.sql import SparkSession

        return SparkSession._instantiatedSession  # type: ignore[attr-defined]
    except Exception:  # pyspark-client has no classic session
        return None


def received() -> int | None:
    """The signal this command got (SIGINT, SIGTERM), or None."""
    return _State.signum


def _in_py4j(frame: FrameType | None) -> bool:
    while frame is not None:
        if f"{os.sep}py4j{os.sep}" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _deliver_when_out_of_py4j(signum: int) -> None:
    main = threading.main_thread().ident
    out_since: float | None = None
    while not _State.delivered:
        frame = sys._current_frames().get(main) if main is not None else None
        if frame is None:
            return
        if _in_py4j(frame):
            out_since = None
        elif out_since is None:
            out_since = time.monotonic()
        elif time.monotonic() - out_since >= DELIVERY_GRACE_SECONDS:
            _thread.interrupt_main(signal.Signals(signum))  # the handler again, in main
            return
        time.sleep(_POLL_SECONDS)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _State.signum is None:
        _State.signum = signum
        threading.Thread(target=cancel_jobs, name="neardup-cancel", daemon=True).start()
        watchdog = threading.Timer(STOP_SECONDS, _kill_jvm_and_exit, args=(128 + signum,))
        watchdog.daemon = True
        watchdog.start()
    elif _State.delivered:  # a second signal while stopping: do not wait
        _kill_jvm_and_exit(128 + _State.signum)
    if _in_py4j(frame):
        threading.Thread(
            target=_deliver_when_out_of_py4j, args=(signum,), name="neardup-interrupt", daemon=True
        ).start()
        return
    _State.delivered = True
    raise Interrupted(_State.signum)


def install() -> None:
    """(Re)install the handlers while :func:`handle_signals` is active: PySpark's context
    replaces the SIGINT handler with its own when it starts, whose py4j call from inside the
    handler is the one to avoid."""
    if _State.active and threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, _on_signal)


@contextmanager
def handle_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM stop the command (:class:`Interrupted`); the
    previous handlers are restored after. Main thread only; elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    _State.active, _State.signum, _State.delivered = True, None, False
    install()
    try:
        yield
    finally:
        _State.active = False
        _State.delivered = True  # no interrupt is delivered after the block
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _quiet() -> None:
    # What the JVM and py4j say while they are stopped under running jobs is not for the user.
    console.mute_jvm()
    for name in ("py4j", "py4j.clientserver", "py4j.java_gateway", "pyspark"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def cancel_jobs() -> None:
    """Silence Spark's log and cancel every running job of this process's session (a Spark
    Connect server's operations by ``interruptAll``)."""
    _quiet()
    try:
        session = _watched()
        if session is not None:
            engine_of(session).cancel_all()
    except Exception as exc:  # a JVM already gone, a server not answering: nothing to cancel
        log.debug("cancelling Spark jobs: %s", exc)


def _gateway_process() -> Any:
    """The JVM this process started (PySpark's gateway), or None (Spark Connect: none)."""
    session = _watched()
    if session is None or engine_of(session).kind != CLASSIC:
        return None
    from pyspark import SparkContext

    return getattr(getattr(SparkContext, "_gateway", None), "proc", None)


def _kill_jvm_and_exit(code: int) -> None:
    proc = _gateway_process()
    if proc is not None and proc.poll() is None:
        proc.kill()
    sys.stderr.flush()
    os._exit(code)


def _stop_context() -> None:
    try:
        session = _watched()
        if session is not None:
            session.stop()
    except Exception as exc:  # stopping what already broke: the exit code is what matters
        log.debug("stopping Spark after a signal: %s", exc)


def stop_spark() -> None:
    """Stop the session (from a fresh thread) and end its JVM, within what is left of
    :data:`STOP_SECONDS` (the watchdog started at the signal ends the process after that)."""
    _quiet()
    stopper = threading.Thread(target=_stop_context, name="neardup-stop", daemon=True)
    stopper.start()
    stopper.join(STOP_SECONDS / 2)
    proc = _gateway_process()
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=2)
        except Exception:  # still there: kill it
            proc.kill()
