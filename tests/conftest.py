"""One SparkSession for the whole suite: local[2], small shuffles, real Arrow and Parquet."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("neardup-tests")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.adaptive.enabled", "false")  # as in local mode (session.py)
        .config("spark.default.parallelism", "4")
        .config("spark.ui.enabled", "false")
        # Loopback only, as the CLI's local mode (session.py, LOCAL_DEFAULTS)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
        # Many small queries: the quick JIT alone, as the CLI's local mode (session.py).
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        .config("spark.python.daemon.module", "neardup_spark.runtime.worker_daemon")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.sparkContext.setCheckpointDir(str(tmp_path_factory.mktemp("checkpoints")))
    yield session
    session.stop()
