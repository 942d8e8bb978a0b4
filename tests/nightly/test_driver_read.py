"""A small night in local mode reads and sketches its batch in this process and scans the index's
keys with threads (nightly/driver_read.py): the same index, outputs, counts and errors as when
its per-document pass is Spark's (the plan's ``sketch: spark``), the night's steps still on the
driver."""

from __future__ import annotations

import collections
import json
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.errors import UserError
from neardup_spark.nightly.content_files import KEYS_SUFFIX, read_keys
from neardup_spark.nightly.contents import probe_in_process, probe_index
from neardup_spark.nightly.run import run_incremental
from neardup_spark.nightly.store import Index
from neardup_spark.quality.generate import generate_corpus
from neardup_spark.runtime.spark_compat import to_arrow
from tests.nightly.history import canonical, config_of, index_assignment, read
from tests.odd_texts import ODD_ROWS, WORDS, assert_odd_counts, odd_rows_table
from tests.plans import placed, planned, ran

# The batch read and sketched here, or by Spark; the night's own steps on the driver either way.
HERE = placed(sketch="driver", night="driver")
SPARK_READ = placed(sketch="spark", night="driver")


@pytest.fixture(scope="module")
def nights(spark, tmp_path_factory):
    """Two nights (the second with copies and near-duplicates of the first), each way."""
    root = tmp_path_factory.mktemp("driver-read")
    corpus, _ = generate_corpus(240, seed=11, mean_words=80)
    order = np.random.default_rng(3).permutation(corpus.num_rows)
    batches = [
        odd_rows_table(corpus, order[:120], ODD_ROWS),
        odd_rows_table(corpus, order[120:], []),
    ]
    for number, table in enumerate(batches, start=1):
        (root / f"in{number}").mkdir()
        pq.write_table(table, root / f"in{number}" / "part-0.parquet")
    reports = {}
    for way, execution in (("driver", HERE), ("spark", SPARK_READ)):
        for number in (1, 2):
            reports[way, number] = run_incremental(
                spark,
                str(root / f"in{number}"),
                str(root / f"out-{way}-{number}"),
                str(root / f"index-{way}"),
                config_of(),
                execution=execution,
            )
            ran(reports[way, number], **execution.plan)
    return {"root": root, "reports": reports}


def test_a_night_read_here_equals_one_read_by_spark_tasks(spark, nights):
    root, reports = nights["root"], nights["reports"]
    for number in (1, 2):
        ours, theirs = reports["driver", number], reports["spark", number]
        assert ours["counts"] == theirs["counts"]
        for name in ("clusters", "pairs", "changed_clusters", "deduplicated"):
            mine = canonical(read(root / f"out-driver-{number}" / name))
            assert mine.equals(canonical(read(root / f"out-spark-{number}" / name))), name
    assert_odd_counts(reports["driver", 1]["counts"])
    assert reports["driver", 2]["counts"]["near_pairs"] > 0
    assert index_assignment(spark, root / "index-driver") == index_assignment(
        spark, root / "index-spark"
    )


def test_the_report_names_what_ran_in_this_process(nights):
    """A night read here also copies its ``deduplicated/`` from its files here (``publish``):
    the rows of the Spark job's, in the files' own schema."""
    reports, root = nights["reports"], nights["root"]
    assert reports["driver", 1]["stages_on_driver"] == ["sketch", "publish"]  # nothing to probe
    assert reports["driver", 2]["stages_on_driver"] == ["sketch", "probe", "publish"]
    assert reports["spark", 2]["stages_on_driver"] == ["probe"]
    ran(reports["spark", 2], sketch="spark", night="driver")
    published = json.loads((root / "out-driver-2" / "report.json").read_text())
    assert published["stages_on_driver"] == ["sketch", "probe", "publish"]
    for number in (1, 2):
        ours = pq.read_table(root / f"out-driver-{number}" / "deduplicated")
        theirs = pq.read_table(root / f"out-spark-{number}" / "deduplicated")
        source = pq.read_schema(root / f"in{number}" / "part-0.parquet")
        duplicates = pa.field("duplicates", pa.int64(), nullable=False)
        assert ours.schema.remove_metadata().equals(source.remove_metadata().append(duplicates))
        # the night's documents removed in the kept one's favour
        clusters = read(root / f"out-driver-{number}" / "clusters")
        sizes = collections.Counter(clusters["cluster_id"].to_pylist())
        assert ours["duplicates"].to_pylist() == [sizes[d] - 1 for d in ours["id"].to_pylist()]
        counts = reports["spark", number]["counts"]
        assert ours.num_rows == theirs.num_rows == counts["deduplicated"]


def test_the_keys_scan_in_threads_equals_the_spark_job(spark, nights):
    """Some indexed contents' fingerprints and band keys, and others no content has."""
    index = Index.open(spark, str(nights["root"] / "index-driver"))
    parts = index.content_parts()
    stored = [read_keys(part + KEYS_SUFFIX) for part in parts]
    fps = np.unique(np.r_[np.concatenate([f[:5] for f, _ in stored]), np.arange(1, 6)])
    keys = np.unique(np.r_[np.concatenate([k[:7].ravel() for _, k in stored]), np.arange(1, 6)])
    threads = probe_in_process(parts, fps, keys, 3, threads=2)
    by_spark = to_arrow(probe_index(spark, parts, fps, keys, 3))
    assert set(threads.column("kind").to_pylist()) == {0, 1}  # known contents and key matches
    assert canonical(threads).equals(canonical(by_spark))


@pytest.mark.parametrize("execution", [HERE, SPARK_READ], ids=["driver", "spark"])
@pytest.mark.parametrize(
    "ids, message",
    [
        ([1, 2, 2, 3], "ids in column 'id' are not unique: 2 (2x)"),
        ([1, None, 3, None], "2 rows have a null id in column 'id'; every row needs an id"),
    ],
)
def test_bad_ids_in_a_night_are_refused_alike(spark, tmp_path, caplog, execution, ids, message):
    caplog.set_level(logging.INFO, logger="neardup_spark.plan")
    (tmp_path / "in").mkdir()
    texts = [f"{WORDS} {i}" for i in range(len(ids))]
    pq.write_table(
        pa.table({"id": pa.array(ids, pa.int64()), "text": texts}), tmp_path / "in" / "p.parquet"
    )
    with pytest.raises(UserError) as caught:
        run_incremental(
            spark,
            str(tmp_path / "in"),
            str(tmp_path / "out"),
            str(tmp_path / "index"),
            config_of(),
            execution=execution,
        )
    assert str(caught.value) == message
    assert planned(caplog.records)["sketch"] == execution.plan["sketch"]
    assert not (tmp_path / "index" / "CURRENT").exists()


def test_a_json_lines_night_takes_spark_tasks(spark, tmp_path):
    (tmp_path / "in").mkdir()
    rows = [{"id": f"d{i}", "text": f"{WORDS} {i % 3}"} for i in range(6)]
    (tmp_path / "in" / "part-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = run_incremental(
        spark,
        str(tmp_path / "in"),
        str(tmp_path / "out"),
        str(tmp_path / "index"),
        config_of(),
    )
    assert "sketch" not in report["stages_on_driver"]
    assert report["plan"]["sketch"] == {"where": "spark", "why": "not local Parquet files"}
    assert report["counts"]["input_rows"] == 6 and report["counts"]["exact_copies"] == 3


def small_batch(root: Path) -> Path:
    """Twelve documents, four texts (eight exact copies)."""
    root.mkdir()
    texts = [f"{WORDS} {i % 4}" for i in range(12)]
    ids = [f"d{i:02d}" for i in range(12)]
    pq.write_table(pa.table({"id": ids, "text": texts}), root / "p.parquet")
    return root


def test_a_night_given_to_spark_takes_sparks_pass(spark, tmp_path):
    """``plan.night=spark`` alone: the night's pass is Spark's (its Spark steps read the texts
    that pass stashes), and the pass given to the driver with it is refused."""
    batch = small_batch(tmp_path / "in")
    report = run_incremental(
        spark, str(batch), str(tmp_path / "out"), str(tmp_path / "index"), config_of(),
        execution=placed(night="spark"),
    )  # fmt: skip
    ran(report, sketch="spark", night="spark")
    assert report["plan"]["sketch"]["why"].startswith("night given: spark")
    assert report["counts"]["input_rows"] == 12 and report["counts"]["exact_copies"] == 8
    with pytest.raises(UserError, match="plan: sketch=driver is not possible for this run"):
        run_incremental(
            spark, str(batch), str(tmp_path / "out2"), str(tmp_path / "index2"), config_of(),
            execution=placed(sketch="driver", night="spark"),
        )  # fmt: skip
    assert not (tmp_path / "index2" / "CURRENT").exists()


def test_a_first_night_reads_no_index_table(spark, tmp_path):
    """The first night on the driver has no docs or pairs rows to read: a scan given to the
    driver is no step of its plan (not refused as unreadable); the next night's scans are."""
    batch, index = small_batch(tmp_path / "in"), tmp_path / "index"
    given = placed(sketch="driver", night="driver", docs_scan="driver", pairs_scan="driver")
    first = run_incremental(
        spark,
        str(batch),
        str(tmp_path / "out1"),
        str(index),
        config_of(),
        execution=given,
    )
    ran(first, sketch="driver", night="driver")
    assert "docs_scan" not in first["plan"] and "pairs_scan" not in first["plan"]
    again = small_batch(tmp_path / "in2")
    second = run_incremental(
        spark,
        str(again),
        str(tmp_path / "out2"),
        str(index),
        config_of(),
        execution=given,
    )
    ran(second, docs_scan="driver")
