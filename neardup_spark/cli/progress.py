"""Progress of a run on the console, from what Spark says of its stages (the status tracker of
a classic session, the progress handler of a Spark Connect one: :meth:`~neardup_spark.runtime.
engine.Engine.progress_source`) and the stage running now.

On a terminal: one live line per stage, redrawn twice a second (tasks done/total of the Spark
stages the stage has run so far, documents per second once the run has counted its documents,
elapsed, ETA of the Spark stages running),
replaced by the stage's own log line (``stage=NAME rows=N seconds=S``) when it ends. Elsewhere
(cron, Airflow): a plain log line every 30 s while a stage runs. A thread of its own polls
(a few py4j calls per tick); the timed stages never wait for it.
"""

from __future__ import annotations

import logging
import shutil
import sys
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import IO, Any

from pyspark.sql import SparkSession

from neardup_spark.pipeline.reporting import RunningStage, running_stage
from neardup_spark.runtime.engine import ProgressSource, engine_of

log = logging.getLogger("neardup_spark.progress")

LIVE_INTERVAL = 0.5
LOG_INTERVAL = 30.0
CLEAR_LINE = "\r\x1b[K"


@dataclass(frozen=True)
class Snapshot:
    """What one tick shows."""

    stage: str
    done: int  # tasks completed in the Spark stages this neardup stage has run so far
    total: int  # their tasks
    elapsed: float  # seconds since the neardup stage started
    eta: float | None  # seconds left in the Spark stages running now (None: not yet known)
    docs_per_second: float | None


def clock(seconds: float) -> str:
    """``75`` -> ``"1:15"``; ``3725`` -> ``"1:02:05"``."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def live_line(snap: Snapshot) -> str:
    """The terminal's line for ``snap``."""
    tasks = f"{snap.done:,}/{snap.total:,} tasks" if snap.total else "starting"
    parts = [f"{snap.stage:<11}", tasks]
    if snap.docs_per_second is not None:
        parts.append(f"{snap.docs_per_second:,.0f} docs/s")
    parts.append(f"{clock(snap.elapsed)} elapsed")
    parts.append(f"ETA {clock(snap.eta)}" if snap.eta is not None else "ETA -")
    return "  ".join(parts)


def log_fields(snap: Snapshot) -> str:
    """The plain log line's fields for ``snap``."""
    rate = f"{snap.docs_per_second:.0f}" if snap.docs_per_second is not None else "-"
    eta = f"{snap.eta:.0f}" if snap.eta is not None else "-"
    return (
        f"stage={snap.stage} tasks={snap.done}/{snap.total} docs_per_second={rate} "
        f"elapsed={snap.elapsed:.0f} eta={eta}"
    )


class StageProgress:
    """``with StageProgress(source): run(...)`` shows the run's progress on ``stream`` (default
    stderr); ``source``: :func:`progress_of` a session."""

    def __init__(self, source: ProgressSource, stream: IO[str] | None = None) -> None:
        self._tracker = source
        self._stream = stream or sys.stderr
        self.live = self._stream.isatty()
        self._interval = LIVE_INTERVAL if self.live else LOG_INTERVAL
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._first_seen: dict[int, float] = {}  # Spark stage id -> when this thread saw it
        self._stage: RunningStage | None = None  # the neardup stage of the last tick
        self._spark_stages: set[int] = set()  # the Spark stages it has run
        self._shown = False  # a live line is on the terminal
        self._thread = threading.Thread(target=self._loop, name="neardup-progress", daemon=True)
        self._clearing = _ClearBeforeRecords(self)

    def __enter__(self) -> StageProgress:
        if self.live:  # log lines (a stage's end) replace the live line
            for handler in logging.getLogger().handlers:
                handler.addFilter(self._clearing)
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.clear()
        for handler in logging.getLogger().handlers:
            handler.removeFilter(self._clearing)

    def clear(self) -> None:
        """Take the live line off the terminal."""
        with self._lock:
            if self._shown:
                self._stream.write(CLEAR_LINE)
                self._stream.flush()
                self._shown = False

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.tick()
            except Exception as exc:  # a progress display must never fail the run
                log.debug("progress display: %r", exc)

    def snapshot(self, stage: RunningStage) -> Snapshot:
        """Tasks of the Spark stages the neardup stage has run so far (those still running, and
        those done since it started), and what the running ones say of the time left."""
        now = time.perf_counter()
        if stage is not self._stage:
            self._stage, self._spark_stages = stage, set()
        active = set(self._tracker.active_stage_ids())
        self._spark_stages |= active
        done = total = 0
        eta: float | None = None
        for stage_id in sorted(self._spark_stages):
            info = self._tracker.stage_tasks(stage_id)
            if info is None:  # no longer tracked
                continue
            completed, tasks = info
            done, total = done + completed, total + tasks
            seen = self._first_seen.setdefault(stage_id, now)
            if stage_id in active and completed:
                left = (now - seen) * (tasks - completed)
                eta = max(eta or 0.0, left / completed)
        elapsed = now - stage.started
        rate = None
        if stage.documents and done and elapsed > 0:
            rate = stage.documents * done / total / elapsed
        return Snapshot(stage.name, done, total, elapsed, eta, rate)

    def tick(self) -> None:
        stage = running_stage()
        if stage is None:
            self.clear()
            return
        snap = self.snapshot(stage)
        if not self.live:
            log.info("%s", log_fields(snap))
            return
        width = shutil.get_terminal_size((100, 20)).columns - 1
        with self._lock:
            self._stream.write(CLEAR_LINE + live_line(snap)[:width])
            self._stream.flush()
            self._shown = True


class _ClearBeforeRecords(logging.Filter):
    """Clears the live line before a log record is written below it."""

    def __init__(self, progress: StageProgress) -> None:
        super().__init__()
        self._progress = progress

    def filter(self, record: Any) -> bool:
        self._progress.clear()
        return True


def progress_of(spark: SparkSession) -> ProgressSource:
    """Where the display reads the progress of ``spark``'s jobs."""
    return engine_of(spark).progress_source()
