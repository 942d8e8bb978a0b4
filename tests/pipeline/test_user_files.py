"""Every command that writes deletes or replaces only what it can prove it wrote: a user's
files under every name the job uses, in OUTPUT, in `--output-table`'s OUTPUT and in the index,
before a run and after a killed one, stop the run by name (exit 2) and stay as they were; the
index keeps them and goes on. (Ingest: tests/ingest/test_job.py; generate:
tests/quality/test_generate.py; the record itself: tests/io/test_ownership.py.)"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from neardup_spark.config import build_config
from neardup_spark.errors import UserError
from neardup_spark.nightly import run as nightly_run
from neardup_spark.nightly.run import run_incremental
from neardup_spark.pipeline import resume
from neardup_spark.pipeline.boilerplate import run_boilerplate
from neardup_spark.pipeline.dedupe import run
from neardup_spark.pipeline.tables import OutputTables
from neardup_spark.quality.generate import generate_corpus
from tests.io.test_ownership import USER_FILES, place, snapshot
from tests.plans import SPARK_STAGES, ran

# In OUTPUT: every name a run writes or removes, but the ownership record (a foreign record
# is its own test) and a killed run's own staging.
OUTPUT_FILES = [f for f in USER_FILES if not f.startswith(("_neardup", "_staging/abc"))]
INDEX_FILES = ["segments/notes.txt", "batches/readme.md", "_commits/mine", "v000007-cafe/x"]


class Crash(Exception):
    """Stands for a kill at a point of the run (tests/cli kills processes for real)."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    table, _ = generate_corpus(200, seed=3, mean_words=60)
    root = tmp_path_factory.mktemp("user-files-in")
    pq.write_table(table, root / "part-0.parquet")
    return root


def commands(spark, corpus: Path, tmp: Path) -> dict:
    """Each command that writes an OUTPUT, as a call on OUTPUT."""
    config = build_config()
    return {
        "dedupe": lambda out, **kw: run(spark, str(corpus), out, config, **kw),
        "output-table": lambda out, **kw: run(
            spark, str(corpus), out, config, tables=OutputTables("user_files_t", True), **kw
        ),
        "nightly": lambda out, **kw: run_incremental(
            spark, str(corpus), out, str(tmp / "index"), config, **kw
        ),
        "boilerplate": lambda out, **kw: run_boilerplate(spark, str(corpus), out, config, **kw),
    }


@pytest.mark.parametrize("command", ["dedupe", "output-table", "nightly", "boilerplate"])
def test_every_command_refuses_an_output_holding_a_users_files(spark, corpus, tmp_path, command):
    out = tmp_path / "out"
    for rel in OUTPUT_FILES:
        place(out, rel)
    before = snapshot(out)
    call = commands(spark, corpus, tmp_path)[command]
    for overwrite in (False, True):
        with pytest.raises(UserError, match="did not write") as refused:
            call(str(out), overwrite=overwrite)
        assert "_SUCCESS, _checkpoints/, _staging/, changed_clusters/" in str(refused.value)
        assert "(and 2 more)" in str(refused.value)  # report.html, report.json
    assert snapshot(out) == before
    assert not (tmp_path / "index").exists() or not any((tmp_path / "index").iterdir())


def test_a_killed_run_then_a_users_file_then_the_rerun(spark, corpus, tmp_path, monkeypatch):
    """A dedupe killed after a stage: the rerun resumes it, but not past a file the user put
    into its OUTPUT meanwhile; with the file gone, it finishes."""
    out = tmp_path / "out"
    config, stages = build_config(), SPARK_STAGES  # the pair stages kept: resumable

    def killed(point: str) -> None:
        if point == "after_candidates":
            raise Crash(point)

    with monkeypatch.context() as patched:
        patched.setattr(resume, "pause_if_asked", killed)
        with pytest.raises(Crash):
            run(spark, str(corpus), str(out), config, execution=stages)
    for rel in OUTPUT_FILES:
        place(out, rel)
        before = snapshot(out)
        with pytest.raises(UserError, match=f"did not write: {rel.split('/')[0]}"):
            run(spark, str(corpus), str(out), config, overwrite=True, execution=stages)
        assert snapshot(out) == before
        (out / rel).unlink()
        if "/" in rel and not any((out / rel).parent.iterdir()):
            (out / rel).parent.rmdir()
    report = run(spark, str(corpus), str(out), config, execution=stages)
    ran(report, pairs="spark")
    assert report["resumed_stages"] == ["sketch", "exact", "candidates"]
    assert (out / "_SUCCESS").exists()


def test_a_users_files_in_the_index_stay_through_nights_and_kills(
    spark, corpus, tmp_path, monkeypatch
):
    """The index is the job's directory, but what a user put there is not the job's: nights
    (one killed before its commit, whose debris the next collects) leave it as it was."""
    index = tmp_path / "index"
    config = build_config()
    run_incremental(spark, str(corpus), str(tmp_path / "night1"), str(index), config)
    for rel in INDEX_FILES:
        place(index, rel)

    def killed(point: str) -> None:
        if point == "before_index_commit":
            raise Crash(point)

    half = tmp_path / "half"
    pq.write_table(
        pq.read_table(corpus / "part-0.parquet").slice(0, 50), half.with_suffix(".parquet")
    )
    with monkeypatch.context() as patched:
        patched.setattr(nightly_run, "pause_if_asked", killed)
        with pytest.raises(Crash):
            run_incremental(spark, str(half) + ".parquet", str(tmp_path / "n2"), str(index), config)
    segments_after_kill = {p.name for p in (index / "segments").iterdir()}
    run_incremental(spark, str(half) + ".parquet", str(tmp_path / "n2"), str(index), config)
    for rel in INDEX_FILES:
        assert (index / rel).read_text() == "the user's own\n", rel
    # The killed night's segment went with the clean-up; the user's file did not.
    assert {p.name for p in (index / "segments").iterdir()} != segments_after_kill
    assert "notes.txt" in {p.name for p in (index / "segments").iterdir()}


def test_a_new_index_directory_holding_a_users_files_is_refused(spark, corpus, tmp_path):
    index = tmp_path / "index"
    for rel in INDEX_FILES:
        place(index, rel)
    before = snapshot(index)
    with pytest.raises(UserError, match="is not a neardup index"):
        run_incremental(spark, str(corpus), str(tmp_path / "out"), str(index), build_config())
    assert snapshot(index) == before
