"""Contents the index holds but no live document does (their pages re-crawled away), brought
back by a later night: their stored edge is the only record that they are near-duplicates."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from neardup_spark.nightly.run import run_incremental
from tests.nightly.history import (
    DRIVER_PATH,
    SPARK_IDS,
    SPARK_PATH,
    assignment,
    config_of,
    rows_table,
)
from tests.plans import ran

WORDS = [f"w{i}" for i in range(60)]
X = " ".join(WORDS)
Y = " ".join("changed" if i == 30 else w for i, w in enumerate(WORDS))  # J(X, Y) ~ 0.84
P = " ".join(f"p{i}" for i in range(60))
Q = " ".join(f"q{i}" for i in range(60))


@pytest.mark.parametrize(
    ("execution", "components"),
    [
        pytest.param(DRIVER_PATH, None, id="driver"),
        pytest.param(SPARK_PATH, "driver", id="spark", marks=pytest.mark.extended),
        pytest.param(SPARK_IDS, "spark", id="spark-ids"),
    ],
)
def test_two_revived_near_duplicate_contents_are_one_cluster(
    spark, tmp_path, execution, components
):
    """Night 1 indexes X and Y (near-duplicates, their edge stored); night 2 re-crawls both
        pages with other texts (X and Y dead); night 3 brings X and Y back on two new pages. Both
        contents are known to the index, so no candidate pair is made between them and no indexed
        cluster is touched: the stored edge must come in all the same, as a full run finds it. On
    the driver, as Spark jobs whose stable ids are found on the driver, and in Spark."""
    config = config_of()
    index = tmp_path / "index"
    nights = [[("1", X), ("2", Y)], [("1", P), ("2", Q)], [("3", X), ("4", Y)]]
    for number, rows in enumerate(nights, start=1):
        (tmp_path / f"in{number}").mkdir()
        pq.write_table(rows_table(rows), tmp_path / f"in{number}" / "part-0.parquet")
        report = run_incremental(
            spark, str(tmp_path / f"in{number}"), str(tmp_path / f"out{number}"), str(index),
            config, execution=execution,
        )  # fmt: skip
        # Night 1 reads no index table: it has none.
        ran(report, **{k: v for k, v in execution.plan.items() if number > 1 or "_scan" not in k})
        if components is not None:
            ran(report, night_components=components)
    assert assignment(tmp_path / "out1" / "clusters") == {"1": "1", "2": "1"}
    assert assignment(tmp_path / "out3" / "clusters") == {"3": "3", "4": "3"}
