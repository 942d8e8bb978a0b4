"""``neardup dedupe`` in its own process (own JVM): outputs, exit codes 0, 1 and 2, and SIGKILL
at known points (``spark-submit jobs/dedupe.py``: tests/runtime/test_standalone_cluster.py).
The runs a kill test compares with, and the reruns after a kill, run the command in this
process on the suite's session (:func:`here`): only what is killed needs a process of its
own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from neardup_spark.runtime.faults import FAIL_ONCE_ENV, PAUSE_AT_ENV, PAUSE_MARKER_ENV
from tests.plans import ran
from tests.spark_state import cli_on_session

REPO = Path(__file__).resolve().parents[2]
BASE = " ".join(f"word{i}" for i in range(50))
LOCAL = ("--master", "local[2]", "--set", "spark.sql.shuffle.partitions=2")


def neardup(
    *args: str, timeout: int = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "neardup_spark", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )


def here(spark, *args: str) -> tuple[int, str]:
    """``neardup ARGS`` in this process on the suite's session (its options other than the
    config's do not reach the session; results do not depend on them): (exit code, stdout)."""
    with cli_on_session(spark) as run, redirect_stdout(StringIO()) as printed:
        code = run(args)
    return code, printed.getvalue()


@pytest.fixture(scope="module")
def small_input(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "corpus.parquet"
    table = pa.table(
        {
            "id": ["a", "b", "c", "d"],
            "text": [BASE, BASE.replace("word20", "other"), "unrelated text " * 10, None],
            "url": ["u1", "u2", "u3", "u4"],
        }
    )
    pq.write_table(table, path)
    return path


@pytest.mark.slow
def test_dedupe_command_end_to_end(spark, small_input, tmp_path, capfd):
    out = tmp_path / "out"
    done = neardup(
        "dedupe",
        str(small_input),
        str(out),
        "--master",
        "local[2]",
        "--set",
        "spark.sql.shuffle.partitions=2",
    )
    assert done.returncode == 0, done.stderr
    assert "documents in      4" in done.stdout and "clusters          3" in done.stdout
    assert "docs/s" in done.stdout and str(out) in done.stdout
    clusters = ds.dataset(str(out / "clusters")).to_table().to_pylist()
    assert {r["doc_id"]: r["cluster_id"] for r in clusters} == {
        "a": "a",
        "b": "a",
        "c": "c",
        "d": "d",
    }
    report = json.loads((out / "report.json").read_text())
    assert report["config"]["master"] == "local[2]"
    # report.html: written after the run, with its sections and the run's numbers
    page = (out / "report.html").read_text()
    assert f"report            {out / 'report.html'}" in done.stdout
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    for needle in ('id="summary"', 'id="clusters"', "data:image/png;base64,"):
        assert needle in page, needle
    # A finished output is refused without --overwrite: exit 2, one line, no traceback (in
    # this process: the refusal comes before any Spark work).
    capfd.readouterr()
    assert here(spark, "dedupe", str(small_input), str(out), "--master", "local[2]")[0] == 2
    err = capfd.readouterr().err
    assert "already holds a finished run" in err and "Traceback" not in err


@pytest.mark.slow
def test_user_errors_exit_2_without_traceback(spark, small_input, tmp_path, capfd):
    """A missing column (found once Spark read the input: the command in this process, on the
    suite's session; a user error in a process of its own and its JVM's stderr:
    test_user_errors.py), then mistakes of the command line, each in a process of its own."""
    capfd.readouterr()
    code, _ = here(spark, "dedupe", str(small_input), str(tmp_path / "o"), "--text-col", "body")
    err = capfd.readouterr().err
    assert code == 2
    assert "'body' is not in the input" in err and "url (string)" in err
    assert "Traceback" not in err
    bad_arg = neardup("dedupe", str(small_input), str(tmp_path / "o"), "--threshold", "2")
    assert bad_arg.returncode == 2 and "threshold must be in (0, 1]" in bad_arg.stderr
    no_cmd = neardup("dedupe")
    assert no_cmd.returncode == 2 and "Traceback" not in no_cmd.stderr


def test_exact_method_end_to_end(spark, tmp_path):
    """--method exact: identical normalised texts (case, punctuation, spacing) form a cluster;
    a near-duplicate does not; pairs are exact copies with similarity 1 (the command in this
    process, on the suite's session)."""
    path = tmp_path / "in.parquet"
    pq.write_table(
        pa.table(
            {
                "id": ["a", "b", "c", "d"],
                "text": [BASE, BASE.upper() + " !", BASE.replace("word20", "other"), None],
            }
        ),
        path,
    )
    out = tmp_path / "out"
    assert here(spark, "dedupe", str(path), str(out), "--method", "exact", "--no-report")[0] == 0
    rows = ds.dataset(str(out / "clusters")).to_table().to_pylist()
    clusters = {r["doc_id"]: r["cluster_id"] for r in rows}
    assert clusters == {"a": "a", "b": "a", "c": "c", "d": "d"}
    pairs = ds.dataset(str(out / "pairs")).to_table().to_pylist()
    assert [(p["doc_a"], p["doc_b"], p["method"], p["similarity"]) for p in pairs] == [
        ("a", "b", "exact", 1.0)
    ]
    report = json.loads((out / "report.json").read_text())
    assert report["counts"]["exact_copies"] == 1 and report["counts"]["candidate_pairs"] == 0


@pytest.mark.slow
def test_a_job_failure_exits_1_and_commits_nothing(small_input, tmp_path):
    """A task that fails with no retry left (local[2] allows one attempt) fails the job: exit 1,
    the error logged with its traceback, OUTPUT not marked finished. The per-document pass is
    given to Spark, so the failing batch is a Spark task's (in a Python worker), not a driver
    thread's."""
    out = tmp_path / "out"
    env = {FAIL_ONCE_ENV: str(tmp_path / "marker")}
    args = ("--no-report", "--explain-plan", "--set", "plan.sketch=spark", *LOCAL)
    failed = neardup("dedupe", str(small_input), str(out), *args, env=env)
    assert failed.returncode == 1
    assert "sketch: spark (given)" in failed.stderr
    assert "the job failed" in failed.stderr and "injected task failure" in failed.stderr
    assert "PythonException" in failed.stderr or "Python worker" in failed.stderr
    assert not (out / "_SUCCESS").exists()


def start_paused(args: tuple[str, ...], point: str, marker: Path) -> subprocess.Popen:
    """``neardup ARGS`` in its own process group, holding at ``point`` (runtime/faults.py)."""
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        PAUSE_AT_ENV: point,
        PAUSE_MARKER_ENV: str(marker),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "neardup_spark", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def kill_when_paused(proc: subprocess.Popen, marker: Path, timeout: float = 300) -> None:
    """SIGKILL the whole process group once the run holds at its pause point."""
    deadline = time.monotonic() + timeout
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), f"the run never reached its pause point (exit {proc.poll()})"
    assert proc.poll() is None  # still running, held at the point
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL


def table_of(out: Path, name: str) -> list:
    rows = ds.dataset(str(out / name)).to_table().to_pylist()
    return sorted(tuple(r.values()) for r in rows)


@pytest.fixture(scope="module")
def uninterrupted(spark, tmp_path_factory) -> dict:
    """One generated corpus and one uninterrupted ``--no-resume`` run of it (on the suite's
    session), shared by the kill tests below: its OUTPUT (each test works on a copy), its
    tables and its counts."""
    from neardup_spark.quality.generate import generate_corpus

    root = tmp_path_factory.mktemp("uninterrupted")
    table, _ = generate_corpus(400, seed=2, mean_words=100)
    pq.write_table(table, root / "in.parquet")
    out = root / "out"
    code, _ = here(
        spark, "dedupe", str(root / "in.parquet"), str(out), "--no-report", *LOCAL, "--no-resume"
    )
    assert code == 0
    report = json.loads((out / "report.json").read_text())
    assert report["resumed_stages"] == []  # --no-resume: started afresh
    tables = {name: table_of(out, name) for name in ("clusters", "pairs", "deduplicated")}
    assert tables["pairs"]  # there are pairs to get wrong
    return {
        "input": root / "in.parquet",
        "out": out,
        "tables": tables,
        "counts": report["counts"],
        "plan": report["plan"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("point", ["before_commit", "in_commit"])
def test_a_killed_rerun_then_a_rerun(spark, uninterrupted, tmp_path, point):
    """SIGKILL at a known point of a rerun with --overwrite. Before its commit: the previous
    output is intact and still finished. During its commit: OUTPUT is not marked finished.
    Either way the next run completes with the same results and leaves no debris."""
    out = tmp_path / "out"
    shutil.copytree(uninterrupted["out"], out)  # a finished run's OUTPUT
    args = ("dedupe", str(uninterrupted["input"]), str(out), "--no-report", *LOCAL)
    before = uninterrupted["tables"]
    marker = tmp_path / "paused"
    kill_when_paused(start_paused((*args, "--overwrite"), point, marker), marker)
    assert (out / "_staging").is_dir()  # the killed run's debris
    if point == "before_commit":
        assert (out / "_SUCCESS").exists()
        assert {name: table_of(out, name) for name in before} == before
        assert here(spark, *args)[0] == 2  # still finished: refused without --overwrite
    else:
        assert not (out / "_SUCCESS").exists() and not (out / "clusters").exists()
    assert here(spark, *args, "--overwrite")[0] == 0
    assert not (out / "_staging").exists() and (out / "_SUCCESS").exists()
    assert {name: table_of(out, name) for name in before} == before


@pytest.mark.slow
def test_a_run_killed_after_candidates_resumes(spark, uninterrupted, tmp_path):
    """SIGKILL once the candidates stage is kept: the rerun of the same command reads back the
    three finished stages (and says so), and its outputs equal an uninterrupted run's (the
    module's --no-resume run of the same input, its pairs found on the driver; here every
    stage is a kept Spark stage)."""
    out = tmp_path / "out"
    args = ("dedupe", str(uninterrupted["input"]), str(out), "--no-report", *LOCAL)
    args += ("--set", "plan.pairs=spark")
    marker = tmp_path / "paused"
    kill_when_paused(start_paused(args, "after_candidates", marker), marker)
    (run_dir,) = (out / "_staging").iterdir()
    kept = sorted(p.name for p in (run_dir / "stages").glob("*.json"))
    assert kept == ["candidates.json", "exact.json", "sketch.json"]
    code, printed = here(spark, *args)
    assert code == 0
    assert "resumed           sketch, exact, candidates" in printed
    report = json.loads((out / "report.json").read_text())
    assert report["resumed_stages"] == ["sketch", "exact", "candidates"]
    ran(report, pairs="spark")
    ran(uninterrupted, pairs="driver")
    outputs = {name: table_of(out, name) for name in ("clusters", "pairs", "deduplicated")}
    assert outputs == uninterrupted["tables"]
    assert report["counts"] == uninterrupted["counts"]
