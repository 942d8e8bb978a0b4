"""What differs between the Spark versions the job runs on (3.5 to 4.x), in one place.

Everything else the job uses exists in Spark 3.5: ``mapInArrow`` (3.3), ``bit_count`` and job
tags (``SparkContext.addJobTag``/``cancelJobsWithTag``, 3.5), ``min_by`` (3.3). Two conveniences
of Spark 4 are replaced here on 3.5, with the same results:

* ``DataFrame.toArrow()`` (4.0): on 3.5 the Arrow batches PySpark's ``toPandas`` collects;
* ``SparkSession.createDataFrame(pyarrow.Table)`` (4.0): on 3.5 the Arrow stream PySpark's
  ``createDataFrame(pandas.DataFrame)`` sends to the JVM, without the detour through pandas;
* ``DataFrame.localCheckpoint(storageLevel=...)`` (4.0): on 3.5 Spark's default level for local
  checkpoints (memory and disk) is used instead of the one asked for, so a checkpoint meant for
  local disk only may take executor memory first (docs/clusters.md, "Spark and Python versions").
"""

from __future__ import annotations

import inspect
import logging
import re
from typing import Any

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from neardup_spark.errors import MachineError

log = logging.getLogger(__name__)

# The oldest Spark the job runs on, and the first major version it has not been tested with.
MIN_SPARK = (3, 5)
UNTESTED_SPARK = (5, 0)


def version_tuple(version: str) -> tuple[int, int]:
    """``"3.5.6"`` -> ``(3, 5)``; ``"4.1.0-preview1"`` -> ``(4, 1)``.

    >>> version_tuple("4.0.1")
    (4, 0)
    """
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        raise ValueError(f"not a Spark version: {version!r}")
    return int(found.group(1)), int(found.group(2))


def check_spark_version(spark: SparkSession) -> None:
    """Refuse a Spark older than 3.5 (:class:`MachineError`, exit 3: the installed Spark, or
    the cluster's, is at fault, not the command); warn on an untested major."""
    version = spark.version
    found = version_tuple(version)
    if found < MIN_SPARK:
        raise MachineError(
            f"Spark {version} is not supported: neardup-spark needs Spark 3.5 or newer; install "
            "a newer pyspark, or run on a newer cluster (docs/clusters.md, 'Spark and Python "
            "versions')"
        )
    if found >= UNTESTED_SPARK:
        log.warning("Spark %s is newer than the versions tested (3.5 to 4.x)", version)


def to_arrow(df: DataFrame) -> pa.Table:
    """``df`` collected to the driver as an Arrow table (Spark 4's ``toArrow``)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    from pyspark.sql.pandas.types import to_arrow_schema

    # Spark 3.5: the batches toPandas() collects with Arrow enabled.
    batches = df._collect_as_arrow()  # type: ignore[attr-defined,operator]
    if batches:
        return pa.Table.from_batches(batches)
    return to_arrow_schema(df.schema).empty_table()


def _local_checkpoint_takes_level() -> bool:
    return "storageLevel" in inspect.signature(DataFrame.localCheckpoint).parameters


def local_checkpoint(df: DataFrame, eager: bool, level: StorageLevel) -> DataFrame:
    """``df`` kept on the executors with its lineage cut; in ``level`` on Spark 4, in Spark's
    default level for local checkpoints on 3.5 (see the module docstring)."""
    if _local_checkpoint_takes_level():
        return df.localCheckpoint(eager=eager, storageLevel=level)
    return df.localCheckpoint(eager=eager)


def from_arrow(spark: SparkSession, table: pa.Table) -> DataFrame:
    """A DataFrame of an Arrow table built on the driver (Spark 4's ``createDataFrame(table)``):
    the same column types and nullability, one partition per Arrow batch."""
    if version_tuple(spark.version) >= (4, 0):
        return spark.createDataFrame(table)
    from pyspark.sql.pandas.serializers import ArrowStreamSerializer
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = from_arrow_schema(table.schema)
    step = int(spark._jconf.arrowMaxRecordsPerBatch())  # type: ignore[attr-defined]
    batches = table.to_batches(max_chunksize=step if step > 0 else None)
    if not any(batch.num_rows for batch in batches):
        return spark.createDataFrame([], schema)
    # Spark 3.5: what createDataFrame(pandas.DataFrame) does once it has its Arrow batches.
    jvm: Any = spark.sparkContext._jvm
    stream = spark.sparkContext._serialize_to_jvm(  # type: ignore[attr-defined]
        batches,
        ArrowStreamSerializer(),
        lambda path: jvm.PythonSQLUtils.readArrowStreamFromFile(path),
        lambda: jvm.ArrowIteratorServer(),
    )
    java_df = jvm.PythonSQLUtils.toDataFrame(
        stream,
        schema.json(),
        spark._jsparkSession,  # type: ignore[attr-defined]
    )
    return DataFrame(java_df, spark)


# Arrow data up to this many bytes becomes a local relation: its rows as JVM objects in the
# driver, copied again (as UnsafeRows, then as task slices) by every query that scans it.
LOCAL_RELATION_THRESHOLD = "spark.sql.execution.arrow.localRelationThreshold"


def from_arrow_batches(spark: SparkSession, table: pa.Table) -> DataFrame:
    """:func:`from_arrow`, the table kept as its Arrow batches (an RDD, one partition each),
    never a local relation, whatever its size: for tables sized by the batch. A 1M-row one under
    the 48 MB threshold became ~1 GB of row objects, and each of the writes running together
    copied it again: a 1M-document index build ran out of a 2 GB local driver."""
    before = spark.conf.get(LOCAL_RELATION_THRESHOLD, None)
    spark.conf.set(LOCAL_RELATION_THRESHOLD, "0")
    try:
        return from_arrow(spark, table)
    finally:
        if before is None:
            spark.conf.unset(LOCAL_RELATION_THRESHOLD)
        else:
            spark.conf.set(LOCAL_RELATION_THRESHOLD, before)
