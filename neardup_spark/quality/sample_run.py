"""A small generated corpus deduped in local mode: the sample run notebooks and demos explore."""

from __future__ import annotations

import os
import sys

from neardup_spark.config import DedupeConfig, SessionSettings
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import write_corpus
from neardup_spark.runtime.session import build_session


def sample_run(
    directory: str, docs: int = 500, seed: int = 1, mean_words: int = 200, master: str = "local[2]"
) -> str:
    """Generate a small corpus under ``directory`` and dedupe it with local Spark; returns the
    OUTPUT path (``directory/out``). For notebooks and demos: the JVM is stopped afterwards."""

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    data, output = os.path.join(directory, "data"), os.path.join(directory, "out")
    write_corpus(data, docs, seed=seed, mean_words=mean_words, overwrite=True)
    settings = SessionSettings(
        master=master,
        spark={
            "spark.driver.memory": "1g",
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "4",
            "spark.ui.enabled": "false",
        },
    )
    spark = build_session(settings, app_name="neardup-sample")
    try:
        run(spark, os.path.join(data, "corpus"), output, DedupeConfig(), overwrite=True)
    finally:
        spark.stop()
    return output
