"""The console: Spark's start-up noise filtered, a live progress line per stage on a terminal
(plain log lines elsewhere), and a user error that prints only neardup's own lines, however the
id check's cancellation of the per-document pass falls."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections import namedtuple
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.cli.progress import Snapshot, StageProgress, clock, live_line, log_fields
from neardup_spark.pipeline.reporting import StageTimer, running_stage
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.runtime.console import (
    NOISE,
    StartCapture,
    _copy_lines,
    mute_jvm,
    unmute_jvm,
)
from neardup_spark.runtime.faults import SLOW_BATCH_ENV

REPO = Path(__file__).resolve().parents[2]
StageInfo = namedtuple("StageInfo", "numTasks numCompletedTasks")


def test_the_filter_drops_only_the_known_noise():
    lines = [
        "WARNING: Using incubator modules: jdk.incubator.vector",
        "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
        'Setting default log level to "WARN".',
        "To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(...).",
        "26/12/01 19:31:49 ERROR Executor: Exception in task 0.0",
        "java.lang.OutOfMemoryError: Java heap space",
    ]
    assert [bool(NOISE.match(line)) for line in lines] == [True] * 4 + [False] * 2
    # As a new JVM's stderr is (StartCapture): a test before this one in the process may
    # have ended a command on an error, which mutes the JVM's stderr (found in a loaded run).
    unmute_jvm()
    copied = copied_lines("\n".join(lines) + "\nno newline at the end")
    assert copied == [*lines[4:], "no newline at the end"]


def copied_lines(text: str) -> list[str]:
    """What the JVM stderr filter's copier passes on of ``text``."""
    read_end, write_end = os.pipe()
    out_read, out_write = os.pipe()
    copier = threading.Thread(target=_copy_lines, args=(read_end, out_write))
    copier.start()
    os.write(write_end, text.encode())
    os.close(write_end)
    copier.join(timeout=10)
    os.close(out_write)
    with open(out_read, encoding="utf-8") as copied:
        return copied.read().splitlines()


def test_a_muted_jvm_stderr_is_dropped_until_a_new_jvm_unmutes_it(capfd):
    """A command ending on an error it reports itself mutes what the JVM writes from then on;
    the next JVM this process starts (its stderr filtered through a StartCapture, here fd 2 of
    this process) is heard again."""
    line = "26/12/01 19:31:49 ERROR Executor: Exception in task 0.0"
    try:
        mute_jvm()
        assert copied_lines(line + "\n") == []
        capfd.readouterr()
        start = StartCapture(verbose=False)  # as a new session does, before its JVM starts
        os.write(2, (line + "\n").encode())  # fd 2 is the filter's pipe, as the JVM's is
        deadline = time.monotonic() + 10
        while not start.lines and time.monotonic() < deadline:  # the copier's turn
            time.sleep(0.02)
        start.succeeded()  # the JVM runs: what it wrote while starting is passed on
        assert capfd.readouterr().err.splitlines() == [line]
    finally:
        unmute_jvm()


class FakeTracker:
    """A progress source for one stage of 40 tasks, 10 of them done."""

    def active_stage_ids(self):
        return [7]

    def stage_tasks(self, stage_id):
        return (10, 40)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_live_line_per_stage_on_a_terminal():
    screen = Terminal()
    progress = StageProgress(FakeTracker(), screen)
    assert progress.live
    timer = StageTimer(documents=1000)
    with timer.stage("verify"):
        progress.tick()
        progress.tick()
    progress.tick()  # no stage running: the line is taken off
    drawn = screen.getvalue().split("\r\x1b[K")
    assert re.fullmatch(r"verify +10/40 tasks  [\d,]+ docs/s  0:00 elapsed  ETA 0:00", drawn[1])
    assert drawn[1:] == [drawn[1], drawn[2], ""] and drawn[2].startswith("verify")


class TwoStageTracker:
    """Spark stage 7 (40 tasks) runs, then stage 8 (10 tasks) while 7 is done."""

    def __init__(self) -> None:
        self.active = [7]
        self.infos = {7: StageInfo(40, 10), 8: StageInfo(10, 0)}

    def active_stage_ids(self):
        return self.active

    def stage_tasks(self, stage_id):
        info = self.infos[stage_id]
        return (info.numCompletedTasks, info.numTasks)


def test_tasks_add_up_over_the_spark_stages_a_stage_runs():
    tracker = TwoStageTracker()
    progress = StageProgress(tracker, io.StringIO())
    timer = StageTimer(documents=500)
    with timer.stage("candidates"):
        first = progress.snapshot(running_stage())
        tracker.active, tracker.infos = [8], {7: StageInfo(40, 40), 8: StageInfo(10, 4)}
        second = progress.snapshot(running_stage())
    assert (first.done, first.total, second.done, second.total) == (10, 40, 44, 50)
    with timer.stage("verify"):  # a new stage starts counting afresh
        assert progress.snapshot(running_stage()).total == 10


def test_plain_log_lines_elsewhere(caplog):
    progress = StageProgress(FakeTracker(), io.StringIO())
    assert not progress.live
    with (
        caplog.at_level(logging.INFO, logger="neardup_spark.progress"),
        StageTimer().stage("sketch"),
    ):
        progress.tick()
    [line] = [r.getMessage() for r in caplog.records if "tasks=" in r.getMessage()]
    assert re.fullmatch(r"stage=sketch tasks=10/40 docs_per_second=- elapsed=0 eta=\d+", line)


def test_progress_formats():
    assert (clock(75), clock(3725)) == ("1:15", "1:02:05")
    snap = Snapshot("candidates", 3, 8, 95.2, 40.0, 12345.6)
    assert live_line(snap) == "candidates   3/8 tasks  12,346 docs/s  1:35 elapsed  ETA 0:40"
    assert log_fields(snap) == (
        "stage=candidates tasks=3/8 docs_per_second=12346 elapsed=95 eta=40"
    )


OWN_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ INFO neardup_spark\.progress: stage=\w+ "
    r"|error: ids in column 'id' are not unique: 'doc-0+' \(2x\), 'doc-0+1' \(2x\)$)"
)


def duplicate_ids_run(
    tmp_path: Path, docs: int, *extra: str, verbose: bool = False, env=None
) -> list[str]:
    """``neardup dedupe`` of a generated corpus whose ids 0 and 1 appear twice: exit 2; the
    lines of its stderr."""
    table, _ = generate_corpus(docs, seed=4, mean_words=150)
    ids = table["id"].to_pylist()
    ids[2], ids[3] = ids[0], ids[1]
    corpus = tmp_path / "dup.parquet"
    if not corpus.exists():
        pq.write_table(table.set_column(0, "id", pa.array(ids)), corpus)
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
    args = [*(["-v"] if verbose else []), "dedupe", str(corpus), str(out), "--master", "local[2]"]
    done = subprocess.run(
        [sys.executable, "-m", "neardup_spark", *args, *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})},
        cwd=REPO,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    return done.stderr.splitlines()


def assert_own_lines_only(lines: list[str]) -> None:
    assert [line for line in lines if not OWN_LINE.match(line)] == []
    assert sum(line.startswith("error: ") for line in lines) == 1


@pytest.mark.slow
def test_a_user_error_prints_only_neardups_own_lines(tmp_path):
    """Duplicate ids: the id check fails while the per-document pass runs and cancels it, or
    once it has ended (the two jobs share the cores). Stderr holds only the ``error:`` line and
    the stage log lines: no Spark start-up noise, no worker traceback. ``-v`` brings Spark's own
    console back. (Cancelling busy tasks, deterministically: the next test.)"""
    (tmp_path / "verbose").mkdir()  # Spark's console is there whatever the corpus's size
    verbose = duplicate_ids_run(tmp_path / "verbose", 300, verbose=True)
    assert any("log4j" in line or " WARN " in line for line in verbose), verbose
    assert_own_lines_only(duplicate_ids_run(tmp_path, 3000))


# A command's session stopped as the command ends on a job failure, then on a user error; the
# JVM (still running: PySpark keeps it for the next session) writes to its stderr after each.
STOPPED_ON_AN_ERROR = """
import time
from neardup_spark.cli.app import configure_logging
from neardup_spark.config import SessionSettings
from neardup_spark.errors import UserError
from neardup_spark.runtime.session import build_session, stop_session
configure_logging(False)
for error in (RuntimeError("a job failure"), UserError("bad input")):
    spark = build_session(SessionSettings(master="local[1]"))
    jvm = spark.sparkContext._jvm
    try:
        try:
            raise error
        finally:
            stop_session(spark)
    except Exception:
        pass
    jvm.java.lang.System.err.println(f"the JVM after a {type(error).__name__}")
    time.sleep(1)  # the console filter copies the line
"""


@pytest.mark.slow
def test_the_jvm_is_not_shown_after_a_user_error_but_is_after_a_failure():
    """A command ending on a user error (exit 2) reports it in one line: what the JVM says as
    its session is stopped is not shown (a JSON corpus's schema-inference task, finishing as
    Spark stopped, logged a 25-line stack trace about its broadcast in one run of three). After
    a job failure (exit 1) the JVM's lines still reach the console."""
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_ON_AN_ERROR],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the JVM after a RuntimeError" in done.stderr
    assert "the JVM after a UserError" not in done.stderr


SKETCH_LINE = re.compile(r"neardup_spark\.progress: stage=sketch rows=(\S+) ")


@pytest.mark.slow
def test_a_user_error_cancelling_busy_tasks_prints_only_neardups_own_lines(tmp_path):
    """The cancellation point the repeated runs above could only hope for, made certain: the
    per-document pass in one task (spark.default.parallelism=1) whose batch is held busy
    (NEARDUP_SLOW_BATCH_MARKER), the id check on the other core, held until that batch is busy
    (faults.wait_for_a_busy_batch_if_asked). The marker shows the task ran; the sketch stage
    ends without its rows (cut short). Stderr: neardup's lines only."""
    busy = tmp_path.parent / f"{tmp_path.name}-busy"
    # the pass as Spark tasks: read here, the ids are checked before any batch
    one_task = ("--set", "spark.default.parallelism=1", "--set", "plan.sketch=spark")
    lines = duplicate_ids_run(tmp_path, 300, *one_task, env={SLOW_BATCH_ENV: str(busy)})
    assert busy.exists()  # a batch of the pass was running when the check failed
    sketch = [m.group(1) for line in lines if (m := SKETCH_LINE.search(line))]
    assert sketch == ["-"], lines  # the pass was cut short: no rows counted
    assert_own_lines_only(lines)


# A real py4j client against a socket that accepts each connection and closes it: py4j logs
# ``Exception while sending command.`` with a stack trace on the root logger and answers "x".
DROPPED_CONNECTION = """
import logging, socket, sys, threading
from py4j.clientserver import logger as clientserver_logger
from py4j.java_gateway import GatewayClient, GatewayParameters
from neardup_spark.cli.app import configure_logging
configure_logging(sys.argv[1] == "verbose")
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
def serve():
    while True:
        conn, _ = server.accept()
        conn.recv(1024)
        conn.close()
threading.Thread(target=serve, daemon=True).start()
client = GatewayClient(gateway_parameters=GatewayParameters(port=server.getsockname()[1]))
assert client.send_command("c\\no0\\ntoString\\ne\\n") == "x"
clientserver_logger.error("an error py4j logs on its own logger")
logging.getLogger("neardup_spark.cli").warning("our own line")
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_py4j_tracebacks_of_a_dropped_jvm_connection_stay_off_the_console(verbose):
    """When the JVM's connection drops under a py4j call (a thread still talking to the JVM as
    a signal stops it), py4j logs a stack trace on the root logger (and errors on its own). The
    command line's console leaves py4j's records out (the call fails, and the command says so
    in its own line); ``-v`` keeps them."""
    level = "verbose" if verbose else "quiet"
    done = subprocess.run(
        [sys.executable, "-c", DROPPED_CONNECTION, level], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "our own line" in done.stderr
    py4j_lines = ("Exception while sending command.", "Traceback", "on its own logger")
    assert [line in done.stderr for line in py4j_lines] == [verbose] * 3, done.stderr


def closed_stdout_run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """``neardup ARGS`` in a process of its own whose standard output's reader is gone (as
    ``neardup ... | head`` once head has exited): its exit code and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "neardup_spark", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    proc.stdout.close()  # type: ignore[union-attr]
    _, stderr = proc.communicate(timeout=120)
    return proc.returncode, stderr


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_a_closed_standard_output_ends_the_command_with_one_line_and_141(buffered):
    """The reader of stdout went away before the command printed: no traceback, no "Exception
    ignored" at exit; one ``error:`` line and the exit code of a process SIGPIPE ended. With
    stdout open the same command prints and exits 0. Buffered (Python's default for a pipe),
    the few lines printed would reach the pipe only at exit (exit 120 there), so the command
    flushes them itself; unbuffered (PYTHONUNBUFFERED), each print meets the closed pipe."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    args = ("fingerprint", "a text of a few words to sketch here", "--method", "minhash")
    code, stderr = closed_stdout_run(*args, env=env)
    assert code == 141, stderr
    assert stderr.splitlines() == [
        "error: standard output was closed (broken pipe); nothing more is printed, and what "
        "the command committed stays committed"
    ]
    done = subprocess.run(
        [sys.executable, "-m", "neardup_spark", *args], cwd=REPO, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "") and "sketch" in done.stdout
