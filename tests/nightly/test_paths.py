"""The two ways of indexing a night (on the driver, or every step a Spark job) give the same
index and the same outputs: the history is replayed with the other path each day."""

from __future__ import annotations

import pytest

from neardup_spark.config import build_config
from neardup_spark.nightly.run import run_incremental
from tests.nightly.history import BUCKETS, SPARK_PATH, after, canonical, index_assignment, read

# Index entries of the report that name files (fresh names each run).
NAMES = ("path", "version", "version_before")


@pytest.fixture(scope="module")
def other_path(spark, history, tmp_path_factory):
    """Days 1 and 2 as Spark jobs, day 3 on the driver (the history did the opposite)."""
    root, index = history["root"], tmp_path_factory.mktemp("other") / "index"
    reports, assignments = {}, {}
    for day in ("day1", "day2", "day3"):
        options = SPARK_PATH if day != "day3" else {}
        reports[day] = run_incremental(
            spark,
            str(root / day),
            str(index.parent / f"out-{day}"),
            str(index),
            build_config(options=options),
            buckets=BUCKETS,
        )
        assignments[day] = index_assignment(spark, index)
    return {"root": index.parent, "reports": reports, "assignments": assignments}


@pytest.mark.parametrize("day", ["day1", "day2", "day3"])
def test_driver_and_spark_paths_agree(spark, history, other_path, day):
    ours, theirs = history["root"] / f"out-{day}", other_path["root"] / f"out-{day}"
    for name in ("clusters", "pairs", "changed_clusters", "deduplicated"):
        assert canonical(read(theirs / name)).equals(canonical(read(ours / name))), name
    assert other_path["assignments"][day] == after(spark, history, day)
    mine, other = history["reports"][day], other_path["reports"][day]
    assert other["counts"] == mine["counts"]
    assert {k: v for k, v in other["index"].items() if k not in NAMES} == {
        k: v for k, v in mine["index"].items() if k not in NAMES
    }
    strategies = {mine["components"]["strategy"], other["components"]["strategy"]}
    assert strategies == ({"driver", "distributed"} if day == "day3" else {"driver"})
