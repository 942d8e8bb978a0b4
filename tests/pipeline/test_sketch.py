"""The per-document pass (pipeline/sketch.py), each of its implementations placed explicitly:
in this process's threads (``driver``), in Spark tasks reading their row groups with PyArrow
(``tasks``), after Spark's read (``spark``). The same outputs, counts and errors whichever ran,
as the run's recorded plan shows. A rerun resumes from the result it kept as from a Spark one
(tests/pipeline/test_resume.py). Which inputs may be read here: the plan's choice from the
facts of real files (list_input, gather_facts)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import ExecutionSettings, build_config
from neardup_spark.errors import UserError
from neardup_spark.io.corpus import CorpusSource, list_input
from neardup_spark.pipeline.dedupe import run
from neardup_spark.pipeline.facts import gather_facts
from neardup_spark.pipeline.plan import Choice, decide_sketch
from neardup_spark.quality.generate import generate_corpus
from tests.nightly.history import canonical, read
from tests.odd_texts import ODD_ROWS, WORDS, assert_odd_counts, odd_rows_table
from tests.plans import placed, ran

OUTPUTS = ("clusters", "pairs", "deduplicated")
WAYS = ("driver", "tasks", "spark")
# Each variant's pairs step: found here (the default for a run this small) or Spark stages.
VARIANTS = {
    "minhash": ("minhash", "driver"),
    "spark-stages": ("minhash", "spark"),
    "simhash": ("simhash", "driver"),
}


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """One corpus (two files) deduped with the pass in each place, for each variant."""
    root = tmp_path_factory.mktemp("sketch")
    corpus, _ = generate_corpus(300, seed=12, mean_words=80)
    table = odd_rows_table(corpus, np.arange(corpus.num_rows), ODD_ROWS)
    (root / "in").mkdir()
    pq.write_table(table.slice(0, 150), root / "in" / "part-0.parquet")
    pq.write_table(table.slice(150), root / "in" / "part-1.parquet")
    reports = {}
    for variant, (method, pairs) in VARIANTS.items():
        config = build_config(options={"method": method})
        for way in WAYS:
            out = root / f"out-{variant}-{way}"
            execution = placed(sketch=way, pairs=pairs)
            reports[variant, way] = run(
                spark, str(root / "in"), str(out), config, execution=execution
            )
            ran(reports[variant, way], sketch=way, pairs=pairs)
    return {"root": root, "reports": reports}


@pytest.mark.parametrize("way", ["driver", "tasks"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_each_pass_equals_sparks_read(runs, variant, way):
    """The pass here, or in tasks that read their row groups with PyArrow (no text through the
    JVM): the outputs and counts of the pass after Spark's own read."""
    root, reports = runs["root"], runs["reports"]
    ours, by_spark = reports[variant, way], reports[variant, "spark"]
    assert ours["counts"] == by_spark["counts"]
    for name in OUTPUTS:
        got = canonical(read(root / f"out-{variant}-{way}" / name))
        assert got.equals(canonical(read(root / f"out-{variant}-spark" / name))), name
    assert ("sketch" in ours["stages_on_driver"]) == (way == "driver")
    assert "sketch" not in by_spark["stages_on_driver"]


def test_the_odd_rows_are_counted_and_planted_pairs_found(runs):
    assert_odd_counts(runs["reports"]["minhash", "driver"]["counts"])
    assert runs["reports"]["minhash", "driver"]["counts"]["near_pairs"] > 0


def test_a_run_all_here_equals_the_spark_stages(runs):
    """Pass, pairs (from the texts read here) and members all in this process: the outputs of
    the Spark read and stages, and no stage result kept for the components."""
    root, reports = runs["root"], runs["reports"]
    here, spark_stages = reports["minhash", "driver"], reports["spark-stages", "spark"]
    ran(here, sketch="driver", pairs="driver", components="driver")
    ran(spark_stages, sketch="spark", pairs="spark", components="single_task")
    assert here["stages_on_driver"] == ["sketch", "exact", "candidates", "verify", "components"]
    assert here["components"] == {"strategy": "driver", "rounds": 0}
    assert spark_stages["stages_on_driver"] == []
    assert here["counts"] == spark_stages["counts"]
    for name in OUTPUTS:
        ours = canonical(read(root / "out-minhash-driver" / name))
        assert ours.equals(canonical(read(root / "out-spark-stages-spark" / name))), name


@pytest.mark.parametrize("way", WAYS)
def test_bad_ids_are_refused_alike(spark, tmp_path, way):
    (tmp_path / "in").mkdir()
    ids = pa.array([1, 2, 2, 3, 3], pa.int64())
    texts = [f"{WORDS} {i}" for i in range(5)]
    pq.write_table(pa.table({"id": ids, "text": texts}), tmp_path / "in" / "p.parquet")
    with pytest.raises(UserError) as caught:
        run(
            spark,
            str(tmp_path / "in"),
            str(tmp_path / "out"),
            build_config(),
            execution=placed(sketch=way),
        )
    assert str(caught.value) == "ids in column 'id' are not unique: 2 (2x), 3 (2x)"


def sketch_choice(spark, path, settings: ExecutionSettings, max_rows: int = 0) -> Choice:
    """The plan's choice for the pass over the input at ``path``, from its listing and footers."""
    facts = gather_facts(spark, list_input(spark, CorpusSource(str(path))), ("id", "text"))
    return decide_sketch(facts, settings, max_rows)


def test_which_inputs_may_be_read_here(spark, runs, tmp_path):
    """Local Parquet within the bytes and rows asked for is read here; larger, by tasks that
    read their row groups; JSON lines, a file without the text column, or the setting at 0:
    Spark's read."""
    parquet, settings = runs["root"] / "in", ExecutionSettings()
    rows = runs["reports"]["minhash", "spark"]["counts"]["input_rows"]
    assert sketch_choice(spark, parquet, settings).where == "driver"
    assert sketch_choice(spark, parquet, settings, max_rows=rows).where == "driver"
    fewer = sketch_choice(spark, parquet, settings, max_rows=rows - 1)
    assert fewer.where == "tasks" and f"{rows:,} docs > nightly_driver_max_docs" in fewer.why
    small = dataclasses.replace(settings, driver_read_max_bytes=1)
    assert sketch_choice(spark, parquet, small).where == "tasks"
    off = sketch_choice(spark, parquet, dataclasses.replace(settings, driver_read_max_bytes=0))
    assert off.where == "spark" and off.feasible == WAYS
    (tmp_path / "rows.jsonl").write_text('{"id": "a", "text": "x"}\n')
    jsonl = sketch_choice(spark, tmp_path / "rows.jsonl", settings)
    assert jsonl.where == "spark" and jsonl.feasible == ("spark",)
    pq.write_table(pa.table({"id": ["a"], "body": ["x"]}), tmp_path / "no-text.parquet")
    no_text = sketch_choice(spark, tmp_path / "no-text.parquet", settings)
    assert no_text.where == "spark" and "lacks the id or text column" in no_text.why
