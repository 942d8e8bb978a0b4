"""The session adapter (runtime/engine.py): the classic side on the suite's session, the pure
parts of the Connect side (its progress source); the Connect side against a real server is in
tests/cli/test_connect.py."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from neardup_spark.pipeline.execution import file_partitions
from neardup_spark.runtime.engine import CLASSIC, HandlerProgress, engine_of, is_connect
from tests.spark_state import session_conf


@dataclass
class StageInfo:
    """What a Connect server reports of a stage (pyspark.sql.connect.shell.progress)."""

    stage_id: int
    num_tasks: int
    num_completed_tasks: int
    num_bytes_read: int
    done: bool


def test_the_connect_progress_source_keeps_what_the_server_reports():
    progress = HandlerProgress()
    progress([StageInfo(3, 8, 2, 0, False), StageInfo(4, 2, 2, 0, True)], 6, "op-1", False)
    assert progress.active_stage_ids() == [3]
    assert progress.stage_tasks(3) == (2, 8) and progress.stage_tasks(4) == (2, 2)
    progress([StageInfo(3, 8, 8, 0, False)], 0, "op-1", True)  # the operation is done
    assert progress.active_stage_ids() == [] and progress.stage_tasks(3) == (8, 8)
    assert progress.stage_tasks(99) is None
    progress(None, 0, None, False)  # a response without stages


def test_the_classic_engine_on_the_suites_session(spark):
    engine = engine_of(spark)
    assert engine is engine_of(spark) and engine.kind == CLASSIC and not is_connect(spark)
    assert engine.master() == "local[2]"
    assert engine.default_parallelism() == int(spark.conf.get("spark.default.parallelism"))
    assert engine.partitions(spark.range(0, 10, 1, 3)) == 3
    table = pa.table({"a": [1, 2, 3]})
    assert engine.from_arrow(table).count() == 3
    assert engine.hadoop_configuration() is not None
    source = engine.progress_source()
    assert source.active_stage_ids() == [] or isinstance(source.active_stage_ids(), list)


def test_file_partitions_follow_sparks_rule(spark, tmp_path):
    """The estimate a Connect session makes of a file scan's partitions equals what Spark makes
    of the same files here."""
    import pyarrow.parquet as pq

    sizes = []
    for i, rows in enumerate((20_000, 3_000, 50, 50, 50)):
        path = tmp_path / f"part-{i}.parquet"
        pq.write_table(pa.table({"x": list(range(rows))}), path, row_group_size=1000)
        sizes.append(path.stat().st_size)
    conf = {"spark.sql.files.maxPartitionBytes": "16k", "spark.sql.files.openCostInBytes": "4k"}
    with session_conf(spark, conf):
        actual = engine_of(spark).partitions(spark.read.parquet(str(tmp_path)))
    assert file_partitions(sizes, 4, 16 * 1024, 4 * 1024) == actual
