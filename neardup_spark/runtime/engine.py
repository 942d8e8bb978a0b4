"""The one place that knows what kind of session a run has, and the few things done differently.

* **classic**: a SparkContext and its JVM, in this process (local mode, the Python API) or
  spark-submit's. Job tags, the status tracker, Hadoop's file systems through py4j.
* **connect**: a Spark Connect client (``--remote sc://HOST:PORT``, ``SPARK_REMOTE``, a Databricks
  notebook or ``pyspark-client``): no SparkContext, no JVM, no RDDs, no broadcast variables or
  accumulators. Operation tags and ``interruptTag``, a progress handler, the driver's own file
  systems (:mod:`neardup_spark.io.filesystem`'s PyArrow storage).

:func:`engine_of` decides once per session (by the session's class: a Connect session is
``pyspark.sql.connect.session.SparkSession``) and the rest of the code asks its :class:`Engine`.
Nothing in :class:`ConnectEngine` touches ``sparkContext``, ``_jvm`` or py4j; nothing in this
module imports them at the top, so it loads where only ``pyspark-client`` is installed.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup_spark.runtime import spark_compat

log = logging.getLogger(__name__)

CLASSIC, CONNECT = "classic", "connect"


class ProgressSource(Protocol):
    """What the console's progress display reads: the Spark stages running now, and how far
    each stage (running or done) has got."""

    def active_stage_ids(self) -> list[int]: ...

    def stage_tasks(self, stage_id: int) -> tuple[int, int] | None:
        """(completed tasks, tasks) of a stage, None when no longer known."""
        ...


class Engine(Protocol):
    """What a run needs of its session beyond the DataFrame API both kinds share."""

    kind: str
    spark: SparkSession

    def master(self) -> str:
        """The master (classic) or the server's master as it reports it (connect)."""
        ...

    def default_parallelism(self) -> int:
        """Tasks Spark runs at once by default (the cores of local mode, of the executors)."""
        ...

    def partitions(self, df: DataFrame) -> int | None:
        """How many partitions ``df`` has; None when only an estimate from its input files
        can tell (Connect)."""
        ...

    def add_tag(self, tag: str) -> None:
        """Tag the jobs this thread (and the threads it starts) runs from now on."""
        ...

    def remove_tag(self, tag: str) -> None: ...

    def cancel_tag(self, tag: str) -> None:
        """Cancel the running jobs tagged ``tag`` (from any thread)."""
        ...

    def cancel_all(self) -> None:
        """Cancel every running job of this session (from any thread)."""
        ...

    def describe_jobs(self, text: str | None) -> None:
        """The description the Spark UI shows for this thread's next jobs (classic only)."""
        ...

    def hadoop_configuration(self) -> Any | None:
        """The JVM's Hadoop configuration (classic), None where there is no JVM here."""
        ...

    def from_arrow(self, table: pa.Table) -> DataFrame:
        """A DataFrame of an Arrow table built on the driver."""
        ...

    def from_arrow_batches(self, table: pa.Table) -> DataFrame:
        """:meth:`from_arrow` for tables sized by the batch: never a local relation of row
        objects in the driver's JVM (classic)."""
        ...

    def checkpointer(self, directory: str) -> Callable[[DataFrame], DataFrame]:
        """A function that writes a DataFrame under ``directory`` and gives it back with its
        lineage cut (an iterative algorithm's rounds)."""
        ...

    def progress_source(self) -> ProgressSource: ...

    def quiet(self, level: str) -> None:
        """Spark's own log level on the console (classic; a Connect server logs its own)."""
        ...


def is_connect(spark: SparkSession) -> bool:
    """True for a Spark Connect session (``pyspark.sql.connect``'s class)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


_ENGINES: dict[int, tuple[SparkSession, Engine]] = {}
_ENGINES_LOCK = threading.Lock()


def engine_of(spark: SparkSession) -> Engine:
    """The :class:`Engine` of ``spark``, decided on first use."""
    with _ENGINES_LOCK:
        known = _ENGINES.get(id(spark))
        if known is not None and known[0] is spark:
            return known[1]
        made: Engine = ConnectEngine(spark) if is_connect(spark) else ClassicEngine(spark)
        _ENGINES[id(spark)] = (spark, made)
        return made


def from_arrow(spark: SparkSession, table: pa.Table) -> DataFrame:
    """A DataFrame of an Arrow table built on the driver (:meth:`Engine.from_arrow`)."""
    return engine_of(spark).from_arrow(table)


def from_arrow_batches(spark: SparkSession, table: pa.Table) -> DataFrame:
    """:meth:`Engine.from_arrow_batches`: for tables sized by the batch."""
    return engine_of(spark).from_arrow_batches(table)


def default_parallelism(spark: SparkSession) -> int:
    """:meth:`Engine.default_parallelism`."""
    return engine_of(spark).default_parallelism()


def inheritable_thread(spark: SparkSession, target: Callable[[], None]) -> threading.Thread:
    """A daemon thread whose Spark jobs carry this thread's tags and job properties.

    Connect keeps tags per thread and per session, so PySpark 4's ``InheritableThread`` is
    given the session; a classic session's properties come from its SparkContext, and
    PySpark 3.5's ``InheritableThread`` has no ``session`` argument at all."""
    from pyspark import InheritableThread

    if not is_connect(spark):
        return InheritableThread(target=target, daemon=True)
    try:
        return InheritableThread(target=target, daemon=True, session=spark)  # type: ignore[call-arg]
    except TypeError:  # a 3.5 client: its tags are not inherited, which only narrows Ctrl-C
        return InheritableThread(target=target, daemon=True)


def jvm_running() -> bool:
    """True when this process already talks to a JVM (a classic session built before, or
    spark-submit's gateway): a classic builder then launches no new one."""
    from pyspark import SparkContext

    return getattr(SparkContext, "_gateway", None) is not None


class ClassicEngine:
    """A session with a SparkContext: everything through it, as PySpark's own API does."""

    kind = CLASSIC

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._context = spark.sparkContext

    def master(self) -> str:
        return str(self._context.master)

    def default_parallelism(self) -> int:
        return int(self._context.defaultParallelism)

    def partitions(self, df: DataFrame) -> int | None:
        return int(df.rdd.getNumPartitions())

    def add_tag(self, tag: str) -> None:
        self._context.addJobTag(tag)

    def remove_tag(self, tag: str) -> None:
        self._context.removeJobTag(tag)

    def cancel_tag(self, tag: str) -> None:
        self._context.cancelJobsWithTag(tag)

    def cancel_all(self) -> None:
        self._context.setLogLevel("OFF")  # the tasks a cancelled job loses are not news
        self._context.cancelAllJobs()

    def describe_jobs(self, text: str | None) -> None:
        self._context.setJobDescription(text)  # type: ignore[arg-type]

    def hadoop_configuration(self) -> Any | None:
        return self._context._jsc.hadoopConfiguration()  # type: ignore[union-attr]

    def from_arrow(self, table: pa.Table) -> DataFrame:
        return spark_compat.from_arrow(self.spark, table)

    def from_arrow_batches(self, table: pa.Table) -> DataFrame:
        return spark_compat.from_arrow_batches(self.spark, table)

    def checkpointer(self, directory: str) -> Callable[[DataFrame], DataFrame]:
        self._context.setCheckpointDir(directory)
        return lambda df: df.checkpoint(eager=True)

    def progress_source(self) -> ProgressSource:
        return TrackerProgress(self._context.statusTracker())

    def quiet(self, level: str) -> None:
        self._context.setLogLevel(level)


class TrackerProgress:
    """Classic progress: the SparkContext's status tracker."""

    def __init__(self, tracker: Any) -> None:
        self._tracker = tracker

    def active_stage_ids(self) -> list[int]:
        return list(self._tracker.getActiveStageIds())

    def stage_tasks(self, stage_id: int) -> tuple[int, int] | None:
        info = self._tracker.getStageInfo(stage_id)
        return None if info is None else (int(info.numCompletedTasks), int(info.numTasks))


def local_cores(master: str) -> int:
    """Worker threads of a ``local``, ``local[N]``, ``local[*]`` or ``local[N,F]`` master."""
    inside = master[master.index("[") + 1 : master.rindex("]")] if "[" in master else "1"
    threads = inside.split(",")[0].strip()
    if threads == "*":
        return os.cpu_count() or 1
    return max(1, int(threads)) if threads.isdigit() else 1


# The server's default parallelism, measured once per session (no setting tells it over
# Connect): the partitions Spark gives a range of this many rows when none are asked for.
_PARALLELISM_PROBE_ROWS = 1 << 20


class ConnectEngine:
    """A Spark Connect session: operation tags, the progress handler, no JVM in this process."""

    kind = CONNECT

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._parallelism: int | None = None
        self._progress: HandlerProgress | None = None
        self._run_tag: str | None = None

    def tag_run(self) -> None:
        """Tag every operation this thread (and those it starts) runs from now on as this
        run's, so that :meth:`cancel_all` interrupts exactly them (a notebook's session may
        run other work)."""
        self._run_tag = f"neardup-run-{uuid.uuid4().hex}"
        self.spark.addTag(self._run_tag)

    def master(self) -> str:
        return str(self.spark.conf.get("spark.master", None) or "connect")

    def default_parallelism(self) -> int:
        master = self.master()
        configured = self.spark.conf.get("spark.default.parallelism", None)
        if self._parallelism is None and master.startswith("local") and not configured:
            self._parallelism = local_cores(master)  # a local master's: its cores, no job
        if self._parallelism is None:
            probe = self.spark.range(0, _PARALLELISM_PROBE_ROWS).select(
                F.spark_partition_id().alias("p")
            )
            row = probe.agg(F.countDistinct("p").alias("n")).first()
            self._parallelism = max(1, int(row["n"])) if row is not None else 1
        return self._parallelism

    def partitions(self, df: DataFrame) -> int | None:
        """Over Connect a DataFrame's partitions are not known without running it: None for a
        scan of files (the caller estimates them from the files' sizes, as Spark splits
        them); for anything else, the count of a cheap pass that reads no column."""
        if df.inputFiles():
            return None
        row = (
            df.select(F.spark_partition_id().alias("p"))
            .agg(F.countDistinct("p").alias("n"))
            .first()
        )
        return max(1, int(row["n"])) if row is not None else 1

    def add_tag(self, tag: str) -> None:
        self.spark.addTag(tag)

    def remove_tag(self, tag: str) -> None:
        self.spark.removeTag(tag)

    def cancel_tag(self, tag: str) -> None:
        self.spark.interruptTag(tag)

    def cancel_all(self) -> None:
        if self._run_tag is not None:
            self.spark.interruptTag(self._run_tag)
        else:
            self.spark.interruptAll()

    def describe_jobs(self, text: str | None) -> None:
        return None  # no job descriptions over Connect; the UI shows the operation's plan

    def hadoop_configuration(self) -> Any | None:
        return None

    def from_arrow(self, table: pa.Table) -> DataFrame:
        if not table.num_rows:  # Connect infers no schema from an empty table
            from pyspark.sql.pandas.types import from_arrow_schema

            return self.spark.createDataFrame(table, schema=from_arrow_schema(table.schema))
        return self.spark.createDataFrame(table)

    def from_arrow_batches(self, table: pa.Table) -> DataFrame:
        return self.from_arrow(table)  # the server caches a large local relation

    def checkpointer(self, directory: str) -> Callable[[DataFrame], DataFrame]:
        """Reliable checkpoints need the server's ``spark.checkpoint.dir`` (a static setting):
        each round is written as Parquet under ``directory`` and read back instead, which cuts
        the lineage the same way."""
        rounds = iter(range(1 << 30))
        spark = self.spark

        def checkpoint(df: DataFrame) -> DataFrame:
            path = f"{directory.rstrip('/')}/round-{next(rounds):05d}"
            df.write.mode("overwrite").parquet(path)
            return spark.read.parquet(path)

        return checkpoint

    def progress_source(self) -> ProgressSource:
        if self._progress is None:
            self._progress = HandlerProgress()
            self.spark.registerProgressHandler(self._progress)  # type: ignore[attr-defined]
        return self._progress

    def quiet(self, level: str) -> None:
        return None


class HandlerProgress:
    """Connect progress: what the server reports with each operation's responses
    (``registerProgressHandler``, Spark 4), kept for the display's thread to read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stages: dict[int, tuple[int, int, bool]] = {}  # id -> (completed, tasks, done)

    def __call__(
        self, stages: Any, inflight_tasks: int, operation_id: str | None, done: bool
    ) -> None:
        with self._lock:
            for stage in stages or ():
                self._stages[stage.stage_id] = (
                    stage.num_completed_tasks,
                    stage.num_tasks,
                    bool(stage.done or done),
                )

    def active_stage_ids(self) -> list[int]:
        with self._lock:
            return [k for k, (_, _, finished) in self._stages.items() if not finished]

    def stage_tasks(self, stage_id: int) -> tuple[int, int] | None:
        with self._lock:
            known = self._stages.get(stage_id)
        return None if known is None else (known[0], known[1])


@contextmanager
def tagged(spark: SparkSession, tag: str) -> Iterator[None]:
    """The jobs this thread runs inside the block carry ``tag``."""
    eng = engine_of(spark)
    eng.add_tag(tag)
    try:
        yield
    finally:
        eng.remove_tag(tag)
