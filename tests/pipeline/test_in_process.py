"""A run in local mode over local Parquet files does its per-document pass in this process
(pipeline/in_process.py): the same outputs, counts and errors as Spark tasks give it
(``driver_read_max_bytes: 0``). A rerun resumes from the result it kept as from a Spark one
(tests/pipeline/test_resume.py runs over local Parquet, so in this process)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import CorpusSource
from neardup_spark.pipeline import steps
from neardup_spark.pipeline.dedupe import run
from neardup_spark.pipeline.in_process import may_read_in_process
from neardup_spark.quality.generate import generate_corpus
from tests.nightly.history import canonical, read
from tests.odd_texts import ODD_ROWS, WORDS, assert_odd_counts, odd_rows_table

SPARK_TASKS = {"driver_read_max_bytes": 0}
# Too large to read here: the pass's Spark tasks read their row groups themselves.
TASKS_READ = {"driver_read_max_bytes": 1}
OUTPUTS = ("clusters", "pairs", "deduplicated")


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """One corpus (two files) deduped each way, with MinHash (pairs on the driver and, with
    driver_max_docs=0, as Spark stages) and with SimHash."""
    root = tmp_path_factory.mktemp("in-process")
    corpus, _ = generate_corpus(300, seed=12, mean_words=80)
    table = odd_rows_table(corpus, np.arange(corpus.num_rows), ODD_ROWS)
    (root / "in").mkdir()
    pq.write_table(table.slice(0, 150), root / "in" / "part-0.parquet")
    pq.write_table(table.slice(150), root / "in" / "part-1.parquet")
    reports = {}
    variants = {"minhash": {}, "spark-stages": {"driver_max_docs": 0}, "simhash": {}}
    for variant, options in variants.items():
        method = "simhash" if variant == "simhash" else "minhash"
        for way, extra in (("here", {}), ("tasks", SPARK_TASKS)):
            config = build_config(options={**options, **extra, "method": method})
            out = root / f"out-{variant}-{way}"
            reports[variant, way] = run(spark, str(root / "in"), str(out), config)
    return {"root": root, "reports": reports, "variants": variants}


def test_a_pass_here_equals_spark_tasks(runs):
    root, reports = runs["root"], runs["reports"]
    for variant in runs["variants"]:
        here, tasks = reports[variant, "here"], reports[variant, "tasks"]
        assert here["counts"] == tasks["counts"], variant
        for name in OUTPUTS:
            ours = canonical(read(root / f"out-{variant}-here" / name))
            assert ours.equals(canonical(read(root / f"out-{variant}-tasks" / name))), name
        assert "sketch" in here["stages_on_driver"]
        assert "sketch" not in tasks["stages_on_driver"]
    assert_odd_counts(reports["minhash", "here"]["counts"])
    assert reports["minhash", "here"]["counts"]["near_pairs"] > 0


def test_a_run_all_here_equals_the_spark_stages(runs):
    """Pass, pairs (from the texts read here) and members all in this process: the outputs of
    the Spark tasks and stages, and no stage result kept for the components."""
    root, reports = runs["root"], runs["reports"]
    here, spark_stages = reports["minhash", "here"], reports["spark-stages", "tasks"]
    assert here["stages_on_driver"] == ["sketch", "exact", "candidates", "verify", "components"]
    assert here["components"] == {"strategy": "driver", "rounds": 0}
    assert spark_stages["stages_on_driver"] == []
    assert spark_stages["components"]["strategy"] == "single_task"
    assert here["counts"] == spark_stages["counts"]
    for name in OUTPUTS:
        ours = canonical(read(root / "out-minhash-here" / name))
        assert ours.equals(canonical(read(root / "out-spark-stages-tasks" / name))), name


@pytest.mark.parametrize("variant", ["minhash", "spark-stages", "simhash"])
def test_tasks_reading_their_row_groups_equal_spark_tasks(spark, runs, variant, monkeypatch):
    """Local Parquet too large for this process: the pass's Spark tasks read the files with
    PyArrow (no text through the JVM), with the outputs and counts of Spark's own reads."""
    root = runs["root"]
    made = []
    original = steps.features_in_tasks

    def recorded(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(steps, "features_in_tasks", recorded)
    method = "simhash" if variant == "simhash" else "minhash"
    options = {**runs["variants"][variant], **TASKS_READ, "method": method}
    out = root / f"out-{variant}-tasks-read"
    report = run(spark, str(root / "in"), str(out), build_config(options=options))
    assert len(made) == 1 and made[0] is not None
    assert "sketch" not in report["stages_on_driver"]
    assert report["counts"] == runs["reports"][variant, "tasks"]["counts"]
    for name in OUTPUTS:
        ours = canonical(read(out / name))
        assert ours.equals(canonical(read(root / f"out-{variant}-tasks" / name))), name


@pytest.mark.parametrize("options", [{}, SPARK_TASKS, TASKS_READ], ids=["here", "tasks", "read"])
def test_bad_ids_are_refused_alike(spark, tmp_path, options):
    (tmp_path / "in").mkdir()
    ids = pa.array([1, 2, 2, 3, 3], pa.int64())
    texts = [f"{WORDS} {i}" for i in range(5)]
    pq.write_table(pa.table({"id": ids, "text": texts}), tmp_path / "in" / "p.parquet")
    with pytest.raises(UserError) as caught:
        run(spark, str(tmp_path / "in"), str(tmp_path / "out"), build_config(options=options))
    assert str(caught.value) == "ids in column 'id' are not unique: 2 (2x), 3 (2x)"


def test_which_inputs_may_be_read_here(spark, runs, tmp_path):
    """Local Parquet within the rows asked for; not JSON lines, nor with the setting at 0."""
    parquet = CorpusSource(str(runs["root"] / "in"))
    assert may_read_in_process(spark, parquet, build_config())
    assert may_read_in_process(spark, parquet, build_config(), max_rows=306)
    assert not may_read_in_process(spark, parquet, build_config(), max_rows=305)
    assert not may_read_in_process(spark, parquet, build_config(options=SPARK_TASKS))
    (tmp_path / "rows.jsonl").write_text('{"id": "a", "text": "x"}\n')
    assert not may_read_in_process(
        spark, CorpusSource(str(tmp_path / "rows.jsonl")), build_config()
    )
