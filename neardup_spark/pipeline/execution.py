"""How the pipeline executes: actions run alongside each other, partition sizing, broadcasts,
checkpoints, early start of the Python workers."""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from pyspark import InheritableThread
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from neardup_spark.columns import DOC_ID

log = logging.getLogger(__name__)

# Id lists up to this many rows are broadcast to the large side of a join (tens of MB at most).
BROADCAST_MAX_ROWS = 2_000_000

# Input per Python task of the per-document pass: each Python task costs ~40 ms of fixed work
# (worker hand-off, UDF set-up, Arrow stream) however small; 8 MB local splits in 64 MB tasks cut
# the pass at 100,000 pages from 5.2 to 4.3 s (README, Performance).
PYTHON_TASK_BYTES = 64 * 2**20

# (band key, document) entries one candidates task sorts at most: a large corpus gets more
# partitions than local mode's few (1,000,000 pages x 28 bands in 4 partitions: candidates took
# 26.3 s, 20.3 s in 8 before).
CANDIDATE_ENTRIES_PER_PARTITION = 3_500_000


# Text bytes the verification shuffle puts in one partition at most (each is sorted by pair,
# then scored by one Python task): a fixed 4 partitions held 1.5 GB each at ten million pages.
VERIFY_BYTES_PER_PARTITION = 128 * 2**20


def verify_partitions(spark: SparkSession, side_rows: int, bytes_per_side: float) -> int:
    """Partitions of the shuffle that brings each candidate pair's two texts together."""
    needed = math.ceil(side_rows * bytes_per_side / VERIFY_BYTES_PER_PARTITION)
    return max(shuffle_partitions(spark), needed)


@contextmanager
def shuffle_partitions_at_least(spark: SparkSession, partitions: int) -> Iterator[None]:
    """Plan the queries run inside with at least ``partitions`` shuffle partitions.

    A join of two shuffled sides gets ``spark.sql.shuffle.partitions`` partitions whatever the
    sides were repartitioned to (Spark's EnsureRequirements), so the verification join is sized
    through the setting, for the time of its stage (no other query runs then)."""
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    if partitions <= shuffle_partitions(spark):
        yield
        return
    spark.conf.set(key, str(partitions))
    try:
        yield
    finally:
        spark.conf.set(key, before or "200")


def maybe_broadcast(df: DataFrame, rows: int) -> DataFrame:
    """Broadcast a small table (at most :data:`BROADCAST_MAX_ROWS` rows) so the large side of
    a join is never shuffled."""
    return F.broadcast(df) if rows <= BROADCAST_MAX_ROWS else df


def run_alongside(spark: SparkSession, action: Callable[[], object]) -> Callable[[], None]:
    """Start ``action`` (Spark actions) in its own thread and return ``wait``, which joins it and
    re-raises its error. Jobs from two threads share the cores: one job's driver-side planning
    and last-task tail no longer leave cores idle. Until ``wait``, the caller's jobs carry a job
    tag the action's thread inherits: a failed action cancels those jobs (and no one else's), so
    the caller's own job stops early instead of running to its end."""
    context = spark.sparkContext
    tag = f"neardup-alongside-{uuid.uuid4().hex}"
    context.addJobTag(tag)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            action()
        except BaseException as exc:  # re-raised in the caller's thread by wait()
            errors.append(exc)
            context.cancelJobsWithTag(tag)

    thread = InheritableThread(target=target, daemon=True)
    thread.start()

    def wait() -> None:
        thread.join()
        context.removeJobTag(tag)
        if errors:
            raise errors[0]

    return wait


def run_together(spark: SparkSession, actions: list[Callable[[], object]]) -> None:
    """Run independent Spark actions concurrently; the first error (the one that cancelled the
    others) is raised once all have stopped."""
    waits = [run_alongside(spark, action) for action in actions[:-1]]
    try:
        actions[-1]()
    except Exception:  # (an interrupt is not waited on: it stops the process)
        for wait in waits:  # a background failure cancelled this one: report the cause
            wait()
        raise
    for wait in waits:
        wait()


def _pass_batches(batches: Iterable[Any]) -> Iterator[Any]:
    yield from batches


def start_python_workers(spark: SparkSession) -> Callable[[], None]:
    """In local mode, start the Python workers now, in the background, while the driver reads
    the input's metadata and plans the first stages; returns ``wait``.

    A worker's first task otherwise begins with its imports and the loading of the compiled
    kernels (~1.4 s, done once in :mod:`neardup_spark.runtime.worker_daemon`). The workers stay
    up and serve the job's tasks. A failure here is only logged: the job's own tasks start
    workers anyway, and report any real problem."""
    context = spark.sparkContext
    if not str(context.master).startswith("local"):
        return lambda: None

    def start() -> None:
        try:
            context.setJobDescription("neardup: start Python workers")
            # One task: the daemon preloads once and forks the others in no time; the other
            # cores stay with the driver's planning.
            spark.range(0, 1, 1, 1).mapInArrow(_pass_batches, "id long").collect()
        except Exception as exc:  # see the docstring
            log.debug("starting the Python workers early failed: %r", exc)

    thread = InheritableThread(target=start, daemon=True)
    thread.start()
    return thread.join


def local_checkpoint(df: DataFrame) -> DataFrame:
    """``df`` kept on the executors, its lineage cut."""
    return df.localCheckpoint(eager=True)


def reliable_checkpoint(df: DataFrame) -> DataFrame:
    """``df`` written to the checkpoint directory, its lineage cut."""
    return df.checkpoint(eager=True)


def shuffle_partitions(spark: SparkSession) -> int:
    return int(spark.conf.get("spark.sql.shuffle.partitions") or 200)


def candidate_partitions(spark: SparkSession, entries: int) -> int:
    """Partitions of the candidates stage for ``entries`` (band key, document) entries."""
    return max(shuffle_partitions(spark), math.ceil(entries / CANDIDATE_ENTRIES_PER_PARTITION))


def grouped_input(df: DataFrame) -> tuple[DataFrame, int]:
    """The input with its small splits grouped (coalesce, no shuffle) into tasks of about
    :data:`PYTHON_TASK_BYTES`, in a multiple of the cores so the last round is full; and its
    number of partitions. Every scan of the input pays a fixed cost per task (the per-document
    pass's Python tasks most; also verification's text scan and the ``deduplicated/`` copy,
    whose write at 100,000 pages took 2.1 s in 21 tasks, 1.8 s in 4). On a cluster (128 MB
    splits) nothing changes."""
    spark = df.sparkSession
    cores = spark.sparkContext.defaultParallelism
    parts = df.rdd.getNumPartitions()
    split_bytes = byte_size(spark.conf.get("spark.sql.files.maxPartitionBytes") or "128m")
    splits_per_task = max(1, PYTHON_TASK_BYTES // max(split_bytes, 1))
    tasks = cores * max(1, math.ceil(parts / (cores * splits_per_task)))
    return (df.coalesce(tasks), tasks) if tasks < parts else (df, parts)


def spread(docs: DataFrame, parts: int) -> DataFrame:
    """Partitions for the per-document pass (``docs`` in ``parts`` partitions), which runs one
    Python task per partition.

    A corpus in fewer partitions than cores (one or two large files) would leave cores idle, so
    it is spread over twice the cores (hash partitioning on the id keeps the layout independent
    of task order); with at least one partition per core, shuffling every text costs more than a
    somewhat uneven last round."""
    cores = docs.sparkSession.sparkContext.defaultParallelism
    return docs.repartition(2 * cores, DOC_ID) if parts < cores else docs


def byte_size(text: str) -> int:
    """A Spark size setting ("8m", "134217728b", "134217728") in bytes."""
    text = text.strip().lower()
    units = {"b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30, "gb": 2**30}
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix) and text[: -len(suffix)].strip().isdigit():
            return int(text[: -len(suffix)]) * units[suffix]
    return int(text) if text.isdigit() else 128 * 2**20
