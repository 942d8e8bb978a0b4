"""Resumable runs through ``run()``: a run stopped after a stage is resumed from its kept
results with the outputs of an uninterrupted run, whichever implementation kept them (the pass
here, in tasks or after Spark's read) and whatever the execution settings of the rerun; other
input or config, or ``resume=False``, start afresh and say why. (The command line's SIGKILL
case is in tests/cli/test_dedupe.py.)"""

from __future__ import annotations

import json

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.config import ExecutionSettings, build_config
from neardup_spark.io.filesystem import LocalStorage
from neardup_spark.io.ownership import read_ownership, write_ownership
from neardup_spark.pipeline import resume
from neardup_spark.pipeline.dedupe import run
from neardup_spark.quality.generate import generate_corpus
from tests.plans import SPARK_STAGES, placed, ran

OUTPUTS = ("clusters", "pairs", "deduplicated")


def config(**options):
    return build_config(options=options)


def run_stages(*args, **kwargs):
    """``run()`` with every pair stage a Spark stage, each kept: a run this small finds its
    pairs on the driver by default, and those stages are not kept (tested below)."""
    report = run(*args, execution=kwargs.pop("execution", SPARK_STAGES), **kwargs)
    ran(report, pairs="spark")
    return report


class Crash(Exception):
    """Stands for a kill at a stage's end (the CLI test kills the process for real)."""


def table_of(path) -> list:
    rows = ds.dataset(str(path)).to_table().to_pylist()
    return sorted(tuple(r.values()) for r in rows)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    table, _ = generate_corpus(600, seed=4, mean_words=80)
    root = tmp_path_factory.mktemp("resume-in")
    pq.write_table(table.slice(0, 300), root / "part-0.parquet")
    pq.write_table(table.slice(300), root / "part-1.parquet")
    return root


@pytest.fixture(scope="module")
def uninterrupted(spark, corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("resume-out") / "whole"
    report = run_stages(spark, str(corpus), str(out), config())
    return out, report


def run_killed_after(monkeypatch, stage: str, *args, execution=SPARK_STAGES) -> None:
    """``run(*args)`` stopped right after ``stage`` finished, as a kill there would stop it."""

    def pause(point: str) -> None:
        if point == f"after_{stage}":
            raise Crash(point)

    with monkeypatch.context() as patched:
        patched.setattr(resume, "pause_if_asked", pause)
        with pytest.raises(Crash):
            run(*args, execution=execution)


def staged_run(out):
    """The one unfinished run's directory under ``out/_staging``."""
    (run_dir,) = (out / "_staging").iterdir()
    return run_dir


def staged_markers(out) -> list[str]:
    return sorted(p.stem for p in (staged_run(out) / "stages").glob("*.json"))


def moved_by_a_killed_commit(out, run_dir, files) -> None:
    """What a commit killed while it moved ``files`` (under the staged run ``run_dir``) into
    OUTPUT leaves: the files listed in OUTPUT's ownership record first, then moved."""
    record = read_ownership(LocalStorage(), str(out))
    assert record is not None
    moved = [f.relative_to(run_dir).as_posix() for f in files]
    record.files |= set(moved)
    write_ownership(LocalStorage(), str(out), record)
    for rel in moved:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / rel).rename(out / rel)


@pytest.mark.parametrize("stage", ["candidates", "components"])
def test_a_run_stopped_after_a_stage_resumes_with_the_same_outputs(
    spark, corpus, uninterrupted, tmp_path, monkeypatch, stage
):
    whole, whole_report = uninterrupted
    finished = list(resume.STAGES[: resume.STAGES.index(stage) + 1])
    out = tmp_path / "out"
    run_killed_after(monkeypatch, stage, spark, str(corpus), str(out), config())
    assert staged_markers(out) == sorted(finished)
    assert not (out / "_SUCCESS").exists()
    report = run_stages(spark, str(corpus), str(out), config())
    assert report["resumed_stages"] == finished
    assert report["resume"]["started_afresh"] == []
    assert report["run_id"] == whole_report["run_id"]  # same input and config, same id
    assert set(finished).isdisjoint(report["stage_seconds"])
    assert "write" in report["stage_seconds"]
    assert report["counts"] == whole_report["counts"]
    for name in OUTPUTS:
        assert table_of(out / name) == table_of(whole / name), name
    saved = json.loads((out / "report.json").read_text())
    assert saved["resumed_stages"] == finished
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["resumed_stages"] == saved["resumed_stages"]
    assert not (out / "_staging").exists()  # committed: the kept stages are gone


def test_a_changed_config_starts_afresh_and_says_so(spark, corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    run_killed_after(monkeypatch, "sketch", spark, str(corpus), str(out), config())
    report = run_stages(spark, str(corpus), str(out), config(threshold=0.9))
    assert report["resumed_stages"] == []
    (why,) = report["resume"]["started_afresh"]
    assert "the config changed" in why and "input" not in why.split(":")[1]
    assert "sketch" in report["stage_seconds"]


def test_a_changed_input_starts_afresh_and_says_so(spark, corpus, tmp_path, monkeypatch):
    changed = tmp_path / "in"
    changed.mkdir()
    for part in corpus.iterdir():
        (changed / part.name).write_bytes(part.read_bytes())
    out = tmp_path / "out"
    run_killed_after(monkeypatch, "exact", spark, str(changed), str(out), config())
    table = pq.read_table(changed / "part-1.parquet")
    pq.write_table(table.slice(0, 200), changed / "part-1.parquet")  # 100 documents fewer
    report = run_stages(spark, str(changed), str(out), config())
    assert report["resumed_stages"] == []
    (why,) = report["resume"]["started_afresh"]
    assert "the input changed (1 file(s) added, removed or modified)" in why
    assert report["counts"]["input_rows"] == 500


def test_resume_false_starts_afresh(spark, corpus, uninterrupted, tmp_path, monkeypatch):
    whole, _ = uninterrupted
    out = tmp_path / "out"
    run_killed_after(monkeypatch, "verify", spark, str(corpus), str(out), config())
    assert staged_markers(out) == ["candidates", "exact", "sketch", "verify"]
    report = run_stages(spark, str(corpus), str(out), config(), resume=False)
    assert report["resumed_stages"] == []
    (why,) = report["resume"]["started_afresh"]
    assert why.startswith("--no-resume")
    for name in OUTPUTS:
        assert table_of(out / name) == table_of(whole / name), name


def test_components_are_done_again_when_a_killed_commit_moved_pairs_out(
    spark, corpus, uninterrupted, tmp_path, monkeypatch
):
    """pairs/ is staged with the components stage; a commit killed after moving it into OUTPUT
    leaves the marker without it: the rerun does the components (and pairs/) again."""
    whole, _ = uninterrupted
    out = tmp_path / "out"
    run_killed_after(monkeypatch, "components", spark, str(corpus), str(out), config())
    run_dir = staged_run(out)
    moved_by_a_killed_commit(out, run_dir, list((run_dir / "pairs").iterdir()))
    report = run_stages(spark, str(corpus), str(out), config())
    assert report["resumed_stages"] == ["sketch", "exact", "candidates", "verify"]
    for name in OUTPUTS:
        assert table_of(out / name) == table_of(whole / name), name


def test_a_small_run_keeps_the_per_document_pass_only(spark, corpus, tmp_path, monkeypatch):
    """On the driver, the pair stages and the components are redone by a rerun (they cost
    less than staging), the per-document pass is read back."""
    small, here = build_config(), ExecutionSettings()
    whole = run(spark, str(corpus), str(tmp_path / "whole"), small)
    ran(whole, sketch="driver", pairs="driver", components="driver")
    on_driver = ["sketch", "exact", "candidates", "verify", "components"]
    assert whole["stages_on_driver"] == on_driver
    out = tmp_path / "out"
    run_killed_after(monkeypatch, "sketch", spark, str(corpus), str(out), small, execution=here)
    assert staged_markers(out) == ["sketch"]
    report = run(spark, str(corpus), str(out), small)
    ran(report, sketch="driver", pairs="driver", components="driver")
    assert report["resumed_stages"] == ["sketch"]
    assert report["stages_on_driver"] == on_driver[1:]
    assert report["counts"] == whole["counts"]
    for name in OUTPUTS:
        assert table_of(out / name) == table_of(tmp_path / "whole" / name), name


def test_the_nightly_benchs_timed_full_runs_start_afresh(spark, corpus, tmp_path, monkeypatch):
    """A bench killed midway leaves a run's kept stages in its OUTPUT (here: a run stopped after
    candidates); the next bench's timed run of the same command must not resume from them (a
    1M full rerun "took" 48.6 s instead of ~100 that way)."""
    from neardup_spark.bench.nightly import full_run

    out = tmp_path / "out"
    run_killed_after(monkeypatch, "candidates", spark, str(corpus), str(out), config())
    assert staged_markers(out) == ["candidates", "exact", "sketch"]
    report = full_run(spark, str(corpus), str(out), config())
    assert report["resumed_stages"] == [] and "sketch" in report["stage_seconds"]


def test_a_kept_stage_with_a_file_gone_or_cut_off_is_done_again(
    spark, corpus, uninterrupted, tmp_path, monkeypatch
):
    """A kept result's files are checked against its marker before they are read back: one
    deleted (a clean-up) or cut off (a copy), and half of pairs/ moved out by a commit killed
    on an object store (whose directory rename moves file by file), make their stages be done
    again, with the uninterrupted run's outputs, instead of losing rows."""
    whole, whole_report = uninterrupted
    out = tmp_path / "out"
    run_killed_after(monkeypatch, "components", spark, str(corpus), str(out), config())
    run_dir = staged_run(out)
    sketch_files = sorted((run_dir / "stages" / "sketch").glob("part-*"))
    sketch_files[0].unlink()
    verify_file = sorted((run_dir / "stages" / "verify").glob("part-*"))[0]
    verify_file.write_bytes(verify_file.read_bytes()[:100])
    moved_by_a_killed_commit(out, run_dir, sorted((run_dir / "pairs").glob("part-*"))[:1])
    report = run_stages(spark, str(corpus), str(out), config())
    assert report["resumed_stages"] == ["exact", "candidates"]
    assert report["counts"] == whole_report["counts"]
    for name in OUTPUTS:
        assert table_of(out / name) == table_of(whole / name), name


def test_a_cut_off_run_file_or_marker_is_not_resumed_and_stops_nothing(
    spark, corpus, uninterrupted, tmp_path, monkeypatch
):
    """run.json and the markers are not written atomically (a full disk, a dying client): a
    cut-off one makes the rerun start afresh or do its stage again, not fail on every rerun."""
    whole, _ = uninterrupted
    out = tmp_path / "out"
    run_killed_after(monkeypatch, "exact", spark, str(corpus), str(out), config())
    run_dir = staged_run(out)
    (run_dir / "stages" / "exact.json").write_text('{"stage": "ex')
    report = run_stages(spark, str(corpus), str(out), config())
    assert report["resumed_stages"] == ["sketch"]
    run_killed_after(monkeypatch, "sketch", spark, str(corpus), str(tmp_path / "again"), config())
    run_dir = staged_run(tmp_path / "again")
    (run_dir / "run.json").write_text("")
    report = run_stages(spark, str(corpus), str(tmp_path / "again"), config())
    assert report["resumed_stages"] == []
    (why,) = report["resume"]["started_afresh"]
    assert "run.json is cut off" in why
    for name in OUTPUTS:
        assert table_of(tmp_path / "again" / name) == table_of(whole / name), name


@pytest.mark.parametrize("way", ["tasks", "spark"])
def test_a_sketch_kept_by_spark_tasks_is_resumed(
    spark, corpus, uninterrupted, tmp_path, monkeypatch, way
):
    """The per-document pass done by Spark tasks (reading their row groups, or after Spark's
    read), the run killed after it: the rerun reads that result back, with the outputs of an
    uninterrupted run (whose pass ran here)."""
    whole, whole_report = uninterrupted
    ran(whole_report, sketch="driver")
    execution = placed(sketch=way, pairs="spark")
    out = tmp_path / "out"
    run_killed_after(
        monkeypatch, "sketch", spark, str(corpus), str(out), config(), execution=execution
    )
    assert staged_markers(out) == ["sketch"]
    report = run_stages(spark, str(corpus), str(out), config(), execution=execution)
    ran(report, sketch=way, pairs="spark")
    assert report["resumed_stages"] == ["sketch"] and "sketch" not in report["stage_seconds"]
    assert report["run_id"] == whole_report["run_id"]
    assert report["counts"] == whole_report["counts"]
    for name in OUTPUTS:
        assert table_of(out / name) == table_of(whole / name), name


def test_execution_settings_keep_the_run_id_and_a_run_resumes_under_others(
    spark, corpus, uninterrupted, tmp_path, monkeypatch
):
    """Where the steps run is no part of the run id: a run killed with its pairs found by the
    Spark stages resumes with the default settings (its pairs then found here), and one
    killed with the default settings resumes with the pairs as Spark stages; the outputs are
    an uninterrupted run's."""
    whole, whole_report = uninterrupted
    here, stages = ExecutionSettings(), ExecutionSettings(driver_max_docs=0)
    for killed_under, rerun_under, pairs in ((stages, here, "driver"), (here, stages, "spark")):
        out = tmp_path / f"out-{pairs}"
        run_killed_after(
            monkeypatch, "sketch", spark, str(corpus), str(out), config(), execution=killed_under
        )
        report = run(spark, str(corpus), str(out), config(), execution=rerun_under)
        ran(report, pairs=pairs)
        assert report["plan"]["pairs"]["why"] != "given"
        assert report["run_id"] == whole_report["run_id"]
        assert report["resumed_stages"] == ["sketch"]
        assert report["resume"]["started_afresh"] == []
        assert report["counts"] == whole_report["counts"]
        for name in OUTPUTS:
            assert table_of(out / name) == table_of(whole / name), name
