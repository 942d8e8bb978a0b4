"""The two ways of indexing a night (on the driver, or every step a Spark job) give the same
index and the same outputs: the history is replayed with the other path each day. A night on
the driver reads the index's docs and pairs rows in this process (the history's day 3), or with
Spark jobs (day 3 here). The Spark twin of the stable-id rule (in one task, or in distributed
rounds) gives the driver's ids over the three days (a merge on day 2, a split on day 3); and a
small ``bucket_all_pairs_max`` gives the same candidates and clusters on both paths. Each run's
recorded plan says that the path a test names ran."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import ExecutionSettings
from neardup_spark.nightly import steps as nightly_steps
from neardup_spark.nightly.run import run_incremental
from neardup_spark.nightly.store import Index
from neardup_spark.nightly.text_stash import STASH_DIR
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.runtime.spark_compat import to_arrow
from tests.nightly.history import (
    BUCKETS,
    DISTRIBUTED,
    DRIVER_PATH,
    SPARK_IDS,
    SPARK_PATH,
    SPARK_SCANS,
    after,
    canonical,
    config_of,
    index_assignment,
    read,
    rows_table,
)
from tests.plans import ran

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
    for name, execution in [*runs, ("day3", DRIVER_PATH)]:
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
                config_of(),
                buckets=BUCKETS,
                execution=execution,
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
    if day == "day3":  # the history's day 3 as Spark jobs; here on the driver
        ran(mine, sketch="spark", night="spark", night_components="spark")
        scans = "spark" if run == "day3-spark-scans" else "driver"
        ran(other, sketch="driver", night="driver", docs_scan=scans, pairs_scan=scans)
    else:  # the history's days on the driver; here as Spark jobs, the ids found on the driver
        ran(mine, sketch="driver", night="driver")
        ran(other, sketch="spark", night="spark", night_components="driver")


def index_contents(spark, root: Path) -> dict[str, pa.Table]:
    """The index's docs rows (every version) and stored pairs, canonical."""
    index = Index.open(spark, str(root))
    docs, pairs = index.docs_rows(), index.pairs()
    assert docs is not None and pairs is not None
    return {"docs": canonical(to_arrow(docs)), "pairs": canonical(to_arrow(pairs))}


def replay(
    spark, days: dict[str, Path], root: Path, execution: ExecutionSettings, **config
) -> dict:
    """The ``days`` (DAYS: their inputs) indexed into a fresh index under ``root``, each night
    placed by ``execution``, with ``config``'s settings: the reports, and after each day the
    index's assignment and contents."""
    index, reports, assignments, contents = root / "index", {}, {}, {}
    for day in DAYS:
        reports[day] = run_incremental(
            spark, str(days[day]), str(root / f"out-{day}"), str(index),
            config_of(config), buckets=BUCKETS, execution=execution,
        )  # fmt: skip
        assignments[day] = index_assignment(spark, index)
        contents[day] = index_contents(spark, index)
    return {"root": root, "reports": reports, "assignments": assignments, "contents": contents}


def assert_same_nights(theirs: dict, ours: dict, day: str, our_out: Path | None = None) -> None:
    """Two replays' outputs, counts, index counts, stable ids and index contents after ``day``
    are equal (``our_out``: where ours wrote the day's outputs, if not under its root)."""
    mine = our_out or ours["root"] / f"out-{day}"
    for name in ("clusters", "pairs", "changed_clusters", "deduplicated"):
        other = canonical(read(theirs["root"] / f"out-{day}" / name))
        assert other.equals(canonical(read(mine / name))), (day, name)
    assert theirs["reports"][day]["counts"] == ours["reports"][day]["counts"], day
    assert {k: v for k, v in theirs["reports"][day]["index"].items() if k not in NAMES} == {
        k: v for k, v in ours["reports"][day]["index"].items() if k not in NAMES
    }, day
    assert theirs["assignments"][day] == ours["assignments"][day], day
    for table, rows in theirs["contents"][day].items():
        assert rows.equals(ours["contents"][day][table]), (day, table)


DAYS = ("day1", "day2", "day3")
# The Spark twin of the stable-id rule over the whole history: its graph in one task, or in
# distributed rounds.
SPARK_IDS_REPLAYS = {"single_task": SPARK_IDS, "distributed": DISTRIBUTED}


@pytest.fixture(scope="module")
def driver_days(spark, history, other_path):
    """The driver path's days: the history's days 1 and 2, and day 3 on the driver from the
    other path's index (equal to the history's, as the test above shows)."""
    root = history["root"]
    return {
        "root": root,
        "reports": {**history["reports"], "day3": other_path["reports"]["day3"]},
        "assignments": {
            "day1": after(spark, history, "day1"),
            "day2": after(spark, history, "day2"),
            "day3": other_path["assignments"]["day3"],
        },
        "contents": {
            "day1": index_contents(spark, root / "index-after-day1"),
            "day2": index_contents(spark, root / "index-after-day2"),
            "day3": index_contents(spark, other_path["root"] / "index"),
        },
    }


@pytest.fixture(
    scope="module",
    params=[
        "distributed",  # (the single task's labels: the same function, tested in full runs)
        pytest.param("single_task", marks=pytest.mark.extended),
    ],
)
def spark_ids(request, spark, history, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"spark-ids-{request.param}")
    days = {day: history["root"] / day for day in DAYS}
    return request.param, replay(spark, days, root, SPARK_IDS_REPLAYS[request.param])


def test_the_spark_stable_ids_over_days_of_merges_and_splits_are_the_drivers(
    driver_days, other_path, spark_ids
):
    """Days 1 to 3 with every step of each night in Spark and its stable ids found by the
    Spark twin (a bridge merges two clusters on day 2, its re-crawl splits them on day 3): the
    driver's outputs, ``changed_clusters``, counts, stable ids and index contents, each day."""
    strategy, replayed = spark_ids
    for day in DAYS:
        report = replayed["reports"][day]
        ran(report, sketch="spark", night="spark", night_components="spark")
        assert report["components"]["strategy"] == strategy
        ran(driver_days["reports"][day], sketch="driver", night="driver")
        our_out = other_path["root"] / "out-day3" if day == "day3" else None
        assert_same_nights(replayed, driver_days, day, our_out)
    merged, split = (replayed["reports"][d]["counts"] for d in ("day2", "day3"))
    assert merged["merged_clusters"] > 0 and split["changed_clusters"] > 0


# A family of near-duplicate pages (one word changed in each: J >= 0.9 between any two) that
# share most of their LSH band keys: buckets of up to 15 contents, arriving over three days.
FAMILY = [f"f{i}" for i in range(200)]


def family_page(k: int) -> str:
    return " ".join(f"changed{k}" if i == 10 + 7 * k else w for i, w in enumerate(FAMILY))


def family_days(root: Path) -> dict[str, Path]:
    """Three days: generated pages, and the family's members 0-5, 6-11 (and a copy of 0),
    12-14 (and member 3 re-crawled with another text)."""
    generated, _ = generate_corpus(150, seed=9, mean_words=60)
    crafted = {
        "day1": [(f"fam{k:02d}", family_page(k)) for k in range(6)],
        "day2": [(f"fam{k:02d}", family_page(k)) for k in range(6, 12)]
        + [("copy00", family_page(0))],
        "day3": [(f"fam{k:02d}", family_page(k)) for k in range(12, 15)]
        + [("fam03", " ".join(f"other{i}" for i in range(80)))],
    }
    days = {}
    for number, (day, rows) in enumerate(crafted.items()):
        days[day] = root / day
        days[day].mkdir()
        part = generated.slice(50 * number, 50)
        pq.write_table(pa.concat_tables([part, rows_table(rows)]), days[day] / "part-0.parquet")
    return days


@pytest.fixture(scope="module")
def small_buckets(spark, tmp_path_factory):
    """The family's days with ``bucket_all_pairs_max: 3`` on the driver and as Spark jobs, and
    with the default (10) on the driver."""
    root = tmp_path_factory.mktemp("buckets")
    days = family_days(root)
    runs = {
        "driver": (DRIVER_PATH, {"bucket_all_pairs_max": 3}),
        "spark": (SPARK_IDS, {"bucket_all_pairs_max": 3}),
        "default": (DRIVER_PATH, {}),
    }
    return {
        name: replay(spark, days, root / name, execution, **config)
        for name, (execution, config) in runs.items()
    }


def test_a_small_bucket_all_pairs_max_gives_the_same_nights_on_both_paths(small_buckets):
    """Buckets larger than 3 emit a star, not all their pairs, and a night probes only the 3
    smallest indexed fingerprints of a key: both paths pair the same contents, so find the
    same clusters and ids, each day."""
    driver, spark_jobs = small_buckets["driver"], small_buckets["spark"]
    for day in DAYS:
        ran(driver["reports"][day], sketch="driver", night="driver")
        ran(spark_jobs["reports"][day], sketch="spark", night="spark", night_components="spark")
        assert driver["reports"][day]["config"]["bucket_all_pairs_max"] == 3
        assert_same_nights(spark_jobs, driver, day)
    # The limit bites: fewer candidates than with the default, each day.
    for day in DAYS:
        small = driver["reports"][day]["counts"]["candidate_pairs"]
        assert small < small_buckets["default"]["reports"][day]["counts"]["candidate_pairs"], day
    # The family is one cluster all the same (its re-crawled member left it).
    family = {
        d: c for d, c in driver["assignments"]["day3"].items() if d.startswith(("fam", "copy"))
    }
    assert len({c for d, c in family.items() if d != "fam03"}) == 1 and family["fam03"] == "fam03"
