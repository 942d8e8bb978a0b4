"""The history fixture: days 1-3 indexed one after the other (days 1 and 2 on the driver, day 3
as Spark jobs; day 3 first killed midway when the kill test runs), and one full run over days
1 + 2 to compare with."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.nightly.run import run_incremental
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus
from tests.nightly.history import (
    BUCKETS,
    CRAFTED_DAY1,
    CRAFTED_DAY2,
    DAY3,
    DISTRIBUTED,
    DRIVER_PATH,
    KILL_TEST,
    KilledRun,
    config_of,
    index_assignment,
    rows_table,
)


@pytest.fixture(scope="package")  # built once for every nightly test module
def history(spark, tmp_path_factory, request):
    root = tmp_path_factory.mktemp("history")
    generated, _ = generate_corpus(420, seed=5, mean_words=60)
    day1 = pa.concat_tables([generated.slice(0, 280), rows_table(CRAFTED_DAY1)])
    day2 = pa.concat_tables([generated.slice(280), rows_table(CRAFTED_DAY2)])
    parts = {
        "day1": day1,
        "day2": day2,
        "all": pa.concat_tables([day1, day2]),
        "day3": rows_table(DAY3),
    }
    for name, part in parts.items():
        (root / name).mkdir()
        pq.write_table(part, root / name / "part-0.parquet")
    config = config_of()
    index = root / "index"
    killed = None
    if any(item.originalname == KILL_TEST for item in request.session.items):
        killed = KilledRun(root, root / "day3", root / "out-day3", index)
    try:
        reports, crash = {}, None
        for day in ("day1", "day2", "day3"):
            if day == "day3" and killed is not None:
                # The killed run would replace a finished output: day 2's, copied there.
                shutil.copytree(root / "out-day2", root / "out-day3")
                crash = killed.kill_midway()
                crash["assignment"] = index_assignment(spark, index)
            reports[day] = run_incremental(
                spark,
                str(root / day),
                str(root / f"out-{day}"),
                str(index),
                config,
                overwrite=crash is not None,
                buckets=BUCKETS,
                # Days 1 and 2 on the driver; day 3 every step as Spark jobs, its stable ids
                # in distributed rounds.
                execution=DISTRIBUTED if day == "day3" else DRIVER_PATH,
            )
            shutil.copytree(index, root / f"index-after-{day}")
    finally:
        if killed is not None:
            killed.stop()
    full = run(spark, str(root / "all"), str(root / "full"), config)
    return {
        "root": root,
        "index": index,
        "reports": reports,
        "full": full,
        "tables": parts,
        "crash": crash,
    }
