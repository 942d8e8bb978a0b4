"""The two ways of indexing a night (on the driver, or every step a Spark job) give the same
index and the same outputs: the history is replayed with the other path each day. A night on
the driver reads the index's docs and pairs rows in this process (the history's day 3), or with
Spark jobs when they are more than ``nightly_driver_scan_max_rows`` (day 3 here)."""

from __future__ import annotations

import shutil

import pytest

from neardup_spark.config import build_config
from neardup_spark.nightly import steps as nightly_steps
from neardup_spark.nightly.run import run_incremental
from neardup_spark.nightly.text_stash import STASH_DIR
from tests.nightly.history import (
    BUCKETS,
    SPARK_PATH,
    SPARK_SCANS,
    after,
    canonical,
    index_assignment,
    read,
)

# Index entries of the report that name files (fresh names each run).
NAMES = ("path", "version", "version_before")


@pytest.fixture(scope="module")
def other_path(spark, history, tmp_path_factory):
    """Days 1 and 2 as Spark jobs, day 3 on the driver (the history did the opposite), twice
    from the same index: reading the index's docs and pairs rows in this process (the default)
    and with Spark jobs (``day3-spark-scans``). The Spark path's nights read their candidates'
    texts from the batch's stash (the calls are recorded) and leave no stash behind."""
    root, index = history["root"], tmp_path_factory.mktemp("other") / "index"
    reports, assignments, fetched = {}, {}, []
    stashed_texts = nightly_steps.stashed_texts

    def recorded(wanted, stash):
        fetched.append(stash)
        return stashed_texts(wanted, stash)

    runs = [("day1", SPARK_PATH), ("day2", SPARK_PATH), ("day3-spark-scans", SPARK_SCANS)]
    for name, options in [*runs, ("day3", {})]:
        day = name.split("-")[0]
        night_index = index.parent / "index-spark-scans" if name != day else index
        if name == "day3-spark-scans":
            shutil.copytree(index, night_index)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(nightly_steps, "stashed_texts", recorded)
            reports[name] = run_incremental(
                spark,
                str(root / day),
                str(index.parent / f"out-{name}"),
                str(night_index),
                build_config(options=options),
                buckets=BUCKETS,
            )
        assignments[name] = index_assignment(spark, night_index)
        assert not list(night_index.glob(f"segments/*/{STASH_DIR}"))
    assert len(fetched) == 2 and all(stash.files for stash in fetched)  # days 1 and 2
    return {"root": index.parent, "reports": reports, "assignments": assignments}


@pytest.mark.parametrize("run", ["day1", "day2", "day3", "day3-spark-scans"])
def test_driver_and_spark_paths_agree(spark, history, other_path, run):
    day = run.split("-")[0]
    ours, theirs = history["root"] / f"out-{day}", other_path["root"] / f"out-{run}"
    for name in ("clusters", "pairs", "changed_clusters", "deduplicated"):
        assert canonical(read(theirs / name)).equals(canonical(read(ours / name))), name
    assert other_path["assignments"][run] == after(spark, history, day)
    mine, other = history["reports"][day], other_path["reports"][run]
    assert other["counts"] == mine["counts"]
    assert {k: v for k, v in other["index"].items() if k not in NAMES} == {
        k: v for k, v in mine["index"].items() if k not in NAMES
    }
    strategies = {mine["components"]["strategy"], other["components"]["strategy"]}
    assert strategies == ({"driver", "distributed"} if day == "day3" else {"driver"})
