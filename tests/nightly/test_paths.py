"""The two ways of indexing a night (on the driver, or every step a Spark job) give the same
index and the same outputs: the history is replayed with the other path each day."""

from __future__ import annotations

import pytest

from neardup_spark.config import build_config
from neardup_spark.nightly import steps as nightly_steps
from neardup_spark.nightly.run import run_incremental
from neardup_spark.pipeline import filtered_scans
from tests.nightly.history import BUCKETS, SPARK_PATH, after, canonical, index_assignment, read

# Index entries of the report that name files (fresh names each run).
NAMES = ("path", "version", "version_before")


@pytest.fixture(scope="module")
def other_path(spark, history, tmp_path_factory):
    """Days 1 and 2 as Spark jobs, day 3 on the driver (the history did the opposite). Day 2
    reads its candidates' texts as a batch too large to broadcast their list to: by the rows'
    addresses in its Parquet files (the calls are recorded)."""
    root, index = history["root"], tmp_path_factory.mktemp("other") / "index"
    reports, assignments, addressed = {}, {}, []
    texts_of = filtered_scans.AddressedInput.texts_of

    def recorded(self, ids):
        addressed.append(ids)
        return texts_of(self, ids)

    for day in ("day1", "day2", "day3"):
        options = SPARK_PATH if day != "day3" else {}
        with pytest.MonkeyPatch.context() as patch:
            if day == "day2":
                patch.setattr(nightly_steps, "BROADCAST_MAX_ROWS", 0)
                patch.setattr(filtered_scans.AddressedInput, "texts_of", recorded)
            reports[day] = run_incremental(
                spark,
                str(root / day),
                str(index.parent / f"out-{day}"),
                str(index),
                build_config(options=options),
                buckets=BUCKETS,
            )
        assignments[day] = index_assignment(spark, index)
    assert len(addressed) == 1  # day 2's candidates' texts, read by address
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
