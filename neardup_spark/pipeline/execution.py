"""How the pipeline executes: actions run alongside each other, partition sizing, broadcasts,
checkpoints, early start of the Python workers."""

from __future__ import annotations

import logging
import math
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup_spark.columns import DOC_A, DOC_ID
from neardup_spark.io.paths import from_spark_uri
from neardup_spark.io.storage import storage_for
from neardup_spark.runtime import console
from neardup_spark.runtime.engine import engine_of, inheritable_thread

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


def maybe_broadcast(df: DataFrame, rows: int, limit: int = BROADCAST_MAX_ROWS) -> DataFrame:
    """Broadcast a small table (at most ``limit`` rows, the execution settings'
    ``broadcast_max_rows``) so the large side of a join is never shuffled."""
    return F.broadcast(df) if rows <= limit else df


def run_alongside(spark: SparkSession, action: Callable[[], object]) -> Callable[[], None]:
    """Start ``action`` (Spark actions) in its own thread and return ``wait``, which joins it and
    re-raises its error. Jobs from two threads share the cores: one job's driver-side planning
    and last-task tail no longer leave cores idle. Until ``wait``, the caller's jobs carry a job
    tag the action's thread inherits: a failed action cancels those jobs (and no one else's), so
    the caller's own job stops early instead of running to its end."""
    engine = engine_of(spark)
    tag = f"neardup-alongside-{uuid.uuid4().hex}"
    engine.add_tag(tag)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            action()
        except BaseException as exc:  # re-raised in the caller's thread by wait()
            errors.append(exc)
            # What the JVM logs of the jobs cancelled now (aborted tasks and writes) is not
            # news: the command reports this error, which ends it.
            console.mute_jvm()
            try:
                engine.cancel_tag(tag)
            except Exception as cancel_error:  # the session is gone (a signal stopped it)
                log.debug("cancelling the jobs tagged %s: %r", tag, cancel_error)

    thread = inheritable_thread(spark, target)
    thread.start()

    def wait() -> None:
        thread.join()
        engine.remove_tag(tag)
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
    engine = engine_of(spark)
    if not engine.master().startswith("local"):
        return lambda: None

    def start() -> None:
        try:
            engine.describe_jobs("neardup: start Python workers")
            # One task: the daemon preloads once and forks the others in no time; the other
            # cores stay with the driver's planning.
            spark.range(0, 1, 1, 1).mapInArrow(_pass_batches, "id long").collect()
        except Exception as exc:  # see the docstring
            log.debug("starting the Python workers early failed: %r", exc)

    thread = inheritable_thread(spark, start)
    thread.start()
    return thread.join


def local_checkpoint(df: DataFrame) -> DataFrame:
    """``df`` kept on the executors, its lineage cut."""
    return df.localCheckpoint(eager=True)


def reliable_checkpoint(spark: SparkSession, directory: str) -> Callable[[DataFrame], DataFrame]:
    """A checkpoint that writes a DataFrame under ``directory`` (kept if the driver dies) and
    gives it back with its lineage cut."""
    return engine_of(spark).checkpointer(directory)


# The one-task components (kernels/components.py) peak at ~6 bytes per byte of an edge's two
# ids (with their Arrow offsets) besides the edge list: measured on 2,000,000 random edges,
# 100 B an edge for 16-byte string ids, 200 B for 32-byte ones.
COMPONENTS_BYTES_PER_ID_BYTE = 6
COMPONENTS_BYTES_PER_EDGE = 32
# Longest ids assumed before they are measured (a graph this small needs no measuring).
ASSUMED_ID_BYTES = 256
# Share of the machine's available memory one Python task may take in local mode.
LOCAL_TASK_MEMORY_SHARE = 4


def components_bytes_per_edge(id_bytes: float) -> int:
    """Memory the one-task components need per edge, for ids of ``id_bytes`` bytes on average.

    >>> components_bytes_per_edge(16), components_bytes_per_edge(8)
    (152, 104)
    """
    return int(COMPONENTS_BYTES_PER_ID_BYTE * (id_bytes + 4) + COMPONENTS_BYTES_PER_EDGE)


def available_memory() -> int:
    """Bytes of memory this machine has available (``MemAvailable``), else its total."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def python_task_memory(spark: SparkSession) -> int:
    """Bytes one Python task may use: ``spark.executor.pyspark.memory`` when set; in local
    mode a quarter of the machine's available memory; on a cluster the executors'
    ``memoryOverhead`` (where Python workers live), by default Spark's: 10 % of
    ``spark.executor.memory``, at least 384 MB."""
    conf = spark.conf
    given = conf.get("spark.executor.pyspark.memory", None)
    if given:
        return byte_size(given)
    if engine_of(spark).master().startswith("local"):
        return available_memory() // LOCAL_TASK_MEMORY_SHARE
    overhead = conf.get("spark.executor.memoryOverhead", None)
    if overhead:
        return byte_size(overhead)
    executor = byte_size(conf.get("spark.executor.memory", None) or "1g")
    return max(384 * 2**20, executor // 10)


def single_task_edge_limit(
    spark: SparkSession, configured: int | None, n_edges: int, edges: DataFrame
) -> int:
    """Most edges the components take in one task: ``configured`` when set, else what
    :func:`python_task_memory` holds at :func:`components_bytes_per_edge` (the ids' mean size
    measured on ``edges``, ``doc_a``/``doc_b``, only when a graph of ``n_edges`` edges with
    long ids would not fit anyway)."""
    if configured is not None:
        return configured
    memory = python_task_memory(spark)
    if n_edges * components_bytes_per_edge(ASSUMED_ID_BYTES) <= memory:
        return n_edges
    id_type = edges.schema[DOC_A].dataType
    if isinstance(id_type, T.StringType | T.BinaryType):
        row = edges.agg(F.avg(F.octet_length(F.col(DOC_A))).alias("bytes")).first()
        id_bytes = float(row["bytes"] or 0) if row is not None else float(ASSUMED_ID_BYTES)
    else:
        id_bytes = 8.0
    limit = memory // components_bytes_per_edge(id_bytes)
    log.info(
        "components: one task holds %d edges (%.0f-byte ids, %d MB)", limit, id_bytes, memory >> 20
    )
    return limit


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
    engine = engine_of(spark)
    cores = engine.default_parallelism()
    split_bytes = byte_size(spark.conf.get("spark.sql.files.maxPartitionBytes") or "128m")
    parts = engine.partitions(df)
    if parts is None:  # Spark Connect: as Spark will split the files
        parts = estimated_file_partitions(spark, file_sizes(df), cores, split_bytes)
    splits_per_task = max(1, PYTHON_TASK_BYTES // max(split_bytes, 1))
    tasks = cores * max(1, math.ceil(parts / (cores * splits_per_task)))
    return (df.coalesce(tasks), tasks) if tasks < parts else (df, parts)


def file_sizes(df: DataFrame) -> list[int]:
    """The sizes of the files ``df`` reads."""
    sizes = []
    for uri in df.inputFiles():
        path = from_spark_uri(uri)
        status = storage_for(df.sparkSession, path).status(path)
        sizes.append(status.size if status is not None else 0)
    return sizes


def estimated_file_partitions(
    spark: SparkSession, sizes: list[int], cores: int, max_split_bytes: int
) -> int:
    """The partitions Spark makes of a scan of files of these ``sizes`` (its ``FilePartition``
    rule: splits of at most ``min(maxPartitionBytes, max(openCost, total / cores))`` bytes,
    packed largest first, each file costing ``openCost`` more), for a session that cannot say
    (Spark Connect). Files are taken as splittable; for gzip text it overestimates."""
    open_cost = byte_size(spark.conf.get("spark.sql.files.openCostInBytes") or "4m")
    return file_partitions(sizes, cores, max_split_bytes, open_cost)


def file_partitions(sizes: list[int], cores: int, max_split_bytes: int, open_cost: int) -> int:
    """Spark's split-and-pack rule for files of ``sizes`` (see :func:`estimated_file_partitions`).

    >>> file_partitions([100 * 2**20], 2, 8 * 2**20, 4 * 2**20)
    13
    >>> file_partitions([1000] * 10, 2, 8 * 2**20, 4 * 2**20)
    5
    """
    if not sizes:
        return 1
    total = sum(size + open_cost for size in sizes)
    split = min(max_split_bytes, max(open_cost, total // max(cores, 1)))
    splits = sorted(
        (min(split, size - start) for size in sizes for start in range(0, max(size, 1), split)),
        reverse=True,
    )
    partitions, current = 0, 0
    for length in splits:
        if current and current + length > split:
            partitions, current = partitions + 1, 0
        current += length + open_cost
    return partitions + (1 if current else 0)


def spread(docs: DataFrame, parts: int) -> DataFrame:
    """Partitions for the per-document pass (``docs`` in ``parts`` partitions), which runs one
    Python task per partition.

    A corpus in fewer partitions than cores (one or two large files) would leave cores idle, so
    it is spread over twice the cores (hash partitioning on the id keeps the layout independent
    of task order); with at least one partition per core, shuffling every text costs more than a
    somewhat uneven last round."""
    cores = engine_of(docs.sparkSession).default_parallelism()
    return docs.repartition(2 * cores, DOC_ID) if parts < cores else docs


def byte_size(text: str) -> int:
    """A Spark size setting ("8m", "134217728b", "134217728") in bytes."""
    text = text.strip().lower()
    units = {"b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30, "gb": 2**30}
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix) and text[: -len(suffix)].strip().isdigit():
            return int(text[: -len(suffix)]) * units[suffix]
    return int(text) if text.isdigit() else 128 * 2**20
